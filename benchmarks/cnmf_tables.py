"""Reproduce the synthetic-data tables of Ibrahim & Fu (CNMF paper): Tables 1, 4 and 6.

Table 1: N=5, F=5, I=10, p=0.5, epsilon-separable factors (epsilon=0.1, M=3): factor MSE
and joint-PMF MRE of CNMF-SPA, CNMF-OPT, CNMF-SPA-EM and RAND-EM for S = 1e3 ... 1e5.
Table 4: N=15, F=10, I=10, p=0.5, uniform random factors: factor MSE.
Table 6: mean runtime per method at S=1e5 for [N, F, I] = [5, 5, 10] and [15, 10, 10].

Two re-examinations (issue 15), each selectable alone with ``--tables``:

``splits``: CNMF-SPA's split. The split CNMF-SPA chooses from the data (bootstrap rule,
the default), the former rule (misfit to all pairs) and the paper's fixed
``S1 = {1, 2, 3}`` on the Table 1 generator (anchor rows in S2, as the paper builds
them; epsilon = 0.1 by the Definition-1 formula and the authors' code's delta = 0.0005,
i.e. epsilon ~ 0.0056), and on the Table 4 generator (N=15) against the authors' M=3.

``opt4``: Table 4 (N=15) under the authors' protocol. Their script starts CNMF-OPT from
the CNMF-SPA factors (floored at 1e-6) and the *true* prior, runs at most 200 sweeps,
and stops EM (CNMF-SPA-EM, RAND-EM) after at most 30 iterations or when the factor MSE
against the *true* factors changes by less than 1e-6 relative. The last rule looks at
the truth, so it is reported as a measurement, not offered as a method.

Prints our means over trials next to the published numbers. Usage::

    python benchmarks/cnmf_tables.py --trials 20 --sizes 1000 10000 100000
    python benchmarks/cnmf_tables.py --tables splits --trials 5 --sizes 10000 100000
    python benchmarks/cnmf_tables.py --tables opt4 --trials 3 --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import parse_args_quick

from bayespmf import ConvergenceWarning
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.fit import LocalOptimumWarning
from bayespmf.fit.cnmf import cnmf_opt
from bayespmf.kernels.cnmf import cnmf_spa, pairwise_misfit
from bayespmf.marginals import pairwise_marginals
from bayespmf.metrics import factor_mse, joint_pmf_relative_error

METHODS = ["cnmf-spa", "cnmf-opt", "cnmf-spa-em", "em"]
LABEL = {
    "cnmf-spa": "CNMF-SPA",
    "cnmf-opt": "CNMF-OPT",
    "cnmf-spa-em": "CNMF-SPA-EM",
    "em": "RAND-EM",
    "auto": "default (multi-start MLE)",
}

# Published values (Ibrahim & Fu, Tables 1, 4, 6), S = 1e3, 1e4, 1e5, 1e6.
PAPER_T1_MSE = {
    "cnmf-spa": [0.0669, 0.0270, 0.0210, 0.0204],
    "cnmf-opt": [0.0519, 0.0242, 0.0210, 0.0204],
    "cnmf-spa-em": [0.0553, 0.0247, 0.0208, 0.0204],
    "em": [0.0734, 0.0317, 0.0289, 0.0336],
}
PAPER_T1_MRE = {
    "cnmf-spa": [0.7965, 0.3321, 0.1052, 0.0346],
    "cnmf-opt": [0.6746, 0.2327, 0.0721, 0.0239],
    "cnmf-spa-em": [0.6788, 0.2341, 0.0664, 0.0219],
    "em": [0.8078, 0.2820, 0.1845, 0.2610],
}
PAPER_T4_MSE = {
    "cnmf-spa": [0.1183, 0.1030, 0.1063, 0.1041],
    "cnmf-opt": [0.0218, 0.0042, 0.0022, 0.0020],
    "cnmf-spa-em": [0.0894, 0.0110, 0.0056, 0.0018],
    "em": [0.0376, 0.0112, 0.0149, 0.0069],
}
PAPER_T6 = {
    "cnmf-spa": [0.139, 0.865],
    "cnmf-opt": [1.633, 94.931],
    "cnmf-spa-em": [0.490, 4.001],
    "em": [0.353, 3.217],
}
PAPER_SIZES = [10**3, 10**4, 10**5, 10**6]
# The paper stops iterative algorithms at a relative objective change below 1e-5
# (Sec. 5.1); we use the same tolerance.
PAPER_TOL = 1e-5

# CNMF-SPA on the Table 1 generator with the authors' MATLAB code (run under Octave
# next to bayespmf for issue 15; 3 trials): S = 1e4, 1e5.
AUTHORS_CODE_T1_SPA = {10**4: 0.0052, 10**5: 0.00047}
# The authors' generator (gen_PMF_factors_dirich_with_sep.m) maps epsilon = 0.1 to an
# off-diagonal anchor mass delta = 0.0005; with mu = 0.4 and F = 5 our generator's
# epsilon for that delta is t sqrt(F (F - 1)), t = delta / (mu + (F - 1) delta).
CODE_DELTA, ANCHOR_MU, T1_RANK = 0.0005, 0.4, 5
CODE_EPSILON = (
    CODE_DELTA / (ANCHOR_MU + (T1_RANK - 1) * CODE_DELTA) * np.sqrt(T1_RANK * (T1_RANK - 1))
)
# The authors' CNMF-OPT and EM protocol in their Table 4 script (main_synthetic1.m).
AUTHORS_OPT_SWEEPS, AUTHORS_OPT_TOL, AUTHORS_FLOOR = 200, 1e-6, 1e-6
AUTHORS_EM_ROUNDS, AUTHORS_EM_TOL = 30, 1e-6


def run_setting(setting, sizes, trials, seed, max_iter):
    rows = {m: {s: {"mse": [], "mre": [], "time": []} for s in sizes} for m in METHODS}
    rng = np.random.default_rng(seed)
    for s in sizes:
        for t in range(trials):
            trial_seed = int(rng.integers(2**31))
            if setting == "table1":
                data, truth = make_latent_class(
                    s,
                    10,
                    5,
                    0.5,
                    n_variables=5,
                    factor_prior="separable",
                    epsilon=0.1,
                    split=3,
                    random_state=trial_seed,
                )
            else:
                data, truth = make_latent_class(
                    s,
                    10,
                    10,
                    0.5,
                    n_variables=15,
                    factor_prior="uniform",
                    random_state=trial_seed,
                )
            for m in METHODS:
                if m == "auto":  # the package default, with its own tolerance
                    est = LatentClassPMF(truth.weights.size, random_state=trial_seed)
                else:
                    est = LatentClassPMF(
                        truth.weights.size,
                        method=m,
                        tol=PAPER_TOL,
                        max_iter=max_iter,
                        random_state=trial_seed,
                    )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    warnings.simplefilter("ignore", LocalOptimumWarning)
                    t0 = time.perf_counter()
                    est.fit(data)
                    elapsed = time.perf_counter() - t0
                r = rows[m][s]
                r["time"].append(elapsed)
                r["mse"].append(
                    factor_mse(est.weights_, est.factors_, truth.weights, truth.factors)
                )
                if setting == "table1":
                    r["mre"].append(
                        joint_pmf_relative_error(
                            (est.weights_, est.factors_), (truth.weights, truth.factors)
                        )
                    )
            mses = ", ".join(f"{m} {rows[m][s]['mse'][-1]:.4f}" for m in METHODS)
            print(f"  [{setting}] S={s} trial {t + 1}/{trials}: MSE {mses}", flush=True)
    return rows


def paper_value(table, m, s):
    if m not in table or s not in PAPER_SIZES:
        return float("nan")
    return table[m][PAPER_SIZES.index(s)]


def print_table(title, rows, sizes, key, paper):
    print(f"\n{title}")
    head = "| method | " + " | ".join(f"S={s:.0e} ours | paper" for s in sizes) + " |"
    print(head)
    print("|" + "---|" * (1 + 2 * len(sizes)))
    for m in METHODS:
        cells = []
        for s in sizes:
            v = np.asarray(rows[m][s][key])
            cells.append(f"{v.mean():.4f} ± {v.std():.4f} | {paper_value(paper, m, s):.4f}")
        print(f"| {LABEL[m]} | " + " | ".join(cells) + " |")


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
        size, 10, 10, 0.5, n_variables=15, factor_prior="uniform", random_state=seed
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


def _former_rule(m, rank, seed, n_splits=4):
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
            est, info = cnmf_spa(m, rank, split=cand)
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
        ("T4 N=15 uniform", _t4_data, 10, [0, 1, 2]),
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
    print(
        "| generator | S | variant | MSE | split chosen | s/fit | paper | authors' code |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, make, rank, fixed_s1 in generators:
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
                        est, info = _former_rule(m, rank, seed)
                    else:
                        kw = {
                            "bootstrap (ours)": {},
                            "misfit, same candidates": {"selection": "misfit"},
                            "fixed M=3 (paper)": {"split": fixed},
                        }[v]
                        est, info = cnmf_spa(m, rank, random_state=seed, **kw)
                    rows[v]["time"].append(time.perf_counter() - t0)
                    rows[v]["mse"].append(
                        factor_mse(est.weights, est.factors, truth.weights, truth.factors)
                    )
                    rows[v]["split"].append(_fmt_split(info["split"]))
            if name.startswith("T1"):
                paper = f"{paper_value(PAPER_T1_MSE, 'cnmf-spa', size):.4f}"
                code = AUTHORS_CODE_T1_SPA.get(size)
                code = f"{code:.2g}" if code is not None and "code" in name else "-"
            else:
                paper = f"{paper_value(PAPER_T4_MSE, 'cnmf-spa', size):.4f}"
                code = "-"
            for v in variants:
                r = rows[v]
                mse = np.asarray(r["mse"])
                values, counts = np.unique(r["split"], return_counts=True)
                top = values[np.argmax(counts)]
                print(
                    f"| {name} | {size:.0e} | {v} | {mse.mean():.5f} ± {mse.std():.5f} | "
                    f"{top} ({counts.max()}/{len(mse)}) | {np.mean(r['time']):.2f} | "
                    f"{paper} | {code} |",
                    flush=True,
                )
    print(
        "Paper: Table 1/4 CNMF-SPA (the published Table 1 MSE stops near 0.02 for "
        "every method, so only the order of magnitude compares). Authors' code: "
        "their MATLAB SingleSPA with M=3 on their generator (the delta = 0.0005 row "
        "is ours on that generator). The fixed split is the generator's own: its "
        "anchor rows are in S2 = {4, 5} by construction."
    )


# ------------------------------------------------------------- Table 4 re-examination
def _floored(params):
    return [
        np.maximum(a, AUTHORS_FLOOR) / np.maximum(a, AUTHORS_FLOOR).sum(0) for a in params
    ]


def _em_with_oracle_stop(data, rank, method, seed, truth):
    """MSE of an EM run after 30 iterations and at the authors' truth-based stop."""
    trace = []

    def record(n_iter, state):
        n_cat = data.n_categories
        offsets = np.concatenate([[0], np.cumsum(n_cat)])
        factors = [
            state.factors_stacked[offsets[n] : offsets[n + 1]] for n in range(n_cat.size)
        ]
        trace.append(factor_mse(state.weights, factors, truth.weights, truth.factors))

    est = LatentClassPMF(
        rank, method=method, max_iter=AUTHORS_EM_ROUNDS, tol=0.0, random_state=seed
    )
    est.fit(data, callback=record)
    capped = factor_mse(est.weights_, est.factors_, truth.weights, truth.factors)
    stop = len(trace) - 1
    for i in range(1, len(trace)):
        if abs(trace[i] - trace[i - 1]) / trace[i - 1] < AUTHORS_EM_TOL:
            stop = i
            break
    return capped, trace[stop], stop + 1


