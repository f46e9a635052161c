"""Saving a fitted estimator to ``.npz`` and loading it back.

The part every estimator shares: the suffix check, the atomic write with a checksum,
the format tag, the error that names a damaged file.

Each estimator says *what* it saves: ``_saved_state()`` returns the metadata and the
arrays, ``_from_saved(arrays, meta, path)`` rebuilds and validates a fit from them
(:mod:`bayespmf.io` calls the same two for netCDF-4). Private to
:mod:`bayespmf.estimators`.
"""

from __future__ import annotations

from pathlib import Path

from bayespmf._npz import CorruptFileError, check_suffix, load_fit, save_fit

__all__ = ["NpzPersistence", "check_labels", "corrupt_fit"]


def corrupt_fit(path, owner: str, what: str) -> CorruptFileError:
    """The error for a file at ``path`` that does not hold a valid ``owner`` fit.

    Examples
    --------
    >>> str(corrupt_fit("f.npz", "LatentClassPMF", "it holds no factors"))[:50]
    'f.npz does not hold a valid LatentClassPMF fit: it'
    """
    return CorruptFileError(
        f"{path} does not hold a valid {owner} fit: {what}. The file is damaged or was "
        "not written by bayespmf; save the fit again (or refit)."
    )


def check_labels(names, categories, n_categories, corrupt) -> None:
    """Names and category labels of a saved fit agree with its factors.

    Parameters
    ----------
    names : list of str or None
        The saved variable names.
    categories : list of list or None
        The saved category labels, one list per variable.
    n_categories : sequence of int
        The number of rows of each saved factor.
    corrupt : callable
        ``corrupt(what)`` builds the error to raise (see :func:`corrupt_fit`).

    Examples
    --------
    >>> def corrupt(what):
    ...     return ValueError(what)
    >>> check_labels(["a", "b"], [["x", "y"], ["u", "v", "w"]], [2, 3], corrupt)
    >>> check_labels(["a", "b"], [["x", "y"], ["u", "v"]], [2, 3], corrupt)
    Traceback (most recent call last):
    ValueError: factor 1 has 3 categories but 2 category labels
    """
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


class NpzPersistence:
    """``save`` and ``load`` of a fitted estimator as ``.npz`` (no pickle).

    A class using it sets ``_FORMAT`` (the format tag; a file with another tag is
    refused) and ``_FORMAT_VERSION`` (a file with another version is refused), and
    defines ``_saved_state()`` and ``_from_saved(arrays, meta, path)``; ``_SAVE_HINT``
    ends the message of a path without ``.npz``.
    """

    _FORMAT: str
    _FORMAT_VERSION: int
    _SAVE_HINT = ""

    def save(self, path) -> Path:
        """Save the fit to ``path`` (``.npz``: arrays plus JSON metadata, no pickle).

        Every fitted attribute and every parameter is saved exactly (a
        ``numpy.random.Generator`` as its state; for ``LatentClassPMF`` also given
        starts as arrays, ``optima_`` with its dtypes, ``info_``), with a SHA-256
        checksum of the content. The file is written to a temporary file beside
        ``path`` and renamed over it: a failed save leaves an existing file as it was.
        :func:`bayespmf.io.save` writes the same content of a ``LatentClassPMF`` as
        netCDF-4.

        Raises
        ------
        ValueError
            ``path`` does not end in ``.npz``, or the estimator is not fitted.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from bayespmf.estimators import LatentClassPMF
        >>> m = LatentClassPMF.from_params([0.4, 0.6], [np.array([[0.3, 0.9], [0.7, 0.1]])])
        >>> p = m.save(os.path.join(tempfile.mkdtemp(), "fit.npz"))
        >>> m2 = LatentClassPMF.load(p)
        >>> np.array_equal(m2.weights_, m.weights_)
        True
        """
        owner = f"{type(self).__name__}.save"
        path = check_suffix(path, owner=owner, hint=self._SAVE_HINT)
        meta, arrays = self._saved_state()
        return save_fit(
            path,
            meta,
            fmt=self._FORMAT,
            version=self._FORMAT_VERSION,
            owner=owner,
            **arrays,
        )

    @classmethod
    def load(cls, path):
        """Load a fit written by :meth:`save` (never executes code: no pickle).

        The content is checked against the checksum recorded at save time (files
        written before checksums were recorded, by bayespmf <= 0.2, are not), then
        validated: weights and factors finite, on the simplex (column-stochastic
        factors), of one rank (that of the coefficients too, for
        ``LatentClassRegression``), and category labels matching the factors' shapes.

        Raises
        ------
        bayespmf.io.CorruptFileError
            A checksum mismatch, or invalid or inconsistent content (a
            ``DataValidationError``, hence a ``ValueError``).
        """
        arrays, meta = load_fit(
            path, fmt=cls._FORMAT, version=cls._FORMAT_VERSION, owner=cls.__name__
        )
        return cls._from_saved(arrays, meta, path)
