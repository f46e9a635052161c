r"""NMF by alternating decoding and updating: purification (Li, Liang, Risteski).

Data points follow :math:`y = A^* x^* + \nu` with non-negative weights :math:`x^*`.
From a warm start, Alg. 1 alternates

* **decode**: :math:`x = \phi_\alpha(A^\dagger y)`, with :math:`A^\dagger` the left
  inverse of the current :math:`A` of minimum :math:`\|\cdot\|_\infty` norm and
  :math:`\phi_\alpha(v) = \max(v - \alpha, 0)` the ReLU with offset (eq. (2));
* **update**: :math:`A \leftarrow (1 - \eta) A + r\eta\,\hat E[(y - y')(x - x')^\top]`
  over independent uniform pairs of data points.

References
----------
.. [1] Y. Li, Y. Liang, A. Risteski, "Recovery guarantee of non-negative matrix
   factorization via alternating updates", NIPS 2016.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from bayespmf._progress import progress_bar
from bayespmf._validation import DataValidationError, check_float, check_int
from bayespmf._validation import check_random_state as _rng

__all__ = [
    "balance_columns",
    "min_inf_pinv",
    "pair_moment",
    "purification",
    "relu_decode",
]

#: Columns of A whose singular values fall below this fraction of the largest are
#: treated as linearly dependent (Assumption (A1) fails): the decoding needs a left
#: inverse.
RANK_RTOL = 1e-10


def _check_matrix(a, name: str, owner: str, ndim: int = 2) -> np.ndarray:
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
    a = _check_matrix(a, "a", owner)
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


def purification(
    y,
    init,
    *,
    n_iter: int = 100,
    eta: float = 0.1,
    alpha: float = 0.1,
    r: float | None = None,
    balance: bool = True,
    batch_size: int | None = None,
    pinv_method: str = "min-inf",
    random_state=None,
    progressbar: bool = False,
) -> tuple[np.ndarray, dict]:
    r"""Feature matrix of :math:`Y \approx A X` by the purification algorithm (Alg. 1).

    Parameters
    ----------
    y : array_like, shape (S, m)
        Data points :math:`y = A^* x^* + \nu`, one per row.
    init : array_like, shape (m, n)
        Warm start :math:`A^{(0)}` (Assumption (A3): each column mostly its own
        ground-truth feature), e.g. SPA on the data points. Not modified.
    n_iter : int, default 100
        Iterations T.
    eta : float, default 0.1
        Step size :math:`\eta \in (0, 1]`.
    alpha : float, default 0.1
        ReLU offset :math:`\alpha \ge 0`.
    r : float, optional
        Scaling factor; default :math:`n / \mathrm{tr}(A^\dagger \hat E[(y - y')
        (x - x')^\top])` at the (balanced) warm start: the update term
        :math:`r \hat E[\cdot]` then has, on average over columns, the scale of
        :math:`A` (its coefficient on each column of :math:`A` is 1 when :math:`A` is
        the truth), so the iterates keep their scale.
    balance : bool, default True
        Rescale the columns first so that the decoded weights have equal second
        moments (:func:`balance_columns`), and undo the scaling at the end.
    batch_size : int, optional
        Rows drawn (without replacement) per iteration (line 2); all rows by default.
    pinv_method : {"min-inf", "moore-penrose"}, default "min-inf"
    random_state : None, int or numpy.random.Generator
        Seeds the batches.
    progressbar : bool, default False

    Returns
    -------
    a : ndarray, shape (m, n)
        :math:`A^{(T)}` (balancing undone).
    info : dict
        ``r`` (the scaling used), ``scale`` (the balancing diagonal D, ones when
        ``balance=False``), ``change`` (``||A^{(t+1)} - A^{(t)}||_1`` per iteration,
        max column :math:`\ell_1` norm).

    Raises
    ------
    DataValidationError
        Malformed ``y`` or ``init``, mismatched shapes, dependent columns.
    ValueError
        A parameter outside its range.

    Notes
    -----
    Line 3 decodes with :func:`min_inf_pinv` and :func:`relu_decode`; line 4's
    expectation over independent uniform pairs is computed exactly
    (:func:`pair_moment`). With exact decoding and no noise,
    :math:`\hat E[(y - y')(x - x')^\top] = 2 A^* \mathrm{Cov}(x^*)` (Sec. 4), so ``r``
    converts it back to feature scale; Theorem 1 leaves ``r`` (and :math:`\alpha,
    \eta`) as constants "that exist", hence the data-driven default. The balancing
    step follows the idea of Sec. 6 (solve :math:`Y \approx [A^* D][D^{-1} X]` with
    :math:`E[(x^*_i)^2] / D_{ii}^2` within a factor 2 of each other); its procedure
    is in the paper's appendix, not in our copy: we estimate the second moments from
    the warm start's decodings and scale so that the smallest stays put (the
    rescaled weights stay in :math:`[0, 1]` as (A2) requires), then return
    :math:`A D^{-1}`.

    Examples
    --------
    >>> from bayespmf.datasets._simulate_nmf import make_purification_data
    >>> Y, truth = make_purification_data(20000, 20, 10, random_state=0)
    >>> a, info = purification(Y, truth.init, n_iter=40, eta=0.3, alpha=0.2,
    ...                        pinv_method="moore-penrose")
    >>> def err(a):  # max column l1 error after l1 normalization (Theorem 1 remark)
    ...     return np.abs(a / a.sum(axis=0) - truth.components).sum(axis=0).max()
    >>> round(float(err(truth.init)), 3), round(float(err(a)), 3)
    (0.063, 0.023)
    """
    owner = "purification"
    y = _check_matrix(y, "y", owner)
    a = _check_matrix(init, "init", owner).copy()
    if a.shape[0] != y.shape[1]:
        raise DataValidationError(
            f"The 'init' of {owner} must have one row per feature of 'y' "
            f"({y.shape[1]}). Got shape {a.shape}."
        )
    n_iter = check_int(n_iter, "n_iter", owner=owner, low=1)
    eta = check_float(eta, "eta", owner=owner, low=0.0, high=1.0, low_open=True)
    alpha = check_float(alpha, "alpha", owner=owner, low=0.0)
    if r is not None:
        r = check_float(r, "r", owner=owner, low=0.0, low_open=True)
    if batch_size is not None:
        batch_size = check_int(
            batch_size, "batch_size", owner=owner, low=2, high=y.shape[0]
        )
    rng = _rng(random_state)
    scale = (
        balance_columns(y, a, alpha, method=pinv_method) if balance else np.ones(a.shape[1])
    )
    a = a * scale
    if r is None:
        pinv0 = min_inf_pinv(a, method=pinv_method)
        # mean diagonal of A^+ Ehat[(y - y')(x - x')^T] = Ehat[(A^+ y - A^+ y')(x - x')^T]
        spread = np.mean(np.diag(pair_moment(y @ pinv0.T, relu_decode(y, pinv0, alpha))))
        if spread <= 0:
            raise DataValidationError(
                f"Every decoding of the warm start is constant (alpha={alpha} too large "
                f"or 'init' unrelated to 'y'), so {owner} cannot set 'r'. Lower 'alpha' "
                "or pass 'r'."
            )
        r = 1.0 / spread
    change = []
    with progress_bar(n_iter, "Purification", enabled=bool(progressbar)) as bar:
        for _ in range(n_iter):
            batch = (
                y if batch_size is None else y[rng.choice(y.shape[0], batch_size, False)]
            )
            x = relu_decode(batch, min_inf_pinv(a, method=pinv_method), alpha)  # line 3
            new = (1.0 - eta) * a + r * eta * pair_moment(batch, x)  # line 4
            change.append(float(np.abs(new - a).sum(axis=0).max()))
            a = new
            bar.update()
    return a / scale, {"r": r, "scale": scale, "change": np.asarray(change)}
