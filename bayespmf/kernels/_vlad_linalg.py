"""Symmetric square roots shared by the VLAD kernels (private to ``bayespmf.kernels``)."""

from __future__ import annotations

import numpy as np

__all__ = ["pd_sqrt", "psd_sqrt"]


def pd_sqrt(T) -> np.ndarray | None:
    """Symmetric square root of a symmetric matrix; None unless positive definite."""
    w, V = np.linalg.eigh((T + T.T) / 2)
    if w[0] <= 0:
        return None
    return (V * np.sqrt(w)) @ V.T


def psd_sqrt(T) -> np.ndarray:
    """Symmetric square root of a symmetric matrix, negative eigenvalues set to 0."""
    w, V = np.linalg.eigh((T + T.T) / 2)
    return (V * np.sqrt(np.maximum(w, 0.0))) @ V.T
