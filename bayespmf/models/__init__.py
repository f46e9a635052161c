"""PyMC model factories and posterior tools."""

from bayespmf.models._sampling import check_sampler_args
from bayespmf.models.averaging import (
    averaged_predict_proba,
    rank_weights,
    stacking_weights,
)
from bayespmf.models.latent_class import LatentClassRows, latent_class_model, model_data
from bayespmf.models.posterior import (
    align_labels,
    convergence_summary,
    impute,
    initvals_from_params,
    model_family,
    pivot_model,
    posterior_class_proba,
    posterior_params,
    posterior_predict_proba,
    sample,
    select_rank,
)
from bayespmf.models.regression import (
    LatentClassRegressionRows,
    align_regression_labels,
    latent_class_regression_model,
    regression_class_proba,
    regression_initvals,
    sample_regression,
)
from bayespmf.models.simplex_nest import (
    align_vertices,
    initvals_from_vlad,
    sample_simplex_nest,
    simplex_nest_model,
)

__all__ = [
    "check_sampler_args",
    "LatentClassRegressionRows",
    "LatentClassRows",
    "align_labels",
    "align_regression_labels",
    "align_vertices",
    "averaged_predict_proba",
    "convergence_summary",
    "impute",
    "initvals_from_params",
    "model_family",
    "initvals_from_vlad",
    "latent_class_model",
    "latent_class_regression_model",
    "model_data",
    "pivot_model",
    "posterior_class_proba",
    "posterior_params",
    "posterior_predict_proba",
    "rank_weights",
    "regression_class_proba",
    "regression_initvals",
    "sample",
    "sample_regression",
    "sample_simplex_nest",
    "select_rank",
    "simplex_nest_model",
    "stacking_weights",
]
