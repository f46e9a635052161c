"""``LatentClassPMF``: a scikit-learn-style estimator of a low-rank joint PMF."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError as SklearnNotFittedError

from bayespmf._npz import (
    CorruptFileError,
    check_suffix,
    decode_value,
    encode_value,
    load_fit,
    save_fit,
)
from bayespmf._validation import (
    DataValidationError,
    as_codes,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData, bind_rows
from bayespmf.fit.latent_class import METHODS, fit_latent_class
from bayespmf.pmf import (
    LatentClassParams,
    check_params,
    conditional_pmf,
    joint_pmf,
    log_likelihood_rows,
    posterior_classes,
)

__all__ = ["METHODS", "LatentClassPMF", "NotFittedError"]

#: Format tag of saved fits; a file with another major version is refused.
_FORMAT = "bayespmf.LatentClassPMF"
_FORMAT_VERSION = 1

#: Largest table of response patterns goodness_of_fit enumerates (8 MB of float64).
MAX_GOF_CELLS = 1_000_000

#: Constructor parameters, in order (scikit-learn's get_params).
_PARAMS = (
    "rank",
    "method",
    "n_init",
    "init",
    "max_iter",
    "tol",
    "random_state",
    "backend",
    "progressbar",
)


class NotFittedError(SklearnNotFittedError):
    """The estimator is used before ``fit``.

    A subclass of scikit-learn's (itself a ``ValueError`` and an ``AttributeError``), so
    ``except NotFittedError`` clauses written for scikit-learn catch it.
    """


def _check_ignored_y(y, data) -> None:
    """Accept ``y`` that a scikit-learn tool passes along (one entry per row).

    Anything else (e.g. an alphabet passed positionally, as ``fit(data, [3, 4])`` did
    in earlier versions) is refused rather than silently ignored.
    """
    if y is None:
        return
    n_rows = getattr(data, "n_samples", None)
    if n_rows is None:
        n_rows = len(data) if hasattr(data, "__len__") else None
    if np.ndim(y) == 1 and n_rows is not None and len(y) == n_rows:
        return
    raise ValueError(
        f"LatentClassPMF.fit: 'y' is ignored (the model is unsupervised; predict any "
        f"variable with predict(data, target)), and must be None or one entry per row "
        f"({n_rows}); got {type(y).__name__} of shape {np.shape(y)}. To give alphabet "
        "sizes, pass n_categories=... by keyword."
    )


class LatentClassPMF(BaseEstimator):
    """Low-rank (latent-class, naive Bayes) estimate of a joint PMF with missing data.

    The model is ``Pr(x) = sum_f lambda_f prod_n A_n(x_n, f)`` (Ibrahim & Fu, eq. (3));
    missing entries are marginalized out. A thin estimator over
    :func:`bayespmf.fit.fit_latent_class`, which holds the methods.

    Parameters
    ----------
    rank : int
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
        3000 sweeps).
    tol : float, optional
        Tolerance of the iterative stage; by default 1e-7 for EM/SQUAREM-PMF, 1e-10
        for the starts of ``"auto"``, 1e-6 for CNMF-OPT. EM stages stop when the
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
    ``fit`` takes integer category codes (-1 for missing) and refuses ``y``, so that an
    alphabet passed positionally is not silently ignored. The
    ``sklearn.utils.estimator_checks`` checks that fit on float data with a ``y``
    therefore do not apply (listed in ``tests/test_estimator_checks.py``), nor does
    ``check_estimators_unfitted`` (``predict`` needs a ``target``).

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
        2 refined starts, or fewer than ``bayespmf.fit.latent_class.MIN_BEST_SHARE`` of
        them), after up to ``MAX_ROUNDS`` rounds of starts with the default ``n_init``.
    ConvergenceWarning
        The iterative stage stopped at ``max_iter``.

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, truth = make_latent_class(2000, [3, 4, 3, 5, 4], rank=2, random_state=0)
    >>> model = LatentClassPMF(rank=2, random_state=0).fit(data)
    >>> model.weights_.shape, model.factors_[1].shape
    ((2,), (4, 2))
    >>> model.optima_[["n_starts", "gap"]].round(3).to_numpy().tolist()
    [[30.0, 0.0]]
    >>> bool(model.score(data) < 0)
    True
    """

    def __init__(
        self,
        rank: int,
        method: str = "auto",
        *,
        n_init: int | None = None,
        init="auto",
        max_iter: int | None = None,
        tol: float | None = None,
        random_state=None,
        backend: str = "auto",
        progressbar: bool = False,
    ):
        self.rank = rank
        self.method = method
        self.n_init = n_init
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.backend = backend
        self.progressbar = progressbar

    def __repr__(self) -> str:
        return f"LatentClassPMF(rank={self.rank!r}, method={self.method!r})"

    # ------------------------------------------------------------------ fitting
    def fit(
        self, data, y=None, *, n_categories=None, sample_weight=None, callback=None
    ) -> LatentClassPMF:
        """Estimate the weights and factors from ``data``.

        Parameters
        ----------
        data : CategoricalData, pandas.DataFrame, array_like of int (S, N), or a source
            ``-1`` marks missing entries. Rows with every entry missing carry no
            information and are ignored. A data source (e.g. from ``bayespmf.dask``)
            is passed to :func:`bayespmf.fit.fit_latent_class` as it is. A DataFrame is
            encoded by :meth:`CategoricalData.from_pandas` (labels kept).
        y : None or array_like, shape (S,)
            Ignored (scikit-learn convention: the model is unsupervised, and a
            pipeline or a grid search passes the target along). One entry per row is
            accepted and ignored; anything else is an error, so that an alphabet
            passed positionally, as in earlier versions, is not silently ignored:
            pass ``n_categories=`` by keyword.
        n_categories : sequence of int, optional
            Alphabet sizes (taken from ``data`` when it is a CategoricalData).
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
            Malformed data, a variable never observed, or a rank that cannot be
            identified.
        """
        t0 = time.perf_counter()
        _check_ignored_y(y, data)
        if isinstance(data, pd.DataFrame):
            data = CategoricalData.from_pandas(data)
        result = fit_latent_class(
            data,
            self.rank,
            self.method,
            n_categories=n_categories,
            n_init=self.n_init,
            init=self.init,
            max_iter=self.max_iter,
            tol=self.tol,
            random_state=self.random_state,
            backend=self.backend,
            progressbar=self.progressbar,
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
        self._names = getattr(data, "names", None)
        self._categories = getattr(data, "categories", None)
        if self._names is not None:
            self._names = list(self._names)
        if self._categories is not None:
            self._categories = [list(c) for c in self._categories]
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _set_fitted(self, params: LatentClassParams, n_cat) -> None:
        self.weights_ = np.asarray(params.weights, dtype=float)
        self.factors_ = [np.asarray(a, dtype=float) for a in params.factors]
        self.n_categories_ = np.asarray(n_cat, dtype=np.int64)

    def _check_fitted(self) -> None:
        if not hasattr(self, "weights_"):
            raise NotFittedError(
                "This LatentClassPMF is not fitted yet; call fit(data) first."
            )

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
        """``data``'s codes in the fitted variable order and alphabets.

        A DataFrame or CategoricalData is bound to the fitted variables by name and
        category label (:func:`bayespmf.data.as_categorical`): other column orders and
        alphabets are recoded, data that do not fit are refused. Integer codes, and
        any data given to an estimator fitted on bare codes (no names), are positional.
        """
        self._check_fitted()
        data = bind_rows(
            data,
            self.n_categories_,
            getattr(self, "_names", None),
            getattr(self, "_categories", None),
        )
        codes, _ = as_codes(data, self.n_categories_, name="data", allow_empty_columns=True)
        return codes

    def _labels(self, n: int) -> list:
        cats = getattr(self, "_categories", None)
        return list(cats[n]) if cats is not None else list(range(self.n_categories_[n]))

    @staticmethod
    def _as_frame(data, values, columns):
        """``values`` as a DataFrame indexed like a DataFrame ``data``; else as is."""
        if not isinstance(data, pd.DataFrame):
            return values
        return pd.DataFrame(values, index=data.index, columns=columns)

    @staticmethod
    def _as_series(data, values, name):
        if not isinstance(data, pd.DataFrame):
            return values
        return pd.Series(values, index=data.index, name=name)

    def _target(self, target) -> int:
        if isinstance(target, str):
            names = getattr(self, "_names", None)
            if names is None or target not in names:
                raise DataValidationError(
                    f"Unknown target {target!r}; the fitted variables are "
                    f"{names if names is not None else 'unnamed (use an index)'}."
                )
            return names.index(target)
        return check_int(target, "target", low=0, high=len(self.factors_) - 1)

    # ------------------------------------------------------------------ inference
    def score_samples(self, data) -> np.ndarray:
        """Log-likelihood of the observed entries of each row, shape (S,).

        A pandas Series indexed like ``data`` when ``data`` is a DataFrame.
        """
        ll = log_likelihood_rows(self._codes(data), self.weights_, self.factors_)
        return self._as_series(data, ll, "loglik")

    def score(self, data) -> float:
        """Mean log-likelihood of the observed entries per row.

        Rows with every entry missing contribute 0.
        """
        return float(np.mean(np.asarray(self.score_samples(data))))

    # ------------------------------------------------------------ model choice
    @property
    def n_parameters_(self) -> int:
        """Free parameters: ``F (1 + sum_n (I_n - 1)) - 1`` (weights and factors)."""
        self._check_fitted()
        per_class = 1 + int(np.sum(self.n_categories_ - 1))
        return self.weights_.size * per_class - 1

    def _loglik_and_rows(self, data) -> tuple[float, int]:
        codes = self._codes(data)
        n_rows = int((codes >= 0).any(axis=1).sum())  # all-missing rows carry nothing
        return float(self.score_samples(codes).sum()), n_rows

    def aic(self, data) -> float:
        """Akaike's criterion ``-2 L + 2 k`` on ``data`` (lower is better).

        Examples
        --------
        >>> m = LatentClassPMF.from_params([1.0], [np.array([[0.5], [0.5]])] * 2)
        >>> round(m.aic([[0, 1], [1, 1]]), 4)  # L = 2 log(1/4), k = 2
        9.5452
        """
        ll, _ = self._loglik_and_rows(data)
        return -2.0 * ll + 2.0 * self.n_parameters_

    def bic(self, data) -> float:
        """Schwarz's criterion ``-2 L + k log S`` (S: rows with an observed entry)."""
        ll, n = self._loglik_and_rows(data)
        return -2.0 * ll + self.n_parameters_ * np.log(n)

    def caic(self, data) -> float:
        """Consistent AIC ``-2 L + k (log S + 1)`` (Bozdogan 1987)."""
        ll, n = self._loglik_and_rows(data)
        return -2.0 * ll + self.n_parameters_ * (np.log(n) + 1.0)

    def sabic(self, data) -> float:
        """Sample-size adjusted BIC ``-2 L + k log((S + 2) / 24)`` (Sclove 1987)."""
        ll, n = self._loglik_and_rows(data)
        return -2.0 * ll + self.n_parameters_ * np.log((n + 2.0) / 24.0)

    def relative_entropy(self, data) -> float:
        r"""Relative entropy of the class assignment, in [0, 1] (1: crisp classes).

        ``1 - sum_s sum_f -p_sf log p_sf / (S log F)`` with ``p_sf`` the posterior
        class probabilities (:meth:`predict_class_proba`), as poLCA and Mplus report
        it ("entropy"). 1 for a one-class model.
        """
        p = self.predict_class_proba(data)
        codes = self._codes(data)
        p = p[(codes >= 0).any(axis=1)]
        if self.weights_.size == 1:
            return 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = -np.sum(np.where(p > 0, p * np.log(p), 0.0))
        return float(1.0 - ent / (p.shape[0] * np.log(self.weights_.size)))

    def goodness_of_fit(self, data) -> dict:
        r"""Likelihood-ratio ``G^2`` and Pearson ``chi^2`` against the saturated model.

        Over the table of all ``prod_n I_n`` response patterns, with the observed counts
        ``o`` of the *complete* rows of ``data`` and expected counts ``e = n Pr(x)``:
        ``G^2 = 2 sum_{o>0} o log(o / e)`` and ``chi^2 = sum (o - e)^2 / e`` (every
        cell), on ``prod I_n - 1 - k`` degrees of freedom (poLCA's ``Gsq``/``Chisq``).
        Rows with a missing entry are left out (the saturated model of a table with
        missing cells is not defined without a missingness model).

        Returns
        -------
        dict
            ``G2``, ``chi2``, ``df``, ``p_G2``, ``p_chi2`` (chi-square tail
            probabilities; unreliable when many expected counts are below 5, reported
            as ``sparse_share``), ``n_complete``, ``n_cells``.

        Raises
        ------
        DataValidationError
            No complete row, more than ``MAX_GOF_CELLS`` patterns (the table cannot be
            enumerated), or ``df <= 0`` (the rank is too large for the table).

        Examples
        --------
        >>> m = LatentClassPMF.from_params([1.0], [np.array([[0.5], [0.5]])] * 3)
        >>> gof = m.goodness_of_fit([[0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 1]])
        >>> gof["df"], round(gof["G2"], 4), round(gof["chi2"], 4)
        (4, 5.5452, 4.0)
        """
        from scipy.stats import chi2 as chi2_dist

        codes = self._codes(data)
        n_cells = math.prod(int(i) for i in self.n_categories_)
        if n_cells > MAX_GOF_CELLS:
            raise DataValidationError(
                f"goodness_of_fit: the table has {n_cells:.3g} response patterns "
                f"(more than {MAX_GOF_CELLS:.0e}), too many to enumerate; compare "
                "models by bic(), or by held-out log-likelihood instead."
            )
        df = n_cells - 1 - self.n_parameters_
        if df <= 0:
            raise DataValidationError(
                f"goodness_of_fit: rank {self.weights_.size} has {self.n_parameters_} "
                f"free parameters, as many as the {n_cells}-cell table allows (df = "
                f"{df}); G^2 and chi^2 need a smaller rank."
            )
        complete = codes[(codes >= 0).all(axis=1)]
        if complete.shape[0] == 0:
            raise DataValidationError(
                "goodness_of_fit: no row of 'data' is complete; the table of response "
                "patterns needs complete rows."
            )
        cell = np.ravel_multi_index(complete.T, tuple(int(i) for i in self.n_categories_))
        observed = np.bincount(cell, minlength=n_cells).astype(float)
        n = complete.shape[0]
        expected = n * self.joint_pmf().ravel()
        seen = observed > 0
        g2 = 2.0 * float(np.sum(observed[seen] * np.log(observed[seen] / expected[seen])))
        with np.errstate(divide="ignore"):
            chi2 = float(np.sum((observed - expected) ** 2 / expected))
        return {
            "G2": g2,
            "chi2": chi2,
            "df": int(df),
            "p_G2": float(chi2_dist.sf(g2, df)),
            "p_chi2": float(chi2_dist.sf(chi2, df)),
            "sparse_share": float(np.mean(expected < 5.0)),
            "n_complete": int(n),
            "n_cells": int(n_cells),
        }

    def standard_errors(
        self, data, *, method: str = "information", sample_weight=None, **kwargs
    ):
        """Standard errors of ``weights_`` and ``factors_`` on the data they were fitted to.

        A thin wrapper of :func:`bayespmf.fit.standard_errors` (observed information
        with the delta method, or a bootstrap with label alignment); ``data`` may be a
        DataFrame. Boundary entries (estimated 0 or 1) get NaN. The posterior
        (:func:`bayespmf.models.sample`) is the recommended uncertainty; these are the
        asymptotic ones poLCA and Mplus report.

        Parameters
        ----------
        data : CategoricalData, pandas.DataFrame or array_like of int
        method : {"information", "bootstrap"}, default "information"
        sample_weight : array_like, optional
            As in :meth:`fit`.
        **kwargs
            Passed on (e.g. ``information="opg"``, ``n_bootstrap=``).

        Returns
        -------
        bayespmf.fit.standard_errors.StandardErrors
            ``.weights`` (F,), ``.factors`` (list of (I_n, F)), ``.method``, ...

        Examples
        --------
        >>> from bayespmf.datasets import make_latent_class
        >>> data, _ = make_latent_class(2000, [3, 3, 3, 3], rank=2, random_state=0,
        ...                             factor_prior="separable", epsilon=0.1)
        >>> est = LatentClassPMF(2, n_init=10, random_state=0).fit(data)
        >>> se = est.standard_errors(data)
        >>> se.weights.shape, bool((se.weights > 0).all())
        ((2,), True)
        """
        from bayespmf.fit.standard_errors import standard_errors

        kwargs.setdefault("random_state", self.random_state)
        return standard_errors(
            self._codes(data),
            self.params_,
            method=method,
            sample_weight=sample_weight,
            n_categories=self.n_categories_,
            **kwargs,
        )

    # ------------------------------------------------------------ class membership
    def predict_class_proba(self, data) -> np.ndarray:
        """Posterior class probabilities of each row given its observed entries, (S, F).

        Bayes' rule ``Pr(H=f | x_obs) = lambda_f prod_n A_n(x_n, f) / Pr(x_obs)`` over
        the observed entries (missing ones marginalized); a row with no observed entry
        gets the class weights.

        Examples
        --------
        >>> m = LatentClassPMF.from_params([0.5, 0.5], [np.array([[0.9, 0.2], [0.1, 0.8]])])
        >>> m.predict_class_proba([[0], [-1]]).round(3)
        array([[0.818, 0.182],
               [0.5  , 0.5  ]])
        """
        p = posterior_classes(self._codes(data), self.weights_, self.factors_)
        return self._as_frame(data, p, pd.RangeIndex(self.weights_.size, name="class"))

    def predict_class(self, data) -> np.ndarray:
        """Modal class of each row (argmax of :meth:`predict_class_proba`), (S,)."""
        p = np.asarray(self.predict_class_proba(data))
        return self._as_series(data, np.argmax(p, axis=1), "class")

    def predict_proba(self, data, target) -> np.ndarray:
        """PMF of variable ``target`` given each row's other observed entries, (S, I_t).

        Examples
        --------
        >>> from bayespmf.datasets import make_latent_class
        >>> data, _ = make_latent_class(500, 3, rank=2, n_variables=4, random_state=1)
        >>> m = LatentClassPMF(2, random_state=0).fit(data)
        >>> np.allclose(m.predict_proba(data, target=0).sum(axis=1), 1.0)
        True
        """
        t = self._target(target)
        p = conditional_pmf(self._codes(data), self.weights_, self.factors_, t)
        return self._as_frame(data, p, self._labels(t))

    def predict(self, data, target) -> np.ndarray:
        """MAP code of ``target`` given each row's other observed entries, (S,).

        For a DataFrame ``data``: a Series of category labels indexed like it.
        """
        t = self._target(target)
        code = np.argmax(np.asarray(self.predict_proba(data, target)), axis=1)
        if not isinstance(data, pd.DataFrame):
            return code
        labels = np.asarray(self._labels(t), dtype=object)
        return pd.Series(labels[code], index=data.index, name=self._names_or_index(t))

    def _names_or_index(self, n: int):
        names = getattr(self, "_names", None)
        return names[n] if names is not None else n

    def expected_value(self, data, target, values=None) -> np.ndarray:
        """MMSE estimate ``E[v(x_target) | other observed entries]`` per row.

        Parameters
        ----------
        values : array_like, shape (I_t,), optional
            Numeric value of each category (default: the codes 0..I_t-1; e.g. pass
            ``[1, 2, 3, 4, 5]`` for star ratings).
        """
        proba = np.asarray(self.predict_proba(data, target))
        v = (
            np.arange(proba.shape[1], dtype=float)
            if values is None
            else np.asarray(values, float)
        )
        if v.shape != (proba.shape[1],):
            raise DataValidationError(
                f"'values' must have one entry per category of the target "
                f"({proba.shape[1]}); got shape {v.shape}."
            )
        return self._as_series(data, proba @ v, self._names_or_index(self._target(target)))

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
        return cls(rank=len(np.asarray(weights)), **kwargs)._with_params(weights, factors)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> Path:
        """Save the fit to ``path`` (``.npz``: arrays plus JSON metadata, no pickle).

        Every fitted attribute and every parameter is saved exactly (a
        ``numpy.random.Generator`` as its state, given starts as arrays, ``optima_``
        with its dtypes, ``info_``), with a SHA-256 checksum of the content. The file
        is written to a temporary file beside ``path`` and renamed over it: a failed
        save leaves an existing file as it was. :func:`bayespmf.io.save` writes the
        same content as netCDF-4.

        Raises
        ------
        ValueError
            ``path`` does not end in ``.npz``, or the estimator is not fitted.

        Examples
        --------
        >>> import tempfile, os
        >>> m = LatentClassPMF.from_params([0.4, 0.6], [np.array([[0.3, 0.9], [0.7, 0.1]])])
        >>> p = m.save(os.path.join(tempfile.mkdtemp(), "fit.npz"))
        >>> m2 = LatentClassPMF.load(p)
        >>> np.array_equal(m2.weights_, m.weights_)
        True
        """
        path = check_suffix(
            path,
            owner="LatentClassPMF.save",
            hint="; bayespmf.io.save(model, 'fit.nc') writes netCDF-4",
        )
        meta, arrays = self._saved_state()
        return save_fit(
            path,
            meta,
            fmt=_FORMAT,
            version=_FORMAT_VERSION,
            owner="LatentClassPMF.save",
            **arrays,
        )

    #: Fitted attributes saved as arrays (``n_categories_``: their shapes); the others go
    #: to the metadata, encoded exactly.
    _SAVED_ARRAYS = (
        "weights_",
        "factors_",
        "n_categories_",
        "loglik_trace_",
        "optima_params_",
    )

    def _saved_state(self) -> tuple[dict, dict]:
        """What :meth:`save` and :func:`bayespmf.io.save` write: metadata and arrays.

        The metadata keeps the plain JSON keys of bayespmf 0.2 (``params`` without
        ``random_state``, ``n_iter``, ``names``, ...) for older readers, and under
        ``exact`` every parameter and every fitted attribute that is not an array here,
        encoded by :func:`bayespmf._npz.encode_value`.
        """
        self._check_fitted()
        params = self.get_params(deep=False)
        plain = {k: v for k, v in params.items() if k != "random_state"}
        if not isinstance(plain["init"], str):  # older readers: given starts not kept
            plain["init"] = "auto"
        optima = getattr(self, "optima_", None)
        attributes = {
            k: v
            for k, v in vars(self).items()
            if k not in _PARAMS and k not in self._SAVED_ARRAYS
        }
        meta = {
            "params": plain,
            "n_iter": int(self.n_iter_),
            "converged": bool(self.converged_),
            "loglik": float(getattr(self, "loglik_", np.nan)),
            "n_init_best": getattr(self, "n_init_best_", None),
            "optima": None if optima is None else optima.to_dict(orient="list"),
            "names": getattr(self, "_names", None),
            "categories": getattr(self, "_categories", None),
            "exact": encode_value({"params": params, "attributes": attributes}),
        }
        arrays = {
            "weights": np.asarray(self.weights_, dtype=float),
            "loglik_trace": np.asarray(self.loglik_trace_, dtype=float),
        }
        arrays |= {f"factor_{n}": np.asarray(a) for n, a in enumerate(self.factors_)}
        for k, p in enumerate(getattr(self, "optima_params_", None) or []):
            arrays[f"optimum_{k}_weights"] = np.asarray(p.weights)
            arrays.update(
                {f"optimum_{k}_factor_{n}": np.asarray(a) for n, a in enumerate(p.factors)}
            )
        return meta, arrays

    @classmethod
    def load(cls, path) -> LatentClassPMF:
        """Load a fit written by :meth:`save` (never executes code: no pickle).

        The content is checked against the checksum recorded at save time, then
        validated: weights and factors finite, on the simplex (column-stochastic
        factors), of one rank, and category labels matching the factors' shapes.
        Files written before checksums were recorded are validated only.

        Raises
        ------
        bayespmf.io.CorruptFileError
            A checksum mismatch, or invalid or inconsistent content (a
            ``DataValidationError``, hence a ``ValueError``).
        """
        f, meta = load_fit(
            path, fmt=_FORMAT, version=_FORMAT_VERSION, owner="LatentClassPMF"
        )
        return cls._from_saved(f, meta, path)

    @classmethod
    def _from_saved(cls, arrays: dict, meta: dict, path) -> LatentClassPMF:
        """Rebuild and validate a fit from what :meth:`_saved_state` wrote.

        Files of bayespmf <= 0.2 have no ``exact`` key: their plain keys are read.
        """

        def corrupt(what: str) -> CorruptFileError:
            return CorruptFileError(
                f"{path} does not hold a valid LatentClassPMF fit: {what}. The file is "
                "damaged or was not written by bayespmf; save the fit again (or refit)."
            )

        n_factors = sum(1 for k in arrays if k.startswith("factor_"))
        try:
            weights = arrays["weights"]
            factors = [arrays[f"factor_{n}"] for n in range(n_factors)]
            trace = np.asarray(arrays["loglik_trace"])
        except KeyError as err:
            raise corrupt(f"the array {err} is missing") from None
        try:
            params = check_params(weights, factors)
        except DataValidationError as err:
            raise corrupt(str(err).rstrip(".")) from None
        if n_factors == 0:
            raise corrupt("it holds no factors")
        if trace.ndim != 1 or trace.dtype.kind != "f":
            raise corrupt(f"'loglik_trace' must be a 1-D float array; got {trace.shape}")
        optima_params = []
        while f"optimum_{len(optima_params)}_weights" in arrays:
            k = len(optima_params)
            try:
                p = check_params(
                    arrays[f"optimum_{k}_weights"],
                    [arrays[f"optimum_{k}_factor_{n}"] for n in range(n_factors)],
                )
            except (KeyError, DataValidationError) as err:
                raise corrupt(f"optimum {k}: {err}") from None
            if [a.shape for a in p.factors] != [a.shape for a in params.factors]:
                raise corrupt(f"optimum {k} has other shapes than the factors")
            optima_params.append(p)
        if "exact" in meta:
            exact = decode_value(meta["exact"], path=path)
            try:
                given, attributes = dict(exact["params"]), dict(exact["attributes"])
            except (KeyError, TypeError, ValueError):
                raise corrupt("the saved parameters are malformed") from None
        else:  # bayespmf <= 0.2: the plain keys (loglik_ etc. absent from netCDF)
            given = dict(meta.get("params", {}))
            optima = meta.get("optima")
            attributes = {
                "loglik_": meta.get("loglik", np.nan),
                "optima_": (
                    None if optima is None else pd.DataFrame(optima).rename_axis("optimum")
                ),
                "n_init_best_": meta.get("n_init_best"),
                "n_iter_": meta.get("n_iter", 0),
                "converged_": meta.get("converged", True),
                "info_": {},
                "_names": meta.get("names"),
                "_categories": meta.get("categories"),
            }
        given.setdefault("rank", params.weights.size)
        if set(given) - set(_PARAMS):
            raise corrupt(f"unknown parameters {sorted(set(given) - set(_PARAMS))}")
        if given["rank"] != params.weights.size:
            raise corrupt(f"rank {given['rank']!r} but {params.weights.size} weights")
        for name in attributes:
            fitted = name.endswith("_") and not name.startswith("_")
            if not (fitted or name in ("_names", "_categories")) or hasattr(cls, name):
                raise corrupt(f"unknown attribute {name!r}")
        _check_labels(
            attributes.get("_names"),
            attributes.get("_categories"),
            [a.shape[0] for a in params.factors],
            corrupt,
        )
        model = cls(**given)
        model._set_fitted(params, [a.shape[0] for a in params.factors])
        model.loglik_trace_ = trace
        model.optima_params_ = optima_params or None
        for name, value in attributes.items():
            setattr(model, name, value)
        return model


def _check_labels(names, categories, n_categories, corrupt) -> None:
    """Names and category labels of a saved fit agree with its factors."""
    n_vars = len(n_categories)
    if names is not None and (not isinstance(names, list) or len(names) != n_vars):
        raise corrupt(f"{n_vars} factors but the variable names {names!r:.80}")
    if categories is None:
        return
    if not isinstance(categories, list) or len(categories) != n_vars:
        raise corrupt(f"{n_vars} factors but category labels for {len(categories)}")
    for n, (labels, size) in enumerate(zip(categories, n_categories, strict=True)):
        if not isinstance(labels, list) or len(labels) != size:
            raise corrupt(
                f"factor {n} has {size} categories but {len(labels)} category labels"
            )
