"""The sampler call shared by the latent-class and simplex-nest models."""

from __future__ import annotations

import time

import pymc as pm

from bayespmf._runtime import n_cpus

__all__ = ["run_sampler"]


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
    """Run NUTS (``pm.sample``) or ADVI (``pm.fit`` then draws) and time it.

    ``initvals`` is ``None`` or one dict of constrained values per chain (ADVI starts
    from the first). When starts are given, PyMC's default ``"jitter+adapt_diag"``
    would add its own U(-1, 1) jitter on the unconstrained scale on top of them (enough
    to reorder classes or move vertices by a data unit), so ``init`` defaults to
    ``"adapt_diag"``: the callers jitter each chain's start themselves. ``cores``
    defaults to the CPUs this process may use (PyMC assumes half of them are
    hyper-threads, which leaves one core on a 2-core machine).

    Returns
    -------
    idata : arviz.InferenceData
    seconds : float
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
    return idata, time.perf_counter() - t0
