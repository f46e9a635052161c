"""The overrelaxed Dirichlet updates of the Gibbs step against fresh draws (issue 36).

``LatentClassGibbs(overrelax=s)`` moves the weights and factors to the far side of
their Dirichlet conditionals (strength ``s``; 0 is the plain data-augmentation
sampler). Per case, one ``LatentClassPMF`` fit is the start of every run; each run is
``sample(model, method="gibbs", init=fit, overrelax=s, n_sweeps=1)`` with the same
chains, burn-in, draws and seed, so the runs differ only in ``s``. Printed per run:
the worst aligned r-hat (ArviZ's rank r-hat: the larger of the bulk and the folded
one), the smallest bulk and tail ESS over every weight and factor entry, the bulk ESS
per 1000 sweeps of all chains, the wall seconds of the sampler, and the ratio of its
ESS per second to the plain sampler's (``s = 0``) in the same run.

Cases (``--cases``): ``weak<t>`` the weakly separated truth ``t`` of
``bayes_scale.py`` (S=2000, N=15, I=10, F=5, half missing; its fit is the default
``LatentClassPMF(5)``), ``rows<S>`` S rows of the scale row (N=20, I=10, F=5,
half missing, ``random_state=0``; ``LatentClassPMF(5, n_init=4)``). Run::

    python benchmarks/gibbs_overrelax.py        # weak0 weak1 weak6 rows200000
    python benchmarks/gibbs_overrelax.py --cases weak1 --strengths 0 0.8 0.9 0.95
    python benchmarks/gibbs_overrelax.py --quick    # smoke run (fits of 4 starts)
"""

from __future__ import annotations

import argparse
import time
import warnings

import arviz as az
from _common import parse_args_quick
from bayes_gibbs import run_sample

from bayespmf.datasets import make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import latent_class_model


def case_data(case: str, n_init=None):
    """Data and start of one case (see the module docstring); ``n_init`` overrides."""
    if case.startswith("weak"):
        data, _ = make_latent_class(
            2000,
            10,
            5,
            0.5,
            n_variables=15,
            drop_empty_rows=True,
            random_state=int(case[4:]),
        )
        fit_kw = {}
    elif case.startswith("rows"):
        data, _ = make_latent_class(
            int(float(case[4:])),
            10,
            5,
            0.5,
            n_variables=20,
            drop_empty_rows=True,
            random_state=0,
        )
        fit_kw = {"n_init": 4}
    else:
        raise SystemExit(f"unknown case {case!r}: weak<t> or rows<S>")
    if n_init is not None:
        fit_kw = {"n_init": n_init}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = LatentClassPMF(5, random_state=0, **fit_kw).fit(data)
    return data, fit


def worst(idata) -> dict:
    """Worst rank r-hat and smallest bulk and tail ESS over the weights and factors."""
    post = idata.posterior.to_dataset()
    names = [v for v in post.data_vars if v == "weights" or v.startswith("A_")]
    rhat = max(float(az.rhat(post[[v]])[v].max()) for v in names)
    bulk = min(float(az.ess(post[[v]], method="bulk")[v].min()) for v in names)
    tail = min(float(az.ess(post[[v]], method="tail")[v].min()) for v in names)
    return {"r_hat": rhat, "bulk": bulk, "tail": tail}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["weak0", "weak1", "weak6", "rows200000"])
    ap.add_argument("--strengths", type=float, nargs="+", default=[0.0, 0.9, 0.95])
    ap.add_argument(
        "--draws", type=int, default=6000, help="draws per chain (1 sweep each)"
    )
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-init", type=int, default=None, help="starts of every case's fit")
    args = parse_args_quick(
        ap, argv, cases=["weak6"], draws=300, tune=50, n_init=4, strengths=[0.0, 0.9]
    )
    print(
        f"{args.chains} chains x ({args.tune} + {args.draws}) draws of one sweep; worst "
        "rank r-hat, smallest bulk and tail ESS over every entry (aligned)"
    )
    print(
        f"{'case':<12} {'strength':>8} {'fit s':>6} {'s':>7} {'r-hat':>7} {'bulk':>7} "
        f"{'tail':>7} {'bulk/1k sweeps':>15} {'ESS/s ratio':>12}"
    )
    for case in args.cases:
        t0 = time.perf_counter()
        data, fit = case_data(case, args.n_init)
        fit_s = time.perf_counter() - t0
        model = latent_class_model(data, 5)
        base = None
        for s in args.strengths:
            _, idata = run_sample(
                model,
                fit,
                "gibbs",
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                seed=args.seed,
                overrelax=s,
                n_sweeps=1,
            )
            secs = float(idata.posterior.attrs["sampling_time"])
            w = worst(idata)
            rate = w["bulk"] / secs
            base = rate if base is None and s == 0 else base
            ratio = f"{rate / base:.2f}x" if base else "-"
            per_k = 1000 * w["bulk"] / (args.chains * args.draws)
            print(
                f"{case:<12} {s:>8.2f} {fit_s:>6.1f} {secs:>7.1f} {w['r_hat']:>7.4f} "
                f"{w['bulk']:>7.0f} {w['tail']:>7.0f} {per_k:>15.1f} {ratio:>12}",
                flush=True,
            )


if __name__ == "__main__":
    main()
