r"""The moment estimate of the Dirichlet concentration of a VLAD fit.

Sec. 3.3 of Yurochkin, Guha, Sun & Nguyen (ICML 2019): estimate :math:`\alpha` by
matching the model covariance :math:`B S(\alpha) B^T` to the sample covariance
corrected for the kernel's noise (eq. (5) and Lemma 3 of Supplement A.3), with an
optional SIMEX correction of the noise bias. Kernels do not warn: a moment equation
without a solution comes back as a nan objective for the caller to report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize_scalar

from bayespmf._validation import check_random_state
from bayespmf.kernels._vlad_linalg import pd_sqrt
from bayespmf.kernels.kmeans import kmeans
from bayespmf.kernels.vlad_geometry import Subspace

__all__ = [
    "CORRECTED_MAX_NOISE_FRACTION",
    "Moments",
    "NOISE_CORRECTIONS",
    "SIMEX_LAMBDAS",
    "SIMEX_REPS",
    "alpha_objective",
    "corrected_metric",
    "dirichlet_cov_scale",
    "estimate_alpha",
    "noise_bulk_edge",
    "noise_fraction",
    "noise_variance",
    "phi_from_moments",
    "phi_star",
    "signal_margin",
    "simex_phi_star",
]

#: Whitening by the noise-corrected covariance (:func:`corrected_metric`) only when
#: the noise is at most this fraction of the data variance along every direction of
#: the top subspace; otherwise by the data covariance (Alg. 1). With the bootstrap
#: calibration of alpha the corrected metric was slightly better at small noise
#: fractions and worse at large ones (:ref:`bench-vlad-alpha`).
CORRECTED_MAX_NOISE_FRACTION = 0.25

# --------------------------------------------------------------------------------------
# alpha by the method of moments (eq. (5) with Lemma 3)


def dirichlet_cov_scale(alpha, n_components: int):
    r"""The scalar of :math:`S(\alpha) = \frac{1}{K(K\alpha+1)} (I_K - \frac1K 1 1^T)`.

    The covariance of :math:`\mathrm{Dir}_K(\alpha)` (Sec. 3.2 and Supplement A.3.2).

    Examples
    --------
    >>> float(dirichlet_cov_scale(2.0, 3))
    0.047619047619047616
    """
    return 1.0 / (n_components * (n_components * np.asarray(alpha, dtype=float) + 1.0))


def noise_variance(sub: Subspace, n_samples: int, n_features: int) -> float:
    r"""Gaussian noise variance from the trailing spectrum of the sample covariance.

    :math:`\hat\sigma^2 = (\|\bar X\|_F^2 - \sum_{k<K} \lambda_k^2) / (n (D - K + 1))`:
    under Lemma 3(a) every eigenvalue of :math:`\Sigma` beyond the first ``K - 1`` is
    :math:`\sigma^2`. Zero when ``D = K - 1`` (no trailing spectrum).

    Examples
    --------
    >>> W = np.eye(3)[:, :1]
    >>> sub = Subspace(np.zeros(3), np.zeros((4, 1)), np.array([3.0]), W, 17.0)
    >>> noise_variance(sub, 4, 3)
    1.0
    """
    r = sub.singular_values.size
    if n_features <= r:
        return 0.0
    trailing = sub.total_ss - float(np.sum(sub.singular_values**2))
    return max(trailing, 0.0) / (n_samples * (n_features - r))


class Moments(NamedTuple):
    """Inner products that fix the scalar moment equation of eq. (5)."""

    m_sigma: float  # <M, Sigma_hat>, M = Ct^T Ct with Ct the centred centroids (K, D)
    m_noise: float  # <M, N>: the kernel's noise term of Lemma 3
    scale: float  # Sigma = scale * B S B^T + N  (1 - 1/N for multinomial, else 1)
    m_norm2: float  # ||M||_F^2


def _gaussian_noise(sub: Subspace, ctx: dict) -> tuple[np.ndarray, float]:
    # Lemma 3(a): Sigma = B S B^T + sigma^2 I.
    r = sub.singular_values.size
    return ctx["sigma2"] * np.eye(r), 1.0


def _poisson_noise(sub: Subspace, ctx: dict) -> tuple[np.ndarray, float]:
    # Lemma 3(b): Sigma = B S B^T + Diag(sum_k beta_k / K) = B S B^T + Diag(c0). The
    # Poisson variance equals the mean, so the diagonal term is ADDED to B S B^T by the
    # noise and must be SUBTRACTED from Sigma_hat to estimate B S B^T.
    W = sub.components
    return (W * sub.center[:, None]).T @ W, 1.0


def _multinomial_noise(sub: Subspace, ctx: dict) -> tuple[np.ndarray, float]:
    # Lemma 3(c) for frequencies y_i = x_i / N_i: Sigma = (1 - m) B S B^T
    # + m (Diag(c0) - c0 c0^T), with m = 1/N (the mean of 1/N_i for unequal lengths
    # drawn independently of theta).
    m = ctx["inv_length"]
    W = sub.components
    wc = W.T @ sub.center
    return m * ((W * sub.center[:, None]).T @ W - np.outer(wc, wc)), 1.0 - m


#: One covariance correction per kernel (Lemma 3), behind one registry: each returns
#: the noise term N projected on the top subspace, W^T N W (r x r), and the factor in
#: front of B S B^T.
NOISE_CORRECTIONS: dict[str, Callable] = {
    "gaussian": _gaussian_noise,
    "poisson": _poisson_noise,
    "multinomial": _multinomial_noise,
}


def corrected_metric(
    sub: Subspace,
    kernel: str,
    ctx: dict,
    *,
    max_noise_fraction: float = CORRECTED_MAX_NOISE_FRACTION,
) -> np.ndarray | None:
    r"""Square root of the noise-corrected covariance on the top subspace.

    :math:`T = W^T\tilde\Sigma W = (\Lambda^2/n - W^T N W) / s` (Lemma 3, ``s`` the
    factor in front of :math:`BSB^T`), returned as its symmetric square root, or None
    when the noise :math:`W^T N W` is more than ``max_noise_fraction`` of the data
    variance :math:`\Lambda^2/n` along some direction (the largest eigenvalue of
    :math:`(\Lambda^2/n)^{-1/2} W^T N W (\Lambda^2/n)^{-1/2}`; at 1, ``T`` is not
    positive definite). Whitening by ``T`` instead of the raw :math:`\Lambda^2/n`
    makes k-means see the noise-free simplex's covariance :math:`BS(\alpha)B^T`, which
    is what Lemma 2 assumes; but it scales the noise along a direction by
    :math:`1 / (1 - f)`, ``f`` that direction's noise fraction, so noisy directions
    dominate the clustering (see ``CORRECTED_MAX_NOISE_FRACTION``).
    """
    n = sub.scores.shape[0]
    N, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    if noise_fraction(sub, kernel, ctx) > max_noise_fraction:
        return None
    return pd_sqrt((np.diag(sub.singular_values**2 / n) - N) / scale)


def noise_fraction(sub: Subspace, kernel: str, ctx: dict) -> float:
    r"""The largest share of the data variance that is noise along a top direction.

    The largest eigenvalue of :math:`(\Lambda^2/n)^{-1/2}\, W^T N W\,
    (\Lambda^2/n)^{-1/2}`, with :math:`W^T N W` the kernel's noise covariance on the
    top subspace (Lemma 3, ``NOISE_CORRECTIONS``) and :math:`\Lambda^2/n` the data
    variance along its directions: 0 without noise, near 1 when some direction of the
    top subspace carries (almost) only noise, i.e. the projection does not resolve
    the simplex along it.

    Examples
    --------
    >>> from bayespmf.kernels.vlad_geometry import top_subspace
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)) * [3.0, 1.0, 1.0, 1.0, 1.0]  # noise sd 1
    >>> frac = noise_fraction(top_subspace(X, 2), "gaussian", {"sigma2": 1.0})
    >>> bool(frac > 0.9)  # the second top direction is noise only
    True
    """
    n = sub.scores.shape[0]
    N, _ = NOISE_CORRECTIONS[kernel](sub, ctx)
    lam2 = sub.singular_values**2 / n
    inv = 1.0 / np.sqrt(np.where(lam2 > 0, lam2, np.inf))
    return float(np.linalg.eigvalsh(N * inv[:, None] * inv[None, :])[-1])


#: The kernel's noise variance on each coordinate (the diagonal of the noise term of
#: Lemma 3 in the data's coordinates; the multinomial's rank-one term is left out, as
#: a negative rank-one term cannot raise the top of the noise spectrum).
NOISE_DIAGONALS: dict[str, Callable] = {
    "gaussian": lambda sub, ctx: np.full(sub.center.size, float(ctx["sigma2"])),
    "poisson": lambda sub, ctx: np.maximum(sub.center, 0.0),
    "multinomial": lambda sub, ctx: (
        ctx["inv_length"] * np.clip(sub.center * (1.0 - sub.center), 0.0, None)
    ),
}


def noise_bulk_edge(sub: Subspace, kernel: str, ctx: dict) -> float:
    r"""The top of the spectrum that the kernel's noise alone gives at the data's size.

    The upper edge :math:`b_+` of the limiting spectral distribution of the sample
    covariance of ``n`` rows of noise with covariance :math:`\mathrm{Diag}(d)` (``d``
    the kernel's noise variance on each of the ``D`` coordinates, Lemma 3 of
    Supplement A.3): the Marchenko--Pastur law generalised to a non-identity
    population covariance (Silverstein & Choi, 1995),

    .. math::
        b_+ = \min_{-1/\max_i d_i < m < 0}\;
        -\frac1m + \frac1n \sum_{i=1}^D \frac{d_i}{1 + d_i m},

    which is :math:`\sigma^2 (1 + \sqrt{D/n})^2` for Gaussian noise. A direction of
    the data whose variance :math:`\lambda_j^2 / n` is not above :math:`b_+` cannot
    be told from noise at this size (the BBP transition: below it the sample
    direction carries no trace of a signal direction), so the top subspace of
    Alg. 1 (steps 1-3) has not resolved the simplex along it.

    Examples
    --------
    >>> from bayespmf.kernels.vlad_geometry import top_subspace
    >>> X = np.random.default_rng(0).normal(size=(4000, 1000))
    >>> edge = noise_bulk_edge(top_subspace(X, 3), "gaussian", {"sigma2": 1.0})
    >>> round(edge, 4) == round((1 + (1000 / 4000) ** 0.5) ** 2, 4)
    True
    """
    n = sub.scores.shape[0]
    d = np.asarray(NOISE_DIAGONALS[kernel](sub, ctx), dtype=float)
    d = d[d > 0]
    if d.size == 0 or n == 0:
        return 0.0
    top = float(d.max())

    def x_of_m(m):
        return -1.0 / m + float(np.sum(d / (1.0 + d * m))) / n

    # x(m) -> +inf at both ends of the interval; its minimum is the edge
    res = minimize_scalar(
        x_of_m,
        bounds=(-(1.0 - 1e-12) / top, -1e-12 / top),
        method="bounded",
        options={"xatol": 1e-12 / top},
    )
    return float(res.fun)


def signal_margin(sub: Subspace, kernel: str, ctx: dict) -> float:
    r"""The smallest data variance along a top direction over the noise bulk's edge.

    :math:`\min_j (\lambda_j^2 / n) / b_+`, with :math:`b_+` from
    :func:`noise_bulk_edge`. Above 1, every direction of the top subspace (Alg. 1,
    steps 1-3) stands out of the spectrum that the kernel's noise alone gives at this
    ``n`` and ``D``; at most 1, some direction cannot be told from noise, so the
    simplex is not resolved along it: the vertices along it are not identified from
    these data and alpha (eq. (5)) may be far off (more rows, or a kernel with less
    noise, are needed).

    Examples
    --------
    >>> from bayespmf.kernels.vlad_geometry import top_subspace
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 50)) + np.outer(rng.normal(size=2000), np.ones(50))
    >>> round(signal_margin(top_subspace(X, 1), "gaussian", {"sigma2": 1.0}), 1) > 1
    True
    >>> signal_margin(top_subspace(X, 2), "gaussian", {"sigma2": 1.0}) <= 1.05
    True
    """
    edge = noise_bulk_edge(sub, kernel, ctx)
    n = sub.scores.shape[0]
    if edge <= 0 or n == 0:
        return float("inf")
    return float(np.min(sub.singular_values**2) / n / edge)


def _moments(sub: Subspace, g, kernel: str, ctx: dict) -> Moments:
    n = sub.scores.shape[0]
    lam2 = sub.singular_values**2 / n
    # With Ct = g W^T: <M, Sigma_hat> = tr(g (Lambda^2 / n) g^T) (Ct lies in span W),
    # <M, N> = tr(g W^T N W g^T), ||M||_F^2 = ||g g^T||_F^2.
    N, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    m_sigma = float(np.sum(g**2 * lam2))
    m_noise = float(np.sum((g @ N) * g))
    m_norm2 = float(np.sum((g @ g.T) ** 2))
    return Moments(m_sigma, m_noise, scale, m_norm2)


def phi_from_moments(mom: Moments) -> float:
    r"""The moment statistic :math:`\varphi^*` of eq. (5) from its inner products.

    Parameters
    ----------
    mom : Moments

    Returns
    -------
    float
        :math:`(\langle M, \hat\Sigma\rangle - \langle M, N\rangle) / (s \|M\|_F^2)`;
        nan when it is not positive.

    Examples
    --------
    >>> phi_from_moments(Moments(3.0, 1.0, 1.0, 4.0))
    0.5
    """
    num = (mom.m_sigma - mom.m_noise) / mom.scale
    return num / mom.m_norm2 if num > 0 and mom.m_norm2 > 0 else float("nan")


def phi_star(sub: Subspace, g, kernel: str, ctx: dict) -> float:
    r"""The value of :math:`\varphi(\alpha)` that solves eq. (5).

    :math:`\varphi^* = \langle M, \tilde\Sigma\rangle / \|M\|_F^2` (see
    :func:`alpha_objective`).

    nan when the noise-corrected covariance along the centroids is not positive.
    """
    return phi_from_moments(_moments(sub, np.asarray(g, dtype=float), kernel, ctx))


#: Extra noise levels (multiples of the kernel's noise covariance) and replicates of
#: the SIMEX correction of :func:`simex_phi_star`: the usual choice of Cook & Stefanski
#: (1994) is lambda in [0.5, 2]; two replicates per level keep the cost at six k-means
#: runs in K - 1 dimensions.
SIMEX_LAMBDAS = (0.5, 1.0, 1.5, 2.0)
SIMEX_REPS = 2


def simex_phi_star(
    sub: Subspace,
    g,
    metric,
    kernel: str,
    ctx: dict,
    *,
    lambdas=SIMEX_LAMBDAS,
    n_rep: int = SIMEX_REPS,
    random_state=None,
) -> float:
    r""":math:`\varphi^*` with the noise bias of the k-means centroids removed by SIMEX.

    Noise moves points across Voronoi cells, which pushes the empirical centroids
    outward, so the centroid spread :math:`\|M\|` is inflated and :math:`\varphi^*`
    (hence :math:`\hat\alpha`, since :math:`\varphi` increases slowly with
    :math:`\alpha`) comes out low. Simulation--extrapolation (Cook & Stefanski, JASA
    1994): add Gaussian noise of covariance :math:`\lambda W^T N W` (Lemma 3's noise
    term on the top subspace) to the projected data, redo k-means (warm-started at the
    original centroids) and :math:`\varphi^*` with noise :math:`(1+\lambda)N`, for each
    :math:`\lambda` in ``lambdas``; fit a quadratic in :math:`\lambda` and evaluate
    it at :math:`\lambda = -1` (no noise). Everything happens in ``K - 1`` dimensions.
    On the projected data the noise is Gaussian for the Gaussian kernel and close to
    it by the central limit theorem for Poisson and multinomial counts.

    Returns nan if :math:`\varphi^*` is nan at any level.
    """
    rng = check_random_state(random_state)
    g = np.asarray(g, dtype=float)
    n = sub.scores.shape[0]
    lam = sub.singular_values
    A = np.diag(lam) if metric is None else np.asarray(metric, dtype=float)
    proj = sub.scores * lam  # rows: W^T xbar_i
    N, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    w, V = np.linalg.eigh((N + N.T) / 2)
    root = (V * np.sqrt(np.maximum(w, 0.0))) @ V.T
    eta0 = np.linalg.solve(A, g.T).T
    phi0 = phi_star(sub, g, kernel, ctx)
    xs, ys = [0.0], [phi0]
    for level in lambdas:
        for _ in range(n_rep):
            noisy = proj + np.sqrt(level) * rng.standard_normal(proj.shape) @ root
            noisy = noisy - noisy.mean(axis=0)
            z = np.linalg.solve(A, noisy.T).T
            eta, _, _ = kmeans(z, g.shape[0], n_init=1, init=eta0, random_state=rng)
            gl = eta @ A.T
            gl = gl - gl.mean(axis=0)
            m_sigma = float(np.sum((gl @ (noisy.T @ noisy / n)) * gl))
            m_noise = (1.0 + level) * float(np.sum((gl @ N) * gl))
            m_norm2 = float(np.sum((gl @ gl.T) ** 2))
            xs.append(level)
            ys.append(phi_from_moments(Moments(m_sigma, m_noise, scale, m_norm2)))
    if not np.all(np.isfinite(ys)):
        return float("nan")
    coef = np.polyfit(xs, ys, 2)
    return float(np.polyval(coef, -1.0))


def alpha_objective(alpha, gamma, phi_target: float, n_components: int):
    r"""Scaled objective of eq. (5) as a function of :math:`\alpha` (up to a constant).

    With :math:`\hat B(\gamma)` the extended centroids, :math:`\hat B(\gamma) S(\alpha)
    \hat B(\gamma)^T = \varphi(\alpha) M`, :math:`\varphi(\alpha) = \gamma(\alpha)^2 /
    (K(K\alpha+1))` (eq. (19)) and :math:`M = \tilde C^T \tilde C` (centred
    centroids). So :math:`\|\varphi M - \tilde\Sigma\|_F^2 = \|M\|_F^2 (\varphi -
    \varphi^*)^2 + \mathrm{const}` with :math:`\varphi^* = \langle M, \tilde\Sigma
    \rangle / \|M\|_F^2`; this returns :math:`(\varphi(\alpha) - \varphi^*)^2 /
    \varphi^{*2}` (relative, so that tolerances do not depend on the data's scale).

    Examples
    --------
    >>> float(alpha_objective(1.0, 2.0, 2.0**2 / (2 * 3), 2))
    0.0
    """
    phi = np.asarray(gamma, dtype=float) ** 2 * dirichlet_cov_scale(alpha, n_components)
    return (phi - phi_target) ** 2 / phi_target**2


def estimate_alpha(
    phi_target: float,
    n_components: int,
    gamma_fn: Callable,
    alpha_range: tuple[float, float],
) -> tuple[float, float]:
    r"""Sec. 3.3: alpha by the method of moments, eq. (5), given :math:`\varphi^*`.

    :math:`\hat\alpha = \arg\min_\alpha \|\hat B(\gamma(\alpha)) S(\alpha)
    \hat B(\gamma(\alpha))^T - \tilde\Sigma\|_F`.

    Parameters
    ----------
    phi_target : float
        :math:`\varphi^*` from :func:`phi_star` or :func:`simex_phi_star`.
    n_components : int
    gamma_fn : callable
        :math:`\alpha \mapsto \gamma(\alpha)`, vectorized.
    alpha_range : (float, float)
        Search interval (the extension table's grid).

    Returns
    -------
    alpha : float
    objective : float
        The relative objective at the solution (0 when eq. (5) is solved exactly);
        nan when :math:`\varphi^*` is not positive (no solution, see Notes).

    Notes
    -----
    :math:`\tilde\Sigma` never appears as a D x D matrix: every term of eq. (5) that
    depends on :math:`\alpha` is an inner product with :math:`M`, computed in the
    ``K - 1`` coordinates of ``W`` (see :func:`alpha_objective`). The scalar problem
    is solved by a search over 400 log-spaced values followed by bounded Brent
    refinement. When :math:`\varphi^*` is not positive (the noise correction exceeds
    the covariance along the centroids) the largest ``alpha`` of the range is returned
    with a nan objective; the caller warns (:func:`bayespmf.fit.simplex.fit_simplex_nest`
    raises a ``ConvergenceWarning``).

    Examples
    --------
    >>> fn = lambda a: np.sqrt(1.0 + 3.0 * np.asarray(a))  # a made-up gamma(alpha)
    >>> round(estimate_alpha(float(fn(1.0)) ** 2 / (2 * 3), 2, fn, (0.01, 100))[0], 4)
    1.0
    """
    lo, hi = np.log(alpha_range[0]), np.log(alpha_range[1])
    if not np.isfinite(phi_target) or phi_target <= 0:
        return float(alpha_range[1]), float("nan")
    grid = np.linspace(lo, hi, 400)
    vals = alpha_objective(np.exp(grid), gamma_fn(np.exp(grid)), phi_target, n_components)
    j = int(np.argmin(vals))
    a, b = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]

    def f(t):
        return float(
            alpha_objective(np.exp(t), gamma_fn(np.exp(t)), phi_target, n_components)
        )

    res = minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-8})
    t = res.x if res.fun <= vals[j] else grid[j]
    return float(np.exp(t)), float(min(res.fun, vals[j]))
