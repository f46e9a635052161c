r"""Standard errors of a latent-class point estimate (issue 12, item 7).

:func:`standard_errors` gives the standard error of every class weight
:math:`\lambda_f` and every conditional probability :math:`A_n(i, f)` of a
covariate-free latent-class PMF at an estimate (usually the maximum-likelihood one from
:func:`~bayespmf.fit.fit_latent_class`), by one of

* ``"information"``: the inverse of the observed information in a reduced
  parametrization, mapped back to every entry (the delta method, here exact because the
  map is linear). The information is the negative Hessian of the marginal
  log-likelihood (``information="hessian"``, analytic), the empirical cross-product of
  the per-row scores (``"opg"``, BHHH / Mplus's first-order derivative product) or the
  robust sandwich :math:`H^{-1} J H^{-1}` of the two (``"sandwich"``, Mplus's MLR,
  White 1982);
* ``"bootstrap"``: the nonparametric bootstrap (rows resampled with replacement, each
  sample refitted from the point estimate plus a few random starts, its classes matched
  to the point estimate's by the Hungarian algorithm).

A covariate-free model only: the latent-class regression model (covariate rows,
``bayespmf/fit/covariates.py``) needs the derivatives of its multinomial-logit
weights, not done here.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from bayespmf._progress import progress_bar
from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    as_codes,
    check_choice,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.fit.latent_class import fit_from_starts
from bayespmf.fit.multistart import random_starts
from bayespmf.fit.source import check_sample_weight
from bayespmf.pmf import (
    LatentClassParams,
    check_params,
    log_likelihood_rows,
    offsets_of,
    one_hot_design,
    posterior_classes,
    split_factors,
    stack_factors,
)

__all__ = [
    "BOUNDARY_TOL",
    "DEFAULT_N_BOOTSTRAP_SE",
    "DEFAULT_N_INIT_SE",
    "SINGULAR_RCOND",
    "StandardErrors",
    "observed_information",
    "standard_errors",
]

#: An entry at or below this value is on the boundary of its simplex: the information
#: there is not that of an interior maximum (the likelihood is maximized *at* the
#: constraint), so it is held fixed and gets no standard error. Mplus does the same
#: for thresholds it fixes at +-15 on the logit scale (probability 3e-7); EM stopped at
#: tol=1e-8 leaves true zeros below this (:ref:`bench-covariates`).
BOUNDARY_TOL = 1e-7

#: The information is singular (a parameter not identified, or nearly so) when an
#: eigenvalue of its correlation form is below SINGULAR_RCOND times the largest one:
#: identified latent-class models have ratios far above it, exactly non-identified
#: directions are at rounding noise, far below (:ref:`bench-covariates`).
SINGULAR_RCOND = 1e-10

#: A reduced coordinate takes part in a near-null direction of the information when
#: its entry in that unit eigenvector exceeds this (Mplus names the "parameter involved"
#: the same way).
NULL_LOADING = 0.1

#: Bootstrap samples of ``method="bootstrap"``: the standard error of a bootstrap SE
#: is about SE / sqrt(2 B), 7 % for B = 100 (Efron & Tibshirani 1993, Sec. 6.4, who
#: find 25-200 enough for standard errors).
DEFAULT_N_BOOTSTRAP_SE = 100

#: Starts of each bootstrap refit: the point estimate and random ones (row seeds and
#: uniform). A resample is close to the data, so the point estimate is nearly always
#: the best start; the random ones catch a sample whose optimum moved.
DEFAULT_N_INIT_SE = 4

_KINDS = ("hessian", "opg", "sandwich")


class StandardErrors(NamedTuple):
    """What :func:`standard_errors` returns.

    The full parameter vector is ``theta = [weights (F,), stack_factors(factors).ravel()]``
    (the factors stacked to ``(sum_n I_n, F)`` and read row by row), of length
    ``P = F (1 + sum_n I_n)``.

    Attributes
    ----------
    weights : ndarray, shape (F,)
        Standard error of each class weight (0 for ``F = 1``: the weight is fixed).
    factors : list of ndarray, each (I_n, F)
        Standard error of each ``A_n(i, f)``; NaN for a boundary entry or one that
        takes part in a singular direction of the information.
    method : str
        ``"hessian"``, ``"opg"``, ``"sandwich"`` or ``"bootstrap"``.
    covariance : ndarray, shape (P, P)
        Covariance of ``theta`` (NaN rows/columns where the SE is NaN).
    information : ndarray or None, shape (K, K)
        The information of the reduced coordinates ``theta[free]`` (``"opg"``: the
        score cross-product; ``"hessian"``/``"sandwich"``: minus the Hessian); None for
        the bootstrap.
    free : ndarray of int, shape (K,)
        Indices in ``theta`` of the reduced coordinates. In each simplex (the weights;
        every column of every factor) the largest entry is the reference, eliminated
        as one minus the others, and entries at or below ``BOUNDARY_TOL`` are held
        fixed; every other entry is free.
    boundary : ndarray of int
        Indices in ``theta`` of the entries held fixed at the boundary.
    problem : ndarray of int
        Indices in ``theta`` of free entries in a singular direction of the information.
    condition : float
        Smallest over largest eigenvalue of the information in correlation form (1 is
        perfectly conditioned; below ``SINGULAR_RCOND`` is singular). NaN for the
        bootstrap.
    draws : ndarray or None, shape (B, P)
        ``"bootstrap"``: each sample's estimate of ``theta``, classes aligned.
    n_bootstrap : int
        Bootstrap samples used (0 for the information methods).
    time : float
        Wall time in seconds.
    """

    weights: np.ndarray
    factors: list
    method: str
    covariance: np.ndarray
    information: np.ndarray | None
    free: np.ndarray
    boundary: np.ndarray
    problem: np.ndarray
    condition: float
    draws: np.ndarray | None
    n_bootstrap: int
    time: float


# ---------------------------------------------------------------- parametrization


def _as_params(params, owner: str) -> LatentClassParams:
    if hasattr(params, "params") and hasattr(params.params, "weights"):  # LatentClassFit
        params = params.params
    if hasattr(params, "weights") and hasattr(params, "factors"):
        weights, factors = params.weights, params.factors
    else:
        try:
            weights, factors = params
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"The 'params' parameter of {owner} must be a LatentClassParams, a "
                f"LatentClassFit or a (weights, factors) pair. Got "
                f"{type(params).__name__}."
            ) from err
    try:
        return check_params(weights, factors, atol=1e-6)
    except DataValidationError as err:
        raise DataValidationError(f"The 'params' parameter of {owner}: {err}") from err


def _simplex_groups(n_cat, n_components: int) -> list[np.ndarray]:
    """Indices in ``theta`` of every simplex: the weights, then each factor column."""
    offsets = offsets_of(n_cat)
    groups = [np.arange(n_components)]
    for n in range(len(n_cat)):
        rows = np.arange(offsets[n], offsets[n + 1])
        groups.extend(n_components + rows * n_components + f for f in range(n_components))
    return groups


def _reduced_map(theta: np.ndarray, groups) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
    """Free coordinates, boundary entries and the map ``M`` with ``dtheta = M dfree``."""
    free, boundary, ref_of = [], [], []
    for g in groups:
        ref = g[np.argmax(theta[g])]
        others = g[g != ref]
        at_bound = theta[others] <= BOUNDARY_TOL
        boundary.extend(others[at_bound].tolist())
        free.extend(others[~at_bound].tolist())
        ref_of.extend([ref] * int((~at_bound).sum()))
    free_idx = np.asarray(free, dtype=np.int64)
    k = free_idx.size
    rows = np.concatenate([free_idx, np.asarray(ref_of, dtype=np.int64)])
    cols = np.concatenate([np.arange(k), np.arange(k)])
    vals = np.concatenate([np.ones(k), -np.ones(k)])
    m = sp.csr_matrix((vals, (rows, cols)), shape=(theta.size, k))
    return free_idx, np.asarray(sorted(boundary), dtype=np.int64), m


def _patterns(codes: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique response patterns and their total weight (rows of weight 0 dropped)."""
    keep = ((codes >= 0).any(axis=1)) & (weight > 0)
    uniq, inverse = np.unique(codes[keep], axis=0, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=weight[keep], minlength=uniq.shape[0])
    return uniq, counts


