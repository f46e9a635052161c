r"""One public fit function for latent-class PMFs, with a registry of methods.

:func:`fit_latent_class` validates, picks the method from :data:`METHODS` by name and
runs it on a *data source*: an object with ``n_categories``, ``names``, ``categories``
and the passes a method needs (``pairwise_marginals()``, ``triple_marginals()``,
``categorical()``, ``em_kernel(rank, backend)``).
:class:`~bayespmf.fit.source.InMemorySource` holds rows in memory; ``bayespmf.dask``
supplies one over chunked arrays, so the estimator
(:class:`~bayespmf.estimators.LatentClassPMF`) and the Dask path call the same function
(as scikit-learn's ``NMF`` calls ``non_negative_factorization``).

The default method, ``"auto"``, is the maximum-likelihood estimate from several starts
(:func:`multistart`): the CNMF-SPA estimate (Ibrahim & Fu, Alg. 2) and random starts
drawn from ``random_state``, each refined by SQUAREM-PMF (Chege et al., Tables I-II)
under the stopping rule of :mod:`bayespmf.fit.loop`; the best log-likelihood is kept
and the distinct optima are reported, as poLCA and Mplus do.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Callable

import numpy as np

from bayespmf._validation import (
    ConvergenceWarning,
    check_float,
    check_int,
    check_random_state,
    check_rank_limit,
)
from bayespmf.fit import defaults
from bayespmf.fit.cnmf import cnmf_opt
from bayespmf.fit.ctd import ctd
from bayespmf.fit.em import EMInfo, ad_em, em_start, run_em
from bayespmf.fit.juror import juror
from bayespmf.fit.memory import check_memory
from bayespmf.fit.multistart import (
    LatentClassFit,
    floor_params,
    multistart,
    warn_optima,
)
from bayespmf.fit.recorded import call_recording_warnings
from bayespmf.fit.source import as_source
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.pmf import (
    check_params,
    log_likelihood_rows,
)

__all__ = [
    "EM_METHODS",
    "WEIGHTED_METHODS",
    "METHODS",
    "fit_latent_class",
    "max_identifiable_rank",
    "check_identifiable_rank",
    "fit_from_starts",
    "rescaled_fit",
]


#: Estimation methods and what each runs.
METHODS = {
    "auto": "maximum likelihood from several starts (CNMF-SPA and random), each refined "
    "by SQUAREM-PMF; the best kept, the distinct optima reported",
    "em": "EM from a random uniform start (RAND-EM)",
    "squarem": "SQUAREM-PMF accelerated EM from a random uniform start",
    "cnmf-spa": "CNMF-SPA (Ibrahim & Fu, Alg. 2) on the pairwise marginals",
    "cnmf-opt": "CNMF-OPT (Ibrahim & Fu, Alg. 1) started from CNMF-SPA: KL mirror descent "
    "on the pairwise marginals",
    "cnmf-spa-em": "CNMF-SPA, then EM on the full data (Ibrahim & Fu, Sec. 5)",
    "cnmf-spa-squarem": "CNMF-SPA, then SQUAREM-PMF accelerated EM",
    "juror": "JUROR (Vora et al., Alg. 1: G1+G2+G3) on one-way marginals of random "
    "2-sparse projections",
    "juror-b": "JUROR ablation G1+G3",
    "juror-c": "JUROR ablation G1+G2",
    "ctd": "CTD baseline (Kargas et al.): coupled factorization of the triple marginals",
    "ad-em": "MLE-AD-EM baseline (Yeredor & Haardt): alternating directions, then EM",
}

#: Methods whose estimate is the EM fixed point, run here (AD-EM runs its own EM):
#: their max_iter warning is raised here (the other kernels warn themselves).
EM_METHODS = ("auto", "em", "squarem", "cnmf-spa-em", "cnmf-spa-squarem")

#: Methods that take ``sample_weight``: the EM methods (weighted rows; their CNMF-SPA
#: start uses weighted pairwise marginals) and CNMF-SPA / CNMF-OPT (weighted pairwise
#: marginals, :func:`bayespmf.marginals.pairwise_marginals`).
WEIGHTED_METHODS = (*EM_METHODS, "cnmf-spa", "cnmf-opt")


def check_identifiable_rank(n_components, n_categories, owner: str) -> int:
    """``n_components`` as an int, at most :func:`max_identifiable_rank` of the alphabets.

    The check :func:`fit_latent_class` makes (``bayespmf run --check`` makes it too).

    Raises
    ------
    ValueError
        ``n_components`` not an int >= 1, or (a ``DataValidationError``) above the limit.
    """
    return check_rank_limit(
        n_components,
        max_identifiable_rank(n_categories),
        owner=owner,
        why=f"with alphabet sizes {np.asarray(n_categories).tolist()} such a model has "
        "more free parameters than the full joint PMF, so it cannot be identified.",
    )


def max_identifiable_rank(n_categories) -> int:
    """Largest rank whose parameter count does not exceed that of the full joint PMF.

    A rank-F latent-class model has ``F (1 + sum_n (I_n - 1)) - 1`` free parameters;
    with more than the ``prod_n I_n - 1`` free entries of the joint PMF it cannot be
    identified from any amount of data.

    Examples
    --------
    >>> max_identifiable_rank([2, 2, 2])
    2
    >>> max_identifiable_rank([4, 4, 4, 4, 3, 3, 3])
    363
    """
    # exact integer arithmetic: the product of the alphabet sizes overflows float64
    # beyond ~1e308 (e.g. 400 variables of 10 categories)
    n_cat = [int(i) for i in np.asarray(n_categories).ravel()]
    per_class = 1 + sum(i - 1 for i in n_cat)
    return max(1, math.prod(n_cat) // per_class)


def _em_stage(source, n_components, init, accelerate, opts, callback):
    kernel = source.em_kernel(n_components, opts["backend"])
    w, a = em_start(
        init, source.n_categories, n_components, opts["rng"], owner="fit_latent_class"
    )
    params, info = run_em(
        kernel,
        w,
        a,
        source.n_categories,
        accelerate=accelerate,
        max_iter=opts["max_iter"],
        tol=opts["tol"],
        progressbar=opts["progressbar"],
        callback=callback,
        owner="fit_latent_class",
        warn=False,
    )
    return params, info


def _run_em_method(accelerate, spectral):
    def run(source, n_components, opts, callback):
        info: dict = {}
        init = None
        if spectral:
            spa, info["cnmf_spa"] = cnmf_spa(
                source.pairwise_marginals(), n_components, random_state=opts["rng"]
            )
            init = floor_params(spa)
        params, em = _em_stage(source, n_components, init, accelerate, opts, callback)
        info["em"] = em
        return LatentClassFit(
            params, em.loglik, em.n_iter, em.loglik_trace, em.converged, info
        )

    return run


def _run_cnmf_spa(source, n_components, opts, callback):
    params, spa = cnmf_spa(
        source.pairwise_marginals(), n_components, random_state=opts["rng"]
    )
    return LatentClassFit(
        floor_params(params), np.nan, 0, np.array([]), True, {"cnmf_spa": spa}
    )


def _run_cnmf_opt(source, n_components, opts, callback):
    # started from CNMF-SPA, as the paper proposes (Sec. 4.2)
    params, info = cnmf_opt(
        source.pairwise_marginals(),
        n_components,
        init="cnmf-spa",
        max_iter=opts["max_iter"],
        tol=opts["tol"],
        random_state=opts["rng"],
        progressbar=opts["progressbar"],
    )
    return LatentClassFit(
        floor_params(params),
        np.nan,
        int(info.get("n_iter", 0)),
        np.asarray(info.get("objective", []), dtype=float),
        bool(info.get("converged", True)),
        {"cnmf_opt": info},
    )


def _run_kernel(kernel, extra, stats):
    def run(source, n_components, opts, callback):
        kwargs = dict(extra, random_state=opts["rng"], progressbar=opts["progressbar"])
        if opts["max_iter_given"] is not None:
            kwargs["max_iter"] = opts["max_iter_given"]
        if opts["tol_given"] is not None:
            kwargs["tol"] = opts["tol_given"]
        data = source.triple_marginals() if stats == "triple" else source.categorical()
        params, info = kernel(data, n_components, **kwargs)
        em = info.get("em")
        return LatentClassFit(
            params if em is not None else floor_params(params),
            float(em.loglik) if em is not None else np.nan,
            int(info.get("n_iter", 0)),
            np.asarray(em.loglik_trace if em is not None else [], dtype=float),
            bool(info.get("converged", True)),
            {kernel.__name__: info},
        )

    return run


#: method name -> runner(source, rank, opts, callback) -> LatentClassFit, and the
#: stage whose max_iter/tol defaults apply (None: the kernel's own defaults).
_REGISTRY: dict[str, tuple[Callable, str | None]] = {
    "em": (_run_em_method(None, spectral=False), "em"),
    "squarem": (_run_em_method("squarem", spectral=False), "squarem"),
    "cnmf-spa": (_run_cnmf_spa, None),
    "cnmf-opt": (_run_cnmf_opt, "cnmf-opt"),
    "cnmf-spa-em": (_run_em_method(None, spectral=True), "em"),
    "cnmf-spa-squarem": (_run_em_method("squarem", spectral=True), "squarem"),
    "juror": (_run_kernel(juror, {"variant": "a"}, "rows"), None),
    "juror-b": (_run_kernel(juror, {"variant": "b"}, "rows"), None),
    "juror-c": (_run_kernel(juror, {"variant": "c"}, "rows"), None),
    "ctd": (_run_kernel(ctd, {}, "triple"), None),
    "ad-em": (_run_kernel(ad_em, {}, "rows"), None),
}


def _check_method(method, owner):
    if method not in METHODS:
        close = difflib.get_close_matches(str(method), list(METHODS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"The 'method' parameter of {owner} must be one of {list(METHODS)}. "
            f"Got {method!r}.{hint}"
        )
    return method


def fit_latent_class(
    data,
    n_components: int,
    method: str = "auto",
    *,
    n_categories=None,
    n_init: int | None = None,
    init="auto",
    max_iter: int | None = None,
    tol: float | None = None,
    random_state=None,
    backend: str = "auto",
    progressbar: bool = False,
    callback=None,
    sample_weight=None,
    owner: str = "fit_latent_class",
) -> LatentClassFit:
    """Fit a latent-class PMF ``Pr(x) = sum_f lambda_f prod_n A_n(x_n, f)`` by ``method``.

    Parameters
    ----------
    data : CategoricalData, array_like of int (S, N), or a data source
        ``-1`` marks missing entries (marginalized out); all-missing rows are ignored.
        A data source (see the module docstring; e.g. ``bayespmf.dask``'s) is used as
        it is.
    n_components : int
        Number of latent classes F.
    method : str, default "auto"
        A key of :data:`METHODS`. ``"auto"`` is the maximum-likelihood estimate from
        ``n_init`` starts (:func:`multistart`); the others are the single-start
        algorithms of the papers.
    n_categories : sequence of int, optional
        Alphabet sizes (taken from ``data`` when it is a CategoricalData).
    n_init : int, optional
        Starts of ``"auto"``; must be None or 1 for the other methods. ``None`` (the
        default): rounds of ``DEFAULT_N_INIT`` starts, another round while the best
        log-likelihood is not replicated, at most ``MAX_ROUNDS``
        (:mod:`bayespmf.fit.defaults`); an integer: that many starts, one round.
    init : "auto", "random" or list of LatentClassParams, default "auto"
        Starts of ``"auto"`` (see :func:`multistart`).
    max_iter, tol : optional
        Iteration cap and tolerance of the iterative stage; by default
        ``DEFAULT_MAX_ITER``/``DEFAULT_TOL`` of the method (:mod:`bayespmf.fit.defaults`;
        the kernels' own for JUROR, CTD and AD-EM). EM stages stop by the rule of
        :mod:`bayespmf.fit.loop`.
    random_state : None, int or numpy.random.Generator
        Seeds every random part (starts, split search, projections).
    backend : {"auto", "numba", "pytensor", "scipy"}, default "auto"
        The EM map, as in :func:`bayespmf.fit.fit_em` (``"auto"`` is ``"numba"``).
    progressbar : bool, default False
    callback : callable, optional
        ``callback(n_iter, EMState)`` after each EM iteration of the single-start EM
        methods; returning True stops the fit.
    sample_weight : array_like, shape (S,), optional
        A weight per row (frequencies of response patterns, survey weights): the
        weighted likelihood ``sum_s w_s log Pr(x_s)`` is maximized (EM methods), or
        the weighted pairwise marginals are factored (CNMF-SPA, CNMF-OPT, and the
        CNMF-SPA start): methods in ``WEIGHTED_METHODS``. The estimate does not
        depend on the weights' scale (``c * w`` fits as ``w``: the fit runs on the
        weights divided by their mean); the log-likelihoods reported are those of
        ``w`` itself (a ``callback`` sees the EM state on the mean-1 weights).
    owner : str
        Name used in messages (the estimator passes its own).

    Returns
    -------
    LatentClassFit

    Raises
    ------
    DataValidationError
        Malformed data, a variable never observed, or a rank that cannot be identified.
    ValueError
        Bad ``method``, ``n_init``, ``max_iter``, ``tol`` or ``callback``.
    InsufficientMemoryError
        (A ``ValueError`` and ``MemoryError``.) The statistics of ``method`` would not
        fit in the available memory (:func:`~bayespmf.fit.memory.memory_estimate`,
        :func:`~bayespmf.fit.memory.available_memory`; checked before allocating
        them); the message names the bytes and a method that fits.

    Warns
    -----
    ConvergenceWarning
        When the iterative stage (of the best start) stopped at ``max_iter``.
    MemoryBudgetWarning
        ``"auto"``: its CNMF-SPA start was left out because its pairwise marginals
        (``(sum I)^2`` entries) would not fit in the available memory.
    LocalOptimumWarning
        ``"auto"``: the best log-likelihood was not replicated: fewer than
        ``max(MIN_BEST_STARTS, MIN_BEST_SHARE * refined)`` refined starts reached it
        (with the default ``n_init``, after up to ``MAX_ROUNDS`` rounds of starts).

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(1000, [2, 3, 2, 3, 2], n_components=2, random_state=0)
    >>> fit = fit_latent_class(data, 2, random_state=0)
    >>> fit.optima[["n_starts"]].to_numpy().ravel().tolist()
    [30]
    >>> bool(fit.loglik < 0), fit.converged
    (True, True)
    """
    method = _check_method(method, owner)
    if sample_weight is not None and method not in WEIGHTED_METHODS:
        raise ValueError(
            f"The 'sample_weight' parameter of {owner} is supported by the methods "
            f"{list(WEIGHTED_METHODS)} (EM on weighted rows, CNMF on weighted pairwise "
            f"marginals); method={method!r} estimates from unweighted statistics."
        )
    source = as_source(data, n_categories, sample_weight, owner)
    n_cat = source.n_categories
    n_components = check_identifiable_rank(n_components, n_cat, owner)
    if callback is not None and not callable(callback):
        raise ValueError(
            f"The 'callback' parameter of {owner} must be callable or None. Got "
            f"{type(callback).__name__}."
        )
    if method == "auto":
        stage = "auto"
        if isinstance(init, list | tuple):
            given = [check_params(w, f, n_cat) for w, f in init]
            if n_init is not None and n_init != len(given):
                raise ValueError(
                    f"The 'n_init' parameter of {owner} is {n_init} but 'init' holds "
                    f"{len(given)} starts. Leave n_init=None or make them agree."
                )
            n_init = len(given)
            init = given
        elif init not in ("auto", "random"):
            raise ValueError(
                f"The 'init' parameter of {owner} must be 'auto', 'random' or a list of "
                f"(weights, factors) starts. Got {init!r}."
            )
        max_rounds = defaults.MAX_ROUNDS if n_init is None and isinstance(init, str) else 1
        n_init = check_int(
            defaults.DEFAULT_N_INIT if n_init is None else n_init,
            "n_init",
            owner=owner,
            low=1,
        )
    else:
        stage = _REGISTRY[method][1]
        if n_init not in (None, 1):
            raise ValueError(
                f"The 'n_init' parameter of {owner} applies to method='auto' only; "
                f"method={method!r} runs from one start. Use method='auto' for "
                "several starts."
            )
    max_iter_given = (
        None if max_iter is None else check_int(max_iter, "max_iter", owner=owner, low=1)
    )
    tol_given = None if tol is None else check_float(tol, "tol", owner=owner, low=0.0)
    opts = {
        "rng": check_random_state(random_state),
        "max_iter": max_iter_given
        if max_iter_given is not None
        else defaults.DEFAULT_MAX_ITER.get(stage),
        "tol": tol_given if tol_given is not None else defaults.DEFAULT_TOL.get(stage),
        "max_iter_given": max_iter_given,
        "tol_given": tol_given,
        "backend": backend,
        "progressbar": bool(progressbar),
    }
    check_memory(method, source, n_components, n_init, owner)
    if method == "auto":
        result = multistart(
            source,
            n_components,
            n_init=n_init,
            init=init,
            max_iter=opts["max_iter"],
            tol=opts["tol"],
            random_state=opts["rng"],
            backend=backend,
            progressbar=progressbar,
            max_rounds=max_rounds,
        )
        warn_optima(result, n_init, owner, scale=source.weight_scale)
    else:
        result = _REGISTRY[method][0](source, n_components, opts, callback)
    params = check_params(result.params.weights, result.params.factors, n_cat, atol=1e-6)
    loglik = result.loglik
    if not np.isfinite(loglik) and hasattr(source, "codes"):
        # methods that never touch the rows (CNMF-SPA, CNMF-OPT): their (weighted)
        # log-likelihood on the rows
        rows = log_likelihood_rows(source.codes, *params)
        weight = getattr(source, "row_weight", None)
        loglik = float(rows.sum() if weight is None else rows @ weight)
    result = rescaled_fit(
        result._replace(params=params, loglik=loglik),
        getattr(source, "weight_scale", 1.0),
        loglik_trace=method in EM_METHODS,
    )
    em = result.info.get("em")
    cut = result.info.get("polish_cut") if method == "auto" else None
    if cut is not None:
        again = (
            f"LatentClassPMF({n_components}, init=[(est.weights_, est.factors_)], n_init=1)"
            if owner.startswith("LatentClassPMF")
            else f"fit_latent_class(data, {n_components}, init=[fit.params], n_init=1)"
        )
        to_come = (
            f"the estimate of the log-likelihood still to gain was "
            f"{cut['gain_to_come']:.3g}"
            if np.isfinite(cut["gain_to_come"])
            else f"its log-likelihood was still rising by {cut['last_gain']:.3g} per "
            "cycle without slowing down"
        )
        warnings.warn(
            f"{owner}: the polish of the best start stopped at its budget of "
            f"{cut['budget']:.0f} EM maps ({cut['share']:g} times the maps of the search "
            f"before it, at least {cut['min_maps']}) while {to_come} (the polish asks "
            f"at most {cut['deep_bound']:.3g} still to come): the likelihood is nearly "
            "flat around this estimate (rows with little latent structure for this many "
            f"classes), so it may stop short of the maximum. To carry it on: {again}; or "
            "consider fewer classes.",
            ConvergenceWarning,
            stacklevel=3,
        )
    elif method in EM_METHODS and not result.converged and not em.stopped:
        warnings.warn(
            f"{owner}(method={method!r}) stopped after max_iter={opts['max_iter']} "
            f"iterations while the objective was still rising by more than "
            f"tol={opts['tol']} allows. Increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return result


def rescaled_fit(result: LatentClassFit, scale: float, *, loglik_trace: bool):
    """``result`` with its log-likelihoods multiplied by the weights' ``scale``.

    The fit ran on weights of mean 1 (:func:`unit_mean_weights`); the log-likelihoods it
    reports are those of the caller's weights, ``sum_s w_s log Pr(x_s)``: the total,
    the trace (``loglik_trace``: when it holds log-likelihoods, not a CNMF misfit),
    the optima's ``loglik``/``gap``, the starts' log-likelihoods in ``info`` and the
    EM stage's record ``info["em"]``.
    """
    if scale == 1.0:
        return result
    info = dict(result.info)
    for key in ("refined_loglik", "explore_loglik", "polish_reach"):
        if info.get(key) is not None:
            info[key] = np.asarray(info[key], dtype=float) * scale
    if info.get("polish_cut") is not None:
        cut = dict(info["polish_cut"])
        for key in ("gain_to_come", "deep_bound", "last_gain"):
            cut[key] *= scale
        info["polish_cut"] = cut
    em = info.get("em")
    if isinstance(em, EMInfo):
        info["em"] = em._replace(
            loglik=em.loglik * scale,
            loglik_trace=np.asarray(em.loglik_trace, dtype=float) * scale,
        )
    optima = result.optima
    if optima is not None:
        optima = optima.copy()
        optima["loglik"] = optima["loglik"] * scale
        optima["gap"] = optima["gap"] * scale
    trace = np.asarray(result.loglik_trace, dtype=float)
    return result._replace(
        loglik=float(result.loglik * scale),
        loglik_trace=trace * scale if loglik_trace else trace,
        info=info,
        optima=optima,
    )


def fit_from_starts(
    codes,
    n_categories,
    n_components,
    starts,
    *,
    sample_weight=None,
    random_state=None,
    tol=None,
    owner="fit_latent_class",
):
    """The best of the given ``starts`` (``fit_latent_class(init=starts)``), quietly.

    For refits inside resampling loops (bootstrap LRT, bootstrap standard errors):
    warnings about the starts are not shown; the second value says whether the best
    refit stopped at ``max_iter``.

    Returns
    -------
    fit : LatentClassFit
    unconverged : bool
    """
    fit, caught = call_recording_warnings(
        fit_latent_class,
        codes,
        n_components,
        n_categories=n_categories,
        init=[tuple(s) for s in starts],
        random_state=random_state,
        sample_weight=sample_weight,
        tol=tol,
        owner=owner,
    )
    unconverged = any(issubclass(c.category, ConvergenceWarning) for c in caught)
    return fit, unconverged
