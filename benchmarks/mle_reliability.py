"""MLE reliability: does the default ``LatentClassPMF(rank).fit(data)`` reach the MLE?

For every case of the shared suite (``benchmarks/_lca_suite.py``: simulated data with
planted local optima and plateaus, the shipped UCI sets, MovieLens genre subsets) this
runs, in the same process and the same run:

* the default estimator ``LatentClassPMF(rank, random_state=seed)`` (``method="auto"``
  with several starts once it exists; before that, the old default CNMF-SPA-EM);
* every single-start method of ``METHODS`` (all but ``"auto"``) from ``random_state=seed``,
  each under a wall-time cap (``--cap``; a fit that exceeds it, or raises, is skipped
  with the reason printed);
* StepMix (``measurement="categorical_nan"``, ``n_init=20``), the pip-installable
  latent-class package, with a relative tolerance 10x tighter than bayespmf's EM default;
* a reference: the best of ``--ref-starts`` SQUAREM starts (random uniform, seeds
  1000, 1001, ...) at ``tol=1e-12``, and the default again from ``--ref-default-seeds``
  other seeds (random uniform starts alone stall far below the MLE on Mushroom and
  MovieLens, so they are not enough of a reference there).

Every log-likelihood is the total over the rows of the data, computed the same way for
every bayespmf method (``est.score_samples(data).sum()``); StepMix's is its own
``score(X) * S``, checked against bayespmf's ``log_likelihood_rows`` evaluated at
StepMix's parameters. "Best known" is the maximum over everything run here. The table
gives, per case and method: total log-likelihood, gap to the best known, how many starts
reached it (within ``--gap-tol``, default 0.01) and the wall time. After each case a
summary line says whether the default reached the best known and its time relative to
StepMix's; the last line counts the cases where it did both (reached it, and was faster).

Numba kernels are compiled in a warm-up on a tiny data set before anything is timed.

Usage::

    python benchmarks/mle_reliability.py --quick            # 7 cases, ~10 min on 2 cores
    python benchmarks/mle_reliability.py                    # all 13 cases
    python benchmarks/mle_reliability.py --datasets car,votes --ref-starts 100
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import time
import warnings
from dataclasses import dataclass

import numpy as np
from _common import fit_stepmix as fit_stepmix_model
from _common import stepmix_input, stepmix_to_bayespmf
from _lca_suite import ALL_CASES, QUICK_CASES, Case, suite

from bayespmf import datasets
from bayespmf.estimators.latent_class import METHODS, LatentClassPMF
from bayespmf.pmf import log_likelihood_rows

try:  # the multi-start default (issue 11); absent in older bayespmf
    from bayespmf.fit.defaults import DEFAULT_N_INIT
except ImportError:
    DEFAULT_N_INIT = None

#: Single-start methods: every entry of METHODS but the multi-start default.
SINGLE_START = [m for m in METHODS if m != "auto"]


@dataclass
class Row:
    """One fit of one case: what goes into a line of the table."""

    method: str
    loglik: float = np.nan  # total log-likelihood of the data, nan when skipped
    seconds: float = np.nan  # wall time of the fit
    lls: tuple = ()  # total log-likelihood of each start (for "starts at best")
    starts: tuple | None = None  # (reached, total) when lls cannot give it
    note: str = ""


# --------------------------------------------------------------------------- helpers


class FitTimeout(Exception):
    """A fit ran past its wall-time cap."""


@contextlib.contextmanager
def time_cap(seconds: float):
    """Raise :class:`FitTimeout` in the main thread after ``seconds`` of wall time.

    SIGALRM is handled between Python bytecodes, so a compiled (numba) kernel call that
    is running when the cap expires finishes first: a fit may overrun its cap by one
    kernel call.
    """

    def handler(signum, frame):
        raise FitTimeout

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def total_loglik(est: LatentClassPMF, data) -> float:
    """The one log-likelihood used for every bayespmf fit: the sum over rows."""
    return float(est.score_samples(data).sum())


# --------------------------------------------------------------------------- fits


def fit_default(case: Case, seed: int, label: str = "default") -> Row:
    """The default estimator, ``LatentClassPMF(rank, random_state=seed)``."""
    est = LatentClassPMF(case.n_components, random_state=seed)
    label = f"{label} ({est.method})"
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(case.data)
    seconds = time.perf_counter() - t0
    ll = total_loglik(est, case.data)
    row = Row(label, ll, seconds, lls=(ll,))
    notes = []
    optima = getattr(est, "optima_", None)
    if optima is not None and len(optima):
        # new API: one row per distinct optimum, best first, with its number of starts
        own_best = float(optima["loglik"].iloc[0])
        n_starts = int(optima["n_starts"].sum())
        if abs(own_best - ll) <= 1e-6 * max(1.0, abs(ll)) + 1e-3:
            # same scale as ours: expand to one log-likelihood per start
            row.lls = tuple(
                np.repeat(optima["loglik"].to_numpy(float), optima["n_starts"].to_numpy())
            )
        else:
            best_starts = int(getattr(est, "n_init_best_", optima["n_starts"].iloc[0]))
            row.starts = (best_starts, n_starts)
            notes.append(f"optima_ loglik {own_best:.3f} is not on the total scale")
        info = getattr(est, "info_", None) or {}
        n_total = (
            len(info.get("starts", ())) or getattr(est, "n_init", None) or DEFAULT_N_INIT
        )
        rounds = info.get("rounds", 1)
        notes.append(
            f"distinct optima {len(optima)} (of {n_starts} refined / {n_total} starts"
            + (f", {rounds} rounds)" if rounds > 1 else ")")
        )
    elif hasattr(est, "n_init_best_") and est.n_init_best_ is not None:
        row.starts = (int(est.n_init_best_), int(getattr(est, "n_init", 0) or 0))
    if not getattr(est, "converged_", True):
        notes.append("not converged")
    warned = sorted({w.category.__name__ for w in caught} & {"LocalOptimumWarning"})
    notes += warned
    row.note = "; ".join(notes)
    return row


def fit_default_seeds(case: Case, seeds) -> Row:
    """The default again from other seeds: part of the reference (best known)."""
    rows = [fit_default(case, s) for s in seeds]
    return Row(
        f"reference (default, seeds {seeds[0]}-{seeds[-1]})",
        max(r.loglik for r in rows),
        sum(r.seconds for r in rows),
        lls=tuple(r.loglik for r in rows),
    )


def fit_single(case: Case, method: str, seed: int, cap: float) -> Row:
    """One single-start method under a wall-time cap (skipped past the cap or on error)."""
    est = LatentClassPMF(case.n_components, method=method, random_state=seed)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(), time_cap(cap):
            warnings.simplefilter("ignore")
            est.fit(case.data)
    except FitTimeout:
        return Row(method, note=f"skipped: over the {cap:g} s cap")
    except Exception as err:  # a method that cannot handle the data
        return Row(method, note=f"skipped: {type(err).__name__}: {str(err)[:80]}")
    seconds = time.perf_counter() - t0
    ll = total_loglik(est, case.data)
    return Row(method, ll, seconds, lls=(ll,), note="" if est.converged_ else "not conv.")


def fit_stepmix(case: Case, seed: int, n_init: int, tol: float, max_iter: int):
    """StepMix with ``n_init`` starts; returns the row and the scale check (or None)."""
    try:
        import stepmix  # noqa: F401
    except ImportError:
        return Row(f"StepMix (n_init={n_init})", note="skipped: pip install stepmix"), None
    x = stepmix_input(case.data.codes)
    model, seconds = fit_stepmix_model(
        x,
        case.n_components,
        n_init=n_init,
        max_iter=max_iter,
        abs_tol=1e-10,  # on the mean log-likelihood per row
        rel_tol=tol,  # relative change of the log-likelihood, as bayespmf's tol
        random_state=seed,
    )
    n_rows = x.shape[0]
    own = float(model.score(x)) * n_rows  # StepMix's mean log-likelihood per row
    # each start's final mean log-likelihood, on the total scale
    lls = tuple(float(v) * n_rows for v in model.lower_bound_buffer_)
    weights, factors = stepmix_to_bayespmf(model, case.data.n_categories)
    ours = float(log_likelihood_rows(case.data.codes, weights, factors).sum())
    check = (own, ours, abs(own - ours) / abs(ours))
    note = "" if model.converged_ else "some starts hit max_iter"
    return Row(f"StepMix (n_init={n_init})", own, seconds, lls=lls, note=note), check


def fit_reference(case: Case, n_starts: int) -> Row:
    """Best of ``n_starts`` SQUAREM starts at a tight tolerance (seeds 1000, 1001, ...)."""
    lls = []
    t0 = time.perf_counter()
    for s in range(n_starts):
        est = LatentClassPMF(
            case.n_components,
            method="squarem",
            tol=1e-12,
            max_iter=20000,
            random_state=1000 + s,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(case.data)
        lls.append(total_loglik(est, case.data))
    seconds = time.perf_counter() - t0
    return Row(f"reference (squarem x{n_starts})", max(lls), seconds, lls=tuple(lls))


def warm_up() -> None:
    """Compile the numba kernels of every method (and load StepMix) before timing."""
    data, _ = datasets.make_latent_class(
        200, [2, 3, 4, 2, 3], n_components=2, observed_prob=0.8, random_state=0
    )
    case = Case("warm-up", data, 2, "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in SINGLE_START:
            with contextlib.suppress(Exception):
                LatentClassPMF(2, method=method, random_state=0).fit(data)
        fit_default(case, 0)
        fit_stepmix(case, 0, 1, 1e-6, 100)
        fit_reference(case, 1)


# --------------------------------------------------------------------------- report


def starts_at_best(row: Row, best: float, tol: float) -> str:
    """'k/n': how many of the row's starts ended within ``tol`` of ``best``."""
    if row.lls:
        lls = np.asarray(row.lls)
        return f"{int((lls >= best - tol).sum())}/{lls.size}"
    if row.starts is not None:
        return f"{row.starts[0]}/{row.starts[1]} (own best)"
    return "-"


