r"""One public fit function for latent-class PMFs, with a registry of methods.

:func:`fit_latent_class` validates, picks the method from :data:`METHODS` by name and
runs it on a *data source*: an object with ``n_categories``, ``names``, ``categories``
and the passes a method needs (``pairwise_marginals()``, ``triple_marginals()``,
``categorical()``, ``em_kernel(rank, backend)``). :class:`InMemorySource` holds rows
in memory; ``bayespmf.dask`` supplies one over chunked arrays, so the estimator
(:class:`~bayespmf.estimators.LatentClassPMF`) and the Dask path call the same function
(as scikit-learn's ``NMF`` calls ``non_negative_factorization``).

The default method, ``"auto"``, is the maximum-likelihood estimate from several starts
(:func:`multistart`): the CNMF-SPA estimate (Ibrahim & Fu, Alg. 2) and random starts
drawn from ``random_state``, each refined by SQUAREM-PMF (Chege et al., Tables I-II)
under the stopping rule of :mod:`bayespmf.fit.loop`; the best log-likelihood is kept
and the distinct optima are reported, as poLCA and Mplus do.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    as_codes,
    check_float,
    check_int,
    check_random_state,
    check_rank_limit,
)
from bayespmf.data import CategoricalData
from bayespmf.fit.cnmf import cnmf_opt
from bayespmf.fit.ctd import ctd
from bayespmf.fit.em import EMInfo, ad_em, em_start, run_em
from bayespmf.fit.juror import juror
from bayespmf.fit.loop import ROUNDOFF
from bayespmf.kernels.cnmf import cnmf_spa
from bayespmf.kernels.em import (
    build_em_kernel,
    init_random,
    normalize_blocks,
)
from bayespmf.kernels.squarem import batched_squarem_pmf_step
from bayespmf.pmf import (
    LatentClassParams,
    check_params,
    log_likelihood_rows,
    offsets_of,
    split_factors,
    stack_factors,
)

__all__ = [
    "DEFAULT_N_INIT",
    "MAX_ROUNDS",
    "EM_METHODS",
    "WEIGHTED_METHODS",
    "INIT_FLOOR",
    "METHODS",
    "InMemorySource",
    "LatentClassFit",
    "LocalOptimumWarning",
    "InsufficientMemoryError",
    "MemoryBudgetWarning",
    "available_memory",
    "memory_estimate",
    "fit_latent_class",
    "max_identifiable_rank",
    "multistart",
    "optima_table",
    "check_identifiable_rank",
    "check_sample_weight",
    "fit_from_starts",
    "random_starts",
    "rows_start",
]

#: Estimation methods and what each runs.
METHODS = {
    "auto": "maximum likelihood from several starts (CNMF-SPA and random), each refined "
    "by SQUAREM-PMF; the best kept, the distinct optima reported",
    "em": "EM from a random uniform start (RAND-EM)",
    "squarem": "SQUAREM-PMF accelerated EM from a random uniform start",
    "cnmf-spa": "CNMF-SPA (Ibrahim & Fu, Alg. 2) on the pairwise marginals",
    "cnmf-opt": "CNMF-OPT (Ibrahim & Fu, Alg. 1) started from CNMF-SPA: KL mirror descent "
    "on the pairwise marginals",
    "cnmf-spa-em": "CNMF-SPA, then EM on the full data (Ibrahim & Fu, Sec. 5)",
    "cnmf-spa-squarem": "CNMF-SPA, then SQUAREM-PMF accelerated EM",
    "juror": "JUROR (Vora et al., Alg. 1: G1+G2+G3) on one-way marginals of random "
    "2-sparse projections",
    "juror-b": "JUROR ablation G1+G3",
    "juror-c": "JUROR ablation G1+G2",
    "ctd": "CTD baseline (Kargas et al.): coupled factorization of the triple marginals",
    "ad-em": "MLE-AD-EM baseline (Yeredor & Haardt): alternating directions, then EM",
}

#: Per-stage defaults of (max_iter, tol) used when the caller gives None. The "auto"
#: refinement runs to a tighter tolerance than a single EM so that optima a few
#: hundredths of a log-likelihood unit apart are told apart.
DEFAULT_MAX_ITER = {"em": 1000, "squarem": 1000, "auto": 2000, "cnmf-opt": 3000}
DEFAULT_TOL = {"em": 1e-7, "squarem": 1e-7, "auto": 1e-8, "cnmf-opt": 1e-6}

#: Starts of ``method="auto"`` (CNMF-SPA plus random ones), chosen by measurement
#: (benchmarks/mle_reliability.py, seed 0): with 100 starts the default missed the best
#: known optimum of UCI Car (rank 4) by 11.2 and of Nursery (rank 5, 3000 rows) by 6.7
#: log-likelihood units; with 300 (30 refined) it reached both, and refining all 100
#: of 100 did not (the starts, not the pruning, were short).
DEFAULT_N_INIT = 300

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
#: MIN_REFINE) are refined to ``tol``. Measured on UCI Car, Votes and simulated binary
#: items (30 starts each): after 20 cycles the starts that end at the best optimum
#: ranked first; after 5-10 cycles some ranked 4th-22nd (Mplus's "STARTS = 20 4"
#: practice, with the stage lengths chosen by that measurement).
EXPLORE_CYCLES = 20
REFINE_SHARE = 0.1
MIN_REFINE = 4

#: Wide data: at least this many entries ``(sum I)^2`` in the pairwise block matrix of
#: the CNMF-SPA start. There ``"auto"`` (1) builds that start from the contiguous and
#: interleaved candidate splits only (``n_splits=0``: 8 candidates, not 24), chooses
#: the split by misfit (no bootstrap) and solves its NNLS problems batched
#: (``cnmf_spa(selection="misfit", n_splits=0, batched=True)``), and (2) lets every
#: start leave the exploration batch once it is stationary or cannot be among the
#: refined ones (``_explore_each``), instead of all starts running until the last is
#: stationary. The fit records it in ``info["wide_data"]``.
#:
#: Why there, measured (S = 200 binary items, F = 2, seed 0; 2 shared cores): the old
#: spectral start cost 0.34 s at sum I = 400 (1.6e5 entries), 1.4 s at 800 (6.4e5) and
#: 24 s at 4000 (1.6e7), growing with the entries while EM took 0.01-0.05 s; 2**19 (sum
#: I >= 725) is where it reaches about a second. The shipped data sets and the
#: benchmark cases (benchmarks/_lca_suite.py) stay far below: at most 2.25e4 entries
#: (MovieLens, 30 movies of 5 rating levels; Mushroom 1.4e4), so their fits are
#: unchanged. The start at 2000 items: 24 s with the bootstrap (8 replicates of 2e6
#: pairs), 9.1 s by misfit, 5.4 s batched, 1.7 s from 8 candidates; the misfits of
#: those 8 still differ 1.3-17x (a split without anchor rows shows), so the choice
#: among them stays. Fit quality, the default with and without the gate at S in
#: {200, 2000}, N in {500, 2000} binary items, F in {2, 3} (seed 0): the same best
#: log-likelihood in all 8 cases (to the last digit), 1.5-6x faster (S = 200, N =
#: 2000: 34 s -> 10 s; S = 2000, N = 2000, F = 3: 313 s -> 57 s).
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
#: replicated, or still rising, then raises ``LocalOptimumWarning``. Measured on the
#: suite of benchmarks/mle_reliability.py: the best of one round of 300 starts was
#: reached by 2-30 of 30 refined starts on 11 cases and by 1 (and below the best known)
#: on the two MovieLens subsets, whose likelihoods have a distinct optimum for nearly
#: every start; there each round of hops raised the best by 0.3-16 units.
MIN_BEST_STARTS = 2

#: Later rounds of :func:`multistart` draw PERTURB_SHARE of their starts as basin hops
#: from the N_ANCHORS best optima so far (each moved a share U(PERTURB_RANGE) of the way
#: toward a uniform random start; iterated local search), the rest afresh.
PERTURB_SHARE = 0.5
N_ANCHORS = 5
PERTURB_RANGE = (0.05, 0.5)
MIN_BEST_SHARE = 0.05
MAX_ROUNDS = 4

#: Duplicate rows are collapsed into weighted response patterns for the EM map when
#: the patterns number at most this share of the rows (below it the pass over fewer
#: rows more than pays for np.unique; benchmarks/multistart_cost.py).
COLLAPSE_MAX_SHARE = 0.8

#: Methods whose estimate is the EM fixed point, run here (AD-EM runs its own EM):
#: their max_iter warning is raised here (the other kernels warn themselves).
EM_METHODS = ("auto", "em", "squarem", "cnmf-spa-em", "cnmf-spa-squarem")

#: Methods that take ``sample_weight``: the EM methods (weighted rows; their CNMF-SPA
#: start uses weighted pairwise marginals) and CNMF-SPA / CNMF-OPT (weighted pairwise
#: marginals, :func:`bayespmf.marginals.pairwise_marginals`).
WEIGHTED_METHODS = (*EM_METHODS, "cnmf-spa", "cnmf-opt")

#: Weight of the data's one-way frequencies in a row-seeded start (rows_start): the
#: seed row's observed categories get 1 - ROW_SEED_SMOOTHING of the mass, so every
#: category stays possible in every class.
ROW_SEED_SMOOTHING = 0.5

#: Peak bytes of a fit's stages per entry of what each scales with, measured with
#: tracemalloc (the NumPy arrays of whole fits, F = 2), with a margin of 1.2-3x:
#: ``"pairwise"`` per entry of the ``(sum I)^2`` pairwise block matrix: CNMF-SPA held
#: 5.2-11.2 float64 copies of it (the marginals, pair weights, its misfit buffer, the
#: bootstrap's model, replicate and draw plan; the most for wide binary data), CNMF-OPT
#: 6.2-6.5; ``"triple"`` per entry of all triple marginals (``sum_{j<k<l} I_j I_k
#: I_l``): CTD 2.2-2.7 copies; ``"projection"`` per entry of JUROR's pair Gram matrices
#: and scatter matrix (``sum_{j<k} (I_j I_k)^2 + (sum I)^2``): 7.5-9.8 copies (24 at
#: N = 12, I = 5, where its fixed costs weigh); ``"explore"`` per entry of the stacked
#: factors of all starts of ``"auto"`` (``n_init (sum I) F``): 17.2 copies;
#: ``"rows"`` per code (``S N``): EM and SQUAREM-PMF 34 bytes; ``"factors"`` per factor
#: entry (``(sum I) F``): SQUAREM-PMF up to 2200 bytes (EM 60).
MEMORY_PER_ENTRY = {
    "pairwise": 128,
    "triple": 48,
    "projection": 128,
    "explore": 224,
    "rows": 64,
    "factors": 4096,
}

#: Methods that factor the pairwise marginals (a ``(sum I)^2`` matrix).
PAIRWISE_METHODS = ("cnmf-spa", "cnmf-opt", "cnmf-spa-em", "cnmf-spa-squarem")


class MemoryBudgetWarning(UserWarning):
    """A stage of a fit was left out because its arrays would not fit in memory."""


class InsufficientMemoryError(ValueError, MemoryError):
    """The fit asked for needs more memory than is available (a ``ValueError``)."""


def available_memory() -> int | None:
    """Bytes of memory this process can still allocate, or None when unknown.

    The smallest of the system's available memory (``MemAvailable`` of /proc/meminfo
    on Linux, else :mod:`psutil` when it is installed) and the room left under a
    cgroup v2 memory limit (containers). :func:`fit_latent_class` compares
    :func:`memory_estimate` with it before allocating.

    Examples
    --------
    >>> m = available_memory()
    >>> m is None or m >= 0
    True
    """
    found = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            import psutil

            found.append(int(psutil.virtual_memory().available))
        except Exception:  # not installed, or no reading on this platform
            pass
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        with open("/sys/fs/cgroup/memory.current") as fh:
            used = int(fh.read().strip())
        if limit != "max":
            found.append(max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g} GiB"


def memory_estimate(
    method: str, n_categories, rank: int, *, n_rows: int = 0, n_init: int | None = None
) -> dict[str, int]:
    """Estimated peak bytes of each stage of ``fit_latent_class(method=method)``.

    Parameters
    ----------
    method : str
        A key of :data:`METHODS`.
    n_categories : sequence of int
        Alphabet sizes ``I_n``.
    rank : int
    n_rows : int, default 0
        Rows ``S`` of the data (0: leave the row passes out).
    n_init : int, optional
        Starts of ``"auto"`` (default :data:`DEFAULT_N_INIT`).

    Returns
    -------
    dict
        ``{stage: bytes}``; the stages run one after another, so a fit needs about the
        largest. ``"EM"`` (every method: the rows and factors), ``"pairwise
        marginals"`` (the CNMF methods, and the CNMF-SPA start of ``"auto"``),
        ``"triple marginals"`` (CTD), ``"projection marginals"`` (JUROR) and
        ``"exploration"`` (``"auto"``: all starts at once; it runs in smaller batches
        of starts when that does not fit). Scaled from :data:`MEMORY_PER_ENTRY`.

    Examples
    --------
    >>> est = memory_estimate("cnmf-spa", [100_000, 2], 2, n_rows=10)
    >>> round(est["pairwise marginals"] / 2**30)
    1192
    >>> est["EM"] < 2**30
    True
    """
    n_cat = [int(i) for i in np.asarray(n_categories).ravel()]
    total = sum(n_cat)
    per = MEMORY_PER_ENTRY
    out = {"EM": per["rows"] * int(n_rows) * len(n_cat) + per["factors"] * total * rank}
    if method in (*PAIRWISE_METHODS, "auto"):
        out["pairwise marginals"] = per["pairwise"] * total**2
    if method == "auto":
        starts = DEFAULT_N_INIT if n_init is None else int(n_init)
        out["exploration"] = per["explore"] * starts * total * rank
    if method == "ctd":
        e1 = e2 = e3 = 0  # elementary symmetric sums: e3 = sum_{j<k<l} I_j I_k I_l
        for i in n_cat:
            e3, e2, e1 = e3 + e2 * i, e2 + e1 * i, e1 + i
        out["triple marginals"] = per["triple"] * e3
    if method.startswith("juror"):
        squares = [i * i for i in n_cat]
        pair_grams = (sum(squares) ** 2 - sum(s * s for s in squares)) // 2
        out["projection marginals"] = per["projection"] * (pair_grams + total**2)
    return out


def _n_rows(source) -> int:
    codes = getattr(source, "codes", None)
    return int(codes.shape[0]) if codes is not None else 0


def _check_memory(method, source, rank, n_init, owner) -> None:
    """Refuse a fit whose required stages cannot fit in the available memory.

    ``"auto"``'s CNMF-SPA start and exploration are not required: they are left out
    or batched at run time (:func:`_build_starts`, :func:`_explore`).
    """
    budget = available_memory()
    if budget is None:
        return
    n_cat = source.n_categories
    need = memory_estimate(method, n_cat, rank, n_rows=_n_rows(source), n_init=n_init)
    if method == "auto":
        need = {"EM": need["EM"]}
    stage, required = max(need.items(), key=lambda item: item[1])
    if required <= budget:
        return
    em_need = memory_estimate("em", n_cat, rank, n_rows=_n_rows(source))["EM"]
    total = int(np.sum(n_cat))
    if stage == "EM" or em_need > budget:
        fix = (
            "Fit fewer rows or variables, merge rare categories, or free memory."
            if stage == "EM"
            else f"method='em' needs about {_gib(em_need)} and does not fit either."
        )
    else:
        fix = (
            f"Use method='em' (about {_gib(em_need)}) or method='auto', which leave "
            "these statistics out, or merge rare categories."
        )
    raise InsufficientMemoryError(
        f"{owner}(method={method!r}) needs about {_gib(required)} for its {stage} "
        f"(sum of n_categories = {total}, largest alphabet {int(np.max(n_cat))}), "
        f"more than the {_gib(budget)} of memory available. {fix}"
    )


class LocalOptimumWarning(UserWarning):
    """The best log-likelihood was reached by too few starts: it may not be the MLE."""


class LatentClassFit(NamedTuple):
    """What :func:`fit_latent_class` returns.

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


