"""The sampler checks and call shared by every model family of :func:`sample`.

Every NUTS implementation PyMC offers (``nuts_sampler="pymc"``, ``"nutpie"``,
``"numpyro"``, ``"blackjax"``) is driven so that chain ``c`` starts exactly at
``initvals[c]``:

* ``"pymc"``: ``pm.sample(initvals=..., init="adapt_diag")`` (no jitter on top).
* ``"nutpie"``: ``pm.sample(nuts_sampler="nutpie")`` drops ``initvals`` (it warns),
  and ``nutpie.sample``'s ``init_mean`` is ignored for PyMC models (nutpie 0.16 asks
  the compiled model's ``initial_point_func`` instead, once per chain, with a seed
  that does not say which chain it is). So the model is compiled once and each chain
  runs as its own one-chain ``nutpie.sample`` whose initial-point function returns
  that chain's start; the chains run side by side (``blocking=False``), ``cores`` at a
  time, and are joined along ``chain``.
* ``"numpyro"``, ``"blackjax"``: ``pm.sample(nuts_sampler=..., initvals=...)`` with
  ``jitter=False`` (PyMC's JAX driver would otherwise add a U(-1, 1) jitter on the
  unconstrained scale to every start). The chains run in parallel, one per CPU device
  (``chain_method="parallel"``), when JAX has one device per chain: if JAX has not
  started yet, :func:`_cpu_devices_for_chains` asks XLA for that many CPU devices
  first; otherwise they run vectorized on one device.

  PyMC's JAX driver replaces every ``pm.Data`` by a constant of the compiled graph
  (``pymc.sampling.jax.get_jaxified_graph``): the rows are baked into the XLA
  program. On a CPU this is kept (``jax_data="auto"``): the rows enter the
  log-density as integer codes that index the factors (the fused likelihood Op is
  rewritten into a gather for JAX; no dense one-hot design), and on large data a call
  is faster than with the rows as an argument (:ref:`bench-jax`). On an accelerator,
  numpyro runs with the rows as an argument of one jitted program and the likelihood
  as a one-hot matrix product (:mod:`bayespmf.models._jax_data`,
  :ref:`bench-gpu`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import inspect
import os
import sys
import time
import warnings

import numpy as np
import pymc as pm
import xarray as xr

from bayespmf._runtime import n_cpus
from bayespmf._validation import DataValidationError, check_int
from bayespmf.models._gibbs_chains import run_gibbs_chains, runs_here

__all__ = [
    "NUTS_SAMPLERS",
    "check_nuts_sampler",
    "check_sample_kwargs",
    "check_sampler_args",
    "gibbs_step",
    "run_sampler",
]

#: The samplers :func:`run_sampler` runs.
SAMPLING_METHODS = ("nuts", "advi", "gibbs")

#: The NUTS implementations :func:`run_sampler` drives (``nuts_sampler=``), each with
#: the package that provides it.
NUTS_SAMPLERS = {
    "pymc": "pymc",
    "nutpie": "nutpie",
    "numpyro": "numpyro",
    "blackjax": "blackjax",
}

#: Keyword arguments of ``pm.sample`` that the external samplers take as well; any
#: other one is PyMC-only and refused for them rather than silently dropped.
_EXTERNAL_KWARGS = ("target_accept", "nuts", "cores", "var_names")

#: nutpie's own default ``target_accept`` (the same as PyMC's NUTS).
_DEFAULT_TARGET_ACCEPT = 0.8


#: ``pm.sample`` arguments that :func:`run_sampler` sets itself (the caller passes
#: them as its own parameters).
_PM_SAMPLE_SET = frozenset(
    {
        "draws",
        "tune",
        "chains",
        "initvals",
        "random_seed",
        "progressbar",
        "compute_convergence_checks",
        "model",
        "return_inferencedata",
    }
)
#: Arguments of the NUTS step that ``pm.sample`` sets itself, or that cannot work
#: with its ``init`` (which builds the mass matrix: ``potential``, ``scaling``,
#: ``is_cov``); ``vars``: every free variable is sampled.
_NUTS_STEP_SET = frozenset(
    {
        "self",
        "vars",
        "model",
        "rng",
        "initial_point",
        "shared",
        "logp_dlogp_func",
        "compile_kwargs",
        "potential",
        "scaling",
        "is_cov",
    }
)
#: ``pm.fit`` arguments :func:`run_sampler` sets itself for ADVI.
_PM_FIT_SET = frozenset(
    {"self", "n", "method", "model", "random_seed", "start", "progressbar"}
)


def _named_parameters(*functions) -> set[str]:
    """The parameters of ``functions`` that can be passed by keyword (no ``**``)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {
        p.name
        for f in functions
        for p in inspect.signature(f).parameters.values()
        if p.kind in kinds
    }


