"""Li, Liang & Risteski, "Recovery guarantee of non-negative matrix factorization via
alternating updates" (NIPS 2016): Theorems 1-2 of purification (Alg. 1), ours beside the
theorems' bounds.

The setting of the simplified case (Sec. 5): m = 40, n = 10, data y = A* x* + nu with
A* of Uniform(0, 1) entries and unit-l1 columns (A1), x*_i = 1 with probability s/n = 0.2
independently (A2'), the warm start A0 = A*(Sigma0 + E0) of (A3) with l = 1/10, and the
error ||A_hat - A*||_1 (max column l1 norm) after normalizing every column of A_hat to
unit l1 norm (the remark after Theorem 1). Every trial draws its own A*, warm start and
data (``--seed`` + trial).

Which regime each claim is measured in:

* Theorem 1, noiseless: the error falls geometrically. The analysis (Sec. 5.1-5.2)
  takes the expectation of line 4 over the data distribution ("infinite samples") and
  eta = l/6, for which its potential falls by (1 - eta/25) per iteration. Measured:
  (a) *population*: the exact expectation over all 2^n binary weight vectors
  (``purification_population``); (b) *fresh*: Alg. 1 as written, N new examples per
  iteration (``sample_purification_points``), which falls geometrically down to a
  floor that shrinks with N; (c) *fixed data*: the package's default regime, all S rows
  of one data set every iteration, whose fixed point differs from A* by the sample
  covariance of x* (error floor of order S^(-1/2)), so the error falls, then settles
  (and can rise) there. The fitted rate is exp(slope) of log error over the
  iterations between 30 % of the start error and 1e-9 (population), or between half
  the start error and 3x the floor (fresh).
* Theorem 1, adversarial noise (N1): nu = C sign(G x*), a function of x*, so the
  population regime is exact. C = c / max{m, n ||(A*)^+||_inf} with the theorem's
  absolute constant G (not given in the paper) set to 1; the bound is eps + 2c, with eps
  the noiseless run's error at the same T.
* Theorem 2, unbiased noise (N2): independent +-C signs, C = c sqrt(n) / max{...}, fresh
  N examples per iteration; the bound is eps + 2c with eps the noiseless fresh run's
  error (same N, T).
* Never worse than the warm start: ``bayespmf.fit.purification.purification`` with its
  defaults (fixed data, eta = 0.1, alpha = 0.1, T = 100, guard on) at noise levels
  inside and far outside the theorems' regime; a trial passes when the result is no
  farther from A* than the warm start, or a ``PurificationWarning`` said it may be.

Figures (``--plot-dir``): ``purification_noiseless.png`` (the three regimes with the
theorem's rate), ``purification_noise.png`` (error against iterations for every noise
level of Theorems 1-2, with the bounds 2c and the rate) and ``purification_guard.png``
(the default runs of the last table, with the iterate the guard returned).

Usage::

    python benchmarks/paper_purification.py \
        --json benchmarks/paper_results/paper_purification.json
    python benchmarks/paper_purification.py --quick        # smoke run (the test suite)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _common import parse_args_quick
from _paper import RESULTS_DIR, Report
from threadpoolctl import threadpool_limits

from bayespmf.datasets._simulate_nmf import (
    make_purification_data,
    purification_population,
    sample_purification_points,
)
from bayespmf.fit.purification import PurificationWarning, noise_allowance, purification
from bayespmf.kernels.purification import (
    PurificationProblem,
    PurificationState,
    balance_columns,
    decoding_spread,
    feature_distance,
    purification_step,
)

PAPER = "Li, Liang & Risteski (purification)"
M, N_COMP, SPARSITY, ELL = 40, 10, 2.0, 0.1
#: The analysis' step (Sec. 5.2) and the rate of its potential a_t + beta b_t.
ETA = ELL / 6
THEOREM_RATE = 1.0 - ETA / 25
ALPHA = 0.1  # the package's default ReLU offset (the paper's alpha is an unnamed constant)

#: The default-regime cases of the last table: (label, noise, C_nu, S).
GUARD_CASES = [
    ("noiseless S=2000", "none", 0.0, 2000),
    ("noiseless S=5000", "none", 0.0, 5000),
    ("noiseless S=20000", "none", 0.0, 20000),
    ("N1 C=0.001 S=5000", "adversarial", 0.001, 5000),
    ("N1 C=0.01 S=2000", "adversarial", 0.01, 2000),
    ("N2 C=0.003 S=5000", "unbiased", 0.003, 5000),
    ("N2 C=0.03 S=5000", "unbiased", 0.03, 5000),
    ("N2 C=0.1 S=2000", "unbiased", 0.1, 2000),
]


def fitted_rate(errs: np.ndarray, low: float, high: float, start: int = 10) -> float:
    """exp(slope) of log error over the iterations with ``low < error < high``."""
    t = np.arange(errs.size)
    keep = (t >= start) & (errs > low) & (errs < high)
    if keep.sum() < 5:
        return float("nan")
    return float(np.exp(np.polyfit(t[keep], np.log(errs[keep]), 1)[0]))


def error_path(truth, problem, a0, iters, draw=None) -> np.ndarray:
    """Errors of A^(0..iters) by purification_step (``draw``: fresh rows per step)."""
    state = PurificationState(a0, None)
    errs = [feature_distance(a0, truth.components)]
    for _ in range(iters):
        if draw is not None:
            problem = problem._replace(y=draw())
        state, _ = purification_step(state, problem)
        errs.append(feature_distance(state.components, truth.components))
    return np.asarray(errs)


def population_run(truth, noise, level, iters) -> np.ndarray:
    rows, prob = purification_population(
        truth.components,
        sparsity=SPARSITY,
        noise=noise,
        noise_level=level,
        adversary=truth.adversary,
    )
    r = 1.0 / decoding_spread(rows, truth.init, ALPHA, weights=prob)
    problem = PurificationProblem(rows, ETA, ALPHA, r, None, "min-inf", prob)
    return error_path(truth, problem, truth.init, iters)


def fresh_run(truth, noise, level, n_points, iters, rng) -> np.ndarray:
    def draw():
        return sample_purification_points(
            n_points,
            truth.components,
            sparsity=SPARSITY,
            noise=noise,
            noise_level=level,
            adversary=truth.adversary,
            random_state=rng,
        )[0]

    first = draw()
    r = 1.0 / decoding_spread(first, truth.init, ALPHA)
    problem = PurificationProblem(first, ETA, ALPHA, r, None, "min-inf")
    return error_path(truth, problem, truth.init, iters, draw)


def fixed_run(y, truth, iters, eta, alpha) -> np.ndarray:
    """The package's default regime step by step: balance, r, all rows every step."""
    scale = balance_columns(y, truth.init, alpha)
    a0 = truth.init * scale
    r = 1.0 / decoding_spread(y, a0, alpha)
    problem = PurificationProblem(y, eta, alpha, r, None, "min-inf")
    return error_path(truth, problem, a0, iters)


