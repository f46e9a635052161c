"""Study: how CNMF-SPA chooses the split of the variables (Ibrahim & Fu, Alg. 2).

CNMF-SPA needs a split S1 | S2 of the variables; the paper fixes ``M = 3``
(``S1 = {1, 2, 3}``). bayespmf chooses the split from the data by a parametric
bootstrap of the marginals (``bayespmf.kernels.cnmf_spa``). This study compares, on
the generators of the paper's Tables 1 and 4 (as the authors' code draws them:
``_cnmf_synthetic.setting``), the bootstrap rule, the misfit to all pairs over the
same candidates, the rule used before issue 15 (misfit over 12 balanced splits) and
the paper's fixed split, by factor MSE (``getMSE_nomre.m``) and time per fit. The
Table 1 generator is run at the separability the authors' code builds for the stated
epsilon = 0.1 (delta = 0.0005, i.e. epsilon ~ 0.0056) and at the Definition-1 value
0.1 itself. The paper's tables themselves are reproduced by ``paper_cnmf.py``.

Usage::

    python benchmarks/cnmf_spa_splits.py --trials 5 --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _cnmf_synthetic import PUBLISHED, code_epsilon
from _common import parse_args_quick

from bayespmf.datasets import make_latent_class
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.marginals import pairwise_marginals
from bayespmf.metrics import factor_mse

PAPER_SIZES = [10**3, 10**4, 10**5, 10**6]
T1_RANK = 5
CODE_EPSILON = code_epsilon(0.1, T1_RANK)


def paper_value(table, size):
    values = PUBLISHED[table]["MSE"]["cnmf-spa"]
    return values[PAPER_SIZES.index(size)] if size in PAPER_SIZES else float("nan")


# ------------------------------------------------------------------ CNMF-SPA's split
def _t1_data(size, seed, epsilon):
    return make_latent_class(
        size,
        10,
        T1_RANK,
        0.5,
        n_variables=5,
        factor_prior="separable",
        epsilon=epsilon,
        split=3,
        random_state=seed,
    )


def _t4_data(size, seed):
    return make_latent_class(
        size, 10, 10, 0.5, n_variables=15, factor_prior="row-dirichlet", random_state=seed
    )


def _fmt_split(split):
    s1, s2 = split
    return (
        "{"
        + ",".join(str(v + 1) for v in s1)
        + "}|{"
        + ",".join(str(v + 1) for v in s2)
        + "}"
    )


def _former_rule(m, n_components, seed, n_splits=4):
    """The split rule before issue 15: the least misfit among 12 balanced splits.

    Contiguous halves (the first of tied cuts, so M = 2 at N = 5), even/odd
    interleaving and ``n_splits`` random balanced orders, both orientations; the
    random orders are drawn as the former ``cnmf_spa(random_state=seed)`` drew them.
    """
    n_cat = m.n_categories
    rng = np.random.default_rng(seed)

    def balanced(order):
        csum = np.cumsum(n_cat[order])
        cut = int(np.argmin(np.abs(csum[:-1] - csum[-1] / 2))) + 1
        return tuple(sorted(order[:cut].tolist())), tuple(sorted(order[cut:].tolist()))

    n_vars = n_cat.size
    parts = [balanced(np.arange(n_vars))]
    parts.append((tuple(range(0, n_vars, 2)), tuple(range(1, n_vars, 2))))
    parts += [balanced(rng.permutation(n_vars)) for _ in range(n_splits)]
    best = None
    for s1, s2 in parts:
        for cand in ((s1, s2), (s2, s1)):
            est, info = cnmf_spa(m, n_components, split=cand)
            if best is None or info["misfit"] < best[1]["misfit"]:
                best = (est, info)
    return best


def run_splits(args):
    """CNMF-SPA: the split chosen from the data vs the paper's fixed split."""
    generators = [
        ("T1 eps=0.1 (formula)", lambda n, s: _t1_data(n, s, 0.1), 5, [0, 1, 2]),
        (
            f"T1 eps={CODE_EPSILON:.4f} (code's delta)",
            lambda n, s: _t1_data(n, s, CODE_EPSILON),
            5,
            [0, 1, 2],
        ),
        ("T4 N=15 row-Dirichlet", _t4_data, 10, [0, 1, 2]),
    ]
    variants = [
        "bootstrap (ours)",
        "misfit, same candidates",
        "former rule (misfit, 12 balanced)",
        "fixed M=3 (paper)",
    ]
    print(
        "\nCNMF-SPA split (issue 15): factor MSE mean ± sd over "
        f"{args.trials} seeds; splits 1-based, the most frequent choice (count)"
    )
    print("| generator | S | variant | MSE | split chosen | s/fit | paper |")
    print("|---|---|---|---|---|---|---|")
    for name, make, n_components, fixed_s1 in generators:
        for size in args.sizes:
            rows = {v: {"mse": [], "split": [], "time": []} for v in variants}
            for t in range(args.trials):
                seed = 1000 * t + 7
                data, truth = make(size, seed)
                m = pairwise_marginals(data)
                fixed = (
                    fixed_s1,
                    [v for v in range(m.n_categories.size) if v not in fixed_s1],
                )
                for v in variants:
                    t0 = time.perf_counter()
                    if v.startswith("former"):
                        est, info = _former_rule(m, n_components, seed)
                    else:
                        kw = {
                            "bootstrap (ours)": {},
                            "misfit, same candidates": {"selection": "misfit"},
                            "fixed M=3 (paper)": {"split": fixed},
                        }[v]
                        est, info = cnmf_spa(m, n_components, random_state=seed, **kw)
                    rows[v]["time"].append(time.perf_counter() - t0)
                    rows[v]["mse"].append(
                        factor_mse(est.weights, est.factors, truth.weights, truth.factors)
                    )
                    rows[v]["split"].append(_fmt_split(info["split"]))
            table = "Table 1" if name.startswith("T1") else "Table 4"
            paper = f"{paper_value(table, size):.4f}"
            for v in variants:
                r = rows[v]
                mse = np.asarray(r["mse"])
                values, counts = np.unique(r["split"], return_counts=True)
                top = values[np.argmax(counts)]
                print(
                    f"| {name} | {size:.0e} | {v} | {mse.mean():.5f} ± {mse.std():.5f} | "
                    f"{top} ({counts.max()}/{len(mse)}) | {np.mean(r['time']):.2f} | "
                    f"{paper} |",
                    flush=True,
                )
    print(
        "Paper: Table 1/4 CNMF-SPA (the published Table 1 MSE stops near 0.02 for "
        "every method, so only the order of magnitude compares; paper_cnmf.py runs "
        "the authors' code beside it). The fixed split is the generator's own: its "
        "anchor rows are in S2 = {4, 5} by construction."
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10**4, 10**5])
    args = parse_args_quick(ap, argv, trials=1, sizes=[1000])
    t0 = time.perf_counter()
    run_splits(args)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
