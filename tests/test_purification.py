import warnings

import numpy as np
import pytest
from scipy.optimize import linprog
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from bayespmf import DataValidationError
from bayespmf.datasets._simulate_nmf import (
    make_purification_data,
    purification_population,
    sample_purification_points,
)
from bayespmf.estimators.purification import PurificationNMF
from bayespmf.fit.purification import (
    PurificationWarning,
    noise_allowance,
    purification,
)
from bayespmf.kernels.purification import (
    PurificationProblem,
    PurificationState,
    _min_inf_rows,
    balance_columns,
    decoding_spread,
    feature_distance,
    min_inf_pinv,
    pair_moment,
    purification_step,
    span_residual,
)


def _err(a, truth):
    return feature_distance(a, truth)


@pytest.fixture(scope="module")
def noiseless():
    return make_purification_data(
        20000, 16, 8, sparsity=2, init_quality=0.1, random_state=0
    )


def _row_lp_norms(a):
    """Minimum l1 norm of each row of a left inverse, one LP per row (reference)."""
    m, n = a.shape
    out = []
    for i in range(n):
        res = linprog(
            np.ones(2 * m),
            A_eq=np.hstack([a.T, -a.T]),
            b_eq=np.eye(n)[i],
            bounds=(0, None),
            method="highs",
        )
        out.append(res.fun)
    return np.array(out)


def test_min_inf_pinv_is_the_minimum_inf_norm_left_inverse(rng):
    for shift in (0.0, 1.0):  # non-negative, and mixed-sign features
        a = rng.uniform(size=(15, 5)) + shift * rng.standard_normal((15, 5))
        b = min_inf_pinv(a)
        assert np.allclose(b @ a, np.eye(5), atol=1e-12)
        assert np.allclose(np.abs(b).sum(axis=1), _row_lp_norms(a), rtol=1e-7)
        mp = np.linalg.pinv(a)
        assert np.abs(b).sum(axis=1).max() <= np.abs(mp).sum(axis=1).max() + 1e-9
        # the cached bases of a nearby matrix: reused when still optimal, never worse
        _, support = _min_inf_rows(a)
        near = a + 1e-5 * rng.standard_normal(a.shape)
        cached, _ = _min_inf_rows(near, support)
        assert np.allclose(cached @ near, np.eye(5), atol=1e-12)
        assert np.allclose(np.abs(cached).sum(axis=1), _row_lp_norms(near), rtol=1e-7)


def test_pair_moment_matches_enumeration(rng):
    y, x = rng.random((6, 3)), rng.random((6, 2))
    brute = sum(np.outer(y[i] - y[j], x[i] - x[j]) for i in range(6) for j in range(6))
    assert np.allclose(pair_moment(y, x), brute / 36)
    w = rng.random(6)
    p = w / w.sum()
    brute = sum(
        p[i] * p[j] * np.outer(y[i] - y[j], x[i] - x[j]) for i in range(6) for j in range(6)
    )
    assert np.allclose(pair_moment(y, x, weights=w), brute)
    # integer weights are repeated rows
    reps = np.array([1, 2, 1, 3, 1, 1])
    assert np.allclose(
        pair_moment(y, x, weights=reps),
        pair_moment(np.repeat(y, reps, axis=0), np.repeat(x, reps, axis=0)),
    )


def test_span_residual_and_feature_distance_by_hand():
    y = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]])
    # span of e1: row 1 keeps 9 of 25, row 2 keeps 0 of 4 -> outside 20 of 29
    assert span_residual(y, np.array([[1.0], [0.0], [0.0]])) == pytest.approx(20 / 29)
    assert span_residual(y, np.eye(3)) == pytest.approx(0.0, abs=1e-15)
    # columns scaled to unit l1: (0.5, 0.5) vs (0.25, 0.75) and (1, 0) vs (1, 0)
    a = np.array([[1.0, 2.0], [1.0, 0.0]])
    b = np.array([[1.0, 5.0], [3.0, 0.0]])
    assert feature_distance(a, b) == pytest.approx(0.5)
    assert feature_distance(3.0 * a, a) == pytest.approx(0.0)


