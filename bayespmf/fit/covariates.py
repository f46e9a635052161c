r"""Latent-class regression: covariates on class membership, fitted in one step by EM.

:func:`fit_latent_class_regression` is the public fit function of the model

.. math:: \Pr(x_s \mid z_s) = \sum_{f=1}^F \operatorname{softmax}(z_s^\top \beta)_f
   \prod_{n \text{ observed}} A_n(x_{sn}, f), \qquad \beta_{\cdot, 0} = 0,

(Dayton & Macready 1988; Bandeen-Roche et al. 1997; the "one-step" approach of Vermunt
2010): the class prior of every row depends on its covariates through a multinomial
logit with class 0 as the reference. It starts from the covariate-free maximum
likelihood estimate (:func:`bayespmf.fit.fit_latent_class`, ``method="auto"``), with
:math:`\beta` set to reproduce its class weights, runs the EM step of
:mod:`bayespmf.kernels.covariates` under :func:`bayespmf.fit.loop.iterate`, and
computes standard errors of :math:`\beta` from the observed information.
:func:`predict_class_proba` gives the posterior class probabilities of rows under a
fitted model, :func:`class_prior_proba` the covariate-implied priors.
"""

from __future__ import annotations

import itertools
import warnings
from typing import NamedTuple

import numpy as np
import scipy.linalg

