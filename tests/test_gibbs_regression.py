"""Gibbs for the factors, NUTS for the coefficients of a latent-class regression
(issue 25, item 2)."""

import numpy as np
import pymc as pm
import pytest

from bayespmf import DataValidationError
from bayespmf.kernels.gibbs_numba import BLOCK_ROWS
from bayespmf.kernels.gibbs_regression_numba import draw_row_class_counts
from bayespmf.models import (
    latent_class_model,
    latent_class_regression_model,
    sample,
)
from bayespmf.models.gibbs_regression import RegressionFactorGibbs, gibbs_steps
from bayespmf.pmf import observed_csr

N_CAT = [3, 2, 3]


def _rows(seed=0, n_rows=40):
    """Random codes (25 % missing, one empty row), log priors and log factors."""
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, k, size=n_rows) for k in N_CAT])
    codes[rng.random(codes.shape) < 0.25] = -1
    codes[1] = -1  # nothing observed: adds to no count
    eta = rng.normal(scale=1.5, size=(n_rows, 3))
    log_prior = eta - np.log(np.exp(eta).sum(axis=1, keepdims=True))
    log_a = np.vstack([np.log(rng.dirichlet(np.ones(k), size=3)).T for k in N_CAT])
    return codes, log_prior, log_a


def _expected_counts(codes, log_prior, log_a):
    """Exact expected category-by-class counts, by NumPy (Bayes' rule per row)."""
    offsets = np.concatenate([[0], np.cumsum(N_CAT)])
    post = log_prior.copy()
    for n in range(codes.shape[1]):
        seen = codes[:, n] >= 0
        post[seen] += log_a[offsets[n] + codes[seen, n]]
    post = np.exp(post - post.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    counts = np.zeros_like(log_a)
    for n in range(codes.shape[1]):
        seen = codes[:, n] >= 0
        np.add.at(counts, offsets[n] + codes[seen, n], post[seen])
    return counts


def test_kernel_mean_counts_match_each_rows_posterior():
    """Mean counts over many draws equal the exact expected counts (5 MC s.e.), every
    row with its own prior; each variable's counts add up to its observed rows."""
    codes, log_prior, log_a = _rows()
    indptr, indices = observed_csr(codes, N_CAT)
    rng = np.random.default_rng(2)
    draws = np.array(
        [
            draw_row_class_counts(log_prior, log_a, indptr, indices, rng)
            for _ in range(3000)
        ],
        dtype=float,
    )
    exact = _expected_counts(codes, log_prior, log_a)
    se = draws.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - exact) <= 5 * se + 1e-9)
    # the per-row prior matters: the shared mean prior gives other expected counts
    shared = np.tile(np.log(np.exp(log_prior).mean(axis=0)), (len(codes), 1))
    assert np.any(np.abs(_expected_counts(codes, shared, log_a) - exact) > 10 * se)
    offsets = np.concatenate([[0], np.cumsum(N_CAT)])
    for n in range(len(N_CAT)):
        total = draws[:, offsets[n] : offsets[n + 1]].sum(axis=(1, 2))
        assert np.all(total == (codes[:, n] >= 0).sum())


def test_kernel_reproducible_thread_independent_and_checked():
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 2, size=(2 * BLOCK_ROWS + 9, 3))
    indptr, indices = observed_csr(codes, [2, 2, 2])
    log_prior = np.log(rng.dirichlet(np.ones(2), size=len(codes)))
    log_a = np.log(np.full((6, 2), 0.5))
    args = (log_prior, log_a, indptr, indices)
    one = draw_row_class_counts(*args, np.random.default_rng(9), threads=1)
    two = draw_row_class_counts(*args, np.random.default_rng(9), threads=2)
    other = draw_row_class_counts(*args, np.random.default_rng(10), threads=2)
    np.testing.assert_array_equal(one, two)
    assert not np.array_equal(one, other)
    with pytest.raises(ValueError, match="'log_prior' must have shape"):
        draw_row_class_counts(log_prior[:-1], log_a, indptr, indices, rng)


