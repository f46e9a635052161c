"""Loaders of the shipped data sets. Each returns ``Dataset(data, target)``."""

from __future__ import annotations

import difflib
import io
from typing import NamedTuple

import numpy as np
import pandas as pd

from bayespmf._validation import DataValidationError, check_int
from bayespmf.data import CategoricalData
from bayespmf.datasets._registry import get_info, read_bytes

__all__ = [
    "Dataset",
    "load_car",
    "load_movielens",
    "load_mushroom",
    "load_nursery",
    "load_votes",
]


class Dataset(NamedTuple):
    """A loaded data set: the data and the name of its class variable (or ``None``).

    Unpacks as ``data, target = load_car()``.
    """

    data: CategoricalData
    target: str | None


def _read_table(name: str, path: str, columns: list[str], **kw) -> pd.DataFrame:
    info = get_info(name)
    raw = read_bytes(path, info.files[path])
    return pd.read_csv(
        io.BytesIO(raw), header=None, names=columns, dtype=str, keep_default_na=False, **kw
    )


def _categorical(df: pd.DataFrame, levels: dict[str, list[str]]) -> pd.DataFrame:
    """Declare the documented category order of each column ('?' -> missing)."""
    out = {}
    for col in df.columns:
        s = df[col].replace("?", np.nan)
        cats = levels.get(col)
        if cats is None:
            cats = sorted(s.dropna().unique())
        unknown = set(s.dropna().unique()) - set(cats)
        if unknown:  # pragma: no cover - guarded by the checksums
            raise DataValidationError(f"Unexpected values {unknown} in column {col!r}.")
        out[col] = pd.Categorical(s, categories=cats)
    return pd.DataFrame(out)


def _mode_impute(df: pd.DataFrame) -> pd.DataFrame:
    return df.apply(lambda s: s.fillna(s.mode().iloc[0]))


_CAR_LEVELS = {
    "class": ["unacc", "acc", "good", "vgood"],
    "buying": ["vhigh", "high", "med", "low"],
    "maint": ["vhigh", "high", "med", "low"],
    "doors": ["2", "3", "4", "5more"],
    "persons": ["2", "4", "more"],
    "lug_boot": ["small", "med", "big"],
    "safety": ["low", "med", "high"],
}


def load_car() -> Dataset:
    """UCI Car Evaluation (1,728 rows, 7 variables, no missing entries).

    The class variable (``"class"``: unacc, acc, good, vgood) is moved to the front, as
    the CNMF paper does (Sec. 7.2), so the alphabet sizes are ``[4, 4, 4, 4, 3, 3, 3]``.
    Categories keep the order of ``car.names``.

    Returns
    -------
    Dataset
        ``(data, "class")``.

    Notes
    -----
    Bohanec, M. Car Evaluation, UCI Machine Learning Repository, CC BY 4.0.

    Examples
    --------
    >>> data, target = load_car()
    >>> data.n_categories.tolist(), target
    ([4, 4, 4, 4, 3, 3, 3], 'class')
    """
    cols = ["buying", "maint", "doors", "persons", "lug_boot", "safety", "class"]
    df = _read_table("car", "car/car.data", cols)
    df = _categorical(df[["class", *cols[:-1]]], _CAR_LEVELS)
    return Dataset(CategoricalData.from_pandas(df), "class")


_VOTE_ISSUES = [
    "handicapped-infants",
    "water-project-cost-sharing",
    "adoption-of-the-budget-resolution",
    "physician-fee-freeze",
    "el-salvador-aid",
    "religious-groups-in-schools",
    "anti-satellite-test-ban",
    "aid-to-nicaraguan-contras",
    "mx-missile",
    "immigration",
    "synfuels-corporation-cutback",
    "education-spending",
    "superfund-right-to-sue",
    "crime",
    "duty-free-exports",
    "export-administration-act-south-africa",
]