def _safe_inverse(x: np.ndarray) -> np.ndarray:
    """``1 / x`` where ``x > 0``, else 0 (a zero entry is held fixed: never used)."""
    out = np.zeros_like(x, dtype=float)
    np.divide(1.0, x, out=out, where=x > 0)
    return out


def _full_scores_and_hessian(codes, weight, params: LatentClassParams, kind: str):
    """Per-pattern scores ``U`` (S, P) and, unless ``kind="opg"``, the Hessian (P, P).

    Both in the full coordinates ``theta`` (unconstrained: the simplex constraints are
    applied by the reduced map). See the Notes of :func:`observed_information`.
    """
    n_cat = [a.shape[0] for a in params.factors]
    n_components = params.weights.size
    offsets = offsets_of(n_cat)
    a = stack_factors(params.factors)  # (R, F)
    n_rows, n_total = codes.shape[0], int(offsets[-1])
    n_theta = n_components * (1 + n_total)
    post = posterior_classes(codes, params.weights, params.factors)  # (S, F)
    inv_w, inv_a = _safe_inverse(params.weights), _safe_inverse(a)
    u = np.zeros((n_rows, n_theta))
    u[:, :n_components] = post * inv_w
    classes = np.arange(n_components)
    for n in range(len(n_cat)):  # a loop over variables, vectorized over rows
        obs = np.flatnonzero(codes[:, n] >= 0)
        r = offsets[n] + codes[obs, n]
        u[obs[:, None], n_components + r[:, None] * n_components + classes] = (
            post[obs] * inv_a[r]
        )
    if kind == "opg":
        return u, None
    # Second derivatives of the (multilinear) likelihood of a row, over the likelihood:
    # d2 L / (d lambda_f d A_n(i, f)) / L = pi_f 1{x_n = i} / (lambda_f A_n(i, f)) and
    # d2 L / (d A_n(i, f) d A_m(j, f)) / L = pi_f 1{x_n = i, x_m = j} / (A_n A_m), n != m.
    design = one_hot_design(codes, n_cat)  # (S, R)
    var_of = np.repeat(np.arange(len(n_cat)), n_cat)
    other_var = var_of[:, None] != var_of[None, :]
    t = np.zeros((n_theta, n_theta))
    a_idx = n_components + np.arange(n_total) * n_components
    for f in range(n_components):  # a loop over classes
        wp = weight * post[:, f]
        c = (design.T @ sp.diags(wp) @ design).toarray()  # (R, R) weighted co-counts
        d = np.asarray(design.T @ wp).ravel()
        t[np.ix_(a_idx + f, a_idx + f)] = c * other_var * np.outer(inv_a[:, f], inv_a[:, f])
        t[f, a_idx + f] = d * inv_w[f] * inv_a[:, f]
        t[a_idx + f, f] = t[f, a_idx + f]
    hess = t - u.T @ (u * weight[:, None])
    return u, hess