def test_population_regime_falls_geometrically_at_least_at_theorem_rate():
    # Theorem 1, noiseless, (A2'): the exact expectation of line 4 (every binary
    # weight vector with its probability), eta = l/6 as in the analysis (Sec. 5.2)
    _, truth = make_purification_data(10, 20, 8, init_quality=0.1, random_state=3)
    rows, prob = purification_population(truth.components, sparsity=2.0)
    eta, alpha = 0.1 / 6, 0.1
    r = 1.0 / decoding_spread(rows, truth.init, alpha, weights=prob)
    problem = PurificationProblem(rows, eta, alpha, r, None, "min-inf", prob)
    state = PurificationState(truth.init, None)
    errs = [_err(truth.init, truth.components)]
    for _ in range(1000):
        state, _ = purification_step(state, problem)
        errs.append(_err(state.components, truth.components))
    errs = np.array(errs)
    assert errs[-1] < 1e-5 * errs[0]
    window = slice(100, 800)  # after the transient, above rounding
    rate = np.exp(np.polyfit(np.arange(1001)[window], np.log(errs[window]), 1)[0])
    assert rate < 1.0 - eta / 25  # the potential's rate in the proof sketch


def test_fixed_sample_floor_shrinks_with_rows():
    # the package's default regime (all S rows every iteration) stops at a floor of
    # order S^(-1/2): the sample covariance of x* is not diagonal
    errs = []
    for n_rows in (2000, 40000):
        Y, t = make_purification_data(n_rows, 16, 8, init_quality=0.1, random_state=1)
        a, _ = purification(
            Y,
            t.init,
            max_iter=30,
            eta=0.3,
            alpha=0.2,
            balance=False,
            pinv_method="moore-penrose",
            guard=False,
        )
        errs.append(_err(a, t.components))
    assert errs[1] < 0.5 * errs[0]


def test_noiseless_case_falls_without_warning(noiseless):
    Y, truth = noiseless
    start = _err(truth.init, truth.components)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, info = purification(
            Y,
            truth.init,
            max_iter=40,
            eta=0.3,
            alpha=0.2,
            pinv_method="moore-penrose",
            random_state=0,
        )
    assert _err(a, truth.components) < 0.5 * start
    assert info["change"][-1] < 1e-3 * info["change"][0]
    assert info["best_iter"] == 40 and not info["stopped"] and info["reasons"] == []


def _issue_case(noise, level, n_rows=2000, seed=0):
    # the setting of issue 35: m = 40, n = 10, s = 2, the (A3) warm start with l = 0.1
    return make_purification_data(
        n_rows, 40, 10, noise=noise, noise_level=level, init_quality=0.1, random_state=seed
    )


def test_diverging_case_stops_warns_and_keeps_the_best_iterate():
    Y, t = _issue_case("unbiased", 0.1)
    kw = dict(max_iter=30, eta=0.3, alpha=0.2, random_state=0)
    plain, _ = purification(Y, t.init, guard=False, **kw)
    assert _err(plain, t.components) > 10 * _err(t.init, t.components)  # it diverges
    before = (Y.copy(), t.init.copy())
    with pytest.warns(PurificationWarning, match=r"outside the span of the features rose"):
        a, info = purification(Y, t.init, **kw)
    assert info["stopped"] and info["best_iter"] < len(info["change"])
    # not worse than the start by the data criterion, recomputed here
    assert span_residual(Y, a) <= span_residual(Y, t.init)
    assert span_residual(Y, a) == pytest.approx(info["criterion"].min(), rel=1e-9)
    assert np.array_equal(Y, before[0]) and np.array_equal(t.init, before[1])


