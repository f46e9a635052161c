"""PyMC model factories and posterior tools."""

from bayespmf.models._binding import initvals_from_params
from bayespmf.models._draws import posterior_params
from bayespmf.models._labels import align_labels
from bayespmf.models._pivot import pivot_model
from bayespmf.models._sampling import check_sampler_args
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
from bayespmf.models.posterior import model_family, sample
from bayespmf.models.predict import impute, posterior_class_proba, posterior_predict_proba
from bayespmf.models.regression import (
    LatentClassRegressionRows,
    align_regression_labels,
    latent_class_regression_model,
    regression_class_proba,
    regression_initvals,
    sample_regression,
)
from bayespmf.models.selection import select_n_components
from bayespmf.models.simplex_nest import (
    align_vertices,
    initvals_from_vlad,
    sample_simplex_nest,
    simplex_nest_model,
)

__all__ = [
    "check_sampler_args",
    "LatentClassGibbs",
    "OutcomeGibbs",
    "RegressionFactorGibbs",
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
    "select_n_components",
    "simplex_nest_model",
    "stacking_weights",
]
