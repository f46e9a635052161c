r"""The multi-start maximum-likelihood search of ``method="auto"`` and its optima.

:func:`multistart` draws starts (the CNMF-SPA estimate, random ones, row seeds and,
in later rounds, basin hops from the best optima so far), explores all of them at
once for a few SQUAREM-PMF cycles (one batched EM map), refines the best to the
tolerance, and reports the distinct optima (:func:`optima_table`), as poLCA and
Mplus do; :func:`warn_optima` says when the best log-likelihood was not replicated
(:class:`LocalOptimumWarning`). Its constants are read at call time, each with the
study that chose it (the figures are on the documentation's benchmark pages).
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bayespmf._validation import (
    DataValidationError,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.fit import defaults, memory
from bayespmf.fit.em import run_em
from bayespmf.fit.loop import ROUNDOFF, predicted_gain
from bayespmf.fit.memory import MemoryBudgetWarning, format_gib, memory_estimate
from bayespmf.fit.squarem import SQUAREM_PMF_CYCLE_MAPS, SQUAREM_PMF_TOL_SCALE
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.kernels.em import init_random, normalize_blocks
from bayespmf.kernels.squarem import batched_squarem_pmf_step
from bayespmf.pmf import (
    LatentClassParams,
    offsets_of,
    split_factors,
    stack_factors,
)

__all__ = [
    "EXPLORE_CYCLES",
    "BLOCK_BYTES",
    "INIT_FLOOR",
    "LatentClassFit",
    "LocalOptimumWarning",
    "OPTIMUM_LOGLIK_ATOL",
    "floor_params",
    "multistart",
    "optima_table",
    "random_starts",
    "rows_start",
    "warn_optima",
]


#: Entries of a geometric estimate are floored at this value (then renormalized) before
#: EM starts from it, and in the final estimates of the marginal-based methods: an exact
#: zero is absorbing for EM and makes the likelihood of a row that needs it -inf, while
#: 1e-6 is far below any probability the data resolve.
INIT_FLOOR = 1e-6

#: Two refined starts are the same optimum when their log-likelihoods differ by at
#: most this (log-likelihood units; the precision the optima table reports). Within
#: one optimum, parameters that differ (after label matching) by more than
#: OPTIMUM_PARAM_ATOL are reported as a flat ridge (the table's ``spread``).
OPTIMUM_LOGLIK_ATOL = 0.01

OPTIMUM_PARAM_ATOL = 0.05

#: Exploration of ``method="auto"``: every start runs this many SQUAREM-PMF cycles, all
#: starts at once (one batched EM map), before the best REFINE_SHARE of them (at least
#: MIN_REFINE) are refined to ``tol``. On UCI Car, Votes and simulated binary items,
#: after 20 cycles the starts that end at the best optimum ranked first, after fewer
#: some did not (:ref:`bench-n-init`; Mplus's "STARTS = 20 4" practice, with the stage
#: lengths chosen by that measurement).
EXPLORE_CYCLES = 20

REFINE_SHARE = 0.1

MIN_REFINE = 4

#: Refinement of ``method="auto"`` in two stages. Every refined start runs SQUAREM-PMF
#: to EM's stopping rule at ``tol`` (the Aitken estimate of the gain still to come at
#: most ``tol * |L|``; all refined starts together, one batched EM map per cycle, on
#: in-memory data). Then the best is polished by SQUAREM-PMF under its deeper rule,
#: and after it the others within POLISH_REACH log-likelihood units (or
#: ``POLISH_REACH_TOL`` times the tolerance's own slack ``tol * |L|`` when that is
#: larger) of both the refined best and its polished value: a start that the best
#: left further behind in polishing is not at its optimum; both under the deeper rule
#: (:func:`bayespmf.fit.squarem.squarem_pmf_converged`), which carries it through the
#: stalls near saddles where EM's rule stops it short: so the estimate returned ends
#: where EM ends, and the starts counted as reaching it are counted on polished values.
#: The deeper rule on every refined start cost most of the fit on starts that crawl
#: along a ridge far below the best, each running out its ``max_iter`` under it, where
#: its last digits change nothing (:ref:`bench-default-fit`).
POLISH_REACH = 1.0

POLISH_REACH_TOL = 100.0

#: The polish of a round spends at most POLISH_SHARE times the EM maps that the round's
#: exploration and first refinement stage spent together (deterministic: maps, not
#: seconds). On a likelihood with latent structure the polish needs a small fraction of
#: that (UCI Car: tens of maps after tens of thousands). Where the likelihood is nearly
#: flat (rows without latent structure, a model with more classes than the data
#: support) the deep rule would crawl for as long as ``max_iter`` allows, one start
#: after another, along a ridge where the last digits of the log-likelihood change
#: nothing the optima table reports (:ref:`bench-default-fit`). When the budget ends a
#: polish before the deep rule holds, the fit says so (``info["polish_cut"]``, a
#: ``ConvergenceWarning`` with the estimate of the gain still to come), and
#: ``fit_latent_class(data, F, init=[fit.params], n_init=1)`` carries the estimate
#: on under the deep rule alone. The budget is at least POLISH_MIN_MAPS: after a small
#: search (few starts on small data) the polish of a few starts can need more maps than
#: the search, at a cost of milliseconds.
POLISH_SHARE = 1.0

POLISH_MIN_MAPS = 2000

#: Bytes the arrays of the starts advanced together may take (by
#: :func:`~bayespmf.fit.memory.memory_estimate`'s ``"exploration"`` per start), in
#: the exploration and the refinement alike: beyond it the starts run in blocks, so
#: that the fit's memory is bounded by the data and one block, not by ``n_init``
#: (one variable of 100,000 categories: :ref:`bench-default-fit`).
BLOCK_BYTES = 256 * 2**20

#: Wide data: at least this many entries ``(sum I)^2`` in the pairwise block matrix of
#: the CNMF-SPA start. There ``"auto"`` (1) builds that start from the contiguous and
#: interleaved candidate splits only (``n_splits=0``: 8 candidates, not 24), chooses
#: the split by misfit (no bootstrap) and solves its NNLS problems batched
#: (``cnmf_spa(selection="misfit", n_splits=0, batched=True)``), and (2) lets every
#: start leave the exploration batch once it is stationary or cannot be among the
#: refined ones (``_explore_each``), instead of all starts running until the last is
#: stationary. The fit records it in ``info["wide_data"]``.
#:
#: Why there (:ref:`bench-wide-data`): the old spectral start's cost grows with the
#: entries while EM's stays small, and 2**19 (sum I >= 725) is where that cost becomes
#: noticeable. The shipped data sets and the benchmark cases
#: (benchmarks/_lca_suite.py) stay far below, so their fits are unchanged. The misfits
#: of the 8 candidates still differ widely (a split without anchor rows shows), so the
#: choice among them stays. With and without the gate on wide binary data the default
#: reached the same best log-likelihood, several times faster with it.
#: Set it to ``math.inf`` for the path without the gate (benchmarks/bench_wide.py).
WIDE_BLOCK_ENTRIES = 2**19

#: The options of the CNMF-SPA start on wide data (see WIDE_BLOCK_ENTRIES).
WIDE_CNMF_SPA = {"selection": "misfit", "n_splits": 0, "batched": True}

#: The best log-likelihood counts as *replicated* when at least MIN_BEST_STARTS refined
#: independent starts (basin hops excluded), and at least MIN_BEST_SHARE of them,
#: reached it (Mplus's rule is the first:
#: "the best loglikelihood value has been replicated"; the share matters once many
#: starts are refined). With the default ``n_init`` a best value that is not replicated,
#: or that the last round raised, triggers another round of DEFAULT_N_INIT starts (half
#: basin hops from the best optima so far), up to MAX_ROUNDS rounds; a best still not
#: replicated, or still rising, then raises ``LocalOptimumWarning``. On the suite of
#: benchmarks/mle_reliability.py the best of one round was replicated on most cases but
#: reached by one start only (and below the best known) on the two MovieLens subsets,
#: whose likelihoods have a distinct optimum for nearly every start; there each round
#: of hops raised the best (:ref:`bench-n-init`).
MIN_BEST_STARTS = 2

#: Later rounds of :func:`multistart` draw PERTURB_SHARE of their starts as basin hops
#: from the N_ANCHORS best optima so far (each moved a share U(PERTURB_RANGE) of the way
#: toward a uniform random start; iterated local search), the rest afresh.
PERTURB_SHARE = 0.5

N_ANCHORS = 5

PERTURB_RANGE = (0.05, 0.5)

MIN_BEST_SHARE = 0.05

#: Weight of the data's one-way frequencies in a row-seeded start (rows_start): the
#: seed row's observed categories get 1 - ROW_SEED_SMOOTHING of the mass, so every
#: category stays possible in every class.
ROW_SEED_SMOOTHING = 0.5


class LocalOptimumWarning(UserWarning):
    """The best log-likelihood was reached by too few starts: it may not be the MLE."""


class LatentClassFit(NamedTuple):
    """What :func:`~bayespmf.fit.fit_latent_class` returns.

    Attributes
    ----------
    params : LatentClassParams
        The estimate (for ``"auto"``: the best optimum).
    loglik : float
        Log-likelihood of ``params`` on the fitted rows (nan for methods that never
        touch the rows, e.g. ``"cnmf-spa"`` on Dask data).
    n_iter : int
        Iterations of the iterative stage (for ``"auto"``: of the best start).
    loglik_trace : ndarray
        Objective after each iteration of the iterative stage (EM stages: total
        log-likelihood), empty for methods without one.
    converged : bool
    info : dict
        Details from the stages (e.g. the chosen CNMF-SPA split, every start's result).
    optima : pandas.DataFrame or None
        ``"auto"`` only: one row per distinct optimum, best first (:func:`optima_table`).
    n_init_best : int or None
        ``"auto"`` only: starts that reached the best optimum.
    optima_params : list of LatentClassParams
        ``"auto"`` only: the parameters of each row of ``optima``.
    """

    params: LatentClassParams
    loglik: float
    n_iter: int
    loglik_trace: np.ndarray
    converged: bool
    info: dict
    optima: pd.DataFrame | None = None
    n_init_best: int | None = None
    optima_params: list | None = None


def floor_params(params: LatentClassParams, floor: float = INIT_FLOOR) -> LatentClassParams:
    """Every entry at least ``floor``, then renormalized onto the simplex."""
    w = np.maximum(params.weights, floor)
    fs = [np.maximum(a, floor) for a in params.factors]
    return LatentClassParams(w / w.sum(), [a / a.sum(axis=0, keepdims=True) for a in fs])


def rows_start(
    data: CategoricalData, n_components: int, random_state=None
) -> LatentClassParams:
    """A start seeded on ``n_components`` rows chosen k-means++-style (D^2 sampling).

    The first seed row is drawn uniformly; each next one with probability proportional
    to the squared share of disagreeing entries (over the entries both observe) to its
    nearest seed. Class ``f`` gets equal weight and, for each variable, the mixture
    ``(1 - s) * onehot(seed_f) + s * frequencies`` with ``s = ROW_SEED_SMOOTHING`` (the
    one-way frequencies alone where the seed row is missing).

    Examples
    --------
    >>> d = CategoricalData([[0, 1], [1, 0], [0, 1], [1, 0]], [2, 2])
    >>> p = rows_start(d, 2, random_state=0)
    >>> [a.sum(axis=0).round(12).tolist() for a in p.factors]
    [[1.0, 1.0], [1.0, 1.0]]
    """
    rng = check_random_state(random_state)
    codes = np.asarray(data.codes)
    n_cat = np.asarray(data.n_categories)
    n_rows = codes.shape[0]
    observed = codes >= 0
    seeds = [int(rng.integers(n_rows))]
    dist = np.full(n_rows, np.inf)
    for _ in range(1, n_components):
        s = codes[seeds[-1]]
        both = observed & (s >= 0)
        n_both = both.sum(axis=1)
        differ = (both & (codes != s)).sum(axis=1)
        d = np.where(n_both > 0, differ / np.maximum(n_both, 1), 1.0)
        dist = np.minimum(dist, d)
        p = dist**2
        total = p.sum()
        # all rows identical to a seed: any row will do
        seeds.append(
            int(rng.choice(n_rows, p=p / total) if total > 0 else rng.integers(n_rows))
        )
    # all variables at once (stacked blocks): per variable, the one-way counts + 1
    # over their sum (integers, so the sums are exact), then each seed's mixture
    offsets = offsets_of(n_cat)
    counts = np.bincount((codes + offsets[:-1])[observed], minlength=int(offsets[-1]))
    counts = counts.astype(float) + 1.0
    freq = counts / np.repeat(np.add.reduceat(counts, offsets[:-1]), n_cat)
    a = np.repeat(freq[:, None], n_components, axis=1)
    for f, r in enumerate(seeds):
        seen = codes[r] >= 0
        rows = np.repeat(seen, n_cat)
        a[rows, f] *= ROW_SEED_SMOOTHING
        a[offsets[:-1][seen] + codes[r][seen], f] += 1.0 - ROW_SEED_SMOOTHING
    return LatentClassParams(
        np.full(n_components, 1.0 / n_components), split_factors(a, n_cat)
    )


def random_starts(
    rows: CategoricalData, n_components: int, n: int, random_state=None
) -> list:
    """``n`` random starts alternating row seeds (:func:`rows_start`) and uniform ones.

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(100, [2, 3], n_components=2, random_state=0)
    >>> [p.weights.size for p in random_starts(data, 2, 3, random_state=0)]
    [2, 2, 2]
    """
    rng = check_random_state(random_state)
    return [
        rows_start(rows, n_components, rng)
        if k % 2 == 0
        else init_random(rows.n_categories, n_components, rng)
        for k in range(n)
    ]


def _match_distance(a: LatentClassParams, b: LatentClassParams) -> float:
    """Largest parameter difference after matching b's classes to a's (Hungarian)."""
    from bayespmf.metrics import match_components

    sa, sb = stack_factors(a.factors), stack_factors(b.factors)
    ta = np.vstack([sa, a.weights[None, :]])
    tb = np.vstack([sb, b.weights[None, :]])
    perm = match_components(tb, ta)
    return float(np.max(np.abs(ta - tb[:, perm])))


def optima_table(results, labels) -> tuple[pd.DataFrame, list, np.ndarray]:
    """Group refined starts into distinct optima by their log-likelihoods.

    Parameters
    ----------
    results : list of (LatentClassParams, loglik, converged)
    labels : list of str
        The kind of each start (e.g. ``"cnmf-spa"``, ``"random"``, ``"rows"``).

    Returns
    -------
    table : pandas.DataFrame
        One row per optimum, best first: ``loglik``, ``gap`` (to the best),
        ``n_starts``, ``share`` (of the starts given), ``starts`` (their indices),
        ``kinds``, ``converged`` (all of its starts converged) and ``spread``: the
        largest parameter difference, after matching labels (Hungarian), between a
        start and the optimum's first start. A spread above ``OPTIMUM_PARAM_ATOL``
        means that different parameters reach the same likelihood (a flat ridge: the
        parameters are weakly identified there).
    params : list of LatentClassParams
        The parameters of each optimum (of its best start).
    group : ndarray of int
        The optimum (row of ``table``) each start reached.

    Notes
    -----
    Starts are the same optimum when their log-likelihoods differ by at most
    ``OPTIMUM_LOGLIK_ATOL`` from the optimum's best start (label switching does not
    change the likelihood).
    """
    order = sorted(range(len(results)), key=lambda i: -results[i][1])
    reps: list[int] = []
    group = np.empty(len(results), dtype=np.int64)
    for i in order:
        if reps and results[reps[-1]][1] - results[i][1] <= OPTIMUM_LOGLIK_ATOL:
            group[i] = len(reps) - 1
        else:
            group[i] = len(reps)
            reps.append(i)
    best = results[reps[0]][1]
    rows = []
    for g, r in enumerate(reps):
        members = np.flatnonzero(group == g)
        spread = max(_match_distance(results[r][0], results[i][0]) for i in members)
        rows.append(
            {
                "loglik": results[r][1],
                "gap": best - results[r][1],
                "n_starts": int(members.size),
                "share": members.size / len(results),
                "starts": members.tolist(),
                "kinds": sorted({labels[i] for i in members}),
                "converged": bool(all(results[i][2] for i in members)),
                "spread": spread,
            }
        )
    table = pd.DataFrame(rows)
    table.index.name = "optimum"
    return table, [results[r][0] for r in reps], group


def _perturbed(anchor: LatentClassParams, n_cat, n_components, rng) -> LatentClassParams:
    """An optimum moved part of the way toward a random start (a basin hop)."""
    eta = rng.uniform(*PERTURB_RANGE)
    other = init_random(n_cat, n_components, rng)
    return LatentClassParams(
        (1 - eta) * anchor.weights + eta * other.weights,
        [
            (1 - eta) * a + eta * b
            for a, b in zip(anchor.factors, other.factors, strict=True)
        ],
    )


def _wide_data(n_categories) -> dict | None:
    """What ``"auto"`` changes on wide data (:data:`WIDE_BLOCK_ENTRIES`), or None."""
    total = int(np.sum(n_categories))
    if total**2 < WIDE_BLOCK_ENTRIES:
        return None
    return {
        "reason": f"the pairwise block matrix has (sum of n_categories)^2 = {total**2} "
        f"entries, at least WIDE_BLOCK_ENTRIES = {WIDE_BLOCK_ENTRIES}",
        "block_entries": total**2,
        "threshold": WIDE_BLOCK_ENTRIES,
        "spectral_start": f"cnmf_spa options {WIDE_CNMF_SPA}",
        "exploration": "each start stops once stationary or out of the refined share",
    }


def _build_starts(source, n_components, n_init, init, rng, anchors=(), wide=None):
    """The starts of ``"auto"`` and the kinds of start that could not be made.

    ``anchors`` (later rounds): the best optima so far; PERTURB_SHARE of the starts
    are random perturbations of them, cycling through the anchors. ``wide``: the
    record of :func:`_wide_data` (the cheaper CNMF-SPA start), or None.
    """
    n_cat = source.n_categories
    if isinstance(init, list | tuple):
        return [("given", p) for p in init], {}
    starts: list[tuple[str, Any]] = []
    skipped: dict[str, str] = {}
    rows = None
    if anchors:
        n_hops = int(PERTURB_SHARE * n_init)
        starts += [
            ("perturbed", _perturbed(anchors[i % len(anchors)], n_cat, n_components, rng))
            for i in range(n_hops)
        ]
    if init in ("auto", "more"):
        need = memory_estimate("cnmf-spa", n_cat, n_components)["pairwise marginals"]
        budget = memory.available_memory()  # via the module: one place to patch
        if init == "auto" and budget is not None and need > budget:
            skipped["cnmf-spa"] = (
                f"its pairwise marginals would need about {format_gib(need)} (sum of "
                f"n_categories = {int(np.sum(n_cat))}), more than the {format_gib(budget)} "
                "of memory available"
            )
            warnings.warn(
                f"fit_latent_class(method='auto'): the CNMF-SPA start was left out: "
                f"{skipped['cnmf-spa']}. The fit runs EM (SQUAREM-PMF) from the random "
                "and row-seeded starts only.",
                MemoryBudgetWarning,
                stacklevel=4,
            )
        elif init == "auto":  # CNMF-SPA: in the first round only ("more": later rounds)
            fast = WIDE_CNMF_SPA if wide else {}
            try:
                spa, _ = cnmf_spa(
                    source.pairwise_marginals(), n_components, random_state=rng, **fast
                )
                starts.append(("cnmf-spa", floor_params(spa)))
            except ValueError as err:  # e.g. a rank beyond CNMF-SPA's split bound
                skipped["cnmf-spa"] = str(err)
        try:
            rows = source.categorical()
        except DataValidationError as err:  # rows not in memory (Dask)
            skipped["rows"] = str(err)
    while len(starts) < n_init:
        if rows is not None and len(starts) % 2 == 0:
            starts.append(("rows", rows_start(rows, n_components, rng)))
        else:
            starts.append(("random", init_random(n_cat, n_components, rng)))
    return starts[:n_init], skipped


def _explore(source, n_components, starts, n_cycles, keep=None, work=None):
    """Advance every start by ``n_cycles`` batched SQUAREM-PMF cycles.

    Returns the stacked states ``(weights (K, F), factors (P, K, F))`` and each
    start's log-likelihood after the last cycle's first map (non-decreasing).

    The cycles stop early once a whole cycle changed no start's log-likelihood by more
    than rounding (``ROUNDOFF``, the converged test of :mod:`bayespmf.fit.loop`):
    every start is then at an EM fixed point and further cycles cannot reorder them
    (wide, well-separated data: 2000 binary items reach it after 6 of 20 cycles).
    With ``keep`` (wide data, :data:`WIDE_BLOCK_ENTRIES`: the number of starts that
    will be refined) each start leaves the batch on its own, keeping its state, once it
    is stationary or cannot be among the ``keep`` best (:func:`_explore_each`).

    When the arrays of all starts at once would take more than :data:`BLOCK_BYTES`, or
    more than the available memory (:func:`memory_estimate`'s ``"exploration"``), the
    starts run in blocks that do not, each block to the same rule. ``work`` (a dict),
    when given, has its ``"explore"`` entry raised by the start-maps spent (one start
    mapped once is one).
    """
    n_cat = source.n_categories
    kernel = source.em_kernel(n_components, "numba")
    size = _block_size(n_cat, n_components, len(starts))
    if size == len(starts):
        return _explore_batch(kernel, n_cat, starts, n_cycles, keep, work)
    # the blocks' results go straight into arrays of all starts (no list of parts and
    # concatenated copy side by side)
    w = np.empty((len(starts), n_components))
    a = np.empty((int(np.sum(n_cat)), len(starts), n_components))
    loglik = np.empty(len(starts))
    for i in range(0, len(starts), size):
        part = slice(i, i + size)
        w[part], a[:, part], loglik[part] = _explore_batch(
            kernel, n_cat, starts[part], n_cycles, keep, work, loglik[:i]
        )
    return w, a, loglik


def _explore_best(source, n_components, starts, n_cycles, n_best, keep=None, work=None):
    """:func:`_explore`, keeping the states of the ``n_best`` best starts only.

    Returns ``(states, loglik)``: ``states`` maps the index of each of the ``n_best``
    starts with the highest explored log-likelihood (ties: the earlier start) to its
    ``(weights (F,), factors (P, F))``, and ``loglik`` holds every start's explored
    log-likelihood. Between blocks (:data:`BLOCK_BYTES`) only the best states so far
    are held, so the memory is that of one block and ``n_best`` states, not of every
    start.
    """
    n_cat = source.n_categories
    kernel = source.em_kernel(n_components, "numba")
    size = _block_size(n_cat, n_components, len(starts))
    loglik = np.empty(len(starts))
    best: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i in range(0, len(starts), size):
        w, a, loglik[i : i + size] = _explore_batch(
            kernel, n_cat, starts[i : i + size], n_cycles, keep, work, loglik[:i]
        )
        best.update({i + j: (w[j], a[:, j].copy()) for j in range(w.shape[0])})
        held = np.array(sorted(best))
        order = np.lexsort((held, -loglik[held]))  # np.argsort(-loglik, "stable")
        best = {int(k): best[int(k)] for k in held[order[:n_best]]}
    return best, loglik


def _block_size(n_cat, n_components, n_start) -> int:
    """Starts advanced together: all, or as many as :data:`BLOCK_BYTES` holds.

    The budget is the smaller of ``BLOCK_BYTES`` and the memory available, read from
    :func:`memory_estimate`'s per-start ``"exploration"`` figure; at least one start.
    """
    per_start = memory_estimate("auto", n_cat, n_components, n_init=1)["exploration"]
    budget = memory.available_memory()  # via the module: one place to patch
    budget = BLOCK_BYTES if budget is None else min(budget, BLOCK_BYTES)
    return int(max(1, min(n_start, budget // per_start)))


def _explore_batch(kernel, n_cat, starts, n_cycles, keep=None, work=None, earlier=()):
    """:func:`_explore` of one batch of starts.

    ``earlier``: the explored log-likelihoods of the starts of earlier blocks, which
    count in the ``keep`` best of :func:`_explore_each` as this block's own do.
    """
    w = np.stack([np.asarray(p.weights, dtype=float) for _, p in starts])
    a = np.stack([stack_factors(p.factors) for _, p in starts], axis=1)
    loglik = np.full(len(starts), -np.inf)
    work = {} if work is None else work
    if keep is not None:
        return _explore_each(kernel, n_cat, w, a, loglik, n_cycles, keep, work, earlier)
    for _ in range(n_cycles):
        before = loglik
        w, a, loglik, evals = batched_squarem_pmf_step(kernel.step, w, a, n_cat)
        work["explore"] = work.get("explore", 0) + evals * w.shape[0]
        with np.errstate(invalid="ignore"):
            change = np.abs(loglik - before)
        if np.all(change <= ROUNDOFF * np.maximum(np.abs(loglik), 1.0)):
            break
    return w, a, loglik


def _explore_each(kernel, n_cat, w, a, loglik, n_cycles, keep, work, earlier=()):
    """:func:`_explore_batch` where each start leaves the batch on its own (wide data).

    A start leaves, keeping the state of that cycle, after the first cycle that

    * is stationary for it: its log-likelihood changed by no more than rounding since
      the last cycle, or over the cycle's first EM map (the second map of
      :func:`~bayespmf.kernels.squarem.batched_squarem_pmf_step` reports the
      log-likelihood of the first one's result; the start was then already at an EM
      fixed point, which saves the confirming cycle), or
    * leaves it out of the ``keep`` best: it trails the ``keep``-th best
      log-likelihood of the batch (which can only rise) by more than its gain over
      the cycle times the cycles left. EM's gains shrink as a start converges, so
      this extrapolation overstates what it can still gain (a start escaping a
      saddle, whose gains grow again, is the exception the old rule would have let
      climb). The ``keep`` best are taken over this batch and ``earlier`` (the final
      log-likelihoods of the blocks explored before it), so that a block of few starts
      leaves out as many as the whole batch would.

    On wide binary data (benchmarks/bench_wide.py) most starts are stationary after
    a couple of cycles, so the batched maps cover a fraction of the start-cycles of
    running all starts until the last is stationary; starts crawling far below the
    ``keep``-th best can still run every cycle before they are left out
    (:ref:`bench-wide-data`). A NaN change (a start at -inf)
    leaves on neither count, as in the test of all starts together.
    """
    active = np.arange(w.shape[0])
    # the keep best of the earlier blocks are fixed: only they can be among the keep
    # best of earlier and this batch together
    earlier = np.sort(np.asarray(earlier, dtype=float))[::-1][:keep]
    rank_of_keep = max(w.shape[0] + earlier.size - keep, 0)  # ascending order
    maps: list = []

    def step(weights, factors):
        out = kernel.step(weights, factors)
        maps.append(out[2])
        return out

    for cycle in range(n_cycles):
        maps.clear()
        w_new, a_new, ll, evals = batched_squarem_pmf_step(
            step, w[active], a[:, active], n_cat
        )
        work["explore"] = work.get("explore", 0) + evals * active.size
        with np.errstate(invalid="ignore"):
            gain = ll - loglik[active]
            change = np.minimum(np.abs(gain), np.abs(maps[1] - ll))
            w[active], a[:, active], loglik[active] = w_new, a_new, ll
            pool = np.concatenate([earlier, loglik])
            bar = np.partition(pool, rank_of_keep)[rank_of_keep]
            behind = ll + (n_cycles - 1 - cycle) * gain < bar
        stationary = change <= ROUNDOFF * np.maximum(np.abs(ll), 1.0)
        active = active[~(stationary | behind)]
        if active.size == 0:
            break
    return w, a, loglik


def _refine_batched(kernel, n_cat, w, a, *, max_iter, tol, bar, max_evals=None):
    """Every start by batched SQUAREM-PMF cycles until EM's rule holds for it.

    ``w`` (K, F) and ``a`` (P, K, F) are the starts, advanced in place. A start leaves the
    batch after the cycle at which EM's stopping rule (:func:`~bayespmf.fit.loop.
    predicted_gain` at most ``tol * max(|L|, 1)``, on its own trace of cycle
    log-likelihoods) holds for it, keeping that cycle's result, as
    :func:`~bayespmf.fit.loop.iterate` returns the state one step past its trace.

    Returns ``(traces, n_iter, n_evals, converged)``: per start its trace (a list),
    cycles, EM maps (the batch's maps while it was in the batch) and whether the rule
    held within ``max_iter`` cycles. ``max_evals`` bounds the maps of all starts
    together: a cycle starts only while
    :data:`~bayespmf.fit.squarem.SQUAREM_PMF_CYCLE_MAPS` of them per start remain.
    """
    n_start = w.shape[0]
    traces: list[list[float]] = [[] for _ in range(n_start)]
    n_iter = np.zeros(n_start, dtype=np.int64)
    n_evals = np.zeros(n_start, dtype=np.int64)
    converged = np.zeros(n_start, dtype=bool)
    active = np.arange(n_start)
    for _ in range(max_iter):
        if max_evals is not None and (
            int(n_evals.sum()) + SQUAREM_PMF_CYCLE_MAPS * active.size > max_evals
        ):
            break
        w_new, a_new, ll, evals = batched_squarem_pmf_step(
            kernel.step, w[active], a[:, active], n_cat
        )
        w[active], a[:, active] = w_new, a_new
        n_iter[active] += 1
        n_evals[active] += evals
        done = np.zeros(active.size, dtype=bool)
        for i, k in enumerate(active):
            traces[k].append(float(ll[i]))
            done[i] = predicted_gain(traces[k]) <= tol * max(abs(float(ll[i])), 1.0)
        converged[active[done]] = True
        bar.update(int(done.sum()))
        active = active[~done]
        if active.size == 0:
            break
    bar.update(int(active.size))
    return traces, n_iter, n_evals, converged


def _polish_reach(best: float, tol: float) -> float:
    """How far below the best a refined start is polished (:data:`POLISH_REACH`)."""
    return max(POLISH_REACH, POLISH_REACH_TOL * tol * max(abs(best), 1.0))


def _refine(
    kernel, n_cat, states, *, max_iter, tol, batched, progressbar, desc, work, searched=0
):
    """Refine ``states`` (a list of ``(weights, factors_stacked)``): the two stages.

    Stage 1 runs SQUAREM-PMF under EM's stopping rule at ``tol`` on every state
    (batched cycles when ``batched``: :func:`_refine_batched`; else one
    :func:`~bayespmf.fit.em.run_em` each). Stage 2 polishes the states within
    :func:`_polish_reach` of the best by SQUAREM-PMF under its own deeper rule
    (:func:`bayespmf.fit.squarem.squarem_pmf_converged`). Returns the results
    ``(params, loglik, converged)``, the :class:`~bayespmf.fit.em.EMInfo` of every
    state, which states were polished and the reach. Both stages are counted in a
    state's ``n_iter``, ``n_evals`` and trace; the best state is polished first, and
    the others only if they are also within the reach of its polished log-likelihood
    (on a nearly flat likelihood the best can climb far in polishing, and polishing
    every start that crawled beside it cost more than the rest of the fit). At most
    :data:`MIN_REFINE` states run one by one (both stages) with the full SQUAREM-PMF
    cycle, which needs far fewer maps on a nearly flat likelihood. With at
    most :data:`MIN_REFINE` states all are polished: EM's rule can stop a start in a
    stall far below the best that the deeper rule carries through, and with so few
    starts each one counts in whether the best is replicated. The
    polish is batched like stage 1 when ``batched``. ``work``'s ``"refine"`` and
    ``"polish"`` entries are raised by the start-maps of each stage (the map that gives
    a returned state's log-likelihood included).

    After an exploration (``searched``: its maps, nonzero) the polish spends at most
    :data:`POLISH_SHARE` times the maps of the exploration and stage 1 together, and at
    least :data:`POLISH_MIN_MAPS` (each SQUAREM-PMF cycle starts only while
    :data:`~bayespmf.fit.squarem.SQUAREM_PMF_CYCLE_MAPS` of them remain): a state whose
    polish the budget ended before the deeper rule held keeps
    ``converged=False``; a state left without budget is not polished. The last value
    returned, ``cut``, is None unless the polish of the best state was cut short, else
    ``(its index, budget, its predicted gain still to come, the deeper rule's
    bound, its last cycle's gain)``.
    """
    from bayespmf._progress import progress_bar
    from bayespmf.fit.em import EMInfo

    n_start = len(states)
    refine_before = work["refine"]
    squarem = functools.partial(
        run_em,
        kernel,
        n_cat=n_cat,
        accelerate="squarem",
        max_iter=max_iter,
        tol=tol,
        owner="fit_latent_class",
        warn=False,
    )
    w = np.stack([np.asarray(s[0], dtype=float) / np.sum(s[0]) for s in states])
    a = np.stack([np.asarray(s[1], dtype=float) for s in states], axis=1)
    # a few starts run one by one: the full SQUAREM-PMF cycle (its legal-edge search)
    # crawls along a flat likelihood in far fewer maps than the batched cycle, and
    # batching a few starts saves little
    batched = batched and n_start > MIN_REFINE
    with progress_bar(n_start, desc, enabled=progressbar) as bar:
        if batched:
            size = _block_size(n_cat, w.shape[1], n_start)
            traces, n_iter, n_evals, converged = [], [], [], []
            for i in range(0, n_start, size):
                part = slice(i, i + size)  # views: the blocks' states are set in place
                tr, it, ev, conv = _refine_batched(
                    kernel, n_cat, w[part], a[:, part], max_iter=max_iter, tol=tol, bar=bar
                )
                traces += tr
                n_iter.append(it)
                n_evals.append(ev)
                converged.append(conv)
            n_iter, n_evals, converged = map(np.concatenate, (n_iter, n_evals, converged))
            loglik = np.concatenate(
                [
                    kernel.step(w[i : i + size], a[:, i : i + size])[2]
                    for i in range(0, n_start, size)
                ]
            )
            work["refine"] += int(n_evals.sum()) + n_start
        else:
            traces, n_iter, n_evals, converged, loglik = [], [], [], [], []
            for k in range(n_start):
                params, info = squarem(w[k], a[:, k], rule="aitken")
                w[k], a[:, k] = params.weights, stack_factors(params.factors)
                traces.append(list(info.loglik_trace))
                n_iter.append(info.n_iter)
                n_evals.append(info.n_evals)
                converged.append(info.converged)
                loglik.append(info.loglik)
                work["refine"] += info.n_evals + 1
                bar.update()
            loglik = np.asarray(loglik, dtype=float)
        bar.set_postfix(best=float(np.max(loglik)))
    infos = [
        EMInfo(
            int(n_iter[k]),
            int(n_evals[k]),
            np.asarray(traces[k]),
            bool(converged[k]),
            float(loglik[k]),
        )
        for k in range(n_start)
    ]

    # without an exploration (starts given, or too few to explore) the polish is
    # bounded by max_iter alone: those starts are all the fit has
    budget = POLISH_SHARE * (searched + work["refine"] - refine_before)
    budget = max(budget, POLISH_MIN_MAPS) if searched else np.inf
    left = [budget]  # maps the polish may still spend
    capped = np.zeros(n_start, dtype=bool)  # polish cycles bounded by the budget

    def maps_left(reserve):
        """The budget left for cycles, ``reserve`` closing maps kept (None: no budget)."""
        return None if np.isinf(left[0]) else int(left[0]) - reserve

    def polish(chosen):
        """Polish the states ``chosen`` in place; their :class:`EMInfo` (stage 2).

        Returns the polished states (a prefix of ``chosen`` when the budget ran out)
        and their infos.
        """
        if not batched:
            out = []
            for k in chosen:
                if left[0] < SQUAREM_PMF_CYCLE_MAPS + 1:  # a cycle and the closing map
                    break
                params, info = squarem(w[k], a[:, k], max_evals=maps_left(1))
                capped[k] = not info.converged and info.n_iter < max_iter
                w[k], a[:, k] = params.weights, stack_factors(params.factors)
                left[0] -= info.n_evals + 1
                out.append(info)
            return chosen[: len(out)], out
        deep = tol * SQUAREM_PMF_TOL_SCALE  # each to the deep rule on its own trace
        # as many as one cycle each and the closing map leaves in the budget
        if np.isfinite(left[0]):
            chosen = chosen[: max(int(left[0] // (SQUAREM_PMF_CYCLE_MAPS + 1)), 0)]
        if chosen.size == 0:
            return chosen, []
        wp, ap = w[chosen], a[:, chosen]
        size = _block_size(n_cat, w.shape[1], chosen.size)
        out = []
        with progress_bar(chosen.size, f"{desc}, polish", enabled=progressbar) as bar:
            for i in range(0, chosen.size, size):
                part = slice(i, i + size)
                tr, it, ev, conv = _refine_batched(
                    kernel,
                    n_cat,
                    wp[part],
                    ap[:, part],
                    max_iter=max_iter,
                    tol=deep,
                    bar=bar,
                    max_evals=maps_left(min(size, chosen.size - i)),
                )
                left[0] -= int(ev.sum())
                ll = kernel.step(wp[part], ap[:, part])[2]
                out += [
                    EMInfo(
                        int(it[j]),
                        int(ev[j]),
                        np.asarray(tr[j]),
                        bool(conv[j]),
                        float(ll[j]),
                    )
                    for j in range(len(tr))
                ]
        w[chosen], a[:, chosen] = wp, ap
        left[0] -= len(out)  # the closing maps
        capped[chosen] = [not e.converged and e.n_iter < max_iter for e in out]
        return chosen, out

    best = float(np.max(loglik))
    polished = np.zeros(n_start, dtype=bool)
    reach = _polish_reach(best, tol) if np.isfinite(best) else np.nan
    if np.isfinite(best):
        # the best first; then the others that can still reach its polished value
        top = int(np.argmax(loglik))
        done, first_info = polish(np.array([top]))
        chosen, second = [done], [first_info]
        if n_start <= MIN_REFINE:  # few starts: each counts for the replication
            others = np.flatnonzero(np.arange(n_start) != top)
        elif first_info:
            others = np.flatnonzero(loglik >= loglik[top] - reach)
            others = others[
                (others != top) & (loglik[others] >= first_info[0].loglik - reach)
            ]
        else:
            others = np.array([], dtype=int)
        if others.size:
            done, infos_others = polish(others)
            chosen.append(done)
            second.append(infos_others)
        chosen = np.concatenate(chosen).astype(int)
        polished[chosen] = True
        for k, info in zip(chosen, itertools.chain(*second), strict=True):
            first = infos[k]
            work["polish"] += info.n_evals + 1
            loglik[k] = info.loglik
            infos[k] = EMInfo(
                first.n_iter + info.n_iter,
                first.n_evals + info.n_evals,
                np.concatenate([first.loglik_trace, info.loglik_trace]),
                bool(info.converged),
                float(info.loglik),
            )
    cut = None
    if np.isfinite(best):
        top = int(np.argmax(loglik))
        trace = infos[top].loglik_trace
        if polished[top] and capped[top] and not infos[top].converged:
            gain = predicted_gain(list(trace))
            bound = tol * SQUAREM_PMF_TOL_SCALE * max(abs(float(trace[-1])), 1.0)
            last = float(trace[-1] - trace[-2]) if trace.size > 1 else np.nan
            cut = (top, float(budget), float(gain), float(bound), last)
    results = [
        (
            LatentClassParams(w[k].copy(), split_factors(a[:, k].copy(), n_cat)),
            float(loglik[k]),
            infos[k].converged,
        )
        for k in range(n_start)
    ]
    return results, infos, polished, reach, cut


def _replicated(logliks, kinds) -> tuple[int, int]:
    """Independent starts at the best log-likelihood, and how many replication asks for.

    Basin hops (kind ``"perturbed"``) start next to optima already found, so only the
    other starts count as independent evidence.
    """
    logliks = np.asarray(logliks, dtype=float)
    independent = np.array([kind != "perturbed" for kind in kinds])
    at_best = logliks >= logliks.max() - OPTIMUM_LOGLIK_ATOL
    n_best = int(np.sum(at_best & independent))
    return n_best, max(MIN_BEST_STARTS, math.ceil(MIN_BEST_SHARE * independent.sum()))


def multistart(
    source,
    n_components: int,
    *,
    n_init: int | None = None,
    init="auto",
    max_iter: int,
    tol: float,
    random_state=None,
    backend: str = "auto",
    progressbar: bool = False,
    explore_cycles: int = EXPLORE_CYCLES,
    n_refine: int | None = None,
    max_rounds: int = 1,
) -> LatentClassFit:
    """The maximum-likelihood estimate from several starts (``method="auto"``).

    Parameters
    ----------
    source : data source
        See :func:`~bayespmf.fit.fit_latent_class`.
    n_components : int
    n_init : int, optional
        Number of starts (of each round); default
        :data:`~bayespmf.fit.defaults.DEFAULT_N_INIT`.
    init : "auto", "random" or list of LatentClassParams
        ``"auto"``: the CNMF-SPA estimate (when it can be computed at this rank and
        its pairwise marginals fit in the available memory), then random starts
        alternating between row seeds (:func:`rows_start`; in-memory data only) and
        RAND-EM's uniform start
        (:func:`bayespmf.kernels.em.init_random`); ``"random"``: uniform random
        starts only; a list: these starts (then ``n_init`` is their number and there
        is one round).
    max_iter, tol : int, float
        Of every refined start's SQUAREM-PMF run.
    random_state : None, int or numpy.random.Generator
        Seeds the random starts (and CNMF-SPA's split search).
    backend : str
        Of the EM map of the refinement (:func:`bayespmf.kernels.em.build_em_kernel`).
    progressbar : bool
    explore_cycles : int, default EXPLORE_CYCLES
        Batched SQUAREM-PMF cycles of every start before the cut; 0 refines every start
        (no exploration stage).
    n_refine : int, optional
        Starts refined after exploration, per round (default ``max(MIN_REFINE,
        REFINE_SHARE * n_init)``).
    max_rounds : int, default 1
        Rounds of ``n_init`` starts at most: another round runs while the best
        log-likelihood is not replicated (fewer than ``max(MIN_BEST_STARTS,
        MIN_BEST_SHARE * refined)`` refined starts reached it) or the last round raised
        it. The CNMF-SPA start is in the first round only; in later rounds
        ``PERTURB_SHARE`` of the starts are basin hops from the ``N_ANCHORS`` best
        optima so far (iterated local search), the rest fresh random starts.

    Returns
    -------
    LatentClassFit
        ``info["rounds"]`` is the number of rounds run; start indices (``optima``'s
        ``starts``, ``info["refined"]``) count across rounds. On wide data
        (:data:`WIDE_BLOCK_ENTRIES`) ``info["wide_data"]`` says why and what changed:
        a cheaper CNMF-SPA start, and every start leaving the exploration once it is
        stationary. ``info["work"]`` counts the start-maps (one start through the EM
        map once) of each stage: ``"explore"``, ``"refine"`` and ``"polish"``; for a
        seed it is deterministic, and it is what a fit costs beyond fixed overheads.
        ``info["refined_polished"]`` marks the refined starts polished under
        SQUAREM-PMF's deeper rule, those within ``info["polish_reach"]`` (of the last
        round) of their round's best.

    Notes
    -----
    Two stages (Mplus's initial and final stage optimizations): all starts run
    ``EXPLORE_CYCLES`` cycles of SQUAREM-PMF together, in one batched EM map
    (:class:`~bayespmf.kernels.em.NumbaEMKernel`; in-memory data), then the best
    ``max(MIN_REFINE, REFINE_SHARE * n_init)`` are refined to ``tol`` by SQUAREM-PMF
    under EM's stopping rule (together, in one batched map per cycle, on in-memory
    data), the ones then within :data:`POLISH_REACH` of the best are polished under
    SQUAREM-PMF's deeper rule (:func:`bayespmf.fit.em.run_em`), and all are grouped
    into distinct optima
    (:func:`optima_table`). Without rows in memory every start is refined. Unlike
    Mplus, which asks the user to rerun with more starts when the best value is not
    replicated, ``max_rounds > 1`` adds the starts itself.
    """
    rng = check_random_state(random_state)
    n_init = defaults.DEFAULT_N_INIT if n_init is None else n_init
    if isinstance(init, list | tuple):
        max_rounds = 1
    n_cat = source.n_categories
    offsets = offsets_of(n_cat)
    kernel = source.em_kernel(n_components, backend)
    wide = _wide_data(n_cat)
    kinds, explored, refine, results, infos = [], [], [], [], []
    work = {"explore": 0, "refine": 0, "polish": 0}
    polished: list[np.ndarray] = []
    reach = np.nan
    cuts: dict[int, dict] = {}  # result index -> its cut polish
    skipped: dict[str, str] = {}
    rounds, best_before, improved = 0, -np.inf, False
    while rounds < max_rounds:
        round_init = "more" if rounds and init == "auto" else init
        anchors = []
        if rounds:
            _, anchors, _ = optima_table(results, ["refined"] * len(results))
        starts, skip = _build_starts(
            source, n_components, n_init, round_init, rng, anchors[:N_ANCHORS], wide
        )
        skipped.update(skip)
        offset = len(kinds)
        kinds += [kind for kind, _ in starts]
        cut = n_refine
        if cut is None:
            cut = max(MIN_REFINE, math.ceil(REFINE_SHARE * len(starts)))
        chosen = list(range(len(starts)))
        explore = getattr(source, "batched", False) and explore_cycles > 0
        explored_before = work["explore"]
        if explore and len(starts) > cut:
            best, explore_loglik = _explore_best(
                source,
                n_components,
                starts,
                explore_cycles,
                cut,
                keep=None if wide is None else cut,
                work=work,
            )
            explored.append(explore_loglik)
            chosen = sorted(best)
            states = {k: (w, normalize_blocks(a, offsets)) for k, (w, a) in best.items()}
        else:
            states = {
                k: (np.asarray(p.weights, float), stack_factors(p.factors))
                for k, (_, p) in enumerate(starts)
            }
        desc = "starts" if rounds == 0 else f"starts (round {rounds + 1})"
        round_results, round_infos, round_polished, reach, round_cut = _refine(
            kernel,
            n_cat,
            [states[k] for k in chosen],
            max_iter=max_iter,
            tol=tol,
            batched=getattr(source, "batched", False) and backend in ("auto", "numba"),
            progressbar=progressbar,
            desc=desc,
            work=work,
            searched=work["explore"] - explored_before,
        )
        if round_cut is not None:
            cuts[len(results) + round_cut[0]] = dict(
                zip(
                    ("budget", "gain_to_come", "deep_bound", "last_gain"),
                    round_cut[1:],
                    strict=True,
                ),
                share=POLISH_SHARE,
                min_maps=POLISH_MIN_MAPS,
            )
        results += round_results
        infos += round_infos
        polished.append(round_polished)
        refine += [offset + k for k in chosen]
        rounds += 1
        best_now = max(r[1] for r in results)
        improved = rounds > 1 and best_now > best_before + OPTIMUM_LOGLIK_ATOL
        best_before = best_now
        n_best, need = _replicated([r[1] for r in results], [kinds[k] for k in refine])
        if n_best >= need and not improved:
            break
    labels = [kinds[k] for k in refine]
    table, optima_params, group = optima_table(results, labels)
    table["starts"] = [[refine[i] for i in members] for members in table["starts"]]
    best = int(
        np.flatnonzero(group == 0)[
            np.argmax([results[i][1] for i in np.flatnonzero(group == 0)])
        ]
    )
    info = {
        "starts": kinds,
        "rounds": rounds,
        "improved_last_round": improved,
        "explore_loglik": np.concatenate(explored) if explored else None,
        "refined": np.asarray(refine),
        "refined_loglik": np.array([r[1] for r in results]),
        "refined_n_iter": np.array([i.n_iter for i in infos]),
        "refined_n_evals": np.array([i.n_evals for i in infos]),
        "refined_converged": np.array([i.converged for i in infos]),
        "refined_polished": np.concatenate(polished),
        "polish_reach": reach,
        "polish_cut": cuts.get(best),
        "refined_optimum": group,
        "skipped_starts": skipped,
        "em": infos[best],
        "work": work,
    }
    if wide is not None:
        info["wide_data"] = wide
    return LatentClassFit(
        params=results[best][0],
        loglik=float(results[best][1]),
        n_iter=int(infos[best].n_iter),
        loglik_trace=np.asarray(infos[best].loglik_trace, dtype=float),
        converged=bool(infos[best].converged),
        info=info,
        optima=table,
        n_init_best=int(table["n_starts"].iloc[0]),
        optima_params=optima_params,
    )


def warn_optima(result: LatentClassFit, n_init: int, owner: str, scale=1.0) -> None:
    """Warn when ``"auto"``'s best optimum is not replicated.

    ``result`` is on weights of mean 1; ``scale`` puts the numbers in the message on
    the caller's (:func:`rescaled_fit`).
    """
    best = result.loglik * scale
    table = result.optima
    n_refined = int(table["n_starts"].sum())
    if n_refined < 2:
        return
    kinds = [result.info["starts"][k] for k in result.info["refined"]]
    n_best, need = _replicated(result.info["refined_loglik"], kinds)
    rounds = result.info.get("rounds", 1)
    if result.info.get("improved_last_round", False):
        warnings.warn(
            f"{owner}: the best log-likelihood ({best:.6g}) was still rising "
            f"in the last of {rounds} rounds of n_init={n_init} starts (reached by "
            f"{n_best} independent of the {n_refined} refined starts; {len(table)} "
            "distinct optima): the likelihood has many local maxima and this may not "
            f"be the maximum. Refit with a larger n_init (e.g. {4 * n_init * rounds}) and "
            "compare, or consider a smaller rank.",
            LocalOptimumWarning,
            stacklevel=3,
        )
    elif n_best < need:
        second = (
            f"; the next optimum is {table['gap'].iloc[1] * scale:.3g} log-likelihood "
            "units lower"
            if len(table) > 1
            else ""
        )
        runs = (
            f"{rounds} rounds of n_init={n_init}, basin hops not counted"
            if rounds > 1
            else f"n_init={n_init}"
        )
        warnings.warn(
            f"{owner}: the best log-likelihood ({best:.6g}) was reached by "
            f"{n_best} of the {n_refined} refined starts ({runs}; {len(table)} distinct "
            f"optima{second}), fewer than the {need} that count as replicated. It may "
            f"not be the maximum likelihood: refit with a larger n_init (e.g. "
            f"{4 * n_init * rounds}) and compare.",
            LocalOptimumWarning,
            stacklevel=3,
        )
