"""Latent-class regression (covariates on class membership): kernel and fit function.

Reference values come from independent computations: a row-by-row brute-force
likelihood, scipy's BFGS on the multinomial logit, second differences of the
log-likelihood itself, duplicated rows for weights, and the covariate-free MLE.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from bayespmf.fit import fit_latent_class, fit_latent_class_regression
from bayespmf.fit.covariates import (
    BOUNDARY,
    beta_standard_errors,
    check_covariates,
    class_prior_proba,
    predict_class_proba,
)
from bayespmf.kernels.covariates import (
    CovariateEMState,
    build_covariate_em_kernel,
    covariate_loglik,
    mlogit_newton,
    prepare_covariate_data,
)
from bayespmf.metrics import match_components
from bayespmf.pmf import offsets_of, stack_factors

BETA = np.array([[0.0, 0.4, -0.3], [0.0, 1.2, -0.6], [0.0, -0.8, 1.0]])


def simulate(n_rows, rng, *, beta=BETA, n_items=6, n_cat=3, missing=0.2):
    """Rows from the latent-class regression model: classes from softmax(z beta)."""
    n_components = beta.shape[1]
    factors = [
        rng.dirichlet(np.full(n_cat, 0.5), size=n_components).T for _ in range(n_items)
    ]
    z = rng.normal(size=(n_rows, beta.shape[0] - 1))
    p = softmax(np.c_[np.ones(n_rows), z] @ beta, axis=1)
    h = (p.cumsum(axis=1) > rng.random((n_rows, 1))).argmax(axis=1)
    x = np.stack(
        [(a[:, h].cumsum(axis=0) > rng.random(n_rows)).argmax(axis=0) for a in factors],
        axis=1,
    )
    x[rng.random(x.shape) < missing] = -1
    return x, z, factors


def brute_force_loglik(x, design, beta, factors, weight=None):
    """sum_s w_s log sum_f pi_f(z_s) prod_{n observed} A_n(x_sn, f), row by row."""
    total = 0.0
    for s in range(x.shape[0]):
        eta = design[s] @ beta
        prior = np.exp(eta - eta.max())
        prior /= prior.sum()
        p = 0.0
        for f in range(beta.shape[1]):
            term = prior[f]
            for n, a in enumerate(factors):
                if x[s, n] >= 0:
                    term *= a[x[s, n], f]
            p += term
        total += (1.0 if weight is None else weight[s]) * np.log(p)
    return total


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(7)
    beta = np.array([[0.0, 0.5], [0.0, 1.5]])
    x, z, factors = simulate(400, rng, beta=beta, n_items=5, n_cat=3, missing=0.25)
    return x, z, factors


@pytest.fixture(scope="module")
def small_fit(small):
    x, z, _ = small
    return fit_latent_class_regression(x, z, 2, n_init=10, random_state=0)


def test_loglik_equals_brute_force(small, small_fit):
    x, z, _ = small
    design = np.c_[np.ones(x.shape[0]), z]
    want = brute_force_loglik(x, design, small_fit.params.beta, small_fit.params.factors)
    assert small_fit.loglik == pytest.approx(want, rel=1e-12)
    assert small_fit.params.beta.shape == (2, 2)
    assert np.all(small_fit.params.beta[:, 0] == 0.0)


def test_weighted_loglik_equals_brute_force(rng):
    x, z, factors = simulate(50, rng)
    weight = rng.uniform(0.5, 2.0, size=50)
    data = prepare_covariate_data(x, [3] * 6, np.c_[np.ones(50), z], weight)
    beta = rng.normal(size=(3, 3))
    beta[:, 0] = 0.0
    got = covariate_loglik(data, beta, stack_factors(factors))
    want = brute_force_loglik(x, np.c_[np.ones(50), z], beta, factors, weight)
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("ridge", [0.0, 0.5])
def test_em_objective_non_decreasing(rng, ridge):
    x, z, _ = simulate(300, rng, missing=0.3)
    weight = rng.integers(1, 4, size=300).astype(float)
    data = prepare_covariate_data(x, [3] * 6, np.c_[np.ones(300), z], weight)
    step = build_covariate_em_kernel(data, ridge=ridge)
    a0 = rng.uniform(size=(18, 3))
    a0 /= np.add.reduceat(a0, offsets_of([3] * 6)[:-1], axis=0).repeat(3, axis=0)
    state = CovariateEMState(np.zeros((3, 3)), a0, -np.inf)
    trace = []
    for _ in range(60):
        state, info = step(state)
        trace.append(info.objective)
    d = np.diff(trace)
    assert np.all(d >= -1e-10 * abs(trace[-1]))
    assert trace[-1] > trace[0] + 1.0


def test_fit_trace_non_decreasing_and_starts_at_base(small_fit):
    trace = small_fit.loglik_trace
    assert np.all(np.diff(trace) >= -1e-10 * abs(trace[-1]))
    # the first objective is that of the covariate-free optimum (slopes 0)
    assert trace[0] == pytest.approx(small_fit.loglik_start, rel=1e-9)
    assert small_fit.loglik >= trace[-1] - 1e-9
    assert small_fit.loglik > small_fit.loglik_start


def test_mlogit_newton_matches_scipy(rng):
    n, d, f = 200, 3, 4
    z = np.c_[np.ones(n), rng.normal(size=(n, d - 1))]
    resp = rng.dirichlet(np.ones(f), size=n) * rng.uniform(0.5, 2, size=(n, 1))

    def negq(theta):
        b = np.c_[np.zeros(d), theta.reshape(d, f - 1)]
        eta = z @ b
        return -np.sum(resp * (eta - logsumexp(eta, axis=1, keepdims=True)))

    ref = minimize(negq, np.zeros(d * (f - 1)), method="BFGS", options={"gtol": 1e-10})
    got, _ = mlogit_newton(z, resp, np.zeros((d, f)), max_steps=50)
    assert np.allclose(got[:, 1:].ravel(), ref.x, atol=1e-5)
    assert np.all(got[:, 0] == 0.0)


def test_recovers_beta_and_factors():
    rng = np.random.default_rng(20261122)
    x, z, factors = simulate(20000, rng)
    fit = fit_latent_class_regression(x, z, 3, n_init=20, random_state=1)
    perm = match_components(stack_factors(fit.params.factors), stack_factors(factors))
    est = [a[:, perm] for a in fit.params.factors]
    assert max(np.abs(a - b).max() for a, b in zip(est, factors, strict=True)) < 0.03
    beta = fit.params.beta[:, perm]
    beta = beta - beta[:, :1]
    # the SEs of the re-referenced contrasts are about those of the fit (~0.03 here):
    # a 0.15 band is 5 SE
    assert np.abs(beta - BETA).max() < 0.15
    assert np.all(np.isfinite(fit.stderr[:, 1:])) and np.all(np.isnan(fit.stderr[:, 0]))
    assert np.all(fit.stderr[:, 1:] < 0.06)


def test_standard_errors_match_second_differences(small, small_fit):
    """The score-based observed information against second differences of the loglik."""
    x, z, _ = small
    design = np.c_[np.ones(x.shape[0]), z]
    data = prepare_covariate_data(x, [3] * 5, design)
    beta = small_fit.params.beta
    a = stack_factors(small_fit.params.factors)
    se, cov = beta_standard_errors(data, beta, a)
    off = offsets_of([3] * 5)
    ref = np.zeros(a.shape, dtype=bool)
    for n in range(5):
        blk = a[off[n] : off[n + 1]]
        ref[off[n] + blk.argmax(axis=0), np.arange(2)] = True
    free = ~ref & (a >= BOUNDARY)
    log_a = np.log(a)

    def loglik(theta):
        b = beta.copy()
        b[:, 1] = theta[:2]
        la = log_a.copy()
        la[free] = theta[2:]
        e = np.exp(la)
        sums = np.add.reduceat(e, off[:-1], axis=0).repeat(3, axis=0)
        return covariate_loglik(data, b, e / sums)

    theta0 = np.concatenate([beta[:, 1], log_a[free]])
    k = theta0.size
    h = 1e-3
    hess = np.empty((k, k))
    for i in range(k):
        for j in range(i, k):
            ei, ej = np.eye(k)[i] * h, np.eye(k)[j] * h
            hess[i, j] = hess[j, i] = (
                loglik(theta0 + ei + ej)
                - loglik(theta0 + ei - ej)
                - loglik(theta0 - ei + ej)
                + loglik(theta0 - ei - ej)
            ) / (4 * h * h)
    want = np.sqrt(np.diag(np.linalg.inv(-hess))[:2])
    assert np.allclose(se[:, 1], want, rtol=1e-3)
    assert np.allclose(small_fit.stderr, se, equal_nan=True)
    assert cov.shape == (2, 2)
    # the factors' uncertainty counts: beta's information alone gives smaller SEs
    assert np.all(want > np.sqrt(1 / np.diag(-hess)[:2]))


@pytest.mark.parametrize("how", ["no_covariates", "constant_no_intercept"])
def test_constant_covariate_equals_covariate_free_mle(small, how):
    x, _, _ = small
    n = x.shape[0]
    base = fit_latent_class(x, 2, n_init=10, random_state=0)
    if how == "no_covariates":
        fit = fit_latent_class_regression(x, np.zeros((n, 0)), 2, n_init=10, random_state=0)
    else:
        fit = fit_latent_class_regression(
            x, np.full(n, 3.0), 2, fit_intercept=False, n_init=10, random_state=0
        )
    assert fit.loglik == pytest.approx(base.loglik, abs=1e-6)
    w = base.params.weights
    perm = match_components(
        stack_factors(fit.params.factors), stack_factors(base.params.factors)
    )
    prior = class_prior_proba(
        np.zeros((1, 0)) if how == "no_covariates" else [[3.0]],
        fit.params.beta,
        fit_intercept=how == "no_covariates",
    )
    assert np.allclose(prior[0, perm], w, atol=1e-5)


def test_sample_weight_equals_duplicated_rows(rng):
    x, z, _ = simulate(150, rng, beta=BETA[:2, :2])
    counts = rng.integers(1, 4, size=150)
    dup_x, dup_z = np.repeat(x, counts, axis=0), np.repeat(z, counts, axis=0)
    a = fit_latent_class_regression(
        x, z, 2, n_init=5, random_state=0, sample_weight=counts, stderr=False
    )
    b = fit_latent_class_regression(dup_x, dup_z, 2, n_init=5, random_state=0, stderr=False)
    assert a.loglik == pytest.approx(b.loglik, rel=1e-8)


def test_predict_class_proba_is_the_posterior(small, small_fit):
    x, z, _ = small
    post = predict_class_proba(x[:20], z[:20], small_fit.params)
    beta, factors = small_fit.params
    design = np.c_[np.ones(20), z[:20]]
    for s in range(20):
        joint = softmax(design[s] @ beta)
        for n, a in enumerate(factors):
            if x[s, n] >= 0:
                joint = joint * a[x[s, n]]
        assert np.allclose(post[s], joint / joint.sum(), atol=1e-12)


@pytest.mark.parametrize(
    ("covariates", "match"),
    [
        (np.zeros((399, 1)), "one row per row"),
        (np.r_[np.full((1, 1), np.nan), np.zeros((399, 1))], "must be finite"),
        (np.r_[np.full((1, 1), np.inf), np.zeros((399, 1))], "must be finite"),
        (np.ones((400, 1)), "collinear"),
        (np.array([["a"]] * 400), "numeric"),
        (np.zeros((400, 1, 1)), "one row per row"),
    ],
)
def test_bad_covariates_raise(small, covariates, match):
    x, _, _ = small
    with pytest.raises(ValueError, match=rf"'covariates'.*{match}"):
        fit_latent_class_regression(x, covariates, 2, n_init=2, random_state=0)


def test_bad_arguments_raise(small):
    x, z, _ = small
    with pytest.raises(ValueError, match="'n_starts'"):
        fit_latent_class_regression(x, z, 2, n_starts=0)
    with pytest.raises(ValueError, match="'ridge'"):
        fit_latent_class_regression(x, z, 2, ridge=-1.0)
    with pytest.raises(ValueError, match="'sample_weight'"):
        fit_latent_class_regression(x, z, 2, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match=r"'covariates'.*no columns"):
        check_covariates(np.zeros((4, 0)), 4, fit_intercept=False, owner="f")


def test_caller_arrays_not_mutated(small):
    x, z, _ = small
    x = x[:200].copy()
    z = z[:200].copy()
    w = np.linspace(0.5, 2.0, 200)
    x0, z0, w0 = x.copy(), z.copy(), w.copy()
    fit_latent_class_regression(x, z, 2, n_init=3, random_state=0, sample_weight=w)
    assert np.array_equal(x, x0) and np.array_equal(z, z0) and np.array_equal(w, w0)


def test_random_state_determinism(small):
    x, z, _ = small
    a = fit_latent_class_regression(x, z, 2, n_init=5, random_state=3, stderr=False)
    b = fit_latent_class_regression(x, z, 2, n_init=5, random_state=3, stderr=False)
    assert a.loglik == b.loglik
    assert np.array_equal(a.params.beta, b.params.beta)
    assert all(
        np.array_equal(p, q)
        for p, q in zip(a.params.factors, b.params.factors, strict=True)
    )


def test_does_not_stop_while_an_entry_leaves_the_boundary():
    """Seed 1 of benchmarks/lca_covariates.py: Aitken alone stopped 0.03 units short."""
    x, z, _ = simulate(2000, np.random.default_rng(1))
    fit = fit_latent_class_regression(x, z, 3, n_init=20, random_state=1, stderr=False)
    data = prepare_covariate_data(x, [3] * 6, np.c_[np.ones(2000), z])
    step = build_covariate_em_kernel(data)
    state = CovariateEMState(fit.params.beta, stack_factors(fit.params.factors), -np.inf)
    for _ in range(400):
        state, _ = step(state)
    more = covariate_loglik(data, state.beta, state.factors_stacked)
    assert more - fit.loglik < 1e-4


def test_predictions_take_one_row_and_constant_covariates():
    from bayespmf.fit.covariates import (
        LatentClassRegressionParams,
        class_prior_proba,
        predict_class_proba,
    )

    beta = np.array([[0.0, 0.5], [0.0, -1.0]])  # intercept and one covariate, F = 2
    params = LatentClassRegressionParams(beta, [np.array([[0.9, 0.2], [0.1, 0.8]])])
    one = predict_class_proba([[0]], [[2.0]], params)
    prior = class_prior_proba([[2.0]], beta)
    lj = np.log(prior[0]) + np.log([0.9, 0.2])  # Bayes' rule by hand
    np.testing.assert_allclose(one[0], np.exp(lj) / np.exp(lj).sum(), rtol=1e-12)
    same = predict_class_proba([[0], [1]], [[2.0], [2.0]], params)  # constant column
    np.testing.assert_allclose(same[0], one[0], rtol=1e-12)


def test_separation_is_reported_and_a_ridge_keeps_beta_finite():
    from bayespmf.fit.covariates import SEPARATION_LOGIT

    rng = np.random.default_rng(3)
    z = (rng.random(400) < 0.5).astype(float)[:, None]
    h = z[:, 0].astype(int)  # the covariate decides the class: complete separation
    a = np.array([[0.9, 0.1], [0.1, 0.9]])  # Pr(x = 1 | h) in column h
    x = (rng.random((400, 6)) < a[1, h][:, None]).astype(int)
    with pytest.warns(UserWarning, match="separate class"):
        fit_latent_class_regression(x, z, 2, n_init=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ridged = fit_latent_class_regression(x, z, 2, n_init=10, random_state=0, ridge=1.0)
    assert np.abs(np.c_[np.ones(400), z] @ ridged.params.beta).max() < SEPARATION_LOGIT
