"""Shipped data sets (offline, checksummed) and simulators.

Every shipped file is verified against its sha256 checksum when it is read; the
attribution each source asks for is in :func:`describe` and in
``bayespmf/datasets/data/ATTRIBUTION.md``.
"""

from __future__ import annotations

from bayespmf.datasets._finance import load_sp500
from bayespmf.datasets._loaders import (
    Dataset,
    load_car,
    load_movielens,
    load_mushroom,
    load_nursery,
    load_votes,
    movielens_genres,
)
from bayespmf.datasets._registry import REGISTRY, DatasetInfo, UnknownDatasetError, get_info
from bayespmf.datasets._simulate import (
    LatentClassTruth,
    SimplexNestTruth,
    make_latent_class,
    make_simplex_nest,
)
from bayespmf.datasets._simulate_nmf import PurificationTruth, make_purification_data
from bayespmf.datasets._text import TextCorpus, load_wikipedia, read_bag_of_words

__all__ = [
    "Dataset",
    "DatasetInfo",
    "LatentClassTruth",
    "PurificationTruth",
    "SimplexNestTruth",
    "TextCorpus",
    "UnknownDatasetError",
    "describe",
    "get_info",
    "list_datasets",
    "load",
    "loader",
    "load_car",
    "load_movielens",
    "load_mushroom",
    "load_nursery",
    "load_sp500",
    "load_votes",
    "load_wikipedia",
    "make_latent_class",
    "make_purification_data",
    "make_simplex_nest",
    "movielens_genres",
    "read_bag_of_words",
]

_LOADERS = {
    "car": load_car,
    "votes": load_votes,
    "nursery": load_nursery,
    "mushroom": load_mushroom,
    "movielens": load_movielens,
    "sp500": load_sp500,
    "wikipedia": load_wikipedia,
}


def list_datasets() -> list[str]:
    """Names of the shipped data sets.

    Examples
    --------
    >>> list_datasets()
    ['car', 'votes', 'nursery', 'mushroom', 'movielens', 'sp500', 'wikipedia']
    """
    return list(REGISTRY)


def describe(name: str) -> str:
    """A description of a shipped data set with its citation and terms.

    Examples
    --------
    >>> print(describe("votes").splitlines()[0])
    votes: UCI Congressional Voting Records 1984: ...
    """
    info = get_info(name)
    return (
        f"{info.name}: {info.description}\n"
        f"  rows: {info.n_rows}\n  cite: {info.citation}\n  terms: {info.license}"
    )


def loader(name: str):
    """The loader function of a shipped data set (its signature lists its options).

    Examples
    --------
    >>> loader("car").__name__
    'load_car'
    """
    return _LOADERS[get_info(name).name]


def load(name: str, **kwargs) -> Dataset:
    """Load a shipped data set by name (``kwargs`` go to its loader).

    A :class:`Dataset` for the categorical sets; ``"sp500"`` gives a DataFrame of
    daily returns (:func:`load_sp500`); ``"wikipedia"`` a :class:`TextCorpus` (a
    sparse document-term matrix and its vocabulary, :func:`load_wikipedia`).

    Examples
    --------
    >>> load("car").data.n_samples
    1728
    >>> load("movielens", genre="Romance").data.n_variables
    30
    """
    return _LOADERS[get_info(name).name](**kwargs)
