"""scikit-learn-style estimators over the kernels."""

from bayespmf.estimators.latent_class import METHODS, LatentClassPMF, NotFittedError

__all__ = ["METHODS", "LatentClassPMF", "NotFittedError"]
