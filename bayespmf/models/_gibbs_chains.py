"""The latent-class Gibbs chains run in this process, one thread per chain.

``pm.sample`` runs each chain of a step method in a process of its own: every chain
process holds its own interpreter, a copy-on-write share of the parent's pages that
it gradually copies, and sends every draw back through a pipe. The
:class:`~bayespmf.models.gibbs.LatentClassGibbs` step needs none of that: its sweep
is compiled (numba, without the GIL), its state is the weights and factors, and its
rows are read only. :func:`run_gibbs_chains` runs the chains of that step as
threads of this process, sharing one copy of the rows, and writes every draw into
arrays allocated once; the result is the ``DataTree`` ``pm.sample`` returns for the
same step (the ``posterior`` in the model's dims and coords, an empty
``sample_stats``), with the same chain starts and the same random streams
(``random_seed`` spawned per chain, as ``pm.sample`` does), so the two routes give
the same draws up to rounding.

:func:`bayespmf.models._sampling.run_sampler` takes this route for a
:class:`~bayespmf.models.gibbs.LatentClassGibbs` step unless the caller passed a
``pm.sample`` keyword it does not implement (:data:`LOCAL_KEYWORDS`); then it is
``pm.sample``'s.
"""

from __future__ import annotations

import copy
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import xarray as xr
from pymc.initial_point import make_initial_point_fns_per_chain
from pymc.util import get_random_generator

from bayespmf._progress import progress_bar
from bayespmf._runtime import n_cpus

__all__ = ["LOCAL_KEYWORDS", "run_gibbs_chains", "runs_here"]

#: The ``pm.sample`` keywords this route implements (``step``: the Gibbs step;
#: ``cores``: the chains run at once). Any other keeps ``pm.sample``.
LOCAL_KEYWORDS = frozenset({"step", "cores"})


def runs_here(step, sample_kwargs: dict) -> bool:
    """Whether :func:`run_gibbs_chains` runs ``step`` with these ``pm.sample`` keywords.

    Examples
    --------
    >>> runs_here(object(), {})
    False
    """
    from bayespmf.models.gibbs import LatentClassGibbs

    return type(step) is LatentClassGibbs and set(sample_kwargs) <= LOCAL_KEYWORDS


def _starts(model, step, initvals, chains: int, rngs) -> list[tuple]:
    """Each chain's start (log weights, stacked log factors) as ``pm.sample`` makes it.

    ``initvals`` (one dict or one per chain) over the model's initial point, no
    jitter; the initial point's seed is drawn from the chain's generator first, as
    ``pm.sample`` draws it. Where every chain's ``initvals`` give every simplex (a
    continued run), their logs directly; otherwise PyMC's initial-point functions
    (compiled per call).
    """
    seeds = [int(rng.integers(2**30)) for rng in rngs]
    per_chain = initvals if isinstance(initvals, list | tuple) else [initvals] * chains
    if all(v is not None and set(step.rv_names) <= set(v) for v in per_chain):
        return [step.value_logs(v) for v in per_chain]
    ipfns = make_initial_point_fns_per_chain(
        model=model, overrides=initvals, jitter_rvs=set(), chains=chains
    )
    points = [ipfn(seed) for ipfn, seed in zip(ipfns, seeds, strict=True)]
    return [step.point_logs(p) for p in points]


def _posterior(model, names, draws: dict) -> xr.Dataset:
    """The draws as a Dataset in the model's dims and coordinates (as ``pm.sample``)."""
    data_vars, coords = {}, {}
    for name in names:
        value = draws[name]
        dims = ("chain", "draw", *model.named_vars_to_dims.get(name, ()))
        if len(dims) != value.ndim:  # a variable without named dims
            dims = ("chain", "draw", *(f"{name}_dim_{i}" for i in range(value.ndim - 2)))
        data_vars[name] = (dims, value)
        for d in dims[2:]:
            if d in model.coords and model.coords[d] is not None:
                coords[d] = np.asarray(list(model.coords[d]))
    n_chains, n_draws = next(iter(draws.values())).shape[:2]
    coords["chain"], coords["draw"] = np.arange(n_chains), np.arange(n_draws)
    return xr.Dataset(data_vars, coords=coords)


