"""Latent-class MLE: bayespmf against StepMix, side by side in one run (issue 12).

For each case (seeded simulations and the shipped Car, Votes and a Nursery subsample):

* bayespmf: ``LatentClassPMF(rank, random_state=0)`` (multi-start MLE, defaults);
* StepMix: ``StepMix(n_components=F, measurement="categorical_nan", n_init=20)``, its
  parameters re-scored with our log-likelihood (``bayespmf.pmf.log_likelihood_rows``)
  so both are judged by the same function;

and the table gives the log-likelihood, BIC (same parameter count for both), the
adjusted Rand index between the two modal class assignments, and wall times. Then the
bootstrap LRT (``bayespmf.fit.bootstrap_lrt``) of F against F + 1 on two sets with its
B and time, the measurement behind ``DEFAULT_N_INIT_BOOTSTRAP`` (how many starts a
bootstrap (F + 1)-class fit needs so that its statistic is not biased low), and the
information-based standard errors against the bootstrap ones on one simulated case.

Run: ``python benchmarks/lca_vs_peers.py`` (a few minutes on 2 cores), or ``--quick``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
import pandas as pd
from _common import fit_stepmix, stepmix_input
from sklearn.metrics import adjusted_rand_score

from bayespmf.datasets import load_car, load_nursery, load_votes, make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.fit import bootstrap_lrt, fit_latent_class, standard_errors
from bayespmf.fit.bootstrap_lrt import simulate_like, split_starts
from bayespmf.fit.multistart import LocalOptimumWarning
from bayespmf.kernels.em import init_random
from bayespmf.pmf import (
    LatentClassParams,
    log_likelihood_rows,
    posterior_classes,
    stack_factors,
)

STEPMIX_N_INIT = 20
NURSERY_ROWS = 3000


def cases(quick: bool):
    out = []
    d, _ = make_latent_class(
        2000, 3, n_components=3, n_variables=8, observed_prob=0.8, random_state=1
    )
    out.append(("sim F=3 (8x3 cats, 20% missing)", d, 3))
    d, _ = make_latent_class(
        3000, [2, 3, 4, 2, 3, 4, 2, 3], n_components=4, observed_prob=0.9, random_state=2
    )
    out.append(("sim F=4 (mixed cats, 10% missing)", d, 4))
    if not quick:
        d, _ = make_latent_class(
            1000, 2, n_components=2, n_variables=10, observed_prob=0.7, random_state=3
        )
        out.append(("sim F=2 (10 binary, 30% missing)", d, 2))
    out.append(("Car", load_car().data, 4))
    out.append(("Votes (with missing)", load_votes().data, 3))
    nursery = load_nursery().data
    rows = np.sort(np.random.default_rng(0).choice(nursery.n_samples, NURSERY_ROWS, False))
    out.append((f"Nursery ({NURSERY_ROWS} rows)", nursery[rows], 5))
    return out


def n_parameters(n_cat, n_components):
    return n_components * (1 + int(np.sum(np.asarray(n_cat) - 1))) - 1


def stepmix_fit(data, n_components):
    """StepMix's categorical_nan fit; its parameters as LatentClassParams."""
    x = stepmix_input(data.codes)
    model, elapsed = fit_stepmix(x, n_components, n_init=STEPMIX_N_INIT, random_state=0)
    par = model.get_parameters()
    pis = np.asarray(par["measurement"]["pis"])  # (F, N * L)
    n_cat = data.n_categories
    pis = pis.reshape(n_components, len(n_cat), -1)
    factors = []
    for n, k in enumerate(n_cat):
        a = pis[:, n, :k].T.copy()
        factors.append(a / a.sum(axis=0, keepdims=True))
    w = np.asarray(par["weights"], dtype=float)
    return LatentClassParams(w / w.sum(), factors), elapsed, model, x


def peers_table(quick: bool) -> pd.DataFrame:
    rows = []
    for name, data, n_components in cases(quick):
        n_obs = int((data.codes >= 0).any(axis=1).sum())
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LocalOptimumWarning)
            model = LatentClassPMF(n_components, random_state=0).fit(data)
        t_ours = time.perf_counter() - t0
        print(f"  {name}: bayespmf {t_ours:.1f} s", file=sys.stderr, flush=True)
        ll_ours = float(log_likelihood_rows(data, model.weights_, model.factors_).sum())
        sm_params, t_sm, _, _ = stepmix_fit(data, n_components)
        ll_sm = float(log_likelihood_rows(data, *sm_params).sum())
        print(f"  {name}: StepMix {t_sm:.1f} s", file=sys.stderr, flush=True)
        k = n_parameters(data.n_categories, n_components)
        ours_cls = np.argmax(posterior_classes(data, model.weights_, model.factors_), 1)
        sm_cls = np.argmax(posterior_classes(data, *sm_params), 1)
        # covariate rows: the "covariates" section (covariates_table)
        rows.append(
            {
                "case": name,
                "S": data.n_samples,
                "F": n_components,
                "loglik bayespmf": ll_ours,
                "loglik StepMix": ll_sm,
                "diff": ll_ours - ll_sm,
                "BIC bayespmf": -2 * ll_ours + k * np.log(n_obs),
                "BIC StepMix": -2 * ll_sm + k * np.log(n_obs),
                "ARI": adjusted_rand_score(ours_cls, sm_cls),
                "time bayespmf [s]": t_ours,
                "time StepMix [s]": t_sm,
            }
        )
    return pd.DataFrame(rows)


