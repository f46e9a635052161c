r"""Kernels of the Voronoi Latent Admixture (VLAD) algorithm for Dirichlet simplex nests.

Yurochkin, Guha, Sun & Nguyen (ICML 2019), Alg. 1 and Sec. 3.3: centre the data, take
the top ``K - 1`` singular factors, run k-means on the whitened scores, map the
centroids back and extend them from the data centre by the extension parameter
:math:`\gamma(\alpha)` (Alg. 2, :mod:`bayespmf.kernels.extension_table`); estimate
:math:`\alpha` by matching the model covariance :math:`B S(\alpha) B^T` to the sample
covariance corrected for the kernel's noise (eq. (5) and Lemma 3 of Supplement A.3).

Arrays in, arrays out; validation lives in :mod:`bayespmf.estimators.simplex`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
import scipy.linalg as sla
from scipy.optimize import minimize_scalar
from scipy.sparse.linalg import svds

from bayespmf._validation import ConvergenceWarning, check_random_state
from bayespmf.kernels.simplex import project_simplex

__all__ = [
    "KERNELS",
    "Subspace",
    "alpha_objective",
    "barycentric_weights",
    "center_and_gram",
    "corrected_metric",
    "dirichlet_cov_scale",
    "estimate_alpha",
    "extend_centroids",
    "kmeans",
    "noise_variance",
    "phi_star",
    "preprocess",
    "simex_phi_star",
    "top_subspace",
    "vlad_centroids",
]

KERNELS = ("gaussian", "poisson", "multinomial")

#: Up to this many features the top subspace comes from the compiled centring + Gram
#: graph and a partial symmetric eigendecomposition; above it, ARPACK on the centred
#: matrix is faster (the D x D eigenproblem costs O(D^3)). See :func:`top_subspace`.
GRAM_MAX_FEATURES = 1000

#: k-means restarts: the paper's setting (Supplement B, "8 restarts and ++
#: initialization").
DEFAULT_N_INIT = 8

#: Lloyd iterations per k-means run (scikit-learn's default).
DEFAULT_KMEANS_MAX_ITER = 300


# --------------------------------------------------------------------------------------
# preprocessing and the top singular subspace


def preprocess(X, kernel: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Float copy of the data; word frequencies for the multinomial kernel.

    Returns ``(Y, lengths)``: for ``"multinomial"`` the rows of ``Y`` are the counts
    divided by the document lengths ``lengths`` (so that ``E[y_i] = mu_i`` lies on the
    vocabulary simplex, Lemma 3(c)); otherwise ``Y`` is ``X`` as float64 and
    ``lengths`` is None.

    Examples
    --------
    >>> preprocess(np.array([[1, 3], [2, 2]]), "multinomial")[0]
    array([[0.25, 0.75],
           [0.5 , 0.5 ]])
    """
    Y = np.array(X, dtype=np.float64, copy=True)
    if kernel != "multinomial":
        return Y, None
    lengths = Y.sum(axis=1)
    return Y / lengths[:, None], lengths


@functools.cache
def _compiled_center_gram():
    """Centring, Gram matrix and total sum of squares as one compiled graph."""
    X = pt.dmatrix("X")
    c0 = X.mean(axis=0)
    Xc = X - c0
    gram = pt.dot(Xc.T, Xc)
    return pytensor.function([X], [c0, gram, pt.sum(Xc**2)])


