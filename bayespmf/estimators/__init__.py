"""scikit-learn-style estimators over the kernels."""

from bayespmf.estimators.latent_class import METHODS, LatentClassPMF, NotFittedError
from bayespmf.estimators.purification import PurificationNMF
from bayespmf.estimators.regression import LatentClassRegression
from bayespmf.estimators.selection import best_n_components, compare_n_components
from bayespmf.estimators.simplex import GDM, VLAD, SimplexSPA

__all__ = [
    "GDM",
    "METHODS",
    "VLAD",
    "LatentClassPMF",
    "LatentClassRegression",
    "NotFittedError",
    "PurificationNMF",
    "SimplexSPA",
    "best_n_components",
    "compare_n_components",
]
