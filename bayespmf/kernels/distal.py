r"""Kernels of the structural step: outcome families, the EM step and the scores.

The structural models of :mod:`bayespmf.fit.distal` all maximize (or solve the
weighted score equations of) one kind of mixture likelihood

.. math:: \ell = \sum_i \log \sum_t \pi_t(z_i)\, G_{it}
   \prod_c f_c(y_{ic} \mid \theta_{ct}),

where :math:`G_{it}` is a fixed "measurement" term (1 for the naive and BCH estimators,
the classification-error probability :math:`D_{t, W_i}` for Vermunt's ML correction,
:math:`\Pr(x_i \mid t)` with the measurement parameters fixed for the two-step
estimator), :math:`\pi_t(z_i)` the class prior (class weights, fixed or free, or a
multinomial logit on covariates) and the :math:`f_c` the components: the outcome and,
for the one-step estimator, the indicators themselves (categorical components).

Every family is a small record of pure functions on ``theta`` of shape ``(T, P)``
(``T`` classes, ``P`` reported parameters per class): a weighted M-step, the
log-density (S, T), the complete-data score in ``theta`` (S, T, P), the map from the
free parameters to ``theta`` (probabilities that sum to one lose their largest
entry), and the finite-difference scale of each parameter. Rows whose value is
missing contribute 0 to the log-density and the score.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, logsumexp

from bayespmf.kernels.covariates import class_log_prior, mlogit_newton
from bayespmf.pmf import row_max, row_sum

__all__ = [
    "BOUNDARY",
    "FAMILIES",
    "Component",
    "Family",
    "StructuralEMInfo",
    "StructuralState",
    "class_weight_component",
    "component_logpdf",
    "log_joint",
    "structural_em_step",
    "total_score",
]

#: Probabilities closer than this to 0 or 1 are at the boundary of the parameter
#: space: they are held fixed in the information (as Mplus and poLCA do), where the
#: likelihood is not differentiable inside the domain.
BOUNDARY = 1e-7

#: Floor of a variance or Poisson mean, relative to the outcome's scale: a class
#: holding (almost) one distinct value would otherwise get a degenerate density and
#: an infinite likelihood.
SCALE_FLOOR = 1e-10

#: Newton steps of the multinomial-logit M-step per EM iteration (a generalized EM:
#: each raises the expected complete-data log-likelihood).
MLOGIT_STEPS = 3


class Family(NamedTuple):
    """A class-specific outcome distribution (see the module docstring)."""

    name: str
    params: tuple
    mstep: object
    logpdf: object
    score: object
    free_map: object
    scale: object


class Component(NamedTuple):
    """One structural variable: its family, values, observed mask and ``theta``.

    ``y`` holds the values (floats, or integer codes for ``categorical``) with
    anything at missing rows; ``observed`` is the (S,) mask.
    """

    family: Family
    y: np.ndarray
    observed: np.ndarray
    theta: np.ndarray


# --------------------------------------------------------------------- families


def _observed(obs, y):
    """``y`` with 0 at the missing rows (``y`` itself when every row is observed)."""
    return y if obs.all() else np.where(obs, y, 0.0)


def _masked(obs, values):
    """``values`` (rows first) with 0 at the missing rows (itself when none is)."""
    if obs.all():
        return values
    return np.where(obs.reshape(obs.shape + (1,) * (values.ndim - 1)), values, 0.0)


def _identity_map(theta):
    n_cls, n_par = theta.shape
    return [np.eye(n_par) for _ in range(n_cls)]


def _gaussian_mstep(y, obs, w, floor):
    y0 = _observed(obs, y)[:, None]
    w = _masked(obs, w)
    total = w.sum(axis=0)
    mean = (w * y0).sum(axis=0) / total
    var = (w * (y0 - mean) ** 2).sum(axis=0) / total
    return np.stack([mean, np.maximum(var, floor)], axis=1)


def _gaussian_logpdf(y, obs, theta):
    mean, var = theta[:, 0], theta[:, 1]
    y0 = _observed(obs, y)[:, None]
    out = -0.5 * (np.log(2 * np.pi * var) + (y0 - mean) ** 2 / var)
    return _masked(obs, out)


def _gaussian_score(y, obs, theta):
    mean, var = theta[:, 0], theta[:, 1]
    dev = _observed(obs, y)[:, None] - mean
    s = np.stack([dev / var, -0.5 / var + 0.5 * dev**2 / var**2], axis=2)
    return _masked(obs, s)


def _gaussian_scale(theta):
    return np.stack([np.sqrt(theta[:, 1]), theta[:, 1]], axis=1)


def _rate_mstep(y, obs, w, floor, low, high):
    w = _masked(obs, w)
    p = (w * _observed(obs, y)[:, None]).sum(axis=0) / w.sum(axis=0)
    return np.clip(p, low, high)[:, None]


def _poisson_logpdf(y, obs, theta):
    y0 = _observed(obs, y)[:, None]
    lam = theta[:, 0]
    out = y0 * np.log(lam) - lam - gammaln(y0 + 1.0)
    return _masked(obs, out)


def _poisson_score(y, obs, theta):
    s = _observed(obs, y)[:, None] / theta[:, 0] - 1.0
    return _masked(obs, s)[:, :, None]


def _bernoulli_logpdf(y, obs, theta):
    y0 = _observed(obs, y)[:, None]
    p = theta[:, 0]
    out = y0 * np.log(p) + (1.0 - y0) * np.log1p(-p)
    return _masked(obs, out)


def _bernoulli_score(y, obs, theta):
    y0 = _observed(obs, y)[:, None]
    p = theta[:, 0]
    s = y0 / p - (1.0 - y0) / (1.0 - p)
    return _masked(obs, s)[:, :, None]


def _bernoulli_map(theta):
    return [
        np.eye(1) if BOUNDARY < p < 1 - BOUNDARY else np.zeros((1, 0)) for p in theta[:, 0]
    ]


def _prob_scale(theta):
    return np.maximum(np.minimum(theta, 1.0 - theta), BOUNDARY)


def _categorical_mstep(y, obs, w, floor):
    n_cat = int(floor)
    # every category's weights, per class, added up in row order by bincount
    codes = y[obs].astype(np.intp)
    counts = np.stack([np.bincount(codes, weights=wt[obs], minlength=n_cat) for wt in w.T])
    # BCH weights can be negative: a negative count is clipped to 0 (the estimate is
    # then at the boundary), a class with no positive mass keeps a uniform PMF
    counts = np.maximum(counts, 0.0)
    total = counts.sum(axis=1, keepdims=True)
    return np.where(total > 0, counts / np.where(total > 0, total, 1.0), 1.0 / n_cat)


def _categorical_logpdf(y, obs, theta):
    codes = _observed(obs, y).astype(np.intp)
    with np.errstate(divide="ignore"):
        out = np.log(theta.T.take(codes, axis=0))
    return _masked(obs, out)


def _categorical_score(y, obs, theta):
    codes = _observed(obs, y).astype(np.intp)
    n_rows = codes.size
    s = np.zeros((n_rows, theta.shape[0], theta.shape[1]))
    picked = theta.T.take(codes, axis=0)
    with np.errstate(divide="ignore"):
        inv = np.where(picked > 0, 1.0 / picked, 0.0)
    s[np.arange(n_rows), :, codes] = inv
    return _masked(obs, s)


def _simplex_map(theta):
    """Columns ``e_k - e_ref`` for every interior ``k`` but the largest, per class."""
    maps = []
    for p in theta:
        ref = int(np.argmax(p))
        free = [k for k in range(p.size) if k != ref and BOUNDARY < p[k] < 1 - BOUNDARY]
        j = np.zeros((p.size, len(free)))
        for col, k in enumerate(free):
            j[k, col] = 1.0
            j[ref, col] = -1.0
        maps.append(j)
    return maps


def _prob_floor(low):
    return lambda y, obs, w, floor: _rate_mstep(y, obs, w, floor, low, 1.0 - low)


FAMILIES = {
    "gaussian": Family(
        "gaussian",
        ("mean", "variance"),
        _gaussian_mstep,
        _gaussian_logpdf,
        _gaussian_score,
        _identity_map,
        _gaussian_scale,
    ),
    "poisson": Family(
        "poisson",
        ("mean",),
        lambda y, obs, w, floor: _rate_mstep(y, obs, w, floor, floor, np.inf),
        _poisson_logpdf,
        _poisson_score,
        _identity_map,
        lambda theta: theta,
    ),
    "bernoulli": Family(
        "bernoulli",
        ("mean",),
        _prob_floor(SCALE_FLOOR),
        _bernoulli_logpdf,
        _bernoulli_score,
        _bernoulli_map,
        _prob_scale,
    ),
    "categorical": Family(
        "categorical",
        (),  # one parameter per category, named by the caller
        _categorical_mstep,
        _categorical_logpdf,
        _categorical_score,
        _simplex_map,
        _prob_scale,
    ),
}


def component_logpdf(comp: Component) -> np.ndarray:
    """Log-density of every row under every class, (S, T); 0 where missing."""
    return comp.family.logpdf(comp.y, comp.observed, comp.theta)


def class_weight_component(weights, n_rows: int) -> Component:
    """The class weights as a categorical "component" of one class (for the scores)."""
    theta = np.asarray(weights, dtype=float)[None, :]
    return Component(
        FAMILIES["categorical"], np.zeros(n_rows), np.ones(n_rows, bool), theta
    )


# --------------------------------------------------------------- the likelihood


class StructuralState(NamedTuple):
    """State of the structural EM.

    Attributes
    ----------
    weights : ndarray, shape (T,) or None
        Class weights (None with a multinomial-logit prior).
    beta : ndarray, shape (D, T) or None
        Multinomial-logit coefficients (class 0 the reference) or None.
    thetas : tuple of ndarray
        ``theta`` of every free component, in order.
    """

    weights: np.ndarray | None
    beta: np.ndarray | None
    thetas: tuple


class StructuralEMInfo(NamedTuple):
    """What one :func:`structural_em_step` reports (read by :func:`bayespmf.fit.iterate`).

    Attributes
    ----------
    objective : float
        Log-likelihood of the state the step was given.
    n_evals : int
        EM maps evaluated (1).
    """

    objective: float
    n_evals: int


def log_prior(state: StructuralState, design, n_rows: int) -> np.ndarray:
    """Log class prior of every row, (S, T)."""
    if state.beta is not None:
        return class_log_prior(design, state.beta)
    with np.errstate(divide="ignore"):
        return np.broadcast_to(np.log(state.weights), (n_rows, state.weights.size))


def log_joint(state, components, fixed_log, design) -> np.ndarray:
    """``log pi_t(z_i) + log G_it + sum_c log f_c(y_ic | theta_ct)``, (S, T)."""
    out = log_prior(state, design, fixed_log.shape[0]) + fixed_log
    for comp, theta in zip(components, state.thetas, strict=True):
        out = out + comp.family.logpdf(comp.y, comp.observed, theta)
    return out


def structural_em_step(
    state: StructuralState,
    components,
    fixed_log,
    design,
    aux,
    *,
    free_weights: bool,
):
    """One EM step of the structural likelihood; ``info.objective`` is its value.

    The E-step gives the posterior ``r_it`` given everything observed in row ``i``;
    the M-step updates the free class weights (means of ``r``), the logit
    coefficients (a few Newton steps, a generalized EM) and every component (its
    family's weighted M-step).
    """
    lj = log_joint(state, components, fixed_log, design)
    top = row_max(lj)[:, None]
    top = np.where(np.isfinite(top), top, 0.0)
    resp = np.exp(lj - top)
    total = row_sum(resp)[:, None]
    norm = top + np.log(total)
    resp /= total
    weights, beta = state.weights, state.beta
    if beta is not None:
        beta, _ = mlogit_newton(design, resp, beta, max_steps=MLOGIT_STEPS)
    elif free_weights:
        weights = resp.mean(axis=0)
    thetas = tuple(
        c.family.mstep(c.y, c.observed, resp, fl)
        for c, fl in zip(components, aux, strict=True)
    )
    return StructuralState(weights, beta, thetas), StructuralEMInfo(float(norm.sum()), 1)


# -------------------------------------------------------------------- the scores


def _component_rows(comp: Component, theta, resp):
    """Per-row score in the flat ``theta`` of a component, (S, T * P)."""
    s = comp.family.score(comp.y, comp.observed, theta)  # (S, T, P)
    return (resp[:, :, None] * s).reshape(s.shape[0], -1)


def total_score(state, components, fixed_log, design, *, resp=None):
    """Per-row scores of the structural likelihood in every parameter block.

    Returns a list of (S, size) arrays, one per block in the order: the class weights
    (when ``state.weights`` is not None; in the flat ``weights``), the logit
    coefficients (when ``state.beta`` is not None; ``beta[:, 1:]`` row-major), then
    every component's flat ``theta``. With ``resp=None`` the weights are the
    posterior class probabilities (the score of the marginal log-likelihood, Louis
    1982); a given ``resp`` (S, T) makes them the score of the weighted estimating
    equations (the BCH estimator).
    """
    if resp is None:
        lj = log_joint(state, components, fixed_log, design)
        resp = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))
    blocks = []
    if state.weights is not None:
        with np.errstate(divide="ignore"):
            inv = np.where(state.weights > 0, 1.0 / state.weights, 0.0)
        blocks.append(resp * inv)
    if state.beta is not None:
        prior = np.exp(class_log_prior(design, state.beta))
        n_row = resp.sum(axis=1, keepdims=True)
        g = (resp - n_row * prior)[:, 1:]  # (S, T-1)
        blocks.append((design[:, :, None] * g[:, None, :]).reshape(design.shape[0], -1))
    for comp, theta in zip(components, state.thetas, strict=True):
        blocks.append(_component_rows(comp, theta, resp))
    return blocks