@functools.cache
def _nuts_options() -> frozenset[str]:
    """The options of PyMC's NUTS step (``pm.sample(**options)`` or ``nuts={...}``).

    Read from the signatures of ``pm.NUTS`` and its base classes: ``pm.sample`` hands
    every keyword it does not know to the step, which passes the leftovers on to
    PyTensor unchecked (a misspelt keyword ran silently).
    """
    inits = [
        c.__dict__["__init__"] for c in pm.NUTS.__mro__[:-1] if "__init__" in c.__dict__
    ]
    return frozenset(_named_parameters(*inits) - _NUTS_STEP_SET)


@functools.cache
def _pymc_sample_keywords() -> frozenset[str]:
    """Every keyword :func:`run_sampler` passes on to ``pm.sample`` (PyMC's NUTS)."""
    own = _named_parameters(pm.sample) - _PM_SAMPLE_SET
    return frozenset(own | _nuts_options() | {"nuts"})


@functools.cache
def _advi_keywords() -> frozenset[str]:
    """Every keyword :func:`run_sampler` passes on to ``pm.fit`` (ADVI).

    ``pm.fit``'s own, those of ``Inference.fit`` that it passes on, and those of the
    objective's ``step_function`` (e.g. ``obj_optimizer``) that ``Inference.fit``
    passes on in turn.
    """
    from pymc.variational.inference import Inference
    from pymc.variational.opvi import ObjectiveFunction

    return frozenset(
        _named_parameters(pm.fit, Inference.fit, ObjectiveFunction.step_function)
        - _PM_FIT_SET
    )