def center_and_gram(X) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Data centre, Gram matrix :math:`\bar X^T \bar X` and :math:`\|\bar X\|_F^2`.

    Steps 1--2 of Alg. 1 and the product behind step 3, as one compiled PyTensor graph
    (compiled once per process).

    Examples
    --------
    >>> c0, G, ss = center_and_gram(np.array([[0.0, 1.0], [2.0, 3.0]]))
    >>> c0, G.tolist(), ss
    (array([1., 2.]), [[2.0, 2.0], [2.0, 2.0]], 4.0)
    """
    c0, gram, ss = _compiled_center_gram()(np.asarray(X, dtype=np.float64))
    return c0, gram, float(ss)


class Subspace(NamedTuple):
    r"""Top ``r`` singular factors of the centred data :math:`\bar X = U \Lambda W^T`.

    Attributes
    ----------
    center : ndarray (D,)
        :math:`\hat c_0`, the data mean.
    scores : ndarray (n, r)
        :math:`U`, orthonormal columns (the whitened coordinates of Alg. 1, step 4).
    singular_values : ndarray (r,)
        :math:`\Lambda`, decreasing.
    components : ndarray (D, r)
        :math:`W`, orthonormal columns.
    total_ss : float
        :math:`\|\bar X\|_F^2` (for the trailing spectrum).
    """

    center: np.ndarray
    scores: np.ndarray
    singular_values: np.ndarray
    components: np.ndarray
    total_ss: float


def top_subspace(Y, rank: int, *, random_state=None) -> Subspace:
    r"""Steps 1--3 of Alg. 1: centre and take the top ``rank`` singular factors.

    Parameters
    ----------
    Y : ndarray (n, D)
    rank : int
        ``K - 1``.
    random_state : None, int or Generator
        Seeds ARPACK's start vector (used when ``D > GRAM_MAX_FEATURES``).

    Returns
    -------
    Subspace

    Notes
    -----
    Two routes give the same factors (up to signs): for ``D <= GRAM_MAX_FEATURES`` the
    compiled graph of :func:`center_and_gram` and a partial eigendecomposition
    (``scipy.linalg.eigh`` with ``subset_by_index``) of :math:`\bar X^T \bar X`; for
    larger ``D`` ARPACK (``scipy.sparse.linalg.svds``) on :math:`\bar X`. Measured on
    the project's 2-core machine (best of 3, Gaussian DSN, K = 10), full Gram + eigh
    in NumPy / in the compiled graph / ARPACK / randomized SVD: n = 10,000, D = 500:
    448 / 341 / 604 / 967 ms; n = 30,000, D = 500: 1484 / 740 / 748 / 1963 ms;
    n = 5,000, D = 2,000: 6996 / 11420 / 812 / 1759 ms. The compiled Gram graph wins
    at moderate ``D`` (its ``X^T X`` product beats NumPy's here) and ARPACK when the
    ``D x D`` eigenproblem dominates, hence the switch. Signs are fixed so that the
    largest-magnitude entry of each column of ``W`` is positive (deterministic output).

    Examples
    --------
    >>> Y = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    >>> sub = top_subspace(Y, 1)
    >>> sub.center, sub.singular_values
    (array([1. , 0.5]), array([2.]))
    """
    n, D = Y.shape
    if D <= GRAM_MAX_FEATURES or rank >= min(n, D) - 1:
        c0, gram, total = center_and_gram(Y)
        w, V = sla.eigh(gram, subset_by_index=(D - rank, D - 1))
        order = np.argsort(w)[::-1]
        lam = np.sqrt(np.maximum(w[order], 0.0))
        W = V[:, order]
        Xc = Y - c0
    else:
        c0 = Y.mean(axis=0)
        Xc = Y - c0
        total = float(np.einsum("ij,ij->", Xc, Xc))
        rng = check_random_state(random_state)
        v0 = rng.standard_normal(min(n, D))
        _, s, Vt = svds(Xc, k=rank, v0=v0)
        order = np.argsort(s)[::-1]
        lam, W = s[order], Vt[order].T
    signs = np.sign(W[np.argmax(np.abs(W), axis=0), np.arange(W.shape[1])])
    W = W * np.where(signs == 0, 1.0, signs)
    safe = np.where(lam > 0, lam, 1.0)
    U = (Xc @ W) / safe
    return Subspace(c0, U, lam, W, float(total))


# --------------------------------------------------------------------------------------
# k-means and extension


def kmeans(
    points,
    n_clusters: int,
    *,
    n_init: int = DEFAULT_N_INIT,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    init=None,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """k-means (scikit-learn's Lloyd/Elkan with k-means++ seeding and restarts).

    Parameters
    ----------
    points : ndarray (n, d)
    n_clusters : int
    n_init : int
        Restarts from k-means++ seeds; the run of lowest inertia is kept.
    max_iter : int
    init : ndarray (n_clusters, d), optional
        An extra start, run once and kept if its inertia is lower.
    random_state : None, int or Generator

    Returns
    -------
    centers : ndarray (n_clusters, d)
    labels : ndarray of int (n,)
    inertia : float

    Notes
    -----
    scikit-learn's Lloyd loop runs in one OpenMP thread here. On the project's 2-core
    machine under load (other processes running, load average 9) its OpenMP threads
    spin against each other: 10-means on 9-dim points took 0.48 s / 2.6 s / 7.0 s with
    the default threads and 0.007 s / 0.019 s / 0.34 s with one, for n = 300 / 3,000 /
    30,000. The points VLAD clusters have only ``K - 1`` columns, so one thread costs
    little even on an idle machine.

    Examples
    --------
    >>> pts = np.array([[0.0], [0.1], [5.0], [5.1]])
    >>> c, lab, _ = kmeans(pts, 2, random_state=0)
    >>> np.sort(c.ravel()).round(2)
    array([0.05, 5.05])
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    seed = int(check_random_state(random_state).integers(2**31 - 1))
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="openmp"):
        # Duplicate points (e.g. noise-free data at the vertices) make scikit-learn warn
        # that fewer distinct clusters were found; the centroids are still valid.
        warnings.filterwarnings("ignore", message=".*distinct clusters.*")
        km = KMeans(n_clusters, n_init=n_init, max_iter=max_iter, random_state=seed)
        km.fit(points)
        best = (km.cluster_centers_, km.labels_, float(km.inertia_))
        if init is not None:
            km2 = KMeans(n_clusters, init=np.asarray(init), n_init=1, max_iter=max_iter)
            km2.fit(points)
            if km2.inertia_ < best[2]:
                best = (km2.cluster_centers_, km2.labels_, float(km2.inertia_))
    return best


def vlad_centroids(
    sub: Subspace,
    n_vertices: int,
    *,
    metric=None,
    n_init: int = DEFAULT_N_INIT,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Steps 4--5 of Alg. 1: k-means in whitened coordinates, centroids mapped back.

    Parameters
    ----------
    sub : Subspace
    n_vertices : int
    metric : ndarray (r, r), optional
        A square root ``A`` of the covariance used for whitening, in the basis ``W``:
        k-means runs on the rows of :math:`\bar X W A^{-1}` and the centroids are
        :math:`\hat c_k = W A \eta_k + \hat c_0`. Default :math:`A = \Lambda`
        (divided by :math:`\sqrt n`, which k-means ignores): the rows of ``U``,
        exactly Alg. 1.
    n_init, max_iter, random_state
        Passed to :func:`kmeans`.

    Returns
    -------
    centroids : ndarray (K, D)
    g : ndarray (K, r)
        :math:`A \eta_k` minus its mean over ``k``: the centred centroids in the
        coordinates of ``W`` (``centroids - mean = g W^T``).
    labels : ndarray (n,)

    Examples
    --------
    >>> Y = np.array([[0.0, 0.0], [0.1, 0.0], [2.0, 0.0], [2.1, 0.0]])
    >>> c, g, lab = vlad_centroids(top_subspace(Y, 1), 2, random_state=0)
    >>> np.sort(c[:, 0]).round(2)
    array([0.05, 2.05])
    """
    lam = sub.singular_values
    A = np.diag(lam) if metric is None else np.asarray(metric, dtype=float)
    z = np.linalg.solve(A.T, (sub.scores * lam).T).T  # rows: A^{-1} W^T xbar_i
    eta, labels, _ = kmeans(
        z, n_vertices, n_init=n_init, max_iter=max_iter, random_state=random_state
    )
    g = eta @ A.T
    centroids = g @ sub.components.T + sub.center
    return centroids, g - g.mean(axis=0), labels


def extend_centroids(center, centroids, gamma) -> np.ndarray:
    r"""Step 6 of Alg. 1: :math:`\hat\beta_k = \hat c_0 + \gamma (\hat c_k - \hat c_0)`.

    ``gamma`` is a scalar (VLAD) or one factor per centroid (GDM).

    Examples
    --------
    >>> extend_centroids(np.zeros(2), np.array([[1.0, 0.0], [0.0, 2.0]]), 2.0)
    array([[2., 0.],
           [0., 4.]])
    """
    center = np.asarray(center, dtype=float)
    g = np.asarray(gamma, dtype=float)
    g = g[:, None] if g.ndim == 1 else g
    return center + g * (np.asarray(centroids, dtype=float) - center)


# --------------------------------------------------------------------------------------
# alpha by the method of moments (eq. (5) with Lemma 3)


def dirichlet_cov_scale(alpha, n_vertices: int):
    r"""The scalar of :math:`S(\alpha) = \frac{1}{K(K\alpha+1)} (I_K - \frac1K 1 1^T)`.

    The covariance of :math:`\mathrm{Dir}_K(\alpha)` (Sec. 3.2 and Supplement A.3.2).

    Examples
    --------
    >>> float(dirichlet_cov_scale(2.0, 3))
    0.047619047619047616
    """
    return 1.0 / (n_vertices * (n_vertices * np.asarray(alpha, dtype=float) + 1.0))


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


class _Moments(NamedTuple):
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


def corrected_metric(sub: Subspace, kernel: str, ctx: dict) -> np.ndarray | None:
    r"""Square root of the noise-corrected covariance on the top subspace.

    :math:`T = W^T\tilde\Sigma W = (\Lambda^2/n - W^T N W) / s` (Lemma 3, ``s`` the
    factor in front of :math:`BSB^T`), returned as its symmetric square root, or None
    when ``T`` is not positive definite (noise larger than signal along some
    direction). Whitening by ``T`` instead of the raw :math:`\Lambda^2/n` makes
    k-means see the noise-free simplex's covariance :math:`BS(\alpha)B^T`, which is
    what Lemma 2 assumes.
    """
    n = sub.scores.shape[0]
    N, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    T = (np.diag(sub.singular_values**2 / n) - N) / scale
    w, V = np.linalg.eigh((T + T.T) / 2)
    if w[0] <= 0:
        return None
    return (V * np.sqrt(w)) @ V.T


def _moments(sub: Subspace, g, kernel: str, ctx: dict) -> _Moments:
    n = sub.scores.shape[0]
    lam2 = sub.singular_values**2 / n
    # With Ct = g W^T: <M, Sigma_hat> = tr(g (Lambda^2 / n) g^T) (Ct lies in span W),
    # <M, N> = tr(g W^T N W g^T), ||M||_F^2 = ||g g^T||_F^2.
    N, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    m_sigma = float(np.sum(g**2 * lam2))
    m_noise = float(np.sum((g @ N) * g))
    m_norm2 = float(np.sum((g @ g.T) ** 2))
    return _Moments(m_sigma, m_noise, scale, m_norm2)


def _phi_from_moments(mom: _Moments) -> float:
    num = (mom.m_sigma - mom.m_noise) / mom.scale
    return num / mom.m_norm2 if num > 0 and mom.m_norm2 > 0 else float("nan")


def phi_star(sub: Subspace, g, kernel: str, ctx: dict) -> float:
    r"""The value of :math:`\varphi(\alpha)` that solves eq. (5).

    :math:`\varphi^* = \langle M, \tilde\Sigma\rangle / \|M\|_F^2` (see
    :func:`alpha_objective`).

    nan when the noise-corrected covariance along the centroids is not positive.
    """
    return _phi_from_moments(_moments(sub, np.asarray(g, dtype=float), kernel, ctx))


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
            ys.append(_phi_from_moments(_Moments(m_sigma, m_noise, scale, m_norm2)))
    if not np.all(np.isfinite(ys)):
        return float("nan")
    coef = np.polyfit(xs, ys, 2)
    return float(np.polyval(coef, -1.0))


def alpha_objective(alpha, gamma, phi_target: float, n_vertices: int):
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
    phi = np.asarray(gamma, dtype=float) ** 2 * dirichlet_cov_scale(alpha, n_vertices)
    return (phi - phi_target) ** 2 / phi_target**2


def estimate_alpha(
    phi_target: float,
    n_vertices: int,
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
    n_vertices : int
    gamma_fn : callable
        :math:`\alpha \mapsto \gamma(\alpha)`, vectorized.
    alpha_range : (float, float)
        Search interval (the extension table's grid).

    Returns
    -------
    alpha : float
    objective : float
        The relative objective at the solution (0 when eq. (5) is solved exactly).

    Notes
    -----
    :math:`\tilde\Sigma` never appears as a D x D matrix: every term of eq. (5) that
    depends on :math:`\alpha` is an inner product with :math:`M`, computed in the
    ``K - 1`` coordinates of ``W`` (see :func:`alpha_objective`). The scalar problem
    is solved by a search over 400 log-spaced values followed by bounded Brent
    refinement. When :math:`\varphi^*` is not positive (the noise correction exceeds
    the covariance along the centroids) the largest ``alpha`` of the range is returned
    with a ``ConvergenceWarning``.

    Examples
    --------
    >>> fn = lambda a: np.sqrt(1.0 + 3.0 * np.asarray(a))  # a made-up gamma(alpha)
    >>> round(estimate_alpha(float(fn(1.0)) ** 2 / (2 * 3), 2, fn, (0.01, 100))[0], 4)
    1.0
    """
    lo, hi = np.log(alpha_range[0]), np.log(alpha_range[1])
    if not np.isfinite(phi_target) or phi_target <= 0:
        warnings.warn(
            "The noise-corrected covariance along the VLAD centroids is not positive; "
            f"alpha cannot be matched and is set to {alpha_range[1]:g}, the top of its "
            "range. Pass 'alpha' explicitly.",
            ConvergenceWarning,
            stacklevel=3,
        )
        return float(alpha_range[1]), float("nan")
    grid = np.linspace(lo, hi, 400)
    vals = alpha_objective(np.exp(grid), gamma_fn(np.exp(grid)), phi_target, n_vertices)
    j = int(np.argmin(vals))
    a, b = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]

    def f(t):
        return float(
            alpha_objective(np.exp(t), gamma_fn(np.exp(t)), phi_target, n_vertices)
        )

    res = minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-8})
    t = res.x if res.fun <= vals[j] else grid[j]
    return float(np.exp(t)), float(min(res.fun, vals[j]))


