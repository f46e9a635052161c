r"""Alpha and the extension of a VLAD fit calibrated by a parametric bootstrap.

:func:`calibrate_alpha` simulates data sets from the fitted nest with the kernel's
noise (one simulator per kernel, ``NOISE_SIMULATORS``), reruns the k-means step on
them and moves alpha until the simulated moment statistic matches the observed one;
it also returns the inflation of the centroids by finite-sample noise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import stdtrit

from bayespmf._validation import check_random_state
from bayespmf.kernels._vlad_linalg import pd_sqrt, psd_sqrt
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, kmeans
from bayespmf.kernels.simplex import project_simplex
from bayespmf.kernels.vlad_geometry import Subspace
from bayespmf.kernels.vlad_moments import (
    NOISE_CORRECTIONS,
    Moments,
    dirichlet_cov_scale,
    estimate_alpha,
    phi_from_moments,
    phi_star,
)

__all__ = [
    "AlphaCalibration",
    "CALIBRATION_MAX_EVALS",
    "CALIBRATION_MAX_REPS",
    "CALIBRATION_MAX_STEP",
    "CALIBRATION_MIN_REPS",
    "CALIBRATION_POINTS",
    "CALIBRATION_TOL",
    "FrameFit",
    "INTERVAL_LEVEL",
    "INTERVAL_REPS",
    "NOISE_SIMULATORS",
    "calibrate_alpha",
    "frame_kmeans",
]

#: Simulated points per evaluation of :func:`calibrate_alpha`, split in replicates of the
#: data's size n: n_rep = clip(round(CALIBRATION_POINTS / n), CALIBRATION_MIN_REPS,
#: CALIBRATION_MAX_REPS). The relative sd of the moment statistic phi* falls like
#: 1 / sqrt(n); 8 replicates at n <= 2000 and 4 above keep the calibration's own Monte
#: Carlo error at a third to a half of it. With 2 replicates alpha varied with the seed
#: far more than with 4 (:ref:`bench-vlad-alpha`).
CALIBRATION_POINTS = 16_000
CALIBRATION_MIN_REPS = 4
CALIBRATION_MAX_REPS = 8

#: Evaluations of the simulated statistic (each one k-means run per replicate, warm
#: started) and the stopping step in log(alpha): one or two secant steps after the
#: first correction usually move alpha by less than 1 %.
CALIBRATION_MAX_EVALS = 4
CALIBRATION_TOL = 0.01

#: Largest step of the secant search in log(alpha) (a factor of 3 in alpha).
CALIBRATION_MAX_STEP = float(np.log(3.0))

#: Level of the reported interval for alpha, and the replicates of the first
#: evaluation of :func:`calibrate_alpha`, whose spread sets the interval's width
#: (7 degrees of freedom: the sd is known to about +-27 %, and the t quantile, 2.36
#: instead of 1.96, pays for that).
INTERVAL_LEVEL = 0.95
INTERVAL_REPS = 8


def _gaussian_simulator(sub: Subspace, ctx: dict, vertices) -> Callable:
    # Lemma 3(a): sigma^2 I on every direction of the top subspace.
    r = sub.singular_values.size
    sd = float(np.sqrt(ctx["sigma2"]))

    def draw(theta, rng):
        return sd * rng.standard_normal((theta.shape[0], r))

    return draw


def _poisson_simulator(sub: Subspace, ctx: dict, vertices) -> Callable:
    # x_i | mu_i ~ Poisson(mu_i): W^T (x_i - mu_i) has covariance W^T Diag(mu_i) W
    # = sum_k theta_ik W^T Diag(beta_k) W, heavier near the vertices with large rates;
    # drawn as sum_k sqrt(theta_ik) R_k z_ik with R_k^2 = W^T Diag(beta_k) W (Gaussian:
    # each coordinate of the projection sums D independent counts).
    W = sub.components
    rates = np.maximum(sub.center + vertices @ W.T, 0.0)
    roots = np.stack([psd_sqrt((W * b[:, None]).T @ W) for b in rates])

    def draw(theta, rng):
        z = rng.standard_normal((theta.shape[0], *roots.shape[:2]))
        return np.einsum("nk,nkj,kij->ni", np.sqrt(theta), z, roots)

    return draw


def _multinomial_simulator(sub: Subspace, ctx: dict, vertices) -> Callable:
    # y_i = x_i / N_i with x_i ~ Mult(N_i, mu_i): Cov(y_i | mu_i) = (Diag(mu_i) -
    # mu_i mu_i^T) / N_i = (I - mu_i 1^T) Diag(mu_i) (I - 1 mu_i^T) / N_i, so the noise is
    # e - mu_i (1^T e) with e ~ N(0, Diag(mu_i) / N_i); (W^T e, 1^T e) is drawn as for
    # the Poisson kernel on the columns [W, 1].
    W = sub.components
    topics = project_simplex(sub.center + vertices @ W.T, axis=1)
    Wt = np.hstack([W, np.ones((W.shape[0], 1))])
    roots = np.stack([psd_sqrt((Wt * b[:, None]).T @ Wt) for b in topics])
    proj = topics @ W
    inv_sqrt_len = 1.0 / np.sqrt(np.asarray(ctx["lengths"], dtype=float))

    def draw(theta, rng):
        z = rng.standard_normal((theta.shape[0], *roots.shape[:2]))
        f = np.einsum("nk,nkj,kij->ni", np.sqrt(theta), z, roots)
        return (f[:, :-1] - (theta @ proj) * f[:, -1:]) * inv_sqrt_len[:, None]

    return draw


#: One noise simulator per kernel, behind one registry (the simulation counterpart of
#: NOISE_CORRECTIONS): each takes the model vertices in the coordinates of W (relative
#: to the data centre) and returns ``draw(theta, rng)``, the kernel's noise projected on
#: the top subspace for the mixing weights ``theta`` (n, K).
NOISE_SIMULATORS: dict[str, Callable] = {
    "gaussian": _gaussian_simulator,
    "poisson": _poisson_simulator,
    "multinomial": _multinomial_simulator,
}


class AlphaCalibration(NamedTuple):
    r"""Result of :func:`calibrate_alpha`.

    Attributes
    ----------
    alpha : float
        :math:`\hat\alpha`.
    inflation : float
        :math:`\hat\rho`, the factor by which k-means on data of this size and noise
        spreads the centroids beyond the CVT centroids; the vertices are
        :math:`\hat c_0 + \gamma(\hat\alpha) / \hat\rho\, (\hat c_k - \hat c_0)`.
    interval : (float, float)
        Approximate 95 % interval for alpha (parametric bootstrap; nan when alpha was
        given or could not be matched).
    objective : float
        :math:`((\bar\varphi_{sim}(\hat\alpha) - \varphi^*) / \varphi^*)^2` at the last
        evaluation (nan when alpha was given).
    n_evals : int
        Evaluations of the simulated statistic.
    """

    alpha: float
    inflation: float
    interval: tuple[float, float]
    objective: float
    n_evals: int


class FrameFit(NamedTuple):
    r"""Result of :func:`frame_kmeans`.

    Attributes
    ----------
    centroids : ndarray (K, r)
        The k-means centroids, in the frame of the points.
    phi : float
        The moment statistic :math:`\varphi^*` of eq. (5) of the centroids
        (:func:`~bayespmf.kernels.vlad_moments.phi_from_moments`).
    counts : ndarray of int (K,)
        Points in each cell; cell ``k`` is the one started at ``init[k]``.
    """

    centroids: np.ndarray
    phi: float
    counts: np.ndarray


def frame_kmeans(
    points,
    init,
    noise,
    scale,
    *,
    whiten,
    max_iter=DEFAULT_KMEANS_MAX_ITER,
    n_init: int = 0,
    rng=None,
) -> FrameFit:
    r"""k-means of projected points in the whitening metric, cells in the order of ``init``.

    The clustering of VLAD (Alg. 1, steps 4-5) repeated on points simulated in the
    ``K - 1`` coordinates of ``W``: the points are centred, whitened by their own
    covariance (``whiten="data"``) or by its noise-corrected version
    :math:`(\mathrm{Cov} - N) / s` of Lemma 3 (``"corrected"``, falling back to the
    covariance when that is not positive definite), and clustered either by one Lloyd
    run started at ``init`` (``n_init=0``; same frame as ``points``) or, as VLAD
    clusters the data, by the best of ``n_init`` k-means++ restarts, whose cells are
    then paired with the rows of ``init`` by least total squared distance (Hungarian
    assignment). Either way simulated cell ``k`` is the cell of ``init[k]``.

    Parameters
    ----------
    points : ndarray (n, r)
    init : ndarray (K, r)
    noise : ndarray (r, r)
        The kernel's noise covariance on the subspace (``NOISE_CORRECTIONS``).
    scale : float
        The factor in front of :math:`B S B^T` in Lemma 3.
    whiten : {"data", "corrected"}
    max_iter : int
    n_init : int, default 0
        k-means++ restarts; 0 runs one Lloyd iteration from ``init``.
    rng : None, int or Generator

    Returns
    -------
    FrameFit

    Examples
    --------
    >>> pts = np.array([[0.0, 0.0], [0.2, 0.0], [4.0, 1.0], [4.2, 1.0]])
    >>> fit = frame_kmeans(pts, pts[[0, 2]], np.zeros((2, 2)), 1.0, whiten="data")
    >>> fit.counts.tolist(), fit.centroids.round(2).tolist()
    ([2, 2], [[0.1, 0.0], [4.1, 1.0]])
    """
    n = points.shape[0]
    mean = points.mean(axis=0)
    pc = points - mean
    cov = pc.T @ pc / n
    A = pd_sqrt((cov - noise) / scale) if whiten == "corrected" else None
    if A is None:
        A = psd_sqrt(cov)
    z = np.linalg.solve(A, pc.T).T
    z0 = np.linalg.solve(A, (init - mean).T).T
    rng = check_random_state(rng)
    K = init.shape[0]
    if n_init:
        eta, labels, _ = kmeans(z, K, n_init=n_init, max_iter=max_iter, random_state=rng)
        d2 = ((eta[:, None, :] - z0[None, :, :]) ** 2).sum(axis=2)
        rows, cols = linear_sum_assignment(d2)
        order = np.empty(K, dtype=int)
        order[cols] = rows  # order[k]: the fitted cell nearest init[k]
        relabel = np.empty(K, dtype=int)
        relabel[order] = np.arange(K)
        eta, labels = eta[order], relabel[labels]
    else:
        eta, labels, _ = kmeans(
            z, K, n_init=0, init=z0, max_iter=max_iter, random_state=rng
        )
    g = eta @ A.T
    gc = g - g.mean(axis=0)
    mom = Moments(
        float(np.sum((gc @ cov) * gc)),
        float(np.sum((gc @ noise) * gc)),
        scale,
        float(np.sum((gc @ gc.T) ** 2)),
    )
    counts = np.bincount(labels, minlength=init.shape[0])
    return FrameFit(g + mean, phi_from_moments(mom), counts)


def _secant_step(ts, hs, fallback_slope: float) -> tuple[float, float]:
    r"""Next log(alpha) of the search of :func:`calibrate_alpha`, and the slope used.

    A least-squares line through the (up to) three evaluations nearest the root (the
    smallest ``|h|``), so that one evaluation's Monte Carlo noise does not set the
    step; the simulated curve rises with alpha like phi, so a flat or falling line is
    noise, and the slope of :math:`\log\varphi` (``fallback_slope``) is used instead.
    Steps are at most ``CALIBRATION_MAX_STEP`` from the best evaluation.
    """
    order = np.argsort(np.abs(hs))[:3]
    t_best, h_best = ts[order[0]], hs[order[0]]
    slope = fallback_slope
    if order.size > 1 and np.ptp(ts[order]) > 0:
        fit = np.polyfit(ts[order], hs[order], 1)
        if np.isfinite(fit[0]) and fit[0] > 0.25 * fallback_slope:
            slope = float(fit[0])
    step = float(np.clip(-h_best / slope, -CALIBRATION_MAX_STEP, CALIBRATION_MAX_STEP))
    return float(t_best + step), slope


def calibrate_alpha(
    sub: Subspace,
    g,
    kernel: str,
    ctx: dict,
    gamma_fn: Callable,
    alpha_range: tuple[float, float],
    *,
    alpha: float | None = None,
    whiten: str = "data",
    n_rep: int | None = None,
    max_evals: int = CALIBRATION_MAX_EVALS,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    random_state=None,
) -> AlphaCalibration:
    r"""Alpha of eq. (5) and the centroid spread, calibrated by a parametric bootstrap.

    Parameters
    ----------
    sub : Subspace
    g : ndarray (K, r)
        The k-means centroids in the coordinates of ``W``, relative to the data centre
        (``(centroids - center) @ W``; not re-centred).
    kernel : {"gaussian", "poisson", "multinomial"}
    ctx : dict
        The kernel's noise parameters: ``sigma2`` (Gaussian), ``inv_length`` and
        ``lengths`` (multinomial).
    gamma_fn : callable
        :math:`\alpha \mapsto \gamma(\alpha)`, vectorized.
    alpha_range : (float, float)
    alpha : float, optional
        Known alpha: only the inflation is estimated.
    whiten : {"data", "corrected"}
        The metric the centroids were computed in (repeated on the simulated data).
    n_rep : int, optional
        Simulated data sets per evaluation; default from ``CALIBRATION_POINTS``.
    max_evals : int
    max_iter : int
        Lloyd iterations per simulated k-means run.
    random_state : None, int or Generator

    Returns
    -------
    AlphaCalibration

    Notes
    -----
    The moment equation (5) is flat in alpha: with :math:`\varphi(\alpha) =
    \gamma(\alpha)^2 / (K(K\alpha+1))` (eq. (19)), :math:`d\log\varphi / d\log\alpha`
    is about 0.16 at K = 10, alpha = 2, so a 1 % error in the target
    :math:`\varphi^* = \langle M, \tilde\Sigma\rangle / \|M\|_F^2` is a 6 % error in
    alpha. And :math:`\varphi^*` is biased low at small n for two reasons, both of
    which spread the empirical k-means centroids beyond the CVT centroids of the
    population (Lemma 1): k-means overfits a finite sample (the plain estimate is low
    at small n even on the noise-free projected signal), and noise moves points across
    cells (lower still; :ref:`bench-vlad-alpha`). Lemma 3's covariance correction removes
    neither, and neither is a property of the noise alone (SIMEX, which extrapolates
    in the noise level, misses the first and its quadratic extrapolation to
    :math:`\lambda = -1` has a large variance at small n).

    The bias depends only on alpha, K, n and the noise relative to the simplex, all of
    which the fit provides, so it is simulated (indirect inference, Gouriéroux,
    Monfort & Renault 1993): for a candidate alpha the fitted model is the nest with
    vertices :math:`\gamma(\alpha)/\rho \cdot g_k` in the ``K - 1`` coordinates of ``W``
    (whose CVT centroids are :math:`g_k / \rho`, by the definition of gamma), weights
    :math:`\mathrm{Dir}_K(\alpha)` and the kernel's noise projected on ``W``
    (``NOISE_SIMULATORS``: Gaussian; Poisson and multinomial with the covariance of each
    point's own mean). ``n_rep`` data sets of size ``n`` are drawn, clustered exactly as
    the data were (same metric, warm started at the model's CVT centroids), and give
    the mean simulated target :math:`\bar\varphi_{sim}(\alpha)` and the inflation
    :math:`\rho`, the least-squares scale of the simulated centroids on the CVT ones.
    :math:`\hat\alpha` solves :math:`\bar\varphi_{sim}(\alpha) = \varphi^*` by a
    secant-like search in log alpha (:func:`_secant_step`: a line through the
    evaluations nearest the root), started from the plain solution of eq. (5) with the
    slope of :math:`\log\varphi` as the first slope. Common random numbers
    (the same uniforms, through
    :func:`~bayespmf.kernels.extension_table.dirichlet_common_draws`, and the same
    normals at every alpha) keep the simulated curve smooth in alpha.
    Everything happens in ``K - 1`` dimensions: an evaluation costs ``n_rep`` k-means
    runs on n points, like SIMEX's.

    The interval is :math:`\hat\alpha \exp(\pm t\, s)`, with ``s`` the sd of
    :math:`\log\varphi_{sim}` over the ``INTERVAL_REPS`` replicates of the first
    evaluation (the sampling sd of :math:`\log\varphi^*` under the fitted model),
    inflated by :math:`\sqrt{1 + 1/n_{rep}}` for the calibration's own Monte Carlo
    error and divided by the slope of the simulated curve in log alpha, and ``t`` the
    Student quantile for ``INTERVAL_REPS - 1`` degrees of freedom. It is a
    delta-method interval: a guide to how well the data determine alpha, not an exact
    one (its coverage in simulations is in :ref:`bench-vlad-alpha`).

    Two effects of the D-dimensional SVD are not simulated: the top singular
    directions lean toward the noise, which adds about :math:`\mathrm{tr}(N)/n` to
    each top eigenvalue and stretches the projected simplex by about
    :math:`\mathrm{tr}(N) / (n\lambda_j)` (a few percent at n = 1000; correcting it
    changed the vertex error little, in either direction: :ref:`bench-vlad-alpha`).
    """
    from bayespmf.kernels.extension_table import dirichlet_common_draws

    rng = check_random_state(random_state)
    g = np.asarray(g, dtype=float)
    K = g.shape[0]
    n = sub.scores.shape[0]
    if n_rep is None:
        n_rep = int(
            np.clip(
                round(CALIBRATION_POINTS / n), CALIBRATION_MIN_REPS, CALIBRATION_MAX_REPS
            )
        )
    noise, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    # the first evaluation runs INTERVAL_REPS replicates for the sd of the interval;
    # the search compares evaluations on the first n_rep of them (same seeds)
    seeds = rng.integers(2**63 - 1, size=max(n_rep, INTERVAL_REPS))
    lo, hi = np.log(alpha_range[0]), np.log(alpha_range[1])

    def evaluate(t: float, rho: float, n_seeds: int):
        a = float(np.exp(t))
        gam = float(gamma_fn(a))
        cvt = g / rho
        vertices = gam * cvt
        draw = NOISE_SIMULATORS[kernel](sub, ctx, vertices)
        phis, rhos = [], []
        ref = cvt - cvt.mean(axis=0)
        for seed in seeds[:n_seeds]:
            r = np.random.default_rng(seed)
            u1, u2 = r.random((n, K)), r.random((n, K))
            theta = dirichlet_common_draws(a, u1, u2, interpolate=True)
            points = theta @ vertices + draw(theta, r)
            gs, phi, _ = frame_kmeans(
                points, cvt, noise, scale, whiten=whiten, max_iter=max_iter, rng=r
            )
            gs = gs - gs.mean(axis=0)
            phis.append(phi)
            rhos.append(float(np.sum(gs * ref) / np.sum(ref * ref)))
        return np.log(np.asarray(phis)), float(np.mean(rhos[:n_rep]))

    if alpha is not None:
        _, rho = evaluate(float(np.log(alpha)), 1.0, n_rep)
        return AlphaCalibration(float(alpha), rho, (np.nan, np.nan), np.nan, 1)

    gc = g - g.mean(axis=0)
    phi_obs = phi_star(sub, gc, kernel, ctx)
    a0, objective = estimate_alpha(phi_obs, K, gamma_fn, alpha_range)
    if not np.isfinite(objective):  # eq. (5) has no solution; the caller warns
        return AlphaCalibration(a0, 1.0, (np.nan, np.nan), objective, 0)

    def pop_slope(t: float) -> float:
        a = np.exp([t - 0.01, t + 0.01])
        lphi = np.log(gamma_fn(a) ** 2 * dirichlet_cov_scale(a, K))
        return float((lphi[1] - lphi[0]) / 0.02)

    def mismatch(lphi) -> float:
        # log of the mean simulated target over the observed one
        return float(np.log(np.nanmean(np.exp(lphi))) - np.log(phi_obs))

    t, rho = float(np.log(a0)), 1.0
    ts: list[float] = []
    hs: list[float] = []
    sd, slope, h, n_evals = np.nan, pop_slope(t), np.nan, 0
    for _ in range(max_evals):
        lphi, rho = evaluate(t, rho, len(seeds) if n_evals == 0 else n_rep)
        if n_evals == 0:
            sd = float(np.nanstd(lphi, ddof=1))
        n_evals += 1
        h = mismatch(lphi[:n_rep])
        if not np.isfinite(h):  # a simulated target was not positive: stop here
            break
        ts.append(t)
        hs.append(h)
        t_new, slope = _secant_step(np.array(ts), np.array(hs), pop_slope(t))
        t_new = float(np.clip(t_new, lo, hi))
        done = abs(t_new - t) < CALIBRATION_TOL
        t = t_new
        if done:
            break
    # sd of log phi* under the fitted model, plus the Monte Carlo error of the mean
    # over n_rep replicates, mapped to log(alpha) by the slope of the simulated curve
    se = sd * np.sqrt(1.0 + 1.0 / n_rep) / slope
    q = float(stdtrit(len(seeds) - 1, 0.5 + INTERVAL_LEVEL / 2))
    interval = (
        float(np.clip(np.exp(t - q * se), *alpha_range)),
        float(np.clip(np.exp(t + q * se), *alpha_range)),
    )
    return AlphaCalibration(
        float(np.exp(t)), rho, interval, float(np.expm1(h) ** 2), n_evals
    )
