"""Bootstrap likelihood-ratio test of F vs F + 1 classes (bayespmf.fit.bootstrap_lrt)."""

import numpy as np
import pytest

from bayespmf.fit import bootstrap_lrt, fit_latent_class
from bayespmf.fit.bootstrap_lrt import _sequential_stop, simulate_like, split_starts
from bayespmf.pmf import LatentClassParams, log_likelihood_rows

#: Two well-separated classes on 6 binary items.
TWO = LatentClassParams(
    np.array([0.5, 0.5]),
    [np.array([[0.9, 0.15], [0.1, 0.85]])] * 3 + [np.array([[0.2, 0.8], [0.8, 0.2]])] * 3,
)


def _data(params, n, seed, observed=0.9):
    rng = np.random.default_rng(seed)
    mask = rng.random((n, len(params.factors))) < observed
    mask[:, 0] = True
    return simulate_like(params, mask, rng)


def test_simulate_like_keeps_mask_and_matches_the_pmf():
    rng = np.random.default_rng(0)
    mask = rng.random((40000, 6)) < 0.7
    codes = simulate_like(TWO, mask, 1)
    np.testing.assert_array_equal(codes >= 0, mask)
    # one-way frequencies against sum_f lambda_f A_n(:, f) (binomial SE ~ 0.003)
    for n, a in enumerate(TWO.factors):
        obs = codes[mask[:, n], n]
        np.testing.assert_allclose(
            np.bincount(obs, minlength=2) / obs.size, a @ TWO.weights, atol=0.015
        )
    # pairwise: two items of different blocks, against the model's joint table
    both = mask[:, 0] & mask[:, 3]
    table = np.histogram2d(codes[both, 0], codes[both, 3], bins=2)[0] / both.sum()
    want = (TWO.factors[0] * TWO.weights) @ TWO.factors[3].T
    np.testing.assert_allclose(table, want, atol=0.015)


def test_split_starts_keep_the_likelihood_of_the_f_class_model():
    codes = _data(TWO, 500, 2)
    starts = split_starts(TWO, random_state=0)
    ll = log_likelihood_rows(codes, *TWO).sum()
    assert len(starts) == 2
    for s in starts:
        assert s.weights.size == 3 and np.isclose(s.weights.sum(), 1.0)
        assert all(np.allclose(a.sum(axis=0), 1.0) for a in s.factors)
        # merged back, the two halves average to about the parent class
        assert abs(log_likelihood_rows(codes, *s).sum() - ll) < 0.1 * abs(ll)


def test_p_value_large_when_data_have_f_classes():
    codes = _data(TWO, 400, 3)
    res = bootstrap_lrt(
        codes, 2, n_bootstrap=19, n_init=20, n_init_bootstrap=20, random_state=0
    )
    assert res.p_value > 0.05
    assert res.stopped == "above" and res.n_bootstrap < 19
    assert res.lr_draws.shape == (res.n_bootstrap,) and res.lr >= 0


def test_p_value_small_when_data_have_f_plus_1_separated_classes():
    codes = _data(TWO, 400, 4)
    res = bootstrap_lrt(
        codes,
        1,
        n_bootstrap=19,
        n_init=20,
        n_init_bootstrap=10,
        random_state=0,
        sequential=False,
    )
    # independent check of the statistic: the two data fits, refit here
    ll1 = fit_latent_class(codes, 1, random_state=1).loglik
    ll2 = fit_latent_class(codes, 2, n_init=20, random_state=1).loglik
    assert res.lr == pytest.approx(2 * (ll2 - ll1), abs=1e-3)
    assert res.n_bootstrap == 19 and res.stopped == "max"
    assert res.p_value == pytest.approx(1 / 20)
    assert res.lr > 5 * res.lr_draws.max()
    assert res.n_clipped == 0


def test_sequential_rule():
    # 5 exceedances: (1 + 5) / 100 > 0.05 whatever comes next
    assert _sequential_stop(5, 12, 99, 0.05, 0.05) == "above"
    assert _sequential_stop(4, 12, 99, 0.05, 0.05) == "above"  # binomial sf 0.0022
    assert _sequential_stop(1, 12, 99, 0.05, 0.05) is None
    # no exceedance: 0.95**59 = 0.048 <= 0.05, 0.95**58 = 0.051
    assert _sequential_stop(0, 59, 99, 0.05, 0.05) == "below"
    assert _sequential_stop(0, 58, 99, 0.05, 0.05) is None
    assert _sequential_stop(0, 99, 99, 0.05, 0.05) is None  # at the end: not a stop


def test_random_state_determinism_and_frequency_weights():
    codes = _data(TWO, 200, 5)
    kw = {"n_bootstrap": 4, "n_init": 10, "n_init_bootstrap": 2, "sequential": False}
    a = bootstrap_lrt(codes, 1, random_state=3, **kw)
    b = bootstrap_lrt(codes, 1, random_state=3, **kw)
    c = bootstrap_lrt(codes, 1, random_state=4, **kw)
    np.testing.assert_array_equal(a.lr_draws, b.lr_draws)
    assert a.p_value == b.p_value
    assert not np.allclose(a.lr_draws, c.lr_draws)
    # integer weights are frequencies: the same statistic as the repeated rows
    w = np.random.default_rng(0).integers(1, 3, size=200)
    wa = bootstrap_lrt(codes, 1, sample_weight=w, random_state=3, **kw)
    wb = bootstrap_lrt(np.repeat(codes, w, axis=0), 1, random_state=3, **kw)
    assert wa.lr == pytest.approx(wb.lr, abs=1e-3)


def test_caller_arrays_not_mutated():
    codes = _data(TWO, 150, 6)
    w = np.full(150, 1.5)
    before = codes.copy(), w.copy()
    bootstrap_lrt(
        codes,
        1,
        n_bootstrap=2,
        n_init=5,
        n_init_bootstrap=1,
        sample_weight=w,
        random_state=0,
    )
    np.testing.assert_array_equal(codes, before[0])
    np.testing.assert_array_equal(w, before[1])


def test_bad_arguments():
    codes = _data(TWO, 50, 7)
    with pytest.raises(ValueError, match="'n_bootstrap'"):
        bootstrap_lrt(codes, 1, n_bootstrap=0)
    with pytest.raises(ValueError, match="'n_init_bootstrap'"):
        bootstrap_lrt(codes, 1, n_init_bootstrap=-1)
    with pytest.raises(ValueError, match="'n_components'"):
        bootstrap_lrt(codes, 0)
    with pytest.raises(ValueError, match="'n_components'"):
        bootstrap_lrt(codes[:, :3], 2)  # 3 binary items identify at most 2 classes
    with pytest.raises(ValueError, match="'alpha'"):
        bootstrap_lrt(codes, 1, alpha=1.5)
    with pytest.raises(ValueError, match="'sequential_risk'"):
        bootstrap_lrt(codes, 1, sequential_risk=0.0)
    with pytest.raises(ValueError, match="sample_weight"):
        bootstrap_lrt(codes, 1, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="'data'"):
        bootstrap_lrt(np.full((5, 3), 0.5), 1)
