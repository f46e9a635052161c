r"""A latent-class model with a distal outcome, the class summed out (one-step Bayes).

:func:`latent_class_outcome_model` (also ``latent_class_model(data, rank,
outcome=y, outcome_family=...)``) adds an outcome :math:`y` whose distribution depends
on the class to the marginalized latent-class likelihood:

.. math:: \Pr(x_s, y_s) = \sum_f \pi_f(z_s)\, f(y_s \mid \theta_f)
   \prod_{n\ \mathrm{observed}} A_n(x_{sn}, f),

with :math:`\pi(z_s)` the class weights :math:`\lambda` or, with covariates, the
multinomial logit :math:`\operatorname{softmax}(z_s^\top\beta)`. It is written as two
observed variables whose log-densities add up to it: ``y`` (rows with an observed
outcome), the mixture :math:`\log \sum_f \pi_f f(y_s \mid \theta_f)`, and ``x``, the
rows given their outcome, :math:`\log \Pr(x_s \mid y_s) = \log \sum_f \Pr(f \mid
y_s) \prod_n A_n(x_{sn}, f)` (the fused per-row kernel of the latent-class
regression, with per-row log-priors :math:`\log \pi_f + \log f(y_s \mid \theta_f)`
normalized). NUTS and ADVI sample it as any PyMC model, and
``bayespmf.models.sample(model, method="gibbs")`` by the Gibbs step of
:mod:`bayespmf.models.gibbs_distal`; ``pm.compute_log_likelihood``
gives both variables' per-row terms (their sum per row is the joint), and posterior
predictive draws of ``x`` are drawn given the observed outcome.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt

from bayespmf._validation import DataValidationError, as_codes, check_float, check_int
from bayespmf.fit.covariates import check_covariates
from bayespmf.fit.distal import INTERCEPT, check_outcome
from bayespmf.models._names import (  # re-exported: part of this module's API
    DATA_NAME,
    OBSERVED_NAME,
    OUTCOME_DATA_NAME,
    OUTCOME_NAME,
)
from bayespmf.models._rows_dist import as_model_data, factor_priors, rows_coords
from bayespmf.models.regression import (
    COVARIATES_NAME,
    FREE_CLASS_DIM,
    LatentClassRegressionRows,
    coefficient_variables,
)

__all__ = [
    "OUTCOME_DATA_NAME",
    "OUTCOME_FAMILIES",
    "OUTCOME_NAME",
    "latent_class_outcome_model",
    "outcome_log_density",
]

#: The outcome families (as :func:`bayespmf.fit.distal_outcome` takes them).
OUTCOME_FAMILIES = ("gaussian", "poisson", "bernoulli", "categorical")

#: Prior scale of the gaussian class means and standard deviations, in units of the
#: outcome's standard deviation (weakly informative: the data dominate).
MEAN_PRIOR_SCALE = 10.0
SIGMA_PRIOR_SCALE = 2.5


def _class_dist(family, params):
    """The outcome's distribution given the class, batched over classes (last axis)."""
    if family == "gaussian":
        return pm.Normal.dist(mu=params["outcome_mean"], sigma=params["outcome_sigma"])
    if family == "poisson":
        return pm.Poisson.dist(mu=params["outcome_mean"])
    if family == "bernoulli":
        return pm.Bernoulli.dist(p=params["outcome_mean"])
    return pm.Categorical.dist(p=params["outcome_probs"])


def outcome_log_density(family: str, params: dict, y) -> pt.TensorVariable:
    r"""``log f(y_s | theta_f)`` for every row and class, (S, F).

    Examples
    --------
    >>> lp = outcome_log_density(
    ...     "gaussian", {"outcome_mean": np.array([0.0, 1.0]),
    ...                  "outcome_sigma": np.array([1.0, 2.0])}, np.array([0.5]))
    >>> from scipy.stats import norm
    >>> bool(np.allclose(lp.eval(), norm.logpdf(0.5, [0.0, 1.0], [1.0, 2.0])))
    True
    """
    y = pt.as_tensor_variable(y)
    return pm.logp(_class_dist(family, params), y[:, None])


