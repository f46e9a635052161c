"""The PyMC latent-class regression model (issue 12, item 6)."""

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from pymc.model.transform.conditioning import remove_value_transforms
from scipy.special import softmax

from bayespmf import CategoricalData
from bayespmf.estimators import LatentClassPMF, LatentClassRegression
from bayespmf.models import (
    LatentClassRegressionRows,
    align_labels,
    initvals,
    latent_class_regression_model,
    sample,
)
from bayespmf.models.latent_class import factor_var_name

N_CAT = [2, 3, 2, 3]
#: True coefficients: intercept and one covariate, class 0 the reference.
BETA = np.array([[0.0, -0.3], [0.0, 1.5]])


def simulate(n_rows, seed):
    rng = np.random.default_rng(seed)
    factors = [
        np.array([[0.85, 0.15], [0.2, 0.8]]).T,
        np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]]).T,
        np.array([[0.8, 0.2], [0.25, 0.75]]).T,
        np.array([[0.1, 0.6, 0.3], [0.6, 0.1, 0.3]]).T,
    ]
    z = rng.normal(size=(n_rows, 1))
    p = softmax(np.c_[np.ones(n_rows), z] @ BETA, axis=1)
    h = (rng.random(n_rows) < p[:, 1]).astype(int)
    x = np.stack(
        [(a[:, h].cumsum(axis=0) > rng.random(n_rows)).argmax(axis=0) for a in factors],
        axis=1,
    )
    full = x.copy()
    x[rng.random(x.shape) < 0.1] = -1
    empty = (x < 0).all(axis=1)
    x[empty, 0] = full[empty, 0]  # no empty row but the next one
    x[0] = -1  # one empty row: dropped by the model, with its covariate
    names = ["a", "b", "c", "d"]
    return CategoricalData(x, N_CAT, names), z, factors


@pytest.fixture(scope="module")
def sim():
    return simulate(300, 3)


def brute_force_row_logliks(codes, design, beta, factors):
    """log sum_f softmax(z beta)_f prod_n A_n(x_n, f), loop by loop."""
    out = []
    for row, z in zip(codes, design, strict=True):
        eta = z @ beta
        prior = np.exp(eta - eta.max())
        prior /= prior.sum()
        p = 0.0
        for f in range(beta.shape[1]):
            term = prior[f]
            for n, x in enumerate(row):
                if x >= 0:
                    term *= factors[n][x, f]
            p += term
        out.append(np.log(p))
    return np.array(out)


def constrained_point(names, coef, factors):
    return {"coef": coef[:, 1:]} | {
        factor_var_name(n): a.T for n, a in zip(names, factors, strict=True)
    }


def observed_loglik_fn(model):
    """Total log-likelihood of the rows at constrained values (no priors, no Jacobian)."""
    plain = remove_value_transforms(model)
    return plain.compile_logp(vars=[plain["x"]], jacobian=False)


def test_model_structure_and_dropped_rows(sim):
    data, z, _ = sim
    model = latent_class_regression_model(data, pd.DataFrame({"age": z[:, 0]}), 2)
    assert list(model.coords["covariate"]) == ["(intercept)", "age"]
    assert model.named_vars_to_dims["coef"] == ("covariate", "free_class")
    assert model.named_vars_to_dims["coef_full"] == ("covariate", "class")
    assert model.named_vars_to_dims["A_b"] == ("class", "b_category")
    design = model["covariates"].get_value()
    assert design.shape == (data.n_samples - 1, 2)  # the empty row is gone
    np.testing.assert_array_equal(design[:, 1], z[1:, 0])
    np.testing.assert_array_equal(model["rows"].get_value(), data.codes[1:])


