r"""NMF by alternating decoding and updating: purification (Li, Liang, Risteski).

Data points follow :math:`y = A^* x^* + \nu` with non-negative weights :math:`x^*`.
From a warm start, Alg. 1 alternates

* **decode**: :math:`x = \phi_\alpha(A^\dagger y)`, with :math:`A^\dagger` the left
  inverse of the current :math:`A` of minimum :math:`\|\cdot\|_\infty` norm and
  :math:`\phi_\alpha(v) = \max(v - \alpha, 0)` the ReLU with offset (eq. (2));
* **update**: :math:`A \leftarrow (1 - \eta) A + r\eta\,\hat E[(y - y')(x - x')^\top]`
  over independent uniform pairs of data points.

One iteration is :func:`purification_step`; ``bayespmf.fit.purification.purification``
runs T of them under the one loop.

References
----------
.. [1] Y. Li, Y. Liang, A. Risteski, "Recovery guarantee of non-negative matrix
   factorization via alternating updates", NIPS 2016.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from bayespmf._validation import DataValidationError

__all__ = [
    "PurificationInfo",
    "PurificationProblem",
    "PurificationState",
    "balance_columns",
    "check_matrix",
    "decoding_spread",
    "min_inf_pinv",
    "pair_moment",
    "purification_step",
    "relu_decode",
]

#: Columns of A whose singular values fall below this fraction of the largest are
#: treated as linearly dependent (Assumption (A1) fails): the decoding needs a left
#: inverse.
RANK_RTOL = 1e-10


def check_matrix(a, name: str, owner: str, ndim: int = 2) -> np.ndarray:
    """``a`` as a finite, non-empty float array of ``ndim`` dimensions.

    Raises
    ------
    DataValidationError
        Otherwise (the message names ``name`` and ``owner``).
    """
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != ndim or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise DataValidationError(
            f"The '{name}' argument of {owner} must be a finite, non-empty {ndim}-D "
            f"array. Got shape {arr.shape}"
            + ("" if arr.size == 0 or np.all(np.isfinite(arr)) else " with NaN/inf")
            + "."
        )
    return arr


def min_inf_pinv(a, *, method: str = "min-inf") -> np.ndarray:
    r"""Left inverse of ``a`` with minimum :math:`\|\cdot\|_\infty` norm (Alg. 1, line 3).

    Parameters
    ----------
    a : array_like, shape (m, n), m >= n
        Feature matrix with linearly independent columns.
    method : {"min-inf", "moore-penrose"}, default "min-inf"
        "min-inf": the left inverse :math:`B` (:math:`BA = I`) minimizing
        :math:`\|B\|_\infty = \max_i \sum_j |B_{ij}|`; "moore-penrose":
        :func:`numpy.linalg.pinv` (minimum Frobenius norm), cheaper for large ``m``.

    Returns
    -------
    ndarray, shape (n, m)

    Raises
    ------
    DataValidationError
        ``a`` not 2-D and finite, ``m < n``, or columns numerically dependent.
    ValueError
        Unknown ``method``.

    Notes
    -----
    The rows of :math:`B` decouple: row :math:`i` solves the basis-pursuit problem
    :math:`\min \|b\|_1` s.t. :math:`A^\top b = e_i`, a linear program in
    :math:`b = u - v`, :math:`u, v \ge 0` (HiGHS via :func:`scipy.optimize.linprog`).
    Minimizing every row's :math:`\ell_1` norm minimizes their maximum. For
    :math:`m = n` the inverse is unique.

    Examples
    --------
    >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> b = min_inf_pinv(a)
    >>> np.allclose(b @ a, np.eye(2)), float(np.abs(b).sum(axis=1).max())
    (True, 1.0)
    """
    owner = "min_inf_pinv"
    a = check_matrix(a, "a", owner)
    m, n = a.shape
    if m < n:
        raise DataValidationError(
            f"The 'a' argument of {owner} must have at least as many rows (features) as "
            f"columns (components) to have a left inverse. Got shape {a.shape}."
        )
    s = np.linalg.svd(a, compute_uv=False)
    if s[-1] <= RANK_RTOL * s[0]:
        raise DataValidationError(
            f"The columns of 'a' passed to {owner} are linearly dependent (condition "
            f"number {s[0] / max(s[-1], 1e-300):.3g}); Assumption (A1) of Li et al. "
            "fails. Use fewer components or a better initialization."
        )
    if method == "moore-penrose":
        return np.linalg.pinv(a)
    if method != "min-inf":
        raise ValueError(
            f"The 'method' parameter of {owner} must be 'min-inf' or 'moore-penrose'. "
            f"Got {method!r}."
        )
    if m == n:
        return np.linalg.inv(a)
    a_eq = sp.hstack([sp.csr_array(a.T), sp.csr_array(-a.T)]).tocsr()
    cost = np.ones(2 * m)
    out = np.empty((n, m))
    for i in range(n):
        res = linprog(cost, A_eq=a_eq, b_eq=np.eye(n)[i], bounds=(0, None), method="highs")
        if res.status != 0:  # cannot happen for full column rank; keep a valid answer
            out[i] = np.linalg.pinv(a)[i]
        else:
            out[i] = res.x[:m] - res.x[m:]
    return out


def relu_decode(y, pinv, alpha: float) -> np.ndarray:
    r"""Decoded weights :math:`x = \phi_\alpha(A^\dagger y)` of every row of ``y``.

    Parameters
    ----------
    y : array_like, shape (S, m)
        Data points, one per row.
    pinv : array_like, shape (n, m)
        The left inverse :math:`A^\dagger` (:func:`min_inf_pinv`).
    alpha : float
        ReLU offset :math:`\alpha \ge 0` (eq. (2)).

    Returns
    -------
    ndarray, shape (S, n)

    Examples
    --------
    >>> relu_decode([[1.0, 0.2]], np.eye(2), 0.25)
    array([[0.75, 0.  ]])
    """
    return np.maximum(np.asarray(y, float) @ np.asarray(pinv, float).T - alpha, 0.0)


def pair_moment(y, x) -> np.ndarray:
    r""":math:`\hat E[(y - y')(x - x')^\top]` over independent uniform pairs of rows.

    For ``y, y'`` drawn independently and uniformly from the S rows (with their
    decodings ``x, x'``) the expectation is exactly
    :math:`2(\overline{y x^\top} - \bar y \bar x^\top)`, twice the empirical
    cross-covariance, so no pairs need to be drawn.

    Examples
    --------
    >>> y = np.array([[1.0], [3.0]]); x = np.array([[0.0], [1.0]])
    >>> pair_moment(y, x)   # pairs (1,3),(3,1): 2 * 2 * 1 / 4 ... = 1
    array([[1.]])
    """
    y = np.asarray(y, float)
    x = np.asarray(x, float)
    n_rows = y.shape[0]
    return 2.0 * (y.T @ x / n_rows - np.outer(y.mean(axis=0), x.mean(axis=0)))


def balance_columns(y, a, alpha: float, *, method: str = "min-inf") -> np.ndarray:
    r"""Scaling :math:`D` of the balancing preprocessing (Sec. 6, "general proportions").

    Returns the diagonal of :math:`D` such that the weights of the rescaled problem
    :math:`Y \approx [A D][D^{-1} X]`, decoded with :math:`A D`, have second moments
    :math:`\hat E[x_i^2] / D_{ii}^2` all equal to the smallest one.

    Examples
    --------
    >>> y = np.array([[2.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    >>> balance_columns(y, np.eye(2), 0.0)   # second moments 8/3 and 2/3
    array([2., 1.])
    """
    pinv = min_inf_pinv(a, method=method)
    second = np.mean(relu_decode(y, pinv, alpha) ** 2, axis=0)
    ok = second > 0
    if not ok.any():
        return np.ones(second.size)
    target = second[ok].min()
    return np.where(ok, np.sqrt(np.where(ok, second, target) / target), 1.0)


def decoding_spread(y, a, alpha: float, *, method: str = "min-inf") -> float:
    r"""Mean diagonal of :math:`A^\dagger \hat E[(y - y')(x - x')^\top]` at ``a``.

    With exact decoding this is the average second moment scale of the weights that
    the update term carries; its inverse is purification's default ``r``.

    Examples
    --------
    >>> y = np.array([[2.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    >>> round(decoding_spread(y, np.eye(2), 0.0), 4)
    1.1111
    """
    pinv = min_inf_pinv(a, method=method)
    # A^+ Ehat[(y - y')(x - x')^T] = Ehat[(A^+ y - A^+ y')(x - x')^T]
    return float(np.mean(np.diag(pair_moment(y @ pinv.T, relu_decode(y, pinv, alpha)))))


class PurificationProblem(NamedTuple):
    """The data and settings of a purification run (Alg. 1).

    Attributes
    ----------
    y : ndarray, shape (S, m)
        The data points.
    eta, alpha, r : float
        Step size, ReLU offset and scaling factor.
    batch_size : int or None
        Rows drawn per iteration; all when None.
    pinv_method : str
        The left inverse used to decode (:func:`min_inf_pinv`).
    """

    y: np.ndarray
    eta: float
    alpha: float
    r: float
    batch_size: int | None
    pinv_method: str


class PurificationState(NamedTuple):
    """One purification iterate: the features and the batch generator.

    The generator is advanced by every step that draws a batch.
    """

    components: np.ndarray
    rng: np.random.Generator


class PurificationInfo(NamedTuple):
    """What one :func:`purification_step` reports.

    Attributes
    ----------
    objective : float
        Minus ``change``: Alg. 1 has no objective; its diagnostic is the update size.
    n_evals : int
        Iterations (1).
    change : float
        ``||A^{(t+1)} - A^{(t)}||_1`` (max column l1 norm).
    """

    objective: float
    n_evals: int
    change: float


def purification_step(
    state: PurificationState, problem: PurificationProblem
) -> tuple[PurificationState, PurificationInfo]:
    """One iteration of Alg. 1: decode (line 3), then update the features (line 4).

    Examples
    --------
    >>> y = np.array([[2.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    >>> problem = PurificationProblem(y, 0.1, 0.0, 0.9, None, "min-inf")
    >>> state, info = purification_step(PurificationState(np.eye(2), None), problem)
    >>> round(info.change, 4)
    0.1
    """
    a, rng = state
    y = problem.y
    if problem.batch_size is not None:  # line 2
        y = y[rng.choice(y.shape[0], problem.batch_size, False)]
    x = relu_decode(y, min_inf_pinv(a, method=problem.pinv_method), problem.alpha)
    new = (1.0 - problem.eta) * a + problem.r * problem.eta * pair_moment(y, x)
    change = float(np.abs(new - a).sum(axis=0).max())
    return PurificationState(new, rng), PurificationInfo(-change, 1, change)