def blrt_table(quick: bool) -> pd.DataFrame:
    sets = [("Votes (with missing)", load_votes().data, 2), ("Car", load_car().data, 3)]
    if not quick:
        d, _ = make_latent_class(
            2000, 3, n_components=3, n_variables=8, observed_prob=0.8, random_state=1
        )
        sets.append(("sim F=3 (true F)", d, 3))
    rows = []
    for name, data, n_components in sets:
        for sequential in (True, False) if not quick else (True,):
            res = bootstrap_lrt(
                data, n_components, random_state=0, sequential=sequential, n_bootstrap=99
            )
            print(f"  BLRT {name}: {res.time:.1f} s", file=sys.stderr, flush=True)
            rows.append(
                {
                    "case": name,
                    "F vs F+1": f"{n_components} vs {n_components + 1}",
                    "LR": res.lr,
                    "p": res.p_value,
                    "B used": res.n_bootstrap,
                    "stop": res.stopped,
                    "max LR_b": res.lr_draws.max(),
                    "clipped": res.n_clipped,
                    "time [s]": res.time,
                    "s / draw": res.time / res.n_bootstrap,
                }
            )
    return pd.DataFrame(rows)


def _fit_alt(sim, n_cat, n_components, starts, rng, tol):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_latent_class(
            sim, n_components, n_categories=n_cat, init=starts, random_state=rng, tol=tol
        ).loglik


def starts_table(quick: bool) -> pd.DataFrame:
    """Bootstrap (F + 1) log-likelihood of each start scheme against a 200-start reference.

    On draws from the F-class estimate (as the BLRT makes them), the (F + 1)-class fit
    from: k random starts; the F splits of the sample's F-class estimate plus the
    data's (F + 1) estimate plus k random starts (what bootstrap_lrt does). Shortfall =
    reference minus the scheme's log-likelihood (>= 0; it lowers LR_b by twice that).
    """
    n_draws = 4 if quick else 10
    sets = [("Votes", load_votes().data, 2), ("Car", load_car().data, 3)]
    rows = []
    for name, data, n_components in sets:
        n_cat = data.n_categories
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LocalOptimumWarning)
            null = fit_latent_class(data, n_components, random_state=0).params
            alt = fit_latent_class(data, n_components + 1, random_state=0).params
        short: dict[str, list] = {}
        for b in range(n_draws):
            g = np.random.default_rng(100 + b)
            sim = simulate_like(null, data.codes >= 0, g)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f0 = fit_latent_class(
                    sim, n_components, n_categories=n_cat, init=[null], random_state=g
                ).params
            splits = [*split_starts(f0, g), alt]
            rand = [init_random(n_cat, n_components + 1, g) for _ in range(200)]
            ref = _fit_alt(sim, n_cat, n_components + 1, splits + rand, g, 1e-8)
            for k in (0, 5, 10, 20, 40, 80):
                if k:
                    ll = _fit_alt(sim, n_cat, n_components + 1, rand[:k], g, 1e-6)
                    short.setdefault(f"{k} random", []).append(ref - ll)
                ll = _fit_alt(sim, n_cat, n_components + 1, splits + rand[:k], g, 1e-6)
                short.setdefault(f"splits + {k} random", []).append(ref - ll)
        for scheme, s in short.items():
            s = np.maximum(np.asarray(s), 0.0)
            rows.append(
                {
                    "case": f"{name} F={n_components}+1",
                    "scheme": scheme,
                    "draws": len(s),
                    "mean shortfall": s.mean(),
                    "max shortfall": s.max(),
                    "draws short > 0.05": int((s > 0.05).sum()),
                }
            )
    return pd.DataFrame(rows)


