import warnings

import numpy as np
import pytest
from sklearn.base import clone

from bayespmf import DataValidationError
from bayespmf.datasets._simulate_nmf import make_purification_data
from bayespmf.estimators.purification import PurificationNMF
from bayespmf.fit.purification import purification
from bayespmf.kernels.purification import (
    balance_columns,
    min_inf_pinv,
    pair_moment,
)


def _err(a, truth):
    return np.abs(a / a.sum(axis=0) - truth).sum(axis=0).max()


@pytest.fixture(scope="module")
def noiseless():
    return make_purification_data(
        20000, 16, 8, sparsity=2, init_quality=0.1, random_state=0
    )


def test_min_inf_pinv_is_left_inverse_with_smaller_inf_norm(rng):
    a = rng.uniform(size=(12, 4))
    b = min_inf_pinv(a)
    assert np.allclose(b @ a, np.eye(4), atol=1e-8)
    mp = np.linalg.pinv(a)
    assert np.abs(b).sum(axis=1).max() <= np.abs(mp).sum(axis=1).max() + 1e-9


def test_pair_moment_matches_enumeration(rng):
    y, x = rng.random((6, 3)), rng.random((6, 2))
    brute = sum(np.outer(y[i] - y[j], x[i] - x[j]) for i in range(6) for j in range(6))
    assert np.allclose(pair_moment(y, x), brute / 36)


def test_noiseless_simplified_case_from_warm_start(noiseless):
    # Theorem 1, noiseless, (A2'), constant-quality warm start (l = 0.1)
    Y, truth = noiseless
    start = _err(truth.init, truth.components)
    a, info = purification(
        Y, truth.init, max_iter=40, eta=0.3, alpha=0.2, pinv_method="moore-penrose"
    )
    assert _err(a, truth.components) < 0.45 * start
    assert info["change"][-1] < 1e-3 * info["change"][0]


def test_more_samples_smaller_error():
    errs = []
    for n in (2000, 40000):
        Y, t = make_purification_data(n, 16, 8, init_quality=0.1, random_state=1)
        a, _ = purification(
            Y,
            t.init,
            max_iter=30,
            eta=0.3,
            alpha=0.2,
            balance=False,
            pinv_method="moore-penrose",
        )
        errs.append(_err(a, t.components))
    assert errs[1] < 0.5 * errs[0]


def test_estimator_passes_arguments_and_is_deterministic(noiseless):
    Y, truth = noiseless
    Y = Y[:3000]
    before = Y.copy()
    kw = dict(
        max_iter=5,
        eta=0.3,
        alpha=0.2,
        balance=False,
        batch_size=1000,
        pinv_method="moore-penrose",
        random_state=0,
    )
    m1 = PurificationNMF(8, **kw).fit(Y, init=truth.init)
    a, info = purification(Y, truth.init, **kw)
    assert np.array_equal(m1.components_, a)
    assert m1.r_ == info["r"] and m1.n_iter_ == 5
    assert np.array_equal(Y, before)
    x = m1.transform(Y[:10])
    assert x.shape == (10, 8) and np.all(x >= 0)
    m2 = PurificationNMF(8, max_iter=3).fit(Y)  # SPA warm start
    assert m2.components_.shape == (16, 8)


def test_balancing_is_undone():
    Y, t = make_purification_data(3000, 10, 4, init_quality=0.05, random_state=2)
    d = balance_columns(Y, t.init, 0.1)
    assert d.min() == pytest.approx(1.0)
    a, info = purification(Y, t.init, max_iter=1, eta=1e-12, alpha=0.1)
    assert np.allclose(a, t.init, atol=1e-9)
    assert np.array_equal(info["scale"], d)


def test_adversarial_and_unbiased_noise_are_bounded():
    for kind in ("adversarial", "unbiased"):
        Y, t = make_purification_data(
            500, 10, 4, noise=kind, noise_level=0.01, random_state=0
        )
        assert np.abs(t.noise).max() == pytest.approx(0.01)
        assert np.allclose(Y, t.weights @ t.components.T + t.noise)


