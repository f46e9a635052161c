"""``LatentClassPMF``: a scikit-learn-style estimator of a low-rank joint PMF."""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    as_codes,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.pmf import (
    LatentClassParams,
    check_params,
    conditional_pmf,
    joint_pmf,
    log_likelihood_rows,
)

__all__ = ["METHODS", "LatentClassPMF", "NotFittedError"]

#: Estimation methods and what each runs.
METHODS = {
    "em": "EM from a random uniform start (RAND-EM)",
    "squarem": "SQUAREM-PMF accelerated EM from a random uniform start",
    "cnmf-spa": "CNMF-SPA (Ibrahim & Fu, Alg. 2) on the pairwise marginals",
    "cnmf-opt": "CNMF-OPT (Ibrahim & Fu, Alg. 1) started from CNMF-SPA: KL mirror descent "
    "on the pairwise marginals",
    "cnmf-spa-em": "CNMF-SPA, then EM on the full data (Ibrahim & Fu, Sec. 5)",
    "cnmf-spa-squarem": "CNMF-SPA, then SQUAREM-PMF accelerated EM",
    "juror": "JUROR (Vora et al., Alg. 1: G1+G2+G3) on one-way marginals of random "
    "2-sparse projections",
    "juror-b": "JUROR ablation G1+G3",
    "juror-c": "JUROR ablation G1+G2",
    "ctd": "CTD baseline (Kargas et al.): coupled factorization of the triple marginals",
    "ad-em": "MLE-AD-EM baseline (Yeredor & Haardt): alternating directions, then EM",
}

#: Methods run by a kernel of their own (no EM stage inside the estimator):
#: method -> (module, function, extra keyword arguments).
_OTHER_KERNELS = {
    "juror": ("bayespmf.kernels.juror", "juror", {"variant": "a"}),
    "juror-b": ("bayespmf.kernels.juror", "juror", {"variant": "b"}),
    "juror-c": ("bayespmf.kernels.juror", "juror", {"variant": "c"}),
    "ctd": ("bayespmf.kernels.ctd", "ctd", {}),
    "ad-em": ("bayespmf.kernels.ad_em", "ad_em", {}),
}

#: Per-method defaults of (max_iter, tol), used when the estimator is given None.
DEFAULT_MAX_ITER = {"em": 1000, "squarem": 1000, "cnmf-opt": 3000}
DEFAULT_TOL = {"em": 1e-7, "squarem": 1e-7, "cnmf-opt": 1e-6}

#: Entries of a geometric estimate are floored at this value (then renormalized) before
#: EM starts from it, and in the final estimates of the marginal-based methods: an exact
#: zero is absorbing for EM and makes the likelihood of a row that needs it -inf, while
#: 1e-6 is far below any probability the data resolve.
INIT_FLOOR = 1e-6

#: Format tag of saved fits; a file with another major version is refused.
_FORMAT = "bayespmf.LatentClassPMF"
_FORMAT_VERSION = 1


#: Methods whose last stage is EM (or SQUAREM-PMF) run inside the estimator.
_EM_METHODS = ("em", "squarem", "cnmf-spa-em", "cnmf-spa-squarem")


class InMemorySource:
    """The data passes of :meth:`LatentClassPMF.fit` on in-memory codes.

    Another backend (``bayespmf.dask``) supplies the same four methods over chunked
    data, so every estimation method runs the same stages whatever holds the rows.
    """

    def __init__(self, codes, n_categories, names=None, categories=None):
        self.codes = codes
        self.n_categories = np.asarray(n_categories, dtype=np.int64)
        self.names, self.categories = names, categories

    def pairwise_marginals(self):
        """Empirical pairwise marginals of all variable pairs."""
        from bayespmf.marginals import pairwise_marginals

        return pairwise_marginals(self.codes, self.n_categories)

    def triple_marginals(self):
        """Empirical triple marginals of all variable triples."""
        from bayespmf.marginals import triple_marginals

        return triple_marginals(self.codes, self.n_categories)

    def categorical(self) -> CategoricalData:
        """The rows themselves (for kernels that need them: JUROR, AD-EM)."""
        return CategoricalData(self.codes, self.n_categories)

    def fit_em(self, rank, **kwargs):
        """EM or SQUAREM-PMF on the rows (keywords of ``bayespmf.kernels.em.fit_em``)."""
        from bayespmf.kernels.em import fit_em

        return fit_em(self.codes, rank, n_categories=self.n_categories, **kwargs)


