"""The batched k-means of bayespmf.kernels.kmeans against scikit-learn's KMeans.

Every restart of :func:`bayespmf.kernels.kmeans.kmeans` is meant to be scikit-learn's
``KMeans(n_init=1, random_state=seed)`` with the seeds drawn from ``random_state``;
with many columns the restarts run in lockstep (one product per block of rows for all
of them). These tests run scikit-learn itself, restart by restart, and compare.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans, kmeans_plusplus
from threadpoolctl import threadpool_limits

from bayespmf._validation import check_random_state
from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.kernels import kmeans as km
from bayespmf.kernels.vlad_geometry import preprocess

D = max(40, km.BATCHED_MIN_FEATURES)  # columns enough for the batched path


def _blobs(n, d, k, sep, seed):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(k, d)) * sep
    return means[rng.integers(k, size=n)] + rng.normal(size=(n, d))


def _sklearn_restarts(X, k, seeds, **kw):
    """scikit-learn's KMeans(n_init=1) for each seed, on one OpenMP thread (the order
    of the sums of the Lloyd step then is the row order, as in the batched path)."""
    runs = []
    with threadpool_limits(limits=1):
        for seed in seeds:
            fit = KMeans(k, n_init=1, random_state=int(seed), **kw).fit(X)
            runs.append((fit.cluster_centers_, fit.labels_, fit.inertia_))
    return runs


def _seeds(random_state, n_init):
    return check_random_state(random_state).integers(2**31 - 1, size=n_init)


@pytest.mark.parametrize("random_state", [0, 1, 2, 3])
def test_one_restart_is_sklearn_kmeans_with_its_seed(random_state):
    X = _blobs(400, D, 4, 4.0, seed=random_state)
    centers, labels, inertia = km.kmeans(X, 4, n_init=1, random_state=random_state)
    [(c_ref, l_ref, i_ref)] = _sklearn_restarts(X, 4, _seeds(random_state, 1))
    np.testing.assert_array_equal(labels, l_ref)
    np.testing.assert_allclose(centers, c_ref, rtol=0, atol=1e-8)
    assert inertia == pytest.approx(i_ref, rel=1e-9)


def test_restarts_and_the_best_one_match_sklearn_on_overlapping_clusters():
    # clusters that overlap, so the restarts end in different local optima
    X = _blobs(600, D, 6, 0.4, seed=5)
    with threadpool_limits(limits=1, user_api="blas"):
        runs = km._batched_runs(X, 6, [int(s) for s in _seeds(7, 8)], 300, 2)
    ref = _sklearn_restarts(X, 6, _seeds(7, 8))
    assert len({round(r[2], 6) for r in ref}) > 1  # not all restarts alike
    for (c, lab, inertia), (c_ref, l_ref, i_ref) in zip(runs, ref, strict=True):
        np.testing.assert_array_equal(lab, l_ref)
        np.testing.assert_allclose(c, c_ref, rtol=0, atol=1e-8)
        assert inertia == pytest.approx(i_ref, rel=1e-9)
    _, labels, inertia = km.kmeans(X, 6, random_state=7)
    best = min(ref, key=lambda r: r[2])
    np.testing.assert_array_equal(labels, best[1])
    assert inertia == pytest.approx(best[2], rel=1e-9)


def test_kmeans_plusplus_starts_are_sklearns():
    X = _blobs(500, D, 5, 1.0, seed=1)
    Xc = X - X.mean(axis=0)  # KMeans.fit centres the data before seeding
    xsq = (Xc**2).sum(axis=1)
    seeds = [3, 11, 2**31 - 2]
    blocks = km._row_blocks(len(Xc), 3 * 5)
    with threadpool_limits(limits=1, user_api="blas"):
        ours = km._kmeans_plusplus(
            Xc, xsq, 5, seeds, blocks, lambda f, xs: list(map(f, xs))
        )
        for seed, start in zip(seeds, ours, strict=True):
            ref, _ = kmeans_plusplus(Xc, 5, x_squared_norms=xsq, random_state=seed)
            np.testing.assert_allclose(start, ref, rtol=0, atol=1e-12)


def test_documents_inertia_at_least_as_low_as_sklearns_best():
    # like the benchmark's multinomial documents, smaller
    X, _ = make_simplex_nest(
        800, 300, 5, alpha=2.0, kernel="multinomial", words_per_doc=500, random_state=0
    )
    Y, _ = preprocess(X, "multinomial")
    _, labels, inertia = km.kmeans(Y, 5, random_state=4)
    ref = min(_sklearn_restarts(Y, 5, _seeds(4, 8)), key=lambda r: r[2])
    assert np.array_equal(labels, ref[1]) or inertia <= ref[2] * (1 + 1e-9)
    # and the reference code's own KMeans(n_init=8) (other seeds) does not do better
    # than that by more than the spread of local optima
    with threadpool_limits(limits=1):
        sk = KMeans(5, n_init=8, random_state=4).fit(Y)
    assert inertia <= sk.inertia_ * (1 + 1e-3)


def test_init_start_is_kept_in_its_row_order():
    X = _blobs(300, D, 3, 5.0, seed=2)
    start = np.array([X[X[:, 0].argmax()], X[0], X[X[:, 0].argmin()]])
    centers, labels, inertia = km.kmeans(X, 3, n_init=0, init=start)
    with threadpool_limits(limits=1):
        ref = KMeans(3, init=start, n_init=1).fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_allclose(centers, ref.cluster_centers_, rtol=0, atol=1e-8)
    assert inertia == pytest.approx(ref.inertia_, rel=1e-9)
    # with restarts beside it: the lowest inertia of all runs
    both = km.kmeans(X, 3, n_init=2, init=start, random_state=0)
    alone = km.kmeans(X, 3, n_init=2, random_state=0)
    assert both[2] <= min(inertia, alone[2]) * (1 + 1e-12)


def test_result_does_not_depend_on_workers():
    X = _blobs(2000, D, 6, 0.5, seed=3)  # several blocks of rows
    one = km.kmeans(X, 6, random_state=1, n_workers=1)
    three = km.kmeans(X, 6, random_state=1, n_workers=3)
    np.testing.assert_array_equal(one[0], three[0])
    np.testing.assert_array_equal(one[1], three[1])
    assert one[2] == three[2]


def test_reproducible_for_a_seed_and_different_for_another():
    X = np.random.default_rng(0).normal(size=(500, D))  # no structure: many optima
    a = km.kmeans(X, 8, n_init=2, random_state=5)
    b = km.kmeans(X, 8, n_init=2, random_state=5)
    c = km.kmeans(X, 8, n_init=2, random_state=6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2]
    assert not np.array_equal(a[0], c[0])


def test_batched_and_per_restart_paths_agree(monkeypatch):
    X = _blobs(700, D, 5, 0.7, seed=4)
    batched = km.kmeans(X, 5, random_state=3)
    monkeypatch.setattr(km, "BATCHED_MIN_FEATURES", 10**9)
    per_restart = km.kmeans(X, 5, random_state=3)
    np.testing.assert_array_equal(batched[1], per_restart[1])
    np.testing.assert_allclose(batched[0], per_restart[0], rtol=0, atol=1e-8)
    assert batched[2] == pytest.approx(per_restart[2], rel=1e-9)


def test_empty_cluster_is_relocated_as_sklearn_does():
    X = _blobs(200, D, 2, 5.0, seed=6)
    # the third start is far from every point: its cluster is empty at once
    start = np.vstack([X[:2], np.full(D, 1e3)])
    centers, labels, inertia = km.kmeans(X, 3, n_init=0, init=start)
    with threadpool_limits(limits=1):
        ref = KMeans(3, init=start, n_init=1).fit(X)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_allclose(centers, ref.cluster_centers_, rtol=0, atol=1e-8)
    assert inertia == pytest.approx(ref.inertia_, rel=1e-9)
    assert np.all(np.isfinite(centers)) and len(np.unique(labels)) == 3


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")
def test_more_clusters_than_distinct_points():
    X = np.repeat(np.eye(D)[:3], 20, axis=0)
    centers, labels, inertia = km.kmeans(X, 5, n_init=1, random_state=0)
    [(c_ref, l_ref, i_ref)] = _sklearn_restarts(X, 5, _seeds(0, 1))
    np.testing.assert_array_equal(labels, l_ref)
    np.testing.assert_allclose(centers, c_ref, rtol=0, atol=1e-8)
    assert inertia == pytest.approx(0.0, abs=1e-12) and i_ref == pytest.approx(0.0)
    assert len(np.unique(labels)) == 3


def test_fewer_points_than_clusters_raises():
    with pytest.raises(ValueError, match="should be >= n_clusters"):
        km.kmeans(np.ones((3, D)), 4, random_state=0)
