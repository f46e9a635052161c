"""Text corpora: the shipped Wikipedia paragraphs as a sparse document-term matrix."""

from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import sparse

from bayespmf._validation import DataValidationError
from bayespmf.datasets._registry import get_info, read_bytes

__all__ = ["TextCorpus", "load_wikipedia", "read_bag_of_words"]


class TextCorpus(NamedTuple):
    """A bag-of-words corpus.

    Attributes
    ----------
    counts : scipy.sparse.csr_matrix of int64 (n_documents, n_words)
        Word counts (the ``X`` of ``VLAD(K, kernel="multinomial")``, GDM, SPA,
        :func:`bayespmf.models.simplex_nest_model` and scikit-learn's
        ``LatentDirichletAllocation``).
    vocabulary : list of str
        The word of each column.
    documents : pandas.DataFrame
        One row per document (its source: for Wikipedia ``article``, ``page_id``,
        ``paragraph``).
    """

    counts: sparse.csr_matrix
    vocabulary: list[str]
    documents: pd.DataFrame


def read_bag_of_words(docword: bytes) -> sparse.csr_matrix:
    r"""Parse the UCI bag-of-words format into a sparse matrix.

    Three header lines ``D`` (documents), ``W`` (words), ``NNZ`` (nonzeros), then one
    line ``docID wordID count`` per nonzero, ids 1-based (the format of the UCI
    "Bag of Words" data sets: NYTimes, KOS, NIPS, PubMed, Enron).

    Parameters
    ----------
    docword : bytes
        The file's content (decompressed).

    Returns
    -------
    scipy.sparse.csr_matrix of int64 (D, W)

    Raises
    ------
    DataValidationError
        The header does not match the entries (number, or an id out of range).

    Examples
    --------
    >>> read_bag_of_words(b"2\n3\n3\n1 1 4\n1 3 1\n2 2 7\n").toarray()
    array([[4, 0, 1],
           [0, 7, 0]])
    """
    head = docword.split(b"\n", 3)
    try:
        n_docs, n_words, nnz = (int(x) for x in head[:3])
        body = head[3] if len(head) > 3 else b""
        triples = np.loadtxt(io.BytesIO(body), dtype=np.int64, ndmin=2)
    except ValueError as err:
        raise DataValidationError(
            f"Not a UCI bag-of-words file (D, W, NNZ header lines, then 'doc word "
            f"count' lines): {err}"
        ) from err
    if triples.shape != (nnz, 3) and not (nnz == 0 and triples.size == 0):
        raise DataValidationError(
            f"The bag-of-words header announces {nnz} nonzeros; found {triples.shape[0]}"
            " lines of 'doc word count'."
        )
    rows, cols, vals = triples.reshape(-1, 3).T
    if nnz and (
        rows.min() < 1 or rows.max() > n_docs or cols.min() < 1 or cols.max() > n_words
    ):
        raise DataValidationError(
            f"A document or word id is outside 1..{n_docs} or 1..{n_words} (the ids "
            "of the UCI format are 1-based)."
        )
    return sparse.csr_matrix((vals, (rows - 1, cols - 1)), shape=(n_docs, n_words))


def load_wikipedia() -> TextCorpus:
    """3,512 paragraphs of 104 English Wikipedia articles as word counts (CC BY-SA 3.0).

    The articles (Anarchism, Autism, Albedo, Alabama, Achilles, Abraham Lincoln,
    Aristotle, ..., in a 2016 dump excerpt that gensim ships for its tests) cut into
    paragraphs of at least 30 tokens; vocabulary of 6,693 words (lower-case, 3+
    letters, English stop words removed, in at least 5 and at most 40 % of the
    paragraphs); 170,627 tokens, 133,248 nonzero counts, median 42 tokens per
    paragraph. A corpus with many topics (countries, people, sciences, films) and
    short documents, like the paper's NYT corpus in kind, not in size. Built by
    ``benchmarks/build_wikipedia_corpus.py``; checksummed like every shipped file.

    The text is by Wikipedia contributors, CC BY-SA 3.0: the counts are shared under
    the same licence (``bayespmf/datasets/data/wikipedia/LICENSE.txt``; see
    :func:`bayespmf.datasets.describe`), which applies to anything derived from them.

    Returns
    -------
    TextCorpus
        ``counts`` (3512, 6693) CSR int64, ``vocabulary``, ``documents`` (article,
        page_id, paragraph).

    Examples
    --------
    >>> corpus = load_wikipedia()
    >>> corpus.counts.shape, len(corpus.vocabulary), int(corpus.counts.sum())
    ((3512, 6693), 6693, 170627)
    >>> corpus.documents.article.nunique()
    104
    """
    info = get_info("wikipedia")
    counts = read_bag_of_words(
        read_bytes("wikipedia/docword.txt.gz", info.files["wikipedia/docword.txt.gz"])
    )
    vocab = (
        read_bytes("wikipedia/vocab.txt", info.files["wikipedia/vocab.txt"])
        .decode()
        .split()
    )
    docs = pd.read_csv(
        io.BytesIO(
            read_bytes("wikipedia/documents.tsv", info.files["wikipedia/documents.tsv"])
        ),
        sep="\t",
        index_col="document",
        keep_default_na=False,
    )
    # the license file is verified too: it travels with the data
    read_bytes("wikipedia/LICENSE.txt", info.files["wikipedia/LICENSE.txt"])
    return TextCorpus(counts, vocab, docs)