# ------------------------------------------------------------------------ data source


class InMemorySource:
    """The data passes of :func:`fit_latent_class` on in-memory codes.

    ``bayespmf.dask`` supplies the same methods over chunked data, so every estimation
    method runs the same stages whatever holds the rows.

    Rows may carry weights (``row_weight``: frequencies or survey weights). For the EM
    map, duplicate rows are collapsed into unique response patterns weighted by their
    total weight when the patterns number at most ``COLLAPSE_MAX_SHARE`` of the rows:
    the same log-likelihood and EM iterates (up to summation order) from fewer rows.
    """

    #: Its EM kernel takes many starts at once (multi-start exploration).
    batched = True

    #: The caller's weights are ``row_weight * weight_scale`` (``row_weight`` has mean
    #: 1: see :func:`unit_mean_weights`); the fit's log-likelihoods are multiplied back.
    weight_scale = 1.0

    def __init__(self, codes, n_categories, names=None, categories=None, row_weight=None):
        self.codes = codes
        self.n_categories = np.asarray(n_categories, dtype=np.int64)
        self.names, self.categories = names, categories
        self.row_weight = row_weight
        self._patterns = None

    def patterns(self):
        """``(codes, weight)`` the EM map runs over: unique patterns when that pays.

        ``weight`` is None for unweighted rows that are not collapsed.
        """
        if self._patterns is None:
            uniq, inverse = np.unique(self.codes, axis=0, return_inverse=True)
            w = np.ones(self.codes.shape[0]) if self.row_weight is None else self.row_weight
            if uniq.shape[0] <= COLLAPSE_MAX_SHARE * self.codes.shape[0]:
                counts = np.bincount(inverse.ravel(), weights=w, minlength=uniq.shape[0])
                self._patterns = (uniq, counts)
            else:
                self._patterns = (self.codes, self.row_weight)
        return self._patterns

    def pairwise_marginals(self):
        """Empirical pairwise marginals of all variable pairs.

        Weighted, the lightest row counts as one observation in the pair counts
        (CNMF-SPA's ``min_count`` and the sample sizes of its bootstrap): the same for
        every scale of the weights, and pattern frequencies (least count 1) give the
        counts of the expanded rows.
        """
        from bayespmf.marginals import pairwise_marginals

        weight = self.row_weight
        if weight is not None:
            weight = weight / weight.min()
        return pairwise_marginals(self.codes, self.n_categories, sample_weight=weight)

    def triple_marginals(self):
        """Empirical triple marginals of all variable triples."""
        from bayespmf.marginals import triple_marginals

        return triple_marginals(self.codes, self.n_categories)

    def categorical(self) -> CategoricalData:
        """The rows themselves (for kernels that need them: JUROR, AD-EM, row seeds)."""
        return CategoricalData(self.codes, self.n_categories)

    def em_kernel(self, rank: int, backend: str = "auto"):
        """The EM map of these rows (:func:`bayespmf.kernels.em.build_em_kernel`)."""
        if backend in ("auto", "numba"):
            codes, weight = self.patterns()
        else:  # only the numba kernel takes weights; it refuses them otherwise
            codes, weight = self.codes, self.row_weight
        return build_em_kernel(
            codes, self.n_categories, rank, backend=backend, row_weight=weight
        )


