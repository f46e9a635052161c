"""NUTS and ADVI on the latent-class model: default init vs a CNMF-SPA-EM start.

Prints, per data set and sampler: wall time, divergences, the worst r-hat and the
smallest bulk ESS over all parameters before (raw draws) and after label alignment.

Settings (issue: Bayesian latent-class model): simulated S=2000, N=5, I=10, F=5, half
missing; UCI Car (rank 4 by default: at rank 5 the chains settle in different modes) and
Votes (rank 3). Usage::

    python benchmarks/bayes_latent_class.py --draws 1000 --tune 1000 --chains 4

``--compare`` prints instead, on one data set, one line per NUTS backend, simplex
transform (``sample(simplex_transform=...)``, ``--transforms``: ``pymc`` is PyMC's
default ``simplex`` transform, the formulation before issue 13; ``pivot`` the
log-ratios to each row's largest entry at the start) and ``--target-accept`` value,
every line in the same run and started at the same point estimate: wall seconds
(compilation included, the point estimate not), the smallest bulk ESS over all
parameters after label alignment, ESS per second, the worst aligned r-hat, divergences,
the mean leapfrog steps per draw, and how many distinct rows the data have (a
likelihood over weighted distinct patterns would only pay if there are far fewer than
rows)::

    python benchmarks/bayes_latent_class.py --compare --sets car --draws 500 --tune 500 \
        --chains 2 --samplers pymc nutpie numpyro

The simulated case of issue 13 (S=2000, N=15, I=10, F=5, half missing; truth and
rows from ``--sim-seed``), with numpyro's chains both in parallel (``sample()``'s
choice when JAX starts inside it: one CPU device per chain) and vectorized (the
choice before; one device)::

    python benchmarks/bayes_latent_class.py --compare --sets simulated \
        --sim-variables 15 --sim-seed 6 --draws 2000 --tune 1000 --chains 2 \
        --samplers numpyro pymc --transforms pivot --chain-methods default vectorized
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import time

import numpy as np
import xarray as xr

from bayespmf.datasets import load_car, load_votes, make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import convergence_summary, latent_class_model, sample


def summarize(label, idata, elapsed):
    after = convergence_summary(idata)
    raw = convergence_summary(
        xr.DataTree.from_dict({"posterior": idata["unaligned_posterior"].to_dataset()})
    )
    raw_t, t = raw["table"], after["table"]
    print(
        f"| {label} | {elapsed:.1f} | {after['divergences']} "
        f"| {raw_t['r_hat_max'].max():.3f} | {raw_t['ess_bulk_min'].min():.0f} "
        f"| {t['r_hat_max'].max():.3f} | {t['ess_bulk_min'].min():.0f} |",
        flush=True,
    )


def run(name, data, n_components, args):
    print(f"\n### {name}: {data!r}, rank {n_components}")
    t0 = time.perf_counter()
    point = LatentClassPMF(n_components, method="cnmf-spa-em", random_state=args.seed).fit(
        data
    )
    print(f"CNMF-SPA-EM point estimate: {time.perf_counter() - t0:.2f} s")
    print(
        "| sampler | wall s | divergences | raw r-hat max | raw ESS min "
        "| aligned r-hat max | aligned ESS min |"
    )
    print("|---|---|---|---|---|---|---|")
    model = latent_class_model(data, n_components)
    common = dict(
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=False,
    )
    for label, init in [
        ("NUTS, PyMC default init", None),
        ("NUTS, CNMF-SPA-EM init", point),
    ]:
        t0 = time.perf_counter()
        idata = sample(model, init=init, **common)
        summarize(label, idata, time.perf_counter() - t0)
    t0 = time.perf_counter()
    idata = sample(
        model,
        init=point,
        method="advi",
        draws=args.draws,
        advi_iterations=args.advi_iterations,
        random_seed=args.seed,
        progressbar=False,
    )
    after = convergence_summary(idata)
    print(
        f"| ADVI ({args.advi_iterations} it.), CNMF-SPA-EM init | "
        f"{time.perf_counter() - t0:.1f} | - | - | - | - (1 chain) "
        f"| {after['table']['ess_bulk_min'].min():.0f} |",
        flush=True,
    )


#: ``--compare``'s default lines: the formulation before issue 13 (PyMC's simplex
#: transform) and ``sample()``'s default since then (the pivot transform), both at
#: PyMC's target_accept 0.8.
BEFORE_AFTER = [("pymc", 0.8), ("pivot", 0.8)]


def variants(args):
    """(simplex_transform, target_accept) pairs to run, before/after by default."""
    if args.transforms is None and args.target_accept is None:
        return BEFORE_AFTER
    return [
        (t, ta)
        for t in args.transforms or ["pymc", "pivot"]
        for ta in args.target_accept or [0.8]
    ]


def compare(name, data, n_components, args):
    n_patterns = len(np.unique(np.asarray(data.codes), axis=0))
    print(f"\n### {name}: {data!r}, rank {n_components}; {n_patterns} distinct rows")
    t0 = time.perf_counter()
    point = LatentClassPMF(n_components, random_state=args.seed).fit(data)
    print(f"point estimate (sample's init='auto'): {time.perf_counter() - t0:.1f} s")
    print(
        f"{args.chains} chains x ({args.tune} tune + {args.draws} draws), seed {args.seed}"
    )
    print(
        "| backend | simplex_transform | target_accept | wall s | min bulk ESS | ESS/s "
        "| max aligned r-hat | divergences | leapfrog steps/draw |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    model = latent_class_model(data, n_components)
    for backend in args.samplers:
        if backend != "pymc" and importlib.util.find_spec(backend) is None:
            print(f"| {backend} | - | - | not installed | | | | | |")
            continue
        methods = args.chain_methods if backend in ("numpyro", "blackjax") else [None]
        for (transform, ta), method in itertools.product(variants(args), methods):
            extra = {}
            if method not in (None, "default"):
                extra["nuts"] = {"chain_method": method}
            t0 = time.perf_counter()
            idata = sample(
                model,
                init=point,
                nuts_sampler=backend,
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                random_seed=args.seed,
                progressbar=False,
                log_likelihood=False,
                simplex_transform=transform,
                target_accept=ta,
                **extra,
            )
            wall = time.perf_counter() - t0
            summ = convergence_summary(idata)
            ess = summ["table"]["ess_bulk_min"].min()
            stats = idata.sample_stats
            steps = f"{float(stats['n_steps'].mean()):.1f}" if "n_steps" in stats else "-"
            label = backend if method is None else f"{backend} ({method})"
            print(
                f"| {label} | {transform} | {ta} | {wall:.1f} | {ess:.0f} "
                f"| {ess / wall:.2f} | {summ['table']['r_hat_max'].max():.4f} "
                f"| {summ['divergences']} | {steps} |",
                flush=True,
            )


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--advi-iterations", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sets", nargs="+", default=["simulated", "car", "votes"])
    ap.add_argument("--car-rank", type=int, default=4)
    ap.add_argument("--votes-rank", type=int, default=3)
    ap.add_argument("--compare", action="store_true", help="backends side by side")
    ap.add_argument(
        "--samplers", nargs="+", default=["pymc", "nutpie", "numpyro", "blackjax"]
    )
    ap.add_argument(
        "--target-accept",
        nargs="+",
        type=float,
        default=None,
        help="values to compare (default: see --transforms)",
    )
    ap.add_argument(
        "--transforms",
        nargs="+",
        default=None,
        help="sample(simplex_transform=...) values to compare; with neither this nor "
        "--target-accept, the lines are 'pymc' (before) and 'pivot' (sample()'s "
        "default), both at 0.8",
    )
    ap.add_argument(
        "--chain-methods",
        nargs="+",
        default=["default"],
        choices=["default", "parallel", "vectorized"],
        help="numpyro/blackjax chain_method lines ('default': what sample() picks: "
        "parallel on one CPU device per chain when JAX starts in sample())",
    )
    ap.add_argument("--sim-variables", type=int, default=5)
    ap.add_argument(
        "--sim-seed",
        type=int,
        nargs="+",
        default=[0],
        help="random_state(s) of the simulated case's truth and rows (--compare)",
    )
    args = ap.parse_args()
    if args.compare:
        if "simulated" in args.sets:
            n = args.sim_variables
            for sim_seed in args.sim_seed:
                data, truth = make_latent_class(
                    2000,
                    10,
                    5,
                    0.5,
                    n_variables=n,
                    drop_empty_rows=True,
                    random_state=sim_seed,
                )
                sizes = np.round(np.sort(truth.weights)[::-1], 3).tolist()
                compare(
                    f"simulated S=2000, N={n}, I=10, F=5, p=0.5 (truth and rows from "
                    f"random_state={sim_seed}; class weights {sizes})",
                    data,
                    5,
                    args,
                )
        if "car" in args.sets:
            compare("UCI Car", load_car().data, args.car_rank, args)
        return
    if "simulated" in args.sets:
        data, _ = make_latent_class(
            2000, 10, 5, 0.5, n_variables=5, drop_empty_rows=True, random_state=args.seed
        )
        run("simulated S=2000, N=5, I=10, F=5, p=0.5", data, 5, args)
    if "car" in args.sets:
        run("UCI Car", load_car().data, args.car_rank, args)
    if "votes" in args.sets:
        run("UCI Votes", load_votes().data, args.votes_rank, args)


if __name__ == "__main__":
    main()
