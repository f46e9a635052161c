"""The shipped returns panel, the paper's finance metrics and the choice of K.

Metrics are checked against independent computations: the volume against the
Cayley-Menger determinant, the distance to the simplex against a non-negative
least-squares solve with the sum-to-one constraint as a heavily weighted row.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import nnls

from bayespmf import datasets
from bayespmf.datasets import load_sp500, make_simplex_nest
from bayespmf.fit.simplex_metrics import (
    simplex_distances,
    simplex_frobenius_error,
    simplex_volume,
)
from bayespmf.fit.simplex_selection import completion_error, select_simplex_n_components

# --------------------------------------------------------------------------------------
# the returns panel


def test_sp500_returns_match_prices():
    prices = load_sp500("prices")
    assert prices.shape == (8313, 20)
    assert prices.index[0] == pd.Timestamp("1990-01-02")
    assert prices.index[-1] == pd.Timestamp("2022-12-28")
    assert np.all(np.isfinite(prices.to_numpy())) and (prices.to_numpy() > 0).all()
    R = load_sp500()
    expected = prices.pct_change().iloc[1:]
    np.testing.assert_allclose(R.to_numpy(), expected.to_numpy(), rtol=1e-12)
    assert list(R.columns) == list(prices.columns) and R.index.equals(expected.index)
    L = load_sp500("log_returns", last_days=400)
    np.testing.assert_allclose(L.to_numpy(), np.log1p(expected.to_numpy()[-400:]))
    assert datasets.load("sp500", last_days=10).shape == (10, 20)
    assert "BSD" in datasets.describe("sp500")


def test_sp500_bad_options():
    with pytest.raises(ValueError, match=r"'kind'.*Did you mean"):
        load_sp500("retuns")
    with pytest.raises(ValueError, match=r"'last_days'.*<= 8312"):
        load_sp500(last_days=10_000)
    with pytest.raises(ValueError, match="last_days"):
        load_sp500(last_days=0)


# --------------------------------------------------------------------------------------
# metrics


def _cayley_menger_volume(V):
    """(K-1)-volume from the pairwise squared distances only."""
    K = V.shape[0]
    d2 = ((V[:, None, :] - V[None, :, :]) ** 2).sum(-1)
    cm = np.ones((K + 1, K + 1))
    cm[0, 0] = 0.0
    cm[1:, 1:] = d2
    m = K - 1
    coef = (-1) ** (m + 1) / (2**m * math.factorial(m) ** 2)
    return math.sqrt(coef * np.linalg.det(cm))


@pytest.mark.parametrize(("K", "D"), [(2, 3), (3, 2), (3, 5), (5, 7)])
def test_volume_against_cayley_menger(K, D):
    V = np.random.default_rng(K * 10 + D).normal(size=(K, D))
    assert simplex_volume(V) == pytest.approx(_cayley_menger_volume(V), rel=1e-9)
    assert simplex_volume(V, log=True) == pytest.approx(math.log(simplex_volume(V)))
    # (K-1)-homogeneous, invariant to translation
    assert simplex_volume(3.0 * V + 7.0) == pytest.approx(
        3.0 ** (K - 1) * simplex_volume(V)
    )


def test_volume_degenerate_and_errors():
    assert simplex_volume([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]) == 0.0
    assert simplex_volume([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]], log=True) == -np.inf
    with pytest.raises(ValueError, match="K - 1 <= D"):
        simplex_volume(np.eye(4)[:, :2])
    with pytest.raises(ValueError, match="K >= 2"):
        simplex_volume([[1.0, 2.0]])
    with pytest.raises(ValueError, match="NaN"):
        simplex_volume([[np.nan, 0.0], [1.0, 0.0]])


def _nnls_distance(x, V, weight=1e6):
    A = np.vstack([V.T, weight * np.ones(V.shape[0])])
    b = np.append(x, weight)
    theta = nnls(A, b, maxiter=10_000)[0]
    return float(np.linalg.norm(x - theta @ V))


def test_distances_against_nnls():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(4, 6))
    X = rng.normal(size=(30, 6)) * 2.0
    X[:5] = rng.dirichlet(np.ones(4), size=5) @ V  # inside: distance 0
    d = simplex_distances(X, V)
    ref = np.array([_nnls_distance(x, V) for x in X])
    np.testing.assert_allclose(d, ref, atol=1e-5)
    np.testing.assert_allclose(d[:5], 0.0, atol=1e-6)
    frob = simplex_frobenius_error(X, V)
    assert frob == pytest.approx(np.sqrt(np.sum(ref**2)) / len(X), rel=1e-5)
    X0 = X.copy()
    simplex_distances(X, V)
    np.testing.assert_array_equal(X, X0)  # the caller's array is not touched


def test_distances_errors():
    with pytest.raises(ValueError, match="one column per vertex coordinate"):
        simplex_distances(np.zeros((3, 2)), np.eye(3))
    with pytest.raises(ValueError, match="NaN"):
        simplex_distances([[np.nan, 0.0, 0.0]], np.eye(3))


# --------------------------------------------------------------------------------------
# choosing K


def test_completion_error_by_hand():
    V = np.array([[0.0, 0.0, 0.0], [2.0, 2.0, 4.0]])
    Y = np.array([[1.0, 1.0, 1.0], [3.0, 2.0, 0.0]])
    # row 0: theta from x_0 = 1 -> (1/2, 1/2); predicts (1, 2) vs (1, 1): (0 + 1) / 2
    # row 1: x_0 = 3 is beyond the vertex 2 -> theta = (0, 1); predicts (2, 4) vs (2, 0)
    err = completion_error(Y, V, np.array([True, False, False]))
    np.testing.assert_allclose(err, [0.5, 8.0])
    with pytest.raises(ValueError, match="boolean mask"):
        completion_error(Y, V, np.array([True, True, True]))


@pytest.mark.slow
def test_select_picks_true_k_on_a_clear_case():
    # K = 4, sigma = 0.1: the completion error of VLAD was lowest at K = 4 on each of
    # seeds 0-4 (3 folds, K in 2..6), by 4.6-9.6 % over K = 5 and 3.5-9.7x over K = 3
    X, _ = make_simplex_nest(600, 20, 4, alpha=1.0, sigma=0.1, random_state=0)
    table, K = select_simplex_n_components(X, [3, 4, 5], "vlad", n_splits=3, random_state=0)
    assert K == 4
    assert table["chosen"].tolist() == [False, True, False]
    mse = table["completion_mse"]
    assert mse[3] > 2 * mse[4] and mse[5] > mse[4]
    # the plain distance to the simplex only falls with K (why it cannot choose)
    assert table["heldout_distance2"].is_monotonic_decreasing
    again, _ = select_simplex_n_components(X, [3, 4, 5], "vlad", n_splits=3, random_state=0)
    pd.testing.assert_frame_equal(table, again)  # one random_state, reproducible


def test_select_sparse_equals_dense(monkeypatch):
    from scipy import sparse

    from bayespmf.fit import simplex_selection

    X, _ = make_simplex_nest(
        120, 30, 3, alpha=0.5, kernel="multinomial", words_per_doc=200, random_state=2
    )
    dense, K = select_simplex_n_components(
        X, [2, 3], "gdm", kernel="multinomial", random_state=0
    )
    # held-out rows made dense a few at a time: several chunks per fold
    monkeypatch.setattr(simplex_selection, "SCORE_CHUNK_ROWS", 7)
    sp, K_sp = select_simplex_n_components(
        sparse.csr_matrix(X), [2, 3], "gdm", kernel="multinomial", random_state=0
    )
    assert K == K_sp
    pd.testing.assert_frame_equal(dense, sp, rtol=1e-9)


def test_select_errors():
    X = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match="distinct"):
        select_simplex_n_components(X, [2, 2], "gdm")
    with pytest.raises(ValueError, match="candidates"):
        select_simplex_n_components(X, [1, 2], "gdm")
    with pytest.raises(ValueError, match="n_splits"):
        select_simplex_n_components(X[:3], [2], "gdm", n_splits=5)
    with pytest.raises(ValueError, match=">= 2"):
        select_simplex_n_components(X[:, :1], [2], "gdm")


def test_plot_n_vertices():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayespmf.plots.simplex_n_components import plot_simplex_n_components

    X, _ = make_simplex_nest(150, 6, 3, alpha=1.0, sigma=0.05, random_state=1)
    table, _ = select_simplex_n_components(X, [2, 3, 4], "gdm", n_splits=3, random_state=0)
    fig = plot_simplex_n_components(table)
    assert len(fig.axes) == 2
    line = fig.axes[1].lines[0]
    np.testing.assert_allclose(line.get_ydata(), table["heldout_distance2"])
    plt.close(fig)
