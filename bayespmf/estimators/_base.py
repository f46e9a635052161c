"""What the estimators share about their data.

The not-fitted error, the ``y`` that scikit-learn passes along, and the variable names
and labels a fit keeps.

Private to :mod:`bayespmf.estimators`; :class:`NotFittedError` is re-exported by
``bayespmf.estimators`` (and ``bayespmf.estimators.latent_class``, its earlier home).
"""

from __future__ import annotations

import numpy as np
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils.validation import check_is_fitted

from bayespmf._validation import as_codes
from bayespmf.data import bind_rows

__all__ = ["LabelledFit", "NotFittedError", "check_fitted", "check_ignored_y"]


class NotFittedError(SklearnNotFittedError):
    """The estimator is used before ``fit``.

    A subclass of scikit-learn's (itself a ``ValueError`` and an ``AttributeError``), so
    ``except NotFittedError`` clauses written for scikit-learn catch it.
    """


def check_fitted(estimator, attribute: str, call: str) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has its fitted ``attribute``.

    scikit-learn's :func:`~sklearn.utils.validation.check_is_fitted` decides; the error
    is this package's subclass, so that both ``except`` clauses catch it.

    Parameters
    ----------
    estimator : object
        The estimator a method was called on.
    attribute : str
        A fitted attribute that ``fit`` always sets (e.g. ``"weights_"``).
    call : str
        How to fit it, for the message (e.g. ``"fit(data)"``).

    Raises
    ------
    NotFittedError
        Before ``fit``.

    Examples
    --------
    >>> from bayespmf.estimators import LatentClassPMF
    >>> check_fitted(LatentClassPMF(2), "weights_", "fit(data)")
    Traceback (most recent call last):
    ...
    bayespmf.estimators._base.NotFittedError: This LatentClassPMF is not fitted yet; ...
    """
    name = type(estimator).__name__
    try:
        check_is_fitted(
            estimator,
            attribute,
            msg=f"This {name} is not fitted yet; call {call} before using it.",
        )
    except SklearnNotFittedError as err:
        raise NotFittedError(str(err)) from None


def check_ignored_y(y, data, *, owner: str, why: str, fix: str) -> None:
    """Accept a ``y`` that a scikit-learn tool passes along (one entry per row).

    Anything else (e.g. an argument of ``fit`` passed positionally where ``y`` stands)
    is refused rather than silently ignored.

    Parameters
    ----------
    y : object
        What ``fit`` got as ``y``.
    data : object
        The rows ``fit`` got (a ``CategoricalData``, a DataFrame or an array).
    owner : str
        The method, for the message (e.g. ``"LatentClassPMF.fit"``).
    why : str
        Why ``y`` is ignored, for the message.
    fix : str
        What the caller probably meant, for the message.

    Raises
    ------
    ValueError
        ``y`` is neither None nor one-dimensional with one entry per row.

    Examples
    --------
    >>> check_ignored_y(np.zeros(3), np.zeros((3, 2)), owner="E.fit", why="", fix="")
    >>> check_ignored_y([3, 4], np.zeros((3, 2)), owner="E.fit", why="unsupervised",
    ...                 fix="Pass n_categories=... by keyword.")
    Traceback (most recent call last):
    ValueError: E.fit: 'y' is ignored (unsupervised), ... got list of shape (2,). Pass...
    """
    if y is None:
        return
    n_rows = getattr(data, "n_samples", None)
    if n_rows is None:
        n_rows = len(data) if hasattr(data, "__len__") else None
    if np.ndim(y) == 1 and n_rows is not None and len(y) == n_rows:
        return
    raise ValueError(
        f"{owner}: 'y' is ignored ({why}), and must be None or one entry per row "
        f"({n_rows}); got {type(y).__name__} of shape {np.shape(y)}. {fix}"
    )


class LabelledFit:
    """The variable names and category labels a fit keeps, and new rows bound to them.

    Mixed into the latent-class estimators: :meth:`_keep_labels` records them from the
    data given to ``fit`` (``_names``, ``_categories``: None for bare codes), and
    :meth:`_bound_codes` turns rows given after ``fit`` into codes in the fitted
    variable order and alphabets (:func:`bayespmf.data.bind_rows`). The class using it
    sets ``n_categories_`` in ``fit``.
    """

    def _keep_labels(self, data) -> None:
        """Record ``data``'s variable names and category labels (plain lists)."""
        names = getattr(data, "names", None)
        categories = getattr(data, "categories", None)
        self._names = None if names is None else list(names)
        self._categories = None if categories is None else [list(c) for c in categories]

    def _bound_codes(self, data, name: str = "data") -> tuple[np.ndarray, np.ndarray]:
        """Codes of ``data`` in the fitted layout, and the alphabet sizes.

        A DataFrame or CategoricalData is bound to the fitted variables by name and
        category label (:func:`bayespmf.data.as_categorical`): other column orders and
        alphabets are recoded, data that do not fit are refused. Integer codes, and
        any data given to an estimator fitted on bare codes (no names), are positional.
        """
        rows = bind_rows(
            data,
            self.n_categories_,
            getattr(self, "_names", None),
            getattr(self, "_categories", None),
            name=name,
        )
        return as_codes(rows, self.n_categories_, name=name, allow_empty_columns=True)