def load_votes(*, impute: bool = False) -> Dataset:
    """UCI Congressional Voting Records 1984 (435 rows, 17 binary variables).

    Parameters
    ----------
    impute : bool, default False
        ``False``: a ``'?'`` (position not known) is a missing entry (392 of them).
        ``True``: replace it by the column mode, as the CNMF paper's loader does.

    Returns
    -------
    Dataset
        ``(data, "class")`` with class democrat/republican first.

    Examples
    --------
    >>> data, target = load_votes()
    >>> int((data.codes == -1).sum())
    392
    """
    cols = ["class", *_VOTE_ISSUES]
    df = _read_table("votes", "votes/house-votes-84.data", cols)
    levels = {"class": ["democrat", "republican"]} | {c: ["n", "y"] for c in _VOTE_ISSUES}
    df = _categorical(df, levels)
    if impute:
        df = _mode_impute(df)
    return Dataset(CategoricalData.from_pandas(df), "class")


_NURSERY_LEVELS = {
    "parents": ["usual", "pretentious", "great_pret"],
    "has_nurs": ["proper", "less_proper", "improper", "critical", "very_crit"],
    "form": ["complete", "completed", "incomplete", "foster"],
    "children": ["1", "2", "3", "more"],
    "housing": ["convenient", "less_conv", "critical"],
    "finance": ["convenient", "inconv"],
    "social": ["nonprob", "slightly_prob", "problematic"],
    "health": ["recommended", "priority", "not_recom"],
    "class": ["not_recom", "recommend", "very_recom", "priority", "spec_prior"],
}


def load_nursery(*, as_paper: bool = False) -> Dataset:
    """UCI Nursery (12,960 rows, 9 variables, no missing entries).

    Parameters
    ----------
    as_paper : bool, default False
        Apply the CNMF paper's preprocessing (Sec. 7.2): drop ``finance`` and merge the
        classes ``priority`` and ``spec_prior`` (leaving 4 classes).

    Returns
    -------
    Dataset
        ``(data, "class")`` with the class first.

    Examples
    --------
    >>> load_nursery().data.shape
    (12960, 9)
    >>> load_nursery(as_paper=True).data.n_categories.tolist()
    [4, 3, 5, 4, 4, 3, 3, 3]
    """
    cols = [c for c in _NURSERY_LEVELS if c != "class"] + ["class"]
    df = _read_table("nursery", "nursery/nursery.data.gz", cols, skip_blank_lines=True)
    df = df[df["parents"] != ""]
    levels = dict(_NURSERY_LEVELS)
    if as_paper:
        df = df.drop(columns="finance")
        df["class"] = df["class"].replace("spec_prior", "priority")
        levels["class"] = ["not_recom", "recommend", "very_recom", "priority"]
    df = _categorical(df[["class", *[c for c in df.columns if c != "class"]]], levels)
    return Dataset(CategoricalData.from_pandas(df), "class")


_MUSHROOM_COLUMNS = [
    "class",
    "cap-shape",
    "cap-surface",
    "cap-color",
    "bruises",
    "odor",
    "gill-attachment",
    "gill-spacing",
    "gill-size",
    "gill-color",
    "stalk-shape",
    "stalk-root",
    "stalk-surface-above-ring",
    "stalk-surface-below-ring",
    "stalk-color-above-ring",
    "stalk-color-below-ring",
    "veil-type",
    "veil-color",
    "ring-number",
    "ring-type",
    "spore-print-color",
    "population",
    "habitat",
]


def load_mushroom(*, impute: bool = False) -> Dataset:
    """UCI Mushroom (8,124 rows; class + 21 attributes).

    ``veil-type`` takes a single value in the data and is dropped (a variable needs two
    categories). Categories are the single-letter codes of ``agaricus-lepiota.names``
    that occur in the data, sorted.

    Parameters
    ----------
    impute : bool, default False
        ``False``: stalk-root ``'?'`` is missing (2,480 entries). ``True``: replace it
        by the mode, as the CNMF paper does (Sec. 7.2).

    Returns
    -------
    Dataset
        ``(data, "class")`` with class e/p first.

    Examples
    --------
    >>> data, target = load_mushroom()
    >>> data.shape, int((data.codes == -1).sum())
    ((8124, 22), 2480)
    """
    df = _read_table("mushroom", "mushroom/agaricus-lepiota.data.gz", _MUSHROOM_COLUMNS)
    df = _categorical(df.drop(columns="veil-type"), {})
    if impute:
        df = _mode_impute(df)
    return Dataset(CategoricalData.from_pandas(df), "class")