def check_sample_weight(sample_weight, n_rows: int, owner: str) -> np.ndarray:
    """A float copy of ``sample_weight``: 1-D, one finite weight >= 0 per row, sum > 0."""
    try:
        w = np.array(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"The 'sample_weight' parameter of {owner} must be numbers, one per row. "
            f"Could not convert it: {err}"
        ) from err
    if w.ndim != 1 or w.shape[0] != n_rows:
        raise DataValidationError(
            f"The 'sample_weight' parameter of {owner} must have one entry per row of "
            f"'data' ({n_rows}); got shape {w.shape}."
        )
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        raise DataValidationError(
            f"The 'sample_weight' parameter of {owner} must be finite and >= 0; rows "
            f"{np.flatnonzero(bad)[:5].tolist()} are not (e.g. {w[bad][0]!r})."
        )
    if not w.sum() > 0:
        raise DataValidationError(
            f"The 'sample_weight' parameter of {owner} sums to 0: nothing to fit."
        )
    return w


def _as_source(data, n_categories, sample_weight=None, owner="fit_latent_class"):
    if hasattr(data, "em_kernel") and hasattr(data, "pairwise_marginals"):
        if sample_weight is not None:
            raise ValueError(
                f"{owner}: 'sample_weight' is not supported for a data source; put "
                "the weights in the source."
            )
        return data
    codes, n_cat = as_codes(data, n_categories, name="data")
    weight = None
    if sample_weight is not None:
        weight = check_sample_weight(sample_weight, codes.shape[0], owner)
    keep = (codes >= 0).any(axis=1)
    if weight is not None:
        keep &= weight > 0
    if not keep.any():
        raise DataValidationError(
            "Every row of 'data' is entirely missing (or has weight 0); there is "
            "nothing to fit."
        )
    if not keep.all():
        codes = codes[keep]
        weight = None if weight is None else weight[keep]
    scale = 1.0
    if weight is not None:
        weight, scale = unit_mean_weights(weight)
    names = getattr(data, "names", None) if isinstance(data, CategoricalData) else None
    cats = getattr(data, "categories", None) if isinstance(data, CategoricalData) else None
    source = InMemorySource(codes, n_cat, names, cats, row_weight=weight)
    source.weight_scale = scale
    return source


