"""Standard errors of latent-class estimates (bayespmf.fit.standard_errors)."""

import numpy as np
import pytest

from bayespmf._validation import DataValidationError
from bayespmf.fit import fit_latent_class, standard_errors
from bayespmf.fit.standard_errors import align_to, observed_information
from bayespmf.pmf import (
    LatentClassParams,
    log_likelihood_rows,
    split_factors,
    stack_factors,
)

#: A well-separated 2-class model on 6 binary items (hand-made, no zero entries).
TRUE = LatentClassParams(
    np.array([0.4, 0.6]),
    [np.array([[p, q], [1 - p, 1 - q]]) for p, q in [(0.85, 0.2)] * 3 + [(0.25, 0.8)] * 3],
)


def _draw(params, n, seed, observed=0.9):
    from bayespmf.fit.bootstrap_lrt import simulate_like

    rng = np.random.default_rng(seed)
    mask = rng.random((n, len(params.factors))) < observed
    mask[:, 0] = True  # no all-missing row
    return simulate_like(params, mask, rng)


def _fit(codes, start=TRUE):
    fit = fit_latent_class(codes, 2, init=[start], n_categories=[2] * 6, random_state=0)
    return align_to(fit.params, start)


def _flat(se):
    return np.concatenate([se.weights, *[f.ravel() for f in se.factors]])


@pytest.mark.parametrize("kind", ["hessian", "opg", "sandwich"])
def test_one_class_factor_se_is_binomial(kind, rng):
    codes = rng.integers(0, 3, size=(400, 2))
    codes[:, 1] = rng.integers(0, 2, size=400)
    n = codes.shape[0]
    # the MLE of a one-class model: the observed proportions
    p = [np.bincount(codes[:, j], minlength=k)[:, None] / n for j, k in [(0, 3), (1, 2)]]
    se = standard_errors(codes, (np.array([1.0]), p), information=kind)
    # the score cross-product also holds the sample covariance of the two variables'
    # scores (zero only in expectation): exact for one variable, close for two
    rtol = 1e-2 if kind == "opg" else 1e-10
    for a, s in zip(p, se.factors, strict=True):
        np.testing.assert_allclose(s, np.sqrt(a * (1 - a) / n), rtol=rtol)
    one = standard_errors(codes[:, :1], (np.array([1.0]), p[:1]), information=kind)
    np.testing.assert_allclose(one.factors[0], np.sqrt(p[0] * (1 - p[0]) / n), rtol=1e-10)
    assert se.weights.tolist() == [0.0]


def test_hessian_equals_finite_differences():
    codes = _draw(TRUE, 150, seed=1, observed=0.7)
    params = TRUE._replace(factors=[a[:, :] for a in TRUE.factors[:4]])
    codes = codes[:, :4]
    info, scores, counts, free, _, m = observed_information(codes, params)
    theta0 = np.concatenate([params.weights, stack_factors(params.factors).ravel()])

    def loglik(x):
        th = theta0 + m @ x
        return log_likelihood_rows(
            codes, th[:2], split_factors(th[2:].reshape(-1, 2), [2] * 4)
        ).sum()

    k, h = free.size, 1e-4
    eye = np.eye(k) * h
    hess = np.array(
        [
            [
                (
                    loglik(eye[i] + eye[j])
                    - loglik(eye[i] - eye[j])
                    - loglik(eye[j] - eye[i])
                    + loglik(-eye[i] - eye[j])
                )
                / (4 * h * h)
                for j in range(k)
            ]
            for i in range(k)
        ]
    )
    np.testing.assert_allclose(-hess, info, rtol=1e-4, atol=1e-3 * np.abs(info).max())
    grad = np.array([(loglik(eye[i]) - loglik(-eye[i])) / (2 * h) for i in range(k)])
    np.testing.assert_allclose(grad, scores.T @ counts, rtol=1e-5, atol=1e-5)


def test_information_se_matches_spread_over_replicates():
    """Coarse: SE at one large sample ~ SD of the estimates over repeated samples."""
    n, reps = 2000, 40
    est = np.array(
        [_flat(LatentClassParams(*_fit(_draw(TRUE, n, 100 + r)))) for r in range(reps)]
    )
    sd = est.std(axis=0, ddof=1)
    codes = _draw(TRUE, n, 99)
    se = _flat(standard_errors(codes, _fit(codes)))
    ratio = se / sd
    assert 0.8 < np.median(ratio) < 1.25
    assert ratio.min() > 0.55 and ratio.max() < 1.8


def test_information_se_matches_bootstrap():
    codes = _draw(TRUE, 1500, 7)
    params = _fit(codes)
    info = _flat(standard_errors(codes, params))
    boot = standard_errors(
        codes, params, method="bootstrap", n_bootstrap=40, random_state=0
    )
    ratio = info / _flat(boot)
    assert boot.draws.shape == (40, 2 + 2 * 12) and boot.n_bootstrap == 40
    assert 0.8 < np.median(ratio) < 1.25
    assert ratio.min() > 0.5 and ratio.max() < 2.0


