"""Metrics against hand-checked cases and brute-force enumeration."""

import itertools

import numpy as np
import pytest

from bayespmf import DataValidationError
from bayespmf.metrics import (
    accuracy,
    factor_mse,
    joint_pmf_relative_error,
    mae,
    match_components,
    min_matching_distance,
    rmse,
)
from bayespmf.pmf import LatentClassParams


def _sq_cost(est, true, perm):
    return float(((est[:, perm] - true) ** 2).sum())


# --------------------------------------------------------------------------------------
# match_components


def test_match_recovers_a_known_permutation(rng):
    true = rng.random((6, 4))
    shuffle = np.array([2, 0, 3, 1])
    est = true[:, shuffle] + 1e-3 * rng.standard_normal((6, 4))
    perm = match_components(est, true)
    assert perm.dtype == np.int64
    # est[:, perm] == true: perm is the inverse of the shuffle
    np.testing.assert_array_equal(shuffle[perm], np.arange(4))
    np.testing.assert_allclose(est[:, perm], true, atol=1e-2)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_match_is_the_brute_force_optimum(rng, k):
    for _ in range(10):
        est, true = rng.random((7, k)), rng.random((7, k))
        perm = match_components(est, true)
        assert sorted(perm.tolist()) == list(range(k))
        best = min(_sq_cost(est, true, list(p)) for p in itertools.permutations(range(k)))
        assert _sq_cost(est, true, perm) == pytest.approx(best)
        # the same assignment maximizes the total inner product (the CNMF perm2match)
        best_inner = max(
            float((est[:, list(p)] * true).sum()) for p in itertools.permutations(range(k))
        )
        assert float((est[:, perm] * true).sum()) == pytest.approx(best_inner)


def test_match_accepts_lists_of_factors(rng):
    a = [rng.random((3, 4)), rng.random((5, 4))]
    b = [x[:, [1, 3, 0, 2]] for x in a]
    np.testing.assert_array_equal(
        match_components(a, b), match_components(np.vstack(a), np.vstack(b))
    )
    np.testing.assert_array_equal(match_components(a, b), [1, 3, 0, 2])


@pytest.mark.parametrize(
    ("est", "true", "match"),
    [
        (np.ones((3, 2)), np.ones((3, 3)), r"'est' and 'true' must have the same shape"),
        (np.ones(3), np.ones(3), "'est' must be a 2-D array"),
        (np.ones((3, 2)), np.full((3, 2), np.nan), "'true' contains NaN"),
        ([np.ones((2, 2)), np.ones((2, 3))], np.ones((4, 2)), "same number of columns"),
        (np.ones((0, 2)), np.ones((0, 2)), "'est' is empty"),
        ([["a", "b"]], [[1, 2]], "'est' must be an array of real numbers"),
    ],
)
def test_match_errors(est, true, match):
    with pytest.raises(DataValidationError, match=match):
        match_components(est, true)


# --------------------------------------------------------------------------------------
# factor_mse


def test_factor_mse_hand_checked():
    w_true = np.array([0.3, 0.7])
    a_true = [np.array([[0.9, 0.2], [0.1, 0.8]]), np.array([[0.5, 0.0], [0.5, 1.0]])]
    w = np.array([0.5, 0.5])
    a = [np.array([[1.0, 0.2], [0.0, 0.8]]), np.array([[0.5, 0.0], [0.5, 1.0]])]
    # ||w - w*||^2 = 0.08; variable 0: 0.02 / F = 0.01; variable 1: 0; mean over N = 2
    assert factor_mse(w, a, w_true, a_true) == pytest.approx(0.08 + (0.01 + 0.0) / 2)


def test_factor_mse_invariant_to_relabelling(rng):
    w = rng.dirichlet(np.ones(4))
    a = [rng.dirichlet(np.ones(5), size=4).T for _ in range(3)]
    perm = [3, 1, 0, 2]
    assert factor_mse(w[perm], [x[:, perm] for x in a], w, a) == 0.0
    w_e = rng.dirichlet(np.ones(4))
    a_e = [rng.dirichlet(np.ones(5), size=4).T for _ in range(3)]
    assert factor_mse(w_e[perm], [x[:, perm] for x in a_e], w, a) == pytest.approx(
        factor_mse(w_e, a_e, w, a)
    )


