r"""NMF by alternating decoding and updating: purification (Li, Liang, Risteski).

Data points follow :math:`y = A^* x^* + \nu` (eq. (1)) with non-negative weights
:math:`x^*`. From a warm start, Alg. 1 alternates

* **decode** (line 3): :math:`x = \phi_\alpha(A^\dagger y)`, with :math:`A^\dagger` the
  left inverse of the current :math:`A` of minimum :math:`\|\cdot\|_\infty` norm and
  :math:`\phi_\alpha(v) = \max(v - \alpha, 0)` the ReLU with offset (eq. (2));
* **update** (line 4): :math:`A \leftarrow (1 - \eta) A + r\eta\,\hat E[(y - y')
  (x - x')^\top]` over independent uniform pairs of the examples drawn at line 2.

One iteration is :func:`purification_step`; ``bayespmf.fit.purification.purification``
runs them under the one loop. Line 2 draws fresh examples from the data distribution
at every iteration; a step here uses the rows it is given (all of a fixed data set, a
batch of it, fresh draws from a simulator, or a weighted support such as every
binary weight vector with its probability, which makes :math:`\hat E` the exact
population expectation of Sec. 5.1).

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
    "check_weights",
    "decoding_spread",
    "feature_distance",
    "min_inf_pinv",
    "pair_moment",
    "purification_step",
    "relu_decode",
    "span_residual",
]

#: Columns of A whose singular values fall below this fraction of the largest are
#: treated as linearly dependent (Assumption (A1) fails): the decoding needs a left
#: inverse.
RANK_RTOL = 1e-10

#: A cached basis of the min-infinity-norm left inverse is kept while its dual
#: certificate holds to this tolerance (the LP solver's own feasibility tolerance is
#: 1e-7, so this is the stricter of the two).
CERTIFICATE_TOL = 1e-9


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


def check_weights(weights, n_rows: int, owner: str) -> np.ndarray | None:
    """Row weights as probabilities (non-negative, summing to 1), or None.

    Raises
    ------
    DataValidationError
        Not one finite non-negative entry per row, or all zero.

    Examples
    --------
    >>> check_weights([1.0, 3.0], 2, "pair_moment")
    array([0.25, 0.75])
    """
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if (
        w.shape != (n_rows,)
        or not np.all(np.isfinite(w))
        or np.any(w < 0)
        or not w.sum() > 0
    ):
        raise DataValidationError(
            f"The 'weights' argument of {owner} must hold one finite non-negative "
            f"weight per row ({n_rows}), not all zero. Got shape {w.shape}."
        )
    return w / w.sum()


def _certified_rows(a: np.ndarray, support: np.ndarray) -> np.ndarray | None:
    r"""The left-inverse rows on the bases ``support``, if their certificates hold.

    Row ``i`` is :math:`b_S = A_S^{-\top} e_i` on the ``n`` rows ``S = support[i]`` of
    ``a``; it is the minimum-:math:`\ell_1` solution of :math:`A^\top b = e_i` when
    :math:`w = A_S^{-1}\,\mathrm{sign}(b_S)` is dual feasible,
    :math:`\|A w\|_\infty \le 1` (then :math:`e_i^\top w = \|b\|_1`). Returns None
    when a basis is singular, a basic entry vanishes or a certificate fails.
    """
    m, n = a.shape
    out = np.zeros((n, m))
    eye = np.eye(n)
    for i, rows in enumerate(support):
        sub = a[rows]
        try:
            b = np.linalg.solve(sub.T, eye[i])
            w = np.linalg.solve(sub, np.sign(b))
        except np.linalg.LinAlgError:
            return None
        if np.any(b == 0.0) or np.abs(a @ w).max() > 1.0 + CERTIFICATE_TOL:
            return None
        out[i, rows] = b
    return out


def _min_inf_rows(a: np.ndarray, support=None) -> tuple[np.ndarray, np.ndarray | None]:
    r"""Minimum-:math:`\|\cdot\|_\infty` left inverse of ``a`` and its bases.

    Tries the bases ``support`` (the previous iterate's, which stay optimal while the
    iterates move little) and solves the linear program only when their certificate
    fails. The answer is the LP's basic solution recomputed on its basis, so that
    :math:`BA = I` holds to rounding rather than to the solver's tolerance.
    """
    m, n = a.shape
    if support is not None:
        rows = _certified_rows(a, support)
        if rows is not None:
            return rows, support
    # one LP for all rows: min sum_i ||b_i||_1 s.t. A^T b_i = e_i, b_i = u_i - v_i
    blk = sp.kron(sp.eye(n), sp.csr_array(a.T), format="csr")
    res = linprog(
        np.ones(2 * m * n),
        A_eq=sp.hstack([blk, -blk]).tocsr(),
        b_eq=np.eye(n).ravel(),
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:  # cannot happen for full column rank; keep a valid answer
        return np.linalg.pinv(a), None
    lp = (res.x[: m * n] - res.x[m * n :]).reshape(n, m)
    basis = np.sort(np.argsort(-np.abs(lp), axis=1)[:, :n], axis=1)
    rows = _certified_rows(a, basis)
    if rows is None:  # a degenerate vertex (fewer than n non-zeros): keep the LP's
        return lp, None
    return rows, basis


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
    :math:`b = u - v`, :math:`u, v \ge 0` (HiGHS via :func:`scipy.optimize.linprog`,
    all rows in one program). Minimizing every row's :math:`\ell_1` norm minimizes
    their maximum. A basic solution has ``n`` non-zeros; it is recomputed on its
    basis by a linear solve and checked by its dual certificate. For :math:`m = n`
    the inverse is unique.

    Examples
    --------
    >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> b = min_inf_pinv(a)
    >>> np.allclose(b @ a, np.eye(2)), float(np.abs(b).sum(axis=1).max())
    (True, 1.0)
    """
    owner = "min_inf_pinv"
    a = check_matrix(a, "a", owner)
    _check_left_invertible(a, owner)
    if method == "moore-penrose":
        return np.linalg.pinv(a)
    if method != "min-inf":
        raise ValueError(
            f"The 'method' parameter of {owner} must be 'min-inf' or 'moore-penrose'. "
            f"Got {method!r}."
        )
    if a.shape[0] == a.shape[1]:
        return np.linalg.inv(a)
    return _min_inf_rows(a)[0]