def truth_for(seed: int, noise="none", level=0.0, n_samples=10):
    return make_purification_data(
        n_samples,
        M,
        N_COMP,
        sparsity=SPARSITY,
        noise=noise,
        noise_level=level,
        init_quality=ELL,
        random_state=seed,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10, help="trials per cell")
    ap.add_argument("--seed", type=int, default=2016)
    ap.add_argument(
        "--population-iters", type=int, default=1500, help="T of the exact-expectation runs"
    )
    ap.add_argument("--fresh-iters", type=int, default=600, help="T of the fresh runs")
    ap.add_argument(
        "--fresh-points", type=int, default=20000, help="N new examples per iteration"
    )
    ap.add_argument(
        "--fixed-rows", type=int, nargs="+", default=[2000, 20000], help="S (fixed data)"
    )
    ap.add_argument("--fixed-iters", type=int, default=1500)
    ap.add_argument("--levels", type=float, nargs="+", default=[0.1, 0.3, 1.0], help="c")
    ap.add_argument("--guard-cases", type=int, nargs="+", default=None)
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads (the products here have n = 10 columns: threads only add "
        "synchronization, which costs 10-100x on a loaded machine)",
    )
    ap.add_argument("--json", type=Path, default=None, help="save the cells")
    ap.add_argument("--plot-dir", type=Path, default=RESULTS_DIR / "figures")
    args = parse_args_quick(
        ap,
        argv,
        trials=1,
        population_iters=500,
        fresh_iters=150,
        fresh_points=5000,
        fixed_rows=[2000],
        fixed_iters=60,
        levels=[0.3],
        guard_cases=[0, 4, 7],
        plot_dir=Path(tempfile.gettempdir()) / "bayespmf_paper_purification_quick",
    )
    args.plot_dir.mkdir(parents=True, exist_ok=True)
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        return run(args)


