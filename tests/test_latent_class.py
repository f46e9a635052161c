import json
import warnings

import numpy as np
import pytest

from bayespmf import ConvergenceWarning, DataValidationError
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import METHODS, LatentClassPMF, NotFittedError
from bayespmf.fit import max_identifiable_rank
from bayespmf.metrics import factor_mse
from bayespmf.pmf import joint_pmf, log_likelihood_rows


@pytest.fixture(scope="module")
def sim():
    data, truth = make_latent_class(
        20000, [4, 5, 4, 6, 5], n_components=3, observed_prob=0.7, random_state=11
    )
    return data, truth


def test_get_set_params_pass_through():
    est = LatentClassPMF(3, method="em", max_iter=7, tol=1e-3, random_state=5)
    assert est.get_params() == {
        "n_components": 3,
        "method": "em",
        "n_init": None,
        "init": "auto",
        "max_iter": 7,
        "tol": 1e-3,
        "random_state": 5,
        "backend": "auto",
        "progressbar": False,
        "n_categories": None,
    }
    est.set_params(n_components=4)
    assert est.n_components == 4
    with pytest.raises(ValueError, match="Invalid parameter 'rnak'"):
        est.set_params(rnak=2)


@pytest.mark.filterwarnings("ignore::bayespmf.fit.LocalOptimumWarning")  # rank 3: overfit
def test_scikit_learn_conventions():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    data, _ = make_latent_class(900, [3, 3, 4, 3, 3], n_components=2, random_state=2)
    est = LatentClassPMF(2, n_init=8, random_state=0)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    search = GridSearchCV(est, {"n_components": [1, 2, 3]}, cv=3).fit(
        np.asarray(data.codes)
    )
    # held-out log-likelihood picks a rank above the independence model
    assert search.best_params_["n_components"] > 1
    with pytest.raises(ValueError, match=r"'y' is ignored.*one entry per row"):
        est.fit(data, [3] * data.n_variables)  # an alphabet, passed positionally
    # a target passed along (as a pipeline does) is ignored: the same fit as without
    y = np.asarray(data.codes)[:, 0]
    with_y = clone(est).set_params(n_components=2).fit(data, y)
    without = clone(est).set_params(n_components=2).fit(data)
    np.testing.assert_array_equal(with_y.weights_, without.weights_)


@pytest.fixture(scope="module")
def oracle(sim):
    """EM started at the truth: the maximum-likelihood estimate the methods should find."""
    from bayespmf.fit import fit_em

    data, truth = sim
    params, _ = fit_em(data, 3, init=truth.params, max_iter=5000, tol=1e-12)
    return log_likelihood_rows(data, params.weights, params.factors).sum()


@pytest.mark.parametrize("method", ["em", "squarem", "cnmf-spa-em", "cnmf-spa-squarem"])
def test_em_methods_recover_truth(sim, oracle, method):
    data, truth = sim
    # max_iter 10000: on this non-separable design CNMF-SPA's start (the split chosen by
    # the bootstrap) lies near a saddle that plain EM needs ~4750 iterations to leave;
    # the test asks that it gets there and says converged, not how fast.
    est = LatentClassPMF(3, method=method, random_state=0, max_iter=10000, tol=1e-10)
    est.fit(data)
    total = log_likelihood_rows(data, est.weights_, est.factors_).sum()
    # the maximum found from the truth, or a local maximum less than 1 nat below it:
    # such differences are far inside the likelihood's sampling noise at S=2e4 (the
    # likelihood surface of near-uniform random factors has several such optima).
    assert total >= oracle - 1.0
    # and the truth up to permutation (sampling error at S=2e4 is ~2e-3 here)
    mse = factor_mse(est.weights_, est.factors_, truth.weights, truth.factors)
    assert mse < 1e-2, mse
    assert est.converged_
    # the EM log-likelihood trace never decreases
    assert np.all(np.diff(est.loglik_trace_) >= -1e-8 * np.abs(est.loglik_trace_[1:]))
    # the score equals an independent computation of the likelihood
    assert est.score(data) == pytest.approx(total / data.n_samples, rel=1e-10)


@pytest.fixture(scope="module")
def sim_separable():
    # pairwise-marginal methods identify the factors only through their zeros or
    # near-zeros (Ibrahim & Fu, Sec. 3-4): test them on the paper's separable design.
    return make_latent_class(
        20000,
        6,
        n_components=3,
        n_variables=5,
        observed_prob=0.7,
        factor_prior="separable",
        epsilon=0.05,
        random_state=5,
    )


@pytest.mark.parametrize(
    "method", ["cnmf-spa", "cnmf-opt", "juror", "juror-b", "juror-c", "ctd", "ad-em"]
)
def test_marginal_methods_recover_truth(sim_separable, method):
    data, truth = sim_separable
    est = LatentClassPMF(3, method=method, random_state=0).fit(data)
    mse = factor_mse(est.weights_, est.factors_, truth.weights, truth.factors)
    assert mse < 0.05, mse
    assert np.allclose(est.weights_.sum(), 1) and all(
        np.allclose(a.sum(0), 1) for a in est.factors_
    )


def test_em_refinement_improves_spa(sim):
    data, _ = sim
    spa = LatentClassPMF(3, method="cnmf-spa", random_state=0).fit(data)
    spa_em = LatentClassPMF(3, method="cnmf-spa-em", random_state=0).fit(data)
    assert spa_em.score(data) >= spa.score(data)