def se_table(quick: bool) -> pd.DataFrame:
    data, truth = make_latent_class(
        3000, 3, n_components=2, n_variables=6, observed_prob=0.9, random_state=4
    )
    fit = fit_latent_class(data, 2, init=[(truth.weights, truth.factors)], random_state=0)
    boot = standard_errors(
        data,
        fit.params,
        method="bootstrap",
        n_bootstrap=30 if quick else 100,
        random_state=0,
    )
    b = np.concatenate([boot.weights, *[f.ravel() for f in boot.factors]])
    rows = []
    for kind in ("hessian", "opg", "sandwich"):
        se = standard_errors(data, fit.params, information=kind)
        s = np.concatenate([se.weights, *[f.ravel() for f in se.factors]])
        ratio = s / b
        rows.append(
            {
                "method": kind,
                "median SE / bootstrap SE": np.nanmedian(ratio),
                "min ratio": np.nanmin(ratio),
                "max ratio": np.nanmax(ratio),
                "time [s]": se.time,
            }
        )
    rows.append(
        {
            "method": f"bootstrap (B={boot.n_bootstrap})",
            "median SE / bootstrap SE": 1.0,
            "min ratio": 1.0,
            "max ratio": 1.0,
            "time [s]": boot.time,
        }
    )
    return pd.DataFrame(rows)


def covariates_table(quick: bool) -> pd.DataFrame:
    """Simulated data with covariates: our LCA regression vs StepMix's one-step model.

    The data, the StepMix call and the label matching are those of
    ``benchmarks/lca_covariates.py`` (which prints every coefficient).
    """
    import lca_covariates as cov
    from sklearn.metrics import adjusted_rand_score

    from bayespmf.fit import fit_latent_class_regression
    from bayespmf.fit.covariates import check_covariates, predict_class_proba
    from bayespmf.kernels.covariates import covariate_loglik, prepare_covariate_data

    rows = []
    for seed in (0,) if quick else (0, 1):
        x, z, h, true_factors = cov.simulate(2000, seed)
        design = check_covariates(z, x.shape[0], fit_intercept=True, owner="benchmark")
        data = prepare_covariate_data(x, [cov.N_CAT] * cov.N_ITEMS, design)
        t0 = time.perf_counter()
        fit = fit_latent_class_regression(x, z, cov.RANK, random_state=seed)
        t_ours = time.perf_counter() - t0
        b_ours, f_ours, _ = cov.align(fit.params.beta, fit.params.factors, true_factors)
        lab_ours = predict_class_proba(x, z, fit.params).argmax(axis=1)
        t0 = time.perf_counter()
        b_sm, f_sm, lab_sm, _ = cov.fit_stepmix(x, z, seed)
        t_sm = time.perf_counter() - t0
        b_sm, f_sm, _ = cov.align(b_sm, f_sm, true_factors)
        k = (cov.RANK - 1) * design.shape[1] + cov.RANK * cov.N_ITEMS * (cov.N_CAT - 1)
        ll_ours = covariate_loglik(data, b_ours, stack_factors(f_ours))
        ll_sm = covariate_loglik(data, b_sm, stack_factors(f_sm))
        rows.append(
            {
                "case": f"sim with 2 covariates, seed {seed}",
                "S": x.shape[0],
                "F": cov.RANK,
                "loglik bayespmf": ll_ours,
                "loglik StepMix": ll_sm,
                "BIC bayespmf": -2 * ll_ours + k * np.log(x.shape[0]),
                "BIC StepMix": -2 * ll_sm + k * np.log(x.shape[0]),
                "ARI (vs each other)": adjusted_rand_score(lab_ours, lab_sm),
                "ARI bayespmf vs truth": adjusted_rand_score(h, lab_ours),
                "ARI StepMix vs truth": adjusted_rand_score(h, lab_sm),
                "max |beta diff|": float(np.abs(b_ours - b_sm).max()),
                "max |beta - truth|": float(np.abs(b_ours - cov.BETA).max()),
                "time bayespmf [s]": t_ours,
                "time StepMix [s]": t_sm,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cases and draws")
    parser.add_argument(
        "--only", choices=["peers", "covariates", "blrt", "starts", "se"], default=None
    )
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    pd.set_option("display.float_format", lambda v: f"{v:.4g}")
    sections = {
        "peers": ("bayespmf vs StepMix (same log-likelihood function)", peers_table),
        "covariates": ("With covariates: LCA regression vs StepMix", covariates_table),
        "blrt": ("Bootstrap LRT (bayespmf.fit.bootstrap_lrt)", blrt_table),
        "starts": ("BLRT starts: shortfall of bootstrap F+1 fits", starts_table),
        "se": ("Standard errors: information vs bootstrap", se_table),
    }
    for key, (title, fn) in sections.items():
        if args.only and key != args.only:
            continue
        t0 = time.perf_counter()
        table = fn(args.quick)
        print(f"\n## {title}  ({time.perf_counter() - t0:.1f} s)\n")
        print(table.to_string(index=False), flush=True)


if __name__ == "__main__":
    main()
