"""Predictions of a fitted latent-class PMF.

Scores, class membership, and any variable given the others, mixed into
:class:`~bayespmf.estimators.LatentClassPMF`.

Private to :mod:`bayespmf.estimators`. Every method takes rows as ``fit`` does and
binds a DataFrame or CategoricalData to the fitted variables by name
(``LatentClassPMF._codes``); a DataFrame in gives a DataFrame or Series out, indexed
like it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayespmf._validation import DataValidationError, check_int
from bayespmf.pmf import conditional_pmf, log_likelihood_rows, posterior_classes

__all__ = ["LatentClassPrediction"]


class LatentClassPrediction:
    """Scores and predictions from ``weights_`` and ``factors_`` (a fitted PMF).

    The class using it defines ``_check_fitted()``, ``_codes(data)`` (the rows as
    codes in the fitted layout), ``weights_``, ``factors_``, ``n_categories_`` and the
    labels ``_names``, ``_categories``.
    """

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
        self._check_fitted()  # before the fitted attributes are read
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

    # ------------------------------------------------------------ class membership
    def predict_class_proba(self, data) -> np.ndarray:
        """Posterior class probabilities of each row given its observed entries, (S, F).

        Bayes' rule ``Pr(H=f | x_obs) = lambda_f prod_n A_n(x_n, f) / Pr(x_obs)`` over
        the observed entries (missing ones marginalized); a row with no observed entry
        gets the class weights.

        Examples
        --------
        >>> from bayespmf.estimators import LatentClassPMF
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

    def predict_proba(self, data, target=None) -> np.ndarray:
        """PMF of variable ``target`` given each row's other observed entries, (S, I_t).

        Without ``target``: the posterior class probabilities,
        :meth:`predict_class_proba` (S, F), as scikit-learn's mixture models and
        StepMix read ``predict_proba(X)``.

        Examples
        --------
        >>> from bayespmf.datasets import make_latent_class
        >>> from bayespmf.estimators import LatentClassPMF
        >>> data, _ = make_latent_class(500, 3, n_components=2, n_variables=4,
        ...                             random_state=1)
        >>> m = LatentClassPMF(2, random_state=0).fit(data)
        >>> np.allclose(m.predict_proba(data, target=0).sum(axis=1), 1.0)
        True
        """
        if target is None:
            return self.predict_class_proba(data)
        t = self._target(target)
        p = conditional_pmf(self._codes(data), self.weights_, self.factors_, t)
        return self._as_frame(data, p, self._labels(t))

    def predict(self, data, target=None) -> np.ndarray:
        """MAP code of ``target`` given each row's other observed entries, (S,).

        For a DataFrame ``data``: a Series of category labels indexed like it.
        Without ``target``: the modal class of each row, :meth:`predict_class`, as
        scikit-learn's mixture models and StepMix read ``predict(X)``.
        """
        if target is None:
            return self.predict_class(data)
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