class NotFittedError(ValueError, AttributeError):
    """The estimator is used before ``fit``."""


def _floor(params: LatentClassParams, floor: float = INIT_FLOOR) -> LatentClassParams:
    w = np.maximum(params.weights, floor)
    fs = [np.maximum(a, floor) for a in params.factors]
    return LatentClassParams(w / w.sum(), [a / a.sum(axis=0, keepdims=True) for a in fs])


def max_identifiable_rank(n_categories) -> int:
    """Largest rank whose parameter count does not exceed that of the full joint PMF.

    A rank-F latent-class model has ``F (1 + sum_n (I_n - 1)) - 1`` free parameters;
    with more than the ``prod_n I_n - 1`` free entries of the joint PMF it cannot be
    identified from any amount of data.

    Examples
    --------
    >>> max_identifiable_rank([2, 2, 2])
    2
    >>> max_identifiable_rank([4, 4, 4, 4, 3, 3, 3])
    363
    """
    # exact integer arithmetic: the product of the alphabet sizes overflows float64
    # beyond ~1e308 (e.g. 400 variables of 10 categories)
    n_cat = [int(i) for i in np.asarray(n_categories).ravel()]
    per_class = 1 + sum(i - 1 for i in n_cat)
    return max(1, math.prod(n_cat) // per_class)


class LatentClassPMF:
    """Low-rank (latent-class, naive Bayes) estimate of a joint PMF with missing data.

    The model is ``Pr(x) = sum_f lambda_f prod_n A_n(x_n, f)`` (Ibrahim & Fu, eq. (3));
    missing entries are marginalized out.

    Parameters
    ----------
    rank : int
        Number of latent classes F.
    method : str, default "cnmf-spa-em"
        One of :data:`METHODS`: ``"em"``, ``"squarem"``, ``"cnmf-spa"``,
        ``"cnmf-opt"``, ``"cnmf-spa-em"``, ``"cnmf-spa-squarem"``.
    max_iter : int, optional
        Iteration cap of the iterative stage; by default ``DEFAULT_MAX_ITER`` of the
        method (EM and SQUAREM-PMF 1000, CNMF-OPT 3000 sweeps: its mirror-descent
        sweeps are cheap and many are needed).
    tol : float, optional
        Relative change of the objective below which the iteration stops; by default
        1e-7 for EM/SQUAREM-PMF and 1e-6 for CNMF-OPT.
    random_state : None, int or numpy.random.Generator
        Seeds random starts and the split search of CNMF-SPA.
    progressbar : bool, default False
        Show a progress bar over iterations.

    Attributes
    ----------
    weights_ : ndarray, shape (F,)
    factors_ : list of ndarray, each (I_n, F)
    n_categories_ : ndarray, shape (N,)
    n_iter_ : int
        Iterations of the iterative stage (0 for ``"cnmf-spa"``).
    loglik_trace_ : ndarray
        Total log-likelihood after each EM iteration (empty for methods without EM).
    converged_ : bool
    fit_time_ : float
        Seconds spent in :meth:`fit`.
    info_ : dict
        Details from the stages (e.g. the chosen CNMF-SPA split).

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, truth = make_latent_class(2000, [3, 4, 3, 5, 4], rank=2, random_state=0)
    >>> model = LatentClassPMF(rank=2, method="em", random_state=0).fit(data)
    >>> model.weights_.shape, model.factors_[1].shape
    ((2,), (4, 2))
    >>> bool(model.score(data) < 0)
    True
    """

    def __init__(
        self,
        rank: int,
        method: str = "cnmf-spa-em",
        *,
        max_iter: int | None = None,
        tol: float | None = None,
        random_state=None,
        progressbar: bool = False,
    ):
        self.rank = rank
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.progressbar = progressbar

    # ------------------------------------------------------------------ parameters
    def get_params(self, deep: bool = True) -> dict:
        """Constructor parameters (scikit-learn convention)."""
        return {
            k: getattr(self, k)
            for k in ("rank", "method", "max_iter", "tol", "random_state", "progressbar")
        }

    def set_params(self, **params) -> LatentClassPMF:
        """Set constructor parameters (scikit-learn convention)."""
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise ValueError(
                    f"Unknown parameter {k!r} of LatentClassPMF; valid: {list(valid)}."
                )
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return f"LatentClassPMF(rank={self.rank!r}, method={self.method!r})"

    def _validate(self, n_cat):
        owner = "LatentClassPMF"
        rank = check_int(self.rank, "rank", owner=owner, low=1)
        if self.method not in METHODS:
            import difflib

            close = difflib.get_close_matches(str(self.method), list(METHODS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"The 'method' parameter of {owner} must be one of {list(METHODS)}. "
                f"Got {self.method!r}.{hint}"
            )
        stage = "cnmf-opt" if self.method == "cnmf-opt" else "em"
        # kernels of other methods keep their own defaults unless the user sets one
        own = self.method in _OTHER_KERNELS
        max_iter = (
            (None if own else DEFAULT_MAX_ITER[stage])
            if self.max_iter is None
            else self.max_iter
        )
        tol = (None if own else DEFAULT_TOL[stage]) if self.tol is None else self.tol
        self._max_iter = (
            None
            if max_iter is None
            else check_int(max_iter, "max_iter", owner=owner, low=1)
        )
        self._tol = None if tol is None else check_float(tol, "tol", owner=owner, low=0.0)
        limit = max_identifiable_rank(n_cat)
        if rank > limit:
            raise DataValidationError(
                f"The 'rank' parameter of {owner} is {rank}, but with alphabet sizes "
                f"{np.asarray(n_cat).tolist()} a rank-{rank} model has more free "
                f"parameters than the full joint PMF, so it cannot be identified. Use "
                f"rank <= {limit}."
            )
        return rank

    # ------------------------------------------------------------------ fitting
    def fit(self, data, n_categories=None, *, callback=None) -> LatentClassPMF:
        """Estimate the weights and factors from ``data``.

        Parameters
        ----------
        data : CategoricalData or array_like of int, shape (S, N)
            ``-1`` marks missing entries. Rows with every entry missing carry no
            information and are ignored.
        n_categories : sequence of int, optional
            Alphabet sizes (taken from ``data`` when it is a CategoricalData).
        callback : callable, optional
            ``callback(n_iter, state)`` after every EM iteration (``state`` is an
            :class:`~bayespmf.kernels.em.EMState`), e.g. to score intermediate
            iterates on validation data; EM-based methods only.

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
        codes, n_cat = as_codes(data, n_categories, name="data")
        keep = (codes >= 0).any(axis=1)
        if not keep.any():
            raise DataValidationError("Every row of 'data' is entirely missing.")
        codes = codes[keep] if not keep.all() else codes
        names = data.names if isinstance(data, CategoricalData) else None
        categories = data.categories if isinstance(data, CategoricalData) else None
        return self._fit_source(
            InMemorySource(codes, n_cat, names, categories), t0, callback=callback
        )

    def _fit_source(self, source, t0: float, callback=None) -> LatentClassPMF:
        """Run the stages of ``method`` on a data source (see :class:`InMemorySource`)."""
        n_cat = source.n_categories
        rank = self._validate(n_cat)
        rng = check_random_state(self.random_state)
        method = self.method
        info: dict = {}
        params = None
        n_iter, trace, converged = 0, np.array([]), True
        if method.startswith("cnmf"):
            from bayespmf.kernels.cnmf import cnmf_opt, cnmf_spa

            marg = source.pairwise_marginals()
            if method == "cnmf-opt":
                # started from CNMF-SPA, as the paper proposes (Sec. 4.2)
                params, opt_info = cnmf_opt(
                    marg,
                    rank,
                    init="cnmf-spa",
                    max_iter=self._max_iter,
                    tol=self._tol,
                    random_state=rng,
                    progressbar=self.progressbar,
                )
                info["cnmf_opt"] = opt_info
                n_iter = int(_get(opt_info, "n_iter", 0))
                converged = bool(_get(opt_info, "converged", True))
            else:
                params, spa_info = cnmf_spa(marg, rank, random_state=rng)
                info["cnmf_spa"] = spa_info
        if method in _OTHER_KERNELS:
            import importlib

            module, func, extra = _OTHER_KERNELS[method]
            kernel = getattr(importlib.import_module(module), func)
            kwargs = dict(extra, random_state=rng, progressbar=self.progressbar)
            if self._max_iter is not None:
                kwargs["max_iter"] = self._max_iter
            if self._tol is not None:
                kwargs["tol"] = self._tol
            stats = source.triple_marginals() if method == "ctd" else source.categorical()
            params, k_info = kernel(stats, rank, **kwargs)
            info[method] = k_info
            n_iter = int(_get(k_info, "n_iter", 0))
            converged = bool(_get(k_info, "converged", True))
        if method in _EM_METHODS:
            init = None if params is None else _floor(params)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                params, em_info = source.fit_em(
                    rank,
                    init=init,
                    accelerate="squarem" if method.endswith("squarem") else None,
                    max_iter=self._max_iter,
                    tol=self._tol,
                    random_state=rng,
                    progressbar=self.progressbar,
                    callback=callback,
                )
            info["em"] = em_info
            n_iter = int(em_info.n_iter)
            trace = np.asarray(em_info.loglik_trace, dtype=float)
            converged = bool(em_info.converged)
            # fit_em's own ConvergenceWarning is replaced by one that names the
            # estimator's parameters; any other warning passes through unchanged.
            for w in caught:
                if not issubclass(w.category, ConvergenceWarning):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            if not converged:
                warnings.warn(
                    f"LatentClassPMF(method={method!r}) stopped after "
                    f"max_iter={self._max_iter} iterations before the relative "
                    f"log-likelihood change fell below tol={self._tol}. Increase "
                    "max_iter or tol.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        if method not in _EM_METHODS and method != "ad-em":
            # Estimates from marginals (NNLS, projections) can hold exact zeros, which
            # would give observed rows likelihood 0 (score -inf): smooth them.
            params = _floor(params)
        params = check_params(params.weights, params.factors, n_cat, atol=1e-6)
        self._set_fitted(params, n_cat)
        self.n_iter_ = n_iter
        self.loglik_trace_ = trace
        self.converged_ = converged
        self.info_ = info
        self.fit_time_ = time.perf_counter() - t0
        self._names, self._categories = source.names, source.categories
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
    def params_(self) -> LatentClassParams:
        """The fitted ``LatentClassParams(weights_, factors_)``."""
        self._check_fitted()
        return LatentClassParams(self.weights_, self.factors_)

    def _codes(self, data) -> np.ndarray:
        self._check_fitted()
        codes, _ = as_codes(data, self.n_categories_, name="data", allow_empty_columns=True)
        return codes

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
        """Log-likelihood of the observed entries of each row, shape (S,)."""
        return log_likelihood_rows(self._codes(data), self.weights_, self.factors_)

    def score(self, data) -> float:
        """Mean log-likelihood of the observed entries per row.

        Rows with every entry missing contribute 0.
        """
        return float(np.mean(self.score_samples(data)))

    def predict_proba(self, data, target) -> np.ndarray:
        """PMF of variable ``target`` given each row's other observed entries, (S, I_t).

        Examples
        --------
        >>> from bayespmf.datasets import make_latent_class
        >>> data, _ = make_latent_class(500, 3, rank=2, n_variables=4, random_state=1)
        >>> m = LatentClassPMF(2, method="em", random_state=0).fit(data)
        >>> np.allclose(m.predict_proba(data, target=0).sum(axis=1), 1.0)
        True
        """
        return conditional_pmf(
            self._codes(data), self.weights_, self.factors_, self._target(target)
        )

    def predict(self, data, target) -> np.ndarray:
        """MAP code of ``target`` given each row's other observed entries, (S,)."""
        return np.argmax(self.predict_proba(data, target), axis=1)

    def expected_value(self, data, target, values=None) -> np.ndarray:
        """MMSE estimate ``E[v(x_target) | other observed entries]`` per row.

        Parameters
        ----------
        values : array_like, shape (I_t,), optional
            Numeric value of each category (default: the codes 0..I_t-1; e.g. pass
            ``[1, 2, 3, 4, 5]`` for star ratings).
        """
        proba = self.predict_proba(data, target)
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
        return proba @ v

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
        return self

    @classmethod
    def from_params(cls, weights, factors, **kwargs) -> LatentClassPMF:
        """An estimator holding given parameters (e.g. a truth or a posterior mean)."""
        factors = list(factors)
        return cls(rank=len(np.asarray(weights)), **kwargs)._with_params(weights, factors)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> Path:
        """Save the fit to ``path`` (``.npz``: arrays plus JSON metadata, no pickle).

        Examples
        --------
        >>> import tempfile, os
        >>> m = LatentClassPMF.from_params([0.4, 0.6], [np.array([[0.3, 0.9], [0.7, 0.1]])])
        >>> p = m.save(os.path.join(tempfile.mkdtemp(), "fit.npz"))
        >>> m2 = LatentClassPMF.load(p)
        >>> np.array_equal(m2.weights_, m.weights_)
        True
        """
        import bayespmf

        self._check_fitted()
        path = Path(path)
        meta = {
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "bayespmf_version": bayespmf.__version__,
            "params": {k: v for k, v in self.get_params().items() if k != "random_state"},
            "n_iter": int(self.n_iter_),
            "converged": bool(self.converged_),
            "names": getattr(self, "_names", None),
            "categories": getattr(self, "_categories", None),
        }
        arrays = {f"factor_{n}": a for n, a in enumerate(self.factors_)}
        np.savez(
            path,
            weights=self.weights_,
            loglik_trace=np.asarray(self.loglik_trace_, dtype=float),
            meta=np.array(json.dumps(meta)),
            **arrays,
        )
        return path

    @classmethod
    def load(cls, path) -> LatentClassPMF:
        """Load a fit written by :meth:`save` (never executes code: no pickle)."""
        with np.load(Path(path), allow_pickle=False) as f:
            try:
                meta = json.loads(str(f["meta"]))
            except KeyError as err:
                raise DataValidationError(f"{path} is not a saved LatentClassPMF.") from err
            if meta.get("format") != _FORMAT:
                raise DataValidationError(f"{path} is not a saved LatentClassPMF.")
            if meta.get("format_version") != _FORMAT_VERSION:
                raise DataValidationError(
                    f"{path} was written in format version {meta.get('format_version')} "
                    f"(bayespmf {meta.get('bayespmf_version')}); this bayespmf reads "
                    f"version {_FORMAT_VERSION}. Refit or use a matching bayespmf."
                )
            n_factors = sum(1 for k in f.files if k.startswith("factor_"))
            factors = [f[f"factor_{n}"] for n in range(n_factors)]
            model = cls(**meta["params"])
            model._set_fitted(
                LatentClassParams(f["weights"], factors), [a.shape[0] for a in factors]
            )
            model.loglik_trace_ = f["loglik_trace"]
        model.n_iter_ = meta["n_iter"]
        model.converged_ = meta["converged"]
        model.info_ = {}
        model._names, model._categories = meta["names"], meta["categories"]
        return model


def _get(info, key, default):
    if isinstance(info, dict):
        return info.get(key, default)
    return getattr(info, key, default)