def observed_information(
    data, params, *, kind: str = "hessian", sample_weight=None, n_categories=None
):
    r"""Information of the reduced coordinates of a latent-class PMF at ``params``.

    Parameters
    ----------
    data : CategoricalData or array_like of int (S, N)
        ``-1`` marks missing entries (marginalized out).
    params : LatentClassParams, LatentClassFit or (weights, factors)
    kind : {"hessian", "opg", "sandwich"}, default "hessian"
        ``"hessian"``: minus the Hessian of the log-likelihood; ``"opg"``: the
        cross-product of the per-row scores; ``"sandwich"``: returns minus the Hessian
        too (the sandwich's score part is ``scores.T @ diag(w) @ scores``).
    sample_weight : array_like, shape (S,), optional
        Row weights of the (pseudo-)likelihood ``sum_s w_s log Pr(x_s)``.
    n_categories : sequence of int, optional
        Alphabet sizes (default: the factors' row counts).

    Returns
    -------
    information : ndarray, shape (K, K)
    scores : ndarray, shape (S_u, K)
        Score of each unique response pattern in the reduced coordinates.
    pattern_weight : ndarray, shape (S_u,)
        Total weight of each pattern.
    free, boundary : ndarray of int
        See :class:`StandardErrors`.
    reduced_map : scipy.sparse.csr_matrix, shape (P, K)
        ``dtheta = reduced_map @ dfree`` (+1 on a free entry, -1 on its simplex's
        reference).

    Notes
    -----
    With :math:`L_s = \sum_f \lambda_f \prod_{n \in O_s} A_n(x_{sn}, f)` and the
    posterior :math:`\pi_{sf}`, the score in the unconstrained coordinates is
    :math:`\partial \log L_s / \partial \lambda_f = \pi_{sf} / \lambda_f` and
    :math:`\partial \log L_s / \partial A_n(i, f) = \pi_{sf} 1\{x_{sn} = i\} /
    A_n(i, f)`; the Hessian is :math:`\sum_s w_s (L_s^{-1} \nabla^2 L_s - u_s
    u_s^\top)` with the second derivatives of the multilinear :math:`L_s` in
    ``_full_scores_and_hessian`` (McLachlan & Peel 2000, Sec. 2.15; Louis 1982 gives
    the same matrix through the complete-data information). The reduced coordinates
    drop each simplex's largest entry, so the map to ``theta`` is linear and the
    reduced Hessian is :math:`M^\top H M` exactly.

    Examples
    --------
    >>> from bayespmf.pmf import LatentClassParams
    >>> p = LatentClassParams(np.array([1.0]), [np.array([[0.25], [0.75]])])
    >>> info, *_ = observed_information([[0], [1], [1], [1]], p)
    >>> info.round(4)  # n / (p (1 - p)) for a binomial proportion: 4 / (0.25 * 0.75)
    array([[21.3333]])
    """
    owner = "observed_information"
    kind = check_choice(kind, "kind", _KINDS, owner)
    params = _as_params(params, owner)
    n_cat_p = [a.shape[0] for a in params.factors]
    if n_categories is not None and [int(i) for i in n_categories] != n_cat_p:
        raise DataValidationError(
            f"The 'n_categories' parameter of {owner} ({list(n_categories)}) does not "
            f"match the factors' rows ({n_cat_p})."
        )
    codes, _ = as_codes(data, n_cat_p, name="data", allow_empty_columns=True)
    weight = (
        np.ones(codes.shape[0])
        if sample_weight is None
        else check_sample_weight(sample_weight, codes.shape[0], owner)
    )
    uniq, counts = _patterns(codes, weight)
    if uniq.shape[0] == 0:
        raise DataValidationError(
            f"Every row of 'data' given to {owner} is entirely missing (or has weight 0)."
        )
    loglik = log_likelihood_rows(uniq, params.weights, params.factors)
    if not np.all(np.isfinite(loglik)):
        raise DataValidationError(
            f"The 'params' given to {owner} give probability 0 to "
            f"{int((~np.isfinite(loglik)).sum())} response pattern(s) of 'data': they "
            "cannot be the estimate of these data. Pass the estimate fitted to 'data'."
        )
    n_components = params.weights.size
    theta = np.concatenate([params.weights, stack_factors(params.factors).ravel()])
    free, boundary, m = _reduced_map(theta, _simplex_groups(n_cat_p, n_components))
    u_full, h_full = _full_scores_and_hessian(uniq, counts, params, kind)
    scores = np.asarray(u_full @ m)  # (S_u, K)
    if kind == "opg":
        info = scores.T @ (scores * counts[:, None])
    else:
        info = -np.asarray(m.T @ (m.T @ h_full).T)
    info = 0.5 * (info + info.T)
    return info, scores, counts, free, boundary, m


