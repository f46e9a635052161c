"""PyMC model factories and posterior tools."""

from bayespmf.models.latent_class import latent_class_model, one_hot_design
from bayespmf.models.posterior import (
    align_labels,
    convergence_summary,
    initvals_from_params,
    posterior_params,
    posterior_predict_proba,
    sample,
    select_rank,
)

__all__ = [
    "align_labels",
    "convergence_summary",
    "initvals_from_params",
    "latent_class_model",
    "one_hot_design",
    "posterior_params",
    "posterior_predict_proba",
    "sample",
    "select_rank",
]
