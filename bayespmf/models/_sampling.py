"""The sampler checks and call shared by the latent-class and simplex-nest models."""

from __future__ import annotations

import time

import pymc as pm

from bayespmf._runtime import n_cpus
from bayespmf._validation import DataValidationError, check_int

__all__ = ["check_sampler_args", "run_sampler"]

#: The samplers :func:`run_sampler` runs.
SAMPLING_METHODS = ("nuts", "advi")


def check_sampler_args(method, draws, tune, chains, owner: str) -> tuple[int, int, int]:
    """``(draws, tune, chains)`` as ints, after checking ``method`` is a sampler."""
    if method not in SAMPLING_METHODS:
        raise DataValidationError(f"'method' must be 'nuts' or 'advi'; got {method!r}.")
    return (
        check_int(draws, "draws", owner=owner, low=1),
        check_int(tune, "tune", owner=owner, low=0),
        check_int(chains, "chains", owner=owner, low=1),
    )


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
    """Run NUTS (``pm.sample``) or ADVI (``pm.fit`` then draws), timed.

    ``initvals`` is ``None`` or one dict of constrained values per chain (ADVI starts
    from the first). When starts are given, PyMC's default ``"jitter+adapt_diag"``
    would add its own U(-1, 1) jitter on the unconstrained scale on top of them (enough
    to reorder classes or move vertices by a data unit), so ``init`` defaults to
    ``"adapt_diag"``: the callers jitter each chain's start themselves. ``cores``
    defaults to the CPUs this process may use (PyMC assumes half of them are
    hyper-threads, which leaves one core on a 2-core machine).

    Returns
    -------
    arviz.InferenceData
        ``posterior.attrs`` record ``sampling_method`` and ``sampling_time`` (seconds).
    """
    t0 = time.perf_counter()
    with model:
        if method == "nuts":
            if initvals is not None:
                sample_kwargs.setdefault("init", "adapt_diag")
            sample_kwargs.setdefault("cores", max(1, min(chains, n_cpus())))
            idata = pm.sample(
                draws=draws,
                tune=tune,
                chains=chains,
                initvals=initvals,
                random_seed=random_seed,
                progressbar=progressbar,
                compute_convergence_checks=False,
                **sample_kwargs,
            )
        else:
            approx = pm.fit(
                n=advi_iterations,
                method="advi",
                start=None if initvals is None else initvals[0],
                random_seed=random_seed,
                progressbar=progressbar,
            )
            idata = approx.sample(draws, random_seed=random_seed)
    idata.posterior.attrs["sampling_method"] = method
    idata.posterior.attrs["sampling_time"] = time.perf_counter() - t0
    return idata
