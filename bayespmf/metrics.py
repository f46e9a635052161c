"""Error metrics of the papers' experiments, judged up to the permutation of components.

Latent components (classes, vertices) are identifiable only up to relabelling, so the
factor errors first align the estimate to the truth with the Hungarian algorithm
(:func:`match_components`); the joint-PMF error and the vertex-set distance are
invariant to relabelling and need no alignment.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from bayespmf._validation import DataValidationError
from bayespmf.pmf import joint_pmf, stack_factors

__all__ = [
    "accuracy",
    "factor_mse",
    "joint_pmf_relative_error",
    "mae",
    "match_components",
    "min_matching_distance",
    "rmse",
]


# --------------------------------------------------------------------------------------
# checks


def _as_float_array(x, name: str, ndim: int | None = None) -> np.ndarray:
    try:
        arr = np.array(x, dtype=float)
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"'{name}' must be an array of real numbers; could not convert it: {err}"
        ) from err
    if ndim is not None and arr.ndim != ndim:
        raise DataValidationError(
            f"'{name}' must be a {ndim}-D array; got shape {arr.shape}."
        )
    if arr.size == 0:
        raise DataValidationError(f"'{name}' is empty (shape {arr.shape}).")
    if not np.all(np.isfinite(arr)):
        raise DataValidationError(f"'{name}' contains NaN or infinite values.")
    return arr


def _is_factor_list(x) -> bool:
    return isinstance(x, list | tuple) and len(x) > 0 and all(np.ndim(a) == 2 for a in x)


def _as_components(x, name: str) -> np.ndarray:
    """A (n_features, K) matrix, or a list of (I_n, K) factors stacked into one."""
    if _is_factor_list(x):
        ks = {np.shape(a)[1] for a in x}
        if len(ks) != 1:
            raise DataValidationError(
                f"The factors in '{name}' must all have the same number of columns "
                f"(components); got {sorted(ks)}."
            )
        x = stack_factors(x)
    return _as_float_array(x, name, ndim=2)


def _check_same_shape(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape != b.shape:
        raise DataValidationError(
            f"'{name_a}' and '{name_b}' must have the same shape; got {a.shape} and "
            f"{b.shape}."
        )


def _check_factor_lists(factors, factors_true) -> tuple[list, list]:
    for name, fs in (("factors", factors), ("factors_true", factors_true)):
        if not _is_factor_list(fs):
            raise DataValidationError(
                f"'{name}' must be a non-empty list of 2-D (n_categories, rank) arrays."
            )
    if len(factors) != len(factors_true):
        raise DataValidationError(
            f"'factors' and 'factors_true' must hold one matrix per variable each; got "
            f"{len(factors)} and {len(factors_true)}."
        )
    est = [_as_float_array(a, f"factors[{n}]", 2) for n, a in enumerate(factors)]
    true = [_as_float_array(a, f"factors_true[{n}]", 2) for n, a in enumerate(factors_true)]
    for n, (a, b) in enumerate(zip(est, true, strict=True)):
        _check_same_shape(a, b, f"factors[{n}]", f"factors_true[{n}]")
    return est, true


# --------------------------------------------------------------------------------------
# latent-class metrics


def match_components(est, true) -> np.ndarray:
    r"""Permutation of the columns of ``est`` that best matches ``true`` (Hungarian).

    Parameters
    ----------
    est, true : array_like of shape (n_features, K), or lists of (I_n, K) factors
        Estimated and true components, one per column. Lists of factors are stacked
        (:func:`bayespmf.pmf.stack_factors`) so that all variables share one
        permutation, as in the coupled factorization.

    Returns
    -------
    perm : ndarray of int64, shape (K,)
        ``est[:, perm]`` is aligned with ``true``: column ``perm[k]`` of ``est`` is
        matched to column ``k`` of ``true``.

    Raises
    ------
    DataValidationError
        Shapes differ, not 2-D, empty, or non-finite entries.

    Notes
    -----
    Solves :math:`\min_\pi \sum_k \|t_k - e_{\pi(k)}\|_2^2` with
    :func:`scipy.optimize.linear_sum_assignment`. Since
    :math:`\|t - e\|^2 = \|t\|^2 + \|e\|^2 - 2 t^T e` and the norms do not depend on
    :math:`\pi`, this is the same assignment as maximizing :math:`\sum_k t_k^T
    e_{\pi(k)}`, which is what ``perm2match.m`` of the CNMF code does (Jonker-Volgenant
    on ``-(B' * A)``).

    Examples
    --------
    >>> true = np.array([[0.9, 0.2], [0.1, 0.8]])
    >>> est = true[:, [1, 0]]
    >>> perm = match_components(est, true)
    >>> perm
    array([1, 0])
    >>> np.array_equal(est[:, perm], true)
    True
    """
    e = _as_components(est, "est")
    t = _as_components(true, "true")
    _check_same_shape(e, t, "est", "true")
    cost = cdist(t.T, e.T, "sqeuclidean")
    _, cols = linear_sum_assignment(cost)
    return cols.astype(np.int64)


def factor_mse(weights, factors, weights_true, factors_true) -> float:
    r"""Mean squared error of latent-class parameters after permutation matching.

    Parameters
    ----------
    weights : array_like, shape (F,)
        Estimated class prior :math:`\hat\lambda`.
    factors : list of array_like, each (I_n, F)
        Estimated factors :math:`\hat A_n`.
    weights_true, factors_true
        The true parameters, same shapes.

    Returns
    -------
    float
        :math:`\|\hat\lambda_\Pi - \lambda\|_2^2 + \frac1N \sum_{n=1}^N
        \frac1F \|\hat A_n \Pi - A_n\|_F^2`, where :math:`\Pi` is the column
        permutation found by :func:`match_components` on the stacked factors.

    Raises
    ------
    DataValidationError
        Mismatched shapes or numbers of variables (the message names the arguments).

    Notes
    -----
    Ibrahim & Fu (Sec. 5.2) report "the mean square error (MSE) of the factors (see
    [35] for definition)" without a formula. This is the MSE their code computes
    (``getMSE.m``, the "Mean Estimation Error" of Tables 1-5): permutation from the
    stacked factors only (the weights follow it), then ``norm(l - l_true)^2`` plus,
    for each variable, ``norm(A{n}(:) - A_true{n}(:))^2 / F / N``.

    Examples
    --------
    >>> w = np.array([0.3, 0.7])
    >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])]
    >>> factor_mse(w[::-1], [A[0][:, ::-1]], w, A)  # a relabelled copy: no error
    0.0
    >>> factor_mse([0.5, 0.5], [np.array([[1.0, 0.2], [0.0, 0.8]])], w, A)
    0.09
    """
    est, true = _check_factor_lists(factors, factors_true)
    w = _as_float_array(weights, "weights", 1)
    w_true = _as_float_array(weights_true, "weights_true", 1)
    _check_same_shape(w, w_true, "weights", "weights_true")
    if w.size != est[0].shape[1]:
        raise DataValidationError(
            f"'weights' has {w.size} entries but the factors have {est[0].shape[1]} "
            "columns (rank); they must agree."
        )
    perm = match_components(est, true)
    n_components = w.size
    factor_err = np.mean(
        [
            np.sum((a[:, perm] - b) ** 2) / n_components
            for a, b in zip(est, true, strict=True)
        ]
    )
    return float(np.sum((w[perm] - w_true) ** 2) + factor_err)


def _as_params(params, name: str):
    try:
        weights, factors = params
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"'{name}' must be a LatentClassParams or a (weights, factors) pair."
        ) from err
    w = _as_float_array(weights, f"{name}.weights", 1)
    if not _is_factor_list(factors):
        raise DataValidationError(
            f"'{name}.factors' must be a non-empty list of 2-D (n_categories, rank) arrays."
        )
    fs = [_as_float_array(a, f"{name}.factors[{n}]", 2) for n, a in enumerate(factors)]
    bad = [n for n, a in enumerate(fs) if a.shape[1] != w.size]
    if bad:
        raise DataValidationError(
            f"'{name}.factors' {bad} do not have {w.size} columns (the length of "
            f"'{name}.weights')."
        )
    return w, fs


def joint_pmf_relative_error(params_est, params_true, *, relative_to="truth") -> float:
    r"""Relative Frobenius error of the full joint PMF tensor.

    Parameters
    ----------
    params_est, params_true : LatentClassParams or (weights, factors)
        Estimated and true parameters over the same variables and alphabets (the
        ranks may differ).
    relative_to : {"truth", "estimate"}, default "truth"
        Whose norm divides the error: the true tensor's (the usual relative error), or
        the estimate's, as the code of Ibrahim & Fu computes the MRE of their Tables
        1-2 (``getMSE.m``: ``frob(T_true - T_est) / frob(T_est)``).

    Returns
    -------
    float
        :math:`\|\hat{\mathcal X} - \mathcal X\|_F / \|\mathcal X\|_F`, with
        :math:`\mathcal X` the true and :math:`\hat{\mathcal X}` the estimated joint
        PMF (:func:`bayespmf.pmf.joint_pmf`); with ``relative_to="estimate"`` the
        denominator is :math:`\|\hat{\mathcal X}\|_F`. No matching is needed: the
        tensor does not depend on the labels of the classes.

    Raises
    ------
    DataValidationError
        Different numbers of variables or alphabet sizes, malformed parameters, or a
        tensor larger than ``bayespmf.pmf.MAX_JOINT_ENTRIES`` (only for small N).

    Notes
    -----
    This is the per-trial quantity behind the "mean relative error (MRE) of the
    recovered joint PMFs" of Ibrahim & Fu (Sec. 5.2, Tables 1-2), which average it over
    trials. Their code (``getMSE.m``) divides by the norm of the *estimate*; by default
    we divide by the norm of the truth, which does not depend on the estimator being
    judged; ``relative_to="estimate"`` reproduces their numbers.

    Examples
    --------
    >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])] * 2
    >>> joint_pmf_relative_error(([0.5, 0.5], A), ([0.5, 0.5], A))
    0.0
    >>> round(joint_pmf_relative_error(([0.4, 0.6], A), ([0.5, 0.5], A)), 4)
    0.1774
    >>> round(joint_pmf_relative_error(([0.4, 0.6], A), ([0.5, 0.5], A),
    ...                                relative_to="estimate"), 4)
    0.1806
    """
    if relative_to not in ("truth", "estimate"):
        raise DataValidationError(
            "'relative_to' must be 'truth' or 'estimate' (whose norm divides the "
            f"error). Got {relative_to!r}."
        )
    w_e, f_e = _as_params(params_est, "params_est")
    w_t, f_t = _as_params(params_true, "params_true")
    shape_e = tuple(a.shape[0] for a in f_e)
    shape_t = tuple(a.shape[0] for a in f_t)
    if shape_e != shape_t:
        raise DataValidationError(
            "'params_est' and 'params_true' must describe the same variables; their "
            f"alphabet sizes are {list(shape_e)} and {list(shape_t)}."
        )
    p_est = joint_pmf(w_e, f_e)
    p_true = joint_pmf(w_t, f_t)
    scale = p_true if relative_to == "truth" else p_est
    return float(np.linalg.norm(p_est - p_true) / np.linalg.norm(scale))


# --------------------------------------------------------------------------------------
# simplex-nest metric


def min_matching_distance(V_est, V_true) -> float:
    r"""Minimum-matching (Hausdorff) distance between two sets of vertices.

    Parameters
    ----------
    V_est : array_like, shape (K_est, D)
        Estimated vertices, one per row.
    V_true : array_like, shape (K, D)
        True vertices, one per row. ``K_est`` may differ from ``K``.

    Returns
    -------
    float
        :math:`\max\{\max_k \min_j \|\hat\beta_j - \beta_k\|_2,\;
        \max_j \min_k \|\hat\beta_j - \beta_k\|_2\}`.

    Raises
    ------
    DataValidationError
        Not 2-D, empty, non-finite, or a different number of columns ``D``.

    Notes
    -----
    Yurochkin et al. (Sec. 5.1, Figs. 2-4) judge vertex estimates by the "Minimum
    Matching distance" of Nguyen (2015) without a formula; this is the definition of
    their code (``min_match`` in the VLAD repository's ``evaluate.py``): the larger of
    the two directed distances, each the worst distance from a point of one set to its
    nearest point in the other. It is a lower bound of the permutation-matched
    distance :math:`\min_\pi \max_k \|\hat\beta_{\pi(k)} - \beta_k\|` of their
    Theorems 1-2, and equals it when the nearest neighbours form a permutation.

    Examples
    --------
    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> min_matching_distance(V[[2, 0, 1]], V)
    0.0
    >>> min_matching_distance(V + [0.3, 0.4], V)
    0.5
    """
    e = _as_float_array(V_est, "V_est", 2)
    t = _as_float_array(V_true, "V_true", 2)
    if e.shape[1] != t.shape[1]:
        raise DataValidationError(
            f"'V_est' and 'V_true' must have the same number of columns (dimension D); "
            f"got shapes {e.shape} and {t.shape}."
        )
    d = cdist(e, t)
    return float(max(d.min(axis=0).max(), d.min(axis=1).max()))


# --------------------------------------------------------------------------------------
# prediction metrics


def _check_pair(y_true, y_pred, *, numeric: bool) -> tuple[np.ndarray, np.ndarray]:
    if numeric:
        a = _as_float_array(y_true, "y_true")
        b = _as_float_array(y_pred, "y_pred")
    else:
        a, b = np.asarray(y_true), np.asarray(y_pred)
        for name, arr in (("y_true", a), ("y_pred", b)):
            if arr.size == 0:
                raise DataValidationError(f"'{name}' is empty (shape {arr.shape}).")
    _check_same_shape(a, b, "y_true", "y_pred")
    return a, b


def accuracy(y_true: Sequence | np.ndarray, y_pred: Sequence | np.ndarray) -> float:
    """Fraction of predictions equal to the truth.

    Parameters
    ----------
    y_true, y_pred : array_like of the same shape
        Labels (codes or strings).

    Returns
    -------
    float in [0, 1]

    Raises
    ------
    DataValidationError
        Different shapes or empty input.

    Examples
    --------
    >>> accuracy([0, 1, 2, 1], [0, 1, 1, 1])
    0.75
    """
    a, b = _check_pair(y_true, y_pred, numeric=False)
    return float(np.mean(a == b))


def rmse(y_true, y_pred) -> float:
    r"""Root mean squared error, :math:`\sqrt{\frac1m \sum_i (y_i - \hat y_i)^2}`.

    Raises
    ------
    DataValidationError
        Different shapes, empty input, or non-finite values.

    Examples
    --------
    >>> rmse([1, 2, 3, 4], [1, 2, 3, 6])
    1.0
    """
    a, b = _check_pair(y_true, y_pred, numeric=True)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def mae(y_true, y_pred) -> float:
    r"""Mean absolute error, :math:`\frac1m \sum_i |y_i - \hat y_i|`.

    Raises
    ------
    DataValidationError
        As :func:`rmse`: different shapes, empty input, or non-finite values.

    Examples
    --------
    >>> mae([1, 2, 3, 4], [1, 2, 3, 6])
    0.5
    """
    a, b = _check_pair(y_true, y_pred, numeric=True)
    return float(np.mean(np.abs(a - b)))
