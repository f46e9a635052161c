r"""Bootstrap likelihood-ratio test of F against F + 1 latent classes (issue 12, item 1).

The likelihood-ratio statistic of nested latent-class models does not have its usual
chi-square reference distribution (the smaller model lies on the boundary of the
larger one and some parameters are then not identified), so its null distribution is
simulated: the parametric bootstrap of McLachlan (1987) and McLachlan & Peel (2000,
Sec. 6.6), Mplus's TECH14 (the "BLRT" of Nylund, Asparouhov & Muthen 2007).

:func:`bootstrap_lrt` fits F and F + 1 classes to the data by
:func:`~bayespmf.fit.fit_latent_class`, draws ``n_bootstrap`` data sets from the
F-class estimate with each row's pattern of missing entries kept, fits both ranks to
each and reports the share of bootstrap statistics at least as large as the data's.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
from scipy.stats import binom

from bayespmf._progress import progress_bar
from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    as_codes,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.fit.latent_class import (
    fit_from_starts,
    fit_latent_class,
    max_identifiable_rank,
)
from bayespmf.fit.multistart import LocalOptimumWarning, random_starts
from bayespmf.fit.source import check_sample_weight
from bayespmf.pmf import LatentClassParams

__all__ = [
    "DEFAULT_N_BOOTSTRAP",
    "DEFAULT_N_INIT_BOOTSTRAP",
    "N_INIT_NULL",
    "SPLIT_JITTER",
    "BootstrapLRTResult",
    "bootstrap_lrt",
    "simulate_like",
    "split_starts",
]

#: Bootstrap samples (at most, with sequential stopping). 99 makes (1 + k) / (B + 1) a
#: multiple of 0.01, and the Monte Carlo SE of a p-value near 0.05 is 0.02 (Mplus's
#: TECH14 draws at most 100).
DEFAULT_N_BOOTSTRAP = 99

#: Random starts of each bootstrap F + 1 fit, besides the F splits of the bootstrap
#: F-class estimate and the data's F + 1 estimate. Chosen by the "BLRT starts" rows of
#: benchmarks/lca_vs_peers.py (:ref:`bench-blrt-starts`): fewer starts fell short of a
#: 200-start reference on Car. Each unit short lowers LR_b by 2 and the p-value with
#: it (anti-conservative), so the default is the 80 that reached every optimum.
DEFAULT_N_INIT_BOOTSTRAP = 80

#: Starts of each bootstrap F-class fit: the generating parameters (the data's F-class
#: estimate, near the bootstrap MLE by construction) and N_INIT_NULL - 1 random ones.
N_INIT_NULL = 4

#: Split starts perturb the two halves of a class by multiplying its conditional
#: probabilities by exp(+-SPLIT_JITTER z), z standard normal, before renormalizing: two
#: identical halves are a fixed point of EM, and a jitter of this size (a factor of
#: about 1.6 either way) lets EM separate them within the exploration cycles.
SPLIT_JITTER = 0.5

#: EM tolerance of the bootstrap fits (fit_latent_class's relative rule: the predicted
#: remaining gain at most BOOTSTRAP_TOL * |loglik|): 1e-6 leaves each statistic within
#: about 2e-6 |loglik| (0.007 at loglik -3500) of its limit, far below the spread of
#: the draws, and takes about half the iterations of the data fits' 1e-8 on the flat
#: likelihoods of the (F + 1)-class fits under the null.
BOOTSTRAP_TOL = 1e-6

#: Sequential stopping looks at the draws from this many on (Mplus: 2 to 100 draws).
MIN_SEQUENTIAL = 2


class BootstrapLRTResult(NamedTuple):
    """What :func:`bootstrap_lrt` returns.

    Attributes
    ----------
    n_components : int
        F, the null model's classes (the alternative has F + 1).
    lr : float
        ``2 (loglik_alt - loglik_null)`` on the data.
    p_value : float
        ``(1 + #{lr_b >= lr}) / (B + 1)`` over the B draws used.
    lr_draws : ndarray, shape (B,)
        The bootstrap statistics, in draw order.
    n_bootstrap : int
        Draws used (B; fewer than ``n_bootstrap_max`` when stopped early).
    n_bootstrap_max : int
    stopped : str
        ``"max"`` (all draws), ``"above"`` or ``"below"`` (sequential stop: the p-value
        is clearly above / below ``alpha``).
    loglik_null, loglik_alt : float
        Log-likelihoods of the F- and (F + 1)-class estimates on the data.
    params_null, params_alt : LatentClassParams
        Those estimates.
    draw_logliks : ndarray, shape (B, 2)
        Each draw's F- and (F + 1)-class log-likelihoods.
    n_clipped : int
        Draws whose F + 1 fit ended below their F fit (a missed optimum: the larger
        model contains the smaller); their statistic was set to 0.
    time : float
        Wall time in seconds, data fits included.
    """

    n_components: int
    lr: float
    p_value: float
    lr_draws: np.ndarray
    n_bootstrap: int
    n_bootstrap_max: int
    stopped: str
    loglik_null: float
    loglik_alt: float
    params_null: LatentClassParams
    params_alt: LatentClassParams
    draw_logliks: np.ndarray
    n_clipped: int
    time: float


def simulate_like(params: LatentClassParams, mask: np.ndarray, random_state=None):
    """Draw codes from a latent-class PMF with a given pattern of observed entries.

    Parameters
    ----------
    params : LatentClassParams
    mask : ndarray of bool, shape (S, N)
        True where an entry is observed; the drawn codes are ``-1`` elsewhere.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    ndarray of int64, shape (S, N)

    Notes
    -----
    A class per row from ``weights``, then each variable's code by inverting the CDF
    of its class column (one uniform per entry); vectorized over rows, a loop over
    the N variables. The entries that are missing are drawn too (and then hidden), so
    the draw of row ``s`` does not depend on the mask.

    Examples
    --------
    >>> p = LatentClassParams(np.array([1.0]), [np.array([[0.0], [1.0]])] * 2)
    >>> simulate_like(p, np.array([[True, False], [True, True]]), 0).tolist()
    [[1, -1], [1, 1]]
    """
    rng = check_random_state(random_state)
    mask = np.asarray(mask, dtype=bool)
    n_rows = mask.shape[0]
    cdf_w = np.cumsum(params.weights)
    z = np.minimum(
        np.searchsorted(cdf_w, rng.random(n_rows) * cdf_w[-1], side="right"),
        params.weights.size - 1,
    )
    codes = np.empty(mask.shape, dtype=np.int64)
    for n, a in enumerate(params.factors):
        cdf = np.cumsum(a, axis=0)  # (I_n, F)
        u = rng.random(n_rows) * cdf[-1, z]  # scaled: a column summing to 1 - 1e-16
        x = (u[None, :] >= cdf[:, z]).sum(axis=0)
        codes[:, n] = np.minimum(x, a.shape[0] - 1)
    codes[~mask] = -1
    return codes


def split_starts(params: LatentClassParams, random_state=None) -> list[LatentClassParams]:
    """F + 1 class starts from an F-class estimate: each class split in two.

    Class ``f`` becomes two classes of weight ``lambda_f / 2`` whose conditional PMFs
    are ``A_n(:, f)`` jittered by ``exp(+-SPLIT_JITTER z)`` and renormalized (the
    "split" moves of mixture-model searches; McLachlan & Peel 2000, Sec. 2.12). The
    F + 1 fit started there begins at about the F-class log-likelihood, so it rarely
    ends below it.

    Examples
    --------
    >>> p = LatentClassParams(np.array([0.4, 0.6]), [np.full((3, 2), 1 / 3)])
    >>> s = split_starts(p, random_state=0)
    >>> len(s), s[0].weights.tolist()
    (2, [0.2, 0.6, 0.2])
    """
    rng = check_random_state(random_state)
    n_components = params.weights.size
    out = []
    for f in range(n_components):
        w = np.append(params.weights, params.weights[f] / 2.0)
        w[f] /= 2.0
        factors = []
        for a in params.factors:
            z = rng.standard_normal(a.shape[0])
            lo = np.maximum(a[:, f], 1e-12) * np.exp(-SPLIT_JITTER * z)
            hi = np.maximum(a[:, f], 1e-12) * np.exp(SPLIT_JITTER * z)
            b = np.column_stack([a, hi / hi.sum()])
            b[:, f] = lo / lo.sum()
            factors.append(b)
        out.append(LatentClassParams(w / w.sum(), factors))
    return out


def _sequential_stop(k: int, b: int, n_max: int, alpha: float, risk: float) -> str | None:
    """``"above"``/``"below"`` when k exceedances in b draws settle the test, else None.

    Above: the final p-value exceeds alpha whatever the remaining draws give
    (curtailment), or a binomial test rejects a true p-value <= alpha at level
    ``risk``; below: it rejects a true p-value >= alpha at level ``risk``.
    """
    if b < MIN_SEQUENTIAL or b >= n_max:
        return None
    if (1 + k) / (n_max + 1) > alpha or binom.sf(k - 1, b, alpha) <= risk:
        return "above"
    if binom.cdf(k, b, alpha) <= risk:
        return "below"
    return None


def bootstrap_lrt(
    data,
    n_components: int,
    *,
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
    n_init: int | None = None,
    n_init_bootstrap: int = DEFAULT_N_INIT_BOOTSTRAP,
    random_state=None,
    sample_weight=None,
    progressbar: bool = False,
    sequential: bool = True,
    alpha: float = 0.05,
    sequential_risk: float = 0.05,
    n_categories=None,
) -> BootstrapLRTResult:
    r"""Parametric bootstrap likelihood-ratio test of F against F + 1 classes (TECH14).

    Parameters
    ----------
    data : CategoricalData or array_like of int (S, N)
        ``-1`` marks missing entries; all-missing rows are ignored.
    n_components : int
        F, the classes of the null model.
    n_bootstrap : int, default DEFAULT_N_BOOTSTRAP
        Bootstrap samples (the most drawn when ``sequential``).
    n_init : int, optional
        Starts of the two fits to the data (default: those of
        :func:`~bayespmf.fit.fit_latent_class`). The (F + 1)-class fit also starts
        from every split of the F-class estimate (:func:`split_starts`).
    n_init_bootstrap : int, default DEFAULT_N_INIT_BOOTSTRAP
        Random starts of each bootstrap (F + 1)-class fit, besides the F splits of that
        sample's F-class estimate and the data's (F + 1)-class estimate. Each
        bootstrap F-class fit starts from the generating parameters and
        ``N_INIT_NULL - 1`` random starts.
    random_state : None, int or numpy.random.Generator
        Seeds everything; draw ``b`` uses its own generator spawned from it, so it is
        the same whether or not the test stops early.
    sample_weight : array_like, shape (S,), optional
        Row weights. Integer weights are frequencies: a row of weight ``w`` stands for
        ``w`` rows, and the bootstrap draws ``w`` independent rows with its mask.
        Other weights are survey weights: each bootstrap sample draws one row per row
        and is fitted with the same weights (a pseudo-likelihood bootstrap; an
        approximation).
    progressbar : bool, default False
    sequential : bool, default True
        Stop drawing once the p-value is clearly above or below ``alpha`` (see Notes).
    alpha : float, default 0.05
        The level the sequential rule decides about.
    sequential_risk : float, default 0.05
        The sequential rule's binomial-test level (smaller: more draws before a stop).
    n_categories : sequence of int, optional
        Alphabet sizes (taken from ``data`` when it is a CategoricalData).

    Returns
    -------
    BootstrapLRTResult

    Raises
    ------
    ValueError
        Bad ``n_components``, ``n_bootstrap``, ``n_init_bootstrap``, ``alpha`` or
        ``sequential_risk``, or F + 1 classes beyond what the data identify.
    DataValidationError
        Malformed ``data`` or ``sample_weight``.

    Warns
    -----
    ConvergenceWarning
        Some bootstrap fits stopped at ``max_iter``.

    Notes
    -----
    The statistic is :math:`LR = 2(\hat\ell_{F+1} - \hat\ell_F)`. Bootstrap sample
    ``b`` draws every row's observed entries from the F-class estimate
    :math:`\hat\theta_F` (:func:`simulate_like`: the missing entries stay missing,
    so the missingness pattern, assumed ignorable, is held fixed) and gives
    :math:`LR_b`; the p-value is :math:`(1 + \#\{LR_b \ge LR\}) / (B + 1)` (Davison &
    Hinkley 1997, eq. 4.11; McLachlan & Peel 2000, Sec. 6.6). :math:`LR_b` is only as
    good as the (F + 1)-class fit of the sample: a missed optimum makes it small and
    the p-value too small. So each (F + 1) fit starts from every split of the
    sample's F-class estimate and from :math:`\hat\theta_{F+1}`, plus
    ``n_init_bootstrap`` random starts, all explored together by the batched EM of
    :func:`~bayespmf.fit.fit_latent_class`; the F fit starts from
    :math:`\hat\theta_F`, the sample's generating parameters. A statistic below 0 (the
    F + 1 fit ending below the F fit) is set to 0 and counted in ``n_clipped``.

    Sequential stopping (after Besag & Clifford 1991; Mplus stops TECH14 between 2 and
    100 draws): after draw ``b`` with ``k`` exceedances, stop "above" when the
    final p-value must exceed ``alpha`` whatever the remaining draws give, or when
    :math:`\Pr(K \ge k \mid b, \alpha) \le` ``sequential_risk``; stop "below" when
    :math:`\Pr(K \le k \mid b, \alpha) \le` ``sequential_risk`` (K binomial). With
    the defaults, a clearly significant test stops after 59 draws with no
    exceedance, a clearly non-significant one after at most 5 exceedances (after 2
    draws if both exceed). The p-value reported at a stop is the same formula over
    the draws made.

    References
    ----------
    McLachlan, G. J. (1987). On bootstrapping the likelihood ratio test statistic for
    the number of components in a normal mixture. Applied Statistics 36, 318-324.
    McLachlan, G. J. & Peel, D. (2000). Finite Mixture Models, Sec. 6.6. Wiley.
    Nylund, K. L., Asparouhov, T. & Muthen, B. O. (2007). Deciding on the number of
    classes in latent class analysis and growth mixture modeling: a Monte Carlo
    simulation study. Structural Equation Modeling 14, 535-569.
    Besag, J. & Clifford, P. (1991). Sequential Monte Carlo p-values. Biometrika 78,
    301-304.
    Davison, A. C. & Hinkley, D. V. (1997). Bootstrap Methods and their Application.
    Cambridge University Press.

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(300, 2, n_components=1, n_variables=5, random_state=0)
    >>> res = bootstrap_lrt(data, 1, n_bootstrap=19, n_init=20, n_init_bootstrap=10,
    ...                     random_state=0)
    >>> bool(res.p_value > 0.05), res.stopped
    (True, 'above')
    """
    t0 = time.perf_counter()
    owner = "bootstrap_lrt"
    codes, n_cat = as_codes(data, n_categories, name="data")
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
    limit = max_identifiable_rank(n_cat)
    if n_components + 1 > limit:
        raise ValueError(
            f"The 'n_components' parameter of {owner} is {n_components}, but the "
            f"alternative's "
            f"{n_components + 1} classes exceed the {limit} that alphabet sizes "
            f"{n_cat.tolist()} can identify. Use n_components <= {limit - 1}."
        )
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", owner=owner, low=1)
    n_init_bootstrap = check_int(n_init_bootstrap, "n_init_bootstrap", owner=owner, low=0)
    if n_init is not None:
        n_init = check_int(n_init, "n_init", owner=owner, low=1)
    alpha = check_float(alpha, "alpha", owner=owner, low=0.0, high=1.0, low_open=True)
    sequential_risk = check_float(
        sequential_risk, "sequential_risk", owner=owner, low=0.0, high=1.0, low_open=True
    )
    rng = check_random_state(random_state)
    weight = None
    if sample_weight is not None:
        weight = check_sample_weight(sample_weight, codes.shape[0], owner)
    keep = (
        (codes >= 0).any(axis=1)
        if weight is None
        else (codes >= 0).any(axis=1) & (weight > 0)
    )
    codes = codes[keep]
    weight = None if weight is None else weight[keep]
    if codes.shape[0] == 0:
        raise DataValidationError(
            f"Every row of 'data' given to {owner} is entirely missing (or has weight 0)."
        )
    # the masks of the bootstrap rows, and the weights their fits use
    if weight is not None and np.all(weight == np.round(weight)):
        boot_mask, boot_weight = (
            np.repeat(codes >= 0, weight.astype(np.int64), axis=0),
            None,
        )
    else:
        boot_mask, boot_weight = codes >= 0, weight
    # TODO(covariates): with covariate rows (bayespmf/fit/covariates.py) the null
    # model's class weights differ by row: draw z_s from each row's own weights here
    # and refit both ranks with the covariates.

    fit_kw = {"n_categories": n_cat, "sample_weight": weight, "owner": owner}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalOptimumWarning)
        null = fit_latent_class(
            codes, n_components, n_init=n_init, random_state=rng, **fit_kw
        )
        alt = fit_latent_class(
            codes, n_components + 1, n_init=n_init, random_state=rng, **fit_kw
        )
    split, _ = fit_from_starts(
        codes,
        n_cat,
        n_components + 1,
        split_starts(null.params, rng),
        sample_weight=weight,
        random_state=rng,
        owner=owner,
    )
    if split.loglik > alt.loglik:
        alt = split
    lr = max(2.0 * (alt.loglik - null.loglik), 0.0)

    seeds = rng.integers(0, 2**63 - 1, size=n_bootstrap)
    logliks = np.full((n_bootstrap, 2), np.nan)
    lr_draws = np.full(n_bootstrap, np.nan)
    n_unconverged, n_exceed, stopped, n_used = 0, 0, "max", n_bootstrap
    with progress_bar(n_bootstrap, "bootstrap LRT", enabled=progressbar) as bar:
        for b in range(n_bootstrap):
            g = np.random.default_rng(seeds[b])
            sim = simulate_like(null.params, boot_mask, g)
            sim_rows = CategoricalData(sim, n_cat)
            starts0 = [
                null.params,
                *random_starts(sim_rows, n_components, N_INIT_NULL - 1, g),
            ]
            kw = {"sample_weight": boot_weight, "random_state": g, "owner": owner}
            f0, bad0 = fit_from_starts(
                sim, n_cat, n_components, starts0, tol=BOOTSTRAP_TOL, **kw
            )
            starts1 = [
                *split_starts(f0.params, g),
                alt.params,
                *random_starts(sim_rows, n_components + 1, n_init_bootstrap, g),
            ]
            f1, bad1 = fit_from_starts(
                sim, n_cat, n_components + 1, starts1, tol=BOOTSTRAP_TOL, **kw
            )
            n_unconverged += bad0 + bad1
            logliks[b] = f0.loglik, f1.loglik
            lr_draws[b] = 2.0 * (f1.loglik - f0.loglik)
            n_exceed += max(lr_draws[b], 0.0) >= lr
            bar.update()
            bar.set_postfix(exceed=n_exceed)
            if sequential:
                stop = _sequential_stop(
                    n_exceed, b + 1, n_bootstrap, alpha, sequential_risk
                )
                if stop is not None:
                    stopped, n_used = stop, b + 1
                    break
    lr_draws, logliks = lr_draws[:n_used], logliks[:n_used]
    n_clipped = int((lr_draws < 0).sum())
    lr_draws = np.maximum(lr_draws, 0.0)
    if n_unconverged:
        warnings.warn(
            f"{owner}: {n_unconverged} bootstrap fits stopped at max_iter before "
            "converging; their statistics still enter the p-value.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return BootstrapLRTResult(
        n_components=n_components,
        lr=float(lr),
        p_value=float((1 + np.sum(lr_draws >= lr)) / (n_used + 1)),
        lr_draws=lr_draws,
        n_bootstrap=int(n_used),
        n_bootstrap_max=n_bootstrap,
        stopped=stopped,
        loglik_null=float(null.loglik),
        loglik_alt=float(alt.loglik),
        params_null=null.params,
        params_alt=alt.params,
        draw_logliks=logliks,
        n_clipped=n_clipped,
        time=time.perf_counter() - t0,
    )