def _check_left_invertible(a: np.ndarray, owner: str) -> None:
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


def pair_moment(y, x, weights=None) -> np.ndarray:
    r""":math:`\hat E[(y - y')(x - x')^\top]` over independent pairs of rows.

    For ``y, y'`` drawn independently from the rows (uniformly, or with probabilities
    ``weights``), with their decodings ``x, x'``, the expectation is exactly
    :math:`2(\overline{y x^\top} - \bar y \bar x^\top)`, twice the (weighted)
    cross-covariance, so no pairs need to be drawn.

    Parameters
    ----------
    y : array_like, shape (S, m)
    x : array_like, shape (S, n)
    weights : array_like, shape (S,), optional
        Probabilities of the rows (normalized here); uniform when None.

    Examples
    --------
    >>> y = np.array([[1.0], [3.0]]); x = np.array([[0.0], [1.0]])
    >>> pair_moment(y, x)   # pairs (1,3),(3,1): 2 * 2 * 1 / 4 ... = 1
    array([[1.]])
    >>> pair_moment(y, x, weights=[3.0, 1.0])   # 2 * (3/4 - 3/2 * 1/4)
    array([[0.75]])
    """
    y = np.asarray(y, float)
    x = np.asarray(x, float)
    w = check_weights(weights, y.shape[0], "pair_moment")
    if w is None:
        w = np.full(y.shape[0], 1.0 / y.shape[0])
    return 2.0 * ((y * w[:, None]).T @ x - np.outer(w @ y, w @ x))


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


def decoding_spread(y, a, alpha: float, *, method: str = "min-inf", weights=None) -> float:
    r"""Mean diagonal of :math:`A^\dagger \hat E[(y - y')(x - x')^\top]` at ``a``.

    With exact decoding this is the average second moment scale of the weights that
    the update term carries; its inverse is purification's default ``r``.
    ``weights`` are row probabilities as in :func:`pair_moment`.

    Examples
    --------
    >>> y = np.array([[2.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    >>> round(decoding_spread(y, np.eye(2), 0.0), 4)
    1.1111
    """
    y = np.asarray(y, float)
    pinv = min_inf_pinv(a, method=method)
    # A^+ Ehat[(y - y')(x - x')^T] = Ehat[(A^+ y - A^+ y')(x - x')^T]
    moment = pair_moment(y @ pinv.T, relu_decode(y, pinv, alpha), weights)
    return float(np.mean(np.diag(moment)))