def test_errors(noiseless):
    Y, truth = noiseless
    with pytest.raises(DataValidationError, match="linearly dependent"):
        min_inf_pinv(np.ones((4, 2)))
    with pytest.raises(DataValidationError, match="at least as many rows"):
        min_inf_pinv(np.ones((2, 3)))
    with pytest.raises(ValueError, match="'method'"):
        min_inf_pinv(np.eye(2), method="svd")
    with pytest.raises(DataValidationError, match="one row per feature"):
        purification(Y, truth.init[:5])
    with pytest.raises(ValueError, match="'eta'"):
        purification(Y, truth.init, eta=0.0)
    with pytest.raises(DataValidationError, match="constant"):
        purification(Y, truth.init, alpha=100.0, balance=False)
    with pytest.raises(DataValidationError, match="not fitted"):
        PurificationNMF(2).transform(Y)
    with pytest.raises(DataValidationError, match="must not exceed"):
        PurificationNMF(20).fit(Y[:10])
    with pytest.raises(DataValidationError, match="shape \\(n_features"):
        PurificationNMF(8).fit(Y, init=np.ones((3, 3)))
    with pytest.raises(DataValidationError, match="noise='none'"):
        make_purification_data(10, 4, 2, noise_level=0.1)
    with pytest.raises(DataValidationError, match="'weights'"):
        make_purification_data(10, 4, 2, weights="gauss")
    with pytest.raises(DataValidationError, match="n_features >= n_components"):
        make_purification_data(10, 2, 4)


def test_n_iter_is_a_deprecated_alias_of_max_iter(noiseless):
    Y, truth = noiseless
    Y = Y[:2000]
    kw = dict(eta=0.3, alpha=0.2, batch_size=500, random_state=0)
    new = PurificationNMF(8, max_iter=3, **kw).fit(Y, init=truth.init)
    with pytest.warns(
        FutureWarning,
        match=r"'n_iter' parameter of PurificationNMF.*"
        r"max_iter=3",
    ) as record:
        old = PurificationNMF(8, n_iter=3, **kw).fit(Y, init=truth.init)
    assert record[0].filename == __file__  # points at the caller's line
    assert old.n_iter_ == new.n_iter_ == 3
    assert np.array_equal(old.components_, new.components_)
    a, _ = purification(Y, truth.init, max_iter=3, **kw)
    with pytest.warns(FutureWarning, match=r"'n_iter' parameter of purification"):
        b, _ = purification(Y, truth.init, n_iter=3, **kw)
    assert np.array_equal(a, b) and np.array_equal(a, new.components_)
    with warnings.catch_warnings():  # the default (max_iter=None) is T = 100, no warning
        warnings.simplefilter("error")
        assert PurificationNMF(8, **kw).fit(Y, init=truth.init).n_iter_ == 100
    with pytest.raises(ValueError, match=r"both 'max_iter'.*Pass max_iter only"):
        PurificationNMF(8, max_iter=3, n_iter=4).fit(Y, init=truth.init)
    with pytest.raises(ValueError, match="'max_iter' parameter of purification"):
        purification(Y, truth.init, max_iter=0)


def test_scikit_learn_conventions(noiseless):
    Y, truth = noiseless
    Y = Y[:2000]
    est = PurificationNMF(8, max_iter=2, random_state=0)
    assert clone(est).get_params() == est.get_params()
    assert repr(est) == "PurificationNMF(max_iter=2, n_components=8, random_state=0)"
    x = est.fit_transform(Y, np.zeros(len(Y)), init=truth.init)  # y ignored
    assert np.array_equal(x, est.transform(Y))
    with pytest.raises(ValueError, match=r"'y' is ignored.*pass init=\.\.\. by keyword"):
        est.fit(Y, truth.init)  # a warm start where y stands is refused, not ignored
    bad = Y[:3].copy()
    bad[1, 2] = np.nan
    with pytest.raises(DataValidationError, match="transform holds NaN or inf"):
        est.transform(bad)
