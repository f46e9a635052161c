"""Successive projection algorithm (SPA) for separable NMF, compiled and NumPy versions.

SPA (Gillis & Vavasis 2014; Araújo et al. 2001) picks ``n_components`` columns of a
nonnegative matrix ``X = W H^T`` whose right factor ``H`` is separable (some rows of
``H`` are scaled unit vectors): those columns are scaled copies of the columns of ``W``.
It is the Gram--Schmidt-like step of CNMF-SPA (Ibrahim & Fu, Alg. 2, line 4).
"""

from __future__ import annotations

import functools

import numpy as np
import pytensor
import pytensor.tensor as pt
from scipy import sparse

from bayespmf._validation import DataValidationError, check_int

__all__ = ["normalize_columns_l1", "spa", "spa_centered_rows", "spa_numpy"]


def normalize_columns_l1(X) -> np.ndarray:
    """Scale every column of ``X`` to unit l1 norm; all-zero columns stay zero.

    This is SPA's preprocessing in Ibrahim & Fu (App. B, step 1): for
    ``X = W H^T >= 0`` the normalized matrix is ``W_bar H_bar^T`` with every row of
    ``H_bar`` summing to one, so its columns lie in the convex hull of the columns of
    ``W_bar`` and the vertices are the columns of largest norm.

    Parameters
    ----------
    X : array_like, shape (m, n)

    Returns
    -------
    ndarray, shape (m, n)
        A new float64 array.

    Examples
    --------
    >>> normalize_columns_l1(np.array([[1.0, 0.0], [3.0, 0.0]]))
    array([[0.25, 0.  ],
           [0.75, 0.  ]])
    """
    X = np.asarray(X, dtype=np.float64)
    norms = np.abs(X).sum(axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    return X / safe


def _check_spa_args(X, n_components) -> tuple[np.ndarray, int]:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.size == 0:
        raise DataValidationError(
            f"'X' must be a non-empty 2-D array (m, n); got shape {X.shape}."
        )
    if not np.all(np.isfinite(X)):
        raise DataValidationError("'X' contains NaN or infinite values.")
    n_components = check_int(
        n_components, "n_components", owner="spa", low=1, high=X.shape[1]
    )
    return X, n_components


#: Columns whose residual norm is within this relative distance of the largest count as
#: tied; the tie goes to the column of largest original norm (Gillis & Vavasis's
#: FastSepNMF rule), which makes the choice stable under rounding.
TIE_RTOL = 1e-6


def spa_numpy(X, n_components: int, *, normalize: bool = True) -> np.ndarray:
    """NumPy reference implementation of :func:`spa` (same algorithm, same ties).

    Parameters
    ----------
    X : array_like, shape (m, n)
    n_components : int
        Number of columns to select, in ``[1, n]``.
    normalize : bool, default True
        Scale columns to unit l1 norm first (:func:`normalize_columns_l1`).

    Returns
    -------
    ndarray of int64, shape (rank,)
        Indices of the selected columns, in the order they were picked.

    Examples
    --------
    >>> X = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]])
    >>> spa_numpy(X, 2)
    array([0, 1])
    """
    X, n_components = _check_spa_args(X, n_components)
    M = normalize_columns_l1(X) if normalize else X
    norm0 = np.einsum("ij,ij->j", M, M)
    return _spa_select(
        norm0, lambda j: M[:, j].copy(), lambda u: u @ M, M.shape[0], n_components
    )


def _spa_select(norm0, column, project, n_rows: int, n_components: int) -> np.ndarray:
    """SPA's steps on a matrix seen through its column norms, columns and ``u @ M``."""
    resid = norm0.copy()
    U = np.zeros((n_rows, n_components))
    picked = np.empty(n_components, dtype=np.int64)
    for step in range(n_components):
        top = resid.max()
        tied = (top - resid) <= TIE_RTOL * abs(top)
        j = int(np.argmax(np.where(tied, norm0, -np.inf)))
        picked[step] = j
        u = column(j)
        for _ in range(2):  # Gram-Schmidt twice: orthogonal to working precision
            u -= U @ (U.T @ u)
        nu = np.linalg.norm(u)
        u = u / nu if nu > 0 else u
        U[:, step] = u
        resid -= project(u) ** 2
        resid[j] = -np.inf
    return picked


def spa_centered_rows(Y, n_components: int) -> np.ndarray:
    r"""SPA on the centred rows of ``Y``, each augmented by one constant coordinate.

    The vertex search of :class:`~bayespmf.estimators.SimplexSPA`: the columns of
    :math:`M = [\bar Y^T; t 1^T]`, with :math:`\bar Y` the centred data and ``t``
    the largest row norm of :math:`\bar Y`, go to :func:`spa_numpy` with
    ``normalize=False`` (the constant row makes the rows' affine hull a linear one).
    ``M`` is never formed: its column norms are :math:`\|y_i\|^2 - 2 y_i \cdot c
    + \|c\|^2 + t^2`, its columns are dense rows of ``Y`` and :math:`u^T M` is
    :math:`Y u_{1:D} - c \cdot u_{1:D} + t u_{D+1}`, so a SciPy sparse ``Y`` (a
    document-term matrix) stays sparse.

    Parameters
    ----------
    Y : ndarray or scipy.sparse matrix (n, D)
    n_components : int
        Number of rows to pick, in ``[1, n]``.

    Returns
    -------
    ndarray of int64, shape (rank,)
        The picked rows, in order.

    Examples
    --------
    >>> Y = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [0.3, 0.3]])
    >>> spa_centered_rows(Y, 3).tolist()
    [2, 1, 0]
    >>> spa_centered_rows(sparse.csr_matrix(Y), 3).tolist()
    [2, 1, 0]
    """
    n, D = Y.shape
    n_components = check_int(
        n_components, "n_components", owner="spa_centered_rows", low=1, high=n
    )
    if sparse.issparse(Y):
        Y = sparse.csr_matrix(Y, dtype=np.float64)
        c = np.asarray(Y.mean(axis=0)).ravel()
        sq = np.asarray(Y.multiply(Y).sum(axis=1)).ravel() - 2 * (Y @ c) + c @ c
        sq = np.maximum(sq, 0.0)

        def row(j):
            return Y[[j]].toarray().ravel() - c
    else:
        Y = np.asarray(Y, dtype=np.float64)
        c = Y.mean(axis=0)
        Yc = Y - c
        sq = np.einsum("ij,ij->i", Yc, Yc)

        def row(j):
            return Yc[j].copy()

    t = float(np.sqrt(np.max(sq))) or 1.0

    def column(j):
        return np.append(row(j), t)

    def project(u):
        return Y @ u[:D] - c @ u[:D] + t * u[D]

    return _spa_select(sq + t * t, column, project, D + 1, n_components)


def _spa_step(M, norm0, resid, U, step):
    """One SPA step as a graph: pick, orthonormalize, downdate residual norms."""
    top = pt.max(resid)
    tied = pt.le(top - resid, TIE_RTOL * pt.abs(top))
    j = pt.argmax(pt.switch(tied, norm0, -np.inf))
    u = M[:, j]
    for _ in range(2):
        u = u - pt.dot(U, pt.dot(u, U))
    nu = pt.sqrt(pt.sum(u**2))
    u = u / pt.switch(pt.gt(nu, 0.0), nu, 1.0)
    U = pt.set_subtensor(U[:, step], u)
    resid = resid - pt.dot(u, M) ** 2
    resid = pt.set_subtensor(resid[j], -np.inf)
    return resid, U, j


@functools.cache
def _compiled_spa():
    """Compile SPA once: a ``scan`` over a symbolic number of steps.

    The compiled function does not specialize on shapes and the number of steps is an
    input, so one compiled function serves every ``X`` and ``n_components``. An unrolled
    graph per ``n_components`` ran somewhat faster but took longer to compile for each new
    ``n_components`` (:ref:`bench-spa`).
    """
    M = pt.dmatrix("M")
    n_steps = pt.iscalar("n_steps")
    norm0 = pt.sum(M**2, axis=0)
    U0 = pt.zeros((M.shape[0], n_steps), dtype="float64")

    def body(step, resid, U):
        return _spa_step(M, norm0, resid, U, step)

    _, _, picked = pytensor.scan(
        body,
        sequences=[pt.arange(n_steps)],
        outputs_info=[norm0, U0, None],
        return_updates=False,
    )
    return pytensor.function([M, n_steps], picked.astype("int64"))


def spa(
    X, n_components: int, *, normalize: bool = True, backend: str = "numpy"
) -> np.ndarray:
    """Select ``n_components`` vertex columns of ``X`` by successive projections (SPA).

    Parameters
    ----------
    X : array_like, shape (m, n)
        Nonnegative data, ideally ``X = W H^T`` with ``W`` of full column rank and ``H``
        (approximately) separable.
    n_components : int
        Number of columns to select, in ``[1, n]``.
    normalize : bool, default True
        Scale every column to unit l1 norm before selecting (the noise-robust
        preprocessing of Ibrahim & Fu, App. B, step 1). Without it SPA picks the columns
        of largest Euclidean norm, which is right only when the rows of ``H`` already sum
        to one.
    backend : {"numpy", "pytensor"}, default "numpy"
        :func:`spa_numpy`, or the compiled PyTensor ``scan`` (see Notes).

    Returns
    -------
    ndarray of int64, shape (rank,)
        Indices of the selected columns, in the order they were picked.

    Raises
    ------
    DataValidationError
        If ``X`` is not a finite 2-D array.
    ValueError
        If ``n_components`` is not an int in ``[1, n]``.

    Notes
    -----
    With ``M`` the (normalized) data and ``R_0 = M``, step ``k = 1..rank`` picks
    ``j_k = argmax_j ||R_{k-1}(:, j)||_2`` and projects every column onto the orthogonal
    complement of the picked one (Gillis & Vavasis 2014, Alg. 1). The residual is never
    formed: with ``U`` the orthonormal basis of the picked columns (Gram--Schmidt, done
    twice), ``||R_k(:, j)||^2 = ||R_{k-1}(:, j)||^2 - (u_k^T M(:, j))^2``, one
    matrix-vector product per step, as in Gillis's FastSepNMF. Under separability
    ``X(:, Lambda) = W Sigma`` (Ibrahim & Fu, Def. 1 and Sec. 4.2) and the selection is
    robust to noise of order ``sigma_min(W) / kappa(W)^2`` (their Lemma 4).

    Columns within ``TIE_RTOL`` (relative) of the largest residual are tied and the one
    of largest original norm wins, then the lowest index. A picked column is never
    picked again, so the indices are distinct even when ``n_components`` exceeds the rank of
    ``X`` (the extra picks are then arbitrary, not vertices).

    NumPy (:func:`spa_numpy`, the reference) is the default: the compiled ``scan`` is
    slower on small inputs and faster on 1000 x 1000 ones, both far below the cost of
    forming the CNMF virtual matrix, while compiling the graph in an empty PyTensor
    cache is slow: the graph pays only for repeated calls on large inputs with a warm
    cache (:ref:`bench-spa`).

    References
    ----------
    N. Gillis and S. A. Vavasis, "Fast and robust recursive algorithms for separable
    nonnegative matrix factorization," IEEE TPAMI 36(4), 2014.
    S. Ibrahim and X. Fu, "Recovering joint probability of discrete random variables
    from pairwise marginals," IEEE TSP, 2021.

    Examples
    --------
    >>> X = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]])
    >>> spa(X, 2)
    array([0, 1])
    """
    if backend == "numpy":
        return spa_numpy(X, n_components, normalize=normalize)
    if backend != "pytensor":
        raise ValueError(
            "The 'backend' parameter of spa must be 'numpy' or 'pytensor'. "
            f"Got {backend!r}."
        )
    X, n_components = _check_spa_args(X, n_components)
    R = normalize_columns_l1(X) if normalize else X
    return np.asarray(_compiled_spa()(R, np.int32(n_components)), dtype=np.int64)
