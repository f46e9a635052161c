"""EM and SQUAREM-PMF for the latent-class PMF: the kernel steps under the one loop.

:func:`fit_em` builds the EM map of a data set once (:func:`bayespmf.kernels.em.
build_em_kernel`) and runs it, plain or accelerated by SQUAREM-PMF (Chege et al.,
Tables I-II), under :func:`bayespmf.fit.loop.iterate` and its stopping rule.
:func:`run_em` runs any kernel so: :func:`bayespmf.fit.fit_latent_class` passes it its
data source's (``source.em_kernel``), which is how the Dask backend's kernel runs.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from bayespmf._validation import (
    DataValidationError,
    as_codes,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.fit.loop import StepInfo, iterate
from bayespmf.fit.squarem import (
    SQUAREM_PMF_CYCLE_MAPS,
    squarem_pmf_converged,
    squarem_pmf_steps,
)
from bayespmf.kernels.ad_em import DEFAULT_AD_ITER, DEFAULT_INNER_ITER, ad_sweep
from bayespmf.kernels.em import EMState, build_em_kernel, init_random, normalize_blocks
from bayespmf.pmf import LatentClassParams, check_params, offsets_of, split_factors

__all__ = [
    "ACCELERATORS",
    "EMInfo",
    "ad_em",
    "check_em_args",
    "em_runner",
    "em_start",
    "em_steps",
    "fit_em",
    "run_em",
]

#: Names accepted by ``fit_em(accelerate=...)``.
ACCELERATORS = (None, "squarem")


class EMInfo(NamedTuple):
    """What :func:`fit_em` reports besides the parameters.

    Attributes
    ----------
    n_iter : int
        Iterations of the algorithm (EM steps, or SQUAREM-PMF cycles of >= 3 EM maps).
    n_evals : int
        Evaluations of the EM map (the cost measure comparable between the two).
    loglik_trace : ndarray, shape (n_iter,)
        Log-likelihood at the start of every iteration (non-decreasing).
    converged : bool
        Whether the stopping rule of :mod:`bayespmf.fit.loop` was met.
    loglik : float
        Log-likelihood of the returned parameters.
    stopped : bool
        Whether the callback stopped the fit.
    """

    n_iter: int
    n_evals: int
    loglik_trace: np.ndarray
    converged: bool
    loglik: float
    stopped: bool = False


def check_em_args(accelerate, n_components, max_iter, tol, callback, owner: str):
    """Validate the loop arguments shared by every EM driver; return rank, max_iter, tol."""
    if accelerate not in ACCELERATORS:
        raise ValueError(
            f"The 'accelerate' parameter of {owner} must be None or 'squarem'. "
            f"Got {accelerate!r}."
        )
    if callback is not None and not callable(callback):
        raise ValueError(
            f"The 'callback' parameter of {owner} must be callable or None. Got "
            f"{type(callback).__name__}."
        )
    return (
        check_int(n_components, "n_components", owner=owner, low=1),
        check_int(max_iter, "max_iter", owner=owner, low=1),
        check_float(tol, "tol", owner=owner, low=0.0),
    )


def em_runner(accelerate, n_components, max_iter, tol, callback, progressbar, owner: str):
    """Checked EM options (:func:`check_em_args`) bound to :func:`run_em`.

    Returns the checked ``n_components`` and ``run(kernel, w, a, n_cat)``, the one EM run of
    every driver that builds its own kernel (:func:`fit_em`, ``bayespmf.dask``).

    Examples
    --------
    >>> from bayespmf.kernels.em import build_em_kernel
    >>> n_components, run = em_runner(None, 1, 50, 1e-8, None, False, "f")
    >>> k = build_em_kernel([[0, 0], [1, 1]], [2, 2], n_components=1, backend="scipy")
    >>> params, info = run(k, np.ones(1), np.full((4, 1), 0.5), [2, 2])
    >>> round(info.loglik, 4)  # 2 rows, each of probability 1/4
    -2.7726
    """
    n_components, max_iter, tol = check_em_args(
        accelerate, n_components, max_iter, tol, callback, owner
    )
    return n_components, functools.partial(
        run_em,
        accelerate=accelerate,
        max_iter=max_iter,
        tol=tol,
        progressbar=progressbar,
        callback=callback,
        owner=owner,
    )


def em_start(init, n_cat, n_components, random_state, owner: str = "fit_em"):
    """Starting ``(weights, factors_stacked)``: ``init`` checked, or RAND-EM's start."""
    if init is None:
        start = init_random(n_cat, n_components, random_state)
        return start.weights, np.concatenate(start.factors, axis=0)
    if isinstance(init, LatentClassParams) or (
        isinstance(init, tuple | list) and len(init) == 2
    ):
        weights, factors = init
    else:
        raise ValueError(
            f"The 'init' parameter of {owner} must be None or a LatentClassParams "
            f"(weights, factors). Got {type(init).__name__}."
        )
    try:
        params = check_params(weights, factors, n_cat)
    except DataValidationError as err:
        raise ValueError(f"The 'init' parameter of {owner} is invalid: {err}") from err
    if params.weights.size != n_components:
        raise ValueError(
            f"The 'init' parameter of {owner} has rank {params.weights.size} but "
            f"'n_components' is {n_components}. Pass matching values."
        )
    stacked = np.concatenate(params.factors, axis=0)
    return params.weights / params.weights.sum(), normalize_blocks(
        stacked, offsets_of(n_cat)
    )