def run(args) -> int:
    cases = [GUARD_CASES[i] for i in (args.guard_cases or range(len(GUARD_CASES)))]
    report = Report(PAPER, "python benchmarks/paper_purification.py")
    report.settings = {
        "trials": args.trials,
        "seed": args.seed,
        "m": M,
        "n": N_COMP,
        "s": SPARSITY,
        "l": ELL,
        "eta": ETA,
        "alpha": ALPHA,
        "population_iters": args.population_iters,
        "fresh_iters": args.fresh_iters,
        "fresh_points": args.fresh_points,
        "fixed_rows": args.fixed_rows,
        "fixed_iters": args.fixed_iters,
        "levels_c": args.levels,
        "quick": args.quick,
    }
    t_all = time.perf_counter()
    print(
        f"{PAPER}: m={M} n={N_COMP} s={SPARSITY} l={ELL}, eta = l/6 = {ETA:.4g}, "
        f"alpha={ALPHA}; {args.trials} trial(s) per cell (seed {args.seed} + trial)",
        flush=True,
    )
    curves: dict = {}
    rates: dict = {"population": [], "fresh": []}
    eps: dict = {"population": [], "fresh": []}
    noisy: dict = {}
    kappas = []
    for trial in range(args.trials):
        seed = args.seed + trial
        rng = np.random.default_rng([seed, 1])
        _, truth = truth_for(seed)
        kappa = 1.0 / noise_allowance(truth.components)[0]
        kappas.append(kappa)
        pop = population_run(truth, "none", 0.0, args.population_iters)
        rates["population"].append(fitted_rate(pop, 1e-9, 0.3 * pop[0]))
        eps["population"].append(pop[-1])
        fresh = fresh_run(truth, "none", 0.0, args.fresh_points, args.fresh_iters, rng)
        floor = float(np.median(fresh[-max(args.fresh_iters // 5, 5) :]))
        rates["fresh"].append(fitted_rate(fresh, 3 * floor, 0.5 * fresh[0], start=5))
        eps["fresh"].append(fresh[-1])
        if trial == 0:
            curves["population (exact expectation)"] = pop
            curves[f"fresh N={args.fresh_points} per iteration (Alg. 1 as written)"] = fresh
            for rows in args.fixed_rows:
                y, tr = truth_for(seed, n_samples=rows)
                curves[f"fixed data S={rows} (the package's regime)"] = fixed_run(
                    y, tr, args.fixed_iters, ETA, ALPHA
                )
        # the adversary G of (N1), fixed per trial; A* and the warm start are shared
        adversary = np.random.default_rng([seed, 2]).standard_normal((M, N_COMP))
        t1 = truth._replace(adversary=adversary)
        for c in args.levels:
            e1 = population_run(t1, "adversarial", c / kappa, args.population_iters)
            level2 = c * np.sqrt(N_COMP) / kappa
            e2 = fresh_run(
                truth, "unbiased", level2, args.fresh_points, args.fresh_iters, rng
            )
            noisy.setdefault(("N1", c), []).append((e1, c / kappa))
            noisy.setdefault(("N2", c), []).append((e2, level2))
        print(
            f"  trial {trial}: max(m, n||A*+||_inf) = {kappa:.4g}; noiseless "
            f"population rate {rates['population'][-1]:.5f}, error at T "
            f"{pop[-1]:.2e}; fresh rate {rates['fresh'][-1]:.5f}, floor {floor:.2e} "
            f"({time.perf_counter() - t_all:.0f} s)",
            flush=True,
        )

    table = "Theorem 1 (noiseless)"
    iters = {"population": args.population_iters, "fresh": args.fresh_iters}
    for regime, label in (
        ("population", "population (exact E)"),
        ("fresh", f"fresh N={args.fresh_points}/iter"),
    ):
        report.add(
            table,
            f"eta = l/6 = {ETA:.4g}",
            label,
            "rate/iter",
            THEOREM_RATE,
            rates[regime],
            better="lower",
            note="paper: the potential a_t + beta b_t falls by (1 - eta/25) per "
            "iteration (Sec. 5.2, eta = l/6); ours: exp(slope of log error)",
        )
        report.add(
            table,
            f"error after T = {iters[regime]}",
            label,
            "error",
            None,
            eps[regime],
            better=None,
            note="noiseless: arbitrarily small with T = O(ln 1/eps), "
            "N = poly(1/eps) (population: rounding; fresh: a floor falling with N)",
        )
    report.print_table(table, "geometric decrease of ||A_hat - A*||_1")
    kmean = float(np.mean(kappas))
    for model, table, regime in (
        ("N1", "Theorem 1 (N1)", f"population, T={args.population_iters}"),
        ("N2", "Theorem 2 (N2)", f"fresh N={args.fresh_points}/iter, T={args.fresh_iters}"),
    ):
        base = eps["population" if model == "N1" else "fresh"]
        root = " sqrt(n)" if model == "N2" else ""
        for c in args.levels:
            runs = noisy[(model, c)]
            final = [e[-1] for e, _ in runs]
            level = float(np.mean([lv for _, lv in runs]))
            report.add(
                table,
                f"c = {c} (C_nu = {level:.3g})",
                regime,
                "error",
                2 * c + float(np.mean(base)),
                final,
                better="lower",
                note=f"bound eps + 2c with G = 1: C_nu = c{root} / max{{m, n||A*+||_inf}}"
                f" (mean max = {kmean:.4g}); eps = the noiseless "
                "run's error in the same regime",
            )
        if model == "N1" and len(args.levels) > 1:
            cs = np.array(args.levels)
            errs = np.array([np.mean([e[-1] for e, _ in noisy[(model, c)]]) for c in cs])
            slope = float(np.polyfit(np.log(cs), np.log(errs), 1)[0])
            report.add(
                table,
                "exponent of error in c",
                regime,
                "log-log slope",
                1.0,
                slope,
                better=None,
                note="O(noise): the error grows linearly with the noise level (slope 1)",
            )
        if model == "N2":
            report.add(
                table,
                "noiseless, same N and T (eps)",
                regime,
                "error",
                None,
                base,
                better=None,
                note="N2: fresh unbiased noise averages out over the iterations, so at "
                "small c the error stays at the noiseless run's floor eps (set by N) "
                "instead of growing with c",
            )
        report.print_table(table, "final error against the theorem's bound eps + 2c")

    table = "Never worse than the warm start"
    guard_curves = {}
    for label, noise, level, rows in cases:
        ok, worse, warned, start_err, end_err = [], [], [], [], []
        for trial in range(args.trials):
            seed = args.seed + 100 + trial
            y, truth = truth_for(seed, noise, level, rows)
            e0 = feature_distance(truth.init, truth.components)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                a, info = purification(y, truth.init, random_state=seed)
            flagged = any(issubclass(w.category, PurificationWarning) for w in caught)
            e = feature_distance(a, truth.components)
            worse.append(float(e > e0))
            warned.append(float(flagged))
            ok.append(float(e <= e0 or flagged))
            start_err.append(e0)
            end_err.append(e)
            if trial == 0:
                path = fixed_run(y, truth, 100, 0.1, 0.1)
                guard_curves[label] = (path, info["best_iter"], e, flagged)
        note = "purification() defaults: fixed data, eta=0.1, alpha=0.1, T=100, guard on"
        report.add(
            table,
            label,
            "default",
            "not worse or warned",
            1.0,
            ok,
            better="higher",
            note=note,
        )
        report.add(table, label, "default", "worse than start", None, worse, better=None)
        report.add(table, label, "default", "warned", None, warned, better=None)
        report.add(table, label, "default", "start error", None, start_err, better=None)
        report.add(table, label, "default", "returned error", None, end_err, better=None)
        print(
            f"  {label}: start {np.mean(start_err):.4f} -> returned "
            f"{np.mean(end_err):.4f}; "
            f"worse {np.mean(worse):.2f}, warned {np.mean(warned):.2f} "
            f"({time.perf_counter() - t_all:.0f} s)",
            flush=True,
        )
    report.print_table(table, "share of trials (1 = every trial)")

    plot(args, curves, noisy, guard_curves, kmean, float(np.mean(rates["population"])))
    report.print_summary()
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")
    if args.json is not None:
        print(f"cells saved to {report.save(args.json)}")
    return 0


def plot(args, curves, noisy, guard_curves, kmean, fitted) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def rate_line(ax, start, iters, floor=0.0, **kw):
        t = np.arange(iters + 1)
        ax.semilogy(t, np.maximum(start * THEOREM_RATE**t, floor), **kw)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, errs) in enumerate(curves.items()):
        ax.semilogy(errs, color=f"C{i}", label=name)
    start = next(iter(curves.values()))[0]
    rate_line(
        ax,
        start,
        args.population_iters,
        color="k",
        ls="--",
        label=f"theorem: (1 - eta/25)^t = {THEOREM_RATE:.5f}^t",
    )
    t = np.arange(args.population_iters + 1)
    ax.semilogy(t, start * fitted**t, color="k", ls=":", label=f"fitted: {fitted:.5f}^t")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("||A_hat - A*||_1 (columns normalized)")
    ax.set_ylim(1e-12, 1)
    ax.set_title(f"Theorem 1, noiseless (m={M}, n={N_COMP}, s={SPARSITY}, eta=l/6)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    path = args.plot_dir / "purification_noiseless.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"\nfigure: {path}")

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, model, title in (
        (axes[0], "N1", "Theorem 1, adversarial (N1), population"),
        (axes[1], "N2", "Theorem 2, unbiased (N2), fresh N per iteration"),
    ):
        for i, c in enumerate(args.levels):
            errs, level = noisy[(model, c)][0]
            ax.semilogy(errs, color=f"C{i}", label=f"c={c} (C={level:.2g})")
            ax.axhline(2 * c, color=f"C{i}", ls=":", lw=1)
            rate_line(
                ax, errs[0], errs.size - 1, floor=errs[-1], color=f"C{i}", ls="--", lw=0.8
            )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("iteration t")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("||A_hat - A*||_1")
    fig.suptitle(
        "dotted: the bound 2c (G = 1); dashed: the theorem's rate (1 - eta/25)^t down to "
        f"the final error; max(m, n||A*+||_inf) = {kmean:.3g}",
        fontsize=9,
    )
    path = args.plot_dir / "purification_noise.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"figure: {path}")

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, (errs, best, e, flagged)) in enumerate(guard_curves.items()):
        ax.semilogy(errs, color=f"C{i}", label=f"{label}{' (warned)' if flagged else ''}")
        ax.plot([best], [e], "o" if flagged else "s", color=f"C{i}", ms=6)
        ax.axhline(errs[0], color=f"C{i}", ls=":", lw=0.8)
    ax.set_xlabel("iteration t (plain Alg. 1, fixed data)")
    ax.set_ylabel("||A_hat - A*||_1")
    ax.set_title(
        "Defaults (eta=0.1, alpha=0.1, T=100): marker = the iterate the guard returned; "
        "dotted = warm start",
        fontsize=9,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    path = args.plot_dir / "purification_guard.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"figure: {path}")


if __name__ == "__main__":
    sys.exit(main())