def _data(n_rows=200, seed=1):
    """Two well-separated classes whose prior depends on one covariate."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n_rows, 1))
    p1 = 1 / (1 + np.exp(-(0.3 + 1.5 * z[:, 0])))
    h = (rng.random(n_rows) < p1).astype(int)
    a = [
        np.array([[0.8, 0.15, 0.05], [0.1, 0.2, 0.7]]),
        np.array([[0.85, 0.15], [0.2, 0.8]]),
    ]
    a += [np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])]
    codes = np.column_stack(
        [(ai[h].cumsum(axis=1) > rng.random((n_rows, 1))).argmax(axis=1) for ai in a]
    )
    codes[rng.random(codes.shape) < 0.15] = -1
    return codes, z


def test_step_keeps_coef_and_reads_the_factor_prior():
    """Rank 1: the factors' exact posterior is Dir(prior + category counts) whatever
    the coefficients, which the step never changes."""
    codes, z = _data(40)
    model = latent_class_regression_model(codes, z, 1, n_categories=N_CAT, factor_prior=6.0)
    step = RegressionFactorGibbs(model=model, rng=0, n_sweeps=1)
    point = model.initial_point()
    draws = []
    for _ in range(1500):
        point, _ = step.step(point)
        draws.append(np.exp(step._to_log(*(point[n] for n in step._names))[0])[0])
    np.testing.assert_array_equal(point["coef"], model.initial_point()["coef"])
    seen = codes[:, 0][codes[:, 0] >= 0]
    exact = (6.0 + np.bincount(seen, minlength=3)) / (18.0 + len(seen))
    se = np.std(draws, axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(np.mean(draws, axis=0) - exact) <= 5 * se)
    flat = (1.0 + np.bincount(seen, minlength=3)) / (3.0 + len(seen))
    assert np.any(np.abs(exact - flat) > 20 * se)


def test_refuses_what_it_cannot_sample():
    codes, z = _data(30)
    plain = latent_class_model(codes, 2, n_categories=N_CAT)
    with pytest.raises(DataValidationError, match="latent-class regression models only"):
        RegressionFactorGibbs(model=plain)
    model = latent_class_regression_model(codes, z, 2, n_categories=N_CAT)
    with pytest.raises(DataValidationError, match="vars must be"):
        RegressionFactorGibbs(model=model, vars=[model.rvs_to_values[model["A_x0"]]])
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(DataValidationError, match="n_sweeps"):
            RegressionFactorGibbs(model=model, n_sweeps=bad)
    potential = latent_class_regression_model(codes, z, 2, n_categories=N_CAT)
    with potential:
        pm.Potential("penalty", -potential["coef"].sum())
    with pytest.raises(DataValidationError, match="potentials"):
        RegressionFactorGibbs(model=potential)
    with pytest.raises(DataValidationError, match="potentials"):
        sample(potential, method="gibbs", init=None, draws=5, tune=0, chains=1)
    with pytest.raises(DataValidationError, match="target_accept"):
        sample(model, method="gibbs", target_accept=0.9)
    with pytest.raises(DataValidationError, match=r"'n_sweeps'.*RegressionFactorGibbs"):
        sample(model, method="gibbs", n_sweeps=0, draws=5, tune=0, chains=1)
    with model:
        steps = gibbs_steps()
    assert [type(s).__name__ for s in steps] == ["RegressionFactorGibbs", "NUTS"]
    assert {v.name for v in steps[1].vars} == {"coef"}


@pytest.mark.slow
def test_same_seed_same_draws():
    """One random_seed: the same estimate, starts and compound draws; another differs."""
    codes, z = _data(60)
    model = latent_class_regression_model(codes, z, 2, n_categories=N_CAT)
    kw = dict(method="gibbs", draws=15, tune=10, chains=2, cores=1, progressbar=False)
    a, b, c = (
        sample(model, random_seed=s, log_likelihood=False, **kw).posterior
        for s in (3, 3, 4)
    )
    assert a.attrs["sampling_method"] == "gibbs"
    for name in ("coef", "A_x0", "A_x2"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
        assert not np.allclose(a[name].values, c[name].values)
    assert not np.allclose(a["A_x1"].values[0], a["A_x1"].values[1])  # chains differ


@pytest.fixture(scope="module")
def small_posteriors():
    codes, z = _data()
    model = latent_class_regression_model(codes, z, 2, n_categories=N_CAT)
    opts = dict(chains=2, cores=1, random_seed=11, progressbar=False)
    gibbs = sample(model, method="gibbs", draws=1500, tune=300, **opts)
    nuts = sample(model, method="nuts", draws=800, tune=400, log_likelihood=False, **opts)
    return gibbs, nuts


@pytest.mark.slow
def test_front_door_groups(small_posteriors):
    gibbs, _ = small_posteriors
    assert gibbs.posterior.attrs["sampling_method"] == "gibbs"
    assert {"posterior", "unaligned_posterior", "log_likelihood"} <= set(gibbs.children)
    assert gibbs.posterior["coef"].shape == (2, 1500, 2, 1)
    assert np.isfinite(gibbs.log_likelihood["x"].values).all()


def test_agrees_with_nuts(small_posteriors, mc_summary):
    """Means within 4 combined MC standard errors (sd / sqrt(ESS) of each sampler, plus
    0.005 for the label alignment); sds within 4 s.e. of an sd (~ sd / sqrt(2 ESS))
    plus 10 %. Every coefficient and every factor entry."""
    gibbs, nuts = small_posteriors
    for name in ("coef", "A_x0", "A_x1", "A_x2"):
        mg, sg, eg = mc_summary(gibbs, name)
        mn, sn, en = mc_summary(nuts, name)
        assert eg.min() > 100 and en.min() > 100, (name, eg, en)
        se = np.sqrt(sg**2 / eg + sn**2 / en)
        assert np.all(np.abs(mg - mn) <= 4 * se + 0.005), (name, mg, mn, se)
        se_sd = np.sqrt(sg**2 / (2 * eg) + sn**2 / (2 * en))
        assert np.all(np.abs(sg - sn) <= 4 * se_sd + 0.1 * sn), (name, sg, sn)