def run_opt4(args):
    """Table 4 (N=15, F=10, I=10) under the authors' protocol, measured."""
    rank = 10
    rows = {}

    def add(key, size, value):
        rows.setdefault(key, {}).setdefault(size, []).append(value)

    for size in args.sizes:
        for t in range(args.trials):
            seed = 1000 * t + 11
            data, truth = _t4_data(size, seed)
            m = pairwise_marginals(data)
            mse = lambda p: factor_mse(p.weights, p.factors, truth.weights, truth.factors)  # noqa: E731
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                spa, _ = cnmf_spa(m, rank, random_state=seed)
                add("CNMF-SPA (ours)", size, mse(spa))
                t0 = time.perf_counter()
                opt, info = cnmf_opt(
                    m,
                    rank,
                    init="cnmf-spa",
                    max_iter=args.max_iter,
                    tol=PAPER_TOL,
                    random_state=seed,
                )
                add("CNMF-OPT ours: CNMF-SPA start, tol 1e-5", size, mse(opt))
                add(
                    "  its KL objective / KL at the truth",
                    size,
                    info["objective"][-1]
                    / pairwise_misfit(m, (truth.weights, truth.factors)),
                )
                add("  s/fit", size, time.perf_counter() - t0)
                start = (truth.weights, _floored(spa.factors))
                opt_a, _ = cnmf_opt(
                    m,
                    rank,
                    init=start,
                    max_iter=AUTHORS_OPT_SWEEPS,
                    tol=AUTHORS_OPT_TOL,
                    random_state=seed,
                )
                add("CNMF-OPT authors' protocol: true prior, 200 sweeps", size, mse(opt_a))
                for sweeps in (30, 200):
                    opt_t, _ = cnmf_opt(
                        m,
                        rank,
                        init=(truth.weights, truth.factors),
                        max_iter=sweeps,
                        tol=0.0,
                        random_state=seed,
                    )
                    add(
                        f"CNMF-OPT from the TRUE factors, {sweeps} sweeps (oracle)",
                        size,
                        mse(opt_t),
                    )
                for method, label in (("cnmf-spa-em", "CNMF-SPA-EM"), ("em", "RAND-EM")):
                    est = LatentClassPMF(
                        rank,
                        method=method,
                        tol=PAPER_TOL,
                        max_iter=args.max_iter,
                        random_state=seed,
                    ).fit(data)
                    add(
                        f"{label} ours: tol 1e-5",
                        size,
                        factor_mse(
                            est.weights_, est.factors_, truth.weights, truth.factors
                        ),
                    )
                    if method == "cnmf-spa-em":
                        spa_em_loglik = est.score(data)
                    capped, oracle, n_it = _em_with_oracle_stop(
                        data, rank, method, seed, truth
                    )
                    add(f"{label}: capped at 30 iterations", size, capped)
                    add(f"{label}: authors' stop (uses the truth; <= 30 it.)", size, oracle)
                    add(f"  {label} iterations at that stop", size, n_it)
                t0 = time.perf_counter()
                est = LatentClassPMF(rank, random_state=seed).fit(data)
                add(
                    "LatentClassPMF(rank) default (multi-start MLE)",
                    size,
                    factor_mse(est.weights_, est.factors_, truth.weights, truth.factors),
                )
                add("  s/fit (multi-start)", size, time.perf_counter() - t0)
                add(
                    "  its log-lik per row minus CNMF-SPA-EM's",
                    size,
                    est.score(data) - spa_em_loglik,
                )
            print(f"  [opt4] S={size} trial {t + 1}/{args.trials} done", flush=True)
    paper = {
        "CNMF-SPA (ours)": "cnmf-spa",
        "CNMF-OPT ours: CNMF-SPA start, tol 1e-5": "cnmf-opt",
        "CNMF-OPT authors' protocol: true prior, 200 sweeps": "cnmf-opt",
        "CNMF-SPA-EM ours: tol 1e-5": "cnmf-spa-em",
        "CNMF-SPA-EM: capped at 30 iterations": "cnmf-spa-em",
        "CNMF-SPA-EM: authors' stop (uses the truth; <= 30 it.)": "cnmf-spa-em",
        "RAND-EM ours: tol 1e-5": "em",
        "RAND-EM: capped at 30 iterations": "em",
        "RAND-EM: authors' stop (uses the truth; <= 30 it.)": "em",
    }
    print(
        f"\nTable 4 re-examined (N=15, F=10, I=10, p=0.5; {args.trials} seeds): "
        "factor MSE mean ± sd, ours | paper"
    )
    print("| row | " + " | ".join(f"S={s:.0e} ours | paper" for s in args.sizes) + " |")
    print("|" + "---|" * (1 + 2 * len(args.sizes)))
    for key, by_size in rows.items():
        cells = []
        for size in args.sizes:
            v = np.asarray(by_size[size])
            ref = paper.get(key)
            ref = f"{paper_value(PAPER_T4_MSE, ref, size):.4f}" if ref else "-"
            cells.append(f"{v.mean():.4f} ± {v.std():.4f} | {ref}")
        print(f"| {key} | " + " | ".join(cells) + " |")
    print(
        "Comparable: data generator, sample sizes, MSE definition (getMSE_nomre.m), the "
        "CNMF-SPA rows, and the 'authors' protocol' CNMF-OPT row, which starts as their "
        "script does (their sweep runs up to 200 mirror-descent steps per block, ours "
        "one, so ours moves less in 200 sweeps). Not comparable: the 'authors' stop' EM "
        "rows (their truth-based rule; see the iteration rows for whether it fired "
        "before the 30-iteration cap) and the oracle CNMF-OPT rows, which start at "
        "the true factors; they show that "
        "the published CNMF-OPT MSE is reached only from the truth and only by stopping "
        "early. With strictly positive (uniform) factors the pairwise marginals are "
        "invariant to an F(F-1)/2-dimensional family of transformations, and on "
        "sampled marginals the KL objective is lower away from the truth (ratio < 1 "
        "above), so a converged CNMF-OPT drifts from the truth at every S."
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10**3, 10**4, 10**5])
    ap.add_argument(
        "--tables",
        nargs="+",
        default=["table1", "table4"],
        choices=["table1", "table4", "splits", "opt4"],
    )
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--with-default",
        action="store_true",
        help="also fit the package default (method='auto', the multi-start MLE) in "
        "every cell, e.g. to see whether it avoids CNMF-SPA-EM's local optima",
    )
    args = parse_args_quick(
        ap, None, trials=1, sizes=[1000], tables=["table1"], max_iter=100
    )
    if args.with_default:
        METHODS.append("auto")
    results = {}
    for setting in [t for t in args.tables if t in ("table1", "table4")]:
        t0 = time.perf_counter()
        results[setting] = run_setting(
            setting, args.sizes, args.trials, args.seed, args.max_iter
        )
        print(f"{setting}: {time.perf_counter() - t0:.1f} s")
    if "table1" in results:
        print_table(
            "Table 1 (N=5, F=5, I=10, p=0.5, eps=0.1): factor MSE",
            results["table1"],
            args.sizes,
            "mse",
            PAPER_T1_MSE,
        )
        print_table(
            "Table 1 (N=5, F=5, I=10, p=0.5, eps=0.1): joint-PMF MRE",
            results["table1"],
            args.sizes,
            "mre",
            PAPER_T1_MRE,
        )
    if "table4" in results:
        print_table(
            "Table 4 (N=15, F=10, I=10, p=0.5): factor MSE",
            results["table4"],
            args.sizes,
            "mse",
            PAPER_T4_MSE,
        )
    if "splits" in args.tables:
        run_splits(args)
    if "opt4" in args.tables:
        run_opt4(args)
    if not results:
        return
    s_max = max(args.sizes)
    print(
        f"\nTable 6: mean runtime (s) at S={s_max:.0e} (paper: S=1e5, MATLAB, i7 3.4 GHz)"
    )
    print("| method | [5,5,10] ours | paper | [15,10,10] ours | paper |")
    print("|---|---|---|---|---|")
    for m in METHODS:
        cells = []
        for i, setting in enumerate(["table1", "table4"]):
            if setting in results:
                cells.append(f"{np.mean(results[setting][m][s_max]['time']):.3f}")
            else:
                cells.append("-")
            cells.append(f"{PAPER_T6[m][i]:.3f}")
        print(f"| {LABEL[m]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