@pytest.mark.parametrize(
    "noise, level, n_rows, seeds",
    [
        ("none", 0.0, 2000, (0, 1, 2116)),  # the start is often better than the floor
        ("none", 0.0, 5000, (0, 1)),
        ("adversarial", 0.01, 2000, (0,)),  # 5x above Theorem 1's allowance
        ("unbiased", 0.1, 2000, (1,)),  # 18x above Theorem 2's
        ("adversarial", 0.001, 5000, (1,)),
        ("unbiased", 0.003, 5000, (3,)),
    ],
)
def test_never_worse_than_the_warm_start_without_a_warning(noise, level, n_rows, seeds):
    # the package's defaults (eta = 0.1, alpha = 0.1, T = 100, guard on) on fixed data
    for seed in seeds:
        Y, t = _issue_case(noise, level, n_rows, seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a, info = purification(Y, t.init, random_state=seed)
        warned = [w for w in caught if issubclass(w.category, PurificationWarning)]
        assert len(caught) == len(warned) <= 1
        worse = _err(a, t.components) > _err(t.init, t.components)
        assert warned or not worse, (seed, info)
        assert bool(warned) == bool(info["reasons"])


def test_sampling_check_and_noise_estimate():
    Y, t = _issue_case("none", 0.0, 2000, 0)
    with pytest.warns(PurificationWarning, match=r"sampling error.*two halves") as rec:
        a, info = purification(Y, t.init, max_iter=40, eta=0.3, alpha=0.2, random_state=0)
    assert "noise level" not in str(rec[0].message)
    assert _err(a, t.components) > _err(t.init, t.components)  # the warning was due
    assert 2 * info["sampling_error"] > info["distance_from_start"]
    assert info["noise_level"] < 1e-6
    # (N2) noise of +-C: the RMS outside the warm start's span is C
    Y, t = _issue_case("unbiased", 0.02, 2000, 0)
    with pytest.warns(PurificationWarning, match=r"noise level .* 0\.02"):
        _, info = purification(Y, t.init, max_iter=2, random_state=0)
    assert info["noise_level"] == pytest.approx(0.02, rel=0.02)
    assert info["noise_allowance"] == noise_allowance(t.init)


def test_noise_allowance_matches_row_lps(rng):
    a = rng.uniform(size=(12, 3))
    kappa = max(12, 3 * _row_lp_norms(a).max())
    first, second = noise_allowance(a)
    assert first == pytest.approx(1 / kappa, rel=1e-7)
    assert second == pytest.approx(np.sqrt(3) / kappa, rel=1e-7)


def test_guard_false_is_plain_algorithm_1():
    Y, t = make_purification_data(200, 9, 3, init_quality=0.1, random_state=4)
    a, info = purification(
        Y, t.init, max_iter=7, eta=0.2, alpha=0.15, balance=False, guard=False
    )

    # the loop written out: ReLU decoding, and line 4's expectation over all pairs
    def update_term(b):
        x = np.maximum(Y @ b.T - 0.15, 0.0)
        dy = Y[:, None, :] - Y[None, :, :]
        dx = x[:, None, :] - x[None, :, :]
        return np.einsum("ijk,ijl->kl", dy, dx) / 200**2

    ref = t.init.copy()
    b0 = min_inf_pinv(ref)
    r = 1.0 / np.mean(np.diag(b0 @ update_term(b0)))
    for _ in range(7):
        ref = 0.8 * ref + r * 0.2 * update_term(min_inf_pinv(ref))
    assert np.allclose(a, ref, rtol=1e-9, atol=1e-12)
    assert info["r"] == pytest.approx(r)
    assert set(info) == {"r", "scale", "change", "best_iter"}


def test_one_random_state_reproduces_everything():
    Y, t = _issue_case("unbiased", 0.005, 1000, 2)
    kw = dict(max_iter=10, batch_size=300, random_state=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PurificationWarning)
        a1, i1 = purification(Y, t.init, **kw)
        a2, i2 = purification(Y, t.init, **kw)
    assert np.array_equal(a1, a2)
    assert i1["sampling_error"] == i2["sampling_error"]


def test_generator_fresh_points_and_population():
    _, t = make_purification_data(
        50, 6, 3, noise="adversarial", noise_level=0.05, random_state=0
    )
    assert t.adversary.shape == (6, 3)
    y2, x2, nu2 = sample_purification_points(
        4000,
        t.components,
        noise="adversarial",
        noise_level=0.05,
        adversary=t.adversary,
        random_state=1,
    )
    assert np.allclose(nu2, 0.05 * np.sign(x2 @ t.adversary.T))
    assert np.allclose(y2, x2 @ t.components.T + nu2)
    rows, prob = purification_population(
        t.components, noise="adversarial", noise_level=0.05, adversary=t.adversary
    )
    assert rows.shape == (8, 6) and prob.sum() == pytest.approx(1.0)
    # probabilities of (A2'): x*_i = 1 w.p. s/n = 2/3, independently
    assert prob.max() == pytest.approx((2 / 3) ** 3)
    assert np.allclose(prob @ rows, y2.mean(axis=0), atol=0.02)
    with pytest.raises(DataValidationError, match="'adversary'"):
        sample_purification_points(5, t.components, noise="adversarial", noise_level=0.1)
    with pytest.raises(DataValidationError, match="unbiased"):
        purification_population(t.components, noise="unbiased", noise_level=0.1)
    with pytest.raises(DataValidationError, match="n_components <= 16"):
        purification_population(np.ones((20, 17)))


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
        guard=False,
        random_state=0,
    )
    m1 = PurificationNMF(8, **kw).fit(Y, init=truth.init)
    a, info = purification(Y, truth.init, **kw)
    assert np.array_equal(m1.components_, a)
    assert m1.r_ == info["r"] and m1.n_iter_ == 5 and m1.best_iter_ == 5
    assert m1.guard_ == {}
    assert np.array_equal(Y, before)
    x = m1.transform(Y[:10])
    assert x.shape == (10, 8) and np.all(x >= 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PurificationWarning)
        m2 = PurificationNMF(8, max_iter=3).fit(Y)  # SPA warm start
    assert m2.components_.shape == (16, 8)
    assert set(m2.guard_) >= {"criterion", "reasons", "sampling_error"}