def fmt(v: float, spec: str) -> str:
    return "" if not np.isfinite(v) else format(v, spec)


def run_case(case: Case, args) -> dict:
    """Every fit of one case, its table lines and its summary."""
    data = case.data
    print(
        f"\n## {case.name}: S={data.n_samples}, N={data.n_variables}, "
        f"missing={100 * data.missing_fraction:.1f} %, rank={case.n_components} "
        f"-- {case.note}",
        flush=True,
    )
    rows = [fit_default(case, args.seed)]
    print(f"  {rows[0].method}: {rows[0].seconds:.2f} s", flush=True)
    stepmix, check = fit_stepmix(
        case, args.seed, args.stepmix_n_init, args.stepmix_tol, args.stepmix_max_iter
    )
    print(f"  {stepmix.method}: {stepmix.seconds:.2f} s", flush=True)
    singles = [fit_single(case, m, args.seed, args.cap) for m in SINGLE_START]
    reference = fit_reference(case, args.ref_starts)
    rows += [*singles, stepmix, reference]
    if args.ref_default_seeds:
        seeds = list(range(args.seed + 1, args.seed + 1 + args.ref_default_seeds))
        rows.append(fit_default_seeds(case, seeds))
    best = max(r.loglik for r in rows if np.isfinite(r.loglik))

    lines = []
    for r in rows:
        gap = best - r.loglik
        lines.append(
            f"| {case.name} | {data.n_samples} | {data.n_variables} | {case.n_components} "
            f"| {r.method} | {fmt(r.loglik, '.3f')} | {fmt(gap, '.3f')} "
            f"| {starts_at_best(r, best, args.gap_tol)} | {fmt(r.seconds, '.2f')} "
            f"| {r.note} |"
        )
    print("\n".join([TABLE_HEAD, *lines]), flush=True)

    ran = [r for r in singles if np.isfinite(r.loglik)]
    missed = [r.method for r in ran if best - r.loglik > args.gap_tol]
    print(
        f"  single-start runs missing the best known by > {args.gap_tol:g}: "
        f"{len(missed)}/{len(ran)} ({', '.join(missed) or 'none'})"
    )
    for r in singles:
        if r.note.startswith("skipped"):
            print(f"  {r.method} {r.note}")
    if check is not None:
        own, ours, rel = check
        print(
            f"  StepMix scale check: own total {own:.6f}, bayespmf log_likelihood_rows "
            f"at StepMix's parameters {ours:.6f}, relative difference {rel:.2e}"
        )
    default = rows[0]
    reached = best - default.loglik <= args.gap_tol
    ratio = default.seconds / stepmix.seconds if np.isfinite(stepmix.seconds) else np.nan
    print(
        f"  default reached best known: {'yes' if reached else 'no'} "
        f"(gap {best - default.loglik:.3f}); default time / StepMix time = {ratio:.3f}",
        flush=True,
    )
    return {
        "case": case.name,
        "lines": lines,
        "reached": reached,
        "faster": bool(ratio < 1),
        "ratio": ratio,
        "check": check,
        "missed": len(missed),
        "ran": len(ran),
    }


