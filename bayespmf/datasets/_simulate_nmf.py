r"""Simulated data for NMF by purification: :math:`y = A^* x^* + \nu` (Li, Liang, Risteski).

The generative model of Sec. 3, eq. (1), with the weight distributions of
Assumption (A2') (the simplified case of Theorem 1) and (A2), the noise models (N1)
and (N2), and a warm start satisfying (A3): :func:`make_purification_data` draws a
ground truth and a data set; :func:`sample_purification_points` draws more points of
the same ground truth (the fresh examples of Alg. 1, line 2); and
:func:`purification_population` lists the whole distribution of the data points under
(A2') when it is discrete, so that an expectation over it is exact (the infinite-sample
regime of the analysis, Sec. 5.1).
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

__all__ = [
    "PurificationTruth",
    "make_purification_data",
    "purification_population",
    "sample_purification_points",
]

#: The largest number of components whose 2**n binary weight vectors
#: purification_population lists (65536 rows).
MAX_POPULATION_COMPONENTS = 16

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
    adversary : ndarray, shape (n_features, n_components), or None
        The fixed Gaussian :math:`G` of the adversarial noise
        :math:`\nu = C_\nu \mathrm{sign}(G x^*)` (None for the other noise models).
    """

    components: np.ndarray
    weights: np.ndarray
    noise: np.ndarray
    init: np.ndarray
    adversary: np.ndarray | None = None


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
    sparsity, noise_level = _check_model(
        owner, n_components, sparsity, weights, noise, noise_level
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
    y, x, nu, g = _draw_points(
        rng, a, n_samples, sparsity, weights, noise, noise_level, adversary=None
    )
    sigma = np.diag(rng.uniform(1.0 - init_quality, 1.0, size=n_components))
    e = rng.random((n_components, n_components))
    np.fill_diagonal(e, 0.0)
    sym = max(e.sum(axis=0).max(), e.sum(axis=1).max()) if n_components > 1 else 1.0
    e *= init_quality / sym if sym > 0 else 0.0
    return y, PurificationTruth(a, x, nu, a @ (sigma + e), g)


def _check_model(owner, n_components, sparsity, weights, noise, noise_level):
    """Validated ``(sparsity, noise_level)`` of the weight and noise models."""
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
    return sparsity, noise_level


def _draw_points(rng, a, n_samples, sparsity, weights, noise, noise_level, adversary):
    """``(y, x, nu, G)``: weights, noise and data points of the ground truth ``a``.

    The adversary ``G`` is drawn here (after the weights) when the noise is
    adversarial and none is given; it is None for the other noise models.
    """
    n_features, n_components = a.shape
    on = rng.random((n_samples, n_components)) < sparsity / n_components
    x = on.astype(float)
    if weights == "sparse-uniform":
        x *= rng.random((n_samples, n_components))
    g = None
    if noise == "adversarial":
        g = (
            rng.standard_normal((n_features, n_components))
            if adversary is None
            else adversary
        )
        nu = noise_level * np.sign(x @ g.T)
    elif noise == "unbiased":
        nu = noise_level * rng.choice([-1.0, 1.0], size=(n_samples, n_features))
    else:
        nu = np.zeros((n_samples, n_features))
    return x @ a.T + nu, x, nu, g


def _check_truth(components, adversary, noise, owner):
    a = np.asarray(components, dtype=np.float64)
    if a.ndim != 2 or a.size == 0 or not np.all(np.isfinite(a)):
        raise DataValidationError(
            f"The 'components' argument of {owner} must be a finite, non-empty 2-D array "
            f"(n_features, n_components). Got shape {a.shape}."
        )
    if noise == "adversarial":
        g = None if adversary is None else np.asarray(adversary, dtype=np.float64)
        if g is None or g.shape != a.shape or not np.all(np.isfinite(g)):
            raise DataValidationError(
                f"{owner} with noise='adversarial' needs the 'adversary' G of the ground "
                f"truth (PurificationTruth.adversary), a finite array of shape {a.shape}. "
                f"Got {None if g is None else g.shape}."
            )
        return a, g
    return a, None


def sample_purification_points(
    n_samples: int,
    components,
    *,
    sparsity: float = 2.0,
    weights: str = "bernoulli",
    noise: str = "none",
    noise_level: float = 0.0,
    adversary=None,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Fresh data points :math:`y = A^* x^* + \nu` of a given ground truth.

    Alg. 1 draws new examples at every iteration (line 2); this draws them for the
    :math:`A^*` (and, for adversarial noise, the :math:`G`) of a
    :class:`PurificationTruth`, with the weight and noise models of
    :func:`make_purification_data`.

    Parameters
    ----------
    n_samples : int
    components : array_like, shape (n_features, n_components)
        :math:`A^*`.
    sparsity, weights, noise, noise_level
        As in :func:`make_purification_data`.
    adversary : array_like, shape (n_features, n_components), optional
        The :math:`G` of adversarial noise; required with ``noise="adversarial"``.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    Y : ndarray, shape (n_samples, n_features)
    x : ndarray, shape (n_samples, n_components)
        The weights :math:`x^*`.
    nu : ndarray, shape (n_samples, n_features)
        The noise.

    Raises
    ------
    DataValidationError
        Malformed ``components``, adversarial noise without ``adversary``, or an
        unknown model.
    ValueError
        A count or level outside its range.

    Examples
    --------
    >>> Y, truth = make_purification_data(10, 8, 4, random_state=0)
    >>> Y2, x2, nu2 = sample_purification_points(5, truth.components, random_state=1)
    >>> Y2.shape, bool(np.allclose(Y2, x2 @ truth.components.T))
    ((5, 8), True)
    """
    owner = "sample_purification_points"
    n_samples = check_int(n_samples, "n_samples", owner=owner, low=1)
    a, g = _check_truth(components, adversary, noise, owner)
    sparsity, noise_level = _check_model(
        owner, a.shape[1], sparsity, weights, noise, noise_level
    )
    rng = check_random_state(random_state)
    y, x, nu, _ = _draw_points(rng, a, n_samples, sparsity, weights, noise, noise_level, g)
    return y, x, nu


def purification_population(
    components,
    *,
    sparsity: float = 2.0,
    noise: str = "none",
    noise_level: float = 0.0,
    adversary=None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Every data point of the (A2') model with its probability.

    Under Assumption (A2') the weights are binary, :math:`x^*_i = 1` with probability
    :math:`s/n` independently, so the data points :math:`y = A^* x^* + \nu(x^*)` take
    :math:`2^n` values when the noise is a function of :math:`x^*` (none, or the
    adversarial :math:`C_\nu \mathrm{sign}(G x^*)`). An average over these rows
    with these probabilities is the exact expectation of Alg. 1's update (the
    infinite-sample setting of Sec. 5.1).

    Parameters
    ----------
    components : array_like, shape (n_features, n_components)
        :math:`A^*`, with at most ``MAX_POPULATION_COMPONENTS`` columns.
    sparsity, noise, noise_level, adversary
        As in :func:`sample_purification_points`; ``noise="unbiased"`` (with
        :math:`2^m` sign patterns per weight vector) is refused.

    Returns
    -------
    Y : ndarray, shape (2**n, n_features)
    probabilities : ndarray, shape (2**n,)

    Raises
    ------
    DataValidationError
        More than ``MAX_POPULATION_COMPONENTS`` components, unbiased noise, or the
        errors of :func:`sample_purification_points`.

    Examples
    --------
    >>> Y, truth = make_purification_data(10, 6, 3, random_state=0)
    >>> rows, prob = purification_population(truth.components, sparsity=1.0)
    >>> rows.shape, round(float(prob.sum()), 12), round(float(prob[0]), 4)   # x* = 0
    ((8, 6), 1.0, 0.2963)
    """
    owner = "purification_population"
    a, g = _check_truth(components, adversary, noise, owner)
    n = a.shape[1]
    if n > MAX_POPULATION_COMPONENTS:
        raise DataValidationError(
            f"{owner} lists the 2**n weight vectors, so it needs n_components <= "
            f"{MAX_POPULATION_COMPONENTS}. Got {n}; draw points with "
            "sample_purification_points instead."
        )
    if noise == "unbiased":
        raise DataValidationError(
            f"{owner} cannot list unbiased noise (2**n_features sign patterns per weight "
            "vector); draw fresh points with sample_purification_points instead."
        )
    sparsity, noise_level = _check_model(
        owner, n, sparsity, "bernoulli", noise, noise_level
    )
    x = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(float)
    p = sparsity / n
    k = x.sum(axis=1)
    prob = p**k * (1.0 - p) ** (n - k)
    y = x @ a.T
    if noise == "adversarial":
        y = y + noise_level * np.sign(x @ g.T)
    return y, prob / prob.sum()