def em_steps(kernel, n_cat, accelerate=None):
    """The loop step ``EMState -> (EMState, StepInfo)`` of EM or SQUAREM-PMF on ``kernel``.

    Examples
    --------
    >>> from bayespmf.kernels.em import build_em_kernel
    >>> k = build_em_kernel([[0, 0], [1, 1]], [2, 2], n_components=1, backend="scipy")
    >>> step = em_steps(k, [2, 2])
    >>> state, info = step(EMState(np.ones(1), np.full((4, 1), 0.5), -np.inf))
    >>> round(info.objective, 4)  # 2 rows, each of probability 1/4
    -2.7726
    """
    if accelerate == "squarem":
        return squarem_pmf_steps(kernel.step, n_cat)

    def step(state):
        w, a, ll = kernel.step(state.weights, state.factors_stacked)
        return EMState(w, a, ll), StepInfo(ll, 1)

    return step


def run_em(
    kernel,
    w,
    a,
    n_cat,
    *,
    accelerate=None,
    max_iter: int,
    tol: float,
    progressbar: bool = False,
    callback=None,
    owner: str = "fit_em",
    warn: bool = True,
    rule=None,
    max_evals: int | None = None,
):
    """EM / SQUAREM-PMF from ``(w, a)`` on any kernel with ``step`` and ``loglik``.

    Shared by :func:`fit_em`, the multi-start fit and the Dask driver
    (``bayespmf.dask``); the loop and its stopping rule are
    :func:`bayespmf.fit.loop.iterate`'s (SQUAREM-PMF's:
    :func:`bayespmf.fit.squarem.squarem_pmf_converged`). ``callback(iteration,
    EMState)`` returning True stops the fit. ``rule`` overrides the stopping rule
    (a ``rule`` of :func:`~bayespmf.fit.loop.iterate`): the multi-start fit runs its
    refined starts under EM's rule ``"aitken"`` and polishes only the best ones under
    SQUAREM-PMF's deeper rule (:mod:`bayespmf.fit.multistart`). ``max_evals`` bounds
    the EM maps besides ``max_iter`` (:func:`~bayespmf.fit.loop.iterate`; a
    SQUAREM-PMF cycle starts only while three maps of it remain).
    """
    if rule is None:
        rule = squarem_pmf_converged if accelerate == "squarem" else "aitken"
    desc = "SQUAREM-PMF" if accelerate else "EM"
    state, it = iterate(
        em_steps(kernel, n_cat, accelerate),
        EMState(np.asarray(w, dtype=float), np.asarray(a, dtype=float), -np.inf),
        max_iter=max_iter,
        tol=tol,
        callback=callback,
        progressbar=progressbar,
        desc=desc,
        owner=owner,
        warn=warn,
        rule=rule,
        max_evals=max_evals,
        min_step_evals=SQUAREM_PMF_CYCLE_MAPS if accelerate else 1,
    )
    # one more map gives the log-likelihood of the returned parameters, and (unlike
    # kernel.loglik) compiles nothing new on the PyTensor backend
    loglik = kernel.step(state.weights, state.factors_stacked)[2]
    params = LatentClassParams(
        np.array(state.weights), split_factors(state.factors_stacked, n_cat)
    )
    return params, EMInfo(it.n_iter, it.n_evals, it.trace, it.converged, loglik, it.stopped)