def _movielens_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    info = get_info("movielens")
    ratings = pd.read_csv(
        io.BytesIO(
            read_bytes("movielens/ratings.csv.gz", info.files["movielens/ratings.csv.gz"])
        )
    )
    movies = pd.read_csv(
        io.BytesIO(
            read_bytes("movielens/movies.csv.gz", info.files["movielens/movies.csv.gz"])
        )
    )
    return ratings, movies


def movielens_genres() -> list[str]:
    """Genres that occur in ml-latest-small.

    Examples
    --------
    >>> "Animation" in movielens_genres()
    True
    """
    _, movies = _movielens_tables()
    return sorted(
        {g for gs in movies["genres"] for g in gs.split("|")} - {"(no genres listed)"}
    )


def load_movielens(genre: str, n_movies: int = 30, min_ratings: int = 5) -> Dataset:
    """Ratings subset of MovieLens ml-latest-small for one genre.

    Follows the CNMF paper's MovieLens protocol (Sec. 7.3) on the ml-latest-small
    snapshot shipped here: the ``n_movies`` movies of ``genre`` with the most ratings
    become the variables; ratings are rounded to the nearest integer (halves up) and
    clipped to 1..5 (codes 0..4, labels ``"1"``..``"5"``); users with at least
    ``min_ratings`` ratings among those movies become the rows; unrated entries are
    missing.

    Parameters
    ----------
    genre : str
        A MovieLens genre, e.g. ``"Action"``, ``"Animation"``, ``"Romance"``.
    n_movies : int, default 30
    min_ratings : int, default 5

    Returns
    -------
    Dataset
        ``(data, None)``; variable names are the movie titles.

    Notes
    -----
    MovieLens data (GroupLens Research, University of Minnesota) are for research use
    under the terms in the shipped ``README.txt``: no commercial use without
    permission, acknowledge the data set (Harper & Konstan 2015), no endorsement
    implied.

    Examples
    --------
    >>> data, _ = load_movielens("Animation")
    >>> data.n_variables, bool((data.mask.sum(axis=1) >= 5).all())
    (30, True)
    """
    n_movies = check_int(n_movies, "n_movies", owner="load_movielens", low=2)
    min_ratings = check_int(min_ratings, "min_ratings", owner="load_movielens", low=1)
    ratings, movies = _movielens_tables()
    genres = movielens_genres()
    if genre not in genres:
        close = difflib.get_close_matches(str(genre), genres, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise DataValidationError(f"Unknown genre {genre!r}.{hint} Genres: {genres}.")
    in_genre = movies[movies["genres"].str.split("|").apply(lambda g: genre in g)]
    counts = ratings[ratings["movieId"].isin(in_genre["movieId"])]["movieId"].value_counts()
    # ties broken by movieId so the subset is deterministic
    counts = (
        counts.rename("n")
        .reset_index()
        .sort_values(["n", "movieId"], ascending=[False, True])
    )
    top = counts["movieId"].to_numpy()[:n_movies]
    if top.size < n_movies:
        raise DataValidationError(
            f"Genre {genre!r} has only {top.size} rated movies; lower 'n_movies'."
        )
    sub = ratings[ratings["movieId"].isin(top)]
    table = sub.pivot(index="userId", columns="movieId", values="rating")[top]
    table = table[table.notna().sum(axis=1) >= min_ratings]
    if table.shape[0] == 0:
        raise DataValidationError(
            f"No user has {min_ratings} ratings among the top {n_movies} {genre} "
            "movies; lower 'min_ratings'."
        )
    vals = table.to_numpy()
    codes = np.where(
        np.isnan(vals), -1, np.clip(np.floor(np.nan_to_num(vals) + 0.5), 1, 5) - 1
    )
    titles = movies.set_index("movieId").loc[top, "title"].tolist()
    data = CategoricalData.from_codes(
        codes.astype(np.int64),
        n_categories=5,
        names=titles,
        categories=[["1", "2", "3", "4", "5"]] * len(titles),
    )
    return Dataset(data, None)
