"""Topic models on text: VLAD, GDM and SPA against scikit-learn's (and gensim's) LDA.

Yurochkin et al. (ICML 2019), Table 2 (left) compare VLAD, GDM, Gibbs, RecoverKL and
SVI on 100k NYT articles by held-out perplexity, coherence and time. Here the shipped
Wikipedia corpus (:func:`bayespmf.datasets.load_wikipedia`: 3,512 paragraphs, 6,693
words) is split once into training and test documents (``--test-fraction``, seeded),
and for each ``K`` every method fits the same sparse training matrix:

- ``VLAD``, ``GDM``, ``SPA``: :class:`~bayespmf.estimators.VLAD`,
  :class:`~bayespmf.estimators.GDM`, :class:`~bayespmf.estimators.SimplexSPA` with
  ``kernel="multinomial"`` (the topics are the vertices);
- ``sklearn-LDA``: ``LatentDirichletAllocation`` (variational Bayes, batch,
  ``--lda-max-iter`` passes, its default priors 1/K), topics = normalised
  ``components_``;
- ``gensim-LDA``: ``gensim.models.LdaModel`` (online VB, ``--lda-max-iter`` passes),
  when gensim is installed (``pip install gensim``; its row says "not installed"
  otherwise).

Every method is scored by the same functions (:mod:`bayespmf.fit.topics`): held-out
perplexity by document completion (each test document's words split at random in
halves with one seed for all methods; the topic weights fitted on one half by maximum
likelihood, the other half scored; the topics mixed with 1e-3 of the uniform
distribution, as every method's) and the mean UMass and NPMI coherence of each topic's
top 10 words in the training documents. Time is the wall time of ``fit``.

``--scale N D`` adds a simulated LDA corpus of ``N`` documents over ``D`` words
(100 words per document, K topics) built sparse, and times VLAD, GDM and SPA on it with
the process's peak memory: the document-term matrix is never densified (at N = 1e5,
D = 1e4 a dense float64 copy would take 8 GB).

    python benchmarks/dsn_text.py                    # K = 10, 20, 40 on Wikipedia
    python benchmarks/dsn_text.py --scale 100000 10000 --k 20
    python benchmarks/dsn_text.py --quick            # 600 documents, K = 5
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings

import numpy as np
import scipy.sparse as sp
from _common import parse_args_quick

from bayespmf.datasets import load_wikipedia
from bayespmf.estimators.simplex import GDM, VLAD, SimplexSPA
from bayespmf.fit.topics import document_completion_perplexity, top_words, topic_coherence

OURS = {"VLAD": VLAD, "GDM": GDM, "SPA": SimplexSPA}


def fit_ours(name, X, K, seed):
    kw = {} if name == "SPA" else {"random_state": seed}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VLAD's diagnostics are reported in its row
        est = OURS[name](K, "multinomial", **kw).fit(X)
    topics = est.vertices_ / est.vertices_.sum(axis=1, keepdims=True)
    note = ""
    if name == "VLAD":
        note = f"alpha={float(np.mean(est.alpha_)):.3g}"
        if est.fallback_:
            note += f" ({est.fallback_})"
    return topics, note


def fit_sklearn_lda(X, K, seed, max_iter):
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(
        n_components=K, learning_method="batch", max_iter=max_iter, random_state=seed
    ).fit(X)
    comp = lda.components_
    return comp / comp.sum(axis=1, keepdims=True), f"{max_iter} iterations"


def fit_gensim_lda(X, K, seed, max_iter):
    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaModel

    corpus = Sparse2Corpus(X, documents_columns=False)
    id2word = {i: str(i) for i in range(X.shape[1])}
    lda = LdaModel(
        corpus, num_topics=K, id2word=id2word, passes=max_iter, random_state=seed
    )
    topics = lda.get_topics()
    return topics / topics.sum(axis=1, keepdims=True), f"{max_iter} passes"


def split(X, test_fraction, seed):
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.shape[0])
    n_test = round(test_fraction * X.shape[0])
    return X[np.sort(order[n_test:])], X[np.sort(order[:n_test])]


def corpus_table(args) -> None:
    corpus = load_wikipedia()
    X = corpus.counts
    if args.n_docs and args.n_docs < X.shape[0]:
        keep = np.sort(np.random.default_rng(args.seed).permutation(X.shape[0]))
        X = X[keep[: args.n_docs]]
        X = X[:, np.flatnonzero(X.getnnz(axis=0) > 0)]
        vocab = None
    else:
        vocab = corpus.vocabulary
    train, test = split(X, args.test_fraction, args.seed)
    train = train[train.getnnz(axis=1) > 0]
    print(
        f"Wikipedia paragraphs: {train.shape[0]} training / {test.shape[0]} test "
        f"documents, {X.shape[1]} words, {int(train.sum())} training tokens"
    )
    print("perplexity: held-out document completion (lower is better); coherence of the")
    print("top 10 words in the training documents (higher is better)")
    print(
        f"{'K':>4} {'method':<12} {'time_s':>8} {'perplexity':>11} {'umass':>7} "
        f"{'npmi':>7}  note"
    )
    for K in args.k:
        for name in args.methods:
            try:
                t0 = time.perf_counter()
                if name in OURS:
                    topics, note = fit_ours(name, train, K, args.seed)
                elif name == "sklearn-LDA":
                    topics, note = fit_sklearn_lda(train, K, args.seed, args.lda_max_iter)
                else:
                    topics, note = fit_gensim_lda(train, K, args.seed, args.lda_max_iter)
                elapsed = time.perf_counter() - t0
            except ImportError:
                print(f"{K:>4} {name:<12} {'not installed':>8}")
                continue
            ppl = document_completion_perplexity(topics, test, random_state=args.seed)
            umass = topic_coherence(topics, train, measure="umass").mean()
            npmi = topic_coherence(topics, train, measure="npmi").mean()
            print(
                f"{K:>4} {name:<12} {elapsed:8.2f} {ppl:11.1f} {umass:7.3f} "
                f"{npmi:7.3f}  {note}",
                flush=True,
            )
            if args.show_topics and vocab is not None:
                for k, words in enumerate(top_words(topics, vocab, 8)[: args.show_topics]):
                    print(f"{'':>18}topic {k}: {' '.join(words)}")


def simulated_lda(n_docs, n_words, K, words_per_doc, alpha, seed):
    """A sparse LDA corpus, token by token (never an n_docs x n_words dense array)."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(n_words, 0.05), size=K)
    theta = rng.dirichlet(np.full(K, alpha), size=n_docs)
    per_topic = rng.multinomial(words_per_doc, theta)  # (n_docs, K)
    docs, words = [], []
    for k in range(K):
        docs.append(np.repeat(np.arange(n_docs), per_topic[:, k]))
        words.append(rng.choice(n_words, size=per_topic[:, k].sum(), p=topics[k]))
    docs, words = np.concatenate(docs), np.concatenate(words)
    X = sp.csr_matrix(
        (np.ones(docs.size, dtype=np.int64), (docs, words)), shape=(n_docs, n_words)
    )
    X.sum_duplicates()
    return X, topics


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def scale_table(args) -> None:
    n_docs, n_words = args.scale
    K = args.k[0]
    X, truth = simulated_lda(n_docs, n_words, K, 100, 0.1, args.seed)
    from bayespmf.metrics import min_matching_distance

    dense_gb = n_docs * n_words * 8 / 2**30
    print(
        f"\nsimulated LDA: {n_docs} documents x {n_words} words (K = {K}, 100 words "
        f"per document, alpha = 0.1), {X.nnz} nonzeros ({X.nnz / n_docs / n_words:.2%})"
        f"; a dense float64 copy would take {dense_gb:.1f} GB; peak so far "
        f"{peak_gb():.2f} GB"
    )
    print(f"{'method':<8} {'time_s':>8} {'peak_GB':>8} {'min-match':>10}")
    for name in [m for m in args.methods if m in OURS]:
        t0 = time.perf_counter()
        topics, _ = fit_ours(name, X, K, args.seed)
        elapsed = time.perf_counter() - t0
        dist = min_matching_distance(topics, truth)
        print(f"{name:<8} {elapsed:8.2f} {peak_gb():8.2f} {dist:10.4f}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["VLAD", "GDM", "SPA", "sklearn-LDA", "gensim-LDA"],
        choices=["VLAD", "GDM", "SPA", "sklearn-LDA", "gensim-LDA"],
    )
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--n-docs", type=int, default=0, help="a random subset (0: all)")
    parser.add_argument("--lda-max-iter", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show-topics", type=int, default=0, metavar="N")
    parser.add_argument("--scale", type=int, nargs=2, metavar=("N_DOCS", "N_WORDS"))
    args = parse_args_quick(parser, argv, k=[5], n_docs=600, lda_max_iter=5)
    corpus_table(args)
    if args.scale:
        scale_table(args)


if __name__ == "__main__":
    main()