def fit_em(
    data,
    n_components: int,
    *,
    init=None,
    n_categories=None,
    accelerate=None,
    max_iter: int = 500,
    tol: float = 1e-8,
    random_state=None,
    backend: str = "auto",
    progressbar: bool = False,
    callback=None,
):
    """Maximum-likelihood latent-class PMF by EM, optionally accelerated by SQUAREM-PMF.

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        ``-1`` marks missing entries (marginalized out).
    n_components : int
        Number of latent classes F (>= 1).
    init : LatentClassParams, optional
        Starting point; default a RAND-EM start
        (:func:`bayespmf.kernels.em.init_random`) from ``random_state``.
    n_categories : sequence of int, optional
        Inferred from ``data`` when omitted.
    accelerate : {None, "squarem"}
        ``"squarem"`` runs SQUAREM-PMF (Chege et al., Tables I-II) around the same
        EM map.
    max_iter : int, default 500
        Maximum iterations (EM steps, or SQUAREM-PMF cycles of >= 3 EM maps each).
    tol : float, default 1e-8
        Tolerance of the stopping rule of :mod:`bayespmf.fit.loop`: stop when the
        log-likelihood gain still to come (Aitken estimate) is at most
        ``tol * max(|L|, 1)``; SQUAREM-PMF asks its estimate for
        ``SQUAREM_PMF_TOL_SCALE`` times less, so that it ends where EM ends
        (:mod:`bayespmf.fit.squarem`).
    random_state : None, int or numpy.random.Generator
    backend : {"auto", "numba", "pytensor", "scipy"}, default "auto"
        The EM map (:func:`bayespmf.kernels.em.build_em_kernel`): ``"numba"`` (what
        ``"auto"`` runs) one cached numba loop over the rows, which takes row weights
        and many starts at once; ``"pytensor"`` a compiled PyTensor graph with a fused
        E-step Op; ``"scipy"`` SciPy sparse products (the reference).
    progressbar : bool, default False
    callback : callable, optional
        ``callback(iteration, state)`` with an :class:`~bayespmf.kernels.em.EMState`
        after every iteration; returning ``True`` stops the fit (reported as not
        converged, without warning).

    Returns
    -------
    params : LatentClassParams
    info : EMInfo

    Raises
    ------
    ValueError
        Bad ``n_components``, ``max_iter``, ``tol``, ``accelerate`` or ``backend``, an
        ``init`` of the wrong shape or rank, or invalid data (e.g. a variable that is
        never observed).

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` is reached before the tolerance.

    Notes
    -----
    The returned parameters are one EM map past the last log-likelihood in
    ``info.loglik_trace``; ``info.loglik`` is their own log-likelihood.

    Examples
    --------
    >>> codes = np.array([[0, 0], [1, 1], [0, 0], [1, 1], [0, -1]])
    >>> params, info = fit_em(codes, n_components=2, random_state=0, max_iter=1000,
    ...                       tol=1e-10)
    >>> info.converged, bool(np.all(np.diff(info.loglik_trace) >= -1e-9))
    (True, True)
    """
    n_components, run = em_runner(
        accelerate, n_components, max_iter, tol, callback, progressbar, "fit_em"
    )
    codes, n_cat = as_codes(data, n_categories)
    w, a = em_start(init, n_cat, n_components, random_state)
    return run(build_em_kernel(codes, n_cat, n_components, backend=backend), w, a, n_cat)