def test_logp_equals_enumeration(sim, rng):
    data, z, _ = sim
    model = latent_class_regression_model(data, z, 2)
    coef = np.c_[np.zeros(2), rng.normal(size=(2, 1))]
    factors = [rng.dirichlet(np.ones(k), size=2).T for k in N_CAT]
    point = constrained_point(data.names, coef, factors)
    design = np.c_[np.ones(len(z)), z][1:]
    want = brute_force_row_logliks(data.codes[1:], design, coef, factors)
    rows_fn = model.compile_fn(
        pm.logp(model["x"], model["rows"]), inputs=model.free_RVs, on_unused_input="ignore"
    )
    np.testing.assert_allclose(rows_fn(point), want, rtol=1e-10)
    assert observed_loglik_fn(model)(point) == pytest.approx(want.sum(), rel=1e-12)


def test_rows_distribution_three_classes():
    # per-row logits and F = 3: the logp against enumeration, codes out of range -inf
    logits = np.array([[0.0, 1.0, -2.0], [0.0, -1.0, 0.5]])
    a = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    x = LatentClassRegressionRows.dist(logits, [a, a])
    rows = np.array([[0, 1], [1, -1]])
    got = pm.logp(x, rows).eval()
    want = brute_force_row_logliks(rows, np.eye(2), logits, [a.T, a.T])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert pm.logp(x, np.array([[0, 2], [0, 0]])).eval()[0] == -np.inf


def test_prior_predictive_shapes_and_codes(sim):
    data, z, _ = sim
    model = latent_class_regression_model(data, z, 2)
    prior = pm.sample_prior_predictive(draws=20, model=model, random_seed=0)
    x = prior.prior_predictive["x"].values
    assert x.shape == (1, 20, data.n_samples - 1, 4)
    for n, k in enumerate(N_CAT):
        assert set(np.unique(x[..., n])) <= set(range(k))
    full = prior.prior["coef_full"].values
    assert full.shape == (1, 20, 2, 2)
    np.testing.assert_array_equal(full[..., 0], 0.0)
    np.testing.assert_array_equal(full[..., 1], prior.prior["coef"].values[..., 0])
    # reproducible from one seed
    again = pm.sample_prior_predictive(draws=20, model=model, random_seed=0)
    np.testing.assert_array_equal(again.prior_predictive["x"].values, x)


def test_generative_class_prior_follows_logits():
    # class 1 certain for row 0, class 0 for row 1: the codes follow the factors
    logits = np.array([[-50.0, 50.0], [50.0, -50.0]])
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    x = LatentClassRegressionRows.dist(logits, [a])
    draws = np.stack([pm.draw(x, random_seed=s) for s in range(5)])
    np.testing.assert_array_equal(draws[:, :, 0], [[1, 0]] * 5)


def test_constant_covariates_match_latent_class_pmf(sim):
    data, _, _ = sim
    kept = data.drop_empty_rows()
    pmf = LatentClassPMF(2, random_state=0).fit(kept)
    model = latent_class_regression_model(data, np.zeros((data.n_samples, 0)), 2)
    assert list(model.coords["covariate"]) == ["(intercept)"]
    w = pmf.weights_
    coef = np.array([[0.0, np.log(w[1] / w[0])]])
    point = constrained_point(data.names, coef, pmf.factors_)
    assert observed_loglik_fn(model)(point) == pytest.approx(pmf.loglik_, rel=1e-10)


def test_bad_covariates_raise(sim):
    data, z, _ = sim
    with pytest.raises(ValueError, match=r"'covariates'.*one row per row"):
        latent_class_regression_model(data, z[:-1], 2)
    with pytest.raises(ValueError, match=r"'covariates'.*finite"):
        latent_class_regression_model(
            data, np.where(np.arange(300)[:, None] == 5, np.nan, z), 2
        )
    with pytest.raises(ValueError, match=r"'covariates'.*collinear"):
        latent_class_regression_model(data, np.ones((300, 1)), 2)
    with pytest.raises(ValueError, match=r"'covariates'.*required"):
        latent_class_regression_model(data, None, 2)
    with pytest.raises(ValueError, match=r"'covariates'.*numeric"):
        latent_class_regression_model(data, pd.DataFrame({"g": ["x"] * 300}), 2)
    with pytest.raises(ValueError, match="'names'"):
        latent_class_regression_model(data, z, 2, names=["u", "v"])
    with pytest.raises(ValueError, match="'coef_prior_sd'"):
        latent_class_regression_model(data, z, 2, coef_prior_sd=0.0)


