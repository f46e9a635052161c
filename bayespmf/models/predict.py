"""Prediction from a latent-class posterior: a variable, class membership, imputation.

Every function averages over the draws of :func:`bayespmf.models.sample` (or any
``DataTree`` with its variables), and matches the rows it is given to the model's
variables by name (:func:`bayespmf.data.as_categorical`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import logsumexp

from bayespmf._arviz import hdi_of_draws
from bayespmf._validation import DataValidationError, check_int, check_random_seed
from bayespmf.data import CategoricalData, as_categorical
from bayespmf.models._draws import (
    BLOCK_VALUES,
    DRAW_BLOCK,
    class_posterior,
    draw_categorical,
    draw_slices,
    idata_data,
    log_joint_draws,
    posterior_params,
    posterior_variables,
)
from bayespmf.models.latent_class import OBSERVED_NAME
from bayespmf.pmf import offsets_of, one_hot_design

__all__ = ["impute", "posterior_class_proba", "posterior_predict_proba"]


def posterior_predict_proba(idata, data, target, *, model_data=None) -> np.ndarray:
    """Posterior-averaged PMF of ``target`` given each row's other observed entries.

    ``Pr(x_t | x_obs, D) = mean over draws of Pr(x_t | x_obs, lambda, A)``: the
    model-averaged counterpart of :meth:`LatentClassPMF.predict_proba`.

    Parameters
    ----------
    idata : xarray.DataTree
        From :func:`sample` (aligned or not: the average does not depend on labels).
    data : CategoricalData, pandas.DataFrame or array_like of int
        Rows to predict for. A CategoricalData or DataFrame is matched to the model's
        variables by name (any column order; a DataFrame may lack variables, which
        are then missing) and its codes to the posterior's categories by label (any
        alphabet order; a label the posterior lacks is an error); integer codes are
        the model's codes in its variable order (:func:`bayespmf.data.as_categorical`).
    target : int or str
        The variable to predict.
    model_data : CategoricalData, optional
        The model's data, for the variable names when ``idata`` records none.

    Returns
    -------
    ndarray, shape (S, I_t)
        Rows sum to one.
    """
    like = posterior_variables(idata, model_data)
    names, n_cat = list(like.names), [int(k) for k in like.n_categories]
    codes = as_categorical(data, like, name="data").codes
    if isinstance(target, str):
        if target not in names:
            raise DataValidationError(f"Unknown target {target!r}; variables: {names}.")
        target = names.index(target)
    target = check_int(target, "target", low=0, high=len(names) - 1)
    codes = codes.copy()
    codes[:, target] = -1
    fake = CategoricalData(np.zeros((1, len(names)), dtype=np.int64), n_cat, names)
    w, stacked = posterior_params(idata, fake)
    off = offsets_of(n_cat)
    design = one_hot_design(codes, n_cat)
    total = np.zeros((codes.shape[0], n_cat[target]))
    for start in range(0, w.shape[0], DRAW_BLOCK):
        sl = slice(start, start + DRAW_BLOCK)
        lj = log_joint_draws(design, w[sl], np.log(stacked[sl]))  # (d, S, F)
        post_cls = np.exp(lj - logsumexp(lj, axis=2, keepdims=True))
        a_t = stacked[sl, off[target] : off[target + 1], :]  # (d, I_t, F)
        total += np.einsum("dsf,dif->si", post_cls, a_t)
    p = total / w.shape[0]
    return p / p.sum(axis=1, keepdims=True)


def posterior_class_proba(
    idata, data=None, *, hdi_prob: float = 0.94, return_draws: bool = False
) -> xr.Dataset | xr.DataArray:
    r"""Per-row class membership from the posterior, with credible intervals.

    For every draw :math:`(\lambda, A)` and row :math:`s`, Bayes' rule gives

    .. math::

        \Pr(h_s = f \mid x_s, \lambda, A) = \frac{\lambda_f \prod_{n \in O_s}
        A_n(x_{sn}, f)}{\sum_g \lambda_g \prod_{n \in O_s} A_n(x_{sn}, g)},

    with :math:`O_s` the observed entries of the row; the draws give its posterior
    mean and highest-density interval (the class counterpart of pymc-extras'
    ``recover_marginals`` for this model, computed from the draws without
    recompiling the model). Class labels are those of ``idata``: pass draws aligned
    by :func:`sample` or :func:`align_labels`, or the average mixes classes.

    Parameters
    ----------
    idata : xarray.DataTree
        Posterior draws from :func:`sample` (aligned).
    data : CategoricalData, pandas.DataFrame or array_like of int, optional
        Rows to classify, matched to the model's variables by name (see
        :func:`posterior_predict_proba`); by default the model's rows recorded in
        ``idata``.
    hdi_prob : float, default 0.94
        Probability mass of the highest-density interval (ArviZ's default).
    return_draws : bool, default False
        Return the per-draw probabilities (chain, draw, row, class) instead of the
        summary.

    Returns
    -------
    xarray.Dataset or xarray.DataArray
        Dims ``(row, class)``: ``mean``, ``sd``, ``hdi_lower``, ``hdi_upper``
        (``.to_dataframe()`` gives one line per row and class); ``hdi_prob`` in
        ``attrs``. With ``return_draws``, the DataArray ``class_proba``.

    Examples
    --------
    >>> import arviz as az
    >>> w, a = np.array([0.5, 0.5]), np.array([[0.9, 0.1], [0.2, 0.8]])  # (class, cat)
    >>> idata = az.from_dict({"posterior": {
    ...     "weights": np.tile(w, (1, 4, 1)), "A_v": np.tile(a, (1, 4, 1, 1))}})
    >>> data = CategoricalData.from_codes([[0], [1]], [2], names=["v"])
    >>> member = posterior_class_proba(idata, data)
    >>> member["mean"].values.round(3)  # Bayes' rule: 0.9 / (0.9 + 0.2), ...
    array([[0.818, 0.182],
           [0.111, 0.889]])
    """
    data = idata_data(idata, data)
    w, stacked = posterior_params(idata, data)
    post = idata.posterior
    c, d, f = post.sizes["chain"], post.sizes["draw"], w.shape[1]
    design = one_hot_design(data.codes, data.n_categories)
    n_rows = data.n_samples
    # rows per block so that one block of all draws holds about BLOCK_VALUES numbers
    block = max(1, BLOCK_VALUES // (c * d * f))
    draws_out = np.empty((c * d, n_rows, f)) if return_draws else None
    mean, sd = np.empty((n_rows, f)), np.empty((n_rows, f))
    hdi = np.empty((n_rows, f, 2))
    for r0 in range(0, n_rows, block):
        rows = slice(r0, r0 + block)
        probs = np.concatenate(
            [
                class_posterior(design[rows], w[sl], stacked[sl])
                for sl in draw_slices(w.shape[0])
            ]
        )
        if return_draws:
            draws_out[:, rows] = probs
            continue
        mean[rows], sd[rows] = probs.mean(0), probs.std(0)
        hdi[rows] = hdi_of_draws(probs.reshape(c, d, -1, f), hdi_prob)
    class_coord = post["class"].values if "class" in post.coords else np.arange(f)
    coords = {"row": np.arange(n_rows), "class": class_coord}
    if return_draws:
        return xr.DataArray(
            draws_out.reshape(c, d, n_rows, f),
            dims=("chain", "draw", "row", "class"),
            coords={"chain": post["chain"].values, "draw": post["draw"].values} | coords,
            name="class_proba",
        )
    return xr.Dataset(
        {
            "mean": (("row", "class"), mean),
            "sd": (("row", "class"), sd),
            "hdi_lower": (("row", "class"), hdi[..., 0]),
            "hdi_upper": (("row", "class"), hdi[..., 1]),
        },
        coords=coords,
        attrs={"hdi_prob": hdi_prob},
    )


def impute(idata, data=None, *, random_seed=None) -> xr.DataArray:
    r"""Draws of the missing cells of each row given its observed entries.

    The posterior predictive of the missing entries conditional on the observed ones:
    for each posterior draw :math:`(\lambda, A)` and row :math:`s`, a class is drawn
    from :math:`\Pr(h_s = f \mid x_{s, O_s}, \lambda, A) \propto \lambda_f
    \prod_{n \in O_s} A_n(x_{sn}, f)` (Bayes' rule on the observed entries
    :math:`O_s`), then every missing :math:`x_{sn}` from :math:`A_n(:, h_s)`.
    Observed entries are copied. Over the draws, the frequency of category ``i`` in
    cell ``(s, n)`` estimates :func:`posterior_predict_proba` ``(idata, data, n)[s, i]``
    (for rows where ``n`` is missing). The result does not depend on the class labels,
    so aligned and raw draws give the same distribution.

    ``pm.sample_posterior_predictive`` on the model draws whole new rows instead (the
    class from :math:`\lambda`), for posterior predictive checks.

    Parameters
    ----------
    idata : xarray.DataTree
        Posterior draws from :func:`sample`.
    data : CategoricalData, pandas.DataFrame or array_like of int, optional
        Rows to complete (``-1`` = missing), matched to the model's variables by name
        (see :func:`posterior_predict_proba`); by default the model's rows recorded in
        ``idata``.
    random_seed : int or numpy.random.Generator, optional

    Returns
    -------
    xarray.DataArray
        Integer codes (the smallest signed type that holds them), dims ``(chain,
        draw, row, variable)``, named ``x``: one completed copy of the rows per draw.
        The codes and the ``variable`` order are the posterior's (the model's
        category labels, ``<name>_category`` coordinates of ``idata.posterior``),
        whatever the order or alphabets of ``data``.

    Examples
    --------
    >>> import arviz as az
    >>> w, a = np.array([0.5, 0.5]), np.array([[1.0, 0.0], [0.0, 1.0]])  # (class, cat)
    >>> idata = az.from_dict({"posterior": {
    ...     "weights": np.tile(w, (1, 4, 1)),
    ...     "A_u": np.tile(a, (1, 4, 1, 1)), "A_v": np.tile(a, (1, 4, 1, 1))}})
    >>> data = CategoricalData.from_codes([[0, -1], [-1, 1]], [2, 2], names=["u", "v"])
    >>> filled = impute(idata, data, random_seed=0)
    >>> filled.shape, filled.values[0, 0].tolist()  # u and v always agree here
    ((1, 4, 2, 2), [[0, 0], [1, 1]])
    """
    rng = np.random.default_rng(check_random_seed(random_seed, "impute"))
    data = idata_data(idata, data)
    w, stacked = posterior_params(idata, data)
    post = idata.posterior
    c, d = post.sizes["chain"], post.sizes["draw"]
    codes = np.asarray(data.codes)
    n_cat = np.asarray(data.n_categories)
    off = offsets_of(n_cat)
    design = one_hot_design(codes, n_cat)
    # the smallest signed integer type that holds the codes (one copy of the rows
    # per draw adds up: 4000 draws of UCI Car are 48 million cells)
    dtype = np.min_scalar_type(-int(n_cat.max()))
    out = np.broadcast_to(codes.astype(dtype), (c * d, *codes.shape)).copy()
    missing = [(n, np.flatnonzero(codes[:, n] < 0)) for n in range(codes.shape[1])]
    missing = [(n, rows) for n, rows in missing if rows.size]
    for sl in draw_slices(w.shape[0]):
        probs = class_posterior(design, w[sl], stacked[sl])  # (d, S, F)
        cls = draw_categorical(probs, rng)  # (d, S)
        for n, rows in missing:
            a_t = np.swapaxes(stacked[sl, off[n] : off[n + 1], :], 1, 2)  # (d, F, I_n)
            p = np.take_along_axis(a_t, cls[:, rows, None], axis=1)  # (d, m, I_n)
            out[sl, rows, n] = draw_categorical(p, rng)
    return xr.DataArray(
        out.reshape(c, d, *codes.shape),
        dims=("chain", "draw", "row", "variable"),
        coords={
            "chain": post["chain"].values,
            "draw": post["draw"].values,
            "row": np.arange(codes.shape[0]),
            "variable": list(data.names),
        },
        name=OBSERVED_NAME,
    )