# ---------------------------------------------------------------------- inversion


def _invert_information(info: np.ndarray):
    """Covariance of the well-determined coordinates, the problem ones and the condition.

    The information is scaled to correlation form; eigenvalues below
    ``SINGULAR_RCOND`` times the largest (or negative: not a maximum) mark a singular
    direction, and the coordinates loading on it by more than ``NULL_LOADING`` are
    problem coordinates. The rest are inverted with the problem ones held fixed.
    """
    k = info.shape[0]
    if k == 0:
        return np.zeros((0, 0)), np.zeros(0, dtype=bool), 1.0
    diag = np.diag(info)
    problem = ~(diag > 0)
    scale = np.where(problem, 1.0, np.sqrt(np.where(problem, 1.0, diag)))
    corr = info / np.outer(scale, scale)
    good = ~problem
    evals, evecs = np.linalg.eigh(corr[np.ix_(good, good)])
    top = max(float(evals.max()), 0.0) if evals.size else 0.0
    condition = float(evals.min() / top) if top > 0 else 0.0
    weak = evals <= SINGULAR_RCOND * top
    if weak.any():
        involved = (np.abs(evecs[:, weak]) > NULL_LOADING).any(axis=1)
        idx = np.flatnonzero(good)
        problem[idx[involved]] = True
        good = ~problem
    cov = np.full((k, k), np.nan)
    if good.any():
        sub = corr[np.ix_(good, good)]
        inv = np.linalg.inv(sub) / np.outer(scale[good], scale[good])
        cov[np.ix_(good, good)] = 0.5 * (inv + inv.T)
    return cov, problem, condition