def ad_em(
    data,
    n_components: int,
    *,
    n_categories=None,
    ad_iter: int = DEFAULT_AD_ITER,
    inner_iter: int = DEFAULT_INNER_ITER,
    max_iter: int = 500,
    tol: float = 1e-8,
    random_state=None,
    progressbar: bool = False,
) -> tuple[LatentClassParams, dict]:
    r"""Maximum-likelihood latent-class PMF by alternating directions, then EM.

    Parameters
    ----------
    data, rank, n_categories
        As in :func:`fit_em`.
    ad_iter : int, default 20
        AD iterations (sweeps over all directions) from the random start.
    inner_iter : int, default 10
        Fixed-point passes per direction and AD iteration.
    max_iter : int, default 500
        Maximum EM iterations after AD (:func:`fit_em`).
    tol : float, default 1e-8
        EM's relative log-likelihood tolerance.
    random_state : None, int or numpy.random.Generator
        Seeds the random start (:func:`bayespmf.kernels.em.init_random`).
    progressbar : bool, default False

    Returns
    -------
    params : LatentClassParams
    info : dict
        ``ad_loglik`` (log-likelihood after every AD iteration, non-decreasing),
        ``ad_params`` (the AD output that started EM), ``em`` (the
        :class:`~bayespmf.kernels.em.EMInfo` of the EM stage), ``n_iter`` (EM
        iterations), ``converged`` (EM's).

    Raises
    ------
    DataValidationError
        Malformed data.
    ValueError
        Malformed ``n_components``, ``ad_iter``, ``inner_iter``, ``max_iter`` or ``tol``.

    Warns
    -----
    ConvergenceWarning
        From :func:`fit_em` when EM uses ``max_iter``.

    Notes
    -----
    One AD iteration visits the directions :math:`A_1, \dots, A_N, \lambda`. For
    :math:`A_n`, with :math:`\ell_{tf}` the log of everything else in the row's
    likelihood (:math:`\log\lambda_f + \sum_{m \ne n} \log A_m(x_{m,t}, f)`), the
    direction maximizes :math:`\sum_{t: x_{n,t}\ \mathrm{observed}} \log \sum_f
    e^{\ell_{tf}} A_n(x_{n,t}, f)` over column-stochastic :math:`A_n`: a concave
    problem (a KL divergence between the row-wise empirical distribution and a
    mixture with known components), solved by ``inner_iter`` passes of its
    fixed-point (EM) map :math:`A_n(i, f) \propto \sum_{t: x_{n,t} = i}
    \gamma_{tf}`, :math:`\gamma_{tf} \propto e^{\ell_{tf}} A_n(x_{n,t}, f)`; likewise
    :math:`\lambda_f \propto \sum_t \gamma_{tf}`. Every pass is monotone, so the
    likelihood never decreases over AD. The full text of Yeredor & Haardt is not in
    this repository; the papers that use it (Ibrahim & Fu, Sec. 5.1; Chege et al.,
    Sec. I, IV-A) describe AD as direction-wise likelihood maximization followed by EM,
    which is what this implements; the inner solver of each direction is our choice.
    With ``inner_iter=1`` an AD iteration is an ECM sweep. The AD stage is vectorized
    NumPy/SciPy (gather, ``logsumexp``, a sparse indicator product per
    direction); EM is :func:`fit_em`.

    Examples
    --------
    >>> codes = np.array([[0, 0, 1], [1, 1, 0], [0, 0, 1], [1, 1, -1], [0, -1, 1]] * 20)
    >>> params, info = ad_em(codes, 2, ad_iter=5, random_state=0)
    >>> bool(np.all(np.diff(info["ad_loglik"]) >= -1e-9)), info["converged"]
    (True, True)
    """
    owner = "ad_em"
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
    ad_iter = check_int(ad_iter, "ad_iter", owner=owner, low=0)
    inner_iter = check_int(inner_iter, "inner_iter", owner=owner, low=1)
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    codes, n_cat = as_codes(data, n_categories)
    rng = check_random_state(random_state)
    start = init_random(n_cat, n_components, rng)
    ad_params, trace = start, np.array([])
    if ad_iter > 0:

        def sweep(params):
            w, factors, ll = ad_sweep(codes, n_cat, *params, inner_iter=inner_iter)
            return LatentClassParams(w, factors), StepInfo(ll)

        # tol=0: run all ad_iter sweeps (unless nothing changes at rounding level)
        ad_params, it = iterate(
            sweep,
            start,
            max_iter=ad_iter,
            tol=0.0,
            progressbar=progressbar,
            desc="AD",
            owner=owner,
            warn=False,
        )
        trace = it.trace
    params, em_info = fit_em(
        codes,
        n_components,
        init=ad_params,
        n_categories=n_cat,
        max_iter=max_iter,
        tol=tol,
        random_state=rng,
        progressbar=progressbar,
    )
    info = {
        "ad_loglik": trace,
        "ad_params": ad_params,
        "em": em_info,
        "n_iter": em_info.n_iter,
        "converged": em_info.converged,
    }
    return params, info