def test_factor_mse_against_its_formula_with_brute_force_permutation(rng):
    k, n_var = 4, 3
    w, w_e = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k))
    a = [rng.dirichlet(np.ones(6), size=k).T for _ in range(n_var)]
    a_e = [rng.dirichlet(np.ones(6), size=k).T for _ in range(n_var)]
    stacked_e, stacked = np.vstack(a_e), np.vstack(a)
    best = min(
        itertools.permutations(range(k)),
        key=lambda p: _sq_cost(stacked_e, stacked, list(p)),
    )
    p = list(best)
    expected = np.sum((w_e[p] - w) ** 2) + np.mean(
        [np.linalg.norm(x[:, p] - y, "fro") ** 2 / k for x, y in zip(a_e, a, strict=True)]
    )
    assert factor_mse(w_e, a_e, w, a) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            ([0.5, 0.5], [np.eye(2)], [0.5, 0.5], [np.eye(2), np.eye(2)]),
            "one matrix per variable each; got 1 and 2",
        ),
        (
            (
                [0.5, 0.5],
                [np.eye(2), np.ones((3, 2)) / 3],
                [0.5, 0.5],
                [np.eye(2), np.eye(2)],
            ),
            r"'factors\[1\]' and 'factors_true\[1\]' must have the same shape",
        ),
        (
            ([1.0], [np.eye(2)], [0.5, 0.5], [np.eye(2)]),
            "'weights' and 'weights_true' must have the same shape",
        ),
        (
            ([1 / 3] * 3, [np.eye(2)], [1 / 3] * 3, [np.eye(2)]),
            "3 entries but the factors have 2",
        ),
        (
            ([0.5, 0.5], np.eye(2), [0.5, 0.5], [np.eye(2)]),
            "'factors' must be a non-empty list",
        ),
        (
            ([0.5, 0.5], [np.eye(2)], [0.5, 0.5], []),
            "'factors_true' must be a non-empty list",
        ),
    ],
)
def test_factor_mse_errors(args, match):
    with pytest.raises(DataValidationError, match=match):
        factor_mse(*args)


# --------------------------------------------------------------------------------------
# joint_pmf_relative_error


def test_joint_pmf_relative_error_hand_checked():
    a0, a1 = np.array([0.9, 0.1]), np.array([0.2, 0.8])
    factors = [np.column_stack([a0, a1])] * 2
    p_true = 0.5 * np.outer(a0, a0) + 0.5 * np.outer(a1, a1)
    p_est = 0.4 * np.outer(a0, a0) + 0.6 * np.outer(a1, a1)
    expected = np.sqrt(((p_est - p_true) ** 2).sum() / (p_true**2).sum())
    got = joint_pmf_relative_error(
        ([0.4, 0.6], factors), LatentClassParams([0.5, 0.5], factors)
    )
    assert got == pytest.approx(expected)
    assert got == pytest.approx(0.17743580407270992)
    # Ibrahim & Fu's getMSE.m divides by the estimate's norm
    by_estimate = joint_pmf_relative_error(
        ([0.4, 0.6], factors), ([0.5, 0.5], factors), relative_to="estimate"
    )
    assert by_estimate == pytest.approx(
        np.sqrt(((p_est - p_true) ** 2).sum() / (p_est**2).sum())
    )
    with pytest.raises(DataValidationError, match="'relative_to' must be 'truth'"):
        joint_pmf_relative_error(
            ([0.4, 0.6], factors), ([0.5, 0.5], factors), relative_to="paper"
        )


def test_joint_pmf_relative_error_by_enumeration(rng):
    n_cat, k = [2, 3, 2], 3
    params = [
        (rng.dirichlet(np.ones(k)), [rng.dirichlet(np.ones(i), size=k).T for i in n_cat])
        for _ in range(2)
    ]

    def prob(w, fs, idx):
        return sum(
            w[f] * np.prod([fs[n][i, f] for n, i in enumerate(idx)]) for f in range(k)
        )

    cells = list(itertools.product(*[range(i) for i in n_cat]))
    diff = np.array([prob(*params[0], c) - prob(*params[1], c) for c in cells])
    ref = np.array([prob(*params[1], c) for c in cells])
    assert joint_pmf_relative_error(params[0], params[1]) == pytest.approx(
        np.linalg.norm(diff) / np.linalg.norm(ref)
    )
    # the labels of the classes do not matter, and the ranks may differ
    w, fs = params[0]
    perm = [2, 0, 1]
    assert joint_pmf_relative_error(
        (w[perm], [a[:, perm] for a in fs]), params[0]
    ) == pytest.approx(0.0, abs=1e-12)
    assert (
        joint_pmf_relative_error(
            ([1.0], [a[:, :1] / a[:, :1].sum() for a in fs]), params[1]
        )
        > 0
    )


