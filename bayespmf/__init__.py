"""bayespmf: Bayesian learning of joint PMFs and Dirichlet simplex nests.

Latent-class (naive Bayes, low-rank CPD) models of the joint PMF of categorical
variables with missing entries, Dirichlet Simplex Nest models, fast geometric and
spectral estimators compiled as PyTensor graphs, and PyMC models with the discrete
latent states marginalized out.

Examples
--------
>>> import bayespmf
>>> data, target = bayespmf.datasets.load_votes()
>>> model = bayespmf.LatentClassPMF(n_components=3, random_state=0).fit(data)
>>> model.predict(data[:5], target).shape
(5,)

The application layer (:mod:`bayespmf.apps`: tasks, baselines, specifications, the
runner and the command line) is not imported here: import it from there
(``from bayespmf.apps import tasks``).
"""

import bayespmf._runtime  # noqa: F401  (first: PyTensor BLAS flags, ArviZ notice)
from bayespmf import datasets, io
from bayespmf._validation import ConvergenceWarning, DataValidationError
from bayespmf._version import __version__
from bayespmf.data import MISSING, CategoricalData
from bayespmf.estimators import (
    GDM,
    VLAD,
    LatentClassPMF,
    LatentClassRegression,
    PurificationNMF,
    SimplexSPA,
)
from bayespmf.fit.squarem import squarem
from bayespmf.pmf import LatentClassParams

__all__ = [
    "MISSING",
    "CategoricalData",
    "GDM",
    "VLAD",
    "SimplexSPA",
    "ConvergenceWarning",
    "DataValidationError",
    "LatentClassPMF",
    "LatentClassParams",
    "LatentClassRegression",
    "__version__",
    "PurificationNMF",
    "datasets",
    "io",
    "squarem",
]
