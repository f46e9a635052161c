import numpy as np
import pytest

from bayespmf import DataValidationError
from bayespmf.datasets._simulate import make_latent_class
from bayespmf.fit import ad_em, fit_em
from bayespmf.kernels.ad_em import ad_sweep
from bayespmf.kernels.em import init_random
from bayespmf.metrics import factor_mse
from bayespmf.pmf import log_likelihood_rows


@pytest.fixture(scope="module")
def case():
    return make_latent_class(
        4000, 4, n_components=2, n_variables=5, observed_prob=0.7, random_state=0
    )


def test_ad_sweep_is_monotone_and_matches_reference_loglik(case):
    data, _ = case
    start = init_random(data.n_categories, 2, random_state=1)
    w, a = start.weights, start.factors
    prev = log_likelihood_rows(data, w, a).sum()
    for _ in range(5):
        w, a, ll = ad_sweep(data.codes, data.n_categories, w, a, inner_iter=3)
        assert np.isclose(ll, log_likelihood_rows(data, w, a).sum(), rtol=1e-10)
        assert ll >= prev - 1e-8
        prev = ll


def test_direction_reaches_block_optimum(case):
    # many inner passes on one direction: its gradient is constant on the support
    data, _ = case
    start = init_random(data.n_categories, 2, random_state=2)
    w1, a1, _ = ad_sweep(
        data.codes, data.n_categories, start.weights, start.factors, inner_iter=400
    )
    w2, _, _ = ad_sweep(data.codes, data.n_categories, w1, a1, inner_iter=1)
    assert np.allclose(w1, w2, atol=1e-3)


def test_ad_em_recovers_truth_and_is_deterministic(case):
    data, truth = case
    before = data.codes.copy()
    p1, info = ad_em(data, 2, ad_iter=5, max_iter=2000, tol=1e-10, random_state=3)
    p2, _ = ad_em(data, 2, ad_iter=5, max_iter=2000, tol=1e-10, random_state=3)
    assert np.array_equal(data.codes, before)
    assert np.array_equal(p1.weights, p2.weights)
    assert info["converged"]
    assert np.all(np.diff(info["ad_loglik"]) >= -1e-8)
    # the maximum-likelihood estimate: EM started at the truth reaches the same point
    ref, _ = fit_em(data, 2, init=(truth.weights, truth.factors), max_iter=2000, tol=1e-10)
    assert factor_mse(p1.weights, p1.factors, ref.weights, ref.factors) < 1e-8
    assert factor_mse(p1.weights, p1.factors, truth.weights, truth.factors) < 5e-3


def test_errors(case):
    data, _ = case
    with pytest.raises(ValueError, match="'n_components'"):
        ad_em(data, 0)
    with pytest.raises(ValueError, match="'ad_iter'"):
        ad_em(data, 2, ad_iter=-1)
    with pytest.raises(ValueError, match="'inner_iter'"):
        ad_em(data, 2, inner_iter=0)
    with pytest.raises(DataValidationError, match="2-D"):
        ad_em([0, 1, 0], 2)
