r"""EM for the latent-class model with covariates on class membership (LCA regression).

The "one-step" latent-class regression model (Dayton & Macready 1988; Bandeen-Roche,
Miglioretti, Zeger & Rathouz 1997; Vermunt 2010) lets the class prior depend on
covariates :math:`z_s` (a row of the design, intercept included) through a multinomial
logit,

.. math:: \Pr(H_s = f \mid z_s) = \pi_f(z_s) =
   \frac{\exp(z_s^\top \beta_f)}{\sum_g \exp(z_s^\top \beta_g)}, \qquad \beta_0 = 0,

while the items stay conditionally independent given the class,
:math:`\Pr(x_s \mid H_s = f) = \prod_{n \text{ observed}} A_n(x_{sn}, f)`; missing
entries are marginalized out (their factor drops from the product). Class 0 is the
reference: its coefficients are fixed at 0 so that :math:`\beta` is identified.

This module holds the pure pieces: :func:`covariate_em_step` maps a
:class:`CovariateEMState` to the next one and reports the log-likelihood of the state
it was given; :func:`build_covariate_em_kernel` binds it to one data set as
``step(state) -> (state, info)`` for the loop of :mod:`bayespmf.fit.loop`;
:func:`mlogit_newton` is the M-step for :math:`\beta`; :func:`covariate_score` the
gradient of the marginal log-likelihood (used for standard errors). The public driver
is :func:`bayespmf.fit.covariates.fit_latent_class_regression`.

Notes
-----
**E-step** (log space). With the one-hot design ``O`` of the observed entries
(:func:`bayespmf.pmf.one_hot_design`), the class log-joint of every row is
``L = O @ log A + log softmax(Z beta)``; the responsibilities are
:math:`r_{sf} = \exp(L_{sf} - \operatorname{logsumexp}_g L_{sg})` (max-shifted) and the
row's log-likelihood is the log-sum-exp. All of it is sparse and dense matrix algebra:
no Python loop over rows. (The numba E-step of :mod:`bayespmf.kernels.em_numba` shares
one class prior between all rows, so it cannot be reused here.)

**M-step for A** is the weighted count update of the covariate-free EM (Chege et al.,
eq. (6)): ``K = O.T @ (w r)``, ``A = (K + c) / colsum_n(K + c)`` with the pseudo-count
``c = COUNT_FLOOR`` of :mod:`bayespmf.kernels.em`.

**M-step for beta** maximizes the expected complete-data log-likelihood

.. math:: Q(\beta) = \sum_s w_s \sum_f r_{sf} \log \pi_f(z_s)
   - \tfrac{\rho}{2} \lVert \beta \rVert^2,

a weighted multinomial logit with the responsibilities as fractional outcomes, concave
in :math:`\beta` (Bandeen-Roche et al. 1997, Sec. 3; Vermunt 2010, eq. (3)). It is
solved by Newton's method warm-started at the current :math:`\beta`, with step halving
so that :math:`Q` never decreases; EM with such an M-step is a generalized EM and the
log-likelihood (penalized when :math:`\rho > 0`) is non-decreasing. The ridge
:math:`\rho` (default 0) is optional: it keeps the Newton system non-singular when a
class empties or the responsibilities separate perfectly.

References
----------
.. [1] K. Bandeen-Roche, D. L. Miglioretti, S. L. Zeger and P. J. Rathouz, "Latent
   variable regression for multiple discrete outcomes," JASA 92(440), 1997.
.. [2] J. K. Vermunt, "Latent class modeling with covariates: two improved three-step
   approaches," Political Analysis 18(4), 2010.
.. [3] C. M. Dayton and G. B. Macready, "Concomitant-variable latent-class models,"
   JASA 83(401), 1988.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from bayespmf.kernels.em import COUNT_FLOOR, normalize_blocks
from bayespmf.pmf import offsets_of, one_hot_design, row_max, row_sum

__all__ = [
    "MAX_HALVINGS",
    "NEWTON_STEPS",
    "NEWTON_TOL",
    "CovariateData",
    "CovariateEMInfo",
    "CovariateEMState",
    "build_covariate_em_kernel",
    "class_log_prior",
    "covariate_em_step",
    "covariate_log_joint",
    "covariate_loglik",
    "covariate_score",
    "mlogit_newton",
    "prepare_covariate_data",
]

#: Newton steps per M-step for beta. Warm-started at the previous beta, one or two
#: steps solve the M-step to rounding once EM has settled; the cap only bounds the
#: first iterations (a partial M-step still increases Q: generalized EM).
NEWTON_STEPS = 5

#: A Newton step whose decrement g' H^-1 g / 2 (the predicted gain in Q) is below this
#: share of max(|Q|, 1) ends the M-step: further steps change Q at rounding level.
NEWTON_TOL = 1e-13

#: Step halvings tried before a Newton step is given up (2^-30 ~ 1e-9: a direction along
#: which Q cannot be raised by a step that long is not an ascent direction in practice).
MAX_HALVINGS = 30


class CovariateData(NamedTuple):
    """A data set prepared for the covariate EM once, by :func:`prepare_covariate_data`.

    Attributes
    ----------
    onehot : scipy.sparse.csr_matrix, shape (S, sum I_n)
        One-hot design of the observed entries (rows with none observed are zero).
    onehot_t : scipy.sparse.csr_matrix, shape (sum I_n, S)
        Its transpose, in CSR layout for fast products.
    offsets : ndarray of int, shape (N + 1,)
        Block offsets of the variables in the stacked factors.
    design : ndarray, shape (S, D)
        The covariates with the intercept column (if any) already included.
    row_weight : ndarray, shape (S,)
        Weight of each row (1 for plain rows).
    """

    onehot: sp.csr_matrix
    onehot_t: sp.csr_matrix
    offsets: np.ndarray
    design: np.ndarray
    row_weight: np.ndarray


class CovariateEMState(NamedTuple):
    r"""One iterate of the covariate EM.

    Attributes
    ----------
    beta : ndarray, shape (D, F)
        Multinomial-logit coefficients; column 0 (the reference class) is 0.
    factors_stacked : ndarray, shape (sum I_n, F)
        The factors :math:`A_n` stacked row-wise.
    loglik : float
        Log-likelihood of the iterate this state was computed from (``-inf`` for a
        start).
    """

    beta: np.ndarray
    factors_stacked: np.ndarray
    loglik: float


class CovariateEMInfo(NamedTuple):
    """What one :func:`covariate_em_step` reports (read by :func:`bayespmf.fit.iterate`).

    Attributes
    ----------
    objective : float
        Penalized log-likelihood of the state the step was given (the log-likelihood
        when ``ridge`` is 0).
    n_evals : int
        EM maps evaluated (1).
    loglik : float
        Log-likelihood of the state the step was given.
    newton_steps : int
        Newton steps of the beta M-step.
    max_log_growth : float
        Largest ``log A_new - log A_old`` over the factor entries: an entry near 0
        that EM is pulling off the boundary grows by a steady factor per step while
        the log-likelihood hardly moves (yet), which a stopping rule must see.
    """

    objective: float
    n_evals: int
    loglik: float
    newton_steps: int
    max_log_growth: float = 0.0


def prepare_covariate_data(codes, n_categories, design, row_weight=None) -> CovariateData:
    """Build the one-hot design of ``codes`` once and bundle it with ``design``.

    ``codes`` (S, N, ``-1`` missing) and ``design`` (S, D) are assumed validated (the
    public function does that). Rows are kept in order, all-missing ones included.

    Examples
    --------
    >>> d = prepare_covariate_data(np.array([[0, 1], [-1, -1]]), [2, 2], np.ones((2, 1)))
    >>> d.onehot.toarray(), d.offsets
    (array([[1., 0., 0., 1.],
           [0., 0., 0., 0.]]), array([0, 2, 4]))
    """
    onehot = one_hot_design(codes, n_categories)
    design = np.ascontiguousarray(design, dtype=np.float64)
    weight = (
        np.ones(onehot.shape[0])
        if row_weight is None
        else np.asarray(row_weight, dtype=np.float64)
    )
    return CovariateData(onehot, onehot.T.tocsr(), offsets_of(n_categories), design, weight)


def class_log_prior(design, beta) -> np.ndarray:
    r"""Log class priors :math:`\log \operatorname{softmax}(z_s^\top \beta)`, (S, F).

    Examples
    --------
    >>> np.exp(class_log_prior(np.ones((1, 1)), np.array([[0.0, np.log(3.0)]])))
    array([[0.25, 0.75]])
    """
    eta = np.asarray(design, dtype=np.float64) @ np.asarray(beta, dtype=np.float64)
    m = row_max(eta)[:, None]
    m[~np.isfinite(m)] = 0.0
    return eta - (m + np.log(row_sum(np.exp(eta - m))[:, None]))


def covariate_log_joint(data: CovariateData, beta, factors_stacked) -> np.ndarray:
    r"""Class log-joint :math:`\log \pi_f(z_s) + \sum_n \log A_n(x_{sn}, f)`, (S, F)."""
    with np.errstate(divide="ignore"):
        log_a = np.log(np.asarray(factors_stacked, dtype=np.float64))
    return data.onehot @ log_a + class_log_prior(data.design, beta)


def _normalize_rows(log_joint):
    """Row log-likelihoods and responsibilities of a class log-joint (max-shifted).

    A row that every class gives probability 0 has log-likelihood ``-inf`` and zero
    responsibilities (it adds nothing to the counts, as in the numba E-step).
    """
    m = log_joint.max(axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(log_joint - m)
    z = e.sum(axis=1, keepdims=True)
    ok = z > 0
    with np.errstate(divide="ignore"):
        ll_rows = np.log(z[:, 0]) + m[:, 0]
    resp = np.where(ok, e / np.where(ok, z, 1.0), 0.0)
    return ll_rows, resp


def covariate_loglik(data: CovariateData, beta, factors_stacked) -> float:
    r"""Weighted log-likelihood :math:`\sum_s w_s \log \sum_f \exp L_{sf}` of the model.

    Examples
    --------
    >>> d = prepare_covariate_data(np.array([[0], [1]]), [2], np.ones((2, 1)))
    >>> a = np.array([[0.9, 0.2], [0.1, 0.8]])
    >>> round(covariate_loglik(d, np.zeros((1, 2)), a), 4)  # log(0.55) + log(0.45)
    -1.3963
    """
    ll_rows, _ = _normalize_rows(covariate_log_joint(data, beta, factors_stacked))
    w = data.row_weight
    # a weight-0 row that is impossible must not turn the sum into nan (0 * -inf)
    return float(np.sum(np.where(w > 0, w * ll_rows, 0.0)))


def _mlogit_q(eta_fn, beta, resp_w, ridge):
    log_p = eta_fn(beta)
    return float(np.sum(resp_w * log_p) - 0.5 * ridge * np.sum(beta[:, 1:] ** 2)), log_p


def mlogit_newton(
    design,
    resp_w,
    beta,
    *,
    ridge: float = 0.0,
    max_steps: int = NEWTON_STEPS,
):
    r"""Newton steps for a weighted multinomial logit with fractional outcomes.

    Maximizes :math:`Q(\beta) = \sum_s \sum_f R_{sf} \log \pi_f(z_s) - \frac{\rho}{2}
    \lVert \beta_{\cdot, 1:} \rVert^2` over the columns ``1..F-1`` of ``beta`` (column
    0 stays 0), where ``R = resp_w`` holds the weighted responsibilities
    :math:`w_s r_{sf}`. Every step is a Newton step on the concave ``Q``, halved until
    ``Q`` does not decrease.

    Parameters
    ----------
    design : ndarray, shape (S, D)
    resp_w : ndarray, shape (S, F)
        Weighted fractional outcomes (rows need not sum to one).
    beta : ndarray, shape (D, F)
        Start (column 0 is ignored and returned as 0).
    ridge : float, default 0
        :math:`\rho \ge 0`.
    max_steps : int, default NEWTON_STEPS

    Returns
    -------
    beta : ndarray, shape (D, F)
    n_steps : int
        Newton steps taken.

    Notes
    -----
    With :math:`n_s = \sum_f R_{sf}`, the gradient in :math:`\beta_f` is
    :math:`\sum_s (R_{sf} - n_s \pi_{sf}) z_s - \rho \beta_f` and the Hessian block
    :math:`(f, g)` is :math:`-\sum_s n_s \pi_{sf} (\delta_{fg} - \pi_{sg}) z_s z_s^\top
    - \rho \delta_{fg} I`, negative (semi)definite.

    Examples
    --------
    Constant outcomes (0.25, 0.75) on an intercept give ``beta_1 = log 3``:

    >>> b, n = mlogit_newton(np.ones((4, 1)), np.tile([0.25, 0.75], (4, 1)),
    ...                      np.zeros((1, 2)), max_steps=20)
    >>> round(float(b[0, 1]), 8), bool(b[0, 0] == 0)
    (1.09861229, True)
    """
    z = np.asarray(design, dtype=np.float64)
    r = np.asarray(resp_w, dtype=np.float64)
    beta = np.array(beta, dtype=np.float64)
    beta[:, 0] = 0.0
    n_dim, n_cls = beta.shape
    n_free = n_dim * (n_cls - 1)
    if n_free == 0:
        return beta, 0
    n_row = row_sum(r)
    root_n = np.sqrt(n_row)[:, None]
    q, log_p = _mlogit_q(lambda b: class_log_prior(z, b), beta, r, ridge)
    steps = 0
    for _ in range(int(max_steps)):
        p = np.exp(log_p)
        grad = z.T @ (r - n_row[:, None] * p)  # (D, F)
        grad = grad[:, 1:] - ridge * beta[:, 1:]
        # -H[(d,f),(e,g)] = sum_s z_sd z_se n_s pi_sf (delta_fg - pi_sg), as BLAS
        # products: U[s, (d, f)] = sqrt(n_s) pi_sf z_sd gives the outer part U'U
        pf = p[:, 1:] * n_row[:, None]  # (S, F-1): n_s pi_sf
        scaled = p[:, 1:] * root_n
        u = np.empty((z.shape[0], n_dim, n_cls - 1))
        for f in range(n_cls - 1):  # one product per entry, a class at a time
            u[:, :, f] = z * scaled[:, f : f + 1]
        u = u.reshape(z.shape[0], n_free)
        neg_h = -(u.T @ u).reshape(n_dim, n_cls - 1, n_dim, n_cls - 1)
        for f in range(n_cls - 1):
            neg_h[:, f, :, f] += z.T @ (pf[:, f : f + 1] * z)
        neg_h = neg_h.reshape(n_free, n_free)
        neg_h[np.diag_indices(n_free)] += ridge
        g = grad.reshape(n_free)
        try:
            # an ill-conditioned Hessian (separation: beta running off to infinity) is
            # expected, not an error; fit_latent_class_regression warns about it once
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
                delta = scipy.linalg.solve(neg_h, g, assume_a="pos")
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
            delta = np.linalg.lstsq(neg_h, g, rcond=None)[0]
        gain = 0.5 * float(g @ delta)
        if not gain > NEWTON_TOL * max(abs(q), 1.0):
            break
        step = delta.reshape(n_dim, n_cls - 1)
        t = 1.0
        for _ in range(MAX_HALVINGS):
            trial = beta.copy()
            trial[:, 1:] += t * step
            q_new, log_p_new = _mlogit_q(lambda b: class_log_prior(z, b), trial, r, ridge)
            if q_new >= q:
                break
            t *= 0.5
        else:
            break
        beta, q, log_p = trial, q_new, log_p_new
        steps += 1
    return beta, steps


def covariate_em_step(
    state: CovariateEMState,
    data: CovariateData,
    *,
    ridge: float = 0.0,
    newton_steps: int = NEWTON_STEPS,
):
    """One EM step of the latent-class regression model (module Notes).

    Parameters
    ----------
    state : CovariateEMState
    data : CovariateData
    ridge : float, default 0
        Ridge of the beta M-step (:func:`mlogit_newton`).
    newton_steps : int, default NEWTON_STEPS
        Newton steps per beta M-step.

    Returns
    -------
    state : CovariateEMState
        The next iterate; its ``loglik`` is that of the input state.
    info : CovariateEMInfo

    Examples
    --------
    >>> d = prepare_covariate_data(np.array([[0, 0], [1, 1], [0, 0]]), [2, 2],
    ...                            np.c_[np.ones(3), [-1.0, 1.0, -0.5]])
    >>> a = np.full((4, 2), 0.5); a[[0, 2], 0] = 0.7; a[[1, 3], 0] = 0.3
    >>> s0 = CovariateEMState(np.zeros((2, 2)), a, -np.inf)
    >>> s1, info = covariate_em_step(s0, d)
    >>> s2, info2 = covariate_em_step(s1, d)
    >>> bool(info2.loglik >= info.loglik), s1.beta[:, 0].tolist()
    (True, [0.0, 0.0])
    """
    beta = np.asarray(state.beta, dtype=np.float64)
    ll_rows, resp = _normalize_rows(covariate_log_joint(data, beta, state.factors_stacked))
    w = data.row_weight
    loglik = float(np.sum(np.where(w > 0, w * ll_rows, 0.0)))
    resp_w = resp * w[:, None]
    counts = data.onehot_t @ resp_w + COUNT_FLOOR
    a_new = normalize_blocks(counts, data.offsets)
    beta_new, n_newton = mlogit_newton(
        data.design, resp_w, beta, ridge=ridge, max_steps=newton_steps
    )
    objective = loglik - 0.5 * ridge * float(np.sum(beta[:, 1:] ** 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = float(np.max(np.log(a_new) - np.log(state.factors_stacked)))
    return (
        CovariateEMState(beta_new, a_new, loglik),
        CovariateEMInfo(objective, 1, loglik, n_newton, growth),
    )


def build_covariate_em_kernel(
    data: CovariateData, *, ridge: float = 0.0, newton_steps: int = NEWTON_STEPS
):
    """``step(state) -> (state, info)``: :func:`covariate_em_step` bound to ``data``.

    Examples
    --------
    >>> d = prepare_covariate_data(np.array([[0], [1]]), [2], np.ones((2, 1)))
    >>> step = build_covariate_em_kernel(d)
    >>> s, info = step(CovariateEMState(np.zeros((1, 1)), np.full((2, 1), 0.5), -np.inf))
    >>> round(info.objective, 4)  # two rows of probability 1/2
    -1.3863
    """

    def step(state: CovariateEMState):
        return covariate_em_step(state, data, ridge=ridge, newton_steps=newton_steps)

    return step


def covariate_score(data: CovariateData, beta, factors_stacked):
    r"""Gradient of the marginal log-likelihood in beta and in the factors' logits.

    The factors are parametrized per column by logits :math:`\eta_n(k, f) = \log
    A_n(k, f) + c_{nf}`; the gradient in :math:`\eta_n(k, f)` of the log-likelihood is
    the expected-count residual :math:`K_n(k, f) - A_n(k, f) \sum_{k'} K_n(k', f)`
    (Louis 1982: the observed score is the expected complete-data score), and in
    :math:`\beta_f` it is :math:`\sum_s w_s (r_{sf} - \pi_f(z_s)) z_s`.

    Returns
    -------
    grad_beta : ndarray, shape (D, F)
        Column 0 is the gradient in the (fixed) reference class and is not used.
    grad_eta : ndarray, shape (sum I_n, F)

    Examples
    --------
    >>> d = prepare_covariate_data(np.array([[0], [1]]), [2], np.ones((2, 1)))
    >>> gb, ge = covariate_score(d, np.zeros((1, 1)), np.full((2, 1), 0.5))
    >>> gb.tolist(), ge.ravel().tolist()  # the MLE of one class: score 0
    ([[0.0]], [0.0, 0.0])
    """
    beta = np.asarray(beta, dtype=np.float64)
    a = np.asarray(factors_stacked, dtype=np.float64)
    _, resp = _normalize_rows(covariate_log_joint(data, beta, a))
    resp_w = resp * data.row_weight[:, None]
    prior_w = np.exp(class_log_prior(data.design, beta)) * data.row_weight[:, None]
    grad_beta = data.design.T @ (resp_w - prior_w)
    counts = data.onehot_t @ resp_w
    totals = np.add.reduceat(counts, data.offsets[:-1], axis=0)
    grad_eta = counts - a * np.repeat(totals, np.diff(data.offsets), axis=0)
    return grad_beta, grad_eta
