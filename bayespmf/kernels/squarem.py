r"""SQUAREM acceleration of fixed-point maps, generic and for the latent-class PMF EM.

:func:`squarem_step` is one cycle of the squared extrapolation of Varadhan & Roland
(2008) for any fixed-point map on a flat vector, with their step lengths SqS1-SqS3 and
the step-length safeguards of their reference implementation (R package ``SQUAREM``,
``squarem1`` / ``squarem2``); ``bayespmf.fit.squarem.squarem`` runs it under the one
loop. :func:`squarem_pmf_step` is one iteration of SQUAREM-PMF (Chege, Grasis,
Manina, Yeredor & Haardt, Tables I-II), whose step length keeps ``lambda`` and every
column of every ``A_n`` on the probability simplex and never lets the log-likelihood
decrease; ``bayespmf.fit.squarem.squarem_pmf`` runs it under the one loop with its own
stopping rule (``squarem_pmf_converged``: EM's, deeper, because the log-likelihoods of
successive cycles do not converge linearly).

Notes
-----
With ``r = F(x) - x`` and ``v = F(F(x)) - 2 F(x) + x`` (Chege et al. eqs. (17)-(18))
the squared update is (their eq. (27))

.. math:: x' = x - 2\alpha r + \alpha^2 v, \qquad \alpha < 0,

which "squares" the error relation of the single extrapolation (eqs. (19), (25)-(26)).
Varadhan & Roland write it with ``alpha > 0`` as ``x + 2 alpha r + alpha^2 v``; both
conventions appear below, each where its source uses it.

References
----------
.. [1] R. Varadhan and C. Roland, "Simple and globally convergent methods for
   accelerating the convergence of any EM algorithm," Scand. J. Stat. 35(2), 2008.
.. [2] J. K. Chege, M. J. Grasis, A. Manina, A. Yeredor and M. Haardt, "Efficient
   probability mass function estimation from partially observed data," Asilomar 2022
   (SQUAREM-PMF).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayespmf.kernels.simplex import project_blocks, project_simplex
from bayespmf.pmf import offsets_of

__all__ = [
    "SCHEMES",
    "SquaremOptions",
    "SquaremPMFStepInfo",
    "SquaremState",
    "SquaremStepInfo",
    "batched_squarem_pmf_step",
    "legal_step_length",
    "squarem_init",
    "squarem_pmf_step",
    "squarem_step",
]

#: Step-length schemes of Varadhan & Roland (2008), Sec. 3 (positive-alpha convention).
SCHEMES = ("SqS1", "SqS2", "SqS3")

#: The stabilizing map F(x') is skipped when |alpha - 1| is below this (then x' is
#: already F(F(x))); the value of the R implementation.
_ALPHA_ONE_SLACK = 0.01

#: Halvings of SQUAREM-PMF's Table II steps 18-23 before falling back to the plain
#: double EM step theta_2 (alpha = -1), which never decreases the log-likelihood.
#: Each halving of (alpha + 1) costs one EM map; five leave 1/32 of the extrapolation.
_MAX_BACKTRACKS = 5

#: Relative rounding slack when testing that an extrapolated entry is nonnegative at a
#: root of its quadratic (the entry is 0 there up to cancellation error).
_ROOT_SLACK = 1e-12

#: Candidate roots tested at once when searching the legal segment edge.
_ROOT_BATCH = 64


class SquaremState(NamedTuple):
    """One iterate of generic SQUAREM (:func:`squarem_step`).

    Attributes
    ----------
    x : ndarray, shape (p,)
        The current point.
    objective : float
        The merit function at ``x`` as the last cycle left it (R's ``lold``; ``inf``
        without a merit function).
    step_min, step_max : float
        The current bounds of the step length (adapted by ``mstep``).
    n_evals, n_objective_evals : int
        Evaluations of the map and of the merit function so far.
    n_iter : int
        Completed cycles (a cycle cut short by convergence or failure is not counted).
    failed : bool
        Whether the map returned a non-finite point (the iteration cannot go on).
    """

    x: np.ndarray
    objective: float
    step_min: float
    step_max: float
    n_evals: int = 0
    n_objective_evals: int = 0
    n_iter: int = 0
    failed: bool = False


class SquaremOptions(NamedTuple):
    """The fixed settings of a SQUAREM run (see ``bayespmf.fit.squarem.squarem``)."""

    scheme: str = "SqS3"
    tol: float = 1e-7
    max_evals: int = 1500
    step_max0: float = 1.0
    mstep: float = 4.0
    objective_increase: float = 1.0


class SquaremStepInfo(NamedTuple):
    """What one :func:`squarem_step` reports.

    Attributes
    ----------
    objective : float
        ``-||F(x) - x||_2`` of the point the step was given (``nan`` when ``F(x)`` is
        not finite): the quantity R's stopping rule tests, as an objective to maximize.
    n_evals : int
        Map evaluations of the step (1 to 3).
    residual : float
        The last residual the step computed: ``||F(x) - x||``, or
        ``||F(F(x)) - F(x)||`` once it mapped twice. Below ``tol`` the cycle stopped
        early, at the converged point.
    """

    objective: float
    n_evals: int
    residual: float


def squarem_init(x0, objective=None, *, step_min: float = 1.0, step_max0: float = 1.0):
    """The starting :class:`SquaremState` at ``x0`` (the merit function evaluated once).

    Raises
    ------
    ValueError
        ``x0`` empty or not finite.

    Examples
    --------
    >>> squarem_init([1.0, 2.0], lambda x: float(x @ x)).objective
    5.0
    """
    x = np.array(x0, dtype=float).ravel()
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("The 'x0' parameter of squarem must be a non-empty finite vector.")
    if objective is None:
        return SquaremState(x, np.inf, step_min, step_max0)
    return SquaremState(x, float(objective(x)), step_min, step_max0, n_objective_evals=1)


def squarem_step(state: SquaremState, fixed_point, objective, options: SquaremOptions):
    """One SQUAREM cycle (Varadhan & Roland 2008, with R ``SQUAREM``'s safeguards).

    Parameters
    ----------
    state : SquaremState
    fixed_point : callable
        ``x -> F(x)`` on a flat float vector.
    objective : callable or None
        Merit function to minimize (see ``bayespmf.fit.squarem.squarem``).
    options : SquaremOptions

    Returns
    -------
    state : SquaremState
    info : SquaremStepInfo

    Notes
    -----
    ``x1 = F(x)``, ``x2 = F(x1)``, ``r = x1 - x``, ``v = x2 - 2 x1 + x``, then
    ``x' = F(x + 2 alpha r + alpha^2 v)`` (Varadhan & Roland eq. (9) and their global
    safeguard; Chege et al. Table I steps 3-9 with ``alpha -> -alpha``). The cycle stops
    at ``x1`` (``x2``) when ``||r||`` (``||x2 - x1||``) is below ``options.tol``, and
    at ``x`` when ``F(x)`` is not finite (``failed``). The stabilizing map is skipped
    when the budget ``options.max_evals`` is spent, as in R.

    Examples
    --------
    >>> state = squarem_init(np.zeros(1))
    >>> state, info = squarem_step(state, lambda x: 0.5 * np.cos(x), None, SquaremOptions())
    >>> state.n_iter, info.n_evals, round(float(state.x[0]), 4)  # alpha = 1: F(F(x))
    (1, 2, 0.4388)
    """
    tol = options.tol
    x, lold, step_min, step_max, n_evals, n_obj, n_iter, _ = state

    def fmap(y):
        return np.asarray(fixed_point(y), dtype=float).ravel()

    x1 = fmap(x)
    n_evals += 1
    r = x1 - x
    if not np.all(np.isfinite(x1)):
        return state._replace(n_evals=n_evals, failed=True), SquaremStepInfo(
            np.nan, 1, np.nan
        )
    res1 = float(np.sqrt(r @ r))
    if res1 < tol:
        return state._replace(x=x1, n_evals=n_evals), SquaremStepInfo(-res1, 1, res1)
    x2 = fmap(x1)
    n_evals += 1
    q2 = x2 - x1
    res2 = float(np.sqrt(q2 @ q2))
    if res2 < tol:
        return state._replace(x=x2, n_evals=n_evals), SquaremStepInfo(-res1, 2, res2)
    v = q2 - r
    sr2, sv2, srv = r @ r, v @ v, r @ v
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = {
            "SqS1": -srv / sv2,
            "SqS2": -sr2 / srv,
            "SqS3": np.sqrt(sr2 / sv2),
        }[options.scheme]
    alpha = float(np.clip(alpha, step_min, step_max)) if np.isfinite(alpha) else 1.0
    x_new = x + 2.0 * alpha * r + alpha**2 * v
    if abs(alpha - 1.0) > _ALPHA_ONE_SLACK and n_evals < options.max_evals:
        x_new = fmap(x_new)
        n_evals += 1
    rejected = not np.all(np.isfinite(x_new))
    lnew = lold
    if objective is not None and not rejected:
        lnew = float(objective(x_new))
        n_obj += 1
        rejected = not np.isfinite(lnew) or lnew > lold + options.objective_increase
    if rejected:
        x_new = x2
        if objective is not None:
            lnew = float(objective(x2))
            n_obj += 1
        if alpha == step_max:
            step_max = max(options.step_max0, step_max / options.mstep)
        alpha = 1.0
    if alpha == step_max:
        step_max *= options.mstep
    if step_min < 0 and alpha == step_min:
        step_min *= options.mstep
    new = SquaremState(x_new, lnew, step_min, step_max, n_evals, n_obj, n_iter + 1)
    return new, SquaremStepInfo(-res1, n_evals - state.n_evals, res2)


# ------------------------------------------------------------------------ SQUAREM-PMF


class SquaremPMFStepInfo(NamedTuple):
    """Diagnostics of one :func:`squarem_pmf_step`.

    Attributes
    ----------
    n_evals : int
        EM maps evaluated (3 when the first extrapolation is accepted).
    alpha : float
        The step length used (negative; -1 means the plain double EM step).
    n_backtracks : int
        Halvings of ``alpha + 1`` (Table II, steps 18-23).
    legal_edge : bool
        Whether the edge of the legal segment was used (Table II, step 11).
    projected : bool
        Whether the extrapolated point was projected onto the simplex (steps 14, 21).
    """

    n_evals: int
    alpha: float
    n_backtracks: int
    legal_edge: bool
    projected: bool


def legal_step_length(theta0, r, v, alpha: float) -> float:
    """Edge of the legal segment closest to ``alpha`` (SQUAREM-PMF Table II, steps 7-9).

    The extrapolated entry ``theta_i(a) = theta0_i - 2 a r_i + a^2 v_i`` is
    nonnegative on a union of segments bounded by the roots
    ``(r_i +- sqrt(r_i^2 - v_i theta0_i)) / v_i``; the legal set is the intersection
    over ``i``. This returns the root, among all entries' roots, that is legal for
    every entry and closest to ``alpha``.

    Parameters
    ----------
    theta0, r, v : array_like, shape (p,)
        Current point (nonnegative), ``F(theta0) - theta0`` and the second difference.
    alpha : float
        The unconstrained step length (Table I, step 7).

    Returns
    -------
    float
        The legal edge, or ``nan`` if none is found (then the caller projects).

    Examples
    --------
    >>> legal_step_length([0.5, 0.5], [0.1, -0.1], [0.0, 0.0], alpha=-4.0)
    -2.5
    """
    t0 = np.asarray(theta0, dtype=float)
    r = np.asarray(r, dtype=float)
    v = np.asarray(v, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = r * r - v * t0
        sq = np.sqrt(np.where(disc >= 0, disc, np.nan))
        quad = v != 0
        roots = np.concatenate(
            [
                np.where(quad, (r + sq) / v, np.nan),
                np.where(quad, (r - sq) / v, np.nan),
                np.where(~quad & (r != 0), t0 / (2.0 * r), np.nan),
            ]
        )
    roots = roots[np.isfinite(roots)]
    if roots.size == 0:
        return float("nan")
    roots = roots[np.argsort(np.abs(roots - alpha), kind="stable")]
    scale = np.abs(t0) + np.abs(r) + np.abs(v)
    for lo in range(0, roots.size, _ROOT_BATCH):
        cand = roots[lo : lo + _ROOT_BATCH, None]
        vals = t0 - 2.0 * cand * r + cand**2 * v
        slack = _ROOT_SLACK * scale * (1.0 + np.abs(cand) + cand**2)
        ok = np.all(vals >= -slack, axis=1)
        if ok.any():
            return float(cand[np.argmax(ok), 0])
    return float("nan")


def _pack(weights, factors_stacked):
    return np.concatenate([np.ravel(factors_stacked), np.ravel(weights)])


def _unpack(theta, shape):
    n = shape[0] * shape[1]
    return theta[n:], theta[:n].reshape(shape)


def _to_simplex(theta, shape, offsets, *, project: bool):
    """Clip (``project=False``: rounding only) or project every block onto the simplex."""
    w, a = _unpack(theta, shape)
    if project:
        w = project_simplex(w)
        a = project_blocks(a, offsets)
    else:
        w = np.maximum(w, 0.0)
        a = np.maximum(a, 0.0)
        w = w / w.sum()
        sums = np.add.reduceat(a, offsets[:-1], axis=0)
        a = a / np.repeat(sums, np.diff(offsets), axis=0)
    return w, a


def squarem_pmf_step(em_step, weights, factors_stacked, n_categories):
    """One SQUAREM-PMF iteration (Chege et al., Table I with Table II's step length).

    Parameters
    ----------
    em_step : callable
        ``(weights, factors_stacked) -> (weights, factors_stacked, loglik_of_input)``,
        e.g. :meth:`bayespmf.kernels.em.EMKernel.step`.
    weights : ndarray, shape (F,)
        ``theta_0``'s ``lambda``.
    factors_stacked : ndarray, shape (sum I_n, F)
        ``theta_0``'s stacked factors.
    n_categories : sequence of int
        Block sizes ``I_n`` of the stacked factors.

    Returns
    -------
    weights, factors_stacked : ndarray
        The next ``theta_0 = f(theta^(k))`` (Table I, step 9).
    loglik : float
        Log-likelihood of the *input* ``theta_0`` (from step 3's EM map).
    info : SquaremPMFStepInfo

    Notes
    -----
    Steps: ``theta_1 = f(theta_0)``, ``theta_2 = f(theta_1)``, ``r``, ``v`` and
    ``alpha = -||r|| / ||v||`` (Table I, 3-7). Table II: if ``alpha > -1`` take
    ``theta_2``. Otherwise extrapolate (eq. (27)); if an entry is negative, use the
    legal-segment edge closest to ``alpha`` when it is larger than ``alpha``
    (:func:`legal_step_length`), else project onto the simplex. While the
    log-likelihood is below that of ``theta_0``, set ``alpha = (alpha - 1) / 2``,
    extrapolate and project. After ``_MAX_BACKTRACKS`` halvings the plain double step
    ``theta_2`` is taken, so the log-likelihood never decreases. The log-likelihood of
    a candidate comes with its EM map ``f(theta^(k))`` (step 9), so an accepted step
    costs exactly three EM maps and each backtrack one more. The comparison is with
    ``L(theta_0)`` rather than the previous extrapolated point, which makes the
    sequence of ``theta_0`` monotone. When to stop is the loop's:
    ``bayespmf.fit.squarem.squarem_pmf_converged``.

    Examples
    --------
    >>> from bayespmf.kernels.em import em_step_numpy
    >>> codes = np.array([[0, 0], [1, 1], [0, 0], [1, -1]])
    >>> step = lambda w, a: em_step_numpy(codes, [2, 2], w, a)
    >>> a0 = np.array([[0.6, 0.3], [0.4, 0.7], [0.5, 0.2], [0.5, 0.8]])
    >>> w, a, ll, info = squarem_pmf_step(step, np.array([0.5, 0.5]), a0, [2, 2])
    >>> info.n_evals >= 3, np.add.reduceat(a, [0, 2], axis=0).round(12).tolist()
    (True, [[1.0, 1.0], [1.0, 1.0]])
    """
    offsets = offsets_of(n_categories)
    w0 = np.asarray(weights, dtype=float)
    a0 = np.asarray(factors_stacked, dtype=float)
    shape = a0.shape
    w1, a1, ll0 = em_step(w0, a0)
    w2, a2, _ = em_step(w1, a1)
    n_evals = 2
    t0, t1, t2 = _pack(w0, a0), _pack(w1, a1), _pack(w2, a2)
    r = t1 - t0
    v = (t2 - t1) - r
    nv = np.linalg.norm(v)
    alpha = -np.linalg.norm(r) / nv if nv > 0 else -1.0
    legal_edge = projected = False
    n_back = 0
    if not np.isfinite(alpha) or alpha > -1.0:
        alpha = -1.0
        w_new, a_new, _ = em_step(w2, a2)
        return w_new, a_new, ll0, SquaremPMFStepInfo(3, alpha, 0, False, False)

    def extrapolate(al):
        return t0 - 2.0 * al * r + al**2 * v

    theta = extrapolate(alpha)
    if np.any(theta < 0):
        edge = legal_step_length(t0, r, v, alpha)
        if np.isfinite(edge) and edge > alpha:
            alpha, legal_edge = edge, True
            w, a = _to_simplex(extrapolate(alpha), shape, offsets, project=False)
        else:
            projected = True
            w, a = _to_simplex(theta, shape, offsets, project=True)
    else:
        w, a = _to_simplex(theta, shape, offsets, project=False)
    w_new, a_new, ll = em_step(w, a)
    n_evals += 1
    while not (ll >= ll0) and n_back < _MAX_BACKTRACKS:
        alpha = (alpha - 1.0) / 2.0
        n_back += 1
        projected = True
        w, a = _to_simplex(extrapolate(alpha), shape, offsets, project=True)
        w_new, a_new, ll = em_step(w, a)
        n_evals += 1
    if not (ll >= ll0):
        alpha = -1.0
        w_new, a_new, _ = em_step(w2, a2)
        n_evals += 1
    return (
        w_new,
        a_new,
        ll0,
        SquaremPMFStepInfo(n_evals, alpha, n_back, legal_edge, projected),
    )


def batched_squarem_pmf_step(em_step, weights, factors, n_categories):
    """One SQUAREM-PMF cycle for K parameter sets at once (multi-start exploration).

    Parameters
    ----------
    em_step : callable
        ``(weights (K, F), factors (P, K, F)) -> (weights, factors, loglik (K,))``,
        e.g. :meth:`bayespmf.kernels.em.NumbaEMKernel.step` with K starts.
    weights : ndarray, shape (K, F)
    factors : ndarray, shape (sum I_n, K, F)
    n_categories : sequence of int

    Returns
    -------
    weights, factors : ndarray
        The next iterate of every start.
    loglik : ndarray, shape (K,)
        Log-likelihood of each *input* parameter set.
    n_evals : int
        Batched EM maps evaluated (3, or 4 when some start's extrapolation failed).

    Notes
    -----
    Table I of Chege et al. with a simplified Table II: per start ``alpha = -||r|| /
    ||v||`` (at most -1), the extrapolated point is projected onto the simplex when an
    entry is negative, and a start whose extrapolation lowers the log-likelihood takes
    the plain double EM step ``theta_2`` instead (no legal-edge search or halving, so
    that every start advances by the same batched maps). The log-likelihood of every
    start therefore never decreases.

    Examples
    --------
    >>> from bayespmf.kernels.em import NumbaEMKernel
    >>> k = NumbaEMKernel(np.array([[0, 0], [1, 1], [0, 0], [1, -1]]), [2, 2], 2)
    >>> a0 = np.array([[0.6, 0.3], [0.4, 0.7], [0.5, 0.2], [0.5, 0.8]])[:, None, :]
    >>> w, a, ll, n = batched_squarem_pmf_step(k.step, np.full((1, 2), 0.5), a0, [2, 2])
    >>> n >= 3, np.add.reduceat(a[:, 0], [0, 2], axis=0).round(12).tolist()
    (True, [[1.0, 1.0], [1.0, 1.0]])
    """
    offsets = offsets_of(n_categories)
    w0 = np.asarray(weights, dtype=float)
    a0 = np.asarray(factors, dtype=float)
    w1, a1, ll0 = em_step(w0, a0)
    w2, a2, _ = em_step(w1, a1)
    n_start = w0.shape[0]

    def flat(w, a):
        return np.concatenate([a.transpose(1, 0, 2).reshape(n_start, -1), w], axis=1)

    t0, t1, t2 = flat(w0, a0), flat(w1, a1), flat(w2, a2)
    r = t1 - t0
    v = (t2 - t1) - r
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = -np.linalg.norm(r, axis=1) / np.linalg.norm(v, axis=1)
    alpha = np.where(np.isfinite(alpha), np.minimum(alpha, -1.0), -1.0)[:, None]
    theta = t0 - 2.0 * alpha * r + alpha**2 * v
    n_fac = a0.shape[0] * a0.shape[2]
    a = theta[:, :n_fac].reshape(n_start, a0.shape[0], a0.shape[2]).transpose(1, 0, 2)
    w = project_simplex(theta[:, n_fac:], axis=1)
    a = project_blocks(a, offsets)
    w3, a3, ll = em_step(w, a)
    n_evals = 3
    bad = ~(ll >= ll0)
    if bad.any():
        w4, a4, _ = em_step(w2, a2)
        n_evals += 1
        w3[bad] = w4[bad]
        a3[:, bad] = a4[:, bad]
    return w3, a3, ll0, n_evals
