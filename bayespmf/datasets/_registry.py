"""Registry of the data sets shipped inside the package, with sha256 checksums.

Each file is verified against the checksum of its *uncompressed* bytes, which are the
checksums the sources publish (see ``data/ATTRIBUTION.md``); large files are stored
gzip-compressed. Nothing is ever downloaded.
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
from dataclasses import dataclass, field
from importlib import resources

from bayespmf._validation import DataValidationError

__all__ = ["REGISTRY", "DatasetInfo", "get_info", "read_bytes"]

_UCI_LICENSE = "CC BY 4.0 (UCI Machine Learning Repository)"


class ChecksumError(DataValidationError):
    """A shipped data file does not match its registered checksum."""


@dataclass(frozen=True)
class DatasetInfo:
    """What the registry knows of one shipped data set."""

    name: str
    description: str
    citation: str
    license: str
    files: dict = field(default_factory=dict)  # path -> sha256 of uncompressed bytes
    n_rows: int = 0


REGISTRY: dict[str, DatasetInfo] = {
    "car": DatasetInfo(
        "car",
        "UCI Car Evaluation: 1,728 cars, 6 attributes + acceptability class (4 levels).",
        "Bohanec, M. (1988). Car Evaluation [Dataset]. UCI Machine Learning Repository. "
        "https://doi.org/10.24432/C5JP48",
        _UCI_LICENSE,
        {
            "car/car.data": (
                "b703a9ac69f11e64ce8c223c0a40de4d2e9d769f7fb20be5f8f2e8a619893d83"
            ),
            "car/car.names": (
                "9835ccf47cdbd111577adc50000d6d247f71a31fd6ef84bf25181449685d22bd"
            ),
        },
        1728,
    ),
    "votes": DatasetInfo(
        "votes",
        "UCI Congressional Voting Records 1984: 435 representatives, party + 16 votes "
        "(y/n, '?' = position unknown -> missing).",
        "Congressional Voting Records [Dataset] (1987). UCI Machine Learning Repository. "
        "https://doi.org/10.24432/C5C01P",
        _UCI_LICENSE,
        {
            "votes/house-votes-84.data": (
                "c87c14110a5ba91d4a1e313ec7392824458152bf071fa5f5452340488337936e"
            ),
            "votes/house-votes-84.names": (
                "5fab2dce4c8e311c2001c4eba22f8956273335698f2aab7714f85f694aad3449"
            ),
        },
        435,
    ),
    "nursery": DatasetInfo(
        "nursery",
        "UCI Nursery: 12,960 applications, 8 attributes + recommendation class (5 levels).",
        "Rajkovic, V. (1989). Nursery [Dataset]. UCI Machine Learning Repository. "
        "https://doi.org/10.24432/C5P88W",
        _UCI_LICENSE,
        {
            "nursery/nursery.data.gz": (
                "8e0389c3dd37590248a921c2726d869ee96b817761a35eb8416afa24f31f931d"
            ),
            "nursery/nursery.names": (
                "f18db269d8300cb47f9caf01a5e5513e23c8fa6ba647cfecb0e3af04790f5467"
            ),
        },
        12960,
    ),
    "mushroom": DatasetInfo(
        "mushroom",
        "UCI Mushroom (agaricus-lepiota): 8,124 mushrooms, edible/poisonous + 22 "
        "attributes (stalk-root '?' -> missing).",
        "Mushroom [Dataset] (1981). UCI Machine Learning Repository. "
        "https://doi.org/10.24432/C5959T",
        _UCI_LICENSE,
        {
            "mushroom/agaricus-lepiota.data.gz": (
                "e65d082030501a3ebcbcd7c9f7c71aa9d28fdfff463bf4cf4716a3fe13ac360e"
            ),
            "mushroom/agaricus-lepiota.names": (
                "79e440566900901a5900febc1f3c9659e3746e306a5fa1aed4d084a1e4da76fd"
            ),
        },
        8124,
    ),
    "movielens": DatasetInfo(
        "movielens",
        "MovieLens ml-latest-small (2018-09-26): 100,836 ratings of 9,742 movies by 610 "
        "users; load_movielens builds the 30-most-rated-movies subset of a genre.",
        "F. Maxwell Harper and Joseph A. Konstan. 2015. The MovieLens Datasets: History "
        "and Context. ACM TiiS 5(4): 19:1-19:19. https://doi.org/10.1145/2827872",
        "GroupLens terms (see movielens/README.txt): research use only, no commercial "
        "use without permission, acknowledge the data set, no endorsement implied; "
        "redistributed under these same conditions.",
        {
            "movielens/ratings.csv.gz": (
                "aa289ca83157595d0df6aea1be6a4ded676ddc4385472e8313a8ed9805352646"
            ),
            "movielens/movies.csv.gz": (
                "5a5f32dd9bb3797b8e728a1b98958789d2b13f294a69fdfbc5727f8a9611aa07"
            ),
            "movielens/README.txt": (
                "caa1eb1d1d113578e9dbb36b37398404e00f379492b7aa31df0b30c855017095"
            ),
        },
        100836,
    ),
    "sp500": DatasetInfo(
        "sp500",
        "Daily adjusted closing prices of 20 S&P 500 stocks, 1990-01-02 to 2022-12-28 "
        "(8,313 days); load_sp500 gives daily returns (Dirichlet simplex nest, finance).",
        "skfolio developers (2023-2026), skfolio.datasets.load_sp500_dataset, skfolio "
        "1.12.2, https://github.com/skfolio/skfolio",
        "BSD 3-Clause (skfolio; sp500/LICENSE-skfolio.txt). skfolio: a stale data set "
        "for testing and examples, not for investment, trading or commercial use.",
        {
            "sp500/sp500_dataset.csv.gz": (
                "5f769c6d7be57f62a4dfd1f553995855462a17c92b21a4af4245439c6115617f"
            ),
            "sp500/LICENSE-skfolio.txt": (
                "07b8dfceb7b319e5145e7b1594d2cdaf94d924d78166d28951d4b360a4dc5844"
            ),
        },
        8313,
    ),
    "wikipedia": DatasetInfo(
        "wikipedia",
        "3,512 paragraphs of 104 English Wikipedia articles (2016) as word counts over "
        "a 6,693-word vocabulary; load_wikipedia gives a sparse document-term matrix "
        "(topic models: Dirichlet simplex nest, multinomial kernel).",
        "Wikipedia contributors, Wikipedia, The Free Encyclopedia (articles and page "
        "ids in wikipedia/documents.tsv), via the dump excerpt in gensim 4.4.0's test "
        "data.",
        "CC BY-SA 3.0 (Wikipedia text; the counts are an adaptation shared under the "
        "same licence, see wikipedia/LICENSE.txt).",
        {
            "wikipedia/docword.txt.gz": (
                "a970720e588051aba71e747ae70def41132c7e80c33902e5c0c2070abc8b4a68"
            ),
            "wikipedia/vocab.txt": (
                "5cfd9d121dd307f54daebc81abaaf889e9fd136ed3bc958a03fef931ac93bfd3"
            ),
            "wikipedia/documents.tsv": (
                "c2bc8889233385292eb9e9a1b1d4576545a66014f28d9fcb161e76e46371b081"
            ),
            "wikipedia/LICENSE.txt": (
                "cf79f4b94847051ef1ef11da4d05e768d9951790f5a1b7770c7ed91aab683431"
            ),
        },
        3512,
    ),
}


def get_info(name: str) -> DatasetInfo:
    """Return the registry entry of ``name``; unknown names get a "did you mean".

    Examples
    --------
    >>> get_info("car").n_rows
    1728
    >>> get_info("cars")
    Traceback (most recent call last):
    ...
    bayespmf.datasets._registry.UnknownDatasetError: Unknown data set 'cars'. Did ...
    """
    if not isinstance(name, str) or name.lower() not in REGISTRY:
        close = difflib.get_close_matches(str(name).lower(), list(REGISTRY), n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownDatasetError(
            f"Unknown data set {name!r}.{hint} Available: {', '.join(REGISTRY)}."
        )
    return REGISTRY[name.lower()]


class UnknownDatasetError(DataValidationError, KeyError):
    """Raised for a data set name that is not in the registry."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def read_bytes(path: str, sha256: str) -> bytes:
    """Read a shipped file (decompressing ``.gz``) and verify its checksum."""
    ref = resources.files("bayespmf.datasets").joinpath("data", *path.split("/"))
    raw = ref.read_bytes()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != sha256:
        raise ChecksumError(
            f"Shipped file {path!r} is corrupted: sha256 {digest} != registered "
            f"{sha256}. Reinstall bayespmf."
        )
    return raw