def check_sample_kwargs(
    method: str, sample_kwargs: dict, *, advi_iterations=None, owner: str = "sample"
) -> None:
    """Refuse a keyword the sampler would not use (none is ignored silently).

    The valid keywords are read from the signatures of ``pm.sample`` and PyMC's NUTS
    step (NUTS) or of ``pm.fit`` and what it passes them to (ADVI), less those the
    sampler sets itself.

    Parameters
    ----------
    method : {"nuts", "advi"}
    sample_kwargs : dict
        The extra keywords (``nuts_sampler`` among them, if given).
    advi_iterations : int, optional
        Checked (>= 1) for ADVI.
    owner : str
        Name used in messages.

    Raises
    ------
    DataValidationError
        An unknown keyword (the message lists the valid ones), a NUTS option with
        ADVI or an ADVI option with NUTS, a key of ``nuts={...}`` that PyMC's NUTS
        does not have, ``advi_iterations < 1`` with ADVI.
    ValueError
        A PyMC-only keyword with an external NUTS sampler.
    """
    if method == "gibbs":
        _check_gibbs_kwargs(sample_kwargs, owner)
        return
    if method == "advi":
        if advi_iterations is not None:
            check_int(advi_iterations, "advi_iterations", owner=owner, low=1)
        sampler = sample_kwargs.get("nuts_sampler", "pymc")
        if sampler != "pymc":
            raise DataValidationError(
                f"{owner}: nuts_sampler={sampler!r} applies to method='nuts' only; "
                "drop it for method='advi'."
            )
        _refuse_unknown(
            sample_kwargs,
            _advi_keywords(),
            _pymc_sample_keywords(),
            lambda bad, nuts, valid: (
                f"{owner}(method='advi') got keyword argument(s) {bad} that ADVI "
                "(pm.fit) does not take"
                + (f" ({nuts} are NUTS options)" if nuts else "")
                + f". Valid ones: {valid}."
            ),
        )
        return
    sampler = sample_kwargs.get("nuts_sampler", "pymc")
    if "jax_data" in sample_kwargs:
        check_jax_data(sample_kwargs["jax_data"], sampler, owner)
    if sampler != "pymc":  # the external samplers take a few of pm.sample's keywords
        bad = sorted(
            set(sample_kwargs) - set(_EXTERNAL_KWARGS) - {"nuts_sampler", "jax_data"}
        )
        if bad:
            raise ValueError(
                f"nuts_sampler={sampler!r} does not take {bad}; it takes "
                f"{list(_EXTERNAL_KWARGS)}. Drop them or use nuts_sampler='pymc'."
            )
        return
    _refuse_unknown(
        sample_kwargs,
        _pymc_sample_keywords(),
        _advi_keywords(),
        lambda bad, advi, valid: (
            f"{owner} got unknown keyword argument(s) {bad}"
            + (f" ({advi} are ADVI options: pass method='advi')" if advi else "")
            + f". NUTS (nuts_sampler='pymc', pm.sample) takes: {valid}."
        ),
    )
    for key in ("nuts", "nuts_sampler_kwargs"):  # the latter: PyMC's old name
        nuts = sample_kwargs.get(key)
        if nuts is None:
            continue
        if not isinstance(nuts, dict):
            raise DataValidationError(
                f"The '{key}' argument of {owner} must be a dict of NUTS options; got "
                f"{type(nuts).__name__}."
            )
        bad = sorted(set(nuts) - _nuts_options())
        if bad:
            raise DataValidationError(
                f"The '{key}' argument of {owner} holds option(s) {bad} that PyMC's "
                f"NUTS does not have. Valid ones: {sorted(_nuts_options())}."
            )


def _refuse_unknown(sample_kwargs: dict, valid, other, message) -> None:
    """Refuse the keywords not in ``valid`` (``nuts_sampler`` aside).

    ``message(bad, crossed, valid)`` words the error; ``crossed`` are the refused
    keywords that belong to the ``other`` method.
    """
    bad = sorted(set(sample_kwargs) - valid - {"nuts_sampler"})
    if bad:
        crossed = [k for k in bad if k in other]
        raise DataValidationError(message(bad, crossed, sorted(valid)))


def _check_gibbs_kwargs(sample_kwargs: dict, owner: str) -> None:
    """Refuse a keyword ``pm.sample`` would not use with the Gibbs step."""
    sampler = sample_kwargs.get("nuts_sampler", "pymc")
    if sampler != "pymc":
        raise DataValidationError(
            f"{owner}: nuts_sampler={sampler!r} applies to method='nuts' only; drop it "
            "for method='gibbs'."
        )
    valid = _named_parameters(pm.sample) - _PM_SAMPLE_SET - _GIBBS_SET
    bad = sorted(set(sample_kwargs) - valid - {"nuts_sampler", "n_sweeps", "overrelax"})
    if bad:
        raise DataValidationError(
            f"{owner}(method='gibbs') got keyword argument(s) {bad} that the Gibbs "
            f"sampler does not take. Valid ones: {sorted(valid)}."
        )


#: ``pm.sample`` arguments that do not apply to the Gibbs step (it is the only step,
#: it needs no initialization of a mass matrix).
_GIBBS_SET = frozenset(
    {"step", "init", "n_init", "nuts", "nuts_sampler", "nuts_sampler_kwargs"}
)


