import numpy as np
import pytest

from bayespmf import DataValidationError
from bayespmf.kernels.spa import normalize_columns_l1, spa, spa_numpy


def spa_pt(x, n_components, **kw):
    return spa(x, n_components, backend="pytensor", **kw)


def _separable(m, n, n_components, rng, noise=0.0):
    """X = W H^T with H holding scaled identity rows at shuffled positions."""
    w = rng.uniform(size=(m, n_components))
    h = rng.dirichlet(np.ones(n_components), size=n) * rng.uniform(0.5, 2.0, size=(n, 1))
    perm = rng.permutation(n)
    anchors = perm[:n_components]
    h[anchors] = np.diag(rng.uniform(0.5, 2.0, size=n_components))
    x = w @ h.T + noise * rng.uniform(size=(m, n))
    return x, anchors


@pytest.mark.parametrize(
    ("m", "n", "n_components"), [(6, 20, 3), (30, 50, 8), (12, 12, 12)]
)
@pytest.mark.parametrize("func", [spa, spa_pt, spa_numpy])
def test_picks_planted_anchors(func, m, n, n_components):
    rng = np.random.default_rng(m * n + n_components)
    x, anchors = _separable(m, n, n_components, rng)
    picked = func(x, n_components)
    assert picked.dtype == np.int64
    assert picked.shape == (n_components,)
    assert set(picked.tolist()) == set(anchors.tolist())


def test_compiled_matches_numpy_on_generic_data():
    for seed in range(5):
        rng = np.random.default_rng(seed)
        x = rng.uniform(size=(15 + seed, 40))
        for n_components in (1, 4, 15):
            np.testing.assert_array_equal(
                spa_pt(x, n_components), spa_numpy(x, n_components)
            )
            np.testing.assert_array_equal(
                spa_pt(x, n_components, normalize=False),
                spa_numpy(x, n_components, normalize=False),
            )


def test_robust_to_small_noise():
    rng = np.random.default_rng(3)
    x, anchors = _separable(20, 60, 5, rng, noise=1e-4)
    assert set(spa(x, 5).tolist()) == set(anchors.tolist())


def test_normalization_matters():
    # Column 2 is the midpoint of columns 0 and 1 but has the largest l2 norm: without
    # the l1 normalization SPA takes it first.
    x = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, 5.0]])
    assert spa(x, 1, normalize=False).tolist() == [2]
    assert set(spa(x, 2).tolist()) == {0, 1}


def test_rank_above_data_rank_gives_distinct_indices():
    x = np.outer(np.arange(1.0, 5.0), np.arange(1.0, 7.0))  # rank 1
    for func in (spa, spa_pt, spa_numpy):
        picked = func(x, 4)
        assert len(set(picked.tolist())) == 4


def test_normalize_columns_l1_keeps_zero_columns():
    x = np.array([[1.0, 0.0, -1.0], [3.0, 0.0, 1.0]])
    np.testing.assert_allclose(
        normalize_columns_l1(x), [[0.25, 0.0, -0.5], [0.75, 0.0, 0.5]]
    )


def test_input_not_mutated():
    rng = np.random.default_rng(1)
    x, _ = _separable(8, 10, 3, rng)
    before = x.copy()
    spa(x, 3)
    spa_numpy(x, 3)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("func", [spa, spa_pt, spa_numpy])
def test_errors(func):
    x = np.ones((3, 4))
    with pytest.raises(
        ValueError, match=r"'n_components' parameter of spa must be an int in \[1, 4\]"
    ):
        func(x, 0)
    with pytest.raises(ValueError, match=r"must be an int in \[1, 4\]. Got 5"):
        func(x, 5)
    with pytest.raises(ValueError, match="must be an int"):
        func(x, 2.0)
    with pytest.raises(DataValidationError, match="non-empty 2-D array"):
        func(np.ones(3), 1)
    with pytest.raises(DataValidationError, match="NaN or infinite"):
        func(np.array([[np.nan, 1.0]]), 1)