def _outcome_priors(family, values, observed, n_components, labels):
    obs = values[observed]
    if family == "gaussian":
        sd = float(np.std(obs)) or 1.0
        mean = pm.Normal(
            "outcome_mean",
            mu=float(np.mean(obs)),
            sigma=MEAN_PRIOR_SCALE * sd,
            dims="class",
        )
        sigma = pm.HalfNormal("outcome_sigma", sigma=SIGMA_PRIOR_SCALE * sd, dims="class")
        return {"outcome_mean": mean, "outcome_sigma": sigma}
    if family == "poisson":
        # Gamma(2, 2 / ybar): mean ybar, mode ybar / 2, a long right tail
        rate = 2.0 / max(float(np.mean(obs)), 1e-3)
        return {
            "outcome_mean": pm.Gamma("outcome_mean", alpha=2.0, beta=rate, dims="class")
        }
    if family == "bernoulli":
        return {"outcome_mean": pm.Beta("outcome_mean", alpha=1.0, beta=1.0, dims="class")}
    probs = pm.Dirichlet(
        "outcome_probs", a=np.ones(labels.size), dims=("class", "outcome_category")
    )
    return {"outcome_probs": probs}


def latent_class_outcome_model(
    data,
    n_components: int,
    outcome,
    outcome_family: str = "gaussian",
    *,
    n_categories=None,
    weights_prior: float = 1.0,
    factor_prior: float = 1.0,
    covariates=None,
    fit_intercept: bool = True,
    coef_prior_sd: float = 2.5,
) -> pm.Model:
    r"""PyMC model of a latent-class PMF with a class-dependent outcome (one step).

    The model of the module docstring, with priors :math:`\lambda \sim
    \mathrm{Dir}(\alpha_\lambda)` (or, with covariates, :math:`\beta_{df} \sim
    N(0, \mathrm{coef\_prior\_sd}^2)` for :math:`f \ge 1`), :math:`A_n(:, f) \sim
    \mathrm{Dir}(\alpha_A)` and, per class, a weakly informative prior on the
    outcome's parameters: gaussian :math:`\mu_f \sim N(\bar y, (10 s_y)^2)`,
    :math:`\sigma_f \sim \mathrm{HalfNormal}(2.5 s_y)`; poisson :math:`\mu_f \sim
    \mathrm{Gamma}(2, 2/\bar y)`; bernoulli :math:`p_f \sim \mathrm{Beta}(1, 1)`;
    categorical :math:`p_f \sim \mathrm{Dir}(1)`.

    Parameters
    ----------
    data : CategoricalData, pandas.DataFrame or array_like of int (S, N)
        The indicators; ``-1`` (NaN in a DataFrame) marks a missing entry. Rows with
        every indicator missing are dropped (with their outcome).
    n_components : int
    outcome : array_like, shape (S,)
        NaN (None) marks a missing outcome: the row then enters through ``x`` alone
        (the outcome is marginalized out).
    outcome_family : {"gaussian", "poisson", "bernoulli", "categorical"}
    n_categories, weights_prior, factor_prior
        As in :func:`bayespmf.models.latent_class_model`.
    covariates : array_like or DataFrame (S, D0), optional
        Covariates on class membership (then ``weights_prior`` does not apply).
    fit_intercept : bool, default True
    coef_prior_sd : float, default 2.5

    Returns
    -------
    pymc.Model
        Free variables ``weights`` (or ``coef``), ``A_<name>`` and the outcome's
        ``outcome_mean`` (and ``outcome_sigma``), or ``outcome_probs`` (dims
        ``(class, outcome_category)``); observed ``x`` (dims ``(row, variable)``)
        and ``y`` (dims ``outcome_row``).

    Raises
    ------
    ValueError
        An outcome of another length, all missing, or invalid for its family; an
        unknown family; as :func:`bayespmf.models.latent_class_model` for the rest.

    Notes
    -----
    :func:`bayespmf.models.sample` runs NUTS (the default) or ADVI on it and aligns
    the labels of every class-dimensioned variable, the outcome's parameters with the
    weights and factors; the ``log_likelihood`` group holds ``x`` per row and ``y``
    per row with an observed outcome. ``method="gibbs"`` runs
    :class:`bayespmf.models.gibbs_distal.OutcomeGibbs` (conjugate draws of every
    parameter given the classes drawn row by row; with covariates, NUTS on the
    coefficients); an outcome prior other than these is refused by it.

    Examples
    --------
    >>> x = np.array([[0, 1], [1, 0], [1, 1], [0, 0]])
    >>> model = latent_class_outcome_model(x, 2, [0.1, 2.0, np.nan, -0.3])
    >>> sorted(v.name for v in model.free_RVs)
    ['A_x0', 'A_x1', 'outcome_mean', 'outcome_sigma', 'weights']
    >>> model.named_vars_to_dims["y"]
    ('outcome_row',)
    """
    owner = "latent_class_model"
    data = as_model_data(data, n_categories)
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
    weights_prior = check_float(weights_prior, "weights_prior", low=0.0, low_open=True)
    factor_prior = check_float(factor_prior, "factor_prior", low=0.0, low_open=True)
    coef_prior_sd = check_float(coef_prior_sd, "coef_prior_sd", low=0.0, low_open=True)
    as_codes(data, name="data")  # a variable never observed cannot be learned
    n_rows = data.n_samples
    values, observed, labels, family = check_outcome(outcome, n_rows, outcome_family, owner)
    design = cov_names = None
    if covariates is not None:
        if weights_prior != 1.0:
            raise DataValidationError(
                "latent_class_model(covariates=..., outcome=...) has no class weights: "
                "drop 'weights_prior' (set the coefficients' prior with 'coef_prior_sd')."
            )
        cov_names = (
            [str(c) for c in covariates.columns]
            if isinstance(covariates, pd.DataFrame)
            else None
        )
        design = check_covariates(
            covariates, n_rows, fit_intercept=bool(fit_intercept), owner=owner
        )
        n_cov = design.shape[1] - int(bool(fit_intercept))
        cov_names = cov_names or [f"z{d}" for d in range(n_cov)]
        cov_names = [INTERCEPT] * int(bool(fit_intercept)) + cov_names
    keep = (np.asarray(data.codes) >= 0).any(axis=1)
    if not keep.all():
        data = data[keep]
        values, observed = values[keep], observed[keep]
        design = None if design is None else design[keep]
    if not observed.any():
        raise ValueError(
            f"The 'outcome' parameter of {owner} is observed only on rows whose "
            "indicators are all missing (dropped): nothing links it to the classes."
        )
    obs_rows = np.flatnonzero(observed)
    coords = {
        "class": np.arange(n_components),
        "outcome_row": obs_rows,
        **rows_coords(data),
    }
    if family == "categorical":
        coords["outcome_category"] = [str(v) for v in labels]
    if design is not None:
        coords[FREE_CLASS_DIM] = np.arange(1, n_components)
        coords["covariate"] = cov_names
    y_obs = values[observed]
    if family != "gaussian":
        y_obs = y_obs.astype(np.int64)
    with pm.Model(coords=coords) as model:
        rows = pm.Data(DATA_NAME, np.asarray(data.codes), dims=("row", "variable"))
        y_data = pm.Data(OUTCOME_DATA_NAME, y_obs, dims="outcome_row")
        if design is None:
            weights = pm.Dirichlet(
                "weights", a=np.full(n_components, weights_prior), dims="class"
            )
            log_prior = pt.log(weights)[None, :] * pt.ones((data.n_samples, 1))
        else:
            z = pm.Data(COVARIATES_NAME, design, dims=("row", "covariate"))
            coef_full = coefficient_variables(len(cov_names), coef_prior_sd)
            eta = pt.dot(z, coef_full)
            log_prior = eta - pt.logsumexp(eta, axis=1, keepdims=True)
        factors = factor_priors(data, n_components, factor_prior)
        params = _outcome_priors(family, values, observed, n_components, labels)
        log_fy = outcome_log_density(family, params, y_data)  # (S_obs, F)
        logits = pt.set_subtensor(log_prior[obs_rows], log_prior[obs_rows] + log_fy)
        LatentClassRegressionRows(
            OBSERVED_NAME, logits, factors, observed=rows, dims=("row", "variable")
        )
        pm.Mixture(
            OUTCOME_NAME,
            w=pt.exp(log_prior[obs_rows]),
            comp_dists=_class_dist(family, params),
            observed=y_data,
            dims="outcome_row",
        )
    return model