def check_sampler_args(
    method, draws, tune, chains, owner: str, *, advi_iterations=None, sample_kwargs=None
) -> tuple[int, int, int]:
    """``(draws, tune, chains)`` as ints, after checking ``method`` is a sampler.

    ``draws`` and ``chains`` must be >= 1 and ``tune`` >= 0. With ``sample_kwargs``
    or ``advi_iterations`` given, :func:`check_sample_kwargs` checks them too, so
    that a bad keyword is refused before a point estimate is fitted.
    """
    if method not in SAMPLING_METHODS:
        raise DataValidationError(
            f"'method' must be 'nuts', 'advi' or 'gibbs'; got {method!r}."
        )
    out = (
        check_int(draws, "draws", owner=owner, low=1),
        check_int(tune, "tune", owner=owner, low=0),
        check_int(chains, "chains", owner=owner, low=1),
    )
    if sample_kwargs is not None or advi_iterations is not None:
        check_sample_kwargs(
            method,
            dict(sample_kwargs or {}),
            advi_iterations=advi_iterations if method == "advi" else None,
            owner=owner,
        )
    return out


def check_nuts_sampler(nuts_sampler: str, tune: int) -> str:
    """Check ``nuts_sampler`` names a supported, installed NUTS implementation."""
    if nuts_sampler not in NUTS_SAMPLERS:
        raise ValueError(
            f"The 'nuts_sampler' parameter must be one of {list(NUTS_SAMPLERS)}; got "
            f"{nuts_sampler!r}."
        )
    if nuts_sampler != "pymc":
        # by its metadata, not importlib.util.find_spec: ArviZ 1 leaves lazy
        # placeholders for numpyro (and jax) in sys.modules, and asking one for its
        # spec imports it, which starts JAX before its flags are set (see
        # _cpu_devices_for_chains)
        from importlib.metadata import PackageNotFoundError, distribution

        try:
            distribution(NUTS_SAMPLERS[nuts_sampler])
            installed = True
        except PackageNotFoundError:
            installed = False
        if not installed:
            raise ValueError(
                f"nuts_sampler={nuts_sampler!r} needs the package "
                f"'{NUTS_SAMPLERS[nuts_sampler]}', which is not installed. Install the "
                "optional samplers with `pip install 'bayespmf[samplers]'`, or use "
                "nuts_sampler='pymc'."
            )
    if nuts_sampler == "nutpie" and tune < 1:
        # nuts-rs 0.17 aborts the process-wide sampler on tune=0 (a Rust panic)
        raise ValueError(
            f"nuts_sampler='nutpie' needs 'tune' >= 1 (its adaptation windows); got "
            f"tune={tune}. Pass tune >= 1 or use nuts_sampler='pymc'."
        )
    return nuts_sampler


