"""Latent-class regression (covariates on class membership): bayespmf vs StepMix.

Simulates (seeded) S rows of N categorical items from F latent classes whose prior is a
multinomial logit of D = 2 covariates plus an intercept (class 0 the reference), hides
20 % of the entries, and fits the one-step model with

* ``bayespmf.fit.fit_latent_class_regression`` (covariate-free multi-start MLE, then
  EM with a Newton M-step for beta), and
* StepMix's one-step model: ``StepMix(n_components=F, measurement="categorical_nan",
  structural="covariate", n_steps=1)``. StepMix gives every class its own coefficient
  row (no reference class; one Newton-Raphson step with a pseudo-inverse per M-step by
  default) and uses the conditional likelihood ``Pr(x | z)``; its beta is made
  comparable here by subtracting the reference class's row after label matching.

Both are re-scored with bayespmf's log-likelihood (``covariate_loglik``). Labels are
matched to the truth by the Hungarian method on the stacked factors. Prints one table;
run ``python benchmarks/lca_covariates.py [--seed 0] [--n-rows 2000]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import fit_stepmix as fit_stepmix_model
from _common import parse_args_quick, stepmix_input
from sklearn.metrics import adjusted_rand_score

from bayespmf.fit import fit_latent_class_regression
from bayespmf.fit.covariates import check_covariates, predict_class_proba
from bayespmf.kernels.covariates import covariate_loglik, prepare_covariate_data
from bayespmf.metrics import match_components
from bayespmf.pmf import stack_factors

N_ITEMS, N_CAT, RANK, MISSING = 6, 3, 3, 0.2
#: True coefficients (D = intercept + 2 covariates, F = 3; class 0 the reference).
BETA = np.array([[0.0, 0.4, -0.3], [0.0, 1.2, -0.6], [0.0, -0.8, 1.0]])


def simulate(n_rows: int, seed: int):
    rng = np.random.default_rng(seed)
    factors = [rng.dirichlet(np.full(N_CAT, 0.5), size=RANK).T for _ in range(N_ITEMS)]
    z = rng.normal(size=(n_rows, 2))
    eta = np.c_[np.ones(n_rows), z] @ BETA
    p = np.exp(eta - eta.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    h = (p.cumsum(axis=1) > rng.random((n_rows, 1))).argmax(axis=1)
    x = np.stack(
        [(a[:, h].cumsum(axis=0) > rng.random(n_rows)).argmax(axis=0) for a in factors],
        axis=1,
    )
    x[rng.random(x.shape) < MISSING] = -1
    return x, z, h, factors


def fit_stepmix(x, z, seed):
    xs = stepmix_input(x)
    model, _ = fit_stepmix_model(
        xs,
        RANK,
        z,
        structural="covariate",
        n_steps=1,
        n_init=10,
        max_iter=2000,
        abs_tol=1e-10,
        random_state=seed,
    )
    params = model.get_parameters()
    pis = params["measurement"]["pis"]  # (F, N * max_outcomes)
    max_out = pis.shape[1] // N_ITEMS
    factors = [pis[:, n * max_out : n * max_out + N_CAT].T for n in range(N_ITEMS)]
    factors = [a / a.sum(axis=0, keepdims=True) for a in factors]
    beta = params["structural"]["beta"].T  # (D, F): row 0 the intercept
    return beta, factors, model.predict(xs, z), model.n_iter_


def align(beta, factors, true_factors):
    perm = match_components(stack_factors(factors), stack_factors(true_factors))
    beta = beta[:, perm]
    return beta - beta[:, :1], [a[:, perm] for a in factors], perm


def contrast_stderr(covariance, n_dim, perm):
    """Standard errors of beta re-referenced to the class matched to true class 0.

    ``covariance`` is that of the free entries ``beta[:, 1:]`` (row-major); after the
    permutation the reference is our class ``perm[0]``, and the SE of
    ``beta_f - beta_ref`` needs the covariances too.
    """
    n_cls = perm.size
    full = np.zeros((n_dim * n_cls, n_dim * n_cls))
    free = (np.arange(n_dim * n_cls) % n_cls) != 0
    full[np.ix_(free, free)] = covariance
    contrast = np.zeros((n_dim * n_cls, n_dim * n_cls))
    for d in range(n_dim):
        for f in range(n_cls):
            contrast[d * n_cls + f, d * n_cls + perm[f]] += 1.0
            contrast[d * n_cls + f, d * n_cls + perm[0]] -= 1.0
    var = np.diag(contrast @ full @ contrast.T).reshape(n_dim, n_cls)
    return np.sqrt(np.maximum(var, 0.0))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-rows", type=int, default=2000)
    args = parse_args_quick(parser, None, n_rows=300)
    x, z, h, true_factors = simulate(args.n_rows, args.seed)
    design = check_covariates(z, x.shape[0], fit_intercept=True, owner="benchmark")
    data = prepare_covariate_data(x, [N_CAT] * N_ITEMS, design)

    t0 = time.perf_counter()
    fit = fit_latent_class_regression(x, z, RANK, random_state=args.seed)
    t_ours = time.perf_counter() - t0
    b_ours, f_ours, perm = align(fit.params.beta, fit.params.factors, true_factors)
    se_ours = contrast_stderr(fit.info["covariance"], fit.params.beta.shape[0], perm)
    post = predict_class_proba(x, z, fit.params)
    lab_ours = post.argmax(axis=1)

    t0 = time.perf_counter()
    b_sm, f_sm, lab_sm, it_sm = fit_stepmix(x, z, args.seed)
    t_sm = time.perf_counter() - t0
    b_sm, f_sm, _ = align(b_sm, f_sm, true_factors)

    ll_true = covariate_loglik(data, BETA, stack_factors(true_factors))
    ll_ours = covariate_loglik(data, b_ours, stack_factors(f_ours))
    ll_sm = covariate_loglik(data, b_sm, stack_factors(f_sm))
    print(
        f"S={x.shape[0]}, N={N_ITEMS} items x {N_CAT} categories, F={RANK}, "
        f"D=2 covariates + intercept, {MISSING:.0%} missing, seed {args.seed}"
    )
    print(f"{'':28s}{'bayespmf':>14s}{'StepMix':>14s}{'truth':>14s}")
    print(f"{'log-likelihood (ours)':28s}{ll_ours:14.4f}{ll_sm:14.4f}{ll_true:14.4f}")
    print(
        f"{'ARI modal class vs truth':28s}{adjusted_rand_score(h, lab_ours):14.4f}"
        f"{adjusted_rand_score(h, lab_sm):14.4f}"
    )
    print(f"{'wall time (s)':28s}{t_ours:14.2f}{t_sm:14.2f}")
    print(f"{'EM iterations (best start)':28s}{fit.n_iter:14d}{it_sm:14d}")
    names = ["intercept", "z1", "z2"]
    for f in range(1, RANK):
        for d in range(3):
            label = f"beta[{names[d]}, class {f}]"
            print(
                f"{label:28s}{b_ours[d, f]:9.4f}({se_ours[d, f]:.3f})"
                f"{b_sm[d, f]:14.4f}{BETA[d, f]:14.4f}"
            )
    err = max(np.abs(a - b).max() for a, b in zip(f_ours, true_factors, strict=True))
    err_sm = max(np.abs(a - b).max() for a, b in zip(f_sm, true_factors, strict=True))
    print(f"{'max |A - A_true|':28s}{err:14.4f}{err_sm:14.4f}")
    print(f"{'max |beta_ours - beta_SM|':28s}{np.abs(b_ours - b_sm).max():14.2e}")


if __name__ == "__main__":
    main()
