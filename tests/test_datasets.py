import hashlib

import numpy as np
import pytest

from bayespmf import datasets
from bayespmf.datasets import _registry


@pytest.mark.parametrize(
    ("name", "shape", "n_missing", "n_cat"),
    [
        ("car", (1728, 7), 0, [4, 4, 4, 4, 3, 3, 3]),
        ("votes", (435, 17), 392, [2] * 17),
        ("nursery", (12960, 9), 0, [5, 3, 5, 4, 4, 3, 2, 3, 3]),
        ("mushroom", (8124, 22), 2480, None),
    ],
)
def test_uci_loaders(name, shape, n_missing, n_cat):
    data, target = datasets.load(name)
    assert target == "class" and data.names[0] == "class"
    assert data.shape == shape
    assert int((data.codes == -1).sum()) == n_missing
    if n_cat is not None:
        assert data.n_categories.tolist() == n_cat


def test_class_counts_match_published():
    data, _ = datasets.load_car()
    assert np.bincount(data.codes[:, 0]).tolist() == [1210, 384, 69, 65]
    assert data.categories[0] == ["unacc", "acc", "good", "vgood"]
    votes, _ = datasets.load_votes()
    assert np.bincount(votes.codes[:, 0]).tolist() == [267, 168]
    nursery, _ = datasets.load_nursery()
    counts = dict(zip(nursery.categories[0], np.bincount(nursery.codes[:, 0]), strict=True))
    assert counts == {
        "not_recom": 4320,
        "recommend": 2,
        "very_recom": 328,
        "priority": 4266,
        "spec_prior": 4044,
    }
    mush, _ = datasets.load_mushroom()
    assert np.bincount(mush.codes[:, 0]).tolist() == [4208, 3916]
    assert "veil-type" not in mush.names
    assert int((mush.codes[:, mush.index_of("stalk-root")] == -1).sum()) == 2480


def test_paper_preprocessing():
    votes, _ = datasets.load_votes(impute=True)
    assert votes.missing_fraction == 0.0
    raw, _ = datasets.load_votes()
    obs = raw.mask
    np.testing.assert_array_equal(votes.codes[obs], raw.codes[obs])
    nursery, _ = datasets.load_nursery(as_paper=True)
    assert "finance" not in nursery.names
    assert np.bincount(nursery.codes[:, 0]).tolist() == [4320, 2, 328, 4266 + 4044]
    mush, _ = datasets.load_mushroom(impute=True)
    assert mush.missing_fraction == 0.0


@pytest.mark.parametrize("genre", ["Action", "Animation", "Romance"])
def test_movielens_subsets(genre):
    data, target = datasets.load_movielens(genre)
    assert target is None
    assert data.n_variables == 30
    assert np.all(data.n_categories == 5)
    assert np.all(data.mask.sum(axis=1) >= 5)
    assert len(set(data.names)) == 30


def test_movielens_matches_direct_computation():
    # Independent recomputation with plain Python over the raw CSV rows.
    import csv
    import gzip
    import io
    from collections import Counter, defaultdict

    from bayespmf.datasets._registry import REGISTRY

    files = REGISTRY["movielens"].files
    movies_raw = _registry.read_bytes(
        "movielens/movies.csv.gz", files["movielens/movies.csv.gz"]
    )
    ratings_raw = gzip.decompress(
        _registry.resources.files("bayespmf.datasets")
        .joinpath("data", "movielens", "ratings.csv.gz")
        .read_bytes()
    )
    genre_movies = {
        int(r["movieId"])
        for r in csv.DictReader(io.StringIO(movies_raw.decode()))
        if "Animation" in r["genres"].split("|")
    }
    rows = [
        (int(r["userId"]), int(r["movieId"]), float(r["rating"]))
        for r in csv.DictReader(io.StringIO(ratings_raw.decode()))
    ]
    cnt = Counter(m for _, m, _ in rows if m in genre_movies)
    top = [m for m, _ in sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))[:30]]
    per_user = defaultdict(dict)
    for u, m, r in rows:
        if m in top:
            per_user[u][m] = min(5, max(1, int(r + 0.5)))
    users = sorted(u for u, d in per_user.items() if len(d) >= 5)
    expected = np.array([[per_user[u].get(m, 0) - 1 for m in top] for u in users])
    data, _ = datasets.load_movielens("Animation")
    np.testing.assert_array_equal(data.codes, expected)


def test_movielens_errors():
    with pytest.raises(ValueError, match="Did you mean 'Animation'"):
        datasets.load_movielens("Animaton")
    with pytest.raises(ValueError, match="n_movies"):
        datasets.load_movielens("Action", n_movies=1)
    with pytest.raises(ValueError, match="lower 'min_ratings'"):
        datasets.load_movielens("Action", min_ratings=31)


def test_registry_checksums_match_files():
    for info in _registry.REGISTRY.values():
        for path, sha in info.files.items():
            raw = _registry.read_bytes(path, sha)
            assert hashlib.sha256(raw).hexdigest() == sha


def test_corrupted_file_detected():
    with pytest.raises(_registry.ChecksumError, match="corrupted"):
        _registry.read_bytes("car/car.data", "0" * 64)


def test_unknown_name_did_you_mean():
    with pytest.raises(datasets.UnknownDatasetError, match="Did you mean 'nursery'"):
        datasets.load("nursey")
    with pytest.raises(ValueError, match="Available"):
        datasets.describe("zzz")


def test_list_and_describe():
    names = datasets.list_datasets()
    shipped = {"car", "votes", "nursery", "mushroom", "movielens", "sp500", "wikipedia"}
    assert set(names) == shipped
    for n in names:
        text = datasets.describe(n)
        assert "cite:" in text and "terms:" in text
    assert "commercial" in datasets.describe("movielens")
