"""What the marginal statistics share: argument checks and read-only arrays.

Private to :mod:`bayespmf.marginals`; the names carry no underscore because the three
statistics' modules import them.
"""

from __future__ import annotations

import numbers
import reprlib

import numpy as np

from bayespmf._validation import DataValidationError, as_codes, check_int
from bayespmf.data import CategoricalData

__all__ = [
    "POPULATION_COUNT",
    "as_block",
    "check_int_arg",
    "check_tuples",
    "check_variable",
    "codes_and_chunks",
    "readonly",
]

#: ``counts`` (and ``n_samples``) of population marginals built by ``from_params`` when
#: no sample size is given: "infinitely many rows". 2**53 is the largest integer float64
#: holds exactly, so an estimator that weights blocks by their counts stays exact.
POPULATION_COUNT = 2**53


def readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def check_int_arg(value, name: str, *, owner: str, low=None) -> int:
    """:func:`check_int` raising :class:`DataValidationError`."""
    try:
        return check_int(value, name, owner=owner, low=low)
    except DataValidationError:
        raise
    except ValueError as err:
        raise DataValidationError(str(err)) from err


def check_variable(j, n_vars: int, name: str) -> int:
    if isinstance(j, bool) or not isinstance(j, numbers.Integral) or not 0 <= j < n_vars:
        raise DataValidationError(
            f"The variable index '{name}' must be an int in [0, {n_vars}). Got {j!r}."
        )
    return int(j)


def check_tuples(tuples, size: int, n_vars: int, name: str) -> np.ndarray:
    """Validate index tuples; return them sorted within and across rows, unique.

    Returns an int64 array of shape (T, size).
    """
    what = "pairs (j, k)" if size == 2 else "triples (j, k, l)"
    fix = (
        f"'{name}' must be a non-empty sequence of index {what} with distinct "
        f"entries in [0, {n_vars})"
    )
    try:
        arr = np.asarray(list(tuples))
    except Exception as err:  # ragged, not iterable, ...
        raise DataValidationError(
            f"{fix}. Could not read {reprlib.repr(tuples)}: {err}"
        ) from err
    if arr.size == 0 or arr.ndim != 2 or arr.shape[1] != size or arr.dtype.kind not in "iu":
        raise DataValidationError(f"{fix}. Got {reprlib.repr(tuples)}.")
    bad = np.flatnonzero(((arr < 0) | (arr >= n_vars)).any(axis=1))
    if bad.size:
        raise DataValidationError(
            f"{fix}. Entry {arr[bad[0]].tolist()} is out of range for {n_vars} variables."
        )
    arr = np.sort(arr.astype(np.int64), axis=1)
    rep = np.flatnonzero((np.diff(arr, axis=1) == 0).any(axis=1))
    if rep.size:
        raise DataValidationError(
            f"{fix}. Entry {arr[rep[0]].tolist()} repeats a variable; marginals of a "
            "variable with itself are in PairwiseMarginals.one_way."
        )
    return np.unique(arr, axis=0)


def as_block(codes_block, n_categories: np.ndarray, owner: str):
    """Validate a block of rows for an accumulator; ``None`` for an empty block.

    A ``(0, N)`` array (an empty partition) is accepted as a no-op.
    """
    arr = codes_block.codes if isinstance(codes_block, CategoricalData) else codes_block
    try:
        shape = np.shape(arr)
    except ValueError:  # ragged: as_codes gives the message
        shape = ()
    n_vars = n_categories.size
    if len(shape) == 2 and shape[1] != n_vars:
        raise DataValidationError(
            f"'codes_block' has {shape[1]} column(s) but this {owner} was built for "
            f"{n_vars} variables (n_categories={n_categories.tolist()}). Pass blocks "
            "with the same columns, in the same order."
        )
    if len(shape) == 2 and shape[0] == 0:
        return None
    codes, _ = as_codes(
        codes_block,
        n_categories,
        name="codes_block",
        allow_empty_rows=True,
        allow_empty_columns=True,
    )
    return codes


def codes_and_chunks(data, n_categories, chunk_size, owner):
    """Validate ``data`` and ``chunk_size``; return ``(n_categories, row blocks)``."""
    if chunk_size is not None:
        chunk_size = check_int_arg(chunk_size, "chunk_size", owner=owner, low=1)
    codes, n_cat = as_codes(data, n_categories, name="data", allow_empty_columns=True)
    if chunk_size is None:
        return n_cat, [codes]
    return n_cat, [codes[s : s + chunk_size] for s in range(0, codes.shape[0], chunk_size)]
