"""The shipped Wikipedia corpus and the UCI bag-of-words reader."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bayespmf import datasets
from bayespmf._validation import DataValidationError
from bayespmf.datasets import TextCorpus, load_wikipedia, read_bag_of_words


def test_load_wikipedia():
    corpus = datasets.load("wikipedia")
    assert isinstance(corpus, TextCorpus)
    X = corpus.counts
    assert sp.isspmatrix_csr(X) and X.dtype == np.int64
    assert X.shape == (3512, 6693) and X.nnz == 133248 and X.sum() == 170627
    assert len(corpus.vocabulary) == len(set(corpus.vocabulary)) == 6693
    assert len(corpus.documents) == 3512
    assert X.getnnz(axis=1).min() > 0  # every paragraph has words
    assert (X.getnnz(axis=0) >= 5).all()  # the documented min_df
    # the words of a paragraph about Lincoln
    lincoln = np.flatnonzero(corpus.documents.article.to_numpy() == "Abraham Lincoln")
    words = np.asarray(X[lincoln].sum(axis=0)).ravel()
    top = {corpus.vocabulary[i] for i in np.argsort(-words)[:10]}
    assert "lincoln" in top
    assert "CC BY-SA 3.0" in datasets.describe("wikipedia")


def test_load_wikipedia_is_a_fresh_copy():
    a, b = load_wikipedia(), load_wikipedia()
    a.counts.data[:] = 0
    assert b.counts.sum() == 170627


def test_read_bag_of_words_refusals():
    with pytest.raises(DataValidationError, match="announces 3 nonzeros; found 2"):
        read_bag_of_words(b"2\n3\n3\n1 1 4\n2 2 7\n")
    with pytest.raises(DataValidationError, match="1-based"):
        read_bag_of_words(b"2\n3\n1\n0 1 4\n")
    with pytest.raises(DataValidationError, match="Not a UCI bag-of-words"):
        read_bag_of_words(b"hello\n")