def _attrs(seconds: float, tune: int) -> dict:
    import pymc

    from bayespmf._version import __version__

    return {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "inference_library": "bayespmf",
        "inference_library_version": __version__,
        "sampler": "LatentClassGibbs (threads of this process)",
        "pymc_version": pymc.__version__,
        "sample_dims": ["chain", "draw"],
        "sampling_time": float(seconds),
        "tuning_steps": int(tune),
    }


def run_gibbs_chains(
    model,
    step,
    *,
    draws: int,
    tune: int,
    chains: int,
    initvals,
    random_seed,
    progressbar: bool,
    cores: int | None = None,
):
    """Run ``chains`` chains of a :class:`~bayespmf.models.gibbs.LatentClassGibbs` step.

    Each chain is a copy of ``step`` (sharing its rows) in a thread of this process:
    ``tune`` draws of burn-in, discarded, then ``draws`` draws, each ``step.n_sweeps``
    sweeps apart (as ``pm.sample`` runs the step). At most ``cores`` chains run at
    once (default: the CPUs this process may use, at most ``chains``); each spreads
    its sweep's row blocks over its share of the CPUs. The chains start where
    ``pm.sample`` would start them (``initvals``, else the model's initial point)
    and draw from ``random_seed`` spawned per chain, as ``pm.sample`` does.

    Returns
    -------
    xarray.DataTree
        ``posterior`` (the weights and factors, constrained values, in the model's
        dims) and an empty ``sample_stats``; their attrs hold ``sampling_time`` and
        ``tuning_steps``.

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> from bayespmf.models import latent_class_model
    >>> from bayespmf.models.gibbs import LatentClassGibbs
    >>> data, _ = make_latent_class(200, 3, 2, 0.5, n_variables=4, random_state=0)
    >>> model = latent_class_model(data, 2)
    >>> with model:
    ...     step = LatentClassGibbs(threads=1)
    >>> tree = run_gibbs_chains(model, step, draws=10, tune=5, chains=2,
    ...                         initvals=None, random_seed=0, progressbar=False)
    >>> tree.posterior["weights"].shape
    (2, 10, 2)
    """
    t0 = time.perf_counter()
    rngs = get_random_generator(random_seed).spawn(chains)
    starts = _starts(model, step, initvals, chains, rngs)
    workers = max(1, min(chains, n_cpus() if cores is None else int(cores)))
    threads = max(1, n_cpus() // workers)
    names = step.rv_names
    first = starts[0]
    shapes = [first[0].shape, *(p.shape for p in step.factor_parts(first[1]))]
    out = {name: np.empty((chains, draws, *shape)) for name, shape in zip(names, shapes)}
    stop = threading.Event()
    lock = threading.Lock()
    bar = progress_bar(chains * (tune + draws), "Gibbs", progressbar)

    def chain(c: int) -> None:
        s = copy.copy(step)  # its own generator and burn-in count; the rows shared
        s.threads = threads
        s.setup_chain(rngs[c], tune, draws)
        log_w, log_a = starts[c]
        for i in range(tune + draws):
            if stop.is_set():
                return
            if i == tune:
                s.stop_tuning()
            log_w, log_a = s.sweeps(log_w, log_a)
            if i >= tune:
                out[names[0]][c, i - tune] = np.exp(log_w)
                for name, part in zip(names[1:], s.factor_parts(log_a), strict=True):
                    out[name][c, i - tune] = np.exp(part)
            with lock:
                bar.update()

    with bar, ThreadPoolExecutor(workers, thread_name_prefix="bayespmf-chain") as pool:
        futures = [pool.submit(chain, c) for c in range(chains)]
        try:
            while wait(futures, timeout=0.5).not_done:
                pass
        except BaseException:  # KeyboardInterrupt: the chains stop at their next draw
            stop.set()
            raise
        for f in futures:
            f.result()  # a chain's error, raised here
    attrs = _attrs(time.perf_counter() - t0, tune)
    posterior = _posterior(model, names, out)
    posterior.attrs.update(attrs)
    stats = xr.Dataset(attrs=dict(attrs))
    return xr.DataTree.from_dict({"posterior": posterior, "sample_stats": stats})
