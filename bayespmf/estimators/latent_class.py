"""``LatentClassPMF``: a scikit-learn-style estimator of a low-rank joint PMF.

The class is assembled from one module per concept: this one holds the parameters,
``fit`` and the fitted PMF itself (its tables, joint tensor and samples); predictions
are in :mod:`bayespmf.estimators._latent_class_predict`, model choice (criteria, fit
statistics, standard errors) in :mod:`bayespmf.estimators._latent_class_criteria`,
what a saved fit holds in :mod:`bayespmf.estimators._latent_class_io` (``save`` and
``load`` themselves, shared with ``LatentClassRegression``, in
:mod:`bayespmf.estimators._persistence`).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from bayespmf._validation import (
    CodeRangeError,
    DataValidationError,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.estimators._base import (
    LabelledFit,
    NotFittedError,
    check_fitted,
    check_ignored_y,
)
from bayespmf.estimators._latent_class_criteria import (
    MAX_GOF_CELLS,
    LatentClassModelChoice,
)
from bayespmf.estimators._latent_class_io import LatentClassSavedState
from bayespmf.estimators._latent_class_predict import LatentClassPrediction
from bayespmf.estimators._persistence import NpzPersistence
from bayespmf.fit.latent_class import METHODS, fit_latent_class
from bayespmf.pmf import LatentClassParams, check_params, joint_pmf

__all__ = ["MAX_GOF_CELLS", "METHODS", "LatentClassPMF", "NotFittedError"]


class LatentClassPMF(
    LatentClassPrediction,
    LatentClassModelChoice,
    LatentClassSavedState,
    NpzPersistence,
    LabelledFit,
    BaseEstimator,
):
    """Low-rank (latent-class, naive Bayes) estimate of a joint PMF with missing data.

    The model is ``Pr(x) = sum_f lambda_f prod_n A_n(x_n, f)`` (Ibrahim & Fu, eq. (3));
    missing entries are marginalized out. A thin estimator over
    :func:`bayespmf.fit.fit_latent_class`, which holds the methods.

    Parameters
    ----------
    n_components : int
        Number of latent classes F.
    method : str, default "auto"
        One of :data:`METHODS`. ``"auto"``: the maximum-likelihood estimate from
        ``n_init`` starts (the CNMF-SPA estimate and random ones, each refined by
        SQUAREM-PMF), the best kept and the distinct optima reported in ``optima_``.
        The others are the single-start algorithms of the papers (``"em"``,
        ``"squarem"``, ``"cnmf-spa"``, ``"cnmf-opt"``, ``"cnmf-spa-em"``, ...).
    n_init : int, optional
        Starts of ``"auto"``. ``None`` (default): rounds of
        :data:`bayespmf.fit.DEFAULT_N_INIT` starts, another round (up to
        ``MAX_ROUNDS``) while the best log-likelihood is not replicated by enough
        refined starts; an integer: exactly that many starts.
    init : "auto", "random" or list of (weights, factors), default "auto"
        Starts of ``"auto"``: the CNMF-SPA estimate plus random ones, random ones
        only, or the given ones.
    max_iter : int, optional
        Iteration cap of the iterative stage; by default that of the method (EM and
        SQUAREM-PMF 1000, each start of ``"auto"`` 2000 SQUAREM-PMF cycles, CNMF-OPT
        3000 iterations).
    tol : float, optional
        Tolerance of the iterative stage; by default 1e-7 for EM/SQUAREM-PMF, 1e-8
        for the starts of ``"auto"``, 1e-7 for CNMF-OPT
        (:data:`bayespmf.fit.defaults.DEFAULT_TOL`). EM stages stop when the
        log-likelihood gain still to come (Aitken estimate from the last increments)
        is at most ``tol * max(|L|, 1)``, so a slow plateau is not mistaken for
        convergence (:mod:`bayespmf.fit.loop`).
    random_state : None, int or numpy.random.Generator
        Seeds every random part: the random starts, the split search of CNMF-SPA,
        JUROR's projections.
    backend : {"auto", "numba", "pytensor", "scipy"}, default "auto"
        The EM map, as in :func:`bayespmf.fit.fit_em` (``"auto"`` is ``"numba"``).
    progressbar : bool, default False
        Show a progress bar over starts or iterations.
    n_categories : int or sequence of int, optional
        Alphabet sizes of the variables, for integer codes (a CategoricalData brings
        its own, which must agree). Given here, every fit of a clone has the full
        alphabets: a fold of ``GridSearchCV`` or ``cross_val_score`` in which a rare
        category does not occur still has it (inferred from the fold, the alphabet
        would stop below it, and scoring the rows that have it would fail). The
        ``n_categories`` keyword of :meth:`fit`, where given, must agree with it.

    Attributes
    ----------
    weights_ : ndarray, shape (F,)
    factors_ : list of ndarray, each (I_n, F)
    n_categories_ : ndarray, shape (N,)
    loglik_ : float
        Total log-likelihood of the fitted rows at the estimate.
    optima_ : pandas.DataFrame or None
        ``"auto"``: one row per distinct optimum (up to label permutation), best
        first: ``loglik``, ``gap`` to the best, ``n_starts`` that reached it,
        ``share``, ``starts``, ``kinds`` and ``converged``.
    n_init_best_ : int or None
        ``"auto"``: starts that reached the best optimum.
    n_iter_ : int
        Iterations of the iterative stage (of the best start for ``"auto"``).
    loglik_trace_ : ndarray
        Total log-likelihood after each EM iteration (empty for methods without EM).
    converged_ : bool
    fit_time_ : float
        Seconds spent in :meth:`fit`.
    info_ : dict
        Details from the stages (e.g. the chosen CNMF-SPA split, every start).

    Notes
    -----
    **scikit-learn conventions.** A ``BaseEstimator``: ``get_params``/``set_params``/
    ``clone`` work and ``score`` (mean log-likelihood per row) serves ``GridSearchCV``.
    ``fit`` takes integer category codes (-1 for missing) and accepts and ignores a
    ``y`` of one entry per row; any other ``y`` is refused, so that an alphabet passed
    positionally is not silently ignored. The ``sklearn.utils.estimator_checks``
    checks that fit on float data do not apply (listed in
    ``tests/test_estimator_checks.py``), nor does ``check_estimators_unfitted``
    (``predict`` needs a ``target``).

    **Data after fit.** ``predict``, ``predict_proba``, ``predict_class_proba``,
    ``score`` and the other methods that take rows bind a DataFrame or
    CategoricalData to the fitted variables by name and category label
    (:func:`bayespmf.data.as_categorical`): columns in another order and alphabets
    listing the labels in another order (or only some of them) are recoded, and
    unknown variables or labels are a ``DataValidationError``. Integer codes, and
    any data given to an estimator fitted on bare codes, are positional. Codes
    returned (``predict`` on a CategoricalData) are those of ``category_labels_``.

    Warns
    -----
    LocalOptimumWarning
        ``"auto"``: the best log-likelihood was not replicated (reached by fewer than
        2 refined starts, or fewer than ``bayespmf.fit.multistart.MIN_BEST_SHARE`` of
        them), after up to ``MAX_ROUNDS`` rounds of starts with the default ``n_init``.
    ConvergenceWarning
        The iterative stage stopped at ``max_iter``.

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, truth = make_latent_class(2000, [3, 4, 3, 5, 4], n_components=2,
    ...                                 random_state=0)
    >>> model = LatentClassPMF(n_components=2, random_state=0).fit(data)
    >>> model.weights_.shape, model.factors_[1].shape
    ((2,), (4, 2))
    >>> model.optima_[["n_starts", "gap"]].round(3).to_numpy().tolist()
    [[30.0, 0.0]]
    >>> bool(model.score(data) < 0)
    True
    """

    #: Constructor parameters, in order (scikit-learn's get_params).
    _PARAMS = (
        "n_components",
        "method",
        "n_init",
        "init",
        "max_iter",
        "tol",
        "random_state",
        "backend",
        "progressbar",
        "n_categories",
    )
    #: Format tag of saved fits; a file with another major version is refused.
    _FORMAT = "bayespmf.LatentClassPMF"
    _FORMAT_VERSION = 1
    _SAVE_HINT = "; bayespmf.io.save(model, 'fit.nc') writes netCDF-4"

    def __init__(
        self,
        n_components: int,
        method: str = "auto",
        *,
        n_init: int | None = None,
        init="auto",
        max_iter: int | None = None,
        tol: float | None = None,
        random_state=None,
        backend: str = "auto",
        progressbar: bool = False,
        n_categories=None,
    ):
        self.n_components = n_components
        self.method = method
        self.n_init = n_init
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.backend = backend
        self.progressbar = progressbar
        self.n_categories = n_categories

    def __repr__(self) -> str:
        return f"LatentClassPMF(n_components={self.n_components!r}, method={self.method!r})"

    # ------------------------------------------------------------------ fitting
    def fit(
        self, data, y=None, *, n_categories=None, sample_weight=None, callback=None
    ) -> LatentClassPMF:
        """Estimate the weights and factors from ``data``.

        Parameters
        ----------
        data : CategoricalData, pandas.DataFrame, array_like of int (S, N), or a source
            ``-1`` marks missing entries. Rows with every entry missing carry no
            information and are ignored. A data source is passed to
            :func:`bayespmf.fit.fit_latent_class` as it is, and a
            :class:`bayespmf.dask.DaskCategoricalData` is fitted chunk by chunk
            through its source (every pass a map-reduce; prefer a single-start
            method there, e.g. ``"cnmf-spa-em"``, as every EM iteration of every start
            of ``"auto"`` is a pass over the chunks). A DataFrame is encoded by
            :meth:`CategoricalData.from_pandas` (labels kept).
        y : None or array_like, shape (S,)
            Ignored (scikit-learn convention: the model is unsupervised, and a
            pipeline or a grid search passes the target along). One entry per row is
            accepted and ignored; anything else is an error, so that an alphabet
            passed positionally, as in earlier versions, is not silently ignored:
            pass ``n_categories=`` by keyword.
        n_categories : sequence of int, optional
            Alphabet sizes (taken from ``data`` when it is a CategoricalData); by
            default the estimator's ``n_categories``, with which it must agree.
        sample_weight : array_like, shape (S,), optional
            Weight of each row (frequencies of response patterns, survey weights);
            the EM-based methods (``"auto"``, ``"em"``, ``"squarem"``,
            ``"cnmf-spa-em"``, ``"cnmf-spa-squarem"``: weighted rows) and
            ``"cnmf-spa"``, ``"cnmf-opt"`` (weighted pairwise marginals). A fit on
            unique patterns with their counts as weights equals the fit on the
            expanded rows.
        callback : callable, optional
            ``callback(n_iter, state)`` after every EM iteration (``state`` is an
            :class:`~bayespmf.kernels.em.EMState`), e.g. to score intermediate
            iterates on validation data; single-start EM methods only.

        Returns
        -------
        self

        Raises
        ------
        DataValidationError
            Malformed data, a variable never observed, a rank that cannot be
            identified, or ``n_categories`` given here and to the estimator, unequal.
        """
        t0 = time.perf_counter()
        check_ignored_y(
            y,
            data,
            owner="LatentClassPMF.fit",
            why="the model is unsupervised; predict any variable with "
            "predict(data, target)",
            fix="To give alphabet sizes, pass n_categories=... by keyword.",
        )
        if isinstance(data, pd.DataFrame):
            data = CategoricalData.from_pandas(data)
        params = self.get_params(deep=False)
        n_categories = _one_alphabet(n_categories, params.pop("n_categories"))
        result = fit_latent_class(
            data,
            **params,
            n_categories=n_categories,
            callback=callback,
            sample_weight=sample_weight,
            owner="LatentClassPMF",
        )
        self._set_fitted(result.params, [a.shape[0] for a in result.params.factors])
        self.loglik_ = float(result.loglik)
        self.optima_ = result.optima
        self.n_init_best_ = result.n_init_best
        self.optima_params_ = result.optima_params
        self.n_iter_ = int(result.n_iter)
        self.loglik_trace_ = np.asarray(result.loglik_trace, dtype=float)
        self.converged_ = bool(result.converged)
        self.info_ = result.info
        self._keep_labels(data)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _set_fitted(self, params: LatentClassParams, n_cat) -> None:
        self.weights_ = np.asarray(params.weights, dtype=float)
        self.factors_ = [np.asarray(a, dtype=float) for a in params.factors]
        self.n_categories_ = np.asarray(n_cat, dtype=np.int64)

    def _check_fitted(self) -> None:
        check_fitted(self, "weights_", "fit(data)")

    @property
    def variable_names_(self) -> list[str] | None:
        """Names of the variables the estimator was fitted on (None for bare codes).

        ``factors_[n]`` belongs to ``variable_names_[n]``; :func:`bayespmf.models.sample`
        and the other posterior functions match factors to a model's variables by
        these names, not by position.
        """
        self._check_fitted()
        names = getattr(self, "_names", None)
        return None if names is None else list(names)

    @property
    def category_labels_(self) -> list[list[str]] | None:
        """Category labels of each fitted variable (row ``i`` of ``factors_[n]``)."""
        self._check_fitted()
        cats = getattr(self, "_categories", None)
        return None if cats is None else [list(c) for c in cats]

    @property
    def params_(self) -> LatentClassParams:
        """The fitted ``LatentClassParams(weights_, factors_)``."""
        self._check_fitted()
        return LatentClassParams(self.weights_, self.factors_)

    def _codes(self, data) -> np.ndarray:
        """``data``'s codes in the fitted variable order and alphabets."""
        self._check_fitted()
        try:
            return self._bound_codes(data)[0]
        except CodeRangeError as err:
            if getattr(self, "_names", None) is not None:
                raise  # fitted on a CategoricalData: its alphabets were explicit
            raise DataValidationError(
                f"{err} The fit has n_categories_={self.n_categories_.tolist()}: "
                "integer codes get the alphabets inferred from the rows given to fit "
                "(max code + 1) unless they are given, so a category absent from those "
                "rows (a rare one, missing from a fold of a grid search) is unknown. "
                "Pass the full alphabets to the estimator, LatentClassPMF(..., "
                "n_categories=[...]), so that every fit and every clone has them, or "
                "fit a CategoricalData, which keeps its alphabets in every subset."
            ) from None

    # ------------------------------------------------------------ the fitted PMF

    def get_parameters_df(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Tidy tables of the estimate, with labels.

        Returns
        -------
        weights : pandas.DataFrame
            One row per class: ``class``, ``weight``.
        conditionals : pandas.DataFrame
            One row per (variable, category, class): ``variable``, ``category``,
            ``class``, ``probability`` (``Pr(x_variable = category | class)``); pivot
            it for a profile table (``.pivot_table(index=["variable", "category"],
            columns="class", values="probability")``).

        Examples
        --------
        >>> m = LatentClassPMF.from_params([0.4, 0.6], [np.array([[0.3, 0.9], [0.7, 0.1]])])
        >>> w, cond = m.get_parameters_df()
        >>> cond.shape, w["weight"].tolist()
        ((4, 4), [0.4, 0.6])
        """
        self._check_fitted()
        weights = pd.DataFrame(
            {"class": np.arange(self.weights_.size), "weight": self.weights_}
        )
        rows = []
        for n, a in enumerate(self.factors_):
            labels = self._labels(n)
            for i, f in np.ndindex(a.shape):
                rows.append((self._names_or_index(n), labels[i], f, a[i, f]))
        cond = pd.DataFrame(rows, columns=["variable", "category", "class", "probability"])
        return weights, cond

    def joint_pmf(self) -> np.ndarray:
        """The full joint PMF tensor (only for small alphabets; a clear error otherwise)."""
        self._check_fitted()
        return joint_pmf(self.weights_, self.factors_)

    def sample(self, n_samples: int, random_state=None) -> CategoricalData:
        """Draw complete rows from the fitted PMF.

        Examples
        --------
        >>> m = LatentClassPMF.from_params([1.0], [np.array([[0.25], [0.75]])] * 2)
        >>> bool(abs(m.sample(4000, random_state=0).codes.mean() - 0.75) < 0.02)
        True
        """
        self._check_fitted()
        n_samples = check_int(n_samples, "n_samples", owner="sample", low=1)
        rng = check_random_state(random_state)
        classes = rng.choice(self.weights_.size, size=n_samples, p=self.weights_)
        codes = np.empty((n_samples, len(self.factors_)), dtype=np.int64)
        for n, a in enumerate(self.factors_):  # loop over variables, vectorized over rows
            cdf = np.cumsum(a, axis=0)[:, classes]  # (I_n, S)
            u = rng.random(n_samples) * cdf[-1]
            codes[:, n] = np.minimum((u[None, :] >= cdf).sum(axis=0), a.shape[0] - 1)
        names, cats = getattr(self, "_names", None), getattr(self, "_categories", None)
        return CategoricalData(codes, self.n_categories_, names, cats)

    def _with_params(self, weights, factors) -> LatentClassPMF:
        params = check_params(weights, factors)
        self._set_fitted(params, [a.shape[0] for a in params.factors])
        self.n_iter_, self.loglik_trace_, self.converged_, self.info_ = (
            0,
            np.array([]),
            True,
            {},
        )
        self.loglik_, self.optima_, self.n_init_best_ = np.nan, None, None
        self.optima_params_ = None
        return self

    @classmethod
    def from_params(cls, weights, factors, **kwargs) -> LatentClassPMF:
        """An estimator holding given parameters (e.g. a truth or a posterior mean)."""
        factors = list(factors)
        return cls(n_components=len(np.asarray(weights)), **kwargs)._with_params(
            weights, factors
        )


def _one_alphabet(given_to_fit, given_to_estimator):
    """The alphabets of a fit: ``fit``'s ``n_categories`` or the estimator's, not two.

    Raises
    ------
    DataValidationError
        Both given, and unequal.
    """
    if given_to_fit is None:
        return given_to_estimator
    if given_to_estimator is None:
        return given_to_fit
    a, b = np.asarray(given_to_fit), np.asarray(given_to_estimator)
    if a.shape != b.shape or np.any(a != b):
        raise DataValidationError(
            f"LatentClassPMF.fit got n_categories={a.tolist()}, but the estimator was "
            f"built with n_categories={b.tolist()}. Give the alphabets once: leave out "
            "fit's keyword, or set_params(n_categories=...)."
        )
    return given_to_fit
