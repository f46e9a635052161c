"""Data sources of a latent-class fit: rows in memory, weighted or not.

:func:`bayespmf.fit.fit_latent_class` runs on a *data source*: an object with
``n_categories``, ``names``, ``categories`` and the passes a method needs
(``pairwise_marginals()``, ``triple_marginals()``, ``categorical()``,
``em_kernel(rank, backend)``). :class:`InMemorySource` holds rows in memory;
``bayespmf.dask`` supplies one over chunked arrays.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayespmf._validation import DataValidationError, as_codes
from bayespmf.data import CategoricalData
from bayespmf.kernels.em import build_em_kernel

__all__ = [
    "COLLAPSE_MAX_SHARE",
    "InMemorySource",
    "as_source",
    "check_sample_weight",
    "float_array",
    "register_source",
    "unit_mean_weights",
]


#: Duplicate rows are collapsed into weighted response patterns for the EM map when
#: the patterns number at most this share of the rows (below it the pass over fewer
#: rows more than pays for np.unique; benchmarks/multistart_cost.py).
COLLAPSE_MAX_SHARE = 0.8


def unique_rows(codes: np.ndarray, n_categories) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, axis=0, return_inverse=True)``, faster on small alphabets.

    Where every row fits one int64 key (codes ``-1 .. I_n - 1`` read as digits of
    radix ``I_n + 1``, the first column the most significant) the keys are
    deduplicated instead of the rows: the same rows in the same (lexicographic)
    order, many times faster on long data of a few variables
    (:ref:`bench-collapse`).

    Examples
    --------
    >>> codes = np.array([[1, -1], [0, 2], [1, -1], [-1, 0]])
    >>> uniq, inverse = unique_rows(codes, [2, 3])
    >>> uniq.tolist(), inverse.tolist()
    ([[-1, 0], [0, 2], [1, -1]], [2, 1, 2, 0])
    """
    codes = np.asarray(codes)
    radix = np.asarray(n_categories, dtype=np.int64) + 1
    if codes.ndim != 2 or codes.shape[0] == 0 or np.sum(np.log2(radix)) >= 62:
        return np.unique(codes, axis=0, return_inverse=True)
    place = np.ones(radix.size, dtype=np.int64)
    place[:-1] = np.cumprod(radix[::-1])[::-1][1:]
    keys = (codes.astype(np.int64) + 1) @ place
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return codes[first], inverse.ravel()