# --------------------------------------------------------------------------------------
# barycentric coordinates


#: Iteration cap and tolerance of the accelerated projected gradient of
#: :func:`barycentric_weights`: interior points converge in one step; boundary points
#: in tens to a few hundred iterations for simplices of moderate condition number.
BARY_MAX_ITER = 2000
BARY_TOL = 1e-10


def barycentric_weights(
    Y, vertices, *, max_iter: int = BARY_MAX_ITER, tol: float = BARY_TOL
) -> tuple[np.ndarray, int]:
    r"""Weights of the Euclidean projection of each row of ``Y`` onto a simplex.

    Solves :math:`\min_{\theta_i \in \Delta^{K-1}} \|y_i - B^T \theta_i\|_2^2` for all
    rows at once.

    Parameters
    ----------
    Y : ndarray (n, D)
    vertices : ndarray (K, D)
    max_iter : int
    tol : float
        Stop when no weight moves by more than ``tol`` in an iteration.

    Returns
    -------
    theta : ndarray (n, K)
        Rows on the probability simplex.
    n_iter : int

    Notes
    -----
    With :math:`\bar\beta` the vertex mean and :math:`\Psi = B - \bar\beta` (rows),
    :math:`y - B^T\theta = (y - \bar\beta) - \Psi^T\theta` on the simplex, so the
    problem is the K-dimensional quadratic :math:`\frac12 \theta^T G \theta - a^T
    \theta` with :math:`G = \Psi\Psi^T`, :math:`a = \Psi (y - \bar\beta)`: one
    O(nDK) product, then FISTA with adaptive restart (O'Donoghue & Candès 2015) and
    the sort-based simplex projection, vectorized over rows. The start is the
    projection of the unconstrained affine (barycentric) solution, exact for rows
    whose projection onto the affine hull falls inside the simplex.

    Examples
    --------
    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> theta, _ = barycentric_weights(np.array([[0.2, 0.3], [2.0, 0.0]]), V)
    >>> theta.round(6)
    array([[0.5, 0.2, 0.3],
           [0. , 1. , 0. ]])
    """
    Y = np.asarray(Y, dtype=float)
    V = np.asarray(vertices, dtype=float)
    vbar = V.mean(axis=0)
    psi = V - vbar
    G = psi @ psi.T
    a = (Y - vbar) @ psi.T
    K = V.shape[0]
    # unconstrained minimizer on the affine hull: G theta = a + nu 1, 1^T theta = 1
    kkt = np.block([[G, np.ones((K, 1))], [np.ones((1, K)), np.zeros((1, 1))]])
    rhs = np.hstack([a, np.ones((a.shape[0], 1))])
    sol = np.linalg.lstsq(kkt, rhs.T, rcond=None)[0].T[:, :K]
    theta = project_simplex(sol, axis=1)
    L = float(np.linalg.eigvalsh(G)[-1])
    if L <= 0:
        return np.full_like(theta, 1.0 / K), 0
    z, t = theta.copy(), np.ones(theta.shape[0])
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        new = project_simplex(z - (z @ G - a) / L, axis=1)
        step = np.abs(new - theta).max()
        # adaptive restart: rows whose momentum points uphill start over (t = 1)
        uphill = np.einsum("ij,ij->i", z - new, new - theta) > 0
        t_new = np.where(uphill, 1.0, 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t)))
        mom = np.where(uphill, 0.0, (t - 1.0) / t_new)
        z = new + mom[:, None] * (new - theta)
        theta, t = new, t_new
        if step <= tol:
            break
    return theta, n_iter
