"""JUROR (Vora et al., Alg. 1) under the one loop.

G1 is closed-form (:func:`bayespmf.kernels.juror.juror_g1`); the G2 and G3 iterations
(:func:`~bayespmf.kernels.juror.g2_step`, :func:`~bayespmf.kernels.juror.g3_step`)
run under :func:`bayespmf.fit.loop.iterate`, each with its own stopping rule.
"""

from __future__ import annotations

import numpy as np

from bayespmf._validation import (
    DataValidationError,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.fit.loop import iterate
from bayespmf.kernels.cnmf_common import check_n_components
from bayespmf.kernels.juror import (
    DEFAULT_RHO_PER_PROJECTION,
    PATIENCE,
    VARIANTS,
    G2State,
    JurorProblem,
    check_stats,
    g2_step,
    g3_init,
    g3_step,
    juror_g1,
    projection_folds,
    row_folds,
)
from bayespmf.pmf import LatentClassParams, split_factors

__all__ = ["juror"]

#: Grid of rho / M that ``rho="cv"`` searches (the Radon matrices have M ones per
#: column, so R^T R and with it the useful rho scale with M). Vora et al. choose rho
#: "via cross-validation" (Sec. 3) without a grid; this one spans the range where G2
#: moves away from G1 (rho -> 0 leaves Z at the G1 inversion, rho -> inf freezes it at
#: the model) in decades around the untuned 0.1: every point costs N_RHO_FOLDS G2 runs,
#: and G3 (variant "a") then descends J from G2's result whatever rho was.
RHO_GRID_PER_PROJECTION = (0.01, 0.1, 1.0, 10.0)

#: Folds of ``rho="cv"`` (of the rows, or of the projections when only statistics are
#: given): two halves, so that each fit sees half the data and the held-out J is
#: measured on as many rows (or directions) as the fit; the cost is
#: ``N_RHO_FOLDS * len(RHO_GRID_PER_PROJECTION)`` extra G1 + G2 runs.
N_RHO_FOLDS = 2

#: Default cap on G3's steps: a safeguard, not a budget. With the diagonally scaled
#: steps (see :func:`bayespmf.kernels.juror.g3_scales`) G3 is meant to end by its
#: stopping rule; the most steps are taken at large sample sizes, where the fit is
#: tightest. Reaching the cap warns (ConvergenceWarning); ``benchmarks/paper_juror.py``
#: counts those warnings per table of Vora et al.
DEFAULT_G3_MAX_ITER = 20000


def _j1_settled(trace, info, tol) -> bool:
    """G2's rule: the refit failed, or J1 changed by at most ``tol`` relative.

    ``-info.objective`` is J1 before the step, ``nan`` before the first refit, so the
    rule needs two refits to compare.
    """
    before = -info.objective
    return info.failed or abs(before - info.misfit) <= tol * abs(before)


def _run_g2(prob, lam, a, rho, split, g2_max_iter, tol, rng):
    """G2 from ``(lam, a)``; returns the refit with the lowest J1 and the J1 trace."""
    refits = []  # every successful G2 iterate; the lowest J1 (the first of ties) wins

    def g2(state):
        state, info = g2_step(state, prob, rho, split, rng)
        if not info.failed:
            refits.append(state)
        return state, info

    start = G2State(lam, a, np.nan)
    iterate(g2, start, max_iter=g2_max_iter, tol=tol, warn=False, rule=_j1_settled)
    if refits:
        best = min(refits, key=lambda s: s.misfit)
        lam, a = best.weights, best.factors_stacked
    return lam, a, [s.misfit for s in refits]


def _cv_rho(stats, codes, n_components, split, g2_max_iter, tol, rng):
    """Choose rho by N_RHO_FOLDS-fold cross-validation; see :func:`juror`, Notes.

    Folds of the rows when the raw ``codes`` are known, else of the projections.
    Returns the chosen rho (for all M projections), a dict rho -> mean held-out J and
    what was split ("rows" or "projections").
    """
    if codes is not None:
        folds, over = row_folds(codes, stats.projections, N_RHO_FOLDS, rng), "rows"
    else:
        folds, over = projection_folds(stats, N_RHO_FOLDS, rng), "projections"
    grid = np.asarray(RHO_GRID_PER_PROJECTION)
    score = np.zeros(grid.size)
    for train, held_out in folds:
        fit, test = JurorProblem(train), JurorProblem(held_out)
        lam0, a0, _, _ = juror_g1(fit, n_components, rng, split=split)
        m_fit = train.projections.n_projections
        for i, c in enumerate(grid):
            lam, a, _ = _run_g2(fit, lam0, a0, c * m_fit, split, g2_max_iter, tol, rng)
            score[i] += test.value(lam, a) / N_RHO_FOLDS
    best = int(np.argmin(score))  # the smallest rho of ties
    m_all = stats.projections.n_projections
    rho_cv = dict(zip((grid * m_all).tolist(), score.tolist(), strict=True))
    return float(grid[best] * m_all), rho_cv, over


def juror(
    data_or_stats,
    n_components: int,
    *,
    variant: str = "a",
    n_projections: int | None = None,
    n_bins: int | None = None,
    rho: float | str | None = "cv",
    max_iter: int = DEFAULT_G3_MAX_ITER,
    g2_max_iter: int = 20,
    tol: float = 1e-6,
    random_state=None,
    progressbar: bool = False,
) -> tuple[LatentClassParams, dict]:
    r"""Latent-class PMF from one-way PMFs of random projections (JUROR, Alg. 1).

    Parameters
    ----------
    data_or_stats : CategoricalData, array_like of int (S, N), or ProjectionMarginals
        Raw codes (``-1`` for missing; pairwise deletion) from which JUROR draws
        ``n_projections`` random directions per pair and computes the projection PMFs,
        or precomputed :class:`~bayespmf.marginals.ProjectionMarginals`.
    n_components : int
        Number of latent classes F, in ``[1, max_cnmf_rank(n_categories)]``
        (CNMF-SPA inside G1/G2 needs a split of the variables with at least F
        categories on each side).
    variant : {"a", "b", "c"}, default "a"
        "a": G1 + G2 + G3 (JUROR), "b": G1 + G3, "c": G1 + G2 (Sec. 4).
    n_projections : int, optional
        M, only with raw data; default 200 (the paper's).
    n_bins : int, optional
        Bins of every projection PMF, only with raw data; default ``max(I_j, I_k)``
        per pair (the paper's :math:`Y_{jk} \in \mathbb{R}^{M \times I}`). With
        that default and an even alphabet size the Radon transform of a pair is not
        injective (see Notes); ``2 * I`` bins make it so.
    rho : "cv", float or None, default "cv"
        Penalty :math:`\rho` of :math:`J_1` (eq. (8)) in G2. "cv" chooses it by
        cross-validation, as the paper does (Sec. 3: "choosing :math:`\rho` via
        cross-validation"): over the rows when raw data are given, over the
        projections when only ProjectionMarginals are (see Notes); None is the untuned
        ``0.1 * M``. Unused by variant "b".
    max_iter : int, default DEFAULT_G3_MAX_ITER
        Maximum iterations of G3 (accelerated, diagonally scaled projected-gradient
        steps).
    g2_max_iter : int, default 20
        Maximum G2 iterations (Z update + CNMF-SPA refit).
    tol : float, default 1e-6
        G2 stops when an iteration changes :math:`J_1` by less than ``tol`` times its
        value, G3 after ``PATIENCE`` consecutive steps that lower :math:`J` by less
        than that (or when :math:`J` falls to ``OBJECTIVE_FLOOR`` times
        :math:`\sum_p w_p \|y_p\|^2`, or no descent step exists).
    random_state : None, int or numpy.random.Generator
        Seeds the projections (raw data) and CNMF-SPA's random splits.
    progressbar : bool, default False

    Returns
    -------
    params : LatentClassParams
    info : dict
        ``variant``, ``projections`` (the RandomProjections used), ``pairwise`` (the
        G1 estimate of the pairwise marginals, a PairwiseMarginals), ``spa`` (the
        G1 CNMF-SPA info), ``rho`` (the penalty G2 used; None for variant "b"),
        ``rho_cv`` (``{rho: mean held-out J}`` of the cross-validation, empty without
        one), ``rho_cv_folds`` ("rows", "projections" or None: what the
        cross-validation split), ``g2_objective`` (:math:`J_1` after every G2 iteration),
        ``g3_objective`` (:math:`J` at the start of G3 and after every accepted step),
        ``stages`` (``{"G1": params, "G2": params or None}``: the estimates after G1
        and after G2; with the same ``random_state``, variant "a"'s G2 stage is
        variant "c"'s result and its G1 stage variant "b"'s start), ``objective``
        (final :math:`J`), ``n_iter`` (G3 iterations), ``converged``.

    Raises
    ------
    DataValidationError
        Malformed data, fewer than two variables, no co-observed pair, or ``n_components``
        above what the pairwise marginals identify; ``n_projections`` given with
        ProjectionMarginals.
    ValueError
        Unknown ``variant`` or a malformed numeric argument.

    Warns
    -----
    ConvergenceWarning
        When G3 uses ``max_iter`` sweeps without meeting ``tol``.

    Notes
    -----
    With :math:`Q_{jk} = \mathfrak{R}^\top\mathfrak{R}` and
    :math:`b_{jk} = \mathfrak{R}^\top Y_{jk}` for each pair (built once, see
    :class:`~bayespmf.kernels.juror.JurorProblem`):

    * G1 (lines 2-4): :math:`Z_{jk} = Q_{jk}^{+} b_{jk}`, the minimum-norm
      least-squares inverse of the Radon transform (one eigendecomposition per pair,
      reused by G2), projected onto the simplex (a PMF; the projection is the identity
      for exact statistics); then CNMF-SPA on the assembled virtual matrix
      (:func:`~bayespmf.kernels.cnmf_spa.cnmf_spa`, which also chooses the split
      :math:`S_1, S_2`).
    * G2 (lines 6-13): :math:`Z_{jk} = (Q_{jk} + \rho I)^{-1}(b_{jk} + \rho\,
      A_j D(\lambda) A_k^\top)` (line 8, same eigendecomposition), projected onto the
      simplex, then CNMF-SPA with the split of G1 fixed (line 10). Stops when
      :math:`J_1` changes by less than ``tol`` relatively (line 12 tests
      :math:`J_1 < \epsilon`, which noisy statistics never meet); the iterate with
      the lowest :math:`J_1` is kept.
    * G3 (lines 15-20): projected gradient on :math:`J` of eq. (7) over
      :math:`A_1, \dots, A_N, \lambda` (the text says G3 descends the original
      objective J; line 17 writes :math:`\partial J_1`, which at the end of G2 differs
      only by the coupling term), every column projected onto the simplex
      (:func:`~bayespmf.kernels.simplex.project_simplex`), until ``PATIENCE``
      consecutive steps lower :math:`J` by at most ``tol`` relative (line 19's
      :math:`J < \epsilon` again never holds on noisy statistics). Departures from the
      block-cyclic lines 16-18: all blocks take one joint step, with Nesterov
      momentum (FISTA) restarted whenever the objective would rise, and the "adaptive
      step size" is a backtracked multiplier of a per-block step: each column of
      every :math:`A_n` and :math:`\lambda` are scaled by a diagonal Gauss-Newton
      curvature estimate (:func:`~bayespmf.kernels.juror.g3_scales`). The curvature of a
      column of :math:`A_n` is proportional to :math:`\lambda_f^2`, that of
      :math:`\lambda` to the squared column norms, so one common step size (the
      largest curvature's) crawls along the columns of the small classes; unscaled,
      G3 stopped at its iteration cap far from a minimum of :math:`J` on the paper's
      Table 1 problem at its larger sample sizes, and its factor error grew with the
      sample size.

    **Choosing rho** (``rho="cv"``). The paper cross-validates :math:`\rho`
    without saying over what. With raw data the rows are split at random into
    ``N_RHO_FOLDS`` folds (:func:`~bayespmf.kernels.juror.row_folds`); for each fold,
    G1 (with the split of the full-data G1) and G2 run on the projection PMFs of the
    other folds' rows for every :math:`\rho = c M` on the grid
    ``RHO_GRID_PER_PROJECTION``, and :math:`J` (eq. (7)) of the G2 estimate is
    evaluated on the projection PMFs of the fold's own rows. The :math:`c` with the
    smallest mean held-out :math:`J` is used for the fit on all rows. With only
    ProjectionMarginals the folds are of the projections instead
    (:func:`~bayespmf.kernels.juror.projection_folds`): the held-out J is then
    measured on new directions of the *same* rows. Every projection PMF is the Radon
    transform of the same empirical pairwise marginal (``Y_jk = R(Z_emp)``), so this
    scores how well G2 fits that noisy marginal, and cannot see fitting of the
    sampling noise; folds of the rows can. Cost: ``N_RHO_FOLDS *
    len(RHO_GRID_PER_PROJECTION)`` extra G1 + G2 runs.

    The three blocks are :func:`~bayespmf.kernels.juror.juror_g1`,
    :func:`~bayespmf.kernels.juror.g2_step` and :func:`~bayespmf.kernels.juror.g3_step`;
    G2 and G3 run under :func:`bayespmf.fit.loop.iterate` with the rules above.

    **What the statistics hold.** The bin of a row in every projection depends only
    on its pair of codes, so the projection PMFs of a pair are the Radon transform
    of the pair's empirical joint PMF, and G1's least-squares inversion returns that
    empirical marginal itself (up to the invisible direction below): JUROR sees the
    information of the pairwise marginals, with :math:`J` a :math:`Q`-weighted
    least-squares misfit to them.

    **Identifiability of G1.** With :func:`~bayespmf.marginals.random_projections`'
    binning into ``B = max(I_j, I_k)`` equal bins, an even ``I_j = I_k = I`` leaves
    the checkerboard on the central 2 x 2 cells of :math:`Z_{jk}` invisible to every
    direction (the two cells on each side of the centre always share a bin), so
    :math:`Q_{jk}` has rank :math:`I^2 - 1` (checked for I = 4, 6, 10; odd I and
    ``n_bins = 2 I`` give full rank). G1 then returns the minimum-norm solution; the
    low-rank coupling of G2/G3 resolves the missing direction.

    Pairs never co-observed (possible with missing entries) drop out of every
    objective; the others weigh equally, as in eq. (7).

    **Implementation.** The objective and gradient of G3 are vectorized NumPy/SciPy:
    the model of all pairs is one product :math:`A D A^\top`, its pair blocks are
    gathered into one vector and multiplied by the block-diagonal sparse :math:`Q`
    (or :math:`R^\top R` for large alphabets, see
    :class:`~bayespmf.kernels.juror.JurorProblem`).

    Examples
    --------
    >>> from bayespmf.marginals import (PairwiseMarginals, ProjectionMarginals,
    ...                                 random_projections)
    >>> A = [np.array([[0.8, 0.0], [0.2, 0.3], [0.0, 0.7]])] * 4
    >>> pop = PairwiseMarginals.from_params([0.4, 0.6], A)
    >>> stats = ProjectionMarginals.from_pairwise(
    ...     pop, random_projections([3] * 4, 20, random_state=0))
    >>> params, info = juror(stats, 2, random_state=0)
    >>> np.sort(params.weights).round(4)
    array([0.4, 0.6])
    """
    owner = "juror"
    if not isinstance(variant, str) or variant.lower() not in VARIANTS:
        raise ValueError(
            f"The 'variant' parameter of {owner} must be 'a' (G1+G2+G3), 'b' (G1+G3) or "
            f"'c' (G1+G2). Got {variant!r}."
        )
    variant = variant.lower()
    blocks = VARIANTS[variant]
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    g2_max_iter = check_int(g2_max_iter, "g2_max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    rng = check_random_state(random_state)
    stats, codes = check_stats(data_or_stats, n_projections, n_bins, rng, owner)
    n_cat = np.asarray(stats.projections.n_categories)
    n_components = check_n_components(n_components, n_cat, owner)
    if rho is None:
        rho = DEFAULT_RHO_PER_PROJECTION * stats.projections.n_projections
    if not (isinstance(rho, str) and rho == "cv"):
        if isinstance(rho, str):
            raise DataValidationError(
                f"The 'rho' parameter of {owner} must be 'cv', a float > 0 or None. "
                f"Got {rho!r}."
            )
        rho = check_float(rho, "rho", owner=owner, low=0.0, low_open=True)
    prob = JurorProblem(stats)

    lam, a, pairwise, spa_info = juror_g1(prob, n_components, rng)
    stages = {"G1": LatentClassParams(lam.copy(), split_factors(a, n_cat)), "G2": None}
    g2_trace, rho_cv, cv_over = [], {}, None
    if "G2" in blocks:
        if rho == "cv":
            rho, rho_cv, cv_over = _cv_rho(
                stats, codes, n_components, spa_info["split"], g2_max_iter, tol, rng
            )
        lam, a, g2_trace = _run_g2(
            prob, lam, a, rho, spa_info["split"], g2_max_iter, tol, rng
        )
        stages["G2"] = LatentClassParams(lam.copy(), split_factors(a, n_cat))

    state = g3_init(prob, lam, a)
    g3_trace = [state.misfit]
    n_iter, converged = 0, True
    if "G3" in blocks and state.misfit > prob.floor:

        def g3(state):
            state, info = g3_step(state, prob, tol)
            if info.accepted:
                g3_trace.append(state.misfit)
            return state, info

        def settled(trace, info, tol) -> bool:
            return info.stalled or info.n_small >= PATIENCE or info.misfit <= prob.floor

        loop = {"max_iter": max_iter, "tol": tol, "progressbar": progressbar}
        state, it = iterate(
            g3, state, desc="JUROR G3", owner="juror (G3)", rule=settled, **loop
        )
        n_iter, converged = it.n_iter, it.converged
    lam, a = state.weights, state.factors_stacked
    params = LatentClassParams(lam.copy(), split_factors(a, n_cat))
    info = {
        "variant": variant,
        "projections": stats.projections,
        "pairwise": pairwise,
        "spa": spa_info,
        "g2_objective": np.asarray(g2_trace),
        "rho": rho if "G2" in blocks else None,
        "rho_cv": rho_cv,
        "rho_cv_folds": cv_over,
        "g3_objective": np.asarray(g3_trace),
        "stages": stages,
        "objective": prob.value(lam, a),
        "n_iter": n_iter,
        "converged": converged,
    }
    return params, info
