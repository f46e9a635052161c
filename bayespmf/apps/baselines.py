"""Baselines that the latent-class model is compared with, in the same run.

Classification (MAP of a target given the other variables): scikit-learn's
``CategoricalNB``, multinomial ``LogisticRegression`` and ``LinearSVC`` on one-hot
features. Rating prediction: global, user and movie averages and a biased matrix
factorization fit by alternating least squares (:class:`BiasedMF`).

Each baseline is a small function of (train, validation, test) parts so that
:mod:`bayespmf.apps.tasks` runs it under exactly the protocol of the latent-class methods:
hyperparameters are chosen on the validation part, accuracy or error is measured on the
test part.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp

from bayespmf._validation import check_float, check_int, check_random_state
from bayespmf.pmf import one_hot_design

__all__ = [
    "CLASSIFIER_GRIDS",
    "CLASSIFIERS",
    "RATING_BASELINES",
    "BiasedMF",
    "classifier_features",
    "fit_classifier",
    "make_classifier",
    "one_hot_features",
    "rating_average",
]

#: scikit-learn classifiers run next to the latent-class methods.
CLASSIFIERS = {
    "naive-bayes": "scikit-learn CategoricalNB (a missing entry is its own category)",
    "logistic-regression": "scikit-learn multinomial LogisticRegression, one-hot features",
    "linear-svm": "scikit-learn LinearSVC (one-vs-rest) on one-hot features",
}

#: Hyperparameter grids searched on the validation part (the same protocol as the
#: latent-class rank): the smoothing ``alpha`` of naive Bayes and the inverse
#: regularization ``C`` of the linear models, a decade apart over the range where
#: one-hot problems of a few thousand rows change behaviour.
CLASSIFIER_GRIDS = {
    "naive-bayes": {"alpha": [0.1, 0.5, 1.0, 2.0]},
    "logistic-regression": {"C": [0.01, 0.1, 1.0, 10.0, 100.0]},
    "linear-svm": {"C": [0.001, 0.01, 0.1, 1.0, 10.0]},
}

#: Iteration caps of the scikit-learn solvers: high enough that the one-hot problems
#: here converge at every C in the grid (the defaults, 100 and 1000, do not at C=100).
_LOGREG_MAX_ITER = 5000
_SVM_MAX_ITER = 20000

#: Rating baselines run next to the latent-class methods.
RATING_BASELINES = {
    "global-average": "mean of all training ratings",
    "user-average": "mean of the user's training ratings (global mean if none)",
    "movie-average": "mean of the movie's training ratings (global mean if none)",
    "biased-mf": "biased matrix factorization mu + b_u + b_i + p_u.q_i by ALS "
    "(BiasedMF; rank and L2 penalty chosen on the validation part)",
    "surprise-svd": "scikit-surprise SVD (biased MF by SGD, default settings), if "
    "installed",
}


def one_hot_features(codes, n_categories, exclude: int | None = None) -> sp.csr_matrix:
    """One-hot encoding of categorical codes; a missing entry is an all-zero block.

    Parameters
    ----------
    codes : array_like of int, shape (S, N)
        ``-1`` marks missing entries.
    n_categories : sequence of int
        Alphabet size of each variable.
    exclude : int, optional
        A variable (the target) left out of the features.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (S, sum of the kept I_n)

    Examples
    --------
    >>> one_hot_features([[0, 2], [-1, 1]], [2, 3]).toarray()
    array([[1., 0., 0., 0., 1.],
           [0., 0., 0., 1., 0.]])
    >>> one_hot_features([[0, 2], [-1, 1]], [2, 3], exclude=0).shape
    (2, 3)
    """
    codes = np.asarray(codes, dtype=np.int64)
    keep = [n for n in range(codes.shape[1]) if n != exclude]
    return one_hot_design(codes[:, keep], np.asarray(n_categories, dtype=np.int64)[keep])


def make_classifier(name: str, random_state=None, **params):
    """A scikit-learn classifier of :data:`CLASSIFIERS` with the given hyperparameters.

    ``random_state`` must be an int or None (scikit-learn's convention).

    Examples
    --------
    >>> make_classifier("logistic-regression", C=10.0).C
    10.0
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import CategoricalNB
    from sklearn.svm import LinearSVC

    if name == "naive-bayes":
        return CategoricalNB(**params)
    if name == "logistic-regression":
        return LogisticRegression(max_iter=_LOGREG_MAX_ITER, **params)
    if name == "linear-svm":
        return LinearSVC(max_iter=_SVM_MAX_ITER, random_state=random_state, **params)
    raise ValueError(f"Unknown classifier {name!r}; choose from {list(CLASSIFIERS)}.")


def classifier_features(name: str, codes, n_categories, target: int):
    """Features of ``codes`` for classifier ``name``: what :func:`fit_classifier` uses.

    Naive Bayes gets the codes themselves with a missing entry mapped to an extra
    category ``I_n`` (``CategoricalNB`` needs non-negative codes); the linear models
    get :func:`one_hot_features`.
    """
    codes = np.asarray(codes, dtype=np.int64)
    if name == "naive-bayes":
        keep = [n for n in range(codes.shape[1]) if n != target]
        x = codes[:, keep].copy()
        n_cat = np.asarray(n_categories)[keep]
        miss = x < 0
        x[miss] = np.broadcast_to(n_cat, x.shape)[miss]
        return x
    return one_hot_features(codes, n_categories, exclude=target)


def fit_classifier(name, params, train_codes, n_categories, target, random_state=None):
    """Fit classifier ``name`` on the rows of ``train_codes`` whose target is observed.

    Returns
    -------
    model : fitted scikit-learn estimator
    converged : bool
        False when scikit-learn warned that its solver did not converge (the warning is
        recorded here rather than raised, so that a grid point that does not converge
        is reported, not fatal).
    """
    from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

    y = train_codes[:, target]
    obs = y >= 0
    x = classifier_features(name, train_codes[obs], n_categories, target)
    extra = {}
    if name == "naive-bayes":
        # one more category per feature for "missing", so test rows never fall outside
        keep = [n for n in range(len(n_categories)) if n != target]
        extra["min_categories"] = np.asarray(n_categories)[keep] + 1
    model = make_classifier(name, random_state=random_state, **params, **extra)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkConvergenceWarning)
        model.fit(x, y[obs])
    converged = not any(issubclass(w.category, SkConvergenceWarning) for w in caught)
    for w in caught:
        if not issubclass(w.category, SkConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return model, converged


def rating_average(kind: str, ratings, rows, cols) -> np.ndarray:
    """Global, user (row) or movie (column) average of the training ratings.

    Parameters
    ----------
    kind : {"global-average", "user-average", "movie-average"}
    ratings : array_like of float, shape (users, movies)
        Training ratings, ``nan`` where hidden or never rated.
    rows, cols : ndarray of int
        The entries to predict. A user or movie without training ratings gets the
        global average.

    Examples
    --------
    >>> r = np.array([[1.0, 5.0, np.nan], [3.0, np.nan, np.nan]])
    >>> rating_average("user-average", r, np.array([0, 1]), np.array([2, 1])).tolist()
    [3.0, 3.0]
    >>> rating_average("movie-average", r, np.array([0, 1]), np.array([2, 1])).tolist()
    [3.0, 5.0]
    """
    if kind not in ("global-average", "user-average", "movie-average"):
        raise ValueError(
            f"'kind' must be one of {list(RATING_BASELINES)[:3]}; got {kind!r}."
        )
    r = np.asarray(ratings, dtype=float)
    mask = ~np.isnan(r)
    if not mask.any():
        raise ValueError("'ratings' has no observed entry.")
    mu = float(r[mask].mean())
    if kind == "global-average":
        return np.full(np.shape(rows), mu)
    axis = 1 if kind == "user-average" else 0
    count = mask.sum(axis=axis)
    total = np.where(mask, r, 0.0).sum(axis=axis)
    mean = np.where(count > 0, total / np.maximum(count, 1), mu)
    return mean[rows] if axis == 1 else mean[cols]


class BiasedMF:
    r"""Biased matrix factorization of a rating matrix, fit by alternating least squares.

    .. math::

        \hat r_{ui} = \mu + b_u + b_i + p_u^\top q_i, \qquad
        \min \sum_{(u,i)\ \mathrm{observed}} (r_{ui} - \hat r_{ui})^2
            + \lambda \big(\|p_u\|^2 + b_u^2 + \|q_i\|^2 + b_i^2\big).

    Each half-step solves every user's (or item's) ridge regression in closed form,
    all at once with batched ``numpy.linalg.solve`` over a dense ``(users, items)``
    mask (the rating matrices here have tens of items). The model of Koren, Bell &
    Volinsky (2009), the "BMF" baseline of the CNMF paper (Ibrahim & Fu, Tables 12-14).

    Parameters
    ----------
    n_components : int, default 10
        Dimension of ``p_u`` and ``q_i``.
    reg : float, default 5.0
        L2 penalty :math:`\lambda` on factors and biases.
    n_epochs : int, default 20
        ALS sweeps (users then items).
    random_state : None, int or numpy.random.Generator
        Seeds the initial item factors (normal, standard deviation 0.1).

    Attributes
    ----------
    mean_ : float
    user_factors_, item_factors_ : ndarray, (U, rank), (I, rank)
    user_bias_, item_bias_ : ndarray, (U,), (I,)

    Examples
    --------
    >>> r = np.array([[5.0, 4.0, np.nan], [4.0, np.nan, 1.0], [np.nan, 5.0, 2.0]])
    >>> m = BiasedMF(n_components=1, reg=0.1, random_state=0).fit(r)
    >>> m.predict(np.array([0]), np.array([0])).round(1)
    array([5.])
    """

    def __init__(self, n_components=10, reg=5.0, n_epochs=20, random_state=None):
        self.n_components = n_components
        self.reg = reg
        self.n_epochs = n_epochs
        self.random_state = random_state

    def fit(self, ratings) -> BiasedMF:
        """Fit to a dense rating matrix with ``nan`` for missing entries."""
        n_components = check_int(self.n_components, "n_components", owner="BiasedMF", low=1)
        reg = check_float(self.reg, "reg", owner="BiasedMF", low=0.0)
        n_epochs = check_int(self.n_epochs, "n_epochs", owner="BiasedMF", low=1)
        rng = check_random_state(self.random_state)
        r = np.asarray(ratings, dtype=float)
        mask = ~np.isnan(r)
        if not mask.any():
            raise ValueError("'ratings' has no observed entry.")
        self.mean_ = float(r[mask].mean())
        resid = np.where(mask, r - self.mean_, 0.0)
        w = mask.astype(float)
        n_users, n_items = r.shape
        q = np.hstack(
            [0.1 * rng.standard_normal((n_items, n_components)), np.zeros((n_items, 1))]
        )
        p = np.zeros((n_users, n_components + 1))
        t0 = time.perf_counter()
        for _ in range(n_epochs):
            # users: regress r - mu - b_i on [q_i, 1] -> [p_u, b_u]
            p = self._solve(
                w, resid - q[:, -1][None, :], np.hstack([q[:, :-1], _ones(q)]), reg
            )
            # items: regress r - mu - b_u on [p_u, 1] -> [q_i, b_i]
            q = self._solve(
                w.T, resid.T - p[:, -1][None, :], np.hstack([p[:, :-1], _ones(p)]), reg
            )
        self.user_factors_, self.user_bias_ = p[:, :-1], p[:, -1]
        self.item_factors_, self.item_bias_ = q[:, :-1], q[:, -1]
        self.fit_time_ = time.perf_counter() - t0
        return self

    @staticmethod
    def _solve(w, target, design, reg):
        # for each row u: (X^T W_u X + reg I) beta_u = X^T W_u t_u, batched over u
        gram = np.einsum("ui,ik,il->ukl", w, design, design)
        gram += reg * np.eye(design.shape[1])[None]
        rhs = np.einsum("ui,ik->uk", w * target, design)
        return np.linalg.solve(gram, rhs[..., None])[..., 0]

    def predict(self, rows, cols) -> np.ndarray:
        """Predicted ratings of the entries ``(rows[k], cols[k])`` (not clipped)."""
        return (
            self.mean_
            + self.user_bias_[rows]
            + self.item_bias_[cols]
            + np.einsum("kr,kr->k", self.user_factors_[rows], self.item_factors_[cols])
        )


def _ones(x):
    return np.ones((x.shape[0], 1))