def test_caller_arrays_not_mutated(sim):
    data, z, _ = sim
    codes, z_copy = data.codes.copy(), z.copy()
    model = latent_class_regression_model(data.codes, z, 2, n_categories=N_CAT)
    np.testing.assert_array_equal(data.codes, codes)
    np.testing.assert_array_equal(z, z_copy)
    point = (np.array([[0.0, 1.0], [0.0, 2.0]]), [np.full((k, 2), 1 / k) for k in N_CAT])
    before = point[0].copy()
    initvals(model, point, chains=2, random_seed=0)
    np.testing.assert_array_equal(point[0], before)


def test_initvals_and_alignment_without_sampling(sim):
    import arviz as az

    data, z, factors = sim
    model = latent_class_regression_model(data, z, 2)
    start = initvals(model, (BETA, factors), chains=1, jitter=0.0)[0]
    np.testing.assert_allclose(start["coef"], BETA[:, 1:])
    np.testing.assert_allclose(start["A_b"], factors[1].T)
    # fake draws: draw 0 as the truth, draw 1 with its classes swapped
    perm = [1, 0]
    swapped = BETA[:, perm] - BETA[:, [1]]
    full = np.stack([BETA, swapped])[None]  # (chain, draw, D, F)
    post = {"coef_full": full, "coef": full[..., 1:]}
    for n, a in zip(data.names, factors, strict=True):
        post[factor_var_name(n)] = np.stack([a.T, a.T[perm]])[None]
    coords = {"covariate": ["(intercept)", "z0"], "class": [0, 1], "free_class": [1]}
    dims = {"coef_full": ["covariate", "class"], "coef": ["covariate", "free_class"]}
    for n, k in zip(data.names, N_CAT, strict=True):
        coords[f"{n}_category"] = list(range(k))
        dims[factor_var_name(n)] = ["class", f"{n}_category"]
    idata = az.from_dict({"posterior": post}, coords=coords, dims=dims)
    aligned = align_labels(idata, (BETA, factors))
    for d in range(2):
        np.testing.assert_allclose(aligned.posterior["coef_full"].values[0, d], BETA)
        np.testing.assert_allclose(aligned.posterior["coef"].values[0, d], BETA[:, 1:])
        np.testing.assert_allclose(aligned.posterior["A_d"].values[0, d], factors[3].T)
    assert aligned.sample_stats["class_permutation"].values[0].tolist() == [[0, 1], [1, 0]]
    np.testing.assert_array_equal(aligned.unaligned_posterior["coef"].values, full[..., 1:])
    # the swapped draw has the truth's likelihood: relabeling changes no likelihood
    design = np.c_[np.ones(len(z)), z]
    raw = [factors[n][:, perm] for n in range(4)]
    np.testing.assert_allclose(
        brute_force_row_logliks(data.codes[1:40], design[1:40], swapped, raw),
        brute_force_row_logliks(data.codes[1:40], design[1:40], BETA, factors),
        rtol=1e-12,
    )


