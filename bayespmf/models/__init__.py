"""PyMC model factories and posterior tools."""

from bayespmf.models._draws import posterior_params
from bayespmf.models._pivot import pivot_model
from bayespmf.models._sampling import check_sampler_args
from bayespmf.models._target import check_sample_target
from bayespmf.models.averaging import (
    averaged_predict_proba,
    rank_weights,
    stacking_weights,
)
from bayespmf.models.diagnostics import convergence_summary
from bayespmf.models.gibbs import LatentClassGibbs
from bayespmf.models.gibbs_distal import OutcomeGibbs
from bayespmf.models.gibbs_regression import RegressionFactorGibbs
from bayespmf.models.latent_class import LatentClassRows, latent_class_model, model_data
from bayespmf.models.posterior import (
    align_labels,
    initvals,
    model_family,
    sample,
    subsample_start,
)
from bayespmf.models.predict import impute, posterior_class_proba, posterior_predict_proba
from bayespmf.models.regression import (
    LatentClassRegressionRows,
    latent_class_regression_model,
    regression_class_proba,
)
from bayespmf.models.selection import select_n_components
from bayespmf.models.simplex_nest import simplex_nest_model

__all__ = [
    "check_sample_target",
    "check_sampler_args",
    "LatentClassGibbs",
    "OutcomeGibbs",
    "RegressionFactorGibbs",
    "LatentClassRegressionRows",
    "LatentClassRows",
    "align_labels",
    "averaged_predict_proba",
    "convergence_summary",
    "impute",
    "initvals",
    "model_family",
    "latent_class_model",
    "latent_class_regression_model",
    "model_data",
    "pivot_model",
    "posterior_class_proba",
    "posterior_params",
    "posterior_predict_proba",
    "rank_weights",
    "regression_class_proba",
    "sample",
    "select_n_components",
    "simplex_nest_model",
    "stacking_weights",
    "subsample_start",
]
