"""Gibbs against PyMC's NUTS on one latent-class posterior: bulk ESS per second.

Both samplers run through ``bayespmf.models.sample`` in the same process, from the
same start (one ``LatentClassPMF`` fit, passed as ``init`` to both), with the same
chains, then the draws are aligned the same way. Printed per sampler: draws per chain,
wall seconds of sampling (``posterior.attrs["sampling_time"]``, compilation
included), worst aligned r-hat, smallest bulk ESS over every entry of the weights and
factors, and that ESS per second. Run::

    python benchmarks/bayes_gibbs.py                   # UCI Car, rank 4, 2 chains
    python benchmarks/bayes_gibbs.py --seeds 0 1 --gibbs-draws 4000
    python benchmarks/bayes_gibbs.py --n-sweeps 1 2 4 8 --nuts-draws 0

``--n-sweeps`` runs the Gibbs step once per value of its ``n_sweeps`` (sweeps per
recorded draw, passed as ``sample(..., n_sweeps=k)``; 0: the step's default,
``bayespmf.models.gibbs.default_sweeps``, 8 on Car); the ratio row compares the best
of them with NUTS. ``--nuts-draws 0`` skips NUTS.
"""

from __future__ import annotations

import argparse
import warnings

import arviz as az

from bayespmf.datasets import load_car
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import latent_class_model, sample


def summary(idata) -> dict:
    """Worst r-hat, smallest bulk ESS and their ESS per second of one run."""
    post = idata["posterior"].to_dataset()
    names = [v for v in post.data_vars if v == "weights" or v.startswith("A_")]
    rhat = max(float(az.rhat(post[[v]])[v].max()) for v in names)
    ess = min(float(az.ess(post[[v]], method="bulk")[v].min()) for v in names)
    seconds = float(idata.posterior.attrs["sampling_time"])
    return {"r_hat": rhat, "ess_bulk": ess, "seconds": seconds, "ess_per_s": ess / seconds}


def run_sample(model, point, method, *, draws, tune, chains, seed, **kw):
    """One ``sample`` call from ``point``, warnings off, no log-likelihood group.

    Returns its :func:`summary` and the posterior; ``kw`` go to ``sample``
    (``nuts_sampler``, ``n_sweeps``).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = sample(
            model,
            init=point,
            method=method,
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=seed,
            progressbar=False,
            log_likelihood=False,
            **kw,
        )
    return summary(idata), idata


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n-components", type=int, default=4)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--nuts-draws", type=int, default=500)
    ap.add_argument("--nuts-tune", type=int, default=500)
    ap.add_argument("--gibbs-draws", type=int, default=2000)
    ap.add_argument("--gibbs-tune", type=int, default=500)
    ap.add_argument(
        "--n-sweeps",
        type=int,
        nargs="+",
        default=[0],
        help="Gibbs sweeps per recorded draw, one run per value (0: the default)",
    )
    args = ap.parse_args()
    data = load_car().data
    model = latent_class_model(data, args.n_components)
    print(
        f"UCI Car, rank {args.n_components}, {args.chains} chains, S={data.n_samples}; "
        "sampling time includes compilation"
    )
    print(
        f"{'seed':>4} {'sampler':>10} {'draws':>12} {'s':>7} {'r-hat':>6} "
        f"{'bulk ESS':>9} {'ESS/s':>7}"
    )
    for seed in args.seeds:
        point = LatentClassPMF(args.n_components, random_state=seed).fit(data)
        runs = {}
        if args.nuts_draws > 0:
            runs["nuts-pymc"] = ("nuts", args.nuts_draws, args.nuts_tune, None)
        for k in args.n_sweeps:
            runs[f"gibbs x{k or 'auto'}"] = ("gibbs", args.gibbs_draws, args.gibbs_tune, k)
        out = {}
        for label, (method, draws, tune, k) in runs.items():
            extra = {"n_sweeps": k} if k else {}
            s, _ = run_sample(
                model,
                point,
                method,
                draws=draws,
                tune=tune,
                chains=args.chains,
                seed=seed,
                **extra,
            )
            out[label] = s
            print(
                f"{seed:>4} {label:>10} {f'{tune}+{draws}':>12} {s['seconds']:7.1f} "
                f"{s['r_hat']:6.3f} {s['ess_bulk']:9.0f} {s['ess_per_s']:7.1f}"
            )
        if "nuts-pymc" not in out:
            continue
        best = max(v["ess_per_s"] for k, v in out.items() if k.startswith("gibbs"))
        ratio = best / out["nuts-pymc"]["ess_per_s"]
        print(f"{seed:>4} {'ratio':>10} {'':>12} {'':>7} {'':>6} {'':>9} {ratio:7.2f}x")


if __name__ == "__main__":
    main()