class InMemorySource:
    """The data passes of :func:`~bayespmf.fit.fit_latent_class` on in-memory codes.

    ``bayespmf.dask`` supplies the same methods over chunked data, so every estimation
    method runs the same stages whatever holds the rows.

    Rows may carry weights (``row_weight``: frequencies or survey weights). For the EM
    map, duplicate rows are collapsed into unique response patterns weighted by their
    total weight when the patterns number at most ``COLLAPSE_MAX_SHARE`` of the rows:
    the same log-likelihood and EM iterates (up to summation order) from fewer rows.
    """

    #: Its EM kernel takes many starts at once (multi-start exploration).
    batched = True

    #: The caller's weights are ``row_weight * weight_scale`` (``row_weight`` has mean
    #: 1: see :func:`unit_mean_weights`); the fit's log-likelihoods are multiplied back.
    weight_scale = 1.0

    def __init__(self, codes, n_categories, names=None, categories=None, row_weight=None):
        self.codes = codes
        self.n_categories = np.asarray(n_categories, dtype=np.int64)
        self.names, self.categories = names, categories
        self.row_weight = row_weight
        self._patterns = None

    def patterns(self):
        """``(codes, weight)`` the EM map runs over: unique patterns when that pays.

        ``weight`` is None for unweighted rows that are not collapsed.
        """
        if self._patterns is None:
            uniq, inverse = unique_rows(self.codes, self.n_categories)
            w = np.ones(self.codes.shape[0]) if self.row_weight is None else self.row_weight
            if uniq.shape[0] <= COLLAPSE_MAX_SHARE * self.codes.shape[0]:
                counts = np.bincount(inverse.ravel(), weights=w, minlength=uniq.shape[0])
                self._patterns = (uniq, counts)
            else:
                self._patterns = (self.codes, self.row_weight)
        return self._patterns

    def pairwise_marginals(self):
        """Empirical pairwise marginals of all variable pairs.

        Weighted, the lightest row counts as one observation in the pair counts
        (CNMF-SPA's ``min_count`` and the sample sizes of its bootstrap): the same for
        every scale of the weights, and pattern frequencies (least count 1) give the
        counts of the expanded rows.
        """
        from bayespmf.marginals import pairwise_marginals

        weight = self.row_weight
        if weight is not None:
            weight = weight / weight.min()
        return pairwise_marginals(self.codes, self.n_categories, sample_weight=weight)

    def triple_marginals(self):
        """Empirical triple marginals of all variable triples."""
        from bayespmf.marginals import triple_marginals

        return triple_marginals(self.codes, self.n_categories)

    def categorical(self) -> CategoricalData:
        """The rows themselves (for kernels that need them: JUROR, AD-EM, row seeds)."""
        return CategoricalData(self.codes, self.n_categories)

    def em_kernel(self, n_components: int, backend: str = "auto"):
        """The EM map of these rows (:func:`bayespmf.kernels.em.build_em_kernel`)."""
        if backend in ("auto", "numba"):
            codes, weight = self.patterns()
        else:  # only the numba kernel takes weights; it refuses them otherwise
            codes, weight = self.codes, self.row_weight
        return build_em_kernel(
            codes, self.n_categories, n_components, backend=backend, row_weight=weight
        )


def float_array(value, name: str, owner: str, expected: str, fix: str = "") -> np.ndarray:
    """A float copy of ``value`` (a DataFrame's values), or an error naming the argument.

    Parameters
    ----------
    value : array_like or pandas.DataFrame
    name, owner : str
        The argument's name and the function or class it was passed to.
    expected : str
        What the argument must be (the error's wording).
    fix : str, default ""
        A sentence appended to the error: how to fix the input.

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    DataValidationError
        ``value`` cannot be converted to float.

    Examples
    --------
    >>> float_array([1, 2], "w", "f", "numbers")
    array([1., 2.])
    >>> float_array(["a"], "w", "f", "numbers")
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: The 'w' parameter of f must be numbers; \
could not convert it to float (could not convert string to float: 'a').
    """
    try:
        if isinstance(value, pd.DataFrame):
            return value.to_numpy(dtype=np.float64)
        return np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"The '{name}' parameter of {owner} must be {expected}; could not convert it "
            f"to float ({err}).{fix}"
        ) from err


def check_sample_weight(sample_weight, n_rows: int, owner: str) -> np.ndarray:
    """A float copy of ``sample_weight``: 1-D, one finite weight >= 0 per row, sum > 0."""
    w = float_array(sample_weight, "sample_weight", owner, "numbers, one per row")
    if w.ndim != 1 or w.shape[0] != n_rows:
        raise DataValidationError(
            f"The 'sample_weight' parameter of {owner} must have one entry per row of "
            f"'data' ({n_rows}); got shape {w.shape}."
        )
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        raise DataValidationError(
            f"The 'sample_weight' parameter of {owner} must be finite and >= 0; rows "
            f"{np.flatnonzero(bad)[:5].tolist()} are not (e.g. {w[bad][0]!r})."
        )
    if not w.sum() > 0:
        raise DataValidationError(
            f"The 'sample_weight' parameter of {owner} sums to 0: nothing to fit."
        )
    return w


#: Data types that are fitted through a data source of their own, and the function
#: that builds it: filled by the backends above this layer (:func:`register_source`).
_SOURCE_BUILDERS: list = []