TABLE_HEAD = (
    "| data set | S | N | rank | method | total log-lik | gap to best known "
    "| starts at best | wall s | note |\n|---|---|---|---|---|---|---|---|---|---|"
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_CASES)}")
    p.add_argument(
        "--datasets", help=f"comma-separated case names among {', '.join(ALL_CASES)}"
    )
    p.add_argument(
        "--ref-starts",
        type=int,
        default=None,
        help="SQUAREM starts of the reference run (default 50, 20 with --quick)",
    )
    p.add_argument(
        "--ref-default-seeds",
        type=int,
        default=3,
        help="also run the default from this many other seeds (seed+1, ...) as part "
        "of the reference (default 3; 0 to skip)",
    )
    p.add_argument(
        "--cap",
        type=float,
        default=60.0,
        help="wall-time cap in seconds of each single-start fit (default 60)",
    )
    p.add_argument("--stepmix-n-init", type=int, default=20)
    p.add_argument(
        "--stepmix-tol",
        type=float,
        default=1e-8,
        help="StepMix rel_tol: relative log-likelihood change, the same criterion as "
        "bayespmf's tol (default 1e-8, 10x tighter than bayespmf's EM default)",
    )
    p.add_argument("--stepmix-max-iter", type=int, default=5000)
    p.add_argument("--gap-tol", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0, help="seed of every fit (default 0)")
    args = p.parse_args(argv)
    if args.ref_starts is None:
        args.ref_starts = 20 if args.quick else 50
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    names = args.datasets.split(",") if args.datasets else None
    t_start = time.perf_counter()
    cases = suite(quick=args.quick, names=names)
    print(
        f"MLE reliability: {len(cases)} cases; single-start methods {SINGLE_START} "
        f"(cap {args.cap:g} s each); StepMix n_init={args.stepmix_n_init}, "
        f"rel_tol={args.stepmix_tol:g}, max_iter={args.stepmix_max_iter}; reference "
        f"{args.ref_starts} SQUAREM starts at tol 1e-12; seed {args.seed}."
    )
    warm_up()
    results = [run_case(case, args) for case in cases]

    print("\n# All cases\n")
    print(TABLE_HEAD)
    for res in results:
        print("\n".join(res["lines"]))
    print(
        "\n| data set | default reached best known | default / StepMix time "
        "| single-start runs missing best | StepMix own total | bayespmf at StepMix "
        "params | rel. diff |\n|---|---|---|---|---|---|---|"
    )
    for res in results:
        own, ours, rel = res["check"] if res["check"] else (np.nan, np.nan, np.nan)
        print(
            f"| {res['case']} | {'yes' if res['reached'] else 'no'} | {res['ratio']:.3f} "
            f"| {res['missed']}/{res['ran']} | {own:.4f} | {ours:.4f} | {rel:.1e} |"
        )
    both = sum(r["reached"] and r["faster"] for r in results)
    print(
        f"\nDefault reached the best known log-likelihood (to {args.gap_tol:g}) on "
        f"{sum(r['reached'] for r in results)}/{len(results)} data sets, was faster than "
        f"StepMix (n_init={args.stepmix_n_init}) on "
        f"{sum(r['faster'] for r in results)}/{len(results)}, both on "
        f"{both}/{len(results)}. Total time {time.perf_counter() - t_start:.0f} s."
    )


if __name__ == "__main__":
    main()