def unit_mean_weights(weight: np.ndarray) -> tuple[np.ndarray, float]:
    """``(weight / scale, scale)``, ``scale`` the mean weight (summed without overflow).

    The fit runs on weights of mean 1, so that its scale-dependent constants (the
    floor 1 of the stopping rule ``tol * max(|L|, 1)``, ``OPTIMUM_LOGLIK_ATOL``) mean
    the same for every scale of the caller's weights (all 1e-200 would otherwise stop
    at the start; 1e200 could overflow the weighted sums). The maximizer is the same;
    :func:`rescaled_fit` puts the log-likelihoods back on the caller's scale.
    """
    peak = float(weight.max())
    scale = peak * float(np.mean(weight / peak))
    return weight / scale, scale


# --------------------------------------------------------------------------- helpers


def check_identifiable_rank(rank, n_categories, owner: str) -> int:
    """``rank`` as an int, at most :func:`max_identifiable_rank` of ``n_categories``.

    The check :func:`fit_latent_class` makes (``bayespmf run --check`` makes it too).

    Raises
    ------
    ValueError
        ``rank`` not an int >= 1, or (a ``DataValidationError``) above the limit.
    """
    return check_rank_limit(
        rank,
        max_identifiable_rank(n_categories),
        owner=owner,
        why=f"with alphabet sizes {np.asarray(n_categories).tolist()} such a model has "
        "more free parameters than the full joint PMF, so it cannot be identified.",
    )


