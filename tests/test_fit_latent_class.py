import warnings

import numpy as np
import pytest

from bayespmf import LatentClassPMF
from bayespmf.datasets import make_latent_class
from bayespmf.fit import LocalOptimumWarning, fit_latent_class
from bayespmf.fit.multistart import optima_table, rows_start
from bayespmf.pmf import LatentClassParams, log_likelihood_rows


@pytest.fixture(scope="module")
def trap():
    """Binary items where RAND-EM from seed 5 ends in a local maximum 0.43 below."""
    data, _ = make_latent_class(300, [2] * 6, n_components=3, random_state=2)
    return data


def test_default_reaches_the_optimum_a_single_start_misses(trap):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = LatentClassPMF(3, random_state=0).fit(trap)
    single = LatentClassPMF(3, method="em", random_state=5, tol=1e-10, max_iter=20000)
    single.fit(trap)
    ll = log_likelihood_rows(trap.codes, auto.weights_, auto.factors_).sum()
    assert auto.loglik_ == pytest.approx(ll, rel=1e-12)  # reported = recomputed
    assert single.score_samples(trap).sum() < auto.loglik_ - 0.3
    assert auto.converged_
    # the optima table: best first, gaps from the best, every refined start counted
    table = auto.optima_
    assert table["loglik"].iloc[0] == pytest.approx(auto.loglik_)
    assert (np.diff(table["loglik"].to_numpy()) < 0).all()
    assert table["gap"].iloc[0] == 0.0
    assert table["n_starts"].sum() == len(auto.info_["refined"])
    assert auto.n_init_best_ == table["n_starts"].iloc[0] >= 2
    assert auto.info_["rounds"] == 1  # replicated in the first round: no more starts


def test_random_state_reproduces_and_changes_the_random_starts(trap):
    a = fit_latent_class(trap, 3, random_state=1, n_init=12)
    b = fit_latent_class(trap, 3, random_state=1, n_init=12)
    c = fit_latent_class(trap, 3, random_state=2, n_init=12)
    np.testing.assert_array_equal(a.info["explore_loglik"], b.info["explore_loglik"])
    np.testing.assert_array_equal(a.params.weights, b.params.weights)
    assert not np.allclose(a.info["explore_loglik"][1:], c.info["explore_loglik"][1:])


@pytest.fixture(scope="module")
def rough():
    """Few rows, many 5-level items, rank 4: nearly every start ends at its own optimum."""
    data, _ = make_latent_class(
        80, [5] * 10, n_components=4, observed_prob=0.5, random_state=2
    )
    return data


def test_default_adds_rounds_of_starts_while_the_best_is_not_replicated(rough, monkeypatch):
    from bayespmf.fit import defaults

    monkeypatch.setattr(defaults, "DEFAULT_N_INIT", 20)  # small rounds: a few seconds
    with pytest.warns(LocalOptimumWarning, match=r"n_init=20;"):  # explicit: one round
        one = fit_latent_class(rough, 4, random_state=1, n_init=20)
    assert one.info["rounds"] == 1
    with pytest.warns(LocalOptimumWarning, match="refined starts"):
        fit = fit_latent_class(rough, 4, random_state=1)
    assert 1 < fit.info["rounds"] <= defaults.MAX_ROUNDS
    kinds = fit.info["starts"]
    assert len(kinds) == 20 * fit.info["rounds"] and "perturbed" in kinds
    assert kinds[:20] == one.info["starts"]  # the first round is the one-round fit
    # later rounds only add starts: the best cannot fall below the first round's
    assert fit.loglik >= one.loglik - 1e-9
    assert len(fit.info["refined"]) == fit.optima["n_starts"].sum()
    ll = log_likelihood_rows(rough.codes, *fit.params).sum()
    assert fit.loglik == pytest.approx(ll, rel=1e-12)
    # reproducible, and the rounds' random parts change with random_state
    with pytest.warns(LocalOptimumWarning):
        again = fit_latent_class(rough, 4, random_state=1)
        other = fit_latent_class(rough, 4, random_state=2)
    np.testing.assert_array_equal(again.info["refined_loglik"], fit.info["refined_loglik"])
    assert not np.array_equal(other.info["explore_loglik"], fit.info["explore_loglik"])


def test_optima_table_groups_by_loglik_and_reports_a_ridge():
    p = LatentClassParams(np.array([0.5, 0.5]), [np.array([[0.9, 0.2], [0.1, 0.8]])])
    q = LatentClassParams(np.array([0.5, 0.5]), [np.array([[0.2, 0.9], [0.8, 0.1]])])
    r = LatentClassParams(np.array([0.7, 0.3]), [np.array([[0.6, 0.2], [0.4, 0.8]])])
    results = [(p, -10.0, True), (q, -10.005, True), (r, -12.0, False), (r, -10.0, True)]
    table, _, group = optima_table(results, ["a", "b", "c", "d"])
    assert table["n_starts"].tolist() == [3, 1]
    assert table["gap"].tolist() == pytest.approx([0.0, 2.0])
    assert group.tolist() == [0, 0, 1, 0]
    assert table["converged"].tolist() == [True, False]
    # p and q are one optimum up to label switching; r differs at the same loglik
    assert table["spread"].iloc[0] == pytest.approx(0.3)


