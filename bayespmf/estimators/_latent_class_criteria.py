"""Model choice for a fitted latent-class PMF.

Information criteria, entropy, goodness of fit and standard errors, mixed into
:class:`~bayespmf.estimators.LatentClassPMF`.

Private to :mod:`bayespmf.estimators`.
"""

from __future__ import annotations

import math

import numpy as np

from bayespmf._validation import DataValidationError

__all__ = ["MAX_GOF_CELLS", "LatentClassModelChoice"]

#: Largest table of response patterns goodness_of_fit enumerates (8 MB of float64).
MAX_GOF_CELLS = 1_000_000


class LatentClassModelChoice:
    """Criteria that compare fits of several ranks on the same data.

    The class using it defines ``_codes(data)``, ``score_samples(data)``,
    ``predict_class_proba(data)``, ``joint_pmf()``, ``params_``, ``weights_``,
    ``n_categories_`` and ``random_state``.
    """

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
        >>> from bayespmf.estimators import LatentClassPMF
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
        >>> from bayespmf.estimators import LatentClassPMF
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
        >>> from bayespmf.estimators import LatentClassPMF
        >>> data, _ = make_latent_class(2000, [3, 3, 3, 3], n_components=2, random_state=0,
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
