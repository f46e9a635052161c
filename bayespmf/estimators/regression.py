r"""``LatentClassRegression``: latent classes whose prior depends on covariates."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import scipy.stats
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator

from bayespmf._npz import decode_value, encode_value
from bayespmf.data import CategoricalData
from bayespmf.estimators._base import LabelledFit, check_fitted
from bayespmf.estimators._persistence import NpzPersistence, check_labels, corrupt_fit
from bayespmf.fit.covariates import (
    DEFAULT_COVARIATE_MAX_ITER,
    DEFAULT_COVARIATE_TOL,
    check_covariates,
    covariate_values,
    fit_latent_class_regression,
)
from bayespmf.kernels.covariates import covariate_log_joint, prepare_covariate_data
from bayespmf.pmf import check_params, stack_factors

__all__ = ["LatentClassRegression"]

#: Label of the intercept row of ``coef_`` (parenthesized, as R does, so that it cannot
#: be mistaken for a covariate column named "intercept").
INTERCEPT = "(intercept)"

_OWNER = "LatentClassRegression"

#: Fitted attributes (less the trailing ``_``) that save/load keep as arrays, and as
#: JSON metadata.
_SAVED_ARRAYS = (
    "coef",
    "coef_stderr",
    "coef_covariance",
    "weights",
    "n_categories",
    "loglik_trace",
)
_SAVED_META = ("loglik", "loglik_start", "n_iter", "converged", "covariate_names")


class LatentClassRegression(NpzPersistence, LabelledFit, BaseEstimator):
    r"""Latent-class model with covariates on class membership (latent-class regression).

    The class prior of every row depends on its covariates :math:`z_s` through a
    multinomial logit with class 0 as the reference, and the items are conditionally
    independent given the class:

    .. math:: \Pr(x_s \mid z_s) = \sum_{f=0}^{F-1}
       \operatorname{softmax}(z_s^\top \beta)_f \prod_{n \text{ observed}}
       A_n(x_{sn}, f), \qquad \beta_{\cdot, 0} = 0,

    missing entries being marginalized out (Bandeen-Roche et al. 1997; the "one-step"
    approach of Vermunt 2010). A thin estimator over
    :func:`bayespmf.fit.fit_latent_class_regression`, which holds the algorithm (EM
    from the covariate-free maximum-likelihood estimate, Newton polish, standard errors
    from the observed information).

    Parameters
    ----------
    n_components : int
        Number of latent classes F.
    fit_intercept : bool, default True
        Prepend a column of ones to the covariates (row 0 of ``coef_``).
    n_init : int, optional
        Starts of the covariate-free multi-start fit the covariate EM starts from
        (:func:`bayespmf.fit.fit_latent_class`, ``method="auto"``; its default when
        None).
    n_starts : int, default 3
        The covariate EM is run from the best ``n_starts`` distinct covariate-free
        optima; the highest log-likelihood is kept.
    ridge : float, default 0
        Ridge on the non-reference coefficients (0: maximum likelihood). A tiny value
        (e.g. 1e-6) keeps the fit finite when a class separates perfectly on a
        covariate.
    max_iter : int, optional
        Iteration cap of the covariate EM (``DEFAULT_COVARIATE_MAX_ITER`` of
        :mod:`bayespmf.fit.covariates`, 2000, when None).
    tol : float, optional
        Tolerance of the covariate EM (``DEFAULT_COVARIATE_TOL``, 1e-10, when None).
    random_state : None, int or numpy.random.Generator
        Seeds the covariate-free multi-start fit (the only random part).
    progressbar : bool, default False
        Show a progress bar over the EM iterations.

    Attributes
    ----------
    coef_ : ndarray, shape (D', F)
        Multinomial-logit coefficients :math:`\beta`; one row per entry of
        ``covariate_names_`` (the intercept first when ``fit_intercept``), column 0
        (the reference class) is 0.
    coef_stderr_ : ndarray, shape (D', F)
        Standard errors of ``coef_`` from the observed information, jointly with the
        factors; NaN in the reference column (and everywhere if the information is
        singular).
    coef_covariance_ : ndarray, shape (D' (F-1), D' (F-1))
        Covariance of the free coefficients ``coef_[:, 1:]`` in row-major order.
    factors_ : list of ndarray, each (I_n, F)
        Conditional PMFs :math:`A_n(i, f) = \Pr(x_n = i \mid H = f)`.
    weights_ : ndarray, shape (F,)
        The class prior averaged over the training rows (weighted by
        ``sample_weight`` when given): the marginal class shares the model implies for
        the sample, not a parameter of the model.
    n_categories_ : ndarray, shape (N,)
    covariate_names_ : list of str, length D'
        Labels of the rows of ``coef_``: ``"(intercept)"`` when ``fit_intercept``,
        then the column names of a DataFrame ``covariates`` (their string form), else
        ``"z0", "z1", ...``.
    loglik_ : float
        Log-likelihood of the training rows at the estimate (weighted by
        ``sample_weight``).
    loglik_start_ : float
        Log-likelihood of the covariate-free estimate the fit started from.
    n_iter_ : int
        EM iterations of the best start.
    loglik_trace_ : ndarray, shape ``(n_iter_,)``
    converged_ : bool

    Warns
    -----
    ConvergenceWarning
        The covariate EM stopped at ``max_iter``.
    LocalOptimumWarning
        From the covariate-free multi-start fit.

    See Also
    --------
    bayespmf.fit.fit_latent_class_regression : The function this class calls.
    LatentClassPMF : The model without covariates.

    Notes
    -----
    Class 0 is the reference: ``coef_[d, f]`` is the change in the log-odds of class
    ``f`` against class 0 per unit of covariate ``d``. Which fitted class is "class 0"
    is decided by the covariate-free fit (latent classes have no inherent order);
    compare fits through the factors, not the labels.

    References
    ----------
    As :func:`bayespmf.fit.fit_latent_class_regression`: Bandeen-Roche et al. (JASA
    1997) for the model, Vermunt (Political Analysis 2010) for the stepwise fit.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = pd.DataFrame({"age": rng.normal(size=600)})
    >>> h = (rng.random(600) < 1 / (1 + np.exp(-2 * z["age"]))).astype(int)
    >>> x = (rng.random((600, 4)) < np.where(h, 0.85, 0.15)[:, None]).astype(int)
    >>> model = LatentClassRegression(2, n_init=20, random_state=0)
    >>> model = model.fit(x, covariates=z)
    >>> model.coef_.shape, model.converged_
    ((2, 2), True)
    >>> table = model.coef_df()
    >>> table[["covariate", "class"]].values.tolist()
    [['(intercept)', 1], ['age', 1]]
    >>> bool(abs(abs(table["coef"].iloc[1]) - 2) < 3 * table["stderr"].iloc[1])
    True
    >>> model.predict_class_proba(x[:2], z[:2]).shape
    (2, 2)
    """

    #: Format tag of saved fits; a file with another version is refused.
    _FORMAT = "bayespmf.LatentClassRegression"
    _FORMAT_VERSION = 1

    def __init__(
        self,
        n_components: int,
        *,
        fit_intercept: bool = True,
        n_init: int | None = None,
        n_starts: int = 3,
        ridge: float = 0.0,
        max_iter: int | None = None,
        tol: float | None = None,
        random_state=None,
        progressbar: bool = False,
    ):
        self.n_components = n_components
        self.fit_intercept = fit_intercept
        self.n_init = n_init
        self.n_starts = n_starts
        self.ridge = ridge
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.progressbar = progressbar

    # ------------------------------------------------------------------ fitting
    def fit(
        self, X, y=None, *, covariates=None, n_categories=None, sample_weight=None
    ) -> LatentClassRegression:
        """Estimate the coefficients and factors from ``X`` and ``covariates``.

        Parameters
        ----------
        X : CategoricalData, pandas.DataFrame or array_like of int, shape (S, N)
            ``-1`` marks missing entries (marginalized out). A DataFrame is encoded by
            :meth:`CategoricalData.from_pandas` (labels kept, NaN missing).
        y : None
            Unused (the classes are latent). A value is an error, so that covariates
            passed positionally are not silently ignored: pass ``covariates=``.
        covariates : array_like of float, shape (S,) or (S, D0), or pandas.DataFrame
            Required (keyword-only; None is an error). Covariates of every row, in
            the order of ``X``; finite and not collinear.
            A DataFrame's column names label the coefficients; when ``X`` is a
            DataFrame too, both must have the same index.
        n_categories : sequence of int, optional
            Alphabet sizes (taken from ``X`` when it is a CategoricalData).
        sample_weight : array_like, shape (S,), optional
            Weight of each row: ``sum_s w_s log Pr(x_s | z_s)`` is maximized.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            ``y`` given; invalid ``X`` (``DataValidationError``), ``covariates``
            (wrong row count, non-numeric, non-finite, collinear, an index unlike
            ``X``'s), ``sample_weight`` or parameters.
        """
        if y is not None:
            raise ValueError(
                f"{_OWNER}.fit: 'y' must be None (the classes are latent). Pass the "
                "covariates by keyword: fit(X, covariates=Z)."
            )
        if isinstance(covariates, pd.Series):
            covariates = covariates.to_frame()
        z = self._covariate_values(X, covariates, fitted=False)
        names = None
        if isinstance(covariates, pd.DataFrame):
            names = [str(c) for c in covariates.columns]
        data = CategoricalData.from_pandas(X) if isinstance(X, pd.DataFrame) else X
        result = fit_latent_class_regression(
            data,
            z,
            self.n_components,
            n_categories=n_categories,
            fit_intercept=self.fit_intercept,
            n_init=self.n_init,
            n_starts=self.n_starts,
            ridge=self.ridge,
            max_iter=DEFAULT_COVARIATE_MAX_ITER if self.max_iter is None else self.max_iter,
            tol=DEFAULT_COVARIATE_TOL if self.tol is None else self.tol,
            random_state=self.random_state,
            sample_weight=sample_weight,
            progressbar=self.progressbar,
            owner=_OWNER,
        )
        beta, factors = result.params
        self.coef_ = np.array(beta, dtype=float)
        self.coef_stderr_ = np.array(result.stderr, dtype=float)
        self.coef_covariance_ = np.array(result.info["covariance"], dtype=float)
        self.factors_ = [np.array(a, dtype=float) for a in factors]
        self.n_categories_ = np.array([a.shape[0] for a in factors], dtype=np.int64)
        if names is None:
            n_cov = self.coef_.shape[0] - bool(self.fit_intercept)
            names = [f"z{d}" for d in range(n_cov)]
        self._columns = names if isinstance(covariates, pd.DataFrame) else None
        self.covariate_names_ = [INTERCEPT] * bool(self.fit_intercept) + names
        self.loglik_ = float(result.loglik)
        self.loglik_start_ = float(result.loglik_start)
        self.n_iter_ = int(result.n_iter)
        self.loglik_trace_ = np.array(result.loglik_trace, dtype=float)
        self.converged_ = bool(result.converged)
        self._keep_labels(data)
        design = check_covariates(
            z,
            len(z),
            fit_intercept=self.fit_intercept,
            owner=_OWNER,
            check_n_components=False,
        )
        prior = softmax(design @ self.coef_, axis=1)
        weight = None if sample_weight is None else np.asarray(sample_weight, float)
        self.weights_ = np.average(prior, axis=0, weights=weight)
        return self

    # ------------------------------------------------------------------ validation
    def _check_fitted(self) -> None:
        check_fitted(self, "coef_", "fit(X, covariates=Z)")

    def _covariate_values(self, X, covariates, *, fitted: bool):
        """``covariates`` as an array: DataFrame columns matched by name, index checked.

        Only what the fit function cannot check is checked here (the DataFrame's
        columns and index); values, shape and rank are checked by
        :func:`bayespmf.fit.covariates.check_covariates` (at prediction time without
        the rank check).
        """
        if covariates is None:
            raise ValueError(
                f"The 'covariates' parameter of {_OWNER} is required: pass an "
                "(n_rows, n_covariates) array or DataFrame (an (n_rows, 0) array for "
                "a model without covariates)."
            )
        if not isinstance(covariates, pd.DataFrame | pd.Series):
            return covariates
        if isinstance(X, pd.DataFrame) and not covariates.index.equals(X.index):
            raise ValueError(
                f"The 'covariates' parameter of {_OWNER} must have the index of 'X' "
                "(rows are matched by position, so a different index means misaligned "
                "rows). Align it first, e.g. covariates.loc[X.index]."
            )
        if isinstance(covariates, pd.Series):
            covariates = covariates.to_frame()
        columns = getattr(self, "_columns", None) if fitted else None
        if columns is not None:
            by_name = {str(c): c for c in covariates.columns}
            missing = [c for c in columns if c not in by_name]
            if missing:
                raise ValueError(
                    f"The 'covariates' parameter of {_OWNER} lacks the column(s) "
                    f"{missing} the model was fitted with (fitted on {columns}). Pass "
                    "a DataFrame with those columns."
                )
            covariates = covariates[[by_name[c] for c in columns]]
        return covariate_values(covariates, _OWNER)

    def _new_design(self, X, covariates, n_rows: int | None) -> np.ndarray:
        """Checked design of ``n_rows`` new rows (None: any number; no rank check)."""
        values = self._covariate_values(X, covariates, fitted=True)
        if n_rows is None:
            n_rows = np.shape(np.atleast_1d(values))[0]
        design = check_covariates(
            values,
            n_rows,
            fit_intercept=self.fit_intercept,
            owner=_OWNER,
            check_n_components=False,
        )
        if design.shape[1] != self.coef_.shape[0]:
            n_fit = self.coef_.shape[0] - bool(self.fit_intercept)
            raise ValueError(
                f"The 'covariates' parameter of {_OWNER} must have {n_fit} column(s), "
                f"as in fit; got {design.shape[1] - bool(self.fit_intercept)}. Pass "
                "the covariates the model was fitted with."
            )
        return design

    def _prepare(self, X, covariates):
        """Validated codes, alphabet sizes and design of new rows."""
        self._check_fitted()
        codes, n_cat = self._bound_codes(X, name="X")
        return codes, n_cat, self._new_design(X, covariates, codes.shape[0])

    def _log_joint(self, X, covariates) -> tuple[np.ndarray, np.ndarray]:
        """Codes of ``X`` and the class log-joint ``log Pr(H = f, x_obs | z)``, (S, F)."""
        codes, n_cat, design = self._prepare(X, covariates)
        data = prepare_covariate_data(codes, n_cat, design)
        return codes, covariate_log_joint(data, self.coef_, stack_factors(self.factors_))

    def _row_loglik(self, X, covariates) -> tuple[np.ndarray, np.ndarray]:
        """Codes of ``X`` and ``log Pr(x_obs | z)`` of every row."""
        codes, lj = self._log_joint(X, covariates)
        ll = logsumexp(lj, axis=1)
        ll[~(codes >= 0).any(axis=1)] = 0.0  # the prior sums to 1 (up to rounding)
        return codes, ll

    @staticmethod
    def _index(X, covariates):
        """The index of a DataFrame input (``X`` first), or None for arrays."""
        for obj in (X, covariates):
            if isinstance(obj, pd.DataFrame | pd.Series):
                return obj.index
        return None

    # ------------------------------------------------------------------ inference
    def predict_class_proba(self, X, covariates):
        r"""Posterior class probabilities :math:`\Pr(H_s = f \mid x_s, z_s)`, (S, F).

        Bayes' rule over the observed entries with the covariate-implied prior; a row
        with no observed entry gets its prior. A DataFrame (columns: the classes)
        indexed like a DataFrame ``X`` or ``covariates``.
        """
        _, lj = self._log_joint(X, covariates)
        m = lj.max(axis=1, keepdims=True)
        m[~np.isfinite(m)] = 0.0
        e = np.exp(lj - m)
        p = e / np.maximum(e.sum(axis=1, keepdims=True), np.finfo(float).tiny)
        index = self._index(X, covariates)
        if index is None:
            return p
        return pd.DataFrame(p, index=index, columns=pd.RangeIndex(p.shape[1], name="class"))

    def predict_class(self, X, covariates):
        """Modal class of each row (argmax of :meth:`predict_class_proba`), (S,)."""
        c = np.argmax(np.asarray(self.predict_class_proba(X, covariates)), axis=1)
        index = self._index(X, covariates)
        return c if index is None else pd.Series(c, index=index, name="class")

    def predict_prior_proba(self, covariates):
        r"""Covariate-implied class priors :math:`\operatorname{softmax}(z_s^\top \beta)`.

        Shape (S, F); a DataFrame indexed like a DataFrame ``covariates``.
        """
        self._check_fitted()
        p = softmax(self._new_design(None, covariates, None) @ self.coef_, axis=1)
        index = self._index(None, covariates)
        if index is None:
            return p
        return pd.DataFrame(p, index=index, columns=pd.RangeIndex(p.shape[1], name="class"))

    def score_samples(self, X, covariates):
        """Log-likelihood ``log Pr(x_obs | z)`` of the observed entries of each row.

        Shape (S,); a Series indexed like a DataFrame ``X`` or ``covariates``. A row
        with no observed entry scores 0.
        """
        _, ll = self._row_loglik(X, covariates)
        index = self._index(X, covariates)
        return ll if index is None else pd.Series(ll, index=index, name="loglik")

    def score(self, X, covariates) -> float:
        """Mean of :meth:`score_samples` over the rows."""
        return float(np.mean(np.asarray(self.score_samples(X, covariates))))

    # ------------------------------------------------------------ model choice
    @property
    def n_parameters_(self) -> int:
        """Free parameters: ``D' (F - 1) + F sum_n (I_n - 1)`` (coefficients, factors)."""
        self._check_fitted()
        n_dim, n_cls = self.coef_.shape
        return n_dim * (n_cls - 1) + n_cls * int(np.sum(self.n_categories_ - 1))

    def _loglik_and_rows(self, X, covariates) -> tuple[float, int]:
        codes, ll = self._row_loglik(X, covariates)
        n_rows = int((codes >= 0).any(axis=1).sum())  # all-missing rows carry nothing
        return float(ll.sum()), n_rows

    def aic(self, X, covariates) -> float:
        """Akaike's criterion ``-2 L + 2 k`` on ``X`` (lower is better)."""
        ll, _ = self._loglik_and_rows(X, covariates)
        return -2.0 * ll + 2.0 * self.n_parameters_

    def bic(self, X, covariates) -> float:
        """Schwarz's criterion ``-2 L + k log S`` (S: rows with an observed entry)."""
        ll, n = self._loglik_and_rows(X, covariates)
        return -2.0 * ll + self.n_parameters_ * math.log(n)

    # ------------------------------------------------------------------ tables
    def coef_df(self) -> pd.DataFrame:
        r"""Tidy table of the coefficients, with Wald tests.

        Class 0 is the reference (its coefficients are 0 by definition) and has no
        rows; ``coef`` is the log-odds of ``class`` against class 0 per unit of
        ``covariate``.

        Returns
        -------
        pandas.DataFrame
            One row per (class 1..F-1, covariate), ordered by class: ``covariate``,
            ``class``, ``coef``, ``stderr``, ``z`` (``coef / stderr``) and
            ``p_value`` (two-sided, normal: :math:`2 \Phi(-|z|)`).
        """
        self._check_fitted()
        n_dim, n_cls = self.coef_.shape
        cls = np.repeat(np.arange(1, n_cls), n_dim)
        dim = np.tile(np.arange(n_dim), n_cls - 1)
        coef = self.coef_[dim, cls]
        se = self.coef_stderr_[dim, cls]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = coef / se
        return pd.DataFrame(
            {
                "covariate": [self.covariate_names_[d] for d in dim],
                "class": cls,
                "coef": coef,
                "stderr": se,
                "z": z,
                "p_value": 2.0 * scipy.stats.norm.sf(np.abs(z)),
            }
        )

    get_coefficients_df = coef_df

    # ------------------------------------------------------------------ persistence
    def _saved_state(self) -> tuple[dict, dict]:
        """What :meth:`save` writes: metadata (plain JSON, ``exact`` the seed) and arrays.

        Every parameter (a ``numpy.random.Generator`` ``random_state`` as its state,
        under ``exact``; ``None`` in the plain ``params`` for older readers) and every
        fitted attribute.
        """
        self._check_fitted()
        params = self.get_params()
        rs = params["random_state"]
        if not (rs is None or isinstance(rs, int | np.integer)):
            params["random_state"] = None  # plain JSON for older readers; see "exact"
        meta = {
            "params": params,
            "exact": encode_value({"random_state": rs}),
            **{key: getattr(self, f"{key}_") for key in _SAVED_META},
            "columns": self._columns,
            "names": self._names,
            "categories": self._categories,
        }
        arrays = {key: getattr(self, f"{key}_") for key in _SAVED_ARRAYS}
        arrays |= {f"factor_{n}": a for n, a in enumerate(self.factors_)}
        return meta, arrays

    @classmethod
    def _from_saved(cls, arrays: dict, meta: dict, path) -> LatentClassRegression:
        """Rebuild and validate a fit from what :meth:`_saved_state` wrote."""
        params = dict(meta["params"])
        if "exact" in meta:
            params |= decode_value(meta["exact"], path=path)
        model = cls(**params)
        n_factors = sum(1 for k in arrays if k.startswith("factor_"))
        model.factors_ = [arrays[f"factor_{n}"] for n in range(n_factors)]
        _check_saved(path, arrays, model.factors_, meta)
        for key in _SAVED_ARRAYS:
            setattr(model, f"{key}_", arrays[key])
        for key in _SAVED_META:
            setattr(model, f"{key}_", meta[key])
        model._columns = meta["columns"]
        model._names, model._categories = meta["names"], meta["categories"]
        return model


def _check_saved(path, arrays: dict, factors: list, meta: dict) -> None:
    """Validate a loaded LatentClassRegression fit (a CorruptFileError naming ``path``)."""

    def corrupt(what: str):
        return corrupt_fit(path, _OWNER, what)

    try:
        weights, coef = arrays["weights"], arrays["coef"]
        stderr, cov = arrays["coef_stderr"], arrays["coef_covariance"]
        n_cat = arrays["n_categories"]
    except KeyError as err:
        raise corrupt(f"the array {err} is missing") from None
    if not factors:
        raise corrupt("it holds no factors")
    try:
        check_params(weights, factors)
    except ValueError as err:  # a DataValidationError
        raise corrupt(str(err).rstrip(".")) from None
    n_components = weights.size
    if coef.ndim != 2 or coef.shape[1] != n_components or not np.all(np.isfinite(coef)):
        raise corrupt(f"'coef' must be a finite (n_covariates, {n_components}) array")
    if stderr.shape != coef.shape or cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise corrupt("'coef_stderr' or 'coef_covariance' do not match 'coef'")
    if list(n_cat) != [a.shape[0] for a in factors]:
        raise corrupt("'n_categories' does not match the factors")
    names = meta.get("covariate_names")
    if not isinstance(names, list) or len(names) != coef.shape[0]:
        raise corrupt("the covariate names do not match 'coef'")
    check_labels(
        meta.get("names"), meta.get("categories"), [a.shape[0] for a in factors], corrupt
    )