def span_residual(y, a) -> float:
    r"""Share of the rows' energy outside the column span of ``a``.

    :math:`\sum_k \|y_k - P_A y_k\|^2 / \sum_k \|y_k\|^2` with :math:`P_A` the
    orthogonal projection on the span of the features: the least-squares
    reconstruction error of the data by the features, relative. It ignores the scale
    of the columns, is 0 in the noiseless model (the data lie in the span of
    :math:`A^*`, and so do the iterates of Alg. 1), and rises when the features turn
    away from the data's subspace, the way purification fails under heavy noise (the
    component :math:`N` of :math:`A = A^*(\Sigma + E) + N` outside the span of
    :math:`A^*` grows).

    Examples
    --------
    >>> y = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    >>> a = np.array([[1.0], [0.0], [1.0]])   # row 1 inside; 1.5 of row 2's 2 outside
    >>> round(span_residual(y, a), 6)
    0.375
    """
    y = np.asarray(y, float)
    q, _ = np.linalg.qr(np.asarray(a, float))
    total = float(np.einsum("ij,ij->", y, y))
    if total == 0.0:
        return 0.0
    inside = y @ q
    return max(total - float(np.einsum("ij,ij->", inside, inside)), 0.0) / total


def feature_distance(a, b) -> float:
    r"""Largest column :math:`\ell_1` distance after scaling columns to unit norm.

    :math:`\max_i \|\hat a_i - \hat b_i\|_1` with :math:`\hat a_i = a_i / \|a_i\|_1`:
    the error of the remark after Theorem 1 when ``b`` is :math:`A^*`.

    Examples
    --------
    >>> feature_distance(np.array([[1.0], [1.0]]), np.array([[3.0], [1.0]]))
    0.5
    """
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    an = a / np.maximum(np.abs(a).sum(axis=0), np.finfo(float).tiny)
    bn = b / np.maximum(np.abs(b).sum(axis=0), np.finfo(float).tiny)
    return float(np.abs(an - bn).sum(axis=0).max())


class PurificationProblem(NamedTuple):
    """The data and settings of a purification run (Alg. 1).

    Attributes
    ----------
    y : ndarray, shape (S, m)
        The data points (or the support of a discrete distribution, with ``weights``).
    eta, alpha, r : float
        Step size, ReLU offset and scaling factor.
    batch_size : int or None
        Rows drawn per iteration; all when None.
    pinv_method : str
        The left inverse used to decode (:func:`min_inf_pinv`).
    weights : ndarray, shape (S,), or None
        Row probabilities for :func:`pair_moment`; uniform when None (not with
        ``batch_size``).
    """

    y: np.ndarray
    eta: float
    alpha: float
    r: float
    batch_size: int | None
    pinv_method: str
    weights: np.ndarray | None = None


class PurificationState(NamedTuple):
    """One purification iterate: the features, the batch generator and the bases.

    The generator is advanced by every step that draws a batch. ``support`` holds the
    bases of the last min-infinity-norm left inverse (reused while still optimal);
    None at the start.
    """

    components: np.ndarray
    rng: np.random.Generator | None
    support: np.ndarray | None = None


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
    a, rng, support = state
    y, weights = problem.y, problem.weights
    if problem.batch_size is not None:  # line 2
        y = y[rng.choice(y.shape[0], problem.batch_size, False)]
        weights = None
    if problem.pinv_method == "min-inf" and a.shape[0] > a.shape[1]:
        pinv, support = _min_inf_rows(a, support)
    else:
        pinv = min_inf_pinv(a, method=problem.pinv_method)
    x = relu_decode(y, pinv, problem.alpha)
    new = (1.0 - problem.eta) * a + problem.r * problem.eta * pair_moment(y, x, weights)
    change = float(np.abs(new - a).sum(axis=0).max())
    return PurificationState(new, rng, support), PurificationInfo(-change, 1, change)
