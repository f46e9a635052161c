r"""VLAD geometry: preprocessing, the top singular subspace, centroids and extension.

Yurochkin, Guha, Sun & Nguyen (ICML 2019), Alg. 1: centre the data, take the top
``K - 1`` singular factors, run k-means on the whitened scores, map the centroids back
and extend them from the data centre by :math:`\gamma(\alpha)` (Alg. 2,
:mod:`bayespmf.kernels.extension_table`); and the barycentric coordinates of points in
the fitted simplex. Arrays in, arrays out; validation lives in :mod:`bayespmf.fit.simplex`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
import scipy.linalg as sla
from scipy import sparse
from scipy.sparse.linalg import LinearOperator, svds

from bayespmf._validation import check_random_state
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, DEFAULT_KMEANS_N_INIT, kmeans
from bayespmf.kernels.simplex import project_simplex

__all__ = [
    "BARY_MAX_ITER",
    "BARY_TOL",
    "GRAM_MAX_FEATURES",
    "KERNELS",
    "Subspace",
    "barycentric_weights",
    "center_and_gram",
    "extend_centroids",
    "preprocess",
    "top_subspace",
    "vlad_centroids",
]

KERNELS = ("gaussian", "poisson", "multinomial")

#: Up to this many features the top subspace comes from the compiled centring + Gram
#: graph and a partial symmetric eigendecomposition; above it, ARPACK on the centred
#: matrix is faster (the D x D eigenproblem costs O(D^3)). See :func:`top_subspace`.
GRAM_MAX_FEATURES = 1000

# --------------------------------------------------------------------------------------
# preprocessing and the top singular subspace


def preprocess(X, kernel: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Float copy of the data; word frequencies for the multinomial kernel.

    Returns ``(Y, lengths)``: for ``"multinomial"`` the rows of ``Y`` are the counts
    divided by the document lengths ``lengths`` (so that ``E[y_i] = mu_i`` lies on the
    vocabulary simplex, Lemma 3(c)); otherwise ``Y`` is ``X`` as float64 and
    ``lengths`` is None. A SciPy sparse ``X`` gives a sparse CSR ``Y`` (the rows
    scaled by a sparse diagonal; nothing is densified).

    Examples
    --------
    >>> preprocess(np.array([[1, 3], [2, 2]]), "multinomial")[0]
    array([[0.25, 0.75],
           [0.5 , 0.5 ]])
    >>> preprocess(sparse.csr_matrix([[1, 3], [2, 2]]), "multinomial")[0].toarray()
    array([[0.25, 0.75],
           [0.5 , 0.5 ]])
    """
    if sparse.issparse(X):
        Y = sparse.csr_matrix(X, dtype=np.float64, copy=True)
        if kernel != "multinomial":
            return Y, None
        lengths = np.asarray(Y.sum(axis=1)).ravel()
        return sparse.csr_matrix(sparse.diags(1.0 / lengths) @ Y), lengths
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


def top_subspace(Y, n_components: int, *, random_state=None) -> Subspace:
    r"""Steps 1--3 of Alg. 1: centre and take the top ``n_components`` singular factors.

    Parameters
    ----------
    Y : ndarray or scipy.sparse matrix (n, D)
        A sparse ``Y`` is never centred in memory: the Gram matrix is
        :math:`Y^T Y - n \hat c_0 \hat c_0^T` (``D <= GRAM_MAX_FEATURES``) and ARPACK
        sees :math:`\bar X` as a linear operator (larger ``D``), so only ``D x rank``
        and ``n x rank`` dense arrays are formed.
    n_components : int
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
    larger ``D`` ARPACK (``scipy.sparse.linalg.svds``) on :math:`\bar X`; both were
    timed against a NumPy Gram matrix and a randomized SVD (:ref:`bench-vlad-subspace`).
    The compiled Gram graph wins
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
    if sparse.issparse(Y):
        return _sparse_subspace(Y, n_components, random_state)
    if D <= GRAM_MAX_FEATURES or n_components >= min(n, D) - 1:
        c0, gram, total = center_and_gram(Y)
        lam, W = _gram_factors(gram, n_components)
        Xc = Y - c0
    else:
        c0 = Y.mean(axis=0)
        Xc = Y - c0
        total = float(np.einsum("ij,ij->", Xc, Xc))
        lam, W = _arpack_factors(Xc, n_components, random_state)
    W = _fix_signs(W)
    safe = np.where(lam > 0, lam, 1.0)
    U = (Xc @ W) / safe
    return Subspace(c0, U, lam, W, float(total))


def _gram_factors(gram, n_components: int):
    """Top ``n_components`` eigenpairs of a Gram matrix as singular values and vectors."""
    D = gram.shape[0]
    w, V = sla.eigh(gram, subset_by_index=(D - n_components, D - 1))
    order = np.argsort(w)[::-1]
    return np.sqrt(np.maximum(w[order], 0.0)), V[:, order]


def _arpack_factors(op, n_components: int, random_state):
    """Top ``n_components`` singular values and right vectors by ARPACK (seeded start)."""
    v0 = check_random_state(random_state).standard_normal(min(op.shape))
    _, s, Vt = svds(op, k=n_components, v0=v0)
    order = np.argsort(s)[::-1]
    return s[order], Vt[order].T


def _fix_signs(W):
    """Columns signed so that the largest-magnitude entry of each is positive."""
    signs = np.sign(W[np.argmax(np.abs(W), axis=0), np.arange(W.shape[1])])
    return W * np.where(signs == 0, 1.0, signs)


def _sparse_subspace(Y, n_components: int, random_state) -> Subspace:
    """:func:`top_subspace` of a sparse ``Y`` without forming the centred matrix."""
    n, D = Y.shape
    c0 = np.asarray(Y.mean(axis=0)).ravel()
    total = max(float(Y.multiply(Y).sum()) - n * float(c0 @ c0), 0.0)
    if D <= GRAM_MAX_FEATURES or n_components >= min(n, D) - 1:
        lam, W = _gram_factors((Y.T @ Y).toarray() - n * np.outer(c0, c0), n_components)
    else:
        Yt = Y.T.tocsr()
        op = LinearOperator(
            (n, D),
            matvec=lambda v: Y @ np.ravel(v) - c0 @ np.ravel(v),
            rmatvec=lambda u: Yt @ np.ravel(u) - c0 * np.sum(u),
            dtype=np.float64,
        )
        lam, W = _arpack_factors(op, n_components, random_state)
    W = _fix_signs(W)
    safe = np.where(lam > 0, lam, 1.0)
    U = (Y @ W - c0 @ W) / safe
    return Subspace(c0, U, lam, W, total)


# --------------------------------------------------------------------------------------
# k-means and extension


def vlad_centroids(
    sub: Subspace,
    n_components: int,
    *,
    metric=None,
    n_init: int = DEFAULT_KMEANS_N_INIT,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Steps 4--5 of Alg. 1: k-means in whitened coordinates, centroids mapped back.

    Parameters
    ----------
    sub : Subspace
    n_components : int
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
        z, n_components, n_init=n_init, max_iter=max_iter, random_state=random_state
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
    Y : ndarray or scipy.sparse matrix (n, D)
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
    V = np.asarray(vertices, dtype=float)
    vbar = V.mean(axis=0)
    psi = V - vbar
    G = psi @ psi.T
    if sparse.issparse(Y):
        a = np.asarray(Y @ psi.T) - vbar @ psi.T
    else:
        a = (np.asarray(Y, dtype=float) - vbar) @ psi.T
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
