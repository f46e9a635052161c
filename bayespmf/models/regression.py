r"""Latent-class regression as a PyMC model: covariates on class membership.

:func:`latent_class_regression_model` is the Bayesian counterpart of
:class:`bayespmf.estimators.LatentClassRegression`:

.. math::

    \Pr(H_s = f \mid z_s) = \operatorname{softmax}(z_s^\top \beta)_f, \qquad
    \beta_{\cdot, 0} = 0, \qquad
    x_{sn} \mid H_s = f \sim \operatorname{Categorical}(A_n(:, f)),

the class summed out of the likelihood and missing entries (``-1``) skipped.
As a family of :func:`bayespmf.models.sample` (:data:`REGRESSION`), its chains start at
the maximum-likelihood estimate (:func:`bayespmf.models.initvals`) and its draws are
relabeled against it (:func:`bayespmf.models.align_labels`).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr

from bayespmf._arviz import hdi_of_draws
from bayespmf._validation import (
    DataValidationError,
    as_codes,
    check_float,
    check_int,
)
from bayespmf.data import CategoricalData
from bayespmf.estimators.regression import INTERCEPT, LatentClassRegression
from bayespmf.fit.covariates import check_covariates, covariate_values
from bayespmf.models._alignment import apply_permutations, hungarian_permutations
from bayespmf.models._families import Family
from bayespmf.models._names import DATA_NAME, OBSERVED_NAME, category_dim, factor_var_name
from bayespmf.models._rows_dist import (  # re-exported: part of this module's API
    LatentClassRegressionRows,
    factor_priors,
    rows_coords,
)
from bayespmf.models._start import jitter_simplex
from bayespmf.pmf import one_hot_design

__all__ = [
    "COEF_FULL_NAME",
    "COEF_NAME",
    "COVARIATES_NAME",
    "LatentClassRegressionRows",
    "coefficient_variables",
    "latent_class_regression_model",
    "regression_class_proba",
]

#: Name of the ``pm.Data`` container holding the design matrix (dims ``("row",
#: "covariate")``, the intercept column first when one is fitted).
COVARIATES_NAME = "covariates"

#: Name of the free coefficients, dims ``("covariate", "free_class")`` (classes 1..F-1).
COEF_NAME = "coef"

#: Name of the deterministic full coefficient matrix, dims ``("covariate", "class")``,
#: column 0 (the reference class) identically 0.
COEF_FULL_NAME = "coef_full"

#: Dimension of the non-reference classes (coordinates 1, ..., F-1).
FREE_CLASS_DIM = "free_class"

_OWNER = "latent_class_regression_model"


# ------------------------------------------------------------------------ model


def _covariate_table(covariates, names, fit_intercept: bool, n_rows: int):
    """The design (S, D') and its column labels, from an array or a DataFrame."""
    if isinstance(covariates, pd.Series):
        covariates = covariates.to_frame()
    if isinstance(covariates, pd.DataFrame):
        if names is None:
            names = [str(c) for c in covariates.columns]
        covariates = covariate_values(covariates, _OWNER)
    if covariates is None:
        raise ValueError(
            f"The 'covariates' parameter of {_OWNER} is required: pass an (n_rows, "
            "n_covariates) array or DataFrame (an (n_rows, 0) array for a model "
            "without covariates)."
        )
    design = check_covariates(covariates, n_rows, fit_intercept=fit_intercept, owner=_OWNER)
    n_cov = design.shape[1] - int(fit_intercept)
    if names is None:
        names = [f"z{d}" for d in range(n_cov)]
    names = [str(v) for v in names]
    if len(names) != n_cov or len(set(names)) != n_cov or INTERCEPT in names:
        raise ValueError(
            f"The 'names' parameter of {_OWNER} must hold {n_cov} distinct covariate "
            f"names (one per column of 'covariates', not {INTERCEPT!r}); got {names!r}."
        )
    return design, [INTERCEPT] * int(fit_intercept) + names


def coefficient_variables(n_covariates: int, coef_prior_sd: float):
    """The coefficients ``coef`` ~ N(0, sd^2) and ``coef_full`` (class 0's column 0).

    Called inside a model with the coordinates ``covariate``, ``free_class`` and
    ``class``; returns ``coef_full`` (dims ``(covariate, class)``).
    """
    coef = pm.Normal(
        COEF_NAME, mu=0.0, sigma=coef_prior_sd, dims=("covariate", FREE_CLASS_DIM)
    )
    return pm.Deterministic(
        COEF_FULL_NAME,
        pt.concatenate([pt.zeros((n_covariates, 1)), coef], axis=1),
        dims=("covariate", "class"),
    )


def latent_class_regression_model(
    data,
    covariates,
    n_components: int,
    *,
    fit_intercept: bool = True,
    coef_prior_sd: float = 2.5,
    factor_prior: float = 1.0,
    names=None,
    n_categories=None,
) -> pm.Model:
    r"""PyMC model of a latent-class regression, the class marginalized out.

    .. math::

        \beta_{d f} \sim N(0, \sigma_\beta^2)\ (f \ge 1), \quad \beta_{d 0} = 0, \quad
        A_n(:, f) \sim \mathrm{Dir}(\alpha_A 1_{I_n}),

        \log p(x_s \mid z_s) = \operatorname{logsumexp}_f \Big(
            \log\operatorname{softmax}(z_s^\top\beta)_f
            + \sum_{n:\,x_{sn}\ \mathrm{observed}} \log A_n(x_{sn}, f)\Big)

    (the model of :class:`bayespmf.estimators.LatentClassRegression`; Bandeen-Roche et
    al. 1997). The rows and the design matrix are ``pm.Data`` containers and the
    likelihood an observed :class:`LatentClassRegressionRows` variable, so
    ``pm.sample_prior_predictive``, ``pm.sample_posterior_predictive`` (new rows at
    the model's covariates) and ``pm.compute_log_likelihood`` (one value per row)
    work. Rows with every entry missing carry no information about the items given
    the covariates and are dropped, with their covariates.

    Parameters
    ----------
    data : CategoricalData or array_like of int (S, N)
        ``-1`` marks missing entries.
    covariates : array_like of float (S,) or (S, D0), or pandas.DataFrame
        Covariates of every row, in the order of ``data``; finite, not collinear.
        ``(S, 0)`` gives the covariate-free model (with the intercept).
    n_components : int
        Number of classes F.
    fit_intercept : bool, default True
        Prepend a column of ones (coordinate ``"(intercept)"``).
    coef_prior_sd : float, default 2.5
        Standard deviation of the normal prior of every free coefficient (a weakly
        informative scale on the log-odds, as Gelman et al. 2008 suggest for
        logistic regression; covariates on unit scale are assumed).
    factor_prior : float, default 1.0
        Symmetric Dirichlet concentration of every :math:`A_n(:, f)`.
    names : sequence of str, optional
        Covariate names (default: the columns of a DataFrame, else ``z0, z1, ...``).
    n_categories : sequence of int, optional
        Alphabet sizes when ``data`` is an array.

    Returns
    -------
    pymc.Model
        Free variables ``coef`` (dims ``(covariate, free_class)``) and ``A_<name>``
        for each item (dims ``(class, <name>_category)``, as in
        :func:`bayespmf.models.latent_class_model`); the deterministic ``coef_full``
        (dims ``(covariate, class)``, column 0 zero); the data ``rows`` (dims
        ``(row, variable)``) and ``covariates`` (dims ``(row, covariate)``, the
        design with its intercept column); the observed rows ``x``.

    Raises
    ------
    ValueError
        Bad ``covariates`` (wrong row count, non-numeric, non-finite, collinear) or
        ``names``; :class:`DataValidationError` (a ``ValueError``) for malformed
        data, ``rank < 1`` or non-positive prior scales.

    Examples
    --------
    >>> data = CategoricalData.from_codes(
    ...     [[0, 1], [1, -1], [1, 0], [0, 0]], 2, names=["a", "b"])
    >>> model = latent_class_regression_model(data, [[0.5], [-1.0], [2.0], [0.1]], 2)
    >>> sorted(model.named_vars)
    ['A_a', 'A_b', 'coef', 'coef_full', 'covariates', 'rows', 'x']
    >>> model.named_vars_to_dims["coef_full"]
    ('covariate', 'class')
    >>> list(model.coords["covariate"])
    ['(intercept)', 'z0']
    >>> prior = pm.sample_prior_predictive(draws=3, model=model, random_seed=0)
    >>> prior.prior_predictive["x"].shape
    (1, 3, 4, 2)
    """
    n_components = check_int(n_components, "n_components", owner=_OWNER, low=1)
    coef_prior_sd = check_float(coef_prior_sd, "coef_prior_sd", low=0.0, low_open=True)
    factor_prior = check_float(factor_prior, "factor_prior", low=0.0, low_open=True)
    if isinstance(data, CategoricalData):
        if n_categories is not None:
            as_codes(data, n_categories)  # raises on disagreement
    else:
        codes, n_cat = as_codes(data, n_categories, name="data")
        data = CategoricalData(codes, n_cat)
    as_codes(data, name="data")  # an item never observed cannot be learned
    design, cov_names = _covariate_table(covariates, names, fit_intercept, data.n_samples)
    keep = (np.asarray(data.codes) >= 0).any(axis=1)
    if not keep.all():
        data, design = data[keep], design[keep]
    coords = {
        "class": np.arange(n_components),
        FREE_CLASS_DIM: np.arange(1, n_components),
        "covariate": cov_names,
        **rows_coords(data),
    }
    with pm.Model(coords=coords) as model:
        rows = pm.Data(DATA_NAME, np.asarray(data.codes), dims=("row", "variable"))
        z = pm.Data(COVARIATES_NAME, design, dims=("row", "covariate"))
        coef_full = coefficient_variables(len(cov_names), coef_prior_sd)
        factors = factor_priors(data, n_components, factor_prior)
        LatentClassRegressionRows(
            OBSERVED_NAME,
            pt.dot(z, coef_full),
            factors,
            observed=rows,
            dims=("row", "variable"),
        )
    return model


def _regression_model_parts(model):
    """Codes, design, item names, rank of a model from latent_class_regression_model."""
    needed = {DATA_NAME, COVARIATES_NAME, COEF_NAME, COEF_FULL_NAME, OBSERVED_NAME}
    if not isinstance(model, pm.Model) or not needed <= set(model.named_vars):
        raise DataValidationError(
            "'model' must be built by bayespmf.models.latent_class_regression_model (a "
            f"pm.Model with variables {sorted(needed)}); got {type(model).__name__}."
        )
    codes = np.asarray(model[DATA_NAME].get_value(), dtype=np.int64)
    design = np.asarray(model[COVARIATES_NAME].get_value(), dtype=np.float64)
    names = [str(v) for v in model.coords["variable"]]
    n_cat = [len(model.coords[category_dim(n)]) for n in names]
    return codes, design, names, n_cat, len(model.coords["class"])


# ----------------------------------------------------------- starts and alignment


def _point_of(init, n_dim: int, n_cat, n_components: int):
    """``(coef (D', F), factors [(I_n, F)])`` of a fitted estimator or a pair/dict."""
    if hasattr(init, "coef_") and hasattr(init, "factors_"):
        coef, factors = init.coef_, init.factors_
    elif isinstance(init, dict) and {"coef", "factors"} <= set(init):
        coef, factors = init["coef"], init["factors"]
    elif isinstance(init, tuple) and len(init) == 2:
        coef, factors = init
    else:
        raise DataValidationError(
            "'init' must be a fitted LatentClassRegression, a (coef, factors) pair or "
            f"a dict with 'coef' and 'factors'; got {type(init).__name__}."
        )
    coef = np.array(coef, dtype=np.float64)
    factors = [np.array(a, dtype=np.float64) for a in factors]
    want = [(k, n_components) for k in n_cat]
    if coef.shape != (n_dim, n_components) or [a.shape for a in factors] != want:
        raise DataValidationError(
            f"'init' must have coef of shape {(n_dim, n_components)} and factors of shapes "
            f"{want} (the model's design columns, categories and rank); got "
            f"{coef.shape} and {[a.shape for a in factors]}. Fit the estimator on the "
            "model's data and covariates with the same rank and intercept."
        )
    return coef - coef[:, :1], factors


def _initvals(model, init, chains, jitter, rng) -> list[dict]:
    """The regression's start builder (:func:`bayespmf.models.initvals`).

    ``coef`` starts at ``init``'s ``coef[:, 1:]`` (re-referenced to class 0 first) plus
    ``N(0, jitter^2)`` noise; every factor column is clipped to at least ``INIT_CLIP``,
    renormalized, jittered on the log scale (``a * exp(jitter * e)``) and renormalized.
    ``init``: a LatentClassRegression, ``(coef, factors)`` or a dict, ``coef`` (D', F)
    on the model's design columns, ``factors`` [(I_n, F)].
    """
    _, design, names, n_cat, n_components = _regression_model_parts(model)
    coef, factors = _point_of(init, design.shape[1], n_cat, n_components)
    out = []
    for _ in range(chains):
        start = {COEF_NAME: coef[:, 1:] + jitter * rng.standard_normal(coef[:, 1:].shape)}
        for name, a in zip(names, factors, strict=True):  # (F, I_n), as the model's
            start[factor_var_name(name)] = jitter_simplex(a.T, 1, jitter, rng)
        out.append(start)
    return out


def _align(idata, reference, data, n_refine):
    """The regression's label alignment (:func:`bayespmf.models.align_labels`).

    The permutation of each draw matches its stacked factors (every item's column of
    each class) to the reference's; every variable with a ``class`` dimension (the
    factors ``A_<name>`` and ``coef_full``) is permuted, and the coefficients are
    re-referenced to the class now at position 0.
    """
    post = idata.posterior
    names = list(data.names) if data is not None else _item_names(post)
    n_components = post.sizes["class"]
    n_cat = [post.sizes[category_dim(n)] for n in names]
    _, ref_factors = _point_of(reference, post.sizes["covariate"], n_cat, n_components)
    ref = np.concatenate([np.asarray(a, dtype=np.float64) for a in ref_factors]).T
    c, d = post.sizes["chain"], post.sizes["draw"]
    feats = np.concatenate(
        [
            post[factor_var_name(n)].transpose("chain", "draw", "class", ...).values
            for n in names
        ],
        axis=-1,
    ).reshape(c * d, n_components, -1)
    perms = hungarian_permutations(feats, ref, n_refine=n_refine)
    new = apply_permutations(
        idata, perms.reshape(c, d, n_components), "class", "class_permutation"
    )
    aligned = new["posterior"].to_dataset()
    full = aligned[COEF_FULL_NAME]
    full = full - full.isel({"class": 0})
    aligned[COEF_FULL_NAME] = full.transpose(*post[COEF_FULL_NAME].dims)
    free = full.isel({"class": slice(1, None)}).rename({"class": FREE_CLASS_DIM})
    free = free.assign_coords({FREE_CLASS_DIM: post[FREE_CLASS_DIM].values})
    aligned[COEF_NAME] = free.transpose(*post[COEF_NAME].dims)
    new["posterior"] = aligned
    return new


def _item_names(post) -> list[str]:
    names = post.attrs.get("bayespmf_variables")
    if names is not None:
        return json.loads(names) if isinstance(names, str) else list(names)
    return [
        str(v)[2:]
        for v in post.data_vars
        if str(v).startswith("A_") and "class" in post[v].dims
    ]


# --------------------------------------------------------------------- sampling


def _estimate(model, random_seed):
    """The maximum-likelihood estimate on the model's rows and design."""
    codes, design, names, n_cat, n_components = _regression_model_parts(model)
    data = CategoricalData(codes, n_cat, names)
    est = LatentClassRegression(n_components, fit_intercept=False, random_state=random_seed)
    return _point(model, est.fit(data, covariates=design), random_seed)


def _point(model, init, random_seed):
    if init is None:
        return _estimate(model, random_seed)
    _, design, _, n_cat, n_components = _regression_model_parts(model)
    return _point_of(init, design.shape[1], n_cat, n_components)


def _rewrite(model, point, initvals, method, nuts_sampler, simplex_transform):
    from pymc.model.transform.optimization import freeze_dims_and_data

    return freeze_dims_and_data(model), initvals, None


def _finish(idata, model, point, starts, align, random_seed):
    names = [str(v) for v in model.coords["variable"]]
    idata.posterior.attrs["bayespmf_variables"] = json.dumps(names)
    idata.posterior.attrs["point_coef"] = json.dumps(point[0].tolist())
    return _align(idata, point, None, 2) if align else idata


#: The latent-class regression as a family of :func:`bayespmf.models.sample`.
REGRESSION = Family(
    name="regression",
    detect=lambda model: COEF_FULL_NAME in model.named_vars,
    methods=("nuts", "gibbs"),
    method_error="The latent-class regression is sampled by NUTS or Gibbs only",
    estimate=_estimate,
    point=_point,
    initvals=_initvals,
    rewrite=_rewrite,
    finish=_finish,
    drawn=lambda posterior: COEF_FULL_NAME in posterior,
    align=_align,
)


# ------------------------------------------------------------------ class membership


def regression_class_proba(
    idata, data, covariates, *, fit_intercept: bool = True, hdi_prob: float = 0.94
) -> xr.Dataset:
    r"""Per-row class membership from a latent-class regression posterior, with HDIs.

    For every draw :math:`(\beta, A)` and row :math:`s`, Bayes' rule with the row's own
    covariate-driven prior,

    .. math::

        \Pr(h_s = f \mid x_s, z_s) \propto \operatorname{softmax}(z_s^\top\beta)_f
        \prod_{n \in O_s} A_n(x_{sn}, f),

    then the posterior mean, sd and highest-density interval over the draws (the
    covariate counterpart of :func:`bayespmf.models.posterior_class_proba`). Class
    labels are those of ``idata``: pass draws aligned by :func:`bayespmf.models.sample`.

    Parameters
    ----------
    idata : xarray.DataTree
        Posterior of :func:`latent_class_regression_model` (``coef_full`` and the
        ``A_<name>`` factors).
    data : CategoricalData, pandas.DataFrame or array_like of int (S, N)
        The rows to classify (``-1``/NaN missing), variables in the model's order.
    covariates : array_like or pandas.DataFrame (S, D)
        Their covariates, columns as in the model (without the intercept column when
        ``fit_intercept``).
    fit_intercept : bool, default True
        As in the model.
    hdi_prob : float, default 0.94

    Returns
    -------
    xarray.Dataset
        Dims ``(row, class)``: ``mean``, ``sd``, ``hdi_lower``, ``hdi_upper``.

    Examples
    --------
    >>> import arviz as az
    >>> coef = np.array([[0.0, 0.0], [0.0, 2.0]])  # (covariate, class): z favours 1
    >>> a = np.array([[0.5, 0.5], [0.5, 0.5]])  # (class, category): x says nothing
    >>> idata = az.from_dict({"posterior": {"coef_full": np.tile(coef, (1, 4, 1, 1)),
    ...                                     "A_v": np.tile(a, (1, 4, 1, 1))}})
    >>> data = CategoricalData.from_codes([[0], [1]], [2], names=["v"])
    >>> p = regression_class_proba(idata, data, [[0.0], [1.0]])
    >>> p["mean"].values.round(3)  # the prior alone: softmax(0, 0), softmax(0, 2)
    array([[0.5  , 0.5  ],
           [0.119, 0.881]])
    """
    from scipy.special import log_softmax, logsumexp

    if isinstance(data, pd.DataFrame):
        data = CategoricalData.from_pandas(data)
    if not isinstance(data, CategoricalData):
        data = CategoricalData(*as_codes(data, name="data"))
    post = idata.posterior
    if COEF_FULL_NAME not in post:
        raise ValueError(
            "The 'idata' parameter of regression_class_proba must hold the posterior "
            f"of latent_class_regression_model (no {COEF_FULL_NAME!r}); for a model "
            "without covariates use bayespmf.models.posterior_class_proba."
        )
    names = data.names if data.names is not None else _item_names(post)
    coef = post[COEF_FULL_NAME].values  # (chain, draw, D', F)
    c, d, n_dim, f = coef.shape
    z = check_covariates(
        covariates,
        data.n_samples,
        fit_intercept=fit_intercept,
        owner="regression_class_proba",
        check_n_components=False,
    )
    if z.shape[1] != n_dim:
        raise ValueError(
            f"The 'covariates' parameter of regression_class_proba gives {z.shape[1]} "
            f"design columns but the posterior has {n_dim}: pass the model's covariates "
            "(and its fit_intercept)."
        )
    with np.errstate(divide="ignore"):  # an exact zero is a possible (point) value
        log_a = np.concatenate(
            [np.log(np.swapaxes(post[factor_var_name(n)].values, -1, -2)) for n in names],
            axis=2,
        ).reshape(c * d, -1, f)  # (draws, sum I, F)
    one_hot = one_hot_design(data.codes, data.n_categories).toarray()  # (S, sum I)
    log_prior = log_softmax(np.einsum("sk,dkf->dsf", z, coef.reshape(c * d, n_dim, f)), 2)
    lj = log_prior + np.matmul(one_hot, log_a)  # (draws, S, F)
    probs = np.exp(lj - logsumexp(lj, axis=2, keepdims=True))
    hdi = hdi_of_draws(probs.reshape(c, d, data.n_samples, f), hdi_prob)
    class_coord = post["class"].values if "class" in post.coords else np.arange(f)
    dims = ("row", "class")
    return xr.Dataset(
        {
            "mean": (dims, probs.mean(0)),
            "sd": (dims, probs.std(0)),
            "hdi_lower": (dims, hdi[..., 0]),
            "hdi_upper": (dims, hdi[..., 1]),
        },
        coords={"row": np.arange(data.n_samples), "class": class_coord},
        attrs={"hdi_prob": hdi_prob},
    )
