r"""Simulated data for NMF by purification: :math:`y = A^* x^* + \nu` (Li, Liang, Risteski).

The generative model of Sec. 3, eq. (1), with the weight distributions of
Assumption (A2') (the simplified case of Theorem 1) and (A2), the noise models (N1)
and (N2), and a warm start satisfying (A3).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayespmf._validation import (
    DataValidationError,
    check_float,
    check_int,
    check_random_state,
)

__all__ = ["PurificationTruth", "make_purification_data"]

_WEIGHTS = ("bernoulli", "sparse-uniform")
_NOISE = ("none", "adversarial", "unbiased")


class PurificationTruth(NamedTuple):
    r"""Ground truth of :func:`make_purification_data`.

    Attributes
    ----------
    components : ndarray, shape (n_features, n_components)
        :math:`A^*`, non-negative columns of unit :math:`\ell_1` norm.
    weights : ndarray, shape (n_samples, n_components)
        :math:`x^*` of every data point (rows).
    noise : ndarray, shape (n_samples, n_features)
        :math:`\nu` of every data point.
    init : ndarray, shape (n_features, n_components)
        Warm start :math:`A^{(0)} = A^*(\Sigma^{(0)} + E^{(0)})` of Assumption (A3).
    """

    components: np.ndarray
    weights: np.ndarray
    noise: np.ndarray
    init: np.ndarray


def make_purification_data(
    n_samples: int,
    n_features: int,
    n_components: int,
    *,
    sparsity: float = 2.0,
    weights: str = "bernoulli",
    noise: str = "none",
    noise_level: float = 0.0,
    init_quality: float = 0.1,
    random_state=None,
) -> tuple[np.ndarray, PurificationTruth]:
    r"""Draw data points :math:`y = A^* x^* + \nu` of Li, Liang & Risteski, eq. (1).

    Parameters
    ----------
    n_samples : int
        Number of data points S (rows of the returned ``Y``).
    n_features : int
        Dimension m of a data point (>= ``n_components``).
    n_components : int
        Number of features n.
    sparsity : float, default 2.0
        :math:`s`: every weight is non-zero with probability :math:`s / n`, in
        ``(0, n]``.
    weights : {"bernoulli", "sparse-uniform"}, default "bernoulli"
        "bernoulli": :math:`x^*_i = 1` w.p. :math:`s/n`, else 0 (Assumption (A2'),
        Theorem 1); "sparse-uniform": that indicator times Uniform(0, 1), a case of
        (A2) (:math:`x^*_i \in [0, 1]`, independent, :math:`E[x^*_i] = s / (2n)`,
        :math:`E[(x^*_i)^2] = s / (3n)`).
    noise : {"none", "adversarial", "unbiased"}, default "none"
        (N1) adversarial: :math:`\nu = C_\nu\,\mathrm{sign}(G x^*)` with a fixed
        Gaussian :math:`G` (m, n): bounded by :math:`C_\nu`, biased, and a function
        of :math:`x^*`. (N2) unbiased: independent :math:`\pm C_\nu` signs, so
        :math:`E[\nu \mid x^*] = 0`.
    noise_level : float, default 0.0
        :math:`C_\nu = \max_i |\nu_i|`.
    init_quality : float, default 0.1
        :math:`\ell` of (A3): :math:`\Sigma^{(0)}` diagonal with entries drawn from
        :math:`[1 - \ell, 1]`, :math:`E^{(0)}` off-diagonal, non-negative, with
        :math:`\|E^{(0)}\|_s = \ell`, and :math:`N^{(0)} = 0`. In ``[0, 1)``.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    Y : ndarray, shape (n_samples, n_features)
    truth : PurificationTruth

    Raises
    ------
    DataValidationError
        Unknown ``weights`` or ``noise``, noise_level given with ``noise="none"``,
        or ``n_features < n_components``.
    ValueError
        A count or level outside its range.

    Notes
    -----
    :math:`A^*` has i.i.d. Uniform(0, 1) entries, columns rescaled to unit
    :math:`\ell_1` norm (linearly independent almost surely, Assumption (A1)).
    Theorem 1 needs :math:`\ell \le 1/10` and :math:`C_\nu` at most of order
    :math:`c / \max(m, n\|(A^*)^\dagger\|_\infty)`.

    Examples
    --------
    >>> Y, truth = make_purification_data(100, 8, 4, random_state=0)
    >>> Y.shape, truth.components.shape, truth.init.shape
    ((100, 8), (8, 4), (8, 4))
    >>> bool(np.allclose(Y, truth.weights @ truth.components.T))
    True
    """
    owner = "make_purification_data"
    n_samples = check_int(n_samples, "n_samples", owner=owner, low=1)
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
    n_features = check_int(n_features, "n_features", owner=owner, low=1)
    if n_features < n_components:
        raise DataValidationError(
            f"{owner} needs n_features >= n_components (linearly independent features, "
            f"Assumption (A1)). Got n_features={n_features}, "
            f"n_components={n_components}."
        )
    sparsity = check_float(
        sparsity, "sparsity", owner=owner, low=0.0, high=float(n_components), low_open=True
    )
    if weights not in _WEIGHTS:
        raise DataValidationError(
            f"The 'weights' argument of {owner} must be one of {_WEIGHTS}. Got {weights!r}."
        )
    if noise not in _NOISE:
        raise DataValidationError(
            f"The 'noise' argument of {owner} must be one of {_NOISE}. Got {noise!r}."
        )
    noise_level = check_float(noise_level, "noise_level", owner=owner, low=0.0)
    if noise == "none" and noise_level > 0:
        raise DataValidationError(
            f"{owner} got noise_level={noise_level} with noise='none'. Pass "
            "noise='adversarial' or 'unbiased', or leave noise_level at 0."
        )
    init_quality = check_float(init_quality, "init_quality", owner=owner, low=0.0)
    if init_quality >= 1.0:
        raise ValueError(
            f"The 'init_quality' parameter of {owner} must be in [0, 1). Got "
            f"{init_quality}."
        )
    rng = check_random_state(random_state)
    a = rng.uniform(size=(n_features, n_components))
    a /= a.sum(axis=0)
    on = rng.random((n_samples, n_components)) < sparsity / n_components
    x = on.astype(float)
    if weights == "sparse-uniform":
        x *= rng.random((n_samples, n_components))
    if noise == "adversarial":
        g = rng.standard_normal((n_features, n_components))
        nu = noise_level * np.sign(x @ g.T)
    elif noise == "unbiased":
        nu = noise_level * rng.choice([-1.0, 1.0], size=(n_samples, n_features))
    else:
        nu = np.zeros((n_samples, n_features))
    y = x @ a.T + nu
    sigma = np.diag(rng.uniform(1.0 - init_quality, 1.0, size=n_components))
    e = rng.random((n_components, n_components))
    np.fill_diagonal(e, 0.0)
    sym = max(e.sum(axis=0).max(), e.sum(axis=1).max()) if n_components > 1 else 1.0
    e *= init_quality / sym if sym > 0 else 0.0
    return y, PurificationTruth(a, x, nu, a @ (sigma + e))
