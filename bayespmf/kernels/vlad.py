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
from scipy.optimize import linear_sum_assignment, minimize_scalar
from scipy.sparse.linalg import svds
from scipy.special import chdtrc, stdtrit

from bayespmf._validation import ConvergenceWarning, check_random_state
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, DEFAULT_N_INIT, kmeans
from bayespmf.kernels.simplex import project_simplex

__all__ = [
    "KERNELS",
    "NOISE_SIMULATORS",
    "AlphaCalibration",
    "Subspace",
    "alpha_objective",
    "barycentric_weights",
    "calibrate_alpha",
    "center_and_gram",
    "corrected_metric",
    "dirichlet_cov_scale",
    "dirichlet_cvt",
    "estimate_alpha",
    "estimate_alpha_vector",
    "extend_centroids",
    "kmeans",
    "mass_balance",
    "match_cells",
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

#: Whitening by the noise-corrected covariance (:func:`corrected_metric`) only when
#: the noise is at most this fraction of the data variance along every direction of
#: the top subspace; otherwise by the data covariance (Alg. 1). Measured with the
#: bootstrap calibration of alpha (mean over seeds, corrected vs data): K = 10,
#: D = 500, alpha = 2, largest fractions 0.08-0.17: vertex error 15.6 vs 15.7
#: (Gaussian sigma = 1, n = 1000), 51.7 vs 52.5 (Poisson, n = 1000), 6.8 vs 6.9
#: (Gaussian, n = 5000); Poisson K = 4, D = 40, n = 6000, alpha = 1, fractions
#: 0.26-0.60 (12 seeds): 3.59 vs 3.27, alpha 1.08 +- 0.28 vs 0.94 +- 0.14.
CORRECTED_MAX_NOISE_FRACTION = 0.25


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
# an asymmetric Dirichlet: cell masses and the CVT of Dir(alpha) for a vector alpha

#: Monte Carlo draws of Dir(alpha) behind :func:`dirichlet_cvt` (k-means in K - 1
#: dimensions; the centroids' Monte Carlo sd is about 0.3 % of their spread at K = 3).
CVT_DRAWS = 50_000


class MassBalance(NamedTuple):
    r"""Result of :func:`mass_balance`: whether the k-means cells are of equal mass.

    Attributes
    ----------
    masses : ndarray (K,)
        Fraction of the points in each cell.
    chi2 : float
        :math:`\sum_k (n_k - n/K)^2 / (n/K)`.
    p_value : float
        Upper tail of :math:`\chi^2_{K-1}` at ``chi2``.
    total_variation : float
        :math:`\frac12 \sum_k |m_k - 1/K|`.
    """

    masses: np.ndarray
    chi2: float
    p_value: float
    total_variation: float


def mass_balance(labels, n_vertices: int) -> MassBalance:
    r"""Test that the k-means cells hold equal shares of the data.

    Under a symmetric Dirichlet the whitened k-means cells are images of each other
    under the simplex's symmetries (Lemma 2: in the :math:`\Sigma^\dagger` metric the
    simplex is regular), so each holds :math:`1/K` of the points; an asymmetric
    :math:`\mathrm{Dir}(\alpha)` gives the cell of a vertex with larger
    :math:`\alpha_k` more mass. The statistic is Pearson's chi-square of the cell
    counts against ``n / K``.

    Examples
    --------
    >>> mb = mass_balance(np.array([0, 0, 1, 2, 2, 2]), 3)
    >>> mb.masses.round(3).tolist(), mb.chi2
    ([0.333, 0.167, 0.5], 1.0)
    """
    labels = np.asarray(labels)
    n = labels.size
    counts = np.bincount(labels, minlength=n_vertices).astype(float)
    expected = n / n_vertices
    chi2 = float(np.sum((counts - expected) ** 2) / expected)
    masses = counts / n
    return MassBalance(
        masses,
        chi2,
        float(chdtrc(n_vertices - 1, chi2)),
        float(0.5 * np.sum(np.abs(masses - 1.0 / n_vertices))),
    )


def dirichlet_cvt(
    alpha,
    *,
    n_draws: int = CVT_DRAWS,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Barycentric coordinates and masses of the CVT centroids of a Dirichlet.

    The k-means of VLAD (Alg. 1) whitens the data by their covariance
    :math:`B^T S(\alpha) B` (+ noise), so in barycentric coordinates it is k-means of
    :math:`\theta \sim \mathrm{Dir}(\alpha)` in the metric :math:`S(\alpha)^\dagger`,
    whatever the vertices ``B`` (Lemma 2's argument does not need a symmetric alpha).
    Its centroids are :math:`c_k = B^T v_k`, i.e. :math:`C = V B`, so the vertices are
    :math:`B = V^{-1} C`: the extension of Alg. 1 for any alpha (for a symmetric alpha
    :math:`V^{-1}` is the scalar extension :math:`\gamma(\alpha)` about the centre).
    ``V`` is computed here by Monte Carlo: ``n_draws`` draws, whitened in the ``K - 1``
    coordinates of the sum-zero plane, one Lloyd run started near the vertices (row
    ``k`` of ``V`` is the cell of vertex ``k``).

    Parameters
    ----------
    alpha : array_like (K,)
        Positive concentrations.
    n_draws : int
    max_iter : int
    random_state : None, int or Generator

    Returns
    -------
    V : ndarray (K, K)
        Row ``k``: the barycentric coordinates of the centroid of vertex ``k``'s cell.
    masses : ndarray (K,)
        Probability of each cell.

    Examples
    --------
    >>> V, m = dirichlet_cvt([1.0, 1.0, 1.0], random_state=0)
    >>> bool(np.all(np.argmax(V, axis=1) == np.arange(3))), m.round(1).tolist()
    (True, [0.3, 0.3, 0.3])
    """
    a = np.asarray(alpha, dtype=float)
    K = a.size
    rng = check_random_state(random_state)
    theta = rng.dirichlet(a, size=n_draws)
    mean = a / a.sum()
    Q = np.linalg.qr(np.eye(K) - 1.0 / K)[0][:, : K - 1]  # orthonormal sum-zero basis
    z = (theta - mean) @ Q
    A = _psd_sqrt(z.T @ z / n_draws)
    zw = np.linalg.solve(A, z.T).T
    start = (0.5 * (np.eye(K) - mean)) @ Q
    _, labels, _ = kmeans(
        zw,
        K,
        n_init=0,
        init=np.linalg.solve(A, start.T).T,
        max_iter=max_iter,
        random_state=rng,
    )
    counts = np.bincount(labels, minlength=K)
    V = np.stack([theta[labels == k].mean(axis=0) for k in range(K)])
    return V, counts / n_draws


def match_cells(masses_data, masses_model) -> np.ndarray:
    r"""Order of the data's cells that matches the model's cells by mass.

    ``perm[k]`` is the data cell paired with model cell ``k`` (the assignment of least
    total squared mass difference); the vertex order of a known alpha vector is not
    tied to the arbitrary order of the k-means clusters, and the cell masses are what
    the data say about it.

    Examples
    --------
    >>> match_cells([0.5, 0.2, 0.3], [0.2, 0.3, 0.5]).tolist()
    [1, 2, 0]
    """
    d = np.asarray(masses_data, dtype=float)[:, None] - np.asarray(masses_model)[None]
    rows, cols = linear_sum_assignment(d**2)
    perm = np.empty_like(rows)
    perm[cols] = rows
    return perm


#: Draws per evaluation and iteration cap of :func:`estimate_alpha_vector`, and its
#: stopping rule: a step in log(alpha_0) below VECTOR_TOL and cell masses matched to
#: within VECTOR_MASS_TOL. On the triangle test (K = 3, n = 5000) it stops after 4-15
#: evaluations (0.1-0.4 s).
VECTOR_DRAWS = 20_000
VECTOR_MAX_ITER = 20
VECTOR_TOL = 0.005
VECTOR_MASS_TOL = 0.003


class AlphaVector(NamedTuple):
    r"""Result of :func:`estimate_alpha_vector`.

    Attributes
    ----------
    alpha : ndarray (K,)
        :math:`\hat\alpha`, in the order of the model cells (rows of ``V``).
    V : ndarray (K, K)
        Barycentric CVT centroids of :math:`\mathrm{Dir}(\hat\alpha)`
        (:func:`dirichlet_cvt`).
    perm : ndarray of int (K,)
        ``perm[k]``: the data cell (k-means cluster) paired with model cell ``k``.
    vertices : ndarray (K, r)
        :math:`V^{-1}\hat C`, the vertices in the coordinates of ``W`` relative to the
        data centre.
    mass_misfit : float
        Largest difference between a data cell's mass and its model cell's.
    cov_misfit : float
        :math:`\log\mathrm{tr}\tilde\Sigma - \log\mathrm{tr}(\hat B^T S(\hat\alpha)
        \hat B)` on the top subspace.
    n_iter : int
    """

    alpha: np.ndarray
    V: np.ndarray
    perm: np.ndarray
    vertices: np.ndarray
    mass_misfit: float
    cov_misfit: float
    n_iter: int


def estimate_alpha_vector(
    sub: Subspace,
    g,
    labels,
    kernel: str,
    ctx: dict,
    *,
    n_draws: int = VECTOR_DRAWS,
    max_iter: int = VECTOR_MAX_ITER,
    random_state=None,
) -> AlphaVector:
    r"""A vector alpha and the vertices of an asymmetric nest, by the method of moments.

    Parameters
    ----------
    sub : Subspace
    g : ndarray (K, r)
        The k-means centroids in the coordinates of ``W`` relative to the data centre.
    labels : ndarray (n,)
        The k-means cell of each row.
    kernel : {"gaussian", "poisson", "multinomial"}
    ctx : dict
        The kernel's noise parameters (as for :func:`calibrate_alpha`).
    n_draws, max_iter : int
    random_state : None, int or Generator

    Returns
    -------
    AlphaVector

    Notes
    -----
    Two sets of moments fix :math:`\alpha = \alpha_0 p`: the masses of the k-means
    cells (``K - 1`` numbers, which depend mostly on the shares ``p``) and the
    noise-corrected covariance of Lemma 3 on the top subspace, whose trace must equal
    that of :math:`\hat B^T S(\alpha) \hat B` with :math:`\hat B = V(\alpha)^{-1}
    \hat C` (one number, which fixes :math:`\alpha_0`). A fixed-point iteration
    from :math:`\alpha = K \hat m` (``m`` the data's cell masses): ``p`` is multiplied
    by the ratio of the data's masses to the model's, and :math:`\log\alpha_0` takes a
    secant step on the log-trace misfit (at most 1 per iteration); each evaluation is
    one :func:`dirichlet_cvt` with the same seed (common random numbers). The
    finite-sample and noise spread of the k-means centroids, which
    :func:`calibrate_alpha` simulates for a symmetric alpha, is not corrected here.
    """
    rng = check_random_state(random_state)
    seed = int(rng.integers(2**63 - 1))
    g = np.asarray(g, dtype=float)
    K = g.shape[0]
    n = sub.scores.shape[0]
    N, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    log_tr = float(np.log(max(np.trace(np.diag(sub.singular_values**2 / n) - N), 1e-300)))
    log_tr -= float(np.log(scale))
    observed = mass_balance(labels, K).masses
    p = np.maximum(observed, 1.0 / (10 * K))
    p = p / p.sum()
    t = float(np.log(K))
    hist: list[tuple[float, float]] = []
    a = np.exp(t) * p
    for it in range(1, max_iter + 1):
        a = np.exp(t) * p
        V, masses = dirichlet_cvt(a, n_draws=n_draws, random_state=seed)
        perm = match_cells(observed, masses)
        verts = np.linalg.solve(V, g[perm])
        ab = a / a.sum()
        S = (np.diag(ab) - np.outer(ab, ab)) / (a.sum() + 1.0)
        h = log_tr - float(np.log(max(np.trace(verts.T @ S @ verts), 1e-300)))
        hist.append((t, h))
        slope = -0.3  # d h / d log(alpha_0): the model trace grows slowly with alpha_0
        if len(hist) >= 2 and hist[-1][0] != hist[-2][0]:
            fit = (hist[-1][1] - hist[-2][1]) / (hist[-1][0] - hist[-2][0])
            if fit < 0:
                slope = -max(-fit, 0.05)
        step = float(np.clip(-h / slope, -1.0, 1.0))
        mass_misfit = float(np.max(np.abs(observed[perm] - masses)))
        if abs(step) < VECTOR_TOL and mass_misfit < VECTOR_MASS_TOL:
            break
        p = p * np.maximum(observed[perm], 1e-12) / np.maximum(masses, 1e-12)
        p = p / p.sum()
        t += step
    return AlphaVector(a, V, perm, verts, mass_misfit, h, it)


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
    lam2 = sub.singular_values**2 / n
    inv = 1.0 / np.sqrt(np.where(lam2 > 0, lam2, np.inf))
    if np.linalg.eigvalsh(N * inv[:, None] * inv[None, :])[-1] > max_noise_fraction:
        return None
    return _pd_sqrt((np.diag(lam2) - N) / scale)


def _pd_sqrt(T) -> np.ndarray | None:
    """Symmetric square root of a symmetric matrix; None unless positive definite."""
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
# alpha and the extension calibrated by a parametric bootstrap

#: Simulated points per evaluation of :func:`calibrate_alpha`, split in replicates of the
#: data's size n: n_rep = clip(round(CALIBRATION_POINTS / n), CALIBRATION_MIN_REPS,
#: CALIBRATION_MAX_REPS). The relative sd of the moment statistic phi* is about 1.5-4 %
#: at n = 1000 (K = 10, D = 500, Gaussian sigma = 1 and Poisson) and falls like
#: 1 / sqrt(n); 8 replicates at n <= 2000 and 4 above keep the calibration's own Monte
#: Carlo error at a third to a half of that. With 2 replicates at n = 6000 (K = 4)
#: the same data gave alpha from 1.03 to 1.29 with the seed; with 4, 0.97 to 1.05.
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


def _psd_sqrt(T) -> np.ndarray:
    """Symmetric square root of a symmetric matrix, negative eigenvalues set to 0."""
    w, V = np.linalg.eigh((T + T.T) / 2)
    return (V * np.sqrt(np.maximum(w, 0.0))) @ V.T


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
    roots = np.stack([_psd_sqrt((W * b[:, None]).T @ W) for b in rates])

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
    roots = np.stack([_psd_sqrt((Wt * b[:, None]).T @ Wt) for b in topics])
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


def _frame_kmeans(points, init, noise, scale, *, whiten, max_iter, rng):
    r"""k-means of projected points in the whitening metric, started at ``init`` only.

    Returns the centroids (same frame as ``points``) and :math:`\varphi^*`.
    """
    n = points.shape[0]
    mean = points.mean(axis=0)
    pc = points - mean
    cov = pc.T @ pc / n
    A = _pd_sqrt((cov - noise) / scale) if whiten == "corrected" else None
    if A is None:
        A = _psd_sqrt(cov)
    z = np.linalg.solve(A, pc.T).T
    z0 = np.linalg.solve(A, (init - mean).T).T
    eta, _, _ = kmeans(
        z, init.shape[0], n_init=0, init=z0, max_iter=max_iter, random_state=rng
    )
    g = eta @ A.T
    gc = g - g.mean(axis=0)
    mom = _Moments(
        float(np.sum((gc @ cov) * gc)),
        float(np.sum((gc @ noise) * gc)),
        scale,
        float(np.sum((gc @ gc.T) ** 2)),
    )
    return g + mean, _phi_from_moments(mom)


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
    population (Lemma 1): k-means overfits a finite sample (on the noise-free
    projected signal, n = 1000, K = 10, alpha = 2, the plain estimate is
    1.52 +- 0.12; 1.98 at n = 20,000), and noise moves points across cells (1.27 with
    sigma = 1, and 1.62 at n = 20,000). Lemma 3's covariance correction removes
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
    one (it held the true alpha in 17 of 18 fits: seeds 0-5 of the Gaussian and
    Poisson nests above at n = 1000 and of the skewed Poisson nest, n = 6000).

    Two effects of the D-dimensional SVD are not simulated: the top singular
    directions lean toward the noise, which adds about :math:`\mathrm{tr}(N)/n` to
    each top eigenvalue and stretches the projected simplex by about
    :math:`\mathrm{tr}(N) / (n\lambda_j)` (3-4 % at n = 1000 in the settings above;
    correcting it changed the vertex error by 1-2.5 %, in either direction).
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
            gs, phi = _frame_kmeans(
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
    if not np.isfinite(objective):  # eq. (5) has no solution; estimate_alpha warned
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
