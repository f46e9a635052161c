"""NUTS and ADVI on the latent-class model: default init vs a CNMF-SPA-EM start.

Prints, per data set and sampler: wall time, divergences, the worst r-hat and the
smallest bulk ESS over all parameters before (raw draws) and after label alignment.

Settings (issue: Bayesian latent-class model): simulated S=2000, N=5, I=10, F=5, half
missing; UCI Car (rank 4 by default: at rank 5 the chains settle in different modes) and
Votes (rank 3). Usage::

    python benchmarks/bayes_latent_class.py --draws 1000 --tune 1000 --chains 4
"""

from __future__ import annotations

import argparse
import time

import arviz as az

from bayespmf.datasets import load_car, load_votes, make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import convergence_summary, latent_class_model, sample


def summarize(label, idata, elapsed):
    after = convergence_summary(idata)
    raw = convergence_summary(az.InferenceData(posterior=idata.unaligned_posterior))
    raw_t, t = raw["table"], after["table"]
    print(
        f"| {label} | {elapsed:.1f} | {after['divergences']} "
        f"| {raw_t['r_hat_max'].max():.3f} | {raw_t['ess_bulk_min'].min():.0f} "
        f"| {t['r_hat_max'].max():.3f} | {t['ess_bulk_min'].min():.0f} |",
        flush=True,
    )


def run(name, data, rank, args):
    print(f"\n### {name}: {data!r}, rank {rank}")
    t0 = time.perf_counter()
    point = LatentClassPMF(rank, method="cnmf-spa-em", random_state=args.seed).fit(data)
    print(f"CNMF-SPA-EM point estimate: {time.perf_counter() - t0:.2f} s")
    print(
        "| sampler | wall s | divergences | raw r-hat max | raw ESS min "
        "| aligned r-hat max | aligned ESS min |"
    )
    print("|---|---|---|---|---|---|---|")
    model = latent_class_model(data, rank)
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
    args = ap.parse_args()
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
