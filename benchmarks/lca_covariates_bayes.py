"""Latent-class regression, Bayesian and not: truth, MLE +- SE, posterior, StepMix.

On the seeded simulation of ``benchmarks/lca_covariates.py`` (N = 6 items x 3
categories, F = 3 classes, D = 2 covariates + intercept, class 0 the reference, 20 %
of the entries missing), fits

* the maximum-likelihood estimate ``LatentClassRegression(F)`` (standard errors from
  the observed information),
* the posterior of ``latent_class_regression_model`` by NUTS
  (``bayespmf.models.sample``, chains started at that estimate and aligned to it), and
* StepMix's one-step model (``StepMix(n_components=F, measurement="categorical_nan",
  structural="covariate", n_steps=1)``, via ``lca_covariates.fit_stepmix``),

and prints every coefficient side by side: truth, MLE (SE), posterior mean (sd) and
94 % HDI, StepMix. All labels are matched to the truth by the Hungarian method on the
stacked factors and the coefficients re-referenced to the class matched to true class
0 (StepMix's per-class rows and every posterior draw alike; the MLE's SE are those of
the contrasts). Also: wall times, and the posterior's max aligned r-hat and min bulk
ESS. Run ``python benchmarks/lca_covariates_bayes.py [--seed 0] [--n-rows 1000]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from lca_covariates import BETA, RANK, align, contrast_stderr, fit_stepmix, simulate

from bayespmf._arviz import hdi_of_draws
from bayespmf.estimators import LatentClassRegression
from bayespmf.metrics import match_components
from bayespmf.models import (
    convergence_summary,
    latent_class_regression_model,
    sample,
)
from bayespmf.pmf import stack_factors

HDI_PROB = 0.94


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-rows", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    args = parser.parse_args()
    x, z, _, true_factors = simulate(args.n_rows, args.seed)

    t0 = time.perf_counter()
    est = LatentClassRegression(RANK, random_state=args.seed).fit(x, covariates=z)
    t_mle = time.perf_counter() - t0
    b_mle, _, perm = align(est.coef_, est.factors_, true_factors)
    se_mle = contrast_stderr(est.coef_covariance_, est.coef_.shape[0], perm)

    t0 = time.perf_counter()
    model = latent_class_regression_model(x, z, RANK, n_categories=[3] * 6)
    idata = sample(
        model,
        init=est,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=False,
    )
    t_bayes = time.perf_counter() - t0
    # the draws carry the estimate's labels (aligned to it): map them to the truth's
    post_perm = match_components(
        stack_factors(
            [
                idata.posterior[f"A_{n}"].mean(("chain", "draw")).values.T
                for n in model.coords["variable"]
            ]
        ),
        stack_factors(true_factors),
    )
    draws = idata.posterior["coef_full"].values[..., post_perm]  # (chain, draw, D, F)
    draws = draws - draws[..., :1]
    mean, sd = draws.mean(axis=(0, 1)), draws.std(axis=(0, 1))
    hdi = hdi_of_draws(draws, HDI_PROB)  # (D, F, 2)
    # coef_full's column 0 is identically 0 (no r-hat): judge coef and the factors
    free = idata.copy()
    free["posterior"] = free["posterior"].to_dataset().drop_vars("coef_full")
    summary = convergence_summary(free)
    table = summary["table"]

    t0 = time.perf_counter()
    b_sm, f_sm, _, _ = fit_stepmix(x, z, args.seed)
    t_sm = time.perf_counter() - t0
    b_sm = align(b_sm, f_sm, true_factors)[0]

    print(
        f"S={x.shape[0]}, N=6 items x 3 categories, F={RANK}, D=2 covariates + "
        f"intercept, 20% missing, seed {args.seed}; NUTS {args.chains} chains x "
        f"({args.tune} tune + {args.draws} draws)"
    )
    head = (
        f"{'coefficient':22s}{'truth':>8s}{'MLE (SE)':>18s}{'post. mean (sd)':>20s}"
        f"{'94% HDI':>20s}{'StepMix':>10s}"
    )
    print(head)
    names = ["intercept", "z1", "z2"]
    for f in range(1, RANK):
        for d in range(3):
            label = f"beta[{names[d]}, {f}]"
            mle = f"{b_mle[d, f]:8.3f} ({se_mle[d, f]:.3f})"
            bay = f"{mean[d, f]:8.3f} ({sd[d, f]:.3f})"
            interval = f"[{hdi[d, f, 0]:6.3f}, {hdi[d, f, 1]:6.3f}]"
            print(
                f"{label:22s}{BETA[d, f]:8.3f}{mle:>18s}{bay:>20s}{interval:>20s}"
                f"{b_sm[d, f]:10.3f}"
            )
    print(
        f"wall time (s): MLE {t_mle:.1f}, NUTS {t_bayes:.1f} (sampling incl. compile "
        f"{idata.posterior.attrs['sampling_time']:.1f}), StepMix {t_sm:.1f}"
    )
    print(
        f"posterior: max aligned r-hat {table['r_hat_max'].max():.3f}, min bulk ESS "
        f"{table['ess_bulk_min'].min():.0f}, min tail ESS "
        f"{table['ess_tail_min'].min():.0f}, divergences {summary['divergences']}"
    )
    print(
        f"max |post. mean - MLE| / sd: {np.abs(mean - b_mle)[:, 1:].max():.3f} / ", end=""
    )
    print(f"{(np.abs(mean - b_mle) / np.where(sd > 0, sd, 1.0))[:, 1:].max():.2f} sd")


if __name__ == "__main__":
    main()
