r"""The extension parameter :math:`\gamma(\alpha)` of VLAD (Alg. 2), tabulated.

:math:`\gamma` is the ratio of the distance from the centre of :math:`\Delta^{K-1}` to a
vertex and the distance from the centre to the k-means (CVT) centroid of the
:math:`\mathrm{Dir}_K(\alpha)` distribution on that vertex's side. It depends on ``K``
and :math:`\alpha` only, so it is computed once by Monte Carlo
(``benchmarks/make_extension_table.py``) and shipped as ``data/extension_gamma.npz``:
``K = 2..20`` on a log-spaced grid of :math:`\alpha` in ``[0.01, 100]``.
:func:`extension_parameter` interpolates in :math:`\log\alpha` (PCHIP on
:math:`\log\gamma`) and falls back to Alg. 2 on the fly, with an
:class:`ExtensionTableWarning`, outside the table.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.interpolate import CubicSpline, PchipInterpolator
from scipy.special import gammainccinv, gammaincinv, logsumexp, ndtr, ndtri

from bayespmf._validation import check_random_state
from bayespmf.kernels.kmeans import kmeans

__all__ = [
    "ExtensionTable",
    "ExtensionTableWarning",
    "compute_extension_parameter",
    "dirichlet_common_draws",
    "extension_gamma_fn",
    "extension_parameter",
    "load_extension_table",
]

TABLE_PATH = Path(__file__).parent / "data" / "extension_gamma.npz"

#: Monte Carlo draws per on-the-fly evaluation outside the table (a small relative
#: standard error on gamma for a k-means run of moderate cost; :ref:`bench-vlad-alpha`).
FALLBACK_N_DRAWS = 20_000

#: Points of the coarse alpha grid used when a whole gamma curve must be computed on
#: the fly (alpha estimation for K outside the table).
FALLBACK_GRID_POINTS = 15


class ExtensionTableWarning(UserWarning):
    """The shipped table does not cover a request; gamma is computed on the fly."""


class ExtensionTable(NamedTuple):
    r"""The shipped table: ``gamma[i, j]`` is gamma(alpha_j) for ``K = k_values[i]``."""

    k_values: np.ndarray
    alpha_grid: np.ndarray
    gamma: np.ndarray
    gamma_se: np.ndarray
    n_draws: int
    seed: int


@functools.cache
def load_extension_table() -> ExtensionTable:
    """Load the shipped table (cached).

    Examples
    --------
    >>> tab = load_extension_table()
    >>> int(tab.k_values[0]), int(tab.k_values[-1]), tab.gamma.shape[0] == tab.k_values.size
    (2, 20, True)
    """
    with np.load(TABLE_PATH) as f:
        return ExtensionTable(
            f["k_values"],
            f["alpha_grid"],
            f["gamma"],
            f["gamma_se"],
            int(f["n_draws"]),
            int(f["seed"]),
        )


#: Nodes and range (in normal scores) of the interpolated gamma quantile function of
#: :func:`dirichlet_common_draws`: 257 equally spaced scores on [-8, 8] (u from 6e-16 to
#: 1 - 6e-16) and a cubic spline in the log quantile; the largest relative error of
#: the draws is 1.4e-8 for alpha in [0.01, 100] (checked in ``tests/test_vlad.py``).
QUANTILE_NODES = 257
QUANTILE_Z_MAX = 8.0


def _log_gamma_quantile(shape: float, u) -> np.ndarray:
    """Logarithm of the Gamma(shape) quantile at u, interpolated in normal scores."""
    zj = np.linspace(-QUANTILE_Z_MAX, QUANTILE_Z_MAX, QUANTILE_NODES)
    lower = zj <= 0
    # each tail from its own side, so that no node rounds to u = 1
    qj = np.where(
        lower,
        gammaincinv(shape, ndtr(np.minimum(zj, 0.0))),
        gammainccinv(shape, ndtr(-np.maximum(zj, 0.0))),
    )
    spline = CubicSpline(zj, np.log(qj))
    z = np.clip(ndtri(u), -QUANTILE_Z_MAX, QUANTILE_Z_MAX)
    return spline(z)


def dirichlet_common_draws(
    alpha: float, u1, u2, *, interpolate: bool = False
) -> np.ndarray:
    r"""Draws of :math:`\mathrm{Dir}_K(\alpha)` from fixed uniforms (common random numbers).

    :math:`G_k = F^{-1}_{\Gamma(\alpha+1)}(u_{1k})\, u_{2k}^{1/\alpha}` is
    :math:`\Gamma(\alpha)` distributed (Marsaglia & Tsang's boost), and
    :math:`\theta = G / \sum_k G_k`; computed in log space, so small :math:`\alpha`
    does not underflow. The same ``(u1, u2)`` at every :math:`\alpha` make the Monte
    Carlo curve :math:`\gamma(\alpha)` smooth, which the moment matching of eq. (5)
    needs (its objective is flat in :math:`\alpha`, Supplement A.3.2).

    Parameters
    ----------
    alpha : float
    u1, u2 : ndarray (m, K)
        Uniforms on (0, 1).
    interpolate : bool, default False
        Evaluate the gamma quantile function by a cubic spline through
        ``QUANTILE_NODES`` exact values instead of at every draw: several times
        faster (:ref:`bench-vlad-alpha`), with a relative error below 1e-7 (draws
        with u below 6e-16 or above 1 - 6e-16 are clipped there).
        Used by the parametric bootstrap of
        :func:`bayespmf.kernels.vlad_calibration.calibrate_alpha`, which draws n x K
        weights per replicate at every alpha it tries.

    Returns
    -------
    ndarray (m, K)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> th = dirichlet_common_draws(2.0, rng.random((5, 3)), rng.random((5, 3)))
    >>> np.allclose(th.sum(axis=1), 1.0)
    True
    """
    if interpolate:
        lq = _log_gamma_quantile(alpha + 1.0, u1)
    else:
        lq = np.log(gammaincinv(alpha + 1.0, u1))
    lg = lq + np.log(u2) / alpha
    return np.exp(lg - logsumexp(lg, axis=1, keepdims=True))


def _gamma_from_centroids(v: np.ndarray) -> float:
    K = v.shape[1]
    # Alg. 2, step 3: gamma = sqrt(K^2 - K) / sum_l ||v_l - 1/K||_2
    return float(np.sqrt(K * K - K) / np.linalg.norm(v - 1.0 / K, axis=1).sum())


def compute_extension_parameter(
    alpha: float,
    n_components: int,
    *,
    n_draws: int = FALLBACK_N_DRAWS,
    n_init: int = 1,
    random_state=None,
    uniforms=None,
) -> float:
    r"""Alg. 2: :math:`\gamma(\alpha)` by k-means on Monte Carlo Dirichlet draws.

    Parameters
    ----------
    alpha : float
    n_components : int
        ``K``.
    n_draws : int
        Monte Carlo sample size ``m``.
    n_init : int
        k-means++ restarts. One extra start at the symmetric configuration
        :math:`v_k = a e_k + (1-a)/K`, with :math:`a` from the mean of
        :math:`\max_k \theta_k` (the CVT of eq. (20)), is always run; the run of lowest
        inertia is kept.
    random_state : None, int or Generator
    uniforms : (ndarray, ndarray), optional
        The ``(u1, u2)`` of :func:`dirichlet_common_draws`, each ``(n_draws, K)``; drawn
        from ``random_state`` when omitted.

    Returns
    -------
    float

    Examples
    --------
    >>> round(compute_extension_parameter(1.0, 2, n_draws=4000, random_state=0), 1)
    2.0
    """
    rng = check_random_state(random_state)
    K = int(n_components)
    if uniforms is None:
        uniforms = (rng.random((n_draws, K)), rng.random((n_draws, K)))
    theta = dirichlet_common_draws(float(alpha), *uniforms)
    a = (theta.max(axis=1).mean() - 1.0 / K) / (1.0 - 1.0 / K)
    sym = a * np.eye(K) + (1.0 - a) / K
    v, _, _ = kmeans(theta, K, n_init=n_init, init=sym, random_state=rng)
    return _gamma_from_centroids(v)


def _interpolator(k_index: int) -> PchipInterpolator:
    return _interpolators()[k_index]


@functools.cache
def _interpolators() -> tuple:
    tab = load_extension_table()
    x = np.log(tab.alpha_grid)
    return tuple(PchipInterpolator(x, np.log(g)) for g in tab.gamma)


def extension_parameter(alpha, n_components: int, *, random_state=None):
    r""":math:`\gamma(\alpha)` for ``K = n_components``: interpolated from the table.

    Parameters
    ----------
    alpha : float or array_like
        Dirichlet concentration(s), > 0.
    n_components : int
        ``K``.
    random_state : None, int or Generator
        Seeds the on-the-fly computation (only used outside the table).

    Returns
    -------
    float or ndarray
        Same shape as ``alpha``.

    Warns
    -----
    ExtensionTableWarning
        When ``K`` or an ``alpha`` is outside the table; those values are then computed
        by :func:`compute_extension_parameter` (``FALLBACK_N_DRAWS`` draws).

    Examples
    --------
    >>> round(float(extension_parameter(2.0, 3)), 2)
    3.3
    """
    tab = load_extension_table()
    a = np.asarray(alpha, dtype=float)
    K = int(n_components)
    out = np.empty(a.shape)
    flat_a, flat_out = a.reshape(-1), out.reshape(-1)
    lo, hi = tab.alpha_grid[0], tab.alpha_grid[-1]
    k_pos = np.flatnonzero(tab.k_values == K)
    inside = (flat_a >= lo) & (flat_a <= hi) & (k_pos.size > 0)
    if np.any(inside):
        flat_out[inside] = np.exp(_interpolator(int(k_pos[0]))(np.log(flat_a[inside])))
    if not np.all(inside):
        warnings.warn(
            f"The extension table covers K in [{tab.k_values[0]}, {tab.k_values[-1]}] "
            f"and alpha in [{lo:g}, {hi:g}]; K={K}, alpha="
            f"{flat_a[~inside].tolist()[:5]} are computed by Monte Carlo k-means "
            f"(Alg. 2, {FALLBACK_N_DRAWS} draws each).",
            ExtensionTableWarning,
            stacklevel=2,
        )
        rng = check_random_state(random_state)
        for i in np.flatnonzero(~inside):
            flat_out[i] = compute_extension_parameter(flat_a[i], K, random_state=rng)
    return float(out) if out.ndim == 0 else out


@functools.lru_cache(maxsize=32)
def _fallback_curve(K: int, seed: int) -> PchipInterpolator:
    tab = load_extension_table()
    grid = np.geomspace(tab.alpha_grid[0], tab.alpha_grid[-1], FALLBACK_GRID_POINTS)
    rng = np.random.default_rng(seed)
    u = (rng.random((FALLBACK_N_DRAWS, K)), rng.random((FALLBACK_N_DRAWS, K)))
    g = [compute_extension_parameter(a, K, uniforms=u, random_state=seed) for a in grid]
    return PchipInterpolator(np.log(grid), np.log(g))


def extension_gamma_fn(n_components: int, *, random_state=None):
    r"""A vectorized :math:`\alpha \mapsto \gamma(\alpha)` and its :math:`\alpha` range.

    Inside the table this interpolates the shipped values; for ``K`` outside it, a
    coarse curve (``FALLBACK_GRID_POINTS`` values of :math:`\alpha`, common random
    numbers) is computed once per process, with an :class:`ExtensionTableWarning`.

    Returns
    -------
    gamma_fn : callable
    alpha_range : (float, float)

    Examples
    --------
    >>> fn, (lo, hi) = extension_gamma_fn(3)
    >>> round(float(fn(np.array([2.0]))[0]), 2), lo, hi
    (3.3, 0.01, 100.0)
    """
    tab = load_extension_table()
    K = int(n_components)
    rng_range = (float(tab.alpha_grid[0]), float(tab.alpha_grid[-1]))
    k_pos = np.flatnonzero(tab.k_values == K)
    if k_pos.size:
        interp = _interpolator(int(k_pos[0]))
    else:
        warnings.warn(
            f"The extension table covers K in [{tab.k_values[0]}, {tab.k_values[-1]}]; "
            f"gamma(alpha) for K={K} is computed by Monte Carlo k-means on "
            f"{FALLBACK_GRID_POINTS} values of alpha (once per process).",
            ExtensionTableWarning,
            stacklevel=2,
        )
        seed = int(check_random_state(random_state).integers(2**31 - 1))
        interp = _fallback_curve(K, seed)

    def gamma_fn(alpha):
        return np.exp(interp(np.log(np.asarray(alpha, dtype=float))))

    return gamma_fn, rng_range
