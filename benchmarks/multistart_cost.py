"""How to make many starts cheap: sequential refinement vs batched exploration + pruning.

For each data set, ``method="auto"``'s starts (CNMF-SPA, row seeds, uniform random) are
run three ways in the same process:

* **sequential**: every start refined by SQUAREM-PMF to ``tol`` one after the other (the
  plain multi-start of poLCA / StepMix);
* **batched, all refined**: the same, but the 20 exploration cycles run for all starts
  in one batched numba E-step before each start is refined (what batching alone buys);
* **batched + pruned** (the default): exploration, then only the best 10 % refined.

It prints the wall time, the best log-likelihood, and whether each variant reached the
best of the three (to 0.01). Run: ``python benchmarks/multistart_cost.py [--n-init 100]``.

``--collapse`` instead times the default fit with duplicate rows collapsed into weighted
response patterns (the default, when the patterns number at most COLLAPSE_MAX_SHARE of
the rows) against the same fit on the expanded rows, same seed, same run.
"""

import argparse
import time
import warnings

import numpy as np
from _common import parse_args_quick

from bayespmf.datasets import load_car, load_votes, make_latent_class
from bayespmf.fit import source as fit_source
from bayespmf.fit.defaults import DEFAULT_TOL
from bayespmf.fit.latent_class import fit_latent_class
from bayespmf.fit.multistart import multistart
from bayespmf.fit.source import as_source


def cases():
    car, _ = load_car()
    votes, _ = load_votes()
    binary, _ = make_latent_class(500, [2] * 10, n_components=4, random_state=3)
    return [("car F=4", car, 4), ("votes F=3", votes, 3), ("binary N=10 F=4", binary, 4)]


def run(source, n_components, n_init, **kw):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = multistart(
            source,
            n_components,
            n_init=n_init,
            max_iter=2000,
            tol=DEFAULT_TOL["auto"],
            random_state=0,
            **kw,
        )
    return time.perf_counter() - t0, fit.loglik, int(fit.optima["n_starts"].sum())


def collapse_cases():
    votes, _ = load_votes()
    survey, _ = make_latent_class(3000, [2, 3, 2, 3, 2, 2], n_components=3, random_state=0)
    binary, _ = make_latent_class(2000, [2] * 8, n_components=3, random_state=1)
    return [
        ("votes F=3", votes, 3),
        ("survey 3000 x 6 F=3", survey, 3),
        ("binary 2000 x 8 F=3", binary, 3),
    ]


def collapse():
    """Default fit on weighted unique patterns vs on the expanded rows."""
    print("| data | rows | patterns | collapsed s | expanded s | ratio | loglik diff |")
    print("|---|---|---|---|---|---|---|")
    share = fit_source.COLLAPSE_MAX_SHARE
    for name, data, n_components in collapse_cases():
        n_pat = np.unique(np.asarray(data.codes), axis=0).shape[0]
        times, lls = {}, {}
        for label, limit in (("collapsed", share), ("expanded", -1.0)):
            fit_source.COLLAPSE_MAX_SHARE = limit  # -1: never collapse
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit_latent_class(data, n_components, random_state=0, n_init=8)  # warm-up
                t0 = time.perf_counter()
                fit = fit_latent_class(data, n_components, random_state=0)
            times[label], lls[label] = time.perf_counter() - t0, fit.loglik
        fit_source.COLLAPSE_MAX_SHARE = share
        print(
            f"| {name} | {data.n_samples} | {n_pat} | {times['collapsed']:.2f} | "
            f"{times['expanded']:.2f} | {times['collapsed'] / times['expanded']:.2f} | "
            f"{lls['collapsed'] - lls['expanded']:.2e} |",
            flush=True,
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-init", type=int, default=100)
    ap.add_argument("--collapse", action="store_true")
    args = parse_args_quick(ap, None, n_init=4)
    if args.collapse:
        collapse()
        return
    print(f"n_init={args.n_init}; times in s (same process, warm caches)")
    print("| data | variant | refined | wall s | best loglik | reached best |")
    print("|---|---|---|---|---|---|")
    # --quick: the first case only (a smoke run of every variant)
    for name, data, n_components in cases()[: 1 if args.quick else None]:
        src = as_source(data, None)
        run(src, n_components, 4)  # warm-up: compile once
        rows = [
            ("sequential", run(src, n_components, args.n_init, explore_cycles=0)),
            (
                "batched, all refined",
                run(src, n_components, args.n_init, n_refine=args.n_init),
            ),
            ("batched + pruned (default)", run(src, n_components, args.n_init)),
        ]
        best = max(r[1][1] for r in rows)
        for label, (t, ll, nref) in rows:
            ok = "yes" if ll >= best - 0.01 else f"no ({best - ll:.2f} below)"
            print(f"| {name} | {label} | {nref} | {t:.2f} | {ll:.3f} | {ok} |")


if __name__ == "__main__":
    main()