def test_same_seed_same_result(sim):
    data, _ = sim
    a = LatentClassPMF(3, method="em", random_state=3, max_iter=30, tol=0)
    b = LatentClassPMF(3, method="em", random_state=3, max_iter=30, tol=0)
    with pytest.warns(ConvergenceWarning):
        a.fit(data)
    with pytest.warns(ConvergenceWarning):
        b.fit(data)
    np.testing.assert_array_equal(a.weights_, b.weights_)


def test_convergence_warning(sim):
    data, _ = sim
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        est = LatentClassPMF(3, method="em", max_iter=2, random_state=0).fit(data)
    assert not est.converged_ and est.n_iter_ == 2


def test_inputs_not_mutated(sim):
    data, _ = sim
    codes = np.array(data.codes)
    before = codes.copy()
    LatentClassPMF(2, method="cnmf-spa-em", random_state=0).fit(
        codes, n_categories=data.n_categories
    )
    np.testing.assert_array_equal(codes, before)


def test_prediction_api(sim):
    data, truth = sim
    est = LatentClassPMF.from_params(truth.weights, truth.factors)
    sub = data[:200]
    proba = est.predict_proba(sub, target=2)
    assert proba.shape == (200, 4)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(est.predict(sub, 2), proba.argmax(1))
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(est.expected_value(sub, 2, vals), proba @ vals)
    # brute force: conditional of the full joint PMF for one fully observed row
    row = sub.codes[0].copy()
    row[row < 0] = 0
    t = joint_pmf(truth.weights, truth.factors)
    idx = list(row)
    idx[2] = slice(None)
    want = t[tuple(idx)] / t[tuple(idx)].sum()
    got = est.predict_proba(row[None, :], 2)[0]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    with pytest.raises(DataValidationError, match="'values' must have one entry"):
        est.expected_value(sub, 2, [1, 2])


def test_named_target_and_errors(sim):
    data, _ = sim
    est = LatentClassPMF(3, method="cnmf-spa", random_state=0).fit(data)
    np.testing.assert_allclose(
        est.predict_proba(data[:5], "x1"), est.predict_proba(data[:5], 1)
    )
    with pytest.raises(DataValidationError, match="Unknown target 'zz'"):
        est.predict_proba(data[:5], "zz")
    with pytest.raises(ValueError, match="'target'"):
        est.predict_proba(data[:5], 9)
    with pytest.raises(DataValidationError, match="code 7"):
        est.score(np.full((2, 5), 7))


def test_joint_pmf_and_sample(sim):
    _, truth = sim
    est = LatentClassPMF.from_params(truth.weights, truth.factors)
    t = est.joint_pmf()
    assert t.shape == (4, 5, 4, 6, 5) and t.sum() == pytest.approx(1.0)
    s = est.sample(50000, random_state=0)
    emp = np.bincount(s.codes[:, 0], minlength=4) / 50000
    np.testing.assert_allclose(emp, truth.factors[0] @ truth.weights, atol=0.01)
    big = LatentClassPMF.from_params([1.0], [np.full((50, 1), 1 / 50)] * 6)
    with pytest.raises(DataValidationError, match="joint PMF would have"):
        big.joint_pmf()


def test_errors():
    data, _ = make_latent_class(300, 3, n_components=2, n_variables=4, random_state=0)
    with pytest.raises(
        ValueError, match=r"'n_components' parameter of LatentClassPMF must be an int >= 1"
    ):
        LatentClassPMF(0).fit(data)
    with pytest.raises(ValueError, match="Did you mean 'cnmf-spa'"):
        LatentClassPMF(2, method="cnmf_spa").fit(data)
    with pytest.raises(DataValidationError, match="cannot be identified"):
        LatentClassPMF(max_identifiable_rank(data.n_categories) + 1).fit(data)
    with pytest.raises(NotFittedError, match="not fitted"):
        LatentClassPMF(2).score(data)
    codes = np.array(data.codes)
    codes[:, 1] = -1
    with pytest.raises(DataValidationError, match="never observed"):
        LatentClassPMF(2).fit(codes, n_categories=3)
    with pytest.raises(ValueError, match="max_iter"):
        LatentClassPMF(2, max_iter=0).fit(data)


def test_every_listed_method_runs(sim_separable):
    data, _ = sim_separable
    small = data[:3000]
    for method in METHODS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = LatentClassPMF(3, method=method, random_state=0).fit(small)
        assert np.isfinite(est.score(small)), method


def test_save_load_roundtrip(tmp_path, sim):
    data, _ = sim
    est = LatentClassPMF(3, method="cnmf-spa-em", random_state=0).fit(data)
    p = est.save(tmp_path / "fit.npz")
    back = LatentClassPMF.load(p)
    np.testing.assert_array_equal(back.weights_, est.weights_)
    for a, b in zip(back.factors_, est.factors_, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back.loglik_trace_, est.loglik_trace_)
    assert back.get_params()["method"] == "cnmf-spa-em"
    assert back.predict_proba(data[:3], "x0").shape == (3, 4)
    # incompatible version
    with np.load(p) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(str(arrays["meta"]))
    meta["format_version"] = 99
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "old.npz", **arrays)
    with pytest.raises(DataValidationError, match="format version 99"):
        LatentClassPMF.load(tmp_path / "old.npz")
    # an object array (would need pickle) is refused, never unpickled
    np.savez(tmp_path / "evil.npz", meta=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="pickle"):
        LatentClassPMF.load(tmp_path / "evil.npz")
