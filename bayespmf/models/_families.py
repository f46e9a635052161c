"""The model families :func:`bayespmf.models.sample` runs, and the one path they share.

Each family (latent class, latent-class regression, simplex nest) is one
:class:`Family` record of what differs: how to recognize its model and its draws, its
default point estimate, how to read a point from ``init``, how to turn a point into one
start per chain (its start builder, run by :func:`bayespmf.models.initvals`), how to
rewrite the model before sampling (freeze the data, pivot coordinates, the fused Op),
how to relabel its draws (run by :func:`bayespmf.models.align_labels`) and how to
finish them (undo the rewrite, label alignment, attrs). :func:`sample_family` runs the
rest once for all of them: the checks of every argument (once, before any work), the
options a family does not have (refused, never ignored), the starts, the sampler call
and the log-likelihood group.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pymc as pm

from bayespmf._validation import DataValidationError, check_random_seed
from bayespmf.models._sampling import (
    check_nuts_sampler,
    check_sampler_args,
    gibbs_step,
    run_sampler,
)
from bayespmf.models._start import check_jitter
from bayespmf.models._target import (
    DEFAULT_MAX_TIME,
    DEFAULT_TARGET_ESS,
    TARGET_FIRST_DRAWS,
    TARGET_TUNE,
    check_sample_target,
    sample_to_target,
)
from bayespmf.models.gibbs import target_sweeps

__all__ = [
    "DEFAULT_DRAWS",
    "DEFAULT_TUNE",
    "LOG_LIKELIHOOD_MAX_BYTES",
    "Family",
    "default_length",
    "log_likelihood_bytes",
    "sample_family",
]

#: Largest ``log_likelihood`` group (float64 bytes: chains x draws x rows) that
#: ``sample(log_likelihood="auto")`` computes; above it the group is skipped with a
#: warning (at 1e6 rows, 4 chains x 1000 draws it would be 32 GB).
LOG_LIKELIHOOD_MAX_BYTES = 2**30

#: ``draws`` and ``tune`` of a run of fixed length when they are not given.
DEFAULT_DRAWS = DEFAULT_TUNE = 1000


def default_length(
    family_name: str,
    method: str,
    chains,
    sample_kwargs: dict,
    *,
    draws,
    tune,
    target_ess,
    target_rhat,
    max_time,
):
    """``(draws, tune, target_ess, target_rhat, max_time)`` with the defaults filled in.

    ``method="gibbs"`` on a latent-class model without covariates, at least 2 chains
    and no ``var_names``, with neither ``draws`` nor ``target_ess`` given, samples to
    a target by default: ``target_ess`` :data:`~bayespmf.models._target.DEFAULT_TARGET_ESS`
    (400) and ``max_time`` :data:`~bayespmf.models._target.DEFAULT_MAX_TIME` unless
    given. Sampling to a target (by default or asked for) with ``draws`` or ``tune``
    not given starts with ``TARGET_TUNE`` + ``TARGET_FIRST_DRAWS`` draws. Any other
    run without ``draws`` or ``tune`` takes :data:`DEFAULT_DRAWS` and
    :data:`DEFAULT_TUNE` (a fixed length, as before).

    Examples
    --------
    >>> none = dict.fromkeys(["draws", "tune", "target_ess", "target_rhat", "max_time"])
    >>> default_length("latent_class", "gibbs", 4, {}, **none)
    (200, 200, 400.0, None, 600.0)
    >>> default_length("latent_class", "gibbs", 4, {}, **{**none, "draws": 500})
    (500, 1000, None, None, None)
    >>> default_length("latent_class", "nuts", 4, {}, **none)
    (1000, 1000, None, None, None)
    """
    chains_ok = isinstance(chains, int | np.integer) and chains >= 2
    if (
        draws is None
        and target_ess is None
        and method == "gibbs"
        and family_name == "latent_class"
        and chains_ok
        and sample_kwargs.get("var_names") is None
    ):
        target_ess = DEFAULT_TARGET_ESS
        if max_time is None:
            max_time = DEFAULT_MAX_TIME
    if target_ess is not None:
        draws = TARGET_FIRST_DRAWS if draws is None else draws
        tune = TARGET_TUNE if tune is None else tune
    else:
        draws = DEFAULT_DRAWS if draws is None else draws
        tune = DEFAULT_TUNE if tune is None else tune
    return draws, tune, target_ess, target_rhat, max_time


class Family(NamedTuple):
    """What one model family supplies to :func:`sample_family`.

    Attributes
    ----------
    name : str
        As :func:`bayespmf.models.model_family` reports it.
    detect : callable ``model -> bool``
        Whether a PyMC model belongs to this family.
    methods : tuple of str
        The ``method`` values the family is sampled by.
    method_error : str
        The start of the message refusing another method (``{owner}`` is filled in).
    estimate : callable ``(model, random_seed) -> point``
        The default point estimate (``init="auto"``).
    point : callable ``(model, init, random_seed) -> point or None``
        ``init`` (not a string) as the family's point; ``None`` may fit ``estimate``.
    initvals : callable ``(model, point, chains, jitter, rng) -> list of dict``
        The start builder: one start (constrained values) per chain from a point (as
        ``point`` returns it, or a point estimate ``point`` reads), jittered; the
        arguments are checked already.
    rewrite : callable ``(model, point, initvals, method, nuts_sampler, transform)``
        Returns ``(model to sample, initvals, undo)``; ``undo`` (or None) is applied to
        the draws.
    finish : callable ``(idata, model, point, starts, align, random_seed) -> idata``
        Attrs, label alignment, data groups.
    drawn : callable ``posterior -> bool``
        Whether a posterior (``idata.posterior``) holds draws of this family's model.
    align : callable ``(idata, reference, data, n_refine) -> idata``
        Label alignment of the draws to a point estimate (``data``: the model's data,
        for the families that read their variables' names from it, else None).
    init_modes : tuple of str
        The strings ``init`` may be (``"auto"``: fit ``estimate``).
    optima : callable ``point -> list`` or None
        The distinct optima of a point estimate (``init="optima"``), if the family
        has them.
    simplex_transforms : tuple of str
        The ``simplex_transform`` options (empty: the family has none).
    loglik_rows : callable ``idata -> idata`` or None
        Turns PyMC's per-entry log-likelihood into one value per row.
    align_more : callable ``(raw, aligned) -> Dataset`` or None
        The draws of ``raw`` (a DataTree as the sampler returns it) aligned to the
        posterior mean of ``aligned`` (a posterior Dataset as ``finish`` returns it),
        in one pass: what sampling to a target (``target_ess``) aligns each further
        batch with between batches. None: the family cannot sample to a target.
    pymc_init_on_none : bool
        ``init=None`` leaves the chains' starts to PyMC (no point estimate, nothing to
        jitter); otherwise it fits ``estimate``.
    """

    name: str
    detect: Callable[[Any], bool]
    methods: tuple[str, ...]
    method_error: str
    estimate: Callable[..., Any]
    point: Callable[..., Any]
    initvals: Callable[..., list]
    rewrite: Callable[..., tuple]
    finish: Callable[..., Any]
    drawn: Callable[[Any], bool]
    align: Callable[..., Any]
    init_modes: tuple[str, ...] = ("auto",)
    optima: Callable[[Any], list] | None = None
    simplex_transforms: tuple[str, ...] = ()
    loglik_rows: Callable[[Any], Any] | None = None
    pymc_init_on_none: bool = False
    align_more: Callable[..., Any] | None = None


def sample_family(
    family: Family,
    model,
    *,
    owner: str,
    init,
    method: str,
    nuts_sampler: str,
    draws: int | None,
    tune: int | None,
    chains: int,
    random_seed,
    progressbar: bool,
    align: bool,
    log_likelihood: bool | str,
    advi_iterations: int,
    simplex_transform: str | None,
    jitter: float | None,
    target_ess: float | None = None,
    target_rhat: float | None = None,
    max_time: float | None = None,
    **sample_kwargs,
):
    """The posterior of ``model`` (of ``family``): what :func:`sample` runs for each.

    Every argument is as in :func:`bayespmf.models.sample`; ``owner`` names the
    function in messages. Every argument is checked here, once, before any work: the
    options the family does not have are refused (never ignored), and so are the
    keywords the sampler would not use, before the point estimate (which takes a
    while) is fitted; :func:`~bayespmf.models._sampling.run_sampler` checks nothing
    again. With ``target_ess`` the sampler runs in batches until the target is
    reached or ``max_time`` (counted from the start of this call) is up
    (:func:`bayespmf.models._target.sample_to_target`).
    """
    started = time.perf_counter()
    random_seed = check_random_seed(random_seed, owner)
    if method not in family.methods:
        note = (
            " (method='gibbs' samples latent-class models only, with or without covariates)"
            if method == "gibbs"
            else ""
        )
        raise DataValidationError(
            f"{family.method_error.format(owner=owner)}; got method={method!r}{note}."
        )
    draws, tune, target_ess, target_rhat, max_time = default_length(
        family.name,
        method,
        chains,
        sample_kwargs,
        draws=draws,
        tune=tune,
        target_ess=target_ess,
        target_rhat=target_rhat,
        max_time=max_time,
    )
    # unknown keywords and empty ADVI runs are refused before the point estimate is fit
    draws, tune, chains = check_sampler_args(
        method,
        draws,
        tune,
        chains,
        owner,
        advi_iterations=advi_iterations,
        sample_kwargs={"nuts_sampler": nuts_sampler, **sample_kwargs},
    )
    target = check_sample_target(
        target_ess,
        target_rhat,
        max_time,
        owner=owner,
        method=method,
        family_name=family.name,
        chains=chains,
        sample_kwargs=sample_kwargs,
    )
    if method == "nuts":
        check_nuts_sampler(nuts_sampler, tune)
        sample_kwargs["nuts_sampler"] = nuts_sampler
    if not (isinstance(log_likelihood, bool) or log_likelihood == "auto"):
        raise DataValidationError(
            f"The 'log_likelihood' parameter of {owner} must be True, False or 'auto'; "
            f"got {log_likelihood!r}."
        )
    if family.simplex_transforms:
        simplex_transform = simplex_transform or family.simplex_transforms[0]
        if simplex_transform not in family.simplex_transforms:
            raise DataValidationError(
                f"The 'simplex_transform' parameter of {owner} must be one of "
                f"{list(family.simplex_transforms)}; got {simplex_transform!r}."
            )
    elif simplex_transform is not None:
        raise DataValidationError(
            f"'simplex_transform' applies to latent-class models only; this is a "
            f"{family.name} model. Drop the argument."
        )
    mode, point = _init_mode(family, init, owner)
    if jitter is not None and init is None and family.pymc_init_on_none:
        raise DataValidationError(
            f"The 'jitter' parameter of {owner} jitters starts at a point estimate; with "
            "init=None PyMC initializes the chains itself. Drop 'jitter' or pass an init."
        )
    jitter = check_jitter(jitter, owner)
    rng = np.random.default_rng(random_seed)
    t_start = time.perf_counter()
    if mode is None:
        point = family.point(model, init, random_seed)
    elif point is None:
        point = family.estimate(model, random_seed)
    start_time = time.perf_counter() - t_start
    starts = family.optima(point) if mode == "optima" else None
    n_chains = chains if method != "advi" else 1
    initvals = None
    if starts is not None:
        initvals = [
            family.initvals(model, starts[c % len(starts)], 1, jitter, rng)[0]
            for c in range(n_chains)
        ]
    elif point is not None:
        initvals = family.initvals(model, point, n_chains, jitter, rng)
    sampled, initvals, undo = family.rewrite(
        model, point, initvals, method, nuts_sampler, simplex_transform
    )
    if target is None:
        idata = _run(
            sampled,
            undo,
            method=method,
            initvals=initvals,
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=random_seed,
            progressbar=progressbar,
            advi_iterations=advi_iterations,
            sample_kwargs=sample_kwargs,
        )
        idata = family.finish(idata, model, point, starts, align, random_seed)
    else:
        idata = _sample_to_target(
            family,
            model,
            sampled,
            undo,
            point,
            starts,
            target,
            owner=owner,
            method=method,
            initvals=initvals,
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=random_seed,
            progressbar=progressbar,
            align=align,
            started=started,
            sample_kwargs=sample_kwargs,
        )
    idata.posterior.attrs["start_time"] = start_time
    if log_likelihood == "auto":
        size = log_likelihood_bytes(model, n_chains, idata.posterior.sizes["draw"])
        log_likelihood = size <= LOG_LIKELIHOOD_MAX_BYTES
        if not log_likelihood:
            warnings.warn(
                f"{owner}: the log_likelihood group was not computed: it would hold "
                f"{size / 2**30:.1f} GiB ({n_chains} chains x "
                f"{idata.posterior.sizes['draw']} draws x the "
                f"observed rows, float64), above LOG_LIKELIHOOD_MAX_BYTES "
                f"({LOG_LIKELIHOOD_MAX_BYTES / 2**30:.0f} GiB). Pass log_likelihood=True "
                "to compute it anyway, or False to silence this.",
                UserWarning,
                stacklevel=3,
            )
    if log_likelihood:  # per row, label-invariant: the same before and after alignment
        pm.compute_log_likelihood(idata, model=model, progressbar=False)
        if family.loglik_rows is not None:
            idata = family.loglik_rows(idata)
    return idata


def _run(sampled, undo, *, sample_kwargs, **run_kwargs):
    """One :func:`run_sampler` call on the sampled model, its rewrite undone."""
    idata = run_sampler(sampled, **run_kwargs, **sample_kwargs)
    return idata if undo is None else undo(idata)


def _sample_to_target(
    family,
    model,
    sampled,
    undo,
    point,
    starts,
    target,
    *,
    owner,
    method,
    initvals,
    draws,
    tune,
    chains,
    random_seed,
    progressbar,
    align,
    started,
    sample_kwargs,
):
    """Batches of the sampler until ``target`` (see :func:`sample_family`)."""
    kwargs = dict(sample_kwargs)
    with sampled:  # one Gibbs step for every batch (its rows are prepared once)
        step = kwargs["step"] = gibbs_step(sampled, chains, kwargs)
    thin = None
    if "n_sweeps" not in sample_kwargs and hasattr(step, "n_entries"):
        # the draws are not the user's: thinned, so that pm.sample's cost per draw
        # and the checks of every stored draw are a small share of the sweeps';
        # after the first batch, thinned further where the chains mix slowly
        step.n_sweeps = target_sweeps(step.n_entries)

        def thin(k):
            step.n_sweeps *= k

    if align and point is None:  # the reference of every check's alignment, fit once
        point = family.estimate(model, random_seed)

    def run(*, draws, tune, initvals, random_seed):
        return _run(
            sampled,
            undo,
            method=method,
            initvals=initvals,
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=random_seed,
            progressbar=progressbar,
            advi_iterations=0,
            sample_kwargs=kwargs,
        )

    def finish(raw):
        return family.finish(raw, model, point, starts, align, random_seed)

    def align_more(raw, aligned):
        if not align:
            return raw["posterior"].to_dataset()
        return family.align_more(raw, aligned)

    result = sample_to_target(
        run,
        finish,
        align_more,
        [rv.name for rv in sampled.free_RVs],
        spec=target,
        draws=draws,
        tune=tune,
        initvals=initvals,
        random_seed=random_seed,
        started=started,
        owner=owner,
        thin=thin,
    )
    result.posterior.attrs["gibbs_sweeps_per_draw"] = int(getattr(step, "n_sweeps", 1))
    return result


def _init_mode(family: Family, init, owner: str):
    """``(mode, point)``: ``mode`` one of ``family.init_modes`` or None (a point)."""
    point = None
    if isinstance(init, tuple) and len(init) == 2 and isinstance(init[0], str):
        init, point = init
    if not isinstance(init, str):
        return None, None
    if init in family.init_modes:
        return init, point
    if len(family.init_modes) > 1:
        raise DataValidationError(
            f"The 'init' parameter of {owner} must be 'auto', 'optima', a point "
            f"estimate or None; got {init!r}."
        )
    if init == "optima":
        raise DataValidationError(
            f"init={init!r} applies to latent-class models only; for a {family.name} "
            "model pass 'auto', a fitted estimator or None."
        )
    return None, None  # the family's ``point`` refuses it, naming what it takes


def log_likelihood_bytes(model, chains: int, draws: int) -> int:
    """Bytes of the per-row ``log_likelihood`` group of ``chains x draws`` draws.

    One float64 per draw and observed row (the first axis of each observed variable).

    Examples
    --------
    >>> with pm.Model() as m:
    ...     _ = pm.Normal("x", observed=np.zeros((1000, 3)))
    >>> log_likelihood_bytes(m, 4, 1000)
    32000000
    """
    rows = 0
    for rv in model.observed_RVs:
        dims = model.named_vars_to_dims.get(rv.name)
        if dims and dims[0] in model.dim_lengths:
            rows += int(model.dim_lengths[dims[0]].eval())
        else:
            value = model.rvs_to_values[rv]
            rows += int(value.shape[0].eval()) if value.ndim else 1
    return 8 * int(chains) * int(draws) * rows