def test_sample_weight_equals_repeated_rows():
    codes = _draw(TRUE, 300, 3)
    w = np.random.default_rng(0).integers(1, 4, size=300)
    params = _fit(np.repeat(codes, w, axis=0))
    for kind in ("hessian", "opg", "sandwich"):
        a = _flat(standard_errors(codes, params, sample_weight=w, information=kind))
        b = _flat(standard_errors(np.repeat(codes, w, axis=0), params, information=kind))
        np.testing.assert_allclose(a, b, rtol=1e-8)


def test_boundary_entry_is_nan_with_warning():
    a0 = np.array([[0.5, 0.2], [0.5, 0.0], [0.0, 0.8]])  # zeros: boundary estimates
    params = LatentClassParams(np.array([0.5, 0.5]), [a0, TRUE.factors[0], TRUE.factors[3]])
    rng = np.random.default_rng(0)
    codes = np.column_stack(
        [rng.choice([0, 2], 200), rng.integers(0, 2, 200), rng.integers(0, 2, 200)]
    )
    codes[:50, 0] = 1
    with pytest.warns(UserWarning, match="boundary"):
        se = standard_errors(codes, params)
    assert np.isnan(se.factors[0][1, 1]) and np.isnan(se.factors[0][2, 0])
    assert np.isfinite(se.factors[0][0, 0]) and se.boundary.size == 2


def test_singular_information_gives_nan_with_warning():
    # two identical classes: only their total weight is identified
    a = [np.array([[0.3, 0.3], [0.7, 0.7]])] * 3
    params = LatentClassParams(np.array([0.5, 0.5]), a)
    codes = np.random.default_rng(0).integers(0, 2, size=(200, 3))
    with pytest.warns(UserWarning, match="singular"):
        se = standard_errors(codes, params)
    assert np.isnan(_flat(se)).any() and se.problem.size > 0
    assert se.condition < 1e-10


def test_caller_arrays_not_mutated():
    codes = _draw(TRUE, 300, 5)
    w = np.ones(300)
    params = _fit(codes)
    before = (
        codes.copy(),
        w.copy(),
        params.weights.copy(),
        [f.copy() for f in params.factors],
    )
    standard_errors(codes, params, sample_weight=w)
    standard_errors(codes, params, method="bootstrap", n_bootstrap=3, random_state=0)
    np.testing.assert_array_equal(codes, before[0])
    np.testing.assert_array_equal(w, before[1])
    np.testing.assert_array_equal(params.weights, before[2])
    for f, g in zip(params.factors, before[3], strict=True):
        np.testing.assert_array_equal(f, g)


def test_bootstrap_random_state():
    codes = _draw(TRUE, 300, 6)
    params = _fit(codes)
    a = standard_errors(codes, params, method="bootstrap", n_bootstrap=5, random_state=1)
    b = standard_errors(codes, params, method="bootstrap", n_bootstrap=5, random_state=1)
    c = standard_errors(codes, params, method="bootstrap", n_bootstrap=5, random_state=2)
    np.testing.assert_array_equal(a.draws, b.draws)
    assert not np.allclose(a.draws, c.draws)


def test_align_to_undoes_a_permutation():
    perm = [1, 0]
    swapped = LatentClassParams(TRUE.weights[perm], [f[:, perm] for f in TRUE.factors])
    back = align_to(swapped, TRUE)
    np.testing.assert_array_equal(back.weights, TRUE.weights)


def test_bad_arguments():
    codes = _draw(TRUE, 100, 8)
    with pytest.raises(ValueError, match="'method'"):
        standard_errors(codes, TRUE, method="jackknife")
    with pytest.raises(ValueError, match="'information'"):
        standard_errors(codes, TRUE, information="fisher")
    with pytest.raises(ValueError, match="'n_bootstrap'"):
        standard_errors(codes, TRUE, method="bootstrap", n_bootstrap=1)
    with pytest.raises(ValueError, match="'n_init'"):
        standard_errors(codes, TRUE, method="bootstrap", n_init=0)
    with pytest.raises(ValueError, match="'params'"):
        standard_errors(codes, "not params")
    with pytest.raises(DataValidationError, match="'params'"):
        standard_errors(codes, (np.array([0.5, 0.6]), TRUE.factors))
    with pytest.raises(DataValidationError, match="sample_weight"):
        standard_errors(codes, TRUE, sample_weight=np.ones(3))
    zero = LatentClassParams(
        np.array([1.0]), [np.array([[1.0], [0.0]])] + [np.full((2, 1), 0.5)] * 5
    )
    with pytest.raises(DataValidationError, match="probability 0"):
        standard_errors(codes, zero)