def register_source(data_type: type, build) -> None:
    """Fit data of ``data_type`` through the data source ``build(data)`` returns.

    How a backend that sits above the fit layer (``bayespmf.dask``, whose
    ``DaskCategoricalData`` is fitted chunk by chunk) makes :func:`as_source`, and so
    :func:`~bayespmf.fit.fit_latent_class` and ``LatentClassPMF.fit``, take its data
    without this layer importing it.

    Parameters
    ----------
    data_type : type
        The data's class.
    build : callable
        ``build(data) -> source``, an object with the passes of a data source.
    """
    _SOURCE_BUILDERS.append((data_type, build))


def as_source(data, n_categories, sample_weight=None, owner="fit_latent_class"):
    """``data`` as a data source: a source as it is, else rows in memory.

    Data of a registered type (:func:`register_source`; e.g.
    :class:`bayespmf.dask.DaskCategoricalData`) are fitted through their own source,
    chunk by chunk, never loaded into memory here.

    Entirely missing rows (and rows of weight 0) are dropped; weights are scaled to
    mean 1 (:func:`unit_mean_weights`), the scale kept in ``weight_scale``.
    """
    for data_type, build in _SOURCE_BUILDERS:
        if isinstance(data, data_type):  # e.g. chunked data: its map-reduce source
            data = build(data)
            break
    if hasattr(data, "em_kernel") and hasattr(data, "pairwise_marginals"):
        if sample_weight is not None:
            raise ValueError(
                f"{owner}: 'sample_weight' is not supported for a data source; put "
                "the weights in the source."
            )
        if n_categories is not None:  # checked, never ignored: the source has its own
            given = np.asarray(n_categories)
            if given.ndim == 0:
                given = np.full(len(data.n_categories), given)
            if given.shape != np.shape(data.n_categories) or np.any(
                given != data.n_categories
            ):
                raise DataValidationError(
                    f"The 'n_categories' argument of {owner} ({given.tolist()}) "
                    f"disagrees with the alphabets of the data "
                    f"({np.asarray(data.n_categories).tolist()}). Leave 'n_categories' "
                    "out, or build the data with these alphabets."
                )
        return data
    codes, n_cat = as_codes(data, n_categories, name="data")
    weight = None
    if sample_weight is not None:
        weight = check_sample_weight(sample_weight, codes.shape[0], owner)
    keep = (codes >= 0).any(axis=1)
    if weight is not None:
        keep &= weight > 0
    if not keep.any():
        raise DataValidationError(
            "Every row of 'data' is entirely missing (or has weight 0); there is "
            "nothing to fit."
        )
    if not keep.all():
        codes = codes[keep]
        weight = None if weight is None else weight[keep]
    scale = 1.0
    if weight is not None:
        weight, scale = unit_mean_weights(weight)
    names = getattr(data, "names", None) if isinstance(data, CategoricalData) else None
    cats = getattr(data, "categories", None) if isinstance(data, CategoricalData) else None
    source = InMemorySource(codes, n_cat, names, cats, row_weight=weight)
    source.weight_scale = scale
    return source


def unit_mean_weights(weight: np.ndarray) -> tuple[np.ndarray, float]:
    """``(weight / scale, scale)``, ``scale`` the mean weight (summed without overflow).

    The fit runs on weights of mean 1, so that its scale-dependent constants (the
    floor 1 of the stopping rule ``tol * max(|L|, 1)``, ``OPTIMUM_LOGLIK_ATOL``) mean
    the same for every scale of the caller's weights (all 1e-200 would otherwise stop
    at the start; 1e200 could overflow the weighted sums). The maximizer is the same;
    :func:`bayespmf.fit.latent_class.rescaled_fit` puts the log-likelihoods back on the
    caller's scale.
    """
    peak = float(weight.max())
    scale = peak * float(np.mean(weight / peak))
    return weight / scale, scale