def test_balancing_is_undone():
    Y, t = make_purification_data(3000, 10, 4, init_quality=0.05, random_state=2)
    d = balance_columns(Y, t.init, 0.1)
    assert d.min() == pytest.approx(1.0)
    a, info = purification(Y, t.init, max_iter=1, eta=1e-12, alpha=0.1, guard=False)
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
    with pytest.raises(ValueError, match="'guard' parameter of purification"):
        purification(Y, truth.init, guard="yes")
    with pytest.raises(DataValidationError, match="constant"):
        purification(Y, truth.init, alpha=100.0, balance=False)
    with pytest.raises(DataValidationError, match=r"'weights'.*one finite non-negative"):
        pair_moment(Y[:3], Y[:3], weights=[1.0, -1.0, 1.0])
    with pytest.raises(NotFittedError, match="not fitted"):  # scikit-learn's
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


def test_max_iter_runs_that_many_iterations(noiseless):
    Y, truth = noiseless
    Y = Y[:2000]
    kw = dict(eta=0.3, alpha=0.2, batch_size=500, guard=False, random_state=0)
    est = PurificationNMF(8, max_iter=3, **kw).fit(Y, init=truth.init)
    assert est.n_iter_ == 3
    a, _ = purification(Y, truth.init, max_iter=3, **kw)
    assert np.array_equal(a, est.components_)
    with warnings.catch_warnings():  # the default (max_iter=None) is T = 100, no warning
        warnings.simplefilter("error")
        assert PurificationNMF(8, **kw).fit(Y, init=truth.init).n_iter_ == 100
    with pytest.raises(TypeError, match="n_iter"):  # the pre-release name is gone
        purification(Y, truth.init, n_iter=3, **kw)
    with pytest.raises(ValueError, match="'max_iter' parameter of purification"):
        purification(Y, truth.init, max_iter=0)


def test_warning_points_at_the_caller(noiseless):
    Y, truth = _issue_case("unbiased", 0.1)
    with pytest.warns(PurificationWarning) as record:
        PurificationNMF(10, max_iter=5, random_state=0).fit(Y, init=truth.init)
    assert record[0].filename == __file__


def test_scikit_learn_conventions(noiseless):
    Y, truth = noiseless
    Y = Y[:2000]
    est = PurificationNMF(8, max_iter=2, guard=False, random_state=0)
    assert clone(est).get_params() == est.get_params()
    assert repr(est) == (
        "PurificationNMF(guard=False, max_iter=2, n_components=8, random_state=0)"
    )
    x = est.fit_transform(Y, np.zeros(len(Y)), init=truth.init)  # y ignored
    assert np.array_equal(x, est.transform(Y))
    with pytest.raises(ValueError, match=r"'y' is ignored.*pass init=\.\.\. by keyword"):
        est.fit(Y, truth.init)  # a warm start where y stands is refused, not ignored
    bad = Y[:3].copy()
    bad[1, 2] = np.nan
    with pytest.raises(DataValidationError, match="transform holds NaN or inf"):
        est.transform(bad)