@pytest.mark.parametrize(
    ("est", "true", "match"),
    [
        (
            ([1.0], [np.ones((2, 1)) / 2]),
            ([1.0], [np.ones((3, 1)) / 3]),
            r"same variables; their alphabet sizes are \[2\] and \[3\]",
        ),
        ("abc", ([1.0], [np.ones((2, 1)) / 2]), "'params_est' must be a LatentClassParams"),
        (([1.0], [np.ones((2, 1)) / 2]), ([1.0], np.ones((2, 1))), "'params_true.factors'"),
        (
            ([0.5, 0.5], [np.ones((2, 1)) / 2]),
            ([1.0], [np.ones((2, 1)) / 2]),
            r"'params_est.factors' \[0\] do not have 2 columns",
        ),
    ],
)
def test_joint_pmf_relative_error_errors(est, true, match):
    with pytest.raises(DataValidationError, match=match):
        joint_pmf_relative_error(est, true)


def test_joint_pmf_relative_error_refuses_huge_tensors():
    big = ([1.0], [np.full((100, 1), 0.01)] * 5)
    with pytest.raises(DataValidationError, match="Use conditional_pmf"):
        joint_pmf_relative_error(big, big)


# --------------------------------------------------------------------------------------
# min_matching_distance


def _brute_force_hausdorff(a, b):
    d_ab = max(min(np.linalg.norm(x - y) for y in b) for x in a)
    d_ba = max(min(np.linalg.norm(x - y) for x in a) for y in b)
    return max(d_ab, d_ba)


def test_min_matching_distance_hand_checked():
    v = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert min_matching_distance(v[[1, 2, 0]], v) == 0.0
    assert min_matching_distance(v + np.array([0.3, 0.4]), v) == pytest.approx(0.5)
    # an extra far estimate is seen by the est -> true direction only
    est = np.vstack([v, [[3.0, 4.0]]])
    assert min_matching_distance(est, v) == pytest.approx(
        np.linalg.norm([3.0, 3.0])
    )  # to (0, 1)
    # two estimates collapsed on one vertex: true -> est direction sees the miss
    est = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    assert min_matching_distance(est, v) == pytest.approx(1.0)


def test_min_matching_distance_by_brute_force(rng):
    for k_est, k in [(3, 3), (2, 4), (5, 3)]:
        a, b = rng.standard_normal((k_est, 6)), rng.standard_normal((k, 6))
        assert min_matching_distance(a, b) == pytest.approx(_brute_force_hausdorff(a, b))
        assert min_matching_distance(a, b) == pytest.approx(min_matching_distance(b, a))


def test_min_matching_distance_lower_bounds_permutation_matching(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    best = min(
        max(np.linalg.norm(a[list(p)] - b, axis=1))
        for p in itertools.permutations(range(4))
    )
    assert min_matching_distance(a, b) <= best + 1e-12


@pytest.mark.parametrize(
    ("est", "true", "match"),
    [
        (
            np.ones((3, 2)),
            np.ones((3, 4)),
            r"same number of columns.*\(3, 2\) and \(3, 4\)",
        ),
        (np.ones(3), np.ones((3, 3)), "'V_est' must be a 2-D array"),
        (np.ones((3, 3)), np.full((3, 3), np.inf), "'V_true' contains NaN or infinite"),
    ],
)
def test_min_matching_distance_errors(est, true, match):
    with pytest.raises(DataValidationError, match=match):
        min_matching_distance(est, true)


# --------------------------------------------------------------------------------------
# accuracy, rmse, mae


def test_prediction_metrics_hand_checked():
    assert accuracy([0, 1, 2, 1], [0, 1, 1, 1]) == 0.75
    assert accuracy(["a", "b"], ["a", "b"]) == 1.0
    assert rmse([1, 2, 3, 4], [1, 2, 3, 6]) == 1.0
    assert mae([1, 2, 3, 4], [1, 2, 3, 6]) == 0.5
    y, y_hat = np.array([3.0, 4.0, 5.0]), np.array([2.5, 4.0, 6.0])
    assert rmse(y, y_hat) == pytest.approx(np.sqrt((0.25 + 0 + 1) / 3))
    assert mae(y, y_hat) == pytest.approx(0.5)
    y_before = y.copy()
    rmse(y, y_hat)
    np.testing.assert_array_equal(y, y_before)


@pytest.mark.parametrize("func", [accuracy, rmse, mae])
def test_prediction_metric_shape_mismatch(func):
    with pytest.raises(
        DataValidationError, match="'y_true' and 'y_pred' must have the same shape"
    ):
        func([1, 2, 3], [1, 2])


@pytest.mark.parametrize("func", [accuracy, rmse, mae])
def test_prediction_metric_empty(func):
    with pytest.raises(DataValidationError, match="'y_true' is empty"):
        func([], [])


@pytest.mark.parametrize("func", [rmse, mae])
def test_prediction_metric_nan(func):
    with pytest.raises(DataValidationError, match="'y_pred' contains NaN"):
        func([1.0, 2.0], [1.0, np.nan])