@pytest.mark.slow
def test_nuts_recovers_point_estimate_and_truth(sim):
    data, z, factors = sim
    model = latent_class_regression_model(data, z, 2)
    est = LatentClassRegression(2, random_state=0).fit(data, covariates=z)
    idata = sample(
        model, init=est, draws=150, tune=150, chains=2, random_seed=1, progressbar=False
    )
    coef = idata.posterior["coef_full"]
    mean = coef.mean(("chain", "draw")).values
    sd = coef.std(("chain", "draw")).values
    free = (slice(None), slice(1, None))
    # the point estimate's labels: class 0 of the estimate is class 0 of the posterior
    z_est = np.abs(mean[free] - est.coef_[free]) / sd[free]
    assert z_est.max() < 2.0
    # the truth, up to the estimate's labelling of the classes
    from bayespmf.metrics import match_components
    from bayespmf.pmf import stack_factors

    perm = match_components(stack_factors(factors), stack_factors(est.factors_))
    truth = BETA[:, perm] - BETA[:, perm[:1]]
    assert (np.abs(mean[free] - truth[free]) / sd[free]).max() < 3.0
    # log-likelihood is per kept row and label-invariant
    ll = idata.log_likelihood["x"]
    assert ll.shape == (2, 150, data.n_samples - 1)
    assert set(idata.posterior["coef"].dims) == {"chain", "draw", "covariate", "free_class"}
    with model:
        pp = pm.sample_posterior_predictive(
            idata, random_seed=0, progressbar=False, var_names=["x"]
        )
    assert pp.posterior_predictive["x"].shape == (2, 150, data.n_samples - 1, 4)


@pytest.mark.slow
def test_sampling_reproducible_and_default_init(sim):
    data, z, _ = sim
    model = latent_class_regression_model(data[:120], z[:120], 2)
    kwargs = dict(draws=20, tune=20, chains=1, random_seed=5, progressbar=False)
    a = sample(model, log_likelihood=False, **kwargs)
    b = sample(model, log_likelihood=False, **kwargs)
    np.testing.assert_array_equal(a.posterior["coef"].values, b.posterior["coef"].values)


def test_latent_class_model_with_covariates_is_the_regression_model():
    import pandas as pd

    from bayespmf.data import CategoricalData
    from bayespmf.models import latent_class_model

    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2, size=(50, 3))
    z = pd.DataFrame({"age": rng.normal(size=50)})
    model = latent_class_model(codes, 2, covariates=z)
    assert "coef" in model.named_vars and "weights" not in model.named_vars
    assert list(model.coords["covariate"]) == ["(intercept)", "age"]
    # a DataFrame of labels is read like CategoricalData.from_pandas
    df = pd.DataFrame({"a": ["x", "y", None, "y"], "b": ["u", "u", "v", None]})
    plain = latent_class_model(df, 2)
    same = latent_class_model(CategoricalData.from_pandas(df), 2)
    assert plain.coords == same.coords


def test_regression_class_proba_averages_bayes_rule_over_draws():
    import arviz as az

    from bayespmf.fit.covariates import LatentClassRegressionParams, predict_class_proba
    from bayespmf.models import regression_class_proba

    rng = np.random.default_rng(4)
    n_draws, rows = 6, rng.integers(-1, 3, size=(7, 2))
    z = rng.normal(size=(7, 1))
    coef = np.concatenate([np.zeros((n_draws, 2, 1)), rng.normal(size=(n_draws, 2, 2))], 2)
    a0 = rng.dirichlet(np.ones(3), size=(n_draws, 3))  # (draw, class, category)
    a1 = rng.dirichlet(np.ones(3), size=(n_draws, 3))
    idata = az.from_dict(
        {"posterior": {"coef_full": coef[None], "A_u": a0[None], "A_v": a1[None]}}
    )
    from bayespmf.data import CategoricalData

    data = CategoricalData.from_codes(rows, [3, 3], names=["u", "v"])
    got = regression_class_proba(idata, data, z)
    # independently: the point-estimate Bayes rule at every draw, averaged
    each = [
        predict_class_proba(
            rows, z, LatentClassRegressionParams(coef[k], [a0[k].T, a1[k].T])
        )
        for k in range(n_draws)
    ]
    np.testing.assert_allclose(got["mean"].values, np.mean(each, axis=0), rtol=1e-10)
    np.testing.assert_allclose(got["sd"].values, np.std(each, axis=0), atol=1e-12)
    with pytest.raises(ValueError, match="'covariates'"):
        regression_class_proba(idata, data, np.c_[z, z])
