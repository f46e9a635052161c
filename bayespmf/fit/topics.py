r"""Topic-model evaluation: held-out perplexity by document completion and coherence.

For topics :math:`\beta_1, \dots, \beta_K` on a vocabulary of ``D`` words (the
vertices of a multinomial Dirichlet simplex nest, ``VLAD(..., kernel="multinomial")``,
or the normalised ``components_`` of scikit-learn's ``LatentDirichletAllocation``):

- :func:`split_documents` splits every held-out document's words at random into an
  observed and a held part;
- :func:`fold_in` estimates each document's topic weights :math:`\theta_d` from its
  observed part (maximum likelihood with the topics fixed, by EM);
- :func:`perplexity` scores the held part, :math:`\exp(-\sum_{d,w} c_{dw} \log
  (\theta_d^T \beta_{\cdot w}) / \sum_{d,w} c_{dw})`;
- :func:`document_completion_perplexity` chains the three ("document completion",
  Wallach et al. 2009, as the perplexities of Yurochkin et al. 2019, Table 2 and
  Figs. 6-8, and of GDM, Yurochkin & Nguyen 2016);
- :func:`topic_coherence` computes UMass (Mimno et al. 2011) or NPMI (Bouma 2009;
  Lau et al. 2014) coherence of each topic's top words from their document
  co-occurrences in a corpus (the corpus itself: no external reference).

Dense arrays or SciPy sparse document-term matrices (nothing is densified: the work
is on the nonzero counts and on ``n x K`` and ``K x D`` dense arrays).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from bayespmf._validation import (
    DataValidationError,
    check_choice,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.fit.simplex import csr_copy

__all__ = [
    "COHERENCE_MEASURES",
    "DEFAULT_SMOOTHING",
    "FOLD_IN_MAX_ITER",
    "FOLD_IN_TOL",
    "document_completion_perplexity",
    "fold_in",
    "perplexity",
    "split_documents",
    "top_words",
    "topic_coherence",
]

#: Weight of the uniform distribution mixed into every topic before scoring,
#: :math:`(1 - s)\beta_k + s / D`: topics from VLAD, GDM or SPA are projected onto the
#: simplex and have exact zeros, which would make a held-out word of probability 0 an
#: infinite perplexity. The same smoothing is applied to every method compared.
DEFAULT_SMOOTHING = 1e-3

#: EM iterations and tolerance (largest change of a topic weight) of :func:`fold_in`.
FOLD_IN_MAX_ITER = 500
FOLD_IN_TOL = 1e-6

#: The coherence measures of :func:`topic_coherence`.
COHERENCE_MEASURES = ("umass", "npmi")


def _check_topics(topics, owner: str) -> np.ndarray:
    B = np.array(topics, dtype=np.float64)
    if B.ndim != 2 or B.size == 0:
        raise DataValidationError(
            f"'topics' of {owner} must be a non-empty 2-D array (n_topics, n_words); "
            f"got shape {B.shape}."
        )
    if not np.all(np.isfinite(B)) or np.any(B < 0):
        raise DataValidationError(
            f"'topics' of {owner} must be finite and non-negative (word probabilities)."
            " Project them onto the simplex first, e.g. "
            "bayespmf.kernels.simplex.project_simplex(topics, axis=1)."
        )
    sums = B.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > 1e-6):
        k = int(np.argmax(np.abs(sums - 1.0)))
        raise DataValidationError(
            f"Every row of 'topics' of {owner} must sum to 1 (a distribution over the "
            f"vocabulary); row {k} sums to {sums[k]:.6g}. Normalise the rows, e.g. "
            "lda.components_ / lda.components_.sum(axis=1, keepdims=True)."
        )
    return B / sums[:, None]


def _check_docs(X, n_words: int | None, owner: str) -> sparse.csr_matrix:
    need = "a 2-D array or sparse matrix of word counts (n_documents, n_words)"
    M = csr_copy(X, owner, need)
    M.eliminate_zeros()
    if not np.all(np.isfinite(M.data)) or np.any(M.data < 0):
        raise DataValidationError(
            f"'X' of {owner} must hold finite non-negative word counts."
        )
    if np.any(M.data != np.rint(M.data)):
        raise DataValidationError(
            f"'X' of {owner} must hold integer word counts (not frequencies); pass the "
            "raw counts."
        )
    if n_words is not None and M.shape[1] != n_words:
        raise DataValidationError(
            f"'X' of {owner} has {M.shape[1]} columns but the topics have {n_words} "
            "words; use the vocabulary the topics were fitted on."
        )
    return M


def _smooth(B: np.ndarray, smoothing: float) -> np.ndarray:
    return (1.0 - smoothing) * B + smoothing / B.shape[1]


def _entry_probabilities(M: sparse.csr_matrix, theta, B) -> np.ndarray:
    """Each document's word probability at the nonzeros of ``M``.

    One topic at a time: memory is one vector per nonzero, never nonzeros x topics.
    """
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    p = np.zeros(M.nnz)
    for k in range(B.shape[0]):
        p += theta[rows, k] * B[k, M.indices]
    return p


def split_documents(X, fraction: float = 0.5, *, random_state=None):
    """Split every document's words at random into an observed and a held part.

    Each word token goes to the observed part with probability ``fraction``
    (binomial thinning of every count), independently: the two parts are independent
    multinomial samples of the same document (given its length split).

    Parameters
    ----------
    X : array_like or scipy.sparse matrix (n, D)
        Word counts.
    fraction : float in (0, 1), default 0.5
        Expected share of each document's words in the observed part.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    observed, held : scipy.sparse.csr_matrix (n, D)
        Integer counts (float64) with ``observed + held == X``.

    Examples
    --------
    >>> X = np.array([[4, 0, 2], [0, 6, 0]])
    >>> obs, held = split_documents(X, random_state=0)
    >>> bool(((obs + held).toarray() == X).all())
    True
    """
    owner = "split_documents"
    fraction = check_float(
        fraction, "fraction", owner=owner, low=0.0, high=1.0, low_open=True
    )
    if fraction >= 1.0:
        raise DataValidationError(
            f"The 'fraction' parameter of {owner} must be < 1 (some words are held "
            f"out); got {fraction}."
        )
    M = _check_docs(X, None, owner)
    rng = check_random_state(random_state)
    kept = rng.binomial(M.data.astype(np.int64), fraction).astype(np.float64)
    # each part gets its own index arrays (eliminate_zeros works in place)
    obs = sparse.csr_matrix((kept, M.indices.copy(), M.indptr.copy()), shape=M.shape)
    held = sparse.csr_matrix((M.data - kept, M.indices, M.indptr), shape=M.shape)
    obs.eliminate_zeros()
    held.eliminate_zeros()
    return obs, held


def fold_in(
    topics,
    X,
    *,
    smoothing: float = DEFAULT_SMOOTHING,
    max_iter: int = FOLD_IN_MAX_ITER,
    tol: float = FOLD_IN_TOL,
) -> np.ndarray:
    r"""Topic weights of documents with the topics fixed (maximum likelihood, EM).

    Maximises :math:`\sum_w c_{dw} \log(\theta_d^T \beta_{\cdot w})` over the simplex
    for every document ``d`` at once by the EM update :math:`\theta_{dk} \leftarrow
    \theta_{dk} \sum_w c_{dw} \beta_{kw} / (N_d\, \theta_d^T\beta_{\cdot w})` from the
    uniform start (a concave problem: the update never lowers the likelihood). The
    topics are smoothed first as in :func:`perplexity`. A document without words keeps
    the uniform weights.

    Parameters
    ----------
    topics : array_like (K, D)
        Rows are distributions over the vocabulary.
    X : array_like or scipy.sparse matrix (n, D)
        Word counts.
    smoothing : float in [0, 1), default ``DEFAULT_SMOOTHING``
    max_iter : int, default ``FOLD_IN_MAX_ITER``
    tol : float, default ``FOLD_IN_TOL``
        Stop when no weight changes by more than ``tol``.

    Returns
    -------
    ndarray (n, K)
        Rows on the probability simplex.

    Examples
    --------
    >>> topics = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> fold_in(topics, np.array([[1, 1, 2]]), smoothing=0.0).round(4)
    array([[0.5, 0.5]])
    """
    owner = "fold_in"
    B = _check_topics(topics, owner)
    M = _check_docs(X, B.shape[1], owner)
    smoothing = check_float(smoothing, "smoothing", owner=owner, low=0.0, high=1.0)
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    B = _smooth(B, smoothing)
    n, K = M.shape[0], B.shape[0]
    lengths = np.asarray(M.sum(axis=1)).ravel()
    safe = np.where(lengths > 0, lengths, 1.0)
    theta = np.full((n, K), 1.0 / K)
    for _ in range(max_iter):
        p = _entry_probabilities(M, theta, B)
        ratio = sparse.csr_matrix(
            (M.data / np.where(p > 0, p, 1.0), M.indices, M.indptr), shape=M.shape
        )
        new = theta * np.asarray(ratio @ B.T) / safe[:, None]
        new[lengths == 0] = 1.0 / K
        step = float(np.max(np.abs(new - theta)))
        theta = new
        if step <= tol:
            break
    return theta / theta.sum(axis=1, keepdims=True)


def perplexity(topics, theta, X, *, smoothing: float = DEFAULT_SMOOTHING) -> float:
    r"""Perplexity of word counts under topic weights and topics.

    :math:`\exp\bigl(-\sum_{d,w} c_{dw}\log(\theta_d^T\tilde\beta_{\cdot w}) /
    \sum_{d,w} c_{dw}\bigr)` with the smoothed topics :math:`\tilde\beta_k = (1 - s)
    \beta_k + s/D` (``s = smoothing``). Lower is better; a uniform model over ``D``
    words has perplexity ``D``.

    Parameters
    ----------
    topics : array_like (K, D)
    theta : array_like (n, K)
        Topic weights of the documents (rows on the simplex), e.g. from
        :func:`fold_in`.
    X : array_like or scipy.sparse matrix (n, D)
        The counts scored.
    smoothing : float in [0, 1), default ``DEFAULT_SMOOTHING``

    Returns
    -------
    float
        The perplexity, >= 1: the exponential of minus the mean log-probability of a
        word of ``X``.

    Examples
    --------
    >>> topics = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> round(perplexity(topics, [[0.5, 0.5]], [[1, 1, 2]], smoothing=0.0), 4)  # 2^1.5
    2.8284
    """
    owner = "perplexity"
    B = _check_topics(topics, owner)
    M = _check_docs(X, B.shape[1], owner)
    smoothing = check_float(smoothing, "smoothing", owner=owner, low=0.0, high=1.0)
    th = np.asarray(theta, dtype=np.float64)
    if th.shape != (M.shape[0], B.shape[0]):
        raise DataValidationError(
            f"'theta' of {owner} must have shape (n_documents, n_topics) = "
            f"{(M.shape[0], B.shape[0])}; got {th.shape}."
        )
    total = M.data.sum()
    if total == 0:
        raise DataValidationError(f"'X' of {owner} has no words to score.")
    p = _entry_probabilities(M, th, _smooth(B, smoothing))
    with np.errstate(divide="ignore"):
        loglik = float(M.data @ np.log(p))
    return float(np.exp(-loglik / total))


def document_completion_perplexity(
    topics,
    X,
    *,
    fraction: float = 0.5,
    smoothing: float = DEFAULT_SMOOTHING,
    max_iter: int = FOLD_IN_MAX_ITER,
    random_state=None,
) -> float:
    """Held-out perplexity by document completion.

    Every held-out document's words are split at random (:func:`split_documents`,
    ``fraction`` observed); its topic weights are estimated from the observed words
    (:func:`fold_in`) and the other words are scored (:func:`perplexity`). The split
    depends on ``random_state`` only, so the same seed scores every method on the same
    words.

    Parameters
    ----------
    topics : array_like (K, D)
    X : array_like or scipy.sparse matrix (n, D)
        Held-out documents (word counts), not used to fit the topics.
    fraction : float, default 0.5
    smoothing : float, default ``DEFAULT_SMOOTHING``
    max_iter : int, default ``FOLD_IN_MAX_ITER``
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    float
        The :func:`perplexity` of the held-out words, the topic weights estimated from
        the observed ones.

    Examples
    --------
    >>> topics = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> X = np.array([[10, 10, 0], [0, 0, 20], [5, 5, 10]])
    >>> document_completion_perplexity(topics, X, random_state=0) < 2.0
    True
    """
    obs, held = split_documents(X, fraction, random_state=random_state)
    theta = fold_in(topics, obs, smoothing=smoothing, max_iter=max_iter)
    return perplexity(topics, theta, held, smoothing=smoothing)


def top_words(topics, vocabulary=None, n: int = 10) -> list[list]:
    """The ``n`` most probable words of each topic, most probable first.

    Parameters
    ----------
    topics : array_like (K, D)
    vocabulary : sequence of str, optional
        Words by column; without it the column indices are returned.
    n : int, default 10

    Returns
    -------
    list of K lists

    Examples
    --------
    >>> top_words([[0.1, 0.6, 0.3]], ["a", "b", "c"], n=2)
    [['b', 'c']]
    """
    B = np.asarray(topics, dtype=np.float64)
    n = check_int(n, "n", owner="top_words", low=1, high=B.shape[1])
    idx = np.argsort(-B, axis=1, kind="stable")[:, :n]
    if vocabulary is None:
        return idx.tolist()
    vocab = np.asarray(vocabulary, dtype=object)
    return [vocab[row].tolist() for row in idx]


def topic_coherence(topics, X, *, top_n: int = 10, measure: str = "umass") -> np.ndarray:
    r"""Coherence of each topic's top words, from document co-occurrence in ``X``.

    With :math:`D(w)` the number of documents of ``X`` containing word ``w``,
    :math:`D(w, v)` those containing both, ``n`` the documents and
    :math:`w_1, \dots, w_M` a topic's ``M = top_n`` most probable words in
    decreasing probability:

    - ``"umass"`` (Mimno et al. 2011): the mean over the :math:`M(M-1)/2` pairs
      :math:`l < m` of :math:`\log\frac{D(w_m, w_l) + 1}{D(w_l)}` (Mimno's sum
      divided by the number of pairs, as gensim's ``u_mass`` averages); at most
      :math:`\log 2`, usually negative; higher is better;
    - ``"npmi"`` (Bouma 2009; Lau, Newman & Baldwin 2014): the mean over pairs of
      :math:`\log\frac{P(w, v)}{P(w)P(v)} / (-\log P(w, v))` with document
      probabilities :math:`P(w) = D(w)/n`, :math:`P(w, v) = D(w, v)/n`; -1 for a pair
      that never co-occurs, 1 for a pair in every document; in [-1, 1], higher is
      better.

    A top word that occurs in no document of ``X`` counts as occurring in one (UMass;
    otherwise the ratio is undefined).

    Parameters
    ----------
    topics : array_like (K, D)
    X : array_like or scipy.sparse matrix (n, D)
        The reference corpus (word counts; only presence counts), e.g. the training
        documents.
    top_n : int, default 10
    measure : {"umass", "npmi"}, default "umass"

    Returns
    -------
    ndarray (K,)
        One score per topic (average them for one number).

    Examples
    --------
    >>> X = np.array([[1, 1, 0], [1, 0, 1], [1, 1, 0], [0, 0, 1]])
    >>> topic_coherence([[0.6, 0.3, 0.1]], X, top_n=2)  # log((2 + 1) / 3)
    array([0.])
    >>> topic_coherence([[0.6, 0.3, 0.1]], X, top_n=2, measure="npmi").round(4)
    array([0.415])
    """
    owner = "topic_coherence"
    B = _check_topics(topics, owner)
    M = _check_docs(X, B.shape[1], owner)
    top_n = check_int(top_n, "top_n", owner=owner, low=2, high=B.shape[1])
    measure = check_choice(measure, "measure", COHERENCE_MEASURES, owner=owner)
    top = np.argsort(-B, axis=1, kind="stable")[:, :top_n]
    words, pos = np.unique(top, return_inverse=True)
    pos = pos.reshape(top.shape)
    present = M[:, words]
    present.data[:] = 1.0
    df = np.asarray(present.sum(axis=0)).ravel()
    co = (present.T @ present).toarray()
    n_docs = M.shape[0]
    i, j = np.triu_indices(top_n, k=1)  # pairs (l, m), l < m: l ranks higher
    wl, wm = pos[:, i], pos[:, j]
    if measure == "umass":
        scores = np.log((co[wm, wl] + 1.0) / np.maximum(df[wl], 1.0))
    else:
        joint = co[wm, wl] / n_docs
        pl, pm_ = df[wl] / n_docs, df[wm] / n_docs
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(joint / (pl * pm_))
            scores = np.where(
                joint >= 1.0, 1.0, np.where(joint > 0, pmi / -np.log(joint), -1.0)
            )
    return scores.mean(axis=1)