def _full_covariance(cov_red, problem, m, groups, n_theta):
    """``M cov M^T`` with NaN for every entry whose simplex holds a problem coordinate."""
    good = ~problem
    mg = m[:, good]
    cov = np.asarray(mg @ (mg @ cov_red[np.ix_(good, good)]).T)
    bad_theta = np.zeros(n_theta, dtype=bool)
    bad_cols = np.flatnonzero(problem)
    if bad_cols.size:
        touched = np.unique(m[:, bad_cols].nonzero()[0])
        bad_theta[touched] = True
    cov[bad_theta, :] = np.nan
    cov[:, bad_theta] = np.nan
    return cov, bad_theta


def _split_theta(values: np.ndarray, n_components: int, n_cat) -> tuple[np.ndarray, list]:
    return values[:n_components].copy(), split_factors(
        values[n_components:].reshape(-1, n_components), n_cat
    )


# ---------------------------------------------------------------------- bootstrap


def _theta_of(params: LatentClassParams) -> np.ndarray:
    return np.concatenate([params.weights, stack_factors(params.factors).ravel()])


def align_to(params: LatentClassParams, reference: LatentClassParams) -> LatentClassParams:
    """``params`` with its classes permuted to best match ``reference`` (Hungarian).

    The cost of matching class ``g`` of ``params`` to class ``f`` of ``reference`` is
    the squared distance between their stacked columns (factors and weight), the
    assignment solved by :func:`scipy.optimize.linear_sum_assignment`.

    Examples
    --------
    >>> ref = LatentClassParams(np.array([0.3, 0.7]), [np.array([[0.9, 0.2], [0.1, 0.8]])])
    >>> swapped = LatentClassParams(ref.weights[::-1], [ref.factors[0][:, ::-1]])
    >>> align_to(swapped, ref).weights
    array([0.3, 0.7])
    """
    a = np.vstack([stack_factors(params.factors), params.weights[None, :]])
    b = np.vstack([stack_factors(reference.factors), reference.weights[None, :]])
    cost = ((b[:, :, None] - a[:, None, :]) ** 2).sum(axis=0)  # (F ref, F params)
    _, perm = linear_sum_assignment(cost)
    return LatentClassParams(params.weights[perm], [f[:, perm] for f in params.factors])


def _bootstrap(codes, n_cat, weight, params, n_bootstrap, n_init, rng, progressbar):
    """Nonparametric bootstrap estimates of ``theta`` (B, P), classes aligned.

    A resample of the rows is drawn as multinomial counts of each row (vectorized) and
    fitted as row weights, so the EM map runs over the distinct patterns only.
    """
    n_components = params.weights.size
    n_rows = codes.shape[0]
    data = codes
    draws = np.empty((n_bootstrap, n_components * (1 + int(np.sum(n_cat)))))
    n_warn = 0
    rows = CategoricalData(codes, n_cat)
    p_rows = weight / weight.sum()
    with progress_bar(n_bootstrap, "bootstrap", enabled=progressbar) as bar:
        for b in range(n_bootstrap):
            counts = rng.multinomial(n_rows, p_rows).astype(float)
            # Survey weights travel with their rows: a drawn row keeps its weight
            # relative to the others (for unit weights this is plain resampling).
            w = counts * (weight / weight.mean())
            starts = [params, *random_starts(rows, n_components, n_init - 1, rng)]
            fit, unconverged = fit_from_starts(
                data,
                n_cat,
                n_components,
                starts,
                sample_weight=w,
                random_state=rng,
                owner="standard_errors",
            )
            n_warn += unconverged
            draws[b] = _theta_of(align_to(fit.params, params))
            bar.update()
    return draws, n_warn


