"""Fitting: the one iteration loop, the EM drivers and the latent-class fit pipeline.

:func:`iterate` is the loop every iterative estimator runs under; :func:`fit_em` the
EM / SQUAREM-PMF driver; :func:`fit_latent_class` the one public fit function of the
latent-class PMF (a registry of methods, ``"auto"`` = multi-start maximum likelihood)
that :class:`~bayespmf.estimators.LatentClassPMF` and ``bayespmf.dask`` call;
:func:`distal_outcome` and :func:`class_predictors` the structural step after a
latent-class fit (naive, BCH, ML three-step, two-step and one-step estimators;
:mod:`bayespmf.fit.distal`); :func:`fit_simplex_nest` the one fit function of the
simplex nest (VLAD, GDM, SPA);
:func:`select_simplex_n_components` chooses its number of vertices by held-out completion;
:func:`document_completion_perplexity` and :func:`topic_coherence` judge topics
(:mod:`bayespmf.fit.topics`); :func:`simplex_frobenius_error` and
:func:`simplex_volume` are the simplex-nest paper's finance metrics.

The other iterative methods run under the same loop from modules named after them:
:func:`bayespmf.fit.cnmf.cnmf_opt`, :func:`bayespmf.fit.ctd.ctd`,
:func:`bayespmf.fit.juror.juror`, :func:`bayespmf.fit.purification.purification` and
the generic :func:`bayespmf.fit.squarem.squarem` (also ``bayespmf.squarem``). They are
imported from there, not re-exported here, where ``ctd`` would hide the module
``bayespmf.fit.ctd``.
"""

from bayespmf.fit.bootstrap_lrt import bootstrap_lrt
from bayespmf.fit.covariates import fit_latent_class_regression
from bayespmf.fit.defaults import DEFAULT_N_INIT
from bayespmf.fit.distal import StructuralFit, class_predictors, distal_outcome
from bayespmf.fit.em import EMInfo, ad_em, fit_em, run_em
from bayespmf.fit.latent_class import METHODS, fit_latent_class, max_identifiable_rank
from bayespmf.fit.loop import IterInfo, StepInfo, iterate
from bayespmf.fit.memory import (
    InsufficientMemoryError,
    MemoryBudgetWarning,
    available_memory,
    memory_estimate,
)
from bayespmf.fit.multistart import LatentClassFit, LocalOptimumWarning
from bayespmf.fit.simplex import SimplexNestFit, fit_simplex_nest
from bayespmf.fit.simplex_metrics import simplex_frobenius_error, simplex_volume
from bayespmf.fit.simplex_selection import select_simplex_n_components
from bayespmf.fit.source import InMemorySource
from bayespmf.fit.standard_errors import standard_errors
from bayespmf.fit.topics import document_completion_perplexity, topic_coherence

__all__ = [
    "DEFAULT_N_INIT",
    "METHODS",
    "EMInfo",
    "InMemorySource",
    "InsufficientMemoryError",
    "IterInfo",
    "LatentClassFit",
    "LocalOptimumWarning",
    "MemoryBudgetWarning",
    "SimplexNestFit",
    "StructuralFit",
    "StepInfo",
    "ad_em",
    "available_memory",
    "bootstrap_lrt",
    "class_predictors",
    "distal_outcome",
    "fit_em",
    "fit_latent_class",
    "fit_simplex_nest",
    "memory_estimate",
    "fit_latent_class_regression",
    "iterate",
    "max_identifiable_rank",
    "run_em",
    "document_completion_perplexity",
    "select_simplex_n_components",
    "simplex_frobenius_error",
    "simplex_volume",
    "standard_errors",
    "topic_coherence",
]