from bayespmf._validation import (
    ConvergenceWarning,
    as_codes,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.fit.latent_class import fit_latent_class, rescaled_fit
from bayespmf.fit.loop import iterate, predicted_gain
from bayespmf.fit.source import check_sample_weight, float_array, unit_mean_weights
from bayespmf.kernels.covariates import (
    MAX_HALVINGS,
    NEWTON_STEPS,
    CovariateEMState,
    build_covariate_em_kernel,
    class_log_prior,
    covariate_log_joint,
    covariate_loglik,
    covariate_score,
    mlogit_newton,
    prepare_covariate_data,
)
from bayespmf.pmf import split_factors, stack_factors

__all__ = [
    "BOUNDARY",
    "DEFAULT_COVARIATE_MAX_ITER",
    "DEFAULT_N_STARTS",
    "DEFAULT_COVARIATE_TOL",
    "FD_STEP",
    "LatentClassRegressionFit",
    "LatentClassRegressionParams",
    "MAX_LOG_GROWTH",
    "POLISH_STEPS",
    "SEPARATION_LOGIT",
    "check_covariates",
    "class_prior_proba",
    "covariate_values",
    "fit_latent_class_regression",
    "newton_polish",
    "predict_class_proba",
    "beta_standard_errors",
]

#: Iteration cap and tolerance of the covariate EM. The tolerance is tighter than the
#: 1e-8 of ``method="auto"``: the EM starts at the covariate-free optimum, so its
#: iterations are few and cheap next to that multi-start fit, and at 1e-8 beta was still
#: visibly short of its limit on the StepMix comparison (benchmarks/lca_covariates.py;
#: :ref:`bench-covariates`).
DEFAULT_COVARIATE_MAX_ITER = 2000
DEFAULT_COVARIATE_TOL = 1e-10

#: The EM loop stops only once no factor entry grows by more than this log-factor per
#: step (besides the Aitken rule of :mod:`bayespmf.fit.loop`): an entry leaving the
#: boundary grows geometrically from ~1e-10 while the log-likelihood barely moves, then
#: gains; on the StepMix comparison the Aitken rule alone stopped short while one entry
#: was still growing (:ref:`bench-covariates`).
MAX_LOG_GROWTH = 1e-3

#: A class whose linear predictor ``|z beta_f|`` (against the reference class) exceeds
#: this on some row is reported as separated by the covariates: prior odds beyond
#: e^15 ~ 3e6 mean the likelihood keeps rising as beta_f grows without bound.
SEPARATION_LOGIT = 15.0

#: Distinct covariate-free optima (best first) the covariate EM is started from: the
#: best one is where the covariate model usually ends; the next ones are cheap
#: insurance against covariates that favour another labelling of the classes.
DEFAULT_N_STARTS = 3

#: Newton steps that fit beta to the start's class weights (a constant outcome; with an
#: intercept the first step is exact up to rounding, without one a few more are needed).
INIT_NEWTON_STEPS = 50

#: Central-difference step of the numerical Hessian, in units of the parameter's scale
#: (the covariate's root mean square for beta, 1 for a logit): the truncation error is
#: O(FD_STEP^2) ~ 1e-8 relative, the rounding error O(1e-16 S / FD_STEP), far smaller.
FD_STEP = 1e-4

#: Conditional probabilities below this are at the boundary of the parameter space:
#: they are held fixed in the observed information (as Mplus and poLCA do), where their
#: logit would make the information singular.
BOUNDARY = 1e-7

#: Cap on the Newton steps of :func:`newton_polish`; from a converged EM estimate one
#: to three steps reach the tolerance (quadratic convergence), the cap bounds the cost
#: (each step costs two E-steps per free parameter).
POLISH_STEPS = 10


class LatentClassRegressionParams(NamedTuple):
    r"""Parameters of a latent-class regression model.

    Attributes
    ----------
    beta : ndarray, shape (D, F)
        Multinomial-logit coefficients of the class prior; row 0 is the intercept when
        one was fitted, column 0 (the reference class) is 0.
    factors : list of ndarray, each (I_n, F)
        Conditional PMFs :math:`A_n(i, f) = \Pr(x_n = i \mid H = f)`.
    """

    beta: np.ndarray
    factors: list


class LatentClassRegressionFit(NamedTuple):
    """What :func:`fit_latent_class_regression` returns.

    Attributes
    ----------
    params : LatentClassRegressionParams
    loglik : float
        Log-likelihood of ``params`` (weighted by ``sample_weight``).
    n_iter : int
        EM iterations of the best start.
    loglik_trace : ndarray, shape (n_iter,)
        Objective at the start of every iteration of the best start (non-decreasing).
    converged : bool
    stderr : ndarray, shape (D, F) or None
        Standard errors of ``params.beta`` (NaN in the reference column); None when
        not requested.
    loglik_start : float
        Log-likelihood of the covariate-free MLE the fit started from (with no
        covariates but the intercept the two coincide).
    info : dict
        ``"starts"``: ``(loglik, n_iter, converged)`` of every start; ``"base"``: the
        covariate-free :class:`~bayespmf.fit.LatentClassFit`; ``"covariance"``: the
        inverse observed information of the free beta entries (D x (F-1), row-major)
        when standard errors were computed; ``"fit_intercept"``; ``"newton_steps"``
        of :func:`newton_polish`.
    """

    params: LatentClassRegressionParams
    loglik: float
    n_iter: int
    loglik_trace: np.ndarray
    converged: bool
    stderr: np.ndarray | None
    loglik_start: float
    info: dict


# ------------------------------------------------------------------------ validation

_NUMERIC = "a numeric array or DataFrame of shape (n_rows, n_covariates)"
_ENCODE_FIX = (
    " Encode categorical covariates first, e.g. with pandas.get_dummies(..., "
    "drop_first=True)."
)


def covariate_values(covariates, owner: str) -> np.ndarray:
    """The float values of covariates (a DataFrame's), with the fix for text columns.

    Examples
    --------
    >>> import pandas as pd
    >>> covariate_values(pd.DataFrame({"z": [1, 2]}), owner="f")
    array([[1.],
           [2.]])
    """
    return float_array(covariates, "covariates", owner, _NUMERIC, _ENCODE_FIX)


def check_covariates(
    covariates,
    n_rows: int,
    *,
    fit_intercept: bool,
    owner: str,
    check_n_components: bool = True,
):
    """The design matrix: ``covariates`` as float (S, D0), checked, intercept prepended.

    ``check_n_components=False`` (predictions) skips the collinearity check: beta is already
    identified by the fit, and one new row, or rows with a constant covariate, are
    legitimate input there.

    Raises
    ------
    ValueError
        Not numeric, not 1-D/2-D, a row count other than ``n_rows``, non-finite values,
        or (``check_n_components``) columns that are collinear (with the intercept, when one
        is
        fitted).

    Examples
    --------
    >>> check_covariates([[1.0], [2.0], [4.0]], 3, fit_intercept=True, owner="f")
    array([[1., 1.],
           [1., 2.],
           [1., 4.]])
    """
    z = covariate_values(covariates, owner)
    if z.ndim == 1:
        z = z[:, None]
    if z.ndim != 2 or z.shape[0] != n_rows:
        raise ValueError(
            f"The 'covariates' parameter of {owner} must have one row per row of "
            f"'data' ({n_rows}); got shape {z.shape}. Pass an (n_rows, n_covariates) "
            "array in the order of the rows of 'data'."
        )
    bad = ~np.isfinite(z)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise ValueError(
            f"The 'covariates' parameter of {owner} must be finite; {rows.size} row(s) "
            f"hold NaN or inf (first: {rows[:5].tolist()}). Impute or drop those rows "
            "(from 'data' too) first."
        )
    if fit_intercept:
        z = np.concatenate([np.ones((n_rows, 1)), z], axis=1)
    if z.shape[1] == 0:
        raise ValueError(
            f"The 'covariates' parameter of {owner} has no columns and "
            "fit_intercept=False: the class prior would be uniform. Pass "
            "fit_intercept=True or at least one covariate."
        )
    n_components = np.linalg.matrix_rank(z) if check_n_components else z.shape[1]
    if n_components < z.shape[1]:
        with_icpt = " (a constant column duplicates the intercept)" if fit_intercept else ""
        raise ValueError(
            f"The 'covariates' parameter of {owner} has collinear columns{with_icpt}: "
            f"the design has {z.shape[1]} columns but rank {n_components}, so beta is not "
            "identified. Drop redundant columns (or pass fit_intercept=False if "
            "'covariates' already holds a constant)."
        )
    return z


# --------------------------------------------------------------------- predictions


def class_prior_proba(covariates, beta, *, fit_intercept: bool = True) -> np.ndarray:
    r"""Class priors :math:`\operatorname{softmax}(z_s^\top \beta)` of every row, (S, F).

    Examples
    --------
    >>> beta = np.array([[0.0, np.log(3.0)], [0.0, 0.0]])
    >>> class_prior_proba([[0.0], [5.0]], beta)
    array([[0.25, 0.75],
           [0.25, 0.75]])
    """
    beta = np.asarray(beta, dtype=np.float64)
    z = check_covariates(
        covariates,
        np.shape(np.atleast_1d(covariates))[0],
        fit_intercept=fit_intercept,
        owner="class_prior_proba",
        check_n_components=False,
    )
    if z.shape[1] != beta.shape[0]:
        raise ValueError(
            f"The 'covariates' parameter of class_prior_proba gives {z.shape[1]} design "
            f"columns (intercept included: {fit_intercept}) but 'beta' has "
            f"{beta.shape[0]} rows. Pass the covariates the model was fitted with."
        )
    return np.exp(class_log_prior(z, beta))


def predict_class_proba(
    data, covariates, params, *, fit_intercept: bool = True
) -> np.ndarray:
    r"""Posterior class probabilities :math:`\Pr(H_s = f \mid x_s, z_s)`, (S, F).

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        ``-1`` marks missing entries; an all-missing row gets its prior.
    covariates : array_like, shape (S, D0)
    params : LatentClassRegressionParams
    fit_intercept : bool, default True
        As in the fit.

    Examples
    --------
    >>> params = LatentClassRegressionParams(
    ...     np.zeros((1, 2)), [np.array([[0.9, 0.2], [0.1, 0.8]])])
    >>> predict_class_proba([[0], [-1]], np.zeros((2, 0)), params).round(3)
    array([[0.818, 0.182],
           [0.5  , 0.5  ]])
    """
    beta, factors = params
    factors = [np.asarray(a, dtype=np.float64) for a in factors]
    codes, n_cat = as_codes(
        data, [a.shape[0] for a in factors], name="data", allow_empty_columns=True
    )
    z = check_covariates(
        covariates,
        codes.shape[0],
        fit_intercept=fit_intercept,
        owner="predict_class_proba",
        check_n_components=False,
    )
    if z.shape[1] != np.shape(beta)[0]:
        raise ValueError(
            f"The 'covariates' parameter of predict_class_proba gives {z.shape[1]} "
            f"design columns but 'beta' has {np.shape(beta)[0]} rows. Pass the "
            "covariates the model was fitted with."
        )
    d = prepare_covariate_data(codes, n_cat, z)
    lj = covariate_log_joint(d, beta, stack_factors(factors))
    m = lj.max(axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(lj - m)
    return e / np.maximum(e.sum(axis=1, keepdims=True), np.finfo(float).tiny)


# ----------------------------------------------------------------- standard errors


def _free_layout(a, offsets):
    """Reference (modal) category and free entries of every factor column."""
    ref = np.zeros(a.shape, dtype=bool)
    for lo, hi in itertools.pairwise(offsets):
        ref[lo + np.argmax(a[lo:hi], axis=0), np.arange(a.shape[1])] = True
    free = ~ref & (a >= BOUNDARY)
    return free


def _factors_from_logits(log_a, offsets):
    m = np.maximum.reduceat(log_a, offsets[:-1], axis=0)
    e = np.exp(log_a - np.repeat(m, np.diff(offsets), axis=0))
    s = np.add.reduceat(e, offsets[:-1], axis=0)
    return e / np.repeat(s, np.diff(offsets), axis=0)


class _Information(NamedTuple):
    """The observed information at one point, in the free parametrization."""

    theta: np.ndarray
    score: np.ndarray
    information: np.ndarray
    unpack: object  # theta -> (beta, factors_stacked)
    n_beta: int


def _observed_information(data, beta, factors_stacked, ridge=0.0) -> _Information:
    """Score and minus the Hessian of the (penalized) log-likelihood, all free params.

    Free parameters: ``beta[:, 1:]`` and, per factor column, the logits of every
    category but the modal one (entries below ``BOUNDARY`` held fixed). Minus the
    Hessian is the central-difference Jacobian of the exact score, symmetrized.
    """
    beta = np.asarray(beta, dtype=np.float64)
    a = np.asarray(factors_stacked, dtype=np.float64)
    n_dim, n_cls = beta.shape
    n_beta = n_dim * (n_cls - 1)
    free = _free_layout(a, data.offsets)
    n_eta = int(free.sum())
    scale = np.sqrt(np.mean(data.design**2, axis=0))
    scale[scale == 0] = 1.0
    steps = np.concatenate([np.repeat(FD_STEP / scale, n_cls - 1), np.full(n_eta, FD_STEP)])
    log_a = np.log(np.maximum(a, np.finfo(float).tiny))

    def unpack(theta):
        b = beta.copy()
        b[:, 1:] = theta[:n_beta].reshape(n_dim, n_cls - 1)
        la = log_a.copy()
        la[free] = theta[n_beta:]
        return b, _factors_from_logits(la, data.offsets)

    def score(theta):
        b, a_t = unpack(theta)
        gb, ge = covariate_score(data, b, a_t)
        return np.concatenate([gb[:, 1:].ravel() - ridge * theta[:n_beta], ge[free]])

    theta0 = np.concatenate([beta[:, 1:].ravel(), log_a[free]])
    n_par = theta0.size
    hess = np.empty((n_par, n_par))
    for j in range(n_par):
        e = np.zeros(n_par)
        e[j] = steps[j]
        hess[:, j] = (score(theta0 + e) - score(theta0 - e)) / (2.0 * steps[j])
    info = -0.5 * (hess + hess.T)
    return _Information(theta0, score(theta0), info, unpack, n_beta)


def beta_standard_errors(data, beta, factors_stacked):
    """Standard errors of beta from the observed information, jointly with the factors.

    The observed information is minus the Hessian of the marginal log-likelihood in
    all free parameters at once: the free beta entries and, per factor column, the
    logits of every category but the modal one (entries below ``BOUNDARY`` are held
    fixed, as Mplus and poLCA do). The Hessian is the central-difference Jacobian of
    the exact score (:func:`bayespmf.kernels.covariates.covariate_score`; Louis 1982),
    symmetrized; its inverse's beta block is the covariance of beta, so the factors'
    uncertainty is accounted for.

    Parameters
    ----------
    data : CovariateData
    beta : ndarray, shape (D, F)
    factors_stacked : ndarray, shape (sum I_n, F)

    Returns
    -------
    stderr : ndarray, shape (D, F)
        NaN in column 0 (fixed at 0), and everywhere if the information is singular.
    covariance : ndarray, shape (D (F-1), D (F-1))
        Covariance of the free beta entries, ``beta[:, 1:]`` in row-major order.
    """
    obs = _observed_information(data, beta, factors_stacked)
    n_dim, n_cls = np.shape(beta)
    n_beta = obs.n_beta
    stderr = np.full((n_dim, n_cls), np.nan)
    try:
        cov_all = np.linalg.inv(obs.information)
    except np.linalg.LinAlgError:
        return stderr, np.full((n_beta, n_beta), np.nan)
    cov = cov_all[:n_beta, :n_beta]
    var = np.diag(cov)
    if np.all(var > 0):
        stderr[:, 1:] = np.sqrt(var).reshape(n_dim, n_cls - 1)
    return stderr, cov


def newton_polish(data, beta, factors_stacked, *, tol, ridge=0.0, max_steps=POLISH_STEPS):
    """Newton steps on the marginal log-likelihood from an EM estimate (safeguarded).

    EM converges linearly, slowly along directions of high missing information;
    Newton's method with the observed information (:func:`beta_standard_errors`'
    parametrization, entries below ``BOUNDARY`` held fixed) converges quadratically
    from where EM stopped. Each
    step is halved until the (penalized) log-likelihood rises; the polish stops when
    the predicted gain ``g' I^-1 g / 2`` is at most ``tol * max(|L|, 1)``, when the
    information is not positive definite (then the EM estimate is kept), or after
    ``max_steps``.

    Returns
    -------
    beta, factors_stacked : ndarray
    n_steps : int
        Newton steps accepted.
    """

    def objective(b, a):
        ll = covariate_loglik(data, b, a)
        return ll - 0.5 * ridge * float(np.sum(b[:, 1:] ** 2))

    current = objective(beta, factors_stacked)
    n_steps = 0
    for _ in range(int(max_steps)):
        obs = _observed_information(data, beta, factors_stacked, ridge)
        try:
            chol = scipy.linalg.cho_factor(obs.information)
        except scipy.linalg.LinAlgError:
            break
        delta = scipy.linalg.cho_solve(chol, obs.score)
        if not 0.5 * float(obs.score @ delta) > tol * max(abs(current), 1.0):
            break
        t = 1.0
        for _ in range(MAX_HALVINGS):
            b_new, a_new = obs.unpack(obs.theta + t * delta)
            value = objective(b_new, a_new)
            if value > current:
                break
            t *= 0.5
        else:
            break
        beta, factors_stacked, current = b_new, a_new, value
        n_steps += 1
    return beta, factors_stacked, n_steps


# ---------------------------------------------------------------------- public entry


def _stopping_rule(trace, info, tol) -> bool:
    """Aitken's predicted gain within ``tol`` and no factor entry leaving the boundary."""
    if predicted_gain(trace) > tol * max(abs(trace[-1]), 1.0):
        return False
    return info.max_log_growth <= MAX_LOG_GROWTH


def _start_beta(design, weights, row_weight):
    """Beta whose priors best reproduce the class weights (exact with an intercept)."""
    resp_w = np.broadcast_to(weights, (design.shape[0], weights.size)) * row_weight[:, None]
    beta, _ = mlogit_newton(
        design,
        resp_w,
        np.zeros((design.shape[1], weights.size)),
        max_steps=INIT_NEWTON_STEPS,
    )
    return beta


def fit_latent_class_regression(
    data,
    covariates,
    n_components: int,
    *,
    n_categories=None,
    fit_intercept: bool = True,
    n_init: int | None = None,
    n_starts: int = DEFAULT_N_STARTS,
    ridge: float = 0.0,
    stderr: bool = True,
    polish: bool = True,
    max_iter: int = DEFAULT_COVARIATE_MAX_ITER,
    tol: float = DEFAULT_COVARIATE_TOL,
    random_state=None,
    sample_weight=None,
    progressbar: bool = False,
    owner: str = "fit_latent_class_regression",
) -> LatentClassRegressionFit:
    r"""Fit a latent-class model whose class prior depends on covariates (one step).

    Maximizes the likelihood of :math:`\Pr(x_s \mid z_s) = \sum_f
    \operatorname{softmax}(z_s^\top \beta)_f \prod_n A_n(x_{sn}, f)` over
    :math:`\beta` (class 0 the reference, fixed at 0) and the factors, by EM
    (module docstring of :mod:`bayespmf.kernels.covariates`).

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        ``-1`` marks missing entries (marginalized out).
    covariates : array_like of float, shape (S,) or (S, D0)
        Covariates of every row, in the order of ``data``; finite. ``(S, 0)`` with
        ``fit_intercept=True`` is the covariate-free model.
    n_components : int
        Number of latent classes F.
    n_categories : sequence of int, optional
        Alphabet sizes (taken from ``data`` when it is a CategoricalData).
    fit_intercept : bool, default True
        Prepend a column of ones to ``covariates`` (row 0 of ``beta``).
    n_init : int, optional
        Starts of the covariate-free multi-start fit the covariate EM starts from
        (:func:`bayespmf.fit.fit_latent_class`, ``method="auto"``; its default when
        None).
    n_starts : int, default DEFAULT_N_STARTS
        The covariate EM is run from the best ``n_starts`` distinct covariate-free
        optima (fewer if fewer were found), ``beta`` fitted to each one's class
        weights; the highest log-likelihood is kept.
    ridge : float, default 0
        Ridge :math:`\rho` on the non-reference coefficients in the beta M-step (the
        penalized log-likelihood :math:`\ell - \frac{\rho}{2}\lVert\beta\rVert^2` is
        then maximized); 0 is the maximum-likelihood estimate. A tiny value (e.g.
        1e-6) keeps the fit finite when a class separates perfectly on a covariate.
    stderr : bool, default True
        Compute standard errors of ``beta`` (:func:`beta_standard_errors`: observed
        information, jointly with the factors; costs two E-steps per free parameter).
    polish : bool, default True
        Finish the best EM estimate with safeguarded Newton steps on the marginal
        log-likelihood (:func:`newton_polish`; each costs two E-steps per free
        parameter), which removes what linear EM convergence leaves undone.
    max_iter, tol : int, float
        Iteration cap and tolerance of the EM loop: the Aitken rule of
        :mod:`bayespmf.fit.loop`, and no factor entry growing by more than
        ``MAX_LOG_GROWTH`` per step (one leaving the boundary).
    random_state : None, int or numpy.random.Generator
        Seeds the covariate-free multi-start fit (the only random part).
    sample_weight : array_like, shape (S,), optional
        A weight per row: ``sum_s w_s log Pr(x_s | z_s)`` is maximized.
    progressbar : bool, default False
    owner : str
        Name used in messages (an estimator passes its own).

    Returns
    -------
    LatentClassRegressionFit

    Raises
    ------
    ValueError
        Invalid ``data`` (``DataValidationError``), ``covariates`` (wrong row count,
        non-finite, collinear), ``n_components``, ``n_starts``, ``ridge``, ``max_iter``,
        ``tol`` or ``sample_weight``.

    Warns
    -----
    ConvergenceWarning
        When the best start stopped at ``max_iter``.
    LocalOptimumWarning
        From the covariate-free multi-start fit.

    Notes
    -----
    The E-step gives the responsibilities :math:`r_{sf} \propto \pi_f(z_s) \prod_n
    A_n(x_{sn}, f)`; the M-step updates the factors by weighted counts and
    :math:`\beta` by Newton steps on the weighted multinomial logit of the
    responsibilities (Bandeen-Roche et al. 1997, Sec. 3; Vermunt 2010, Sec. 2). The
    start is the covariate-free MLE with the slopes at 0 and the intercepts at
    :math:`\log \lambda_f / \lambda_0`, so the covariate fit begins at the
    covariate-free optimum's log-likelihood and can only rise from it.

    Standard errors: the inverse observed information (numerical Hessian of the
    marginal log-likelihood in all free parameters, :func:`beta_standard_errors`), not the
    information with the factors held fixed, which understates them.

    References
    ----------
    .. [1] K. Bandeen-Roche, D. L. Miglioretti, S. L. Zeger and P. J. Rathouz, "Latent
       variable regression for multiple discrete outcomes," JASA 92(440), 1997.
    .. [2] J. K. Vermunt, "Latent class modeling with covariates: two improved
       three-step approaches," Political Analysis 18(4), 2010.
    .. [3] T. A. Louis, "Finding the observed information matrix when using the EM
       algorithm," JRSS B 44(2), 1982.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(600, 1))
    >>> h = (rng.random(600) < 1 / (1 + np.exp(-2 * z[:, 0]))).astype(int)
    >>> a = np.array([[0.85, 0.15], [0.15, 0.85]])  # P(x = i | h)
    >>> x = (rng.random((600, 4)) < a[1, h][:, None]).astype(int)
    >>> fit = fit_latent_class_regression(x, z, 2, n_init=10, random_state=0)
    >>> fit.params.beta.shape, fit.converged
    ((2, 2), True)
    >>> bool(abs(abs(fit.params.beta[1, 1]) - 2) < 3 * fit.stderr[1, 1])
    True
    """
    codes, n_cat = as_codes(data, n_categories, name="data")
    n_rows = codes.shape[0]
    design = check_covariates(
        covariates, n_rows, fit_intercept=bool(fit_intercept), owner=owner
    )
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
    n_starts = check_int(n_starts, "n_starts", owner=owner, low=1)
    ridge = check_float(ridge, "ridge", owner=owner, low=0.0)
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    weight = (
        None if sample_weight is None else check_sample_weight(sample_weight, n_rows, owner)
    )
    scale = 1.0
    if weight is not None:
        # the fit runs on weights of mean 1 (scale-invariant stopping rules) with the
        # ridge scaled alike, so it maximizes the caller's penalized objective divided
        # by ``scale``; the log-likelihoods and the information are scaled back below
        weight, scale = unit_mean_weights(weight)
    ridge_fit = ridge / scale
    rng = check_random_state(random_state)
    base = fit_latent_class(
        codes,
        n_components,
        n_categories=n_cat,
        n_init=n_init,
        random_state=rng,
        sample_weight=weight,
        owner=owner,
    )
    cdata = prepare_covariate_data(codes, n_cat, design, weight)
    step = build_covariate_em_kernel(cdata, ridge=ridge_fit, newton_steps=NEWTON_STEPS)
    optima = base.optima_params or [base.params]
    results = []
    for start in optima[:n_starts]:
        beta0 = _start_beta(design, np.asarray(start.weights), cdata.row_weight)
        state, it = iterate(
            step,
            CovariateEMState(beta0, stack_factors(start.factors), -np.inf),
            max_iter=max_iter,
            tol=tol,
            progressbar=progressbar,
            desc="covariate EM",
            owner=owner,
            warn=False,
            rule=_stopping_rule,
        )
        loglik = covariate_loglik(cdata, state.beta, state.factors_stacked)
        penalty = 0.5 * ridge_fit * float(np.sum(state.beta[:, 1:] ** 2))
        results.append((loglik, state, it, loglik - penalty))
    best = int(np.argmax([r[3] for r in results]))
    loglik, state, it, _ = results[best]
    if not it.converged:
        warnings.warn(
            f"{owner} did not converge in max_iter={max_iter} iterations: the "
            f"log-likelihood was still rising by more than tol={tol} allows. Increase "
            "'max_iter' or loosen 'tol'.",
            ConvergenceWarning,
            stacklevel=2,
        )
    info = {
        "starts": [(r[0], r[2].n_iter, r[2].converged) for r in results],
        "base": base,
        "fit_intercept": bool(fit_intercept),
        "newton_steps": 0,
    }
    if polish:
        beta, a, info["newton_steps"] = newton_polish(
            cdata, state.beta, state.factors_stacked, tol=tol, ridge=ridge_fit
        )
        state = CovariateEMState(beta, a, state.loglik)
        loglik = covariate_loglik(cdata, beta, a)
    eta = np.abs(design @ state.beta).max(axis=0)  # (F,): largest |logit| vs class 0
    separated = np.flatnonzero(eta > SEPARATION_LOGIT)
    if separated.size:
        warnings.warn(
            f"{owner}: the covariates (nearly) perfectly separate class(es) "
            f"{separated.tolist()} from the reference class 0: their linear predictors "
            f"reach |z beta| = {eta[separated].max():.3g} (> {SEPARATION_LOGIT}, a prior "
            "odds ratio beyond e^15). The maximum-likelihood beta of a separated class is "
            "infinite and its standard errors are meaningless (quasi-complete "
            "separation). Pass ridge > 0 (e.g. ridge=1.0) for finite, shrunken "
            "coefficients, or drop or merge the separating covariate.",
            UserWarning,
            stacklevel=2,
        )
    se = None
    if stderr:
        se, info["covariance"] = beta_standard_errors(
            cdata, state.beta, state.factors_stacked
        )
    params = LatentClassRegressionParams(
        np.array(state.beta), split_factors(state.factors_stacked, n_cat)
    )
    if scale != 1.0:  # back on the caller's weights (information scales with them)
        info["starts"] = [(ll * scale, n, ok) for ll, n, ok in info["starts"]]
        info["base"] = rescaled_fit(base, scale, loglik_trace=True)
        if se is not None:
            se = se / np.sqrt(scale)
            info["covariance"] = info["covariance"] / scale
    return LatentClassRegressionFit(
        params,
        loglik * scale,
        it.n_iter,
        np.asarray(it.trace, dtype=float) * scale,
        it.converged,
        se,
        base.loglik * scale,
        info,
    )