def max_identifiable_rank(n_categories) -> int:
    """Largest rank whose parameter count does not exceed that of the full joint PMF.

    A rank-F latent-class model has ``F (1 + sum_n (I_n - 1)) - 1`` free parameters;
    with more than the ``prod_n I_n - 1`` free entries of the joint PMF it cannot be
    identified from any amount of data.

    Examples
    --------
    >>> max_identifiable_rank([2, 2, 2])
    2
    >>> max_identifiable_rank([4, 4, 4, 4, 3, 3, 3])
    363
    """
    # exact integer arithmetic: the product of the alphabet sizes overflows float64
    # beyond ~1e308 (e.g. 400 variables of 10 categories)
    n_cat = [int(i) for i in np.asarray(n_categories).ravel()]
    per_class = 1 + sum(i - 1 for i in n_cat)
    return max(1, math.prod(n_cat) // per_class)


def floor_params(params: LatentClassParams, floor: float = INIT_FLOOR) -> LatentClassParams:
    """Every entry at least ``floor``, then renormalized onto the simplex."""
    w = np.maximum(params.weights, floor)
    fs = [np.maximum(a, floor) for a in params.factors]
    return LatentClassParams(w / w.sum(), [a / a.sum(axis=0, keepdims=True) for a in fs])


def rows_start(data: CategoricalData, rank: int, random_state=None) -> LatentClassParams:
    """A start seeded on ``rank`` rows chosen k-means++-style (D^2 sampling).

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
    for _ in range(1, rank):
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
    a = np.repeat(freq[:, None], rank, axis=1)
    for f, r in enumerate(seeds):
        seen = codes[r] >= 0
        rows = np.repeat(seen, n_cat)
        a[rows, f] *= ROW_SEED_SMOOTHING
        a[offsets[:-1][seen] + codes[r][seen], f] += 1.0 - ROW_SEED_SMOOTHING
    return LatentClassParams(np.full(rank, 1.0 / rank), split_factors(a, n_cat))


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


# ------------------------------------------------------------------------- multistart


def _perturbed(anchor: LatentClassParams, n_cat, rank, rng) -> LatentClassParams:
    """An optimum moved part of the way toward a random start (a basin hop)."""
    eta = rng.uniform(*PERTURB_RANGE)
    other = init_random(n_cat, rank, rng)
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


def _build_starts(source, rank, n_init, init, rng, anchors=(), wide=None):
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
            ("perturbed", _perturbed(anchors[i % len(anchors)], n_cat, rank, rng))
            for i in range(n_hops)
        ]
    if init in ("auto", "more"):
        need = memory_estimate("cnmf-spa", n_cat, rank)["pairwise marginals"]
        budget = available_memory()
        if init == "auto" and budget is not None and need > budget:
            skipped["cnmf-spa"] = (
                f"its pairwise marginals would need about {_gib(need)} (sum of "
                f"n_categories = {int(np.sum(n_cat))}), more than the {_gib(budget)} "
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
                    source.pairwise_marginals(), rank, random_state=rng, **fast
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
            starts.append(("rows", rows_start(rows, rank, rng)))
        else:
            starts.append(("random", init_random(n_cat, rank, rng)))
    return starts[:n_init], skipped


def _explore(source, rank, starts, n_cycles, keep=None):
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

    When the arrays of all starts at once would not fit in the available memory
    (:func:`memory_estimate`'s ``"exploration"``), the starts run in batches that do,
    each batch to the same rule.
    """
    n_cat = source.n_categories
    kernel = source.em_kernel(rank, "numba")
    budget = available_memory()
    per_start = memory_estimate("auto", n_cat, rank, n_init=1)["exploration"]
    size = len(starts)
    if budget is not None:
        size = max(1, min(size, budget // per_start))
    if size == len(starts):
        return _explore_batch(kernel, n_cat, starts, n_cycles, keep)
    parts = [
        _explore_batch(kernel, n_cat, starts[i : i + size], n_cycles, keep)
        for i in range(0, len(starts), size)
    ]
    return (
        np.concatenate([w for w, _, _ in parts]),
        np.concatenate([a for _, a, _ in parts], axis=1),
        np.concatenate([ll for _, _, ll in parts]),
    )


def _explore_batch(kernel, n_cat, starts, n_cycles, keep=None):
    """:func:`_explore` of one batch of starts."""
    w = np.stack([np.asarray(p.weights, dtype=float) for _, p in starts])
    a = np.stack([stack_factors(p.factors) for _, p in starts], axis=1)
    loglik = np.full(len(starts), -np.inf)
    if keep is not None:
        return _explore_each(kernel, n_cat, w, a, loglik, n_cycles, keep)
    for _ in range(n_cycles):
        before = loglik
        w, a, loglik, _ = batched_squarem_pmf_step(kernel.step, w, a, n_cat)
        with np.errstate(invalid="ignore"):
            change = np.abs(loglik - before)
        if np.all(change <= ROUNDOFF * np.maximum(np.abs(loglik), 1.0)):
            break
    return w, a, loglik


def _explore_each(kernel, n_cat, w, a, loglik, n_cycles, keep):
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
      climb).

    Measured at seed 0, 300 starts (benchmarks/bench_wide.py): 2000 binary items,
    S = 200, F = 2: 280 starts were stationary after the 2nd cycle, and the batched
    maps covered 623 start-cycles instead of 2100 (all starts until the last was
    stationary); 500 items, S = 2000, F = 3: 66 starts crawled 11,000 units below the
    30th best, gaining 100-160 a cycle then about 1, and ran all 20 cycles (47 % of the
    exploration's time) before they could be left out. A NaN change (a start at -inf)
    leaves on neither count, as in the test of all starts together.
    """
    active = np.arange(w.shape[0])
    rank_of_keep = max(w.shape[0] - keep, 0)  # the keep-th best in ascending order
    maps: list = []

    def step(weights, factors):
        out = kernel.step(weights, factors)
        maps.append(out[2])
        return out

    for cycle in range(n_cycles):
        maps.clear()
        w_new, a_new, ll, _ = batched_squarem_pmf_step(step, w[active], a[:, active], n_cat)
        with np.errstate(invalid="ignore"):
            gain = ll - loglik[active]
            change = np.minimum(np.abs(gain), np.abs(maps[1] - ll))
            w[active], a[:, active], loglik[active] = w_new, a_new, ll
            bar = np.partition(loglik, rank_of_keep)[rank_of_keep]
            behind = ll + (n_cycles - 1 - cycle) * gain < bar
        stationary = change <= ROUNDOFF * np.maximum(np.abs(ll), 1.0)
        active = active[~(stationary | behind)]
        if active.size == 0:
            break
    return w, a, loglik


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
    rank: int,
    *,
    n_init: int = DEFAULT_N_INIT,
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
        See :func:`fit_latent_class`.
    rank : int
    n_init : int
        Number of starts (of each round).
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
        stationary.

    Notes
    -----
    Two stages (Mplus's initial and final stage optimizations): all starts run
    ``EXPLORE_CYCLES`` cycles of SQUAREM-PMF together, in one batched EM map
    (:class:`~bayespmf.kernels.em.NumbaEMKernel`; in-memory data), then the best
    ``max(MIN_REFINE, REFINE_SHARE * n_init)`` are refined one by one to ``tol`` with
    SQUAREM-PMF (:func:`bayespmf.fit.em.run_em`) and grouped into distinct optima
    (:func:`optima_table`). Without rows in memory every start is refined. Unlike
    Mplus, which asks the user to rerun with more starts when the best value is not
    replicated, ``max_rounds > 1`` adds the starts itself.
    """
    from bayespmf._progress import progress_bar

    rng = check_random_state(random_state)
    if isinstance(init, list | tuple):
        max_rounds = 1
    n_cat = source.n_categories
    offsets = offsets_of(n_cat)
    kernel = source.em_kernel(rank, backend)
    wide = _wide_data(n_cat)
    kinds, explored, refine, results, infos = [], [], [], [], []
    skipped: dict[str, str] = {}
    rounds, best_before, improved = 0, -np.inf, False
    while rounds < max_rounds:
        round_init = "more" if rounds and init == "auto" else init
        anchors = []
        if rounds:
            _, anchors, _ = optima_table(results, ["refined"] * len(results))
        starts, skip = _build_starts(
            source, rank, n_init, round_init, rng, anchors[:N_ANCHORS], wide
        )
        skipped.update(skip)
        offset = len(kinds)
        kinds += [kind for kind, _ in starts]
        cut = n_refine
        if cut is None:
            cut = max(MIN_REFINE, math.ceil(REFINE_SHARE * len(starts)))
        chosen = list(range(len(starts)))
        explore = getattr(source, "batched", False) and explore_cycles > 0
        if explore and len(starts) > cut:
            w, a, explore_loglik = _explore(
                source, rank, starts, explore_cycles, keep=None if wide is None else cut
            )
            explored.append(explore_loglik)
            chosen = sorted(np.argsort(-explore_loglik, kind="stable")[:cut].tolist())
            # the chosen starts' states only (2000 items: 300 x 2000 blocks otherwise)
            states = {k: (w[k], normalize_blocks(a[:, k], offsets)) for k in chosen}
        else:
            states = {
                k: (np.asarray(p.weights, float), stack_factors(p.factors))
                for k, (_, p) in enumerate(starts)
            }
        desc = "starts" if rounds == 0 else f"starts (round {rounds + 1})"
        with progress_bar(len(chosen), desc, enabled=progressbar) as bar:
            for k in chosen:
                w, a = states[k]
                params, info = run_em(
                    kernel,
                    w / w.sum(),
                    a,
                    n_cat,
                    accelerate="squarem",
                    max_iter=max_iter,
                    tol=tol,
                    owner="fit_latent_class",
                    warn=False,
                )
                results.append((params, info.loglik, info.converged))
                infos.append(info)
                refine.append(offset + k)
                bar.update()
                bar.set_postfix(best=max(r[1] for r in results))
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
        "refined_optimum": group,
        "skipped_starts": skipped,
        "em": infos[best],
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


# ------------------------------------------------------------------- single methods


def _em_stage(source, rank, init, accelerate, opts, callback):
    kernel = source.em_kernel(rank, opts["backend"])
    w, a = em_start(init, source.n_categories, rank, opts["rng"], owner="fit_latent_class")
    params, info = run_em(
        kernel,
        w,
        a,
        source.n_categories,
        accelerate=accelerate,
        max_iter=opts["max_iter"],
        tol=opts["tol"],
        progressbar=opts["progressbar"],
        callback=callback,
        owner="fit_latent_class",
        warn=False,
    )
    return params, info


def _run_em_method(accelerate, spectral):
    def run(source, rank, opts, callback):
        info: dict = {}
        init = None
        if spectral:
            spa, info["cnmf_spa"] = cnmf_spa(
                source.pairwise_marginals(), rank, random_state=opts["rng"]
            )
            init = floor_params(spa)
        params, em = _em_stage(source, rank, init, accelerate, opts, callback)
        info["em"] = em
        return LatentClassFit(
            params, em.loglik, em.n_iter, em.loglik_trace, em.converged, info
        )

    return run


def _run_cnmf_spa(source, rank, opts, callback):
    params, spa = cnmf_spa(source.pairwise_marginals(), rank, random_state=opts["rng"])
    return LatentClassFit(
        floor_params(params), np.nan, 0, np.array([]), True, {"cnmf_spa": spa}
    )


def _run_cnmf_opt(source, rank, opts, callback):
    # started from CNMF-SPA, as the paper proposes (Sec. 4.2)
    params, info = cnmf_opt(
        source.pairwise_marginals(),
        rank,
        init="cnmf-spa",
        max_iter=opts["max_iter"],
        tol=opts["tol"],
        random_state=opts["rng"],
        progressbar=opts["progressbar"],
    )
    return LatentClassFit(
        floor_params(params),
        np.nan,
        int(info.get("n_iter", 0)),
        np.asarray(info.get("objective", []), dtype=float),
        bool(info.get("converged", True)),
        {"cnmf_opt": info},
    )


def _run_kernel(kernel, extra, stats):
    def run(source, rank, opts, callback):
        kwargs = dict(extra, random_state=opts["rng"], progressbar=opts["progressbar"])
        if opts["max_iter_given"] is not None:
            kwargs["max_iter"] = opts["max_iter_given"]
        if opts["tol_given"] is not None:
            kwargs["tol"] = opts["tol_given"]
        data = source.triple_marginals() if stats == "triple" else source.categorical()
        params, info = kernel(data, rank, **kwargs)
        em = info.get("em")
        return LatentClassFit(
            params if em is not None else floor_params(params),
            float(em.loglik) if em is not None else np.nan,
            int(info.get("n_iter", 0)),
            np.asarray(em.loglik_trace if em is not None else [], dtype=float),
            bool(info.get("converged", True)),
            {kernel.__name__: info},
        )

    return run


#: method name -> runner(source, rank, opts, callback) -> LatentClassFit, and the
#: stage whose max_iter/tol defaults apply (None: the kernel's own defaults).
_REGISTRY: dict[str, tuple[Callable, str | None]] = {
    "em": (_run_em_method(None, spectral=False), "em"),
    "squarem": (_run_em_method("squarem", spectral=False), "squarem"),
    "cnmf-spa": (_run_cnmf_spa, None),
    "cnmf-opt": (_run_cnmf_opt, "cnmf-opt"),
    "cnmf-spa-em": (_run_em_method(None, spectral=True), "em"),
    "cnmf-spa-squarem": (_run_em_method("squarem", spectral=True), "squarem"),
    "juror": (_run_kernel(juror, {"variant": "a"}, "rows"), None),
    "juror-b": (_run_kernel(juror, {"variant": "b"}, "rows"), None),
    "juror-c": (_run_kernel(juror, {"variant": "c"}, "rows"), None),
    "ctd": (_run_kernel(ctd, {}, "triple"), None),
    "ad-em": (_run_kernel(ad_em, {}, "rows"), None),
}


def _check_method(method, owner):
    if method not in METHODS:
        close = difflib.get_close_matches(str(method), list(METHODS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"The 'method' parameter of {owner} must be one of {list(METHODS)}. "
            f"Got {method!r}.{hint}"
        )
    return method


# ---------------------------------------------------------------------- public entry


def fit_latent_class(
    data,
    rank: int,
    method: str = "auto",
    *,
    n_categories=None,
    n_init: int | None = None,
    init="auto",
    max_iter: int | None = None,
    tol: float | None = None,
    random_state=None,
    backend: str = "auto",
    progressbar: bool = False,
    callback=None,
    sample_weight=None,
    owner: str = "fit_latent_class",
) -> LatentClassFit:
    """Fit a latent-class PMF ``Pr(x) = sum_f lambda_f prod_n A_n(x_n, f)`` by ``method``.

    Parameters
    ----------
    data : CategoricalData, array_like of int (S, N), or a data source
        ``-1`` marks missing entries (marginalized out); all-missing rows are ignored.
        A data source (see the module docstring; e.g. ``bayespmf.dask``'s) is used as
        it is.
    rank : int
        Number of latent classes F.
    method : str, default "auto"
        A key of :data:`METHODS`. ``"auto"`` is the maximum-likelihood estimate from
        ``n_init`` starts (:func:`multistart`); the others are the single-start
        algorithms of the papers.
    n_categories : sequence of int, optional
        Alphabet sizes (taken from ``data`` when it is a CategoricalData).
    n_init : int, optional
        Starts of ``"auto"``; must be None or 1 for the other methods. ``None`` (the
        default): rounds of :data:`DEFAULT_N_INIT` starts, another round while the best
        log-likelihood is not replicated, at most :data:`MAX_ROUNDS`; an integer: that
        many starts, one round.
    init : "auto", "random" or list of LatentClassParams, default "auto"
        Starts of ``"auto"`` (see :func:`multistart`).
    max_iter, tol : optional
        Iteration cap and tolerance of the iterative stage; by default
        ``DEFAULT_MAX_ITER``/``DEFAULT_TOL`` of the method (the kernels' own for JUROR,
        CTD and AD-EM). EM stages stop by the rule of :mod:`bayespmf.fit.loop`.
    random_state : None, int or numpy.random.Generator
        Seeds every random part (starts, split search, projections).
    backend : {"auto", "compiled", "scipy"}
        The EM map (:func:`bayespmf.kernels.em.build_em_kernel`).
    progressbar : bool, default False
    callback : callable, optional
        ``callback(n_iter, EMState)`` after each EM iteration of the single-start EM
        methods; returning True stops the fit.
    sample_weight : array_like, shape (S,), optional
        A weight per row (frequencies of response patterns, survey weights): the
        weighted likelihood ``sum_s w_s log Pr(x_s)`` is maximized (EM methods), or
        the weighted pairwise marginals are factored (CNMF-SPA, CNMF-OPT, and the
        CNMF-SPA start): methods in ``WEIGHTED_METHODS``. The estimate does not
        depend on the weights' scale (``c * w`` fits as ``w``: the fit runs on the
        weights divided by their mean); the log-likelihoods reported are those of
        ``w`` itself (a ``callback`` sees the EM state on the mean-1 weights).
    owner : str
        Name used in messages (the estimator passes its own).

    Returns
    -------
    LatentClassFit

    Raises
    ------
    DataValidationError
        Malformed data, a variable never observed, or a rank that cannot be identified.
    ValueError
        Bad ``method``, ``n_init``, ``max_iter``, ``tol`` or ``callback``.
    InsufficientMemoryError
        (A ``ValueError`` and ``MemoryError``.) The statistics of ``method`` would not
        fit in the available memory (:func:`memory_estimate`, :func:`available_memory`;
        checked before allocating them); the message names the bytes and a method
        that fits.

    Warns
    -----
    ConvergenceWarning
        When the iterative stage (of the best start) stopped at ``max_iter``.
    MemoryBudgetWarning
        ``"auto"``: its CNMF-SPA start was left out because its pairwise marginals
        (``(sum I)^2`` entries) would not fit in the available memory.
    LocalOptimumWarning
        ``"auto"``: the best log-likelihood was not replicated: fewer than
        ``max(MIN_BEST_STARTS, MIN_BEST_SHARE * refined)`` refined starts reached it
        (with the default ``n_init``, after up to ``MAX_ROUNDS`` rounds of starts).

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(1000, [2, 3, 2, 3, 2], rank=2, random_state=0)
    >>> fit = fit_latent_class(data, 2, random_state=0)
    >>> fit.optima[["n_starts"]].to_numpy().ravel().tolist()
    [30]
    >>> bool(fit.loglik < 0), fit.converged
    (True, True)
    """
    method = _check_method(method, owner)
    if sample_weight is not None and method not in WEIGHTED_METHODS:
        raise ValueError(
            f"The 'sample_weight' parameter of {owner} is supported by the methods "
            f"{list(WEIGHTED_METHODS)} (EM on weighted rows, CNMF on weighted pairwise "
            f"marginals); method={method!r} estimates from unweighted statistics."
        )
    source = _as_source(data, n_categories, sample_weight, owner)
    n_cat = source.n_categories
    rank = check_identifiable_rank(rank, n_cat, owner)
    if callback is not None and not callable(callback):
        raise ValueError(
            f"The 'callback' parameter of {owner} must be callable or None. Got "
            f"{type(callback).__name__}."
        )
    if method == "auto":
        stage = "auto"
        if isinstance(init, list | tuple):
            given = [check_params(w, f, n_cat) for w, f in init]
            if n_init is not None and n_init != len(given):
                raise ValueError(
                    f"The 'n_init' parameter of {owner} is {n_init} but 'init' holds "
                    f"{len(given)} starts. Leave n_init=None or make them agree."
                )
            n_init = len(given)
            init = given
        elif init not in ("auto", "random"):
            raise ValueError(
                f"The 'init' parameter of {owner} must be 'auto', 'random' or a list of "
                f"(weights, factors) starts. Got {init!r}."
            )
        max_rounds = MAX_ROUNDS if n_init is None and isinstance(init, str) else 1
        n_init = check_int(
            DEFAULT_N_INIT if n_init is None else n_init, "n_init", owner=owner, low=1
        )
    else:
        stage = _REGISTRY[method][1]
        if n_init not in (None, 1):
            raise ValueError(
                f"The 'n_init' parameter of {owner} applies to method='auto' only; "
                f"method={method!r} runs from one start. Use method='auto' for "
                "several starts."
            )
    max_iter_given = (
        None if max_iter is None else check_int(max_iter, "max_iter", owner=owner, low=1)
    )
    tol_given = None if tol is None else check_float(tol, "tol", owner=owner, low=0.0)
    opts = {
        "rng": check_random_state(random_state),
        "max_iter": max_iter_given
        if max_iter_given is not None
        else DEFAULT_MAX_ITER.get(stage),
        "tol": tol_given if tol_given is not None else DEFAULT_TOL.get(stage),
        "max_iter_given": max_iter_given,
        "tol_given": tol_given,
        "backend": backend,
        "progressbar": bool(progressbar),
    }
    _check_memory(method, source, rank, n_init, owner)
    if method == "auto":
        result = multistart(
            source,
            rank,
            n_init=n_init,
            init=init,
            max_iter=opts["max_iter"],
            tol=opts["tol"],
            random_state=opts["rng"],
            backend=backend,
            progressbar=progressbar,
            max_rounds=max_rounds,
        )
        _warn_optima(result, n_init, owner, scale=source.weight_scale)
    else:
        result = _REGISTRY[method][0](source, rank, opts, callback)
    params = check_params(result.params.weights, result.params.factors, n_cat, atol=1e-6)
    loglik = result.loglik
    if not np.isfinite(loglik) and hasattr(source, "codes"):
        # methods that never touch the rows (CNMF-SPA, CNMF-OPT): their (weighted)
        # log-likelihood on the rows
        rows = log_likelihood_rows(source.codes, *params)
        weight = getattr(source, "row_weight", None)
        loglik = float(rows.sum() if weight is None else rows @ weight)
    result = rescaled_fit(
        result._replace(params=params, loglik=loglik),
        getattr(source, "weight_scale", 1.0),
        loglik_trace=method in EM_METHODS,
    )
    em = result.info.get("em")
    if method in EM_METHODS and not result.converged and not em.stopped:
        warnings.warn(
            f"{owner}(method={method!r}) stopped after max_iter={opts['max_iter']} "
            f"iterations while the objective was still rising by more than "
            f"tol={opts['tol']} allows. Increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return result


def rescaled_fit(result: LatentClassFit, scale: float, *, loglik_trace: bool):
    """``result`` with its log-likelihoods multiplied by the weights' ``scale``.

    The fit ran on weights of mean 1 (:func:`unit_mean_weights`); the log-likelihoods it
    reports are those of the caller's weights, ``sum_s w_s log Pr(x_s)``: the total,
    the trace (``loglik_trace``: when it holds log-likelihoods, not a CNMF misfit),
    the optima's ``loglik``/``gap``, the starts' log-likelihoods in ``info`` and the
    EM stage's record ``info["em"]``.
    """
    if scale == 1.0:
        return result
    info = dict(result.info)
    for key in ("refined_loglik", "explore_loglik"):
        if info.get(key) is not None:
            info[key] = np.asarray(info[key], dtype=float) * scale
    em = info.get("em")
    if isinstance(em, EMInfo):
        info["em"] = em._replace(
            loglik=em.loglik * scale,
            loglik_trace=np.asarray(em.loglik_trace, dtype=float) * scale,
        )
    optima = result.optima
    if optima is not None:
        optima = optima.copy()
        optima["loglik"] = optima["loglik"] * scale
        optima["gap"] = optima["gap"] * scale
    trace = np.asarray(result.loglik_trace, dtype=float)
    return result._replace(
        loglik=float(result.loglik * scale),
        loglik_trace=trace * scale if loglik_trace else trace,
        info=info,
        optima=optima,
    )


def _warn_optima(result: LatentClassFit, n_init: int, owner: str, scale=1.0) -> None:
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


def random_starts(rows: CategoricalData, rank: int, n: int, random_state=None) -> list:
    """``n`` random starts alternating row seeds (:func:`rows_start`) and uniform ones.

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(100, [2, 3], rank=2, random_state=0)
    >>> [p.weights.size for p in random_starts(data, 2, 3, random_state=0)]
    [2, 2, 2]
    """
    rng = check_random_state(random_state)
    return [
        rows_start(rows, rank, rng)
        if k % 2 == 0
        else init_random(rows.n_categories, rank, rng)
        for k in range(n)
    ]


def fit_from_starts(
    codes,
    n_categories,
    rank,
    starts,
    *,
    sample_weight=None,
    random_state=None,
    tol=None,
    owner="fit_latent_class",
):
    """The best of the given ``starts`` (``fit_latent_class(init=starts)``), quietly.

    For refits inside resampling loops (bootstrap LRT, bootstrap standard errors):
    warnings about the starts are not shown; the second value says whether the best
    refit stopped at ``max_iter``.

    Returns
    -------
    fit : LatentClassFit
    unconverged : bool
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_latent_class(
            codes,
            rank,
            n_categories=n_categories,
            init=[tuple(s) for s in starts],
            random_state=random_state,
            sample_weight=sample_weight,
            tol=tol,
            owner=owner,
        )
    unconverged = any(issubclass(c.category, ConvergenceWarning) for c in caught)
    return fit, unconverged
