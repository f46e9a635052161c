"""Purification (Li, Liang & Risteski, Alg. 1): recovery error vs iterations and noise.

Data y = A* x* + nu from the paper's generative model (eq. (1)): A* with Uniform(0, 1)
entries and unit-l1 columns, x* of Assumption (A2') (x*_i = 1 w.p. s/n), warm start
A0 = A*(Sigma0 + E0) of Assumption (A3) with l = 0.1, and no / adversarial (N1) /
unbiased (N2) noise of level C_nu. Error: ||A_hat - A*||_1 (max column l1 norm) after
normalizing the columns of A_hat to unit l1 norm (the remark after Theorem 1), printed
at chosen iterations; Theorem 1 predicts a geometric decrease down to O(noise).

Usage::

    python benchmarks/purification_recovery.py --samples 20000 --features 40 --components 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import parse_args_quick

from bayespmf.datasets._simulate_nmf import make_purification_data
from bayespmf.fit.purification import purification


def err(a, truth) -> float:
    an = a / a.sum(axis=0)
    return float(np.abs(an - truth).sum(axis=0).max())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=20000)
    p.add_argument("--features", type=int, default=40, help="m")
    p.add_argument("--components", type=int, default=10, help="n")
    p.add_argument("--sparsity", type=float, default=2.0, help="s (x*_i = 1 w.p. s/n)")
    p.add_argument("--eta", type=float, default=0.3)
    p.add_argument("--alpha", type=float, default=0.2)
    p.add_argument("--iters", type=int, nargs="+", default=[0, 1, 2, 5, 10, 20, 40])
    p.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.005, 0.01, 0.02])
    p.add_argument("--pinv", default="min-inf", choices=["min-inf", "moore-penrose"])
    p.add_argument("--seed", type=int, default=0)
    args = parse_args_quick(p, argv, samples=2000, iters=[0, 1, 5], noise=[0.0, 0.01])
    print(
        f"S={args.samples} m={args.features} n={args.components} s={args.sparsity} "
        f"eta={args.eta} alpha={args.alpha} pinv={args.pinv}; error ||A_hat - A*||_1"
    )
    header = f"{'noise':<12}{'C_nu':>7}" + "".join(
        f"{'T=' + str(t):>9}" for t in args.iters
    )
    print(header + f"{'|nu|_1':>9}{'s':>7}")
    for kind in ("none", "adversarial", "unbiased"):
        for level in args.noise:
            if (kind == "none") != (level == 0.0):
                continue
            y, truth = make_purification_data(
                args.samples,
                args.features,
                args.components,
                sparsity=args.sparsity,
                noise=kind,
                noise_level=level,
                init_quality=0.1,
                random_state=args.seed,
            )
            t0 = time.perf_counter()
            row = []
            for t in args.iters:
                if t == 0:
                    row.append(err(truth.init, truth.components))
                    continue
                a, _ = purification(
                    y,
                    truth.init,
                    max_iter=t,
                    eta=args.eta,
                    alpha=args.alpha,
                    pinv_method=args.pinv,
                )
                row.append(err(a, truth.components))
            secs = time.perf_counter() - t0
            nu1 = float(np.abs(truth.noise).sum(axis=1).mean())
            print(
                f"{kind:<12}{level:>7.3f}"
                + "".join(f"{e:>9.4f}" for e in row)
                + f"{nu1:>9.3f}{secs:>7.1f}"
            )


if __name__ == "__main__":
    main()