# ------------------------------------------------------------------------- public


def standard_errors(
    data,
    params,
    *,
    method: str = "information",
    information: str = "hessian",
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP_SE,
    n_init: int = DEFAULT_N_INIT_SE,
    random_state=None,
    sample_weight=None,
    n_categories=None,
    progressbar: bool = False,
) -> StandardErrors:
    r"""Standard errors of the weights and factors of a latent-class PMF estimate.

    Parameters
    ----------
    data : CategoricalData or array_like of int (S, N)
        The rows ``params`` was fitted to; ``-1`` marks missing entries.
    params : LatentClassParams, LatentClassFit or (weights, factors)
        The point estimate (an interior maximum of the likelihood on ``data`` for the
        information methods to be valid).
    method : {"information", "bootstrap"}, default "information"
        Inverse observed information (fast, asymptotic) or the nonparametric bootstrap.
    information : {"hessian", "opg", "sandwich"}, default "hessian"
        ``method="information"`` only: minus the analytic Hessian, the cross-product
        of the per-row scores (BHHH), or the robust sandwich ``H^-1 J H^-1`` (use it
        with survey weights or a doubtful model).
    n_bootstrap : int, default DEFAULT_N_BOOTSTRAP_SE
        ``method="bootstrap"``: resamples.
    n_init : int, default DEFAULT_N_INIT_SE
        ``method="bootstrap"``: starts of each refit (the point estimate first).
    random_state : None, int or numpy.random.Generator
        Seeds the bootstrap (resamples and random starts).
    sample_weight : array_like, shape (S,), optional
        Row weights, as given to :func:`~bayespmf.fit.fit_latent_class`.
    n_categories : sequence of int, optional
        Alphabet sizes (default: the factors' row counts).
    progressbar : bool, default False

    Returns
    -------
    StandardErrors
        ``.weights`` (F,) and ``.factors`` (list of (I_n, F)) are the standard errors,
        in the layout of ``params``.

    Raises
    ------
    ValueError
        Bad ``method``, ``information``, ``n_bootstrap``, ``n_init`` or ``params``.
    DataValidationError
        ``data`` malformed, or ``params`` giving probability 0 to a row of ``data``.

    Warns
    -----
    UserWarning
        Information methods: some entries are on the boundary (held fixed, SE NaN), or
        the information is singular in some directions (their entries' SE NaN).
    ConvergenceWarning
        Bootstrap: some refits stopped at ``max_iter``.

    Notes
    -----
    Information methods (McLachlan & Peel 2000, Sec. 2.15-2.16): with ``I`` the
    information of the reduced coordinates (:func:`observed_information`) and ``M``
    the linear map back to every entry, ``Cov(theta) = M I^{-1} M^T``; the sandwich is
    ``M H^{-1} J H^{-1} M^T`` with ``J`` the score cross-product (White 1982). The
    delta method is exact here because ``M`` is linear; the SE of an entry does not
    depend on which entry of its simplex is eliminated. Entries at the boundary (at
    most ``BOUNDARY_TOL``) are held fixed: the usual asymptotics fail there (Self &
    Liang 1987), and their SE is NaN. A singular information (non-identified
    parameters) gives NaN for the entries in the null directions; the others are
    computed with those held fixed.

    Bootstrap (Efron & Tibshirani 1993, Ch. 6): rows resampled with replacement,
    each resample refitted by :func:`~bayespmf.fit.fit_latent_class` from the point
    estimate plus ``n_init - 1`` random starts, classes matched to the point
    estimate's (:func:`align_to`); the SE is the standard deviation of the draws.

    References
    ----------
    McLachlan, G. J. & Peel, D. (2000). Finite Mixture Models. Wiley.
    Louis, T. A. (1982). Finding the observed information matrix when using the EM
    algorithm. JRSS B 44, 226-233.
    White, H. (1982). Maximum likelihood estimation of misspecified models.
    Econometrica 50, 1-25.
    Self, S. G. & Liang, K.-Y. (1987). Asymptotic properties of maximum likelihood
    estimators ... under nonstandard conditions. JASA 82, 605-610.
    Efron, B. & Tibshirani, R. (1993). An Introduction to the Bootstrap. Chapman & Hall.

    Examples
    --------
    A one-class model's factor is a set of proportions: its SE is the binomial one.

    >>> from bayespmf.pmf import LatentClassParams
    >>> p = LatentClassParams(np.array([1.0]), [np.array([[0.25], [0.75]])] * 2)
    >>> data = [[0, 1], [1, 0], [1, 1], [1, 1]]
    >>> se = standard_errors(data, p)
    >>> se.factors[0].ravel().round(4)  # sqrt(0.25 * 0.75 / 4)
    array([0.2165, 0.2165])
    """
    t0 = time.perf_counter()
    owner = "standard_errors"
    method = check_choice(method, "method", ("information", "bootstrap"), owner)
    information = check_choice(information, "information", _KINDS, owner)
    params = _as_params(params, owner)
    n_components = params.weights.size
    n_cat = [a.shape[0] for a in params.factors]
    groups = _simplex_groups(n_cat, n_components)
    n_theta = n_components * (1 + int(np.sum(n_cat)))
    if method == "bootstrap":
        n_bootstrap = check_int(n_bootstrap, "n_bootstrap", owner=owner, low=2)
        n_init = check_int(n_init, "n_init", owner=owner, low=1)
        rng = check_random_state(random_state)
        codes, _ = as_codes(data, n_cat, name="data", allow_empty_columns=True)
        weight = (
            np.ones(codes.shape[0])
            if sample_weight is None
            else check_sample_weight(sample_weight, codes.shape[0], owner)
        )
        draws, n_warn = _bootstrap(
            codes, np.asarray(n_cat), weight, params, n_bootstrap, n_init, rng, progressbar
        )
        if n_warn:
            warnings.warn(
                f"{owner}: {n_warn} of {n_bootstrap} bootstrap refits stopped at "
                "max_iter before converging; their estimates still enter the SEs.",
                ConvergenceWarning,
                stacklevel=2,
            )
        cov = np.cov(draws, rowvar=False, ddof=1)
        se = np.sqrt(np.maximum(np.diag(cov), 0.0))
        w_se, f_se = _split_theta(se, n_components, n_cat)
        empty = np.zeros(0, dtype=np.int64)
        return StandardErrors(
            w_se,
            f_se,
            "bootstrap",
            cov,
            None,
            empty,
            empty,
            empty,
            np.nan,
            draws,
            n_bootstrap,
            time.perf_counter() - t0,
        )
    info, scores, counts, free, boundary, m = observed_information(
        data,
        params,
        kind="hessian" if information == "sandwich" else information,
        sample_weight=sample_weight,
        n_categories=n_categories,
    )
    cov_red, problem, condition = _invert_information(info)
    if information == "sandwich":
        good = ~problem
        j = scores.T @ (scores * counts[:, None])
        g = np.ix_(good, good)
        sand = np.full_like(cov_red, np.nan)
        sand[g] = cov_red[g] @ j[g] @ cov_red[g]
        cov_red = sand
    cov, bad_theta = _full_covariance(cov_red, problem, m, groups, n_theta)
    cov[boundary, :] = np.nan
    cov[:, boundary] = np.nan
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))  # NaN stays NaN
    if boundary.size:
        warnings.warn(
            f"{owner}: {boundary.size} estimate(s) are on the boundary (at most "
            f"{BOUNDARY_TOL:g}; e.g. theta index {boundary[:5].tolist()}); they are "
            "held fixed and their standard errors are NaN. Their uncertainty is not "
            "asymptotically normal: use method='bootstrap' for those entries.",
            UserWarning,
            stacklevel=2,
        )
    problem_theta = free[problem]
    if problem_theta.size:
        warnings.warn(
            f"{owner}: the information matrix is singular or ill-conditioned "
            f"(condition {condition:.2g}); the standard errors of "
            f"{int(bad_theta.sum())} estimate(s) in its null directions are NaN. The "
            "model may not be identified at this rank, or the estimate is not a "
            "maximum: check the rank and refit with more starts.",
            UserWarning,
            stacklevel=2,
        )
    w_se, f_se = _split_theta(se, n_components, n_cat)
    return StandardErrors(
        w_se,
        f_se,
        information,
        cov,
        info,
        free,
        boundary,
        problem_theta,
        condition,
        None,
        0,
        time.perf_counter() - t0,
    )
