"""Averaging latent-class posteriors across ranks: stacking and pseudo-BMA weights.

A posterior at one rank predicts ``Pr(x_t | x_obs)`` by averaging over its draws
(:func:`bayespmf.models.posterior_predict_proba`). Posteriors at several ranks are
combined as a mixture of their predictive distributions,
``sum_k w_k Pr_k(x_t | x_obs)`` (:func:`averaged_predict_proba`), with weights from

* :func:`rank_weights`: ArviZ's ``az.compare`` on the PSIS-LOO of each posterior's
  per-row log-likelihood (``method="stacking"``, ``"pseudo-BMA"`` or
  ``"BB-pseudo-BMA"``; Yao et al. 2018, "Using stacking to average Bayesian predictive
  distributions"), or
* :func:`stacking_weights`: the stacking weights of any matrix of pointwise log
  predictive densities, e.g. of the predicted variable on held-out rows (the weights
  that maximize the held-out log score of the mixture).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bayespmf._validation import DataValidationError, check_int

__all__ = [
    "RANK_WEIGHT_METHODS",
    "averaged_predict_proba",
    "rank_weights",
    "stacking_weights",
]

#: The ``method`` options of :func:`rank_weights` (those of ``az.compare``).
RANK_WEIGHT_METHODS = ("stacking", "pseudo-BMA", "BB-pseudo-BMA")


def stacking_weights(
    log_density, *, tol: float = 1e-10, max_iter: int = 100_000
) -> np.ndarray:
    r"""Stacking weights: the mixture weights that maximize the total log score.

    .. math::

        \hat w = \arg\max_{w \in \Delta_K} \sum_{i=1}^n
        \log \sum_{k=1}^K w_k \exp(\ell_{ik}),

    with :math:`\ell_{ik}` the log predictive density of observation ``i`` under
    model ``k`` (pointwise LOO values, as ``az.compare(method="stacking")`` uses,
    or held-out log predictive densities). The objective is concave; it is maximized
    by the fixed-point (minorize-maximize) update of mixture weights,
    :math:`w_k \leftarrow w_k \frac1n \sum_i p_{ik} / \sum_j w_j p_{ij}`, from
    uniform weights, which increases it at every step. Each row is shifted by its
    maximum first (the weights do not change), so very negative log densities do not
    underflow.

    Parameters
    ----------
    log_density : array_like, shape (n, K)
        Pointwise log predictive densities; ``-inf`` is allowed, but every row needs
        one finite entry.
    tol : float, default 1e-10
        Stop when no weight changes by more than this.
    max_iter : int, default 100000

    Returns
    -------
    ndarray, shape (K,)
        Non-negative weights summing to one.

    Examples
    --------
    Model 0 predicts the first two observations better, model 1 the third:

    >>> lpd = np.log([[0.6, 0.2], [0.5, 0.1], [0.1, 0.7]])
    >>> w = stacking_weights(lpd)
    >>> w.round(3), float(w.sum())
    (array([0.658, 0.342]), 1.0)
    """
    lpd = np.asarray(log_density, dtype=float)
    if lpd.ndim != 2 or lpd.shape[0] < 1 or lpd.shape[1] < 1:
        raise DataValidationError(
            f"'log_density' must be a 2-D array (observations, models); got shape "
            f"{lpd.shape}."
        )
    if np.isnan(lpd).any() or np.isposinf(lpd).any():
        raise DataValidationError("'log_density' must not contain NaN or +inf.")
    top = lpd.max(axis=1, keepdims=True)
    if not np.isfinite(top).all():
        raise DataValidationError(
            "Every row of 'log_density' needs a finite entry (an observation no model "
            "can predict has no stacking weight)."
        )
    max_iter = check_int(max_iter, "max_iter", low=1)
    dens = np.exp(lpd - top)  # each row's best model has density 1
    k = dens.shape[1]
    w = np.full(k, 1.0 / k)
    tiny = np.finfo(float).tiny
    for _ in range(max_iter):
        # a row's mixture density is >= its best model's weight (> 0), guarded anyway
        mix = np.maximum(dens @ w, tiny)
        new = w * (dens / mix[:, None]).mean(axis=0)
        new /= new.sum()
        done = np.max(np.abs(new - w)) <= tol
        w = new
        if done:
            break
    return w


def rank_weights(idatas: Mapping, *, method: str = "stacking", seed=0) -> pd.Series:
    """Weights of posteriors (e.g. one per rank) from their PSIS-LOO.

    Each posterior needs a ``log_likelihood`` group over the *same* rows
    (:func:`bayespmf.models.sample` adds it by default), so that the pointwise
    PSIS-LOO values (``az.loo(..., pointwise=True)``) line up. ``"stacking"`` and
    ``"pseudo-BMA"`` are ArviZ's ``az.compare`` weights. ``"BB-pseudo-BMA"`` is
    computed here from the same pointwise values, as in Yao et al. (2018), Sec. 3.2:
    1000 Bayesian-bootstrap replications (Dirichlet(1, ..., 1) weights over the rows)
    of every posterior's elpd, each turned into pseudo-BMA weights, then averaged;
    the replications come from ``seed`` (ArviZ 1 fixes its own seed there).

    Parameters
    ----------
    idatas : mapping of label to xarray.DataTree
        E.g. ``{rank: idata}``; labels may be ints.
    method : {"stacking", "pseudo-BMA", "BB-pseudo-BMA"}, default "stacking"
        As in ``az.compare``.
    seed : int or numpy.random.Generator, default 0
        For the Bayesian bootstrap of ``"BB-pseudo-BMA"`` (the other methods are
        deterministic).

    Returns
    -------
    pandas.Series
        The weights, indexed by the labels in the order of ``idatas``; they sum to
        one. ``.attrs["compare"]`` holds ``az.compare``'s table (labels as strings;
        its ``weight`` column is the weights returned).

    Examples
    --------
    >>> import arviz as az
    >>> rng = np.random.default_rng(0)
    >>> def fit(loglik):  # 2 chains x 500 draws, 20 rows
    ...     ll = rng.normal(loglik, 0.01, (2, 500, 20))
    ...     return az.from_dict({"posterior": {"mu": rng.normal(size=(2, 500))},
    ...                          "log_likelihood": {"x": ll}})
    >>> fits = {2: fit(-2.0), 3: fit(-1.0)}  # n_components 3 predicts every row better
    >>> w = rank_weights(fits)
    >>> list(w.index), float(w.sum()), bool(w[3] > 0.99)
    ([2, 3], 1.0, True)
    """
    import arviz as az

    if not isinstance(idatas, Mapping) or len(idatas) < 1:
        raise DataValidationError(
            "'idatas' must be a non-empty mapping of labels to posteriors (DataTree)."
        )
    if method not in RANK_WEIGHT_METHODS:
        raise DataValidationError(
            f"'method' must be one of {list(RANK_WEIGHT_METHODS)}; got {method!r}."
        )
    labels = list(idatas)
    if len(labels) == 1:
        out = pd.Series([1.0], index=labels, name="weight")
        out.attrs["compare"] = None
        return out
    by_str = {str(k): k for k in labels}
    if len(by_str) != len(labels):
        raise DataValidationError("The labels of 'idatas' must differ as strings.")
    loo = {str(k): az.loo(v, pointwise=True) for k, v in idatas.items()}
    # round_to="none": ArviZ 1 rounds the table (weights to 2 digits) by default
    table = az.compare(
        loo,
        method="pseudo-BMA" if method == "BB-pseudo-BMA" else method,
        round_to="none",
    )
    if method == "BB-pseudo-BMA":
        elpd_i = np.column_stack([np.ravel(loo[str(k)].elpd_i) for k in labels])
        w = _bb_pseudo_bma(elpd_i, seed)
        table["weight"] = pd.Series(w, index=[str(k) for k in labels])
    else:
        w = np.array([float(table.loc[str(k), "weight"]) for k in labels])
    w = np.clip(w, 0, None)
    out = pd.Series(w / w.sum(), index=labels, name="weight")
    out.attrs["compare"] = table
    return out


#: Bayesian-bootstrap replications of ``"BB-pseudo-BMA"`` (ArviZ's number).
_BB_REPLICATIONS = 1000


def _bb_pseudo_bma(elpd_i, seed) -> np.ndarray:
    """BB-pseudo-BMA weights from pointwise elpd (rows x models), Yao et al. Sec. 3.2."""
    rng = np.random.default_rng(seed)
    n = elpd_i.shape[0]
    alpha = rng.dirichlet(np.ones(n), size=_BB_REPLICATIONS)  # (B, n)
    z = n * (alpha @ elpd_i)  # (B, K): bootstrapped elpd of every model
    z -= z.max(axis=1, keepdims=True)  # log space: softmax without overflow
    w = np.exp(z)
    w /= w.sum(axis=1, keepdims=True)
    return w.mean(axis=0)


def averaged_predict_proba(idatas, weights, data, target, *, model_data=None) -> np.ndarray:
    r"""Mixture of the posterior predictive PMFs of ``target`` of several posteriors.

    .. math::

        \Pr(x_t \mid x_{\mathrm{obs}}) = \sum_k w_k \frac{1}{D_k} \sum_{d=1}^{D_k}
        \Pr(x_t \mid x_{\mathrm{obs}}, \lambda^{(k,d)}, A^{(k,d)}),

    every posterior's PMF averaged over its draws
    (:func:`bayespmf.models.posterior_predict_proba`), then over the posteriors with
    weights ``w`` (e.g. :func:`rank_weights` or :func:`stacking_weights`). Class
    labels do not matter (each draw's conditional PMF is label-invariant).

    Parameters
    ----------
    idatas : mapping of label to xarray.DataTree, or sequence of them
        Posteriors of models over the same variables (e.g. one per rank).
    weights : mapping of label to float, pandas.Series or sequence of float
        Non-negative; normalized to sum to one. A posterior with weight zero is
        skipped.
    data : CategoricalData or array_like of int
        Rows to predict for.
    target : int or str
        The variable to predict.
    model_data : CategoricalData, optional
        The models' data (for the variable names), as in
        :func:`~bayespmf.models.posterior_predict_proba`.

    Returns
    -------
    ndarray, shape (S, I_t)
        Rows sum to one.

    Examples
    --------
    >>> import arviz as az
    >>> from bayespmf import CategoricalData
    >>> dims = {"weights": ["class"], "A_u": ["class", "u_category"],
    ...         "A_v": ["class", "v_category"]}
    >>> def point(a):  # one class, one draw: Pr(v | u) = a[1]
    ...     return az.from_dict({"posterior": {
    ...         "weights": np.ones((1, 1, 1)),
    ...         "A_u": np.array(a[0]).reshape(1, 1, 1, 2),
    ...         "A_v": np.array(a[1]).reshape(1, 1, 1, 2)}}, dims=dims)
    >>> fits = {1: point([[0.5, 0.5], [0.9, 0.1]]), 2: point([[0.5, 0.5], [0.3, 0.7]])}
    >>> data = CategoricalData.from_codes([[0, -1]], [2, 2], names=["u", "v"])
    >>> averaged_predict_proba(fits, {1: 0.5, 2: 0.5}, data, "v", model_data=data)
    array([[0.6, 0.4]])
    """
    from bayespmf.models.predict import posterior_predict_proba

    if isinstance(idatas, Mapping):
        labels = list(idatas)
        fits = [idatas[k] for k in labels]
    elif isinstance(idatas, Sequence) and not isinstance(idatas, str):
        labels = list(range(len(idatas)))
        fits = list(idatas)
    else:
        raise DataValidationError(
            "'idatas' must be a mapping of labels to InferenceData or a sequence of "
            f"them; got {type(idatas).__name__}."
        )
    if not fits:
        raise DataValidationError("'idatas' must hold at least one posterior.")
    if isinstance(weights, Mapping | pd.Series):
        missing = [k for k in labels if k not in weights]
        if missing:
            raise DataValidationError(f"'weights' has no weight for {missing}.")
        w = np.array([float(weights[k]) for k in labels])
    else:
        w = np.asarray(weights, dtype=float).ravel()
        if w.size != len(fits):
            raise DataValidationError(
                f"'weights' has {w.size} entries for {len(fits)} posteriors."
            )
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise DataValidationError(
            f"'weights' must be non-negative, finite and not all zero; got {w.tolist()}."
        )
    w = w / w.sum()
    total = None
    for wk, idata in zip(w, fits, strict=True):
        if wk == 0:
            continue
        p = wk * posterior_predict_proba(idata, data, target, model_data=model_data)
        total = p if total is None else total + p
    return total / total.sum(axis=1, keepdims=True)
