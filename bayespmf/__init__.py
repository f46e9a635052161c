"""bayespmf: Bayesian learning of joint PMFs and Dirichlet simplex nests.

Latent-class (naive Bayes, low-rank CPD) models of the joint PMF of categorical
variables with missing entries, Dirichlet Simplex Nest models, fast geometric and
spectral estimators compiled as PyTensor graphs, and PyMC models with the discrete
latent states marginalized out.

Examples
--------
>>> import bayespmf
>>> data, target = bayespmf.datasets.load_votes()
>>> model = bayespmf.LatentClassPMF(rank=3, random_state=0).fit(data)
>>> model.predict(data[:5], target).shape
(5,)
"""

import bayespmf._runtime  # noqa: F401  (first: PyTensor BLAS flags, ArviZ notice)
from bayespmf import datasets, io, tasks
from bayespmf._validation import ConvergenceWarning, DataValidationError
from bayespmf.data import MISSING, CategoricalData
from bayespmf.estimators import GDM, VLAD, LatentClassPMF, PurificationNMF, SimplexSPA
from bayespmf.kernels.squarem import squarem
from bayespmf.pmf import LatentClassParams

__version__ = "0.1.0"

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
    "__version__",
    "PurificationNMF",
    "datasets",
    "io",
    "squarem",
    "tasks",
]