def test_warning_when_the_best_is_not_replicated(trap):
    # two given starts that end in different optima: the best is reached once
    good = fit_latent_class(trap, 3, random_state=0, n_init=8).params
    bad = fit_latent_class(
        trap, 3, method="em", random_state=5, tol=1e-10, max_iter=20000
    ).params
    with pytest.warns(LocalOptimumWarning, match=r"reached by 1 of the 2 refined starts"):
        fit = fit_latent_class(trap, 3, init=[bad, good], random_state=0)
    assert fit.n_init_best == 1
    assert fit.optima["gap"].iloc[1] > 0.3


def test_rows_start_is_seeded_on_distinct_rows():
    data, _ = make_latent_class(200, [3, 3, 3], n_components=2, random_state=0)
    p = rows_start(data, 2, random_state=0)
    for a in p.factors:
        np.testing.assert_allclose(a.sum(axis=0), 1.0)
        assert (a > 0).all()
    # D^2 seeding never picks a row identical to the first seed while others exist
    assert any(not np.allclose(a[:, 0], a[:, 1]) for a in p.factors)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_init": 0}, "'n_init' parameter"),
        ({"method": "em", "n_init": 5}, "applies to method='auto' only"),
        ({"init": "kmeans"}, "'init' parameter"),
        ({"method": "squarm"}, "Did you mean 'squarem'"),
    ],
)
def test_bad_arguments(trap, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_latent_class(trap, 3, **kwargs)


def test_saved_fit_round_trips_the_optima(trap, tmp_path):
    m = LatentClassPMF(3, random_state=0, n_init=8).fit(trap)
    m2 = LatentClassPMF.load(m.save(tmp_path / "fit.npz"))
    assert m2.loglik_ == m.loglik_
    assert m2.n_init_best_ == m.n_init_best_
    assert m2.optima_.to_dict() == m.optima_.to_dict()
    for a, b in zip(m.optima_params_, m2.optima_params_, strict=True):
        np.testing.assert_array_equal(a.weights, b.weights)


def test_weighted_patterns_equal_expanded_rows(trap):
    codes = np.asarray(trap.codes)
    patterns, counts = np.unique(codes, axis=0, return_counts=True)
    assert patterns.shape[0] < codes.shape[0]  # binary items: many repeated rows
    kw = {"method": "squarem", "random_state": 3, "tol": 1e-12, "max_iter": 5000}
    expanded = fit_latent_class(codes, 3, n_categories=[2] * 6, **kw)
    weighted = fit_latent_class(
        patterns, 3, n_categories=[2] * 6, sample_weight=counts, **kw
    )
    assert weighted.loglik == pytest.approx(expanded.loglik, rel=1e-10)
    np.testing.assert_allclose(weighted.params.weights, expanded.params.weights, atol=1e-6)
    # survey weights: doubling every weight doubles the log-likelihood, same estimate
    doubled = fit_latent_class(
        patterns, 3, n_categories=[2] * 6, sample_weight=2 * counts, **kw
    )
    assert doubled.loglik == pytest.approx(2 * expanded.loglik, rel=1e-10)


@pytest.mark.parametrize(
    ("weight", "match"),
    [
        (-np.ones(300), "finite and >= 0"),
        (np.full(300, np.nan), "finite and >= 0"),
        (np.ones(299), "one entry per row"),
        (np.zeros(300), "sums to 0"),
    ],
)
def test_bad_sample_weight(trap, weight, match):
    with pytest.raises(ValueError, match=match):
        LatentClassPMF(3).fit(trap, sample_weight=weight)


def test_sample_weight_refused_by_unweighted_methods(trap):
    with pytest.raises(ValueError, match="'sample_weight' parameter of LatentClassPMF"):
        LatentClassPMF(3, method="juror").fit(trap, sample_weight=np.ones(300))


@pytest.mark.parametrize("method", ["cnmf-spa", "cnmf-opt"])
def test_weighted_marginal_methods_equal_expanded_rows(trap, method):
    from bayespmf.marginals import pairwise_marginals

    codes = np.asarray(trap.codes)
    patterns, counts = np.unique(codes, axis=0, return_counts=True)
    # weighted pairwise marginals: the same statistics as the expanded rows
    weighted = pairwise_marginals(patterns, [2] * 6, sample_weight=counts, chunk_size=7)
    expanded = pairwise_marginals(codes, [2] * 6)
    np.testing.assert_allclose(weighted.joint, expanded.joint, rtol=1e-12)
    np.testing.assert_allclose(weighted.counts, expanded.counts, rtol=1e-12)
    kw = {"n_categories": [2] * 6}
    a = LatentClassPMF(2, method=method, random_state=0).fit(codes, **kw)
    b = LatentClassPMF(2, method=method, random_state=0)
    b.fit(patterns, sample_weight=counts, **kw)
    np.testing.assert_allclose(a.weights_, b.weights_, atol=1e-8)
    for fa, fb in zip(a.factors_, b.factors_, strict=True):
        np.testing.assert_allclose(fa, fb, atol=1e-8)
