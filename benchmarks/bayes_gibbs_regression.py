"""Gibbs + NUTS against NUTS alone on a latent-class regression: bulk ESS per second.

On the seeded simulation of ``benchmarks/lca_covariates.py`` (N = 6 items x 3
categories, F = 3 classes, 2 covariates + intercept, 20 % missing), both samplers run
through ``bayespmf.models.sample`` in the same process, from the same start (one
``LatentClassRegression`` fit, passed as ``init`` to both), with the same chains, and
the draws are aligned the same way:

* ``method="gibbs"``: a compound step, ``n_sweeps`` Gibbs sweeps of the factors
  (labels drawn with each row's own prior ``softmax(z beta)``, then the Dirichlets)
  and one NUTS step of the coefficients per draw;
* ``method="nuts"``: PyMC's NUTS on every variable.

Printed per sampler: draws per chain, wall seconds of sampling
(``posterior.attrs["sampling_time"]``, compilation included), worst aligned r-hat and
smallest bulk ESS over every entry of ``coef`` and of the factors, and the smallest
ESS per second. Run::

    python benchmarks/bayes_gibbs_regression.py                 # S = 1000, seed 0
    python benchmarks/bayes_gibbs_regression.py --seeds 0 1 --n-rows 3000
    python benchmarks/bayes_gibbs_regression.py --n-sweeps 1 2 4 8 --nuts-draws 0
"""

from __future__ import annotations

import argparse
import warnings

import arviz as az
from _common import parse_args_quick
from lca_covariates import N_CAT, N_ITEMS, RANK, simulate

from bayespmf.estimators import LatentClassRegression
from bayespmf.models import latent_class_regression_model, sample


def summary(idata) -> dict:
    """Worst r-hat and smallest bulk ESS of the coefficients and the factors."""
    post = idata["posterior"].to_dataset()
    out = {"seconds": float(idata.posterior.attrs["sampling_time"])}
    groups = {"coef": ["coef"], "A": [v for v in post.data_vars if v.startswith("A_")]}
    for key, names in groups.items():
        out[f"r_hat_{key}"] = max(float(az.rhat(post[[v]])[v].max()) for v in names)
        out[f"ess_{key}"] = min(
            float(az.ess(post[[v]], method="bulk")[v].min()) for v in names
        )
    out["ess_per_s"] = min(out["ess_coef"], out["ess_A"]) / out["seconds"]
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-rows", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--nuts-draws", type=int, default=1000)
    ap.add_argument("--nuts-tune", type=int, default=500)
    ap.add_argument("--gibbs-draws", type=int, default=1000)
    ap.add_argument("--gibbs-tune", type=int, default=500)
    ap.add_argument(
        "--n-sweeps",
        type=int,
        nargs="+",
        default=[None],
        help="Gibbs sweeps of the factors per draw, one run per value (default: the "
        "step's default)",
    )
    return parse_args_quick(
        ap,
        argv,
        n_rows=200,
        nuts_draws=100,
        nuts_tune=100,
        gibbs_draws=100,
        gibbs_tune=100,
    )


def main(argv=None):
    args = parse_args(argv)
    print(
        f"latent-class regression, S={args.n_rows}, N={N_ITEMS} x {N_CAT} categories, "
        f"F={RANK}, {args.chains} chains; sampling time includes compilation"
    )
    print(
        f"{'seed':>4} {'sampler':>12} {'draws':>10} {'s':>7} {'r-hat b':>7} "
        f"{'r-hat A':>7} {'ESS b':>7} {'ESS A':>7} {'ESS/s':>7}"
    )
    for seed in args.seeds:
        x, z, _, _ = simulate(args.n_rows, seed)
        model = latent_class_regression_model(x, z, RANK, n_categories=[N_CAT] * N_ITEMS)
        point = LatentClassRegression(RANK, random_state=seed).fit(x, covariates=z)
        runs = {}
        if args.nuts_draws > 0:
            runs["nuts"] = ("nuts", args.nuts_draws, args.nuts_tune, {})
        for k in args.n_sweeps:
            label = "gibbs+nuts" if k is None else f"gibbs x{k}"
            extra = {} if k is None else {"n_sweeps": k}
            runs[label] = ("gibbs", args.gibbs_draws, args.gibbs_tune, extra)
        out = {}
        for label, (method, draws, tune, extra) in runs.items():
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
                    **extra,
                )
            out[label] = s = summary(idata)
            print(
                f"{seed:>4} {label:>12} {f'{tune}+{draws}':>10} {s['seconds']:7.1f} "
                f"{s['r_hat_coef']:7.3f} {s['r_hat_A']:7.3f} {s['ess_coef']:7.0f} "
                f"{s['ess_A']:7.0f} {s['ess_per_s']:7.1f}"
            )
        if "nuts" not in out or len(out) < 2:
            continue
        best = max(v["ess_per_s"] for k, v in out.items() if k != "nuts")
        ratio = best / out["nuts"]["ess_per_s"]
        print(
            f"{seed:>4} {'ratio':>12} {'':>10} {'':>7} {'':>7} {'':>7} {'':>7} "
            f"{'':>7} {ratio:6.2f}x"
        )


if __name__ == "__main__":
    main()