@contextlib.contextmanager
def _frozen_heap():
    """Python's objects moved out of the collector's reach while the block runs.

    ``pm.sample`` forks a process per chain; a collection in a child walks every
    object of the parent and so copies every page that holds one (copy-on-write).
    Frozen, they stay shared (``gc.freeze``, as Python's documentation advises
    before ``os.fork``); new objects are collected as usual.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_sampler(
    model,
    *,
    method: str,
    initvals,
    draws: int,
    tune: int,
    chains: int,
    random_seed,
    progressbar: bool,
    advi_iterations: int,
    **sample_kwargs,
):
    """Run NUTS (``pm.sample`` or an external NUTS), Gibbs or ADVI (``pm.fit``), timed.

    ``method="gibbs"`` runs :class:`bayespmf.models.gibbs.LatentClassGibbs` as the
    only step (latent-class models) in threads of this process
    (:func:`bayespmf.models._gibbs_chains.run_gibbs_chains`: ``pm.sample``'s draws,
    without its chain processes; ``pm.sample`` itself where a keyword other than
    ``cores`` is passed), or ``pm.sample`` with Gibbs for the factors and NUTS for the
    coefficients as a compound (latent-class regressions;
    :func:`bayespmf.models.gibbs_regression.gibbs_steps`), the chains in parallel as
    for NUTS.

    ``initvals`` is ``None`` or one dict of constrained values per chain (ADVI starts
    from the first); every NUTS backend starts chain ``c`` exactly at ``initvals[c]``
    (see the module docstring for how). When starts are given, PyMC's default
    ``"jitter+adapt_diag"`` would add its own U(-1, 1) jitter on the unconstrained
    scale on top of them (enough to reorder classes or move vertices by a data unit),
    so ``init`` defaults to ``"adapt_diag"``: the callers jitter each chain's start
    themselves. ``cores`` defaults to the CPUs this process may use (PyMC assumes half
    of them are hyper-threads, which leaves one core on a 2-core machine).

    ``sample_kwargs`` may hold ``nuts_sampler`` (default ``"pymc"``); the external
    samplers take ``target_accept``, ``cores``, ``var_names`` and ``nuts`` (PyMC 6's
    dict of NUTS options, formerly ``nuts_sampler_kwargs``; for nutpie,
    ``backend``/``gradient_backend`` there go to ``nutpie.compile_pymc_model`` and
    the rest to ``nutpie.sample``).

    Returns
    -------
    xarray.DataTree
        ArviZ 1's posterior container; ``posterior.attrs`` record
        ``sampling_method``, ``nuts_sampler`` and ``sampling_time`` (seconds,
        compilation included).

    Its arguments are not checked here: the caller checks them first
    (:func:`check_sampler_args` with the keywords, :func:`check_nuts_sampler`; what
    :func:`bayespmf.models.sample` does once, before it fits a point estimate).
    """
    nuts_sampler = sample_kwargs.pop("nuts_sampler", "pymc")
    method_route = "pm.sample"
    t0 = time.perf_counter()
    with model:
        if method in ("nuts", "gibbs"):
            sample_kwargs.setdefault("cores", max(1, min(chains, n_cpus())))
            common = dict(
                draws=draws,
                tune=tune,
                chains=chains,
                initvals=initvals,
                random_seed=random_seed,
                progressbar=progressbar,
            )
            if method == "gibbs":
                if "step" not in sample_kwargs:  # (a continued run passes its step)
                    sample_kwargs["step"] = gibbs_step(model, chains, sample_kwargs)
                if runs_here(sample_kwargs["step"], sample_kwargs):
                    method_route = "threads"
            elif nuts_sampler == "pymc":
                # PyMC 6 picks nutpie by default when it is installed: name PyMC's own
                sample_kwargs["nuts_sampler"] = "pymc"
                if initvals is not None:
                    sample_kwargs.setdefault("init", "adapt_diag")
            if method_route == "threads":  # the chains as threads of this process
                idata = run_gibbs_chains(model, **common, **sample_kwargs)
            elif method == "gibbs" or nuts_sampler == "pymc":
                if _jax_started() and sample_kwargs["cores"] > 1:
                    # JAX's threads do not survive os.fork() (it warns of deadlocks):
                    # once a JAX backend has started in this process, start PyMC's
                    # chain processes fresh instead of forking this one
                    sample_kwargs.setdefault("mp_ctx", "forkserver")
                with _frozen_heap():
                    idata = pm.sample(
                        **common, compute_convergence_checks=False, **sample_kwargs
                    )
            elif nuts_sampler == "nutpie":
                idata = _sample_nutpie(model, common, **sample_kwargs)
            else:
                idata = _sample_jax(model, nuts_sampler, common, **sample_kwargs)
        else:
            approx = pm.fit(
                n=advi_iterations,
                method="advi",
                start=None if initvals is None else initvals[0],
                random_seed=random_seed,
                progressbar=progressbar,
                **sample_kwargs,
            )
            idata = approx.sample(draws, random_seed=random_seed)
    idata.posterior.attrs["sampling_method"] = method
    if method == "nuts":
        idata.posterior.attrs["nuts_sampler"] = nuts_sampler
    idata.posterior.attrs["sampling_time"] = time.perf_counter() - t0
    return idata


def gibbs_step(model, chains: int, sample_kwargs: dict):
    """The Gibbs step(s) ``run_sampler`` runs for ``method="gibbs"``.

    :func:`bayespmf.models.gibbs_regression.gibbs_steps` of ``model`` with the
    ``n_sweeps`` and ``overrelax`` popped from ``sample_kwargs``, and threads over
    rows so that the chains' processes (``cores``, set in ``sample_kwargs`` to its
    default if absent: the CPUs this process may use, at most one per chain) share
    the CPUs. The step
    keeps no chain state besides its random generator, which ``pm.sample`` sets per
    chain, so one step may be passed (``step=``) to several ``run_sampler`` calls.
    """
    from bayespmf.models.gibbs_regression import gibbs_steps

    cores = sample_kwargs.setdefault("cores", max(1, min(chains, n_cpus())))
    threads = max(1, n_cpus() // cores)
    n_sweeps = sample_kwargs.pop("n_sweeps", None)
    overrelax = sample_kwargs.pop("overrelax", None)
    return gibbs_steps(model, threads=threads, n_sweeps=n_sweeps, overrelax=overrelax)


def _chain_seeds(random_seed, chains: int) -> list[int]:
    """One seed per chain from ``random_seed`` (an int, a Generator or None)."""
    rng = np.random.default_rng(random_seed)
    return [int(s) for s in rng.integers(2**31 - 1, size=chains)]


def _flat_starts(model, initvals, seeds) -> list[np.ndarray]:
    """Each chain's start on the unconstrained scale, flat, in ``model.free_RVs`` order.

    Without ``initvals`` the start is PyMC's default (the support point, jittered by
    U(-1, 1) on the unconstrained scale, as ``pm.sample`` does).
    """
    from pymc.initial_point import make_initial_point_fn

    names = [model.rvs_to_values[v].name for v in model.free_RVs]
    out = []
    for c, seed in enumerate(seeds):
        fn = make_initial_point_fn(
            model=model,
            overrides=None if initvals is None else initvals[c],
            jitter_rvs=set(model.free_RVs) if initvals is None else set(),
            return_transformed=True,
        )
        point = fn(seed)
        out.append(np.concatenate([np.ravel(point[n]) for n in names]).astype(float))
    return out


def _sample_nutpie(
    model, common: dict, *, cores, target_accept=_DEFAULT_TARGET_ACCEPT, **options
):
    """Run nutpie, one single-chain run per start, ``cores`` runs at a time.

    ``common`` holds ``draws``, ``tune``, ``chains``, ``initvals``, ``random_seed``
    and ``progressbar``; ``options`` may hold ``var_names`` and ``nuts``.
    """
    import nutpie

    chains, var_names = common["chains"], options.get("var_names")
    kwargs = {"save_warmup": False} | dict(options.get("nuts") or {})
    compile_kwargs = {
        k: kwargs.pop(k) for k in ("backend", "gradient_backend") if k in kwargs
    }
    if var_names is None:  # the constrained variables only, as pm.sample stores them
        var_names = [v.name for v in model.free_RVs + model.deterministics]
    compiled = nutpie.compile_pymc_model(model, **compile_kwargs)
    seeds = _chain_seeds(common["random_seed"], chains)
    starts = _flat_starts(model, common["initvals"], seeds)
    runs = []
    for first in range(0, chains, cores):
        batch = [
            nutpie.sample(
                # the start of this chain, whatever seed nutpie asks it for
                dataclasses.replace(compiled, initial_point_func=lambda _, x=x: x.copy()),
                draws=common["draws"],
                tune=common["tune"],
                chains=1,
                cores=1,
                seed=seeds[c],
                target_accept=target_accept,
                progress_bar=common["progressbar"],
                blocking=False,
                **kwargs,
            )
            for c, x in enumerate(starts[first : first + cores], start=first)
        ]
        runs.extend(run.wait() for run in batch)
    groups = {}
    for group in runs[0].children:
        joined = xr.concat([run[group].to_dataset() for run in runs], dim="chain")
        groups[group] = joined.assign_coords(chain=np.arange(chains))
    for group in ("posterior", "warmup_posterior"):
        if group in groups:  # nutpie stores the unconstrained values too
            groups[group] = groups[group][list(var_names)]
    posterior = groups["posterior"]
    # nutpie writes category labels as strings: use the model's coordinates
    coords = {d: (d, list(model.coords[d])) for d in posterior.dims if d in model.coords}
    groups["posterior"] = posterior.assign_coords(coords)
    tree = xr.DataTree.from_dict(groups)
    tree["posterior"].attrs.update(runs[0]["posterior"].attrs)
    return tree


def _jax_started() -> bool:
    """Whether JAX has started its runtime (its XLA backends) in this process.

    Until then JAX holds no threads, so forking the process is safe, and XLA has not
    read ``XLA_FLAGS`` yet. Importing JAX is not enough to tell: ArviZ 1
    (``arviz_base.io_numpyro``) puts a lazy placeholder module named ``jax`` in
    ``sys.modules``, and SciPy's array-API checks (``scipy.special.logsumexp``, among
    others) look up ``jax.Array`` in it, which imports JAX in any process that
    imported ArviZ, without starting a backend. Taking that import for a running
    JAX sent PyMC's chains to a slower forkserver and numpyro's chains to vectorized
    lockstep (:ref:`bench-jax`). JAX starts its backends, and installs its at-fork
    warning, in ``jax._src.xla_bridge.backends()``.
    """
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:
        return False
    started = getattr(bridge, "backends_are_initialized", None)
    if started is None:  # a JAX without the function: assume it may run
        return True
    return bool(started())


#: The jaxlib releases in which XLA:CPU still takes ``--xla_cpu_use_thunk_runtime``
#: (0.12 accepts it with a deprecation notice; a release that drops the flag would
#: refuse XLA_FLAGS holding it), so :func:`_cpu_devices_for_chains` sets it only there.
_THUNK_FLAG_JAXLIB = ((0, 4, 32), (0, 13))

#: XLA:CPU's thunk runtime (the default since jaxlib 0.4.32) runs NUTS's while loops of
#: small operations far slower than the classic runtime it replaced.
_THUNK_FLAG = "--xla_cpu_use_thunk_runtime=false"


def _jaxlib_version() -> tuple[int, ...] | None:
    """The installed jaxlib's version (read from its metadata, without importing it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("jaxlib")
    except PackageNotFoundError:
        return None
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def _cpu_devices_for_chains(n_devices: int) -> bool:
    """Set XLA's CPU flags for the JAX samplers before JAX starts its backend.

    * One CPU device per chain: XLA counts all CPU cores as one device, so without
      this PyMC's JAX driver can only run the chains vectorized: in lockstep on one
      core, every step as long as the longest chain's tree
      (``--xla_force_host_platform_device_count``, what
      ``numpyro.set_host_device_count`` does); in parallel the same draws take less
      than half the time (:ref:`bench-jax`).
    * XLA:CPU's classic runtime (``--xla_cpu_use_thunk_runtime=false``), for a
      jaxlib in :data:`_THUNK_FLAG_JAXLIB`: its default thunk runtime made numpyro's
      NUTS several times slower, in the sampler's loop, not in the logp-and-gradient
      call (:ref:`bench-jax`). XLA prints one line that the flag "is no
      longer supported": set ``XLA_FLAGS`` yourself (any value naming the flag) to
      choose.

    XLA reads its flags once, when JAX starts its backend, so they are set only when
    JAX has not started it yet, each one only if ``XLA_FLAGS`` does not name it
    already. Returns whether the device count was set.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if _jax_started():
        return False
    extra = []
    set_count = "xla_force_host_platform_device_count" not in flags
    if set_count:
        extra.append(f"--xla_force_host_platform_device_count={int(n_devices)}")
    jaxlib = _jaxlib_version()
    low, high = _THUNK_FLAG_JAXLIB
    if "xla_cpu_use_thunk_runtime" not in flags and jaxlib and low <= jaxlib < high:
        extra.append(_THUNK_FLAG)
    if extra:
        os.environ["XLA_FLAGS"] = " ".join([flags, *extra]).strip()
    return set_count


#: The values of ``sample(..., nuts_sampler="numpyro", jax_data=...)``.
JAX_DATA = ("auto", "argument", "constant")


def check_jax_data(jax_data, nuts_sampler, owner="sample") -> None:
    """Refuse a ``jax_data`` that is not in :data:`JAX_DATA` or not for numpyro.

    Raises
    ------
    DataValidationError
        Naming ``jax_data`` and its values, or the sampler that takes it.

    Examples
    --------
    >>> check_jax_data("argument", "numpyro")
    >>> check_jax_data("argument", "pymc")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: sample: 'jax_data' applies to ...
    """
    if nuts_sampler != "numpyro":
        raise DataValidationError(
            f"{owner}: 'jax_data' applies to nuts_sampler='numpyro' only (how its "
            f"compiled program receives the rows); drop it for {nuts_sampler!r}."
        )
    if not isinstance(jax_data, str) or jax_data not in JAX_DATA:
        raise DataValidationError(
            f"The 'jax_data' parameter of {owner} must be one of {list(JAX_DATA)}; "
            f"got {jax_data!r}."
        )


def _jax_data_route(jax_data: str, nuts_sampler: str) -> str:
    """``"argument"`` or ``"constant"``: ``"auto"`` is the former on an accelerator."""
    if nuts_sampler != "numpyro":
        return "constant"
    if jax_data != "auto":
        return jax_data
    import jax

    return "constant" if jax.default_backend() == "cpu" else "argument"


def _sample_jax(
    model,
    nuts_sampler,
    common: dict,
    *,
    cores,
    target_accept=_DEFAULT_TARGET_ACCEPT,
    var_names=None,
    nuts=None,
    jax_data="auto",
):
    """Run numpyro or blackjax through PyMC's JAX driver, starts not jittered.

    ``common`` holds the arguments of ``pm.sample`` every sampler takes (as for
    :func:`_sample_nutpie`). ``jax_data`` (numpyro): ``"argument"`` compiles the
    log-density with the data as arguments (:mod:`bayespmf.models._jax_data`),
    ``"constant"`` as PyMC's driver does, ``"auto"`` the former on an accelerator
    and the latter on a CPU.
    """
    chains = common["chains"]
    _cpu_devices_for_chains(max(chains, cores))
    import jax

    from bayespmf.models._jax_data import data_as_arguments

    kwargs = dict(nuts or {})
    kwargs.setdefault("jitter", common["initvals"] is None)
    # pmap needs a device per chain; with fewer (JAX already started with one CPU
    # device) run the chains vectorized rather than one after the other
    kwargs.setdefault(
        "chain_method", "parallel" if jax.local_device_count() >= chains else "vectorized"
    )
    with warnings.catch_warnings():
        # JAX on CPU cannot reuse the draws' buffers for PyMC's post-processing; it
        # says so for every run, and nothing can be done about it
        warnings.filterwarnings("ignore", "Some donated buffers", UserWarning)
        route = _jax_data_route(jax_data, nuts_sampler)
        with data_as_arguments() if route == "argument" else contextlib.nullcontext():
            tree = pm.sample(
                **common,
                nuts_sampler=nuts_sampler,
                target_accept=target_accept,
                var_names=var_names,
                nuts=kwargs,
                compute_convergence_checks=False,
            )
    tree.posterior.attrs["jax_data"] = route
    # PyMC 6's JAX driver leaves JAX arrays in the groups, which xarray cannot index
    # by arrays (label alignment does): hold NumPy arrays, as the other samplers do
    return tree.map_over_datasets(_as_numpy)


def _as_numpy(ds):
    """``ds`` with every variable's data as a NumPy array (a JAX array is copied out)."""
    if ds is None:
        return ds
    return ds.copy(data={name: np.asarray(var.data) for name, var in ds.data_vars.items()})
