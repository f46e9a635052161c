"""Gibbs against NUTS on the one-step Bayesian distal-outcome model: ESS per second.

One data set of the simulation of ``benchmarks/distal_simulation.py`` (F = 3 equally
likely classes, N = 6 binary items at separation ``--p``, a gaussian outcome with
class means (-1, 1, 0) and unit variance), modelled by ``latent_class_model(x, 3,
outcome=y)``. Both samplers run through ``bayespmf.models.sample`` in the same
process, from the same start (one ``LatentClassPMF`` fit, passed as ``init`` to
both), with the same chains, and the draws are aligned the same way:

* ``method="gibbs"``: :class:`bayespmf.models.gibbs_distal.OutcomeGibbs`, every row's
  class drawn given its indicators and outcome, then the weights, factors, class means
  and (an exact generalized inverse Gaussian draw) standard deviations from their
  conditionals; its default sweeps per draw;
* ``method="nuts"``: PyMC's NUTS on every variable.

Printed per sampler: warm-up + draws per chain, wall seconds of sampling
(``posterior.attrs["sampling_time"]``, compilation included), the worst aligned r-hat
and the smallest bulk ESS over every entry of the weights, the factors and the
outcome's parameters, the smallest bulk ESS of the outcome's parameters alone, and the
smallest ESS per second; then the ratio of Gibbs's ESS/s to NUTS's. Run::

    python benchmarks/distal_gibbs.py                   # S = 2000, seed 0
    python benchmarks/distal_gibbs.py --seeds 0 1 --p 0.7
    python benchmarks/distal_gibbs.py --quick           # S = 300, a few draws
"""

from __future__ import annotations

import argparse
import warnings

import arviz as az
import numpy as np
from _common import parse_args_quick
from distal_simulation import simulate

from bayespmf.estimators import LatentClassPMF
from bayespmf.models import latent_class_model, sample

N_COMPONENTS = 3
OUTCOME_VARS = ("outcome_mean", "outcome_sigma")


def summary(idata) -> dict:
    """Worst r-hat and smallest bulk ESS of every class-dimensioned variable."""
    post = idata["posterior"].to_dataset()
    names = [v for v in post.data_vars if "class" in post[v].dims]
    rhat, ess = az.rhat(post[names]), az.ess(post[names], method="bulk")
    out = {"seconds": float(idata.posterior.attrs["sampling_time"])}
    out["r_hat"] = max(float(rhat[v].max()) for v in names)
    out["ess"] = min(float(ess[v].min()) for v in names)
    out["ess_outcome"] = min(float(ess[v].min()) for v in OUTCOME_VARS)
    out["ess_per_s"] = out["ess"] / out["seconds"]
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-rows", type=int, default=2000)
    ap.add_argument("--p", type=float, default=0.8, help="item separation (0.5-1)")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--nuts-draws", type=int, default=1000)
    ap.add_argument("--nuts-tune", type=int, default=500)
    ap.add_argument("--gibbs-draws", type=int, default=1000)
    ap.add_argument("--gibbs-tune", type=int, default=500)
    return parse_args_quick(
        ap,
        argv,
        n_rows=300,
        nuts_draws=100,
        nuts_tune=150,
        gibbs_draws=100,
        gibbs_tune=50,
    )


def main(argv=None):
    args = parse_args(argv)
    print(
        f"distal outcome (gaussian), S={args.n_rows}, N=6 binary items, "
        f"F={N_COMPONENTS}, separation p={args.p}, {args.chains} chains; sampling time "
        "includes compilation"
    )
    print(
        f"{'seed':>4} {'sampler':>8} {'draws':>10} {'s':>7} {'r-hat':>6} "
        f"{'ESS':>7} {'ESS y':>7} {'ESS/s':>7}"
    )
    for seed in args.seeds:
        x, y = simulate(args.n_rows, args.p, np.random.default_rng(seed))
        model = latent_class_model(x, N_COMPONENTS, outcome=y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            point = LatentClassPMF(N_COMPONENTS, random_state=seed).fit(x)
        runs = {
            "gibbs": (args.gibbs_draws, args.gibbs_tune),
            "nuts": (args.nuts_draws, args.nuts_tune),
        }
        out = {}
        for method, (draws, tune) in runs.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = sample(
                    model,
                    init=point,
                    method=method,
                    draws=draws,
                    tune=tune,
                    chains=args.chains,
                    random_seed=seed,
                    progressbar=False,
                    log_likelihood=False,
                )
            out[method] = s = summary(idata)
            print(
                f"{seed:>4} {method:>8} {f'{tune}+{draws}':>10} {s['seconds']:7.1f} "
                f"{s['r_hat']:6.3f} {s['ess']:7.0f} {s['ess_outcome']:7.0f} "
                f"{s['ess_per_s']:7.1f}"
            )
        ratio = out["gibbs"]["ess_per_s"] / out["nuts"]["ess_per_s"]
        blank = " " * (10 + 7 + 6 + 7 + 7 + 5)
        print(f"{seed:>4} {'ratio':>8} {blank}{ratio:6.2f}x")


if __name__ == "__main__":
    main()
