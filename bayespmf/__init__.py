"""bayespmf: Bayesian learning of joint PMFs and Dirichlet simplex nests.

Latent-class (naive Bayes, low-rank CPD) models of the joint PMF of categorical
variables with missing entries, Dirichlet Simplex Nest models, fast geometric and
spectral estimators compiled as PyTensor graphs, and PyMC models with the discrete
latent states marginalized out.
"""

from bayespmf._validation import ConvergenceWarning, DataValidationError
from bayespmf.data import MISSING, CategoricalData

__version__ = "0.1.0"

__all__ = [
    "MISSING",
    "CategoricalData",
    "ConvergenceWarning",
    "DataValidationError",
    "__version__",
]
