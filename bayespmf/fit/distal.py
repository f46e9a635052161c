r"""Distal outcomes and predictors of class membership after a latent-class fit.

:func:`distal_outcome` and :func:`class_predictors` take a fitted measurement model
(a fitted :class:`~bayespmf.estimators.LatentClassPMF`, or its ``(weights, factors)``)
and estimate a structural model: the class-specific distribution of an outcome
:math:`y` (``family`` ``"gaussian"``, ``"poisson"``, ``"bernoulli"`` or
``"categorical"``), or a multinomial logit of the class on covariates :math:`z`.
The classes keep the meaning the measurement model gave them: the structural step
does not move the measurement parameters (except ``correction="one-step"``).

The estimators (``correction``):

``"none"``
    Naive three-step: each row is put in its modal class :math:`W_i` and the
    structural model is fitted as if :math:`W_i` were the class. Biased towards no
    class differences whenever classification is imperfect; kept to show that bias.
``"bch"``
    Bolck, Croon & Hagenaars (2004) as generalized by Vermunt (2010): with the
    classification-error matrix :math:`D_{ts} = \Pr(W = s \mid X = t)` estimated from
    the posterior class probabilities (Vermunt 2010, eq. 6), row :math:`i` enters the
    class-:math:`t` estimate with weight :math:`(D^{-1})_{W_i t}`; the weighted
    estimating equations are solved in closed form (weighted means, variances, rates,
    proportions). Weights can be negative; a negative category count is clipped to 0.
``"ml"``
    Vermunt's (2010) ML three-step: maximize
    :math:`\sum_i \log \sum_t \Pr(X = t)\, D_{t W_i}\, f(y_i \mid t)` with :math:`D`
    fixed (Bakk, Tekle & Vermunt 2013), by EM.
``"two-step"``
    Bakk & Kuha (2018): the measurement parameters fixed at the first step's
    estimate, the structural model fitted by ML with the full indicator likelihood
    :math:`\sum_i \log \sum_t \Pr(X = t) \Pr(x_i \mid t) f(y_i \mid t)`.
``"one-step"``
    Everything re-estimated jointly (the indicators' conditional probabilities
    included), started from the two-step estimate: the most efficient, but the
    outcome then helps define the classes.

The class weights :math:`\Pr(X = t)` are free in ``"ml"``, ``"two-step"`` and
``"one-step"`` (Vermunt 2010's formulation); ``fix_weights=True`` holds them at the
measurement model's, as StepMix does in its 2-step and ML 3-step estimators.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.linalg
from scipy.special import chdtrc, logsumexp

from bayespmf._validation import (
    as_codes,
    check_choice,
    check_float,
    check_int,
)
from bayespmf.fit.covariates import check_covariates
from bayespmf.fit.loop import iterate
from bayespmf.kernels.covariates import class_log_prior, mlogit_newton
from bayespmf.kernels.distal import (
    FAMILIES,
    SCALE_FLOOR,
    Component,
    StructuralState,
    log_joint,
    structural_em_step,
    total_score,
)
from bayespmf.pmf import class_log_joint, posterior_from_log_joint

__all__ = [
    "CORRECTIONS",
    "DEFAULT_DISTAL_MAX_ITER",
    "DEFAULT_DISTAL_TOL",
    "StructuralFit",
    "class_predictors",
    "check_outcome",
    "classification_error",
    "distal_outcome",
]

#: The estimators of the structural step (module docstring).
CORRECTIONS = ("none", "bch", "ml", "two-step", "one-step")

#: Iteration cap and Aitken tolerance of the structural EM (:mod:`bayespmf.fit.loop`):
#: the structural EM is cheap (T x S work per step), so it runs to a tolerance at
#: which the estimates are converged to well below their standard errors.
DEFAULT_DISTAL_MAX_ITER = 5000
DEFAULT_DISTAL_TOL = 1e-12

#: Central-difference step of the numerical information, in units of each
#: parameter's scale (a standard deviation for a mean, min(p, 1 - p) for a
#: probability): truncation error O(FD_STEP^2) relative.
FD_STEP = 1e-4

#: The step-3 refits of the Bakk-Oberski-Vermunt correction (``"ml"``) run to this
#: tolerance at least (and this many iterations at most), so that their central
#: differences measure the estimate's slope, not where EM stopped.
BOV_TOL = 1e-12
BOV_MAX_ITER = 5000

#: Label of the intercept row of :func:`class_predictors`' estimates (parenthesized, as
#: ``LatentClassRegression.coef_`` labels it, so that no covariate column can clash).
INTERCEPT = "(intercept)"

#: Newton steps of the naive and BCH multinomial logits (from 0 they converge in
#: well under this many: the log-likelihood is concave).
MLOGIT_MAX_STEPS = 100


@dataclass(repr=False)
class StructuralFit:
    r"""What :func:`distal_outcome` and :func:`class_predictors` return.

    Attributes
    ----------
    estimates : pandas.DataFrame
        :func:`distal_outcome`: one row per class, one column per parameter (``mean``
        for gaussian, poisson and bernoulli, and ``variance`` for gaussian; the
        probability of every category for categorical). :func:`class_predictors`:
        one row per design column (``(intercept)`` first), one column per class, the
        multinomial-logit coefficients against class 0 (column 0 is 0).
    stderr : pandas.DataFrame
        Standard errors in the layout of ``estimates`` (NaN where a parameter is fixed:
        the reference class, a probability at the boundary).
    covariance : ndarray
        Covariance of ``estimates`` flattened row-major.
    wald : pandas.DataFrame
        Wald tests, one row each: ``overall`` (all classes equal / a covariate's
        coefficients all 0) and every pair of classes; columns ``parameter``,
        ``test``, ``statistic``, ``df``, ``p_value``.
    weights : ndarray, shape (T,)
        Class proportions of the structural step (for :func:`class_predictors` the
        mean of the fitted priors).
    correction : str
    family : str
        The outcome's family, or ``"mlogit"`` for :func:`class_predictors`.
    loglik : float
        Objective at the estimate (the structural log-likelihood for ``"ml"``,
        ``"two-step"`` and ``"one-step"``; NaN for ``"none"`` and ``"bch"``).
    n_rows : int
        Rows used in the structural step (rows with a missing outcome are dropped).
    n_iter : int
    converged : bool
    classification_error : ndarray, shape (T, T)
        :math:`D_{ts} = \Pr(W = s \mid X = t)` of the modal assignment.
    info : dict
        ``"weights_stderr"`` where the weights were estimated by ML.
    """

    estimates: pd.DataFrame
    stderr: pd.DataFrame
    covariance: np.ndarray
    wald: pd.DataFrame
    weights: np.ndarray
    correction: str
    family: str
    loglik: float
    n_rows: int
    n_iter: int
    converged: bool
    classification_error: np.ndarray
    info: dict = field(default_factory=dict)

    def __repr__(self) -> str:  # the estimates with their standard errors, not every array
        table = (
            self.estimates.round(4).astype(str)
            + " ("
            + self.stderr.round(4).astype(str)
            + ")"
        )
        head = (
            f"StructuralFit(family={self.family!r}, correction={self.correction!r}, "
            f"n_rows={self.n_rows}, converged={self.converged})"
        )
        return f"{head}\nestimate (standard error):\n{table.to_string()}"


# ------------------------------------------------------------------ validation


def _measurement(estimator, data, owner):
    """Codes, class weights and factors of the fitted measurement model."""
    if isinstance(estimator, tuple | list) and len(estimator) == 2:
        weights = np.asarray(estimator[0], dtype=float)
        factors = [np.asarray(a, dtype=float) for a in estimator[1]]
        codes, _ = as_codes(data, [a.shape[0] for a in factors], allow_empty_columns=True)
        return codes, weights, factors
    if not (hasattr(estimator, "weights_") and hasattr(estimator, "factors_")):
        raise ValueError(
            f"The 'estimator' parameter of {owner} must be a fitted LatentClassPMF (or a "
            f"(weights, factors) pair); got {type(estimator).__name__} without "
            "'weights_' and 'factors_'. Fit the measurement model first: "
            "LatentClassPMF(n_components).fit(data)."
        )
    codes = estimator._codes(data) if hasattr(estimator, "_codes") else None
    factors = [np.asarray(a, dtype=float) for a in estimator.factors_]
    if codes is None:
        codes, _ = as_codes(data, [a.shape[0] for a in factors], allow_empty_columns=True)
    return np.asarray(codes), np.asarray(estimator.weights_, dtype=float), factors


def check_outcome(y, n_rows: int, family: str, owner: str):
    """A validated outcome: ``(values, observed, labels, family)``.

    ``values`` (S,) are floats (category codes for ``"categorical"``, 0 where
    missing), ``observed`` the (S,) mask of non-missing entries, ``labels`` the
    sorted distinct values of a categorical outcome (None otherwise).

    Raises
    ------
    ValueError
        As listed in :func:`distal_outcome`.

    Examples
    --------
    >>> values, observed, labels, family = check_outcome(
    ...     ["b", None, "a"], 3, "categorical", owner="f")
    >>> values.tolist(), observed.tolist(), labels.tolist()
    ([1.0, 0.0, 0.0], [True, False, True], ['a', 'b'])
    """
    comp, labels, _ = _outcome(y, n_rows, family, owner)
    return comp.y, comp.observed, labels, comp.family.name


def _outcome(y, n_rows, family, owner):
    """The outcome as a Component (theta to be fitted), its labels and M-step aux."""
    family = check_choice(family, "family", tuple(FAMILIES), owner)
    fam = FAMILIES[family]
    raw = y.to_numpy() if hasattr(y, "to_numpy") else y
    values = _numeric(raw)
    numeric = values is not None
    if not numeric:
        values = np.asarray(raw, dtype=object)
    if values.ndim != 1 or values.shape[0] != n_rows:
        raise ValueError(
            f"The 'y' parameter of {owner} must hold one value per row of 'data' "
            f"({n_rows}); got shape {values.shape}. Pass a 1-D array in the order of "
            "the rows of 'data', with NaN (or None) where the outcome is missing."
        )
    missing = pd.isna(values)
    if missing.all():
        raise ValueError(
            f"The 'y' parameter of {owner} is missing (NaN) on every row: there is "
            "nothing to estimate. Pass the observed outcome."
        )
    labels = None
    if family == "categorical":
        present = values[~missing]
        if not numeric and _mixed(present):
            present = present.astype(str)
        labels, codes = np.unique(present, return_inverse=True)
        if numeric:  # Python numbers, as an object array holds them
            labels = labels.astype(object)
        y_num = np.zeros(n_rows)
        y_num[~missing] = codes
        aux = float(labels.size)
        if labels.size < 2:
            raise ValueError(
                f"The 'y' parameter of {owner} (family 'categorical') takes a single "
                f"value ({labels[0]!r}): class-specific probabilities are all 1. Pass "
                "an outcome with at least two categories."
            )
    else:
        try:
            y_num = (
                values.astype(float)
                if numeric
                else np.where(missing, np.nan, values).astype(float)
            )
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"The 'y' parameter of {owner} must be numeric for family {family!r}; "
                "it holds non-numeric values. Use family='categorical' for labels."
            ) from err
        obs = y_num[~missing]
        if not np.all(np.isfinite(obs)):
            raise ValueError(
                f"The 'y' parameter of {owner} holds inf; pass finite values (NaN marks "
                "a missing outcome)."
            )
        if family == "bernoulli" and not np.all((obs == 0) | (obs == 1)):
            raise ValueError(
                f"The 'y' parameter of {owner} must be 0 or 1 for family 'bernoulli'; "
                f"got values {np.unique(obs)[:5].tolist()}. Use family='categorical' "
                "for other codes."
            )
        if family == "poisson" and not np.all((obs >= 0) & (obs == np.round(obs))):
            raise ValueError(
                f"The 'y' parameter of {owner} must hold non-negative integer counts "
                "for family 'poisson'. Use family='gaussian' for other numbers."
            )
        scale = max(float(np.var(obs)), float(np.mean(np.abs(obs))), 1.0)
        aux = SCALE_FLOOR * scale
        y_num = np.where(missing, 0.0, y_num)
    comp = Component(fam, y_num, ~missing, np.empty((0, 0)))
    return comp, labels, aux


def _numeric(raw):
    """``raw`` itself if it is an array of numbers (NaN for missing), else None.

    Such an array is checked and coded as its object copy would be, without visiting
    the values one by one; anything else (a list, labels, objects) takes the object
    path.
    """
    if isinstance(raw, np.ndarray) and raw.dtype.kind in "biuf":
        return raw
    return None


def _mixed(values) -> bool:
    return len({type(v) for v in values}) > 1


def classification_error(posterior) -> tuple[np.ndarray, np.ndarray]:
    r"""Modal assignments and their classification-error matrix.

    :math:`D_{ts} = \sum_i \Pr(X_i = t \mid x_i)\, [W_i = s] / \sum_i \Pr(X_i = t
    \mid x_i)` (Vermunt 2010, eq. 6), where :math:`W_i` is the modal class of row
    :math:`i`.

    Parameters
    ----------
    posterior : array_like, shape (S, T)
        Posterior class probabilities of the measurement model.

    Returns
    -------
    modal : ndarray of int, shape (S,)
    D : ndarray, shape (T, T)
        Rows sum to one.

    Examples
    --------
    >>> modal, d = classification_error([[0.9, 0.1], [0.2, 0.8]])
    >>> modal.tolist(), d.round(4).tolist()
    ([0, 1], [[0.8182, 0.1818], [0.1111, 0.8889]])
    """
    modal, _, d = _modal_assignment(np.asarray(posterior, dtype=float))
    return modal, d


def _modal_assignment(post):
    """:func:`classification_error` with the one-hot (S, T) matrix of the modal classes."""
    modal = np.argmax(post, axis=1)
    onehot = np.zeros(post.shape)
    onehot[np.arange(post.shape[0]), modal] = 1.0
    total = post.sum(axis=0)
    d = (post.T @ onehot) / np.where(total > 0, total, 1.0)[:, None]
    return modal, onehot, d


def _bch_inverse(d, owner):
    try:
        inv = np.linalg.inv(d)
    except np.linalg.LinAlgError as err:
        raise ValueError(
            f"{owner}: the classification-error matrix D is singular (some class is "
            "never the modal class), so the BCH weights do not exist. Use "
            "correction='ml' or 'two-step', or a model with fewer classes."
        ) from err
    return inv


# ------------------------------------------------------------------ information


def _blocks(state, components, fixed_weights):
    """(flat theta, map J, FD scale per free column) of every parameter block."""
    out = []
    if state.weights is not None and not fixed_weights:
        fam = FAMILIES["categorical"]
        th = state.weights[None, :]
        out.append((state.weights.copy(), fam.free_map(th)[0], fam.scale(th).ravel()))
    if state.beta is not None:
        n = state.beta[:, 1:].size
        out.append((state.beta[:, 1:].ravel().copy(), np.eye(n), None))
    for comp, theta in zip(components, state.thetas, strict=True):
        fam = comp.family
        out.append(
            (
                theta.ravel().copy(),
                scipy.linalg.block_diag(*fam.free_map(theta)),
                fam.scale(theta).ravel(),
            )
        )
    return out


def _rebuild(state, blocks, delta, fixed_weights):
    """The state at free-parameter displacement ``delta`` (a flat vector)."""
    flats, pos = [], 0
    for flat, jmap, _ in blocks:
        q = jmap.shape[1]
        flats.append(flat + jmap @ delta[pos : pos + q])
        pos += q
    i = 0
    weights, beta = state.weights, state.beta
    if weights is not None and not fixed_weights:
        weights, i = flats[0], 1
    if beta is not None:
        beta = state.beta.copy()
        beta[:, 1:] = flats[i].reshape(beta.shape[0], -1)
        i += 1
    thetas = tuple(f.reshape(t.shape) for f, t in zip(flats[i:], state.thetas, strict=True))
    return StructuralState(weights, beta, thetas)


def _score_rows(state, blocks, components, fixed_log, design, resp, fixed_weights):
    rows = total_score(state, components, fixed_log, design, resp=resp)
    if state.weights is not None and fixed_weights:
        rows = rows[1:]
    return np.concatenate([r @ b[1] for r, b in zip(rows, blocks, strict=True)], axis=1)


def _information(state, components, fixed_log, design, *, resp, fixed_weights):
    """Observed information in the free parameters, the rows' scores, the blocks.

    The information is minus the symmetrized central-difference Jacobian of the
    exact score (:func:`bayespmf.kernels.distal.total_score`), in the free
    coordinates of every block (its map ``J``); ``resp`` as in :func:`_covariance`.
    """
    blocks = _blocks(state, components, fixed_weights)
    steps = []
    for _, jmap, scale in blocks:
        if scale is None:  # logit coefficients: the covariate's root mean square
            rms = np.sqrt(np.mean(design**2, axis=0))
            per = np.repeat(1.0 / np.where(rms > 0, rms, 1.0), state.beta.shape[1] - 1)
            steps.append(FD_STEP * per)
            continue
        first = np.argmax(jmap > 0, axis=0) if jmap.shape[1] else np.zeros(0, int)
        steps.append(FD_STEP * scale[first])
    steps = np.concatenate(steps) if steps else np.zeros(0)
    n_free = steps.size

    def score(delta):
        st = _rebuild(state, blocks, delta, fixed_weights)
        return _score_rows(st, blocks, components, fixed_log, design, resp, fixed_weights)

    rows0 = score(np.zeros(n_free))
    hess = np.empty((n_free, n_free))
    for j in range(n_free):
        e = np.zeros(n_free)
        e[j] = steps[j]
        hess[:, j] = (score(e).sum(axis=0) - score(-e).sum(axis=0)) / (2 * steps[j])
    return -0.5 * (hess + hess.T), rows0, blocks


def _inverse(info):
    try:
        return np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return np.full_like(info, np.nan)


def _covariance(state, components, fixed_log, design, *, resp, fixed_weights, stderr):
    """Covariance of every block's flat theta (observed information or sandwich).

    ``stderr=False``: NaN of the right shape, nothing computed.

    ``resp=None``: the inverse observed information of the structural likelihood.
    A given ``resp`` (fixed weights, BCH or modal): the sandwich ``A^-1 B A^-1`` of
    the weighted estimating equations, ``A`` their negative Jacobian, ``B`` the sum
    of outer products of the rows' contributions.
    """
    sizes = [t.size for t in state.thetas]
    if state.beta is not None:
        sizes.insert(0, state.beta[:, 1:].size)
    if state.weights is not None and not fixed_weights:
        sizes.insert(0, state.weights.size)
    if not stderr:
        return np.full((sum(sizes), sum(sizes)), np.nan), sizes
    info, rows0, blocks = _information(
        state, components, fixed_log, design, resp=resp, fixed_weights=fixed_weights
    )
    inv = _inverse(info)
    if resp is not None:
        inv = inv @ (rows0.T @ rows0) @ inv
    jfull = scipy.linalg.block_diag(*[b[1] for b in blocks])
    return jfull @ inv @ jfull.T, sizes


def _free_ranges(blocks):
    """Slices of every block in the free-parameter vector."""
    out, pos = [], 0
    for b in blocks:
        out.append(np.arange(pos, pos + b[1].shape[1]))
        pos += b[1].shape[1]
    return out


def _two_step_covariance(state, comps, keep, codes, weights, factors, design, fixed):
    r"""Bakk & Kuha's (2018) covariance of the two-step structural estimate.

    :math:`V_2 = I_{22}^{-1} + I_{22}^{-1} I_{21} \Sigma_1 I_{12} I_{22}^{-1}`: the
    blocks of the observed information of the joint likelihood (indicators and
    structural model) at the two-step estimate, 2 the structural parameters, 1 the
    measurement parameters held fixed (the indicators' probabilities, and the class
    weights when they were held fixed), and :math:`\Sigma_1` the latter's covariance
    from the first step (the inverse information of the measurement model).
    """
    ind, _ = _indicator_components(codes[keep], factors)
    full_state = state._replace(
        weights=weights if fixed and state.weights is not None else state.weights,
        thetas=tuple(c.theta for c in ind) + state.thetas,
    )
    n_rows, n_cls = int(keep.sum()), weights.size
    info, _, blocks = _information(
        full_state,
        ind + list(comps),
        np.zeros((n_rows, n_cls)),
        design,
        resp=None,
        fixed_weights=False,
    )
    ranges = _free_ranges(blocks)
    lead = int(state.weights is not None) + int(state.beta is not None)
    n_ind = len(ind)
    ind_idx = list(ranges[lead : lead + n_ind])
    one = ind_idx + ([ranges[0]] if fixed and state.weights is not None else [])
    two = [ranges[i] for i in range(len(ranges)) if not any(r is ranges[i] for r in one)]
    one, two = np.concatenate(one), np.concatenate(two)
    # first step: the measurement model alone, on every row
    ind_all, _ = _indicator_components(codes, factors)
    state1 = StructuralState(weights, None, tuple(c.theta for c in ind_all))
    info1, _, blocks1 = _information(
        state1,
        ind_all,
        np.zeros((codes.shape[0], n_cls)),
        None,
        resp=None,
        fixed_weights=False,
    )
    r1 = _free_ranges(blocks1)
    one1 = list(r1[1:]) + ([r1[0]] if fixed and state.weights is not None else [])
    one1 = np.concatenate(one1)
    sigma1 = _inverse(info1)[np.ix_(one1, one1)]
    inv22 = _inverse(info[np.ix_(two, two)])
    i21 = info[np.ix_(two, one)]
    v2 = inv22 + inv22 @ i21 @ sigma1 @ i21.T @ inv22
    j2 = scipy.linalg.block_diag(
        *[
            b[1]
            for i, b in enumerate(blocks)
            if not (lead <= i < lead + n_ind)
            and not (i == 0 and fixed and state.weights is not None)
        ]
    )
    return j2 @ v2 @ j2.T


def _flat_state(state, with_weights):
    """A structural state as the flat vector its covariance is in (``_covariance``)."""
    parts = [state.weights] if with_weights and state.weights is not None else []
    if state.beta is not None:
        parts.append(state.beta[:, 1:].ravel())
    return np.concatenate(parts + [t.ravel() for t in state.thetas])


def _bov_covariance(cov, refit, codes, weights, factors, with_weights):
    r"""Bakk, Oberski & Vermunt's (2014) covariance of a three-step estimate.

    :math:`V = V_2 + J \Sigma_1 J^\top`: ``cov`` (:math:`V_2`, the step-3 covariance
    with the measurement model treated as known) plus the first step's uncertainty
    carried through the classification: :math:`\Sigma_1` the inverse information of
    the measurement model (class weights and indicator probabilities, in their free
    coordinates) and :math:`J = \partial \hat\theta_2 / \partial \theta_1` the
    central-difference Jacobian of the step-3 estimate ``refit(weights, factors)``
    (re-run from the perturbed measurement model: its posterior, its
    classification-error matrix and, for BCH, its weights).
    """
    n_rows, n_cls = codes.shape[0], weights.size
    ind, _ = _indicator_components(codes, factors)
    state1 = StructuralState(weights, None, tuple(c.theta for c in ind))
    info1, _, blocks1 = _information(
        state1, ind, np.zeros((n_rows, n_cls)), None, resp=None, fixed_weights=False
    )
    sigma1 = _inverse(info1)
    steps = []
    for _, jmap, scale in blocks1:
        first = np.argmax(jmap > 0, axis=0) if jmap.shape[1] else np.zeros(0, int)
        steps.append(FD_STEP * scale[first])
    steps = np.concatenate(steps)

    def estimate(delta):
        st = _rebuild(state1, blocks1, delta, False)
        return _flat_state(refit(st.weights, [t.T for t in st.thetas]), with_weights)

    jac = np.empty((cov.shape[0], steps.size))
    for j, h in enumerate(steps):
        e = np.zeros(steps.size)
        e[j] = h
        jac[:, j] = (estimate(e) - estimate(-e)) / (2.0 * h)
    return cov + jac @ sigma1 @ jac.T


# ------------------------------------------------------------------- Wald tests


def _wald(estimate, cov, contrast):
    c_est = contrast @ estimate
    c_cov = contrast @ cov @ contrast.T
    if not np.all(np.isfinite(c_cov)):  # no standard errors: no test
        return np.nan, 0, np.nan
    stat = float(c_est @ np.linalg.pinv(c_cov) @ c_est)
    df = int(np.linalg.matrix_rank(c_cov))
    return stat, df, _chi2_sf(stat, df) if df > 0 else np.nan


def _chi2_sf(stat, df):
    """``scipy.stats.chi2.sf(stat, df)`` of one statistic, as a float.

    Inside the support the distribution's survival function is ``chdtrc``; at or
    below 0 it is 1 (NaN stays NaN).
    """
    if stat <= 0.0:
        return 1.0
    return float(chdtrc(df, stat))


def _wald_table(estimate, cov, groups, n_cls, layout, overall=None):
    """Overall and pairwise Wald tests, one row per (group, test).

    ``groups``: (name, list of parameter indices within a class); ``layout(t, j)``
    the flat index of parameter ``j`` of class ``t``; ``None`` for a fixed 0 (the
    reference class of a logit). ``overall(g)``, if given, is the contrast of the
    overall test of group ``g`` (by default: every class equal to the last).
    """
    rows = []
    size = estimate.size
    pairs = list(itertools.combinations(range(n_cls), 2))
    # a non-finite entry (no standard errors) reaches every contrast's covariance
    # (0 * NaN is NaN), so that _wald finds no test for any of them
    if not np.isfinite(cov).all():
        tests = ["overall"] + [f"{s} vs {t}" for s, t in pairs]
        rows = [(name, test, np.nan, 0, np.nan) for name, _ in groups for test in tests]
        groups = []
    for g, (name, params) in enumerate(groups):

        def diff(s, t, params=params):
            c = np.zeros((len(params), size))
            for r, j in enumerate(params):
                if layout(s, j) is not None:
                    c[r, layout(s, j)] += 1.0
                if layout(t, j) is not None:
                    c[r, layout(t, j)] -= 1.0
            return c

        if overall is None:
            first = np.concatenate([diff(t, n_cls - 1) for t in range(n_cls - 1)])
        else:
            first = overall(g)
        rows.append((name, "overall", *_wald(estimate, cov, first)))
        for s, t in pairs:
            rows.append((name, f"{s} vs {t}", *_wald(estimate, cov, diff(s, t))))
    columns = pd.Index(["parameter", "test", "statistic", "df", "p_value"], dtype=object)
    return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------ the fitting


def _check_common(correction, max_iter, tol, owner):
    if correction is None:  # StepMix's spelling of the naive estimator
        correction = "none"
    if isinstance(correction, str):  # "BCH", "ML", "two_step" as other packages say
        correction = correction.lower().replace("_", "-")
    correction = check_choice(correction, "correction", CORRECTIONS, owner)
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    return correction, max_iter, tol


def _run_em(
    state, components, fixed_log, design, aux, *, free_weights, max_iter, tol, owner
):
    def step(s):
        return structural_em_step(
            s, components, fixed_log, design, aux, free_weights=free_weights
        )

    state, it = iterate(
        step, state, max_iter=max_iter, tol=tol, owner=owner, desc="structural EM"
    )
    lj = log_joint(state, components, fixed_log, design)
    return state, it, float(logsumexp(lj, axis=1).sum())


def _indicator_components(codes, factors):
    fam = FAMILIES["categorical"]
    comps, aux = [], []
    for n, a in enumerate(factors):
        col = codes[:, n]
        comps.append(Component(fam, np.where(col >= 0, col, 0), col >= 0, a.T.copy()))
        aux.append(float(a.shape[0]))
    return comps, aux


def _structural(
    codes,
    weights,
    factors,
    components,
    aux,
    correction,
    *,
    design,
    beta0,
    fix_weights,
    stderr,
    max_iter,
    tol,
    owner,
):
    """Fit the structural model with one of :data:`CORRECTIONS`.

    ``components`` hold the outcome (empty for class predictors) on all S rows;
    ``design``/``beta0`` the logit prior (None for class weights). Returns the state,
    the covariance of its flat blocks (weights first if estimated, then beta, then
    the components), the block sizes and a dict of diagnostics.
    """
    n_cls = weights.size

    def refit(w, f):  # the step-3 estimate from another measurement model
        return _structural(
            codes,
            w,
            f,
            components,
            aux,
            correction,
            design=design,
            beta0=beta0,
            fix_weights=fix_weights,
            stderr=False,
            max_iter=max(max_iter, BOV_MAX_ITER),
            tol=min(tol, BOV_TOL),
            owner=owner,
        )[0]

    log_x = class_log_joint(codes, np.ones(n_cls), factors)  # log Pr(x_i | t)
    post = posterior_from_log_joint(log_x + np.log(np.maximum(weights, 1e-300)), weights)
    modal, onehot, dmat = _modal_assignment(post)
    keep = np.ones(codes.shape[0], bool)
    for comp in components:
        keep &= comp.observed
    if correction == "one-step":
        keep[:] = True
    # (the design row-major, as a selection of its rows would be: the products with
    # it then round as they always did)
    dsg = None if design is None else np.ascontiguousarray(design)
    comps, log_kept = list(components), log_x
    if not keep.all():  # the rows with an observed outcome
        comps = [c._replace(y=c.y[keep], observed=c.observed[keep]) for c in comps]
        dsg = None if design is None else design[keep]
        modal, onehot, log_kept = modal[keep], onehot[keep], log_x[keep]
    diag = {"classification_error": dmat, "n_rows": int(keep.sum())}

    if correction in ("none", "bch"):
        resp = onehot if correction == "none" else onehot @ _bch_inverse(dmat, owner)
        thetas = tuple(c.family.mstep(c.y, c.observed, resp, a) for c, a in zip(comps, aux))
        beta = None
        if dsg is not None:
            beta, _ = mlogit_newton(dsg, resp, beta0, max_steps=MLOGIT_MAX_STEPS)
        state = StructuralState(resp.mean(axis=0) if beta is None else None, beta, thetas)
        fixed = np.zeros((onehot.shape[0], n_cls))
        cov, sizes = _covariance(
            state, comps, fixed, dsg, resp=resp, fixed_weights=True, stderr=stderr
        )
        if stderr:  # add the first step's uncertainty (Bakk, Oberski & Vermunt 2014)
            diag["covariance_conditional"] = cov
            cov = _bov_covariance(cov, refit, codes, weights, factors, with_weights=False)
        diag.update(loglik=np.nan, n_iter=0, converged=True)
        return state, cov, sizes, diag

    # ML estimators: a start from the naive estimate, then EM
    start_thetas = tuple(
        c.family.mstep(c.y, c.observed, onehot, a) for c, a in zip(comps, aux)
    )
    fixed_log = (
        np.log(np.maximum(dmat.T[modal], 1e-300)) if correction == "ml" else log_kept
    )
    free_weights = not fix_weights
    beta = None
    if dsg is not None:
        beta, _ = mlogit_newton(dsg, onehot, beta0, max_steps=MLOGIT_MAX_STEPS)
    state = StructuralState(
        None if beta is not None else weights.copy(), beta, start_thetas
    )

    def run(state, comps, fixed_log, aux):
        return _run_em(
            state,
            comps,
            fixed_log,
            dsg,
            aux,
            free_weights=free_weights,
            max_iter=max_iter,
            tol=tol,
            owner=owner,
        )

    if correction == "one-step":  # from the two-step estimate, then all parameters
        state, _, _ = run(state, comps, fixed_log, aux)
        ind, ind_aux = _indicator_components(codes, factors)
        comps = ind + comps
        aux = ind_aux + list(aux)
        state = state._replace(thetas=tuple(c.theta for c in ind) + state.thetas)
        fixed_log = np.zeros_like(fixed_log)
    state, it, loglik = run(state, comps, fixed_log, aux)
    cov, sizes = _covariance(
        state,
        comps,
        fixed_log,
        dsg,
        resp=None,
        fixed_weights=not free_weights,
        stderr=stderr,
    )
    if correction == "two-step" and stderr:  # add the first step's uncertainty
        diag["covariance_conditional"] = cov
        cov = _two_step_covariance(
            state, comps, keep, codes, weights, factors, dsg, not free_weights
        )
    if correction == "ml" and stderr:  # Bakk, Oberski & Vermunt (2014)
        diag["covariance_conditional"] = cov
        cov = _bov_covariance(
            cov, refit, codes, weights, factors, with_weights=free_weights
        )
    if correction == "one-step":  # report the outcome block only
        n_ind = len(comps) - len(components)
        diag["factors"] = [t.T for t in state.thetas[:n_ind]]
        state = state._replace(thetas=state.thetas[n_ind:])
        n_pre = len(sizes) - len(components) - n_ind
        lead = sum(sizes[:n_pre])
        skip = sum(sizes[n_pre : n_pre + n_ind])
        idx = np.r_[np.arange(lead), np.arange(lead + skip, sum(sizes))]
        cov = cov[np.ix_(idx, idx)]
        sizes = sizes[:n_pre] + sizes[n_pre + n_ind :]
    diag.update(loglik=loglik, n_iter=it.n_iter, converged=bool(it.converged))
    return state, cov, sizes, diag


def _design_names(z, n_dim, fit_intercept):
    """Row labels of a coefficient table: the intercept, then the covariates."""
    if isinstance(z, pd.Series):
        cols = [z.name if z.name is not None else "z0"]
    elif isinstance(z, pd.DataFrame):
        cols = list(z.columns)
    else:
        cols = [f"z{j}" for j in range(n_dim - bool(fit_intercept))]
    return pd.Index(
        ([INTERCEPT] if fit_intercept else []) + [str(c) for c in cols], name="covariate"
    )


def _param_names(family, labels):
    names = [str(v) for v in labels] if family == "categorical" else FAMILIES[family].params
    return pd.Index(list(names), dtype=object)


def distal_outcome(
    estimator,
    data,
    y,
    family: str = "gaussian",
    correction: str = "bch",
    *,
    covariates=None,
    fit_intercept: bool = True,
    fix_weights: bool = False,
    stderr: bool = True,
    max_iter: int = DEFAULT_DISTAL_MAX_ITER,
    tol: float = DEFAULT_DISTAL_TOL,
) -> StructuralFit:
    r"""Class-specific distribution of a distal outcome, after a latent-class fit.

    Parameters
    ----------
    estimator : LatentClassPMF or (weights, factors)
        The fitted measurement model (its classes define the classes here).
    data : CategoricalData, DataFrame or array_like of int, shape (S, N)
        The indicators of the rows, as the measurement model takes them (``-1``
        marks a missing entry).
    y : array_like, shape (S,)
        The outcome of every row; NaN (or None) marks a missing value: those rows
        are dropped from the structural step (the classification-error matrix still
        uses every row; ``"one-step"`` keeps them, the outcome marginalized).
    family : {"gaussian", "poisson", "bernoulli", "categorical"}, default "gaussian"
        ``"gaussian"``: a class-specific mean and variance; ``"poisson"``: a mean
        (counts); ``"bernoulli"``: a mean (0/1 values); ``"categorical"``: the
        probability of every distinct value (any labels, sorted).
    correction : {"none", "bch", "ml", "two-step", "one-step"}, default "bch"
        The estimator (module docstring of :mod:`bayespmf.fit.distal`); the
        spellings of StepMix and Mplus (``None``, ``"BCH"``, ``"ML"``,
        ``"two_step"``) are accepted.
    covariates : array_like or DataFrame (S,) or (S, D0), optional
        Covariates of the class (a multinomial logit, class 0 the reference) fitted
        together with the outcome: ``info["coef"]`` and ``info["coef_stderr"]`` hold
        the coefficients, and the outcome's estimates are adjusted for them.
    fit_intercept : bool, default True
        With ``covariates``.
    fix_weights : bool, default False
        Hold the class weights at the measurement model's in ``"ml"``,
        ``"two-step"`` and ``"one-step"`` (StepMix's choice) instead of estimating
        them with the structural model.
    stderr : bool, default True
        Compute standard errors and Wald tests (numerical information: two score
        evaluations per free parameter; for ``"none"``, ``"bch"`` and ``"ml"`` also
        two step-3 refits per measurement parameter, see Notes); False leaves them
        NaN.
    max_iter, tol : int, float
        Cap and Aitken tolerance of the structural EM (:mod:`bayespmf.fit.loop`).

    Returns
    -------
    StructuralFit
        ``estimates`` (one row per class), ``stderr``, ``covariance``, ``wald``
        (tests of equal means, or for ``categorical`` equal distributions, across
        classes: overall and pairwise).

    Raises
    ------
    ValueError
        ``y`` of another length than ``data``, all missing, non-numeric for a
        numeric family, not 0/1 for ``bernoulli``, not counts for ``poisson``; an
        unknown ``family`` or ``correction``; a singular classification-error matrix
        for ``"bch"``.

    Warns
    -----
    ConvergenceWarning
        The structural EM stopped at ``max_iter``.

    Notes
    -----
    Standard errors. ``"none"`` and ``"bch"``: the sandwich (robust) covariance of
    the weighted estimating equations with the weights held fixed (Bakk, Tekle &
    Vermunt 2013 recommend robust standard errors for BCH); ``"ml"``: the inverse
    observed information of the structural likelihood (numerical Jacobian of its
    exact score) with the classification errors :math:`D` treated as known. To
    these three, the first step's uncertainty is added as Bakk, Oberski & Vermunt
    (2014) do: :math:`V_2 + J \Sigma_1 J^\top`, :math:`\Sigma_1` the measurement
    model's inverse information and :math:`J` the derivative of the step-3 estimate
    with respect to the measurement parameters (central differences, re-running
    step 3); the standard errors without it are in ``info["stderr_conditional"]``.
    ``"two-step"``: Bakk & Kuha's (2018) covariance, which adds the first
    step's uncertainty, :math:`I_{22}^{-1} + I_{22}^{-1} I_{21} \Sigma_1 I_{12}
    I_{22}^{-1}` (the joint model's information at the estimate, :math:`\Sigma_1`
    the measurement model's inverse information; the conditional standard errors
    are in ``info["stderr_conditional"]``); ``"one-step"``: the inverse observed
    information in all parameters, the indicators' included (probabilities within
    ``BOUNDARY`` of 0 or 1 held fixed). The Wald statistics are
    :math:`(C\hat\theta)^\top (C V C^\top)^{+} (C\hat\theta)`, chi-squared with
    ``rank(C V C^T)`` degrees of freedom.

    References
    ----------
    .. [1] A. Bolck, M. Croon and J. Hagenaars, "Estimating latent structure models
       with categorical variables: one-step versus three-step estimators,"
       Political Analysis 12(1), 2004.
    .. [2] J. K. Vermunt, "Latent class modeling with covariates: two improved
       three-step approaches," Political Analysis 18(4), 2010.
    .. [3] Z. Bakk, F. B. Tekle and J. K. Vermunt, "Estimating the association
       between latent class membership and external variables using bias-adjusted
       three-step approaches," Sociological Methodology 43(1), 2013.
    .. [4] Z. Bakk and J. Kuha, "Two-step estimation of models between latent classes
       and external variables," Psychometrika 83(4), 2018.
    .. [5] Z. Bakk, D. L. Oberski and J. K. Vermunt, "Relating latent class
       assignments to external variables: standard errors for correct inference,"
       Political Analysis 22(4), 2014.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> h = rng.integers(0, 2, 2000)
    >>> a = np.array([0.15, 0.85])  # P(x = 1 | h)
    >>> x = (rng.random((2000, 5)) < a[h][:, None]).astype(int)
    >>> y = rng.normal(np.array([0.0, 1.0])[h], 1.0)
    >>> weights = np.array([0.5, 0.5])
    >>> factors = [np.array([[0.85, 0.15], [0.15, 0.85]])] * 5
    >>> fit = distal_outcome((weights, factors), x, y, "gaussian", correction="bch")
    >>> fit.estimates["mean"].round(1).tolist()
    [0.0, 1.0]
    >>> bool(fit.wald.loc[0, "p_value"] < 1e-6)
    True
    """
    owner = "distal_outcome"
    correction, max_iter, tol = _check_common(correction, max_iter, tol, owner)
    codes, weights, factors = _measurement(estimator, data, owner)
    comp, labels, aux = _outcome(y, codes.shape[0], family, owner)
    family = comp.family.name
    design = beta0 = None
    if covariates is not None:
        design = check_covariates(
            covariates, codes.shape[0], fit_intercept=bool(fit_intercept), owner=owner
        )
        beta0 = np.zeros((design.shape[1], weights.size))
    state, cov, sizes, diag = _structural(
        codes,
        weights,
        factors,
        [comp],
        [aux],
        correction,
        design=design,
        beta0=beta0,
        fix_weights=bool(fix_weights),
        stderr=bool(stderr),
        max_iter=max_iter,
        tol=tol,
        owner=owner,
    )
    theta = state.thetas[0]
    n_cls, n_par = theta.shape
    out = sum(sizes[:-1])
    cov_y = cov[out:, out:]
    se = np.sqrt(np.maximum(np.diag(cov_y), 0.0)).reshape(n_cls, n_par)
    # held fixed (0), or an information that is not positive definite (< 0)
    se[~(np.diag(cov_y).reshape(n_cls, n_par) > 0.0)] = np.nan
    names = _param_names(family, labels)
    index = pd.RangeIndex(n_cls, name="class")
    tested = list(range(n_par - 1)) if family == "categorical" else [0]
    group = ("distribution" if family == "categorical" else "mean", tested)
    wald = _wald_table(theta.ravel(), cov_y, [group], n_cls, lambda t, j: t * n_par + j)
    info = {"aux": aux}
    if len(sizes) > 1 and sizes[0] == n_cls and state.weights is not None:
        info["weights_stderr"] = np.sqrt(np.maximum(np.diag(cov[:n_cls, :n_cls]), 0.0))
    if "factors" in diag:
        info["factors"] = diag["factors"]
    if "covariance_conditional" in diag:
        var_c = np.diag(diag["covariance_conditional"][out:, out:])
        info["stderr_conditional"] = pd.DataFrame(
            np.sqrt(np.maximum(var_c, 0.0)).reshape(n_cls, n_par),
            index=index,
            columns=names,
        )
    weights_out = state.weights if state.weights is not None else weights
    if state.beta is not None:
        n_dim = state.beta.shape[0]
        rows = _design_names(covariates, n_dim, fit_intercept)
        cls = pd.RangeIndex(n_cls, name="class")
        se_b = np.full(state.beta.shape, np.nan)
        var_b = np.diag(cov[: sizes[0], : sizes[0]])
        se_b[:, 1:] = np.sqrt(np.maximum(var_b, 0.0)).reshape(n_dim, n_cls - 1)
        info["coef"] = pd.DataFrame(state.beta, index=rows, columns=cls)
        info["coef_stderr"] = pd.DataFrame(se_b, index=rows, columns=cls)
        keep = comp.observed if correction != "one-step" else np.ones_like(comp.observed)
        weights_out = np.exp(class_log_prior(design[keep], state.beta)).mean(axis=0)
    return StructuralFit(
        pd.DataFrame(theta, index=index, columns=names),
        pd.DataFrame(se, index=index, columns=names),
        cov_y,
        wald,
        np.asarray(weights_out, dtype=float),
        correction,
        family,
        diag["loglik"],
        diag["n_rows"],
        diag["n_iter"],
        diag["converged"],
        diag["classification_error"],
        info,
    )


def class_predictors(
    estimator,
    data,
    z,
    correction: str = "bch",
    *,
    fit_intercept: bool = True,
    stderr: bool = True,
    max_iter: int = DEFAULT_DISTAL_MAX_ITER,
    tol: float = DEFAULT_DISTAL_TOL,
) -> StructuralFit:
    r"""Multinomial logit of the class on covariates, after a latent-class fit.

    Estimates :math:`\Pr(X = t \mid z) = \operatorname{softmax}(z^\top \beta)_t` with
    class 0 the reference (:math:`\beta_{\cdot 0} = 0`), the classes those of the
    fitted measurement model, by one of the estimators of
    :mod:`bayespmf.fit.distal` (Vermunt 2010's R3STEP is ``"ml"``).

    Parameters
    ----------
    estimator : LatentClassPMF or (weights, factors)
    data : CategoricalData, DataFrame or array_like of int, shape (S, N)
    z : array_like or DataFrame, shape (S,) or (S, D0)
        Numeric covariates, finite (encode categorical ones first).
    correction : {"none", "bch", "ml", "two-step", "one-step"}, default "bch"
    fit_intercept : bool, default True
    stderr : bool, default True
        As in :func:`distal_outcome`.
    max_iter, tol : int, float

    Returns
    -------
    StructuralFit
        ``estimates``: ``beta`` with one row per design column (``(intercept)``
        first), one column per class; ``wald``: per design column, the overall test
        that its coefficients are all 0 and the pairwise tests of equal
        coefficients of two classes.

    Raises
    ------
    ValueError
        ``z`` with another row count than ``data``, non-finite or collinear; an
        unknown ``correction``.

    Notes
    -----
    Standard errors as in :func:`distal_outcome`: sandwich for ``"none"`` and
    ``"bch"`` (the BCH weights make the logit's estimating equations those of
    Vermunt 2010, Sec. 4.1), inverse observed information for ``"ml"`` (the
    classification errors treated as known), Bakk & Kuha's correction for
    ``"two-step"`` and the full information for ``"one-step"``.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> z = rng.normal(size=3000)
    >>> h = (rng.random(3000) < 1 / (1 + np.exp(-1.5 * z))).astype(int)
    >>> a = np.array([0.1, 0.9])
    >>> x = (rng.random((3000, 6)) < a[h][:, None]).astype(int)
    >>> factors = [np.array([[0.9, 0.1], [0.1, 0.9]])] * 6
    >>> fit = class_predictors(([0.5, 0.5], factors), x, z, correction="ML")
    >>> bool(abs(fit.estimates.loc["z0", 1] - 1.5) < 3 * fit.stderr.loc["z0", 1])
    True
    """
    owner = "class_predictors"
    correction, max_iter, tol = _check_common(correction, max_iter, tol, owner)
    codes, weights, factors = _measurement(estimator, data, owner)
    design = check_covariates(
        z, codes.shape[0], fit_intercept=bool(fit_intercept), owner=owner
    )
    n_cls = weights.size
    beta0 = np.zeros((design.shape[1], n_cls))
    state, cov, _, diag = _structural(
        codes,
        weights,
        factors,
        [],
        [],
        correction,
        design=design,
        beta0=beta0,
        fix_weights=False,
        stderr=bool(stderr),
        max_iter=max_iter,
        tol=tol,
        owner=owner,
    )
    beta = state.beta
    n_dim = beta.shape[0]
    names = _design_names(z, n_dim, fit_intercept)
    se = np.full(beta.shape, np.nan)
    se[:, 1:] = np.sqrt(np.maximum(np.diag(cov), 0.0)).reshape(n_dim, n_cls - 1)
    full_cov = np.zeros((beta.size, beta.size))
    idx = (np.arange(n_dim)[:, None] * n_cls + np.arange(1, n_cls)[None, :]).ravel()
    full_cov[np.ix_(idx, idx)] = cov

    def layout(t, j, n_cls=n_cls):
        return None if t == 0 else j * n_cls + t

    def all_zero(d):  # the overall test of a covariate: all its coefficients 0
        c = np.zeros((n_cls - 1, beta.size))
        for t in range(1, n_cls):
            c[t - 1, d * n_cls + t] = 1.0
        return c

    groups = [(name, [d]) for d, name in enumerate(names)]
    wald = _wald_table(beta.ravel(), full_cov, groups, n_cls, layout, overall=all_zero)
    cls = pd.RangeIndex(n_cls, name="class")
    index = pd.Index(names, name="covariate")
    prior = np.exp(class_log_prior(design, beta))
    return StructuralFit(
        pd.DataFrame(beta, index=index, columns=cls),
        pd.DataFrame(se, index=index, columns=cls),
        full_cov,
        wald,
        prior.mean(axis=0),
        correction,
        "mlogit",
        diag["loglik"],
        diag["n_rows"],
        diag["n_iter"],
        diag["converged"],
        diag["classification_error"],
        {"factors": diag["factors"]} if "factors" in diag else {},
    )
