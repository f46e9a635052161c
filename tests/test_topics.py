"""Held-out perplexity by document completion and topic coherence (bayespmf.fit.topics)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize_scalar

from bayespmf._validation import DataValidationError
from bayespmf.fit.topics import (
    document_completion_perplexity,
    fold_in,
    perplexity,
    split_documents,
    top_words,
    topic_coherence,
)

#: Six documents on a vocabulary of five words, as sets of words with counts.
DOCS = np.array(
    [
        [2, 1, 0, 0, 1],
        [1, 1, 0, 0, 0],
        [0, 0, 3, 1, 0],
        [0, 1, 1, 2, 0],
        [1, 0, 0, 1, 4],
        [0, 0, 2, 0, 1],
    ]
)
TOPICS = np.array([[0.5, 0.3, 0.0, 0.05, 0.15], [0.0, 0.1, 0.5, 0.3, 0.1]])


def test_split_documents_partitions_the_words():
    obs, held = split_documents(DOCS, random_state=0)
    np.testing.assert_array_equal((obs + held).toarray(), DOCS)
    assert obs.min() >= 0 and held.min() >= 0
    again, _ = split_documents(sp.csr_matrix(DOCS), random_state=0)
    np.testing.assert_array_equal(again.toarray(), obs.toarray())
    big = np.full((200, 50), 20)
    share = split_documents(big, 0.3, random_state=1)[0].sum() / big.sum()
    assert share == pytest.approx(0.3, abs=0.01)


def _loglik(theta1, counts, topics):
    p = theta1 * topics[0] + (1 - theta1) * topics[1]
    return sum(c * math.log(q) for c, q in zip(counts, p, strict=True) if c > 0)


def test_fold_in_is_the_maximum_likelihood_weight():
    smoothed = 0.99 * TOPICS + 0.01 / 5
    theta = fold_in(TOPICS, DOCS, smoothing=0.01, tol=1e-12, max_iter=5000)
    for d, counts in enumerate(DOCS):
        best = minimize_scalar(
            lambda t, c=counts: -_loglik(t, c, smoothed),
            bounds=(0.0, 1.0),
            method="bounded",
            options={"xatol": 1e-10},
        ).x
        assert theta[d, 0] == pytest.approx(best, abs=1e-5)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    empty = fold_in(TOPICS, np.zeros((1, 5)))
    np.testing.assert_allclose(empty, [[0.5, 0.5]])


def test_perplexity_by_hand():
    theta = np.array([[0.7, 0.3]] * 3 + [[0.2, 0.8]] * 3)
    s = 0.01
    total, loglik = 0, 0.0
    for d in range(6):
        for w in range(5):
            c = DOCS[d, w]
            if c:
                p = sum(theta[d, k] * ((1 - s) * TOPICS[k, w] + s / 5) for k in range(2))
                loglik += c * math.log(p)
                total += c
    expect = math.exp(-loglik / total)
    assert perplexity(TOPICS, theta, DOCS, smoothing=s) == pytest.approx(expect)
    assert perplexity(TOPICS, theta, sp.csc_matrix(DOCS), smoothing=s) == pytest.approx(
        expect
    )
    # a word of probability 0 without smoothing: infinite perplexity, not a number
    assert perplexity(TOPICS, theta[:, ::-1] * 0 + [1, 0], DOCS, smoothing=0) == np.inf


def test_document_completion_is_split_fold_in_score():
    obs, held = split_documents(DOCS, 0.5, random_state=3)
    theta = fold_in(TOPICS, obs)
    expect = perplexity(TOPICS, theta, held)
    got = document_completion_perplexity(TOPICS, sp.csr_matrix(DOCS), random_state=3)
    assert got == pytest.approx(expect)
    # the true-ish topics beat flat ones on the same split
    flat = np.full((2, 5), 0.2)
    assert got < document_completion_perplexity(flat, DOCS, random_state=3)


def _coherence_by_hand(topic, docs, top_n, measure):
    words = sorted(range(docs.shape[1]), key=lambda w: -topic[w])[:top_n]
    sets = [set(np.flatnonzero(row)) for row in docs]
    n = len(sets)

    def df(*ws):
        return sum(all(w in s for w in ws) for s in sets)

    scores = []
    for (l_, wl), (m_, wm) in itertools.combinations(enumerate(words), 2):
        assert l_ < m_
        if measure == "umass":
            scores.append(math.log((df(wm, wl) + 1) / df(wl)))
        else:
            joint = df(wm, wl) / n
            if joint == 0:
                scores.append(-1.0)
            else:
                pmi = math.log(joint / (df(wl) / n * df(wm) / n))
                scores.append(pmi / -math.log(joint))
    return sum(scores) / len(scores)


@pytest.mark.parametrize("measure", ["umass", "npmi"])
@pytest.mark.parametrize("top_n", [2, 3, 4])
def test_coherence_by_hand(measure, top_n):
    got = topic_coherence(TOPICS, DOCS, top_n=top_n, measure=measure)
    expect = [_coherence_by_hand(t, DOCS, top_n, measure) for t in TOPICS]
    np.testing.assert_allclose(got, expect, rtol=1e-12)
    sparse_got = topic_coherence(TOPICS, sp.csr_matrix(DOCS), top_n=top_n, measure=measure)
    np.testing.assert_allclose(sparse_got, got)


def test_top_words():
    assert top_words(TOPICS, list("abcde"), n=3) == [["a", "b", "e"], ["c", "d", "b"]]
    assert top_words(TOPICS, n=1) == [[0], [2]]


def test_refusals():
    with pytest.raises(DataValidationError, match="row 0 sums to 2"):
        perplexity(TOPICS * 2, np.full((6, 2), 0.5), DOCS)
    with pytest.raises(DataValidationError, match="integer word counts"):
        fold_in(TOPICS, DOCS / 2)
    with pytest.raises(DataValidationError, match="4 columns but the topics have 5"):
        topic_coherence(TOPICS, DOCS[:, :4])
    with pytest.raises(DataValidationError, match="shape"):
        perplexity(TOPICS, np.full((5, 2), 0.5), DOCS)
    with pytest.raises(ValueError, match="measure"):
        topic_coherence(TOPICS, DOCS, top_n=3, measure="cv")
