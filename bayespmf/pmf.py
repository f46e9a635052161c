r"""The latent-class (naive Bayes / low-rank CPD) PMF: parameters and NumPy reference maths.

The model (Ibrahim & Fu, eq. (3); Chege et al., eq. (1)) is

.. math:: \\Pr(x_1, \\dots, x_N) = \\sum_{f=1}^F \\lambda_f \\prod_{n=1}^N A_n(x_n, f),

with ``weights`` :math:`\\lambda` on the probability simplex and each factor
:math:`A_n` of shape ``(I_n, F)`` column-stochastic. A missing entry is marginalized
out, which drops its factor from the product.

These functions are the plain NumPy reference: arrays in, arrays out, all in log space.
The compiled kernels in :mod:`bayespmf.kernels` are tested against them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from bayespmf._validation import DataValidationError, as_codes

__all__ = [
    "LatentClassParams",
    "check_params",
    "conditional_pmf",
    "index_dtype",
    "joint_pmf",
    "log_likelihood_rows",
    "observed_csr",
    "offsets_of",
    "one_hot_design",
    "posterior_classes",
    "split_factors",
    "stack_factors",
]

#: Largest joint PMF tensor joint_pmf() builds (entries); 2**26 float64 = 512 MiB.
MAX_JOINT_ENTRIES = 2**26


class LatentClassParams(NamedTuple):
    r"""Parameters of a latent-class PMF.

    Attributes
    ----------
    weights : ndarray, shape (F,)
        Class prior :math:`\\lambda`, on the simplex.
    factors : list of ndarray, each (I_n, F)
        Conditional PMFs :math:`A_n(i, f) = \\Pr(x_n = i \\mid H = f)`.
    """

    weights: np.ndarray
    factors: list


def offsets_of(n_categories) -> np.ndarray:
    """Row offsets of each variable's block in the stacked factor matrix.

    Examples
    --------
    >>> offsets_of([2, 3])
    array([0, 2, 5])
    """
    return np.concatenate([[0], np.cumsum(np.asarray(n_categories, dtype=np.int64))])


def index_dtype(n_categories) -> np.dtype:
    """The smallest unsigned integer type that holds every flat index of the factors.

    The flat indices ``offsets[n] + x`` run to ``sum(n_categories) - 1``: ``uint8``
    up to 256 categories in all, ``uint16`` up to 65,536, then ``uint32`` and
    ``int64``.

    Examples
    --------
    >>> index_dtype([4, 3]), index_dtype([200] * 2), index_dtype([70_000])
    (dtype('uint8'), dtype('uint16'), dtype('uint32'))
    """
    top = int(offsets_of(n_categories)[-1]) - 1
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def observed_csr(codes, n_categories, *, drop_empty: bool = False, index_dtype=np.int64):
    """CSR layout ``(indptr, indices)`` of the one-hot design of the observed entries.

    Row ``s`` of the design holds a one in column ``offsets[n] + x_sn`` for every
    observed entry (``x_sn >= 0``), where ``offsets = offsets_of(n_categories)``: the
    row's entries into the stacked factors. Row-major order lists each row's entries
    by increasing column, so no sorting is needed. Built by two compiled passes over
    the codes, in their own integer type: nothing of the codes' size is allocated
    besides the result.

    Parameters
    ----------
    codes : ndarray of int, shape (S, N)
        Validated codes; ``-1`` marks a missing entry.
    n_categories : sequence of int, shape (N,)
    drop_empty : bool, default False
        Leave out the rows with no observed entry (they carry no information for the
        likelihood), as the EM map does.
    index_dtype : numpy dtype, default int64
        The type of ``indices``; :func:`index_dtype` gives the smallest that holds
        every flat index (a quarter to an eighth of the memory, and of the bytes a
        pass over the entries reads).

    Returns
    -------
    indptr : ndarray of int64, shape (rows + 1,)
    indices : ndarray of ``index_dtype``, shape (observed entries,)

    Examples
    --------
    >>> observed_csr(np.array([[0, 1], [-1, -1], [1, -1]]), [2, 2])
    (array([0, 2, 2, 3]), array([0, 3, 1]))
    >>> observed_csr(np.array([[0, 1], [-1, -1], [1, -1]]), [2, 2], drop_empty=True)[0]
    array([0, 2, 3])
    """
    from bayespmf._csr_numba import csr_fill, csr_row_counts  # numba on first use

    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        codes = codes.astype(np.int64)
    codes = np.ascontiguousarray(codes)  # no copy for the usual C-ordered codes
    per_row = csr_row_counts(codes)
    if drop_empty:
        keep = per_row > 0
        if not keep.all():
            codes, per_row = codes[keep], per_row[keep]
    indptr = np.zeros(per_row.size + 1, dtype=np.int64)
    np.cumsum(per_row, out=indptr[1:])
    offsets = offsets_of(n_categories)
    if offsets[-1] - 1 > np.iinfo(index_dtype).max:
        raise DataValidationError(
            f"'index_dtype' {np.dtype(index_dtype)} cannot hold the flat indices up to "
            f"{offsets[-1] - 1}; pass index_dtype=index_dtype(n_categories)."
        )
    indices = np.empty(int(indptr[-1]), dtype=index_dtype)
    csr_fill(codes, offsets[:-1].astype(np.int64), indptr, indices)
    return indptr, indices


def one_hot_design(
    codes, n_categories, *, drop_empty: bool = False, dtype=np.float64
) -> sp.csr_matrix:
    """Sparse one-hot design ``O`` of the observed entries, (S, sum I_n).

    ``O[s, offsets[n] + x_sn] = 1`` for every observed entry; a missing entry leaves
    its block of the row zero. The design of the EM map (``O @ log A``), of the
    pairwise marginals (``O.T @ O``), of the PyMC likelihood and of the one-hot
    features of the baselines. See :func:`observed_csr` for the arguments;
    ``dtype`` is that of the ones.

    Examples
    --------
    >>> one_hot_design(np.array([[0, 1], [-1, -1], [1, -1]]), [2, 2]).toarray()
    array([[1., 0., 0., 1.],
           [0., 0., 0., 0.],
           [0., 1., 0., 0.]])
    >>> one_hot_design(np.array([[0, 1], [-1, -1]]), [2, 2], drop_empty=True).shape
    (1, 4)
    """
    indptr, indices = observed_csr(codes, n_categories, drop_empty=drop_empty)
    n_total = int(np.sum(np.asarray(n_categories, dtype=np.int64)))
    return sp.csr_matrix(
        (np.ones(indices.size, dtype=dtype), indices, indptr),
        shape=(indptr.size - 1, n_total),
    )


def stack_factors(factors) -> np.ndarray:
    """Stack a list of ``(I_n, F)`` factors into one ``(sum I_n, F)`` array.

    Examples
    --------
    >>> stack_factors([np.eye(2), np.full((3, 2), 1 / 3)]).shape
    (5, 2)
    """
    return np.concatenate([np.asarray(a, dtype=float) for a in factors], axis=0)


def split_factors(stacked, n_categories) -> list:
    """Inverse of :func:`stack_factors` (returns copies).

    Examples
    --------
    >>> [a.shape for a in split_factors(np.ones((5, 2)), [2, 3])]
    [(2, 2), (3, 2)]
    """
    off = offsets_of(n_categories)
    return [np.array(stacked[off[n] : off[n + 1]]) for n in range(len(off) - 1)]


def check_params(weights, factors, n_categories=None, *, atol=1e-6) -> LatentClassParams:
    """Validate latent-class parameters and return float64 copies.

    Raises
    ------
    ValueError
        Wrong shapes, negative entries, or columns not summing to one (within ``atol``).

    Examples
    --------
    >>> p = check_params([0.5, 0.5], [np.array([[0.2, 0.9], [0.8, 0.1]])])
    >>> p.weights
    array([0.5, 0.5])
    """
    w = np.array(weights, dtype=float)
    if w.ndim != 1 or w.size < 1:
        raise DataValidationError(f"'weights' must be a 1-D array; got shape {w.shape}.")
    f = w.size
    fs = [np.array(a, dtype=float) for a in factors]
    if n_categories is not None and len(fs) != len(n_categories):
        raise DataValidationError(
            f"'factors' must hold one matrix per variable ({len(n_categories)}); got "
            f"{len(fs)}."
        )
    for n, a in enumerate(fs):
        want = (a.shape[0] if n_categories is None else int(n_categories[n]), f)
        if a.ndim != 2 or a.shape != want:
            raise DataValidationError(
                f"'factors[{n}]' must have shape {want} (n_categories, rank); got "
                f"{a.shape}."
            )
    for name, arr, axis in [("weights", w, 0)] + [
        (f"factors[{n}]", a, 0) for n, a in enumerate(fs)
    ]:
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise DataValidationError(f"'{name}' must be finite and non-negative.")
        if np.any(np.abs(arr.sum(axis=axis) - 1.0) > atol):
            raise DataValidationError(
                f"'{name}' must sum to one along axis {axis} (each column is a PMF)."
            )
    return LatentClassParams(w, fs)


#: numpy adds fewer terms than this one after the other (its pairwise summation
#: starts at this length), so :func:`row_sum` over fewer columns, written as column
#: additions, gives the bits of ``sum(axis=1)``.
PAIRWISE_BLOCK = 8


def row_max(a) -> np.ndarray:
    """``a.max(axis=1)`` of a 2-D array, as a new array; by columns when they are few.

    A reduction along a short last axis runs one small loop per row; a few
    elementwise maxima of whole columns give the same values in one pass each.

    Examples
    --------
    >>> row_max(np.array([[1.0, 3.0, 2.0], [0.0, -1.0, np.nan]])).tolist()
    [3.0, nan]
    """
    a = np.asarray(a)
    if not 0 < a.shape[1] < PAIRWISE_BLOCK:
        return a.max(axis=1)
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        np.maximum(out, a[:, j], out=out)
    return out


def row_sum(a) -> np.ndarray:
    """``a.sum(axis=1)`` of a 2-D array, as a new array, with the same rounding.

    Below :data:`PAIRWISE_BLOCK` columns the sum is taken by adding whole columns
    left to right, the order numpy uses for so few terms (one pass per column instead
    of one small loop per row).

    Examples
    --------
    >>> row_sum(np.array([[1.0, 2.0, 3.0], [0.5, 0.25, 0.0]])).tolist()
    [6.0, 0.75]
    """
    a = np.asarray(a)
    if not 0 < a.shape[1] < PAIRWISE_BLOCK:
        return a.sum(axis=1)
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        out += a[:, j]
    return out


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def class_log_joint(codes, weights, factors) -> np.ndarray:
    """``log lambda_f + sum_{n observed} log A_n(x_n, f)`` for every row, shape (S, F)."""
    codes = np.asarray(codes)
    out = np.empty((codes.shape[0], len(weights)))
    out[:] = _log(np.asarray(weights, dtype=float))
    if not len(factors):
        return out
    # every log A_n with a row of zeros below it (the missing entries), stacked, so
    # that each variable is one gather of rows, no masks; added in variable order
    logs = [_log(np.asarray(a, dtype=float)) for a in factors]
    sizes = np.array([a.shape[0] for a in logs])
    table = np.concatenate([np.vstack([a, np.zeros((1, a.shape[1]))]) for a in logs])
    start = np.concatenate([[0], np.cumsum(sizes + 1)[:-1]])
    cols = codes[:, : len(logs)].T
    rows = np.where(cols >= 0, cols, sizes[:, None]) + start[:, None]
    for n in range(len(logs)):
        out += table.take(rows[n], axis=0)
    return out


def log_likelihood_rows(data, weights, factors) -> np.ndarray:
    """Log-likelihood of the observed entries of every row, shape (S,).

    Parameters
    ----------
    data : CategoricalData or array_like of int (S, N)
        ``-1`` marks missing entries, which are marginalized out.
    weights : array_like, shape (F,)
    factors : list of array_like, each (I_n, F)

    Returns
    -------
    ndarray, shape (S,)
        ``log sum_f lambda_f prod_{n observed} A_n(x_n, f)``; 0 for an all-missing row.

    Examples
    --------
    >>> w = np.array([0.5, 0.5]); A = [np.array([[0.9, 0.2], [0.1, 0.8]])]
    >>> np.exp(log_likelihood_rows([[0], [1], [-1]], w, A)).round(3)
    array([0.55, 0.45, 1.  ])
    """
    codes, _ = as_codes(data, [np.shape(a)[0] for a in factors], allow_empty_columns=True)
    return logsumexp(class_log_joint(codes, weights, factors), axis=1)


def posterior_classes(data, weights, factors) -> np.ndarray:
    """Posterior class probabilities ``Pr(H = f | observed entries of the row)``, (S, F).

    Examples
    --------
    >>> w = np.array([0.5, 0.5]); A = [np.array([[0.9, 0.2], [0.1, 0.8]])]
    >>> posterior_classes([[0]], w, A).round(3)
    array([[0.818, 0.182]])
    """
    codes, _ = as_codes(data, [np.shape(a)[0] for a in factors], allow_empty_columns=True)
    return posterior_from_log_joint(class_log_joint(codes, weights, factors), weights)


def posterior_from_log_joint(log_joint, weights) -> np.ndarray:
    """Normalize :func:`class_log_joint` rows into posterior class probabilities, (S, F).

    A row whose observed entries have probability 0 under every class has an undefined
    posterior (0/0); it gets the prior ``weights`` rather than NaN.

    Examples
    --------
    >>> lj = np.array([[np.log(0.45), np.log(0.1)], [-np.inf, -np.inf]])
    >>> posterior_from_log_joint(lj, [0.5, 0.5]).round(3)
    array([[0.818, 0.182],
           [0.5  , 0.5  ]])
    """
    lj = np.asarray(log_joint, dtype=float)
    top = row_max(lj)
    impossible = np.isneginf(top)
    if impossible.any():
        lj = lj.copy(order="K")
        lj[impossible] = _log(np.asarray(weights, dtype=float))
        top = row_max(lj)
    post = np.exp(lj - top[:, None])  # a finite max in every row now
    return post / row_sum(post)[:, None]


def conditional_pmf(data, weights, factors, target: int) -> np.ndarray:
    """PMF of variable ``target`` given each row's *other* observed entries, (S, I_t).

    The entry of ``target`` itself, if observed, is ignored (it is what is predicted).

    Examples
    --------
    >>> w = np.array([0.5, 0.5])
    >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]]), np.array([[0.7, 0.3], [0.3, 0.7]])]
    >>> float(conditional_pmf([[0, 1]], w, A, target=1).sum())
    1.0
    """
    codes, _ = as_codes(data, [np.shape(a)[0] for a in factors], allow_empty_columns=True)
    codes = codes.copy()
    codes[:, target] = -1
    post = posterior_classes(codes, weights, factors)
    p = post @ np.asarray(factors[target], dtype=float).T
    return p / p.sum(axis=1, keepdims=True)


def joint_pmf(weights, factors) -> np.ndarray:
    """The full joint PMF tensor of shape ``(I_1, ..., I_N)``.

    Raises
    ------
    ValueError
        If the tensor would have more than ``MAX_JOINT_ENTRIES`` entries.

    Examples
    --------
    >>> w = np.array([0.5, 0.5]); A = [np.eye(2), np.eye(2)]
    >>> joint_pmf(w, A)
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    shape = tuple(int(np.shape(a)[0]) for a in factors)
    size = int(np.prod(shape, dtype=np.float64))
    if size > MAX_JOINT_ENTRIES:
        raise DataValidationError(
            f"The joint PMF would have {size:.3g} entries (shape {shape}), more than "
            f"{MAX_JOINT_ENTRIES}. Use conditional_pmf or log_likelihood_rows for "
            "queries instead of the full tensor."
        )
    t = np.asarray(weights, dtype=float)[None, :]  # (1, F)
    for a in factors:
        t = (t[:, None, :] * np.asarray(a, dtype=float)[None, :, :]).reshape(-1, t.shape[1])
    return t.sum(axis=1).reshape(shape)
