"""One place for argument and data checks.

Every public entry point validates through these helpers so that a bad argument gets
the same kind of message everywhere: the argument's name, what is accepted, what was
received and, where there is one, the fix.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "CodeRangeError",
    "ConvergenceWarning",
    "DataValidationError",
    "as_codes",
    "check_float",
    "check_choice",
    "check_int",
    "check_n_categories",
    "check_random_seed",
    "check_random_state",
    "check_rank_limit",
    "check_zero_based",
]

#: Largest alphabet we accept for one variable; codes are stored as int64 but the one-hot
#: designs and marginal blocks grow with I_n, and a column with more distinct values than
#: this is almost certainly an identifier or a continuous variable, not a category. It is
#: the bound of the methods whose memory grows linearly with I_n (EM, SQUAREM-PMF, AD-EM
#: and "auto": EM fits a 100,000-category variable in seconds); the methods whose
#: statistics grow with sums of I_j I_k (CNMF, JUROR) or I_j I_k I_l (CTD) compare their
#: needs with the available memory before allocating, and "auto" leaves its CNMF-SPA
#: start out when it does not fit (bayespmf.fit.memory.memory_estimate).
MAX_CATEGORIES = 100_000


class DataValidationError(ValueError):
    """Raised when data handed to bayespmf are malformed (a ``ValueError`` subclass)."""


class CodeRangeError(DataValidationError):
    """A code at least its variable's ``n_categories`` (a ``DataValidationError``).

    Carries where: ``row``, ``variable``, ``code`` and the variable's ``n_categories``,
    so that a caller who knows where the alphabet came from (an estimator fitted on
    codes whose alphabets were inferred) can say how to fix it.
    """

    def __init__(self, message: str, *, row: int, variable: int, code: int, n_categories):
        super().__init__(message)
        self.row, self.variable, self.code = row, variable, code
        self.n_categories = n_categories


class ConvergenceWarning(UserWarning):
    """Raised (as a warning) when an iterative algorithm stops before converging."""


def check_random_state(random_state) -> np.random.Generator:
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.SeedSequence
        ``None`` gives fresh OS entropy; an int or a ``SeedSequence`` seeds a new
        PCG64 generator; a ``Generator`` is returned unchanged (so that a caller can
        thread one generator through several routines).

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ValueError
        If ``random_state`` is of another type (the legacy ``RandomState`` included).

    Examples
    --------
    >>> rng = check_random_state(0)
    >>> check_random_state(rng) is rng
    True
    """
    if random_state is None or isinstance(
        random_state, numbers.Integral | np.random.SeedSequence
    ):
        if isinstance(random_state, numbers.Integral) and random_state < 0:
            raise ValueError(
                f"The 'random_state' argument must be a non-negative int, a "
                f"numpy.random.Generator or None. Got {random_state!r}."
            )
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    raise ValueError(
        "The 'random_state' argument must be None, a non-negative int, a "
        f"numpy.random.Generator or a SeedSequence. Got {type(random_state).__name__}."
    )


def check_random_seed(random_seed, owner: str):
    """Check a PyMC-facing ``random_seed`` before any work uses it; return it unchanged.

    Parameters
    ----------
    random_seed : None, int, sequence of int or numpy.random.Generator
        What :func:`numpy.random.default_rng` (and so ``pm.sample``) takes.
    owner : str
        The function the argument was given to, for the message.

    Returns
    -------
    object
        ``random_seed`` itself (a generator is not advanced).

    Raises
    ------
    ValueError
        Anything NumPy cannot seed a generator with (a string, a float, a negative
        int), with the argument's name instead of NumPy's ``SeedSequence`` error.

    Examples
    --------
    >>> check_random_seed(3, "sample")
    3
    >>> check_random_seed("abc", "sample")
    Traceback (most recent call last):
    ...
    ValueError: The 'random_seed' argument of sample must be None, a non-negative int, ...
    """
    try:
        np.random.default_rng(random_seed)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"The 'random_seed' argument of {owner} must be None, a non-negative int, a "
            f"sequence of non-negative ints or a numpy.random.Generator. Got "
            f"{random_seed!r} ({err}). Pass e.g. random_seed=0."
        ) from None
    return random_seed


def check_int(value, name: str, *, owner: str = "", low=None, high=None) -> int:
    """Check that ``value`` is an integer in ``[low, high]`` and return it as ``int``.

    Examples
    --------
    >>> check_int(3, "n_components", owner="LatentClassPMF", low=1)
    3
    """
    where = f" of {owner}" if owner else ""
    rng_txt = _range_text(low, high)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"The '{name}' parameter{where} must be an int{rng_txt}. Got {value!r}."
        )
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(
            f"The '{name}' parameter{where} must be an int{rng_txt}. Got {value}."
        )
    return value


def check_rank_limit(n_components, limit: int, *, owner: str, why: str) -> int:
    """``n_components`` as an int in ``[1, limit]``; above it the message says ``why``.

    Raises
    ------
    ValueError
        ``n_components`` not an int >= 1.
    DataValidationError
        ``rank > limit``.

    Examples
    --------
    >>> check_rank_limit(3, 4, owner="f", why="4 is the most this data identifies.")
    3
    """
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
    if n_components > limit:
        raise DataValidationError(
            f"The 'n_components' parameter of {owner} is {n_components}, but {why} "
            f"Use n_components <= {limit}."
        )
    return n_components


def check_float(
    value, name: str, *, owner: str = "", low=None, high=None, low_open=False
) -> float:
    """Check that ``value`` is a finite real number in the given range.

    Examples
    --------
    >>> check_float(0.5, "observed_prob", low=0.0, high=1.0, low_open=True)
    0.5
    """
    where = f" of {owner}" if owner else ""
    lo = "(" if low_open else "["
    rng_txt = f" in {lo}{low}, {high}]" if low is not None or high is not None else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"The '{name}' parameter{where} must be a real number{rng_txt}. Got {value!r}."
        )
    value = float(value)
    bad = not np.isfinite(value)
    if low is not None:
        bad |= value <= low if low_open else value < low
    if high is not None:
        bad |= value > high
    if bad:
        raise ValueError(
            f"The '{name}' parameter{where} must be a finite real number{rng_txt}. "
            f"Got {value}."
        )
    return value


def _range_text(low, high) -> str:
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""


def as_codes(
    data,
    n_categories: Sequence[int] | np.ndarray | None = None,
    *,
    name: str = "data",
    allow_empty_rows: bool = True,
    allow_empty_columns: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate categorical codes and return ``(codes, n_categories)``.

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (n_samples, n_variables)
        Integer codes; ``-1`` marks a missing entry. A :class:`CategoricalData` (any
        object with NumPy ``codes`` and ``n_categories`` attributes) is accepted as
        is when immutable (its codes were validated when it was built).
    n_categories : sequence of int, optional
        Alphabet size of each variable. Inferred as ``max(code) + 1`` per column when
        omitted (which can under-count categories that never occur); codes in which
        no variable uses 0 are then refused as 1-based (see :func:`check_zero_based`).
    name : str
        Name of the argument, used in error messages.
    allow_empty_rows, allow_empty_columns : bool
        Whether rows (columns) with every entry missing are accepted.

    Returns
    -------
    codes : ndarray of int64, shape (n_samples, n_variables)
        A read-only array; a copy whenever the input had to be converted, so the
        caller's array is never modified.
    n_categories : ndarray of int64, shape (n_variables,)

    Raises
    ------
    DataValidationError
        Wrong number of dimensions, no rows or no columns, non-integer or NaN values,
        codes below -1 or at least ``n_categories``, a variable with fewer than two
        categories, 1-based codes with ``n_categories`` omitted (code 0 observed in
        no variable), or (unless allowed) an all-missing row or column.

    Examples
    --------
    >>> codes, n_cat = as_codes([[0, 1], [1, 2]])
    >>> n_cat
    array([2, 3])
    >>> as_codes([[1, 2], [2, 1]])
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: 'data' looks 1-based: ...
    >>> as_codes([[1, 2], [2, 1]], n_categories=3)[1]  # 0 declared: no check
    array([3, 3])
    """
    if _is_categorical_data(data):
        codes, n_cat = _codes_of_data_object(data, n_categories, name)
    else:
        codes = _to_int_array(data, name)
        _check_low_codes(codes, name)
        n_cat = _n_categories_of(codes, n_categories, name)
        _check_code_range(codes, n_cat, name)
        codes = np.array(codes, dtype=np.int64, copy=True)
        codes.setflags(write=False)
    mask = codes >= 0
    if not allow_empty_columns:
        empty_cols = np.flatnonzero(~mask.any(axis=0))
        if empty_cols.size:
            raise DataValidationError(
                f"Variable(s) {empty_cols.tolist()} of '{name}' are never observed "
                "(every entry is missing). Drop those columns first."
            )
    if not allow_empty_rows:
        empty_rows = np.flatnonzero(~mask.any(axis=1))
        if empty_rows.size:
            raise DataValidationError(
                f"{empty_rows.size} row(s) of '{name}' have every entry missing "
                f"(first: {empty_rows[:5].tolist()}). Drop them first, e.g. with "
                "CategoricalData.drop_empty_rows()."
            )
    return codes, n_cat


def _is_categorical_data(data) -> bool:
    """Whether ``data`` is an in-memory data object such as a ``CategoricalData``.

    Recognized by its attributes (``codes`` and ``n_categories``, both NumPy arrays),
    not by its class, so that this module need not import :mod:`bayespmf.data`, which
    imports it: checks flow one way, from data.py to here. A chunked source (Dask) has
    no NumPy ``codes`` and is not one.
    """
    return isinstance(getattr(data, "codes", None), np.ndarray) and isinstance(
        getattr(data, "n_categories", None), np.ndarray
    )


def _codes_of_data_object(data, n_categories, name: str) -> tuple[np.ndarray, np.ndarray]:
    codes, n_cat = data.codes, data.n_categories
    if n_categories is not None:
        given = np.asarray(n_categories, dtype=np.int64)
        if given.shape != n_cat.shape or np.any(given != n_cat):
            raise DataValidationError(
                f"'n_categories' ({given.tolist()}) disagrees with the "
                f"{type(data).__name__} passed as '{name}' ({n_cat.tolist()}). "
                "Leave 'n_categories' out when passing a CategoricalData."
            )
    immutable = not (codes.flags.writeable or n_cat.flags.writeable)
    if immutable and codes.dtype == np.int64 and n_cat.dtype == np.int64:
        # a CategoricalData: validated when it was built, and read-only since
        return codes, n_cat
    # another object with the same attributes: check it like a plain array, against
    # its own alphabet sizes (given, so never inferred)
    codes = _to_int_array(codes, name)
    _check_low_codes(codes, name)
    n_cat = _n_categories_of(codes, n_cat, name)
    _check_code_range(codes, n_cat, name)
    codes = np.array(codes, dtype=np.int64, copy=True)
    codes.setflags(write=False)
    return codes, n_cat


def _to_int_array(data, name: str) -> np.ndarray:
    try:
        arr = np.asarray(data)
    except Exception as err:  # ragged lists and the like
        raise DataValidationError(
            f"'{name}' must be a 2-D array of integer codes. Could not convert it to an "
            f"array: {err}"
        ) from err
    if arr.ndim != 2:
        raise DataValidationError(
            f"'{name}' must be a 2-D array of integer codes with shape "
            f"(n_samples, n_variables). Got an array with ndim={arr.ndim} and shape "
            f"{arr.shape}. Reshape it, e.g. x.reshape(-1, 1) for one variable."
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DataValidationError(
            f"'{name}' is empty (shape {arr.shape}); at least one row and one variable "
            "are needed."
        )
    if arr.dtype.kind in "iu":
        _check_overflow(arr, arr > _INT64_MAX if arr.dtype.kind == "u" else None, name)
        return arr
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        nan = np.isnan(arr)
        if nan.any():
            r, c = np.argwhere(nan)[0]
            raise DataValidationError(
                f"'{name}' contains NaN in column {c} (first at row {r}): use -1 for "
                "missing entries (integer codes mark them with -1), or "
                "CategoricalData.from_pandas for data with NaN/None as missing."
            )
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise DataValidationError(
                f"'{name}' must hold integer codes; it holds non-integer floats."
            )
        # 2**63 is a float; anything at or beyond it would wrap around in int64
        _check_overflow(arr, np.abs(arr) >= 2.0**63, name)
        return arr.astype(np.int64)
    raise DataValidationError(
        f"'{name}' must hold integer codes (-1 for missing); got dtype {arr.dtype}. "
        "Use CategoricalData.from_pandas for labelled (string) data."
    )


#: Largest code an int64 holds; an unsigned or float code beyond it would wrap around.
_INT64_MAX = np.iinfo(np.int64).max


def _check_overflow(arr, beyond, name: str) -> None:
    """Refuse codes that do not fit int64 (``beyond``: where; None for none possible)."""
    if beyond is None or not beyond.any():
        return
    r, c = np.argwhere(beyond)[0]
    hint = (
        " A code of 2**64 - 1 in an unsigned array is usually a -1 (missing) cast to an "
        "unsigned type: keep the codes signed (e.g. np.int64)."
        if arr.dtype.kind == "u"
        else ""
    )
    raise DataValidationError(
        f"'{name}' has code {arr[r, c].item()!r} at row {r}, variable {c}: an overflow, "
        f"it does not fit the int64 codes (at most {_INT64_MAX}). Codes must be in "
        f"[0, n_categories) with -1 for missing.{hint}"
    )


def _check_low_codes(codes, name: str) -> None:
    """Refuse codes below -1: neither missing nor a category (before any inference)."""
    if codes.dtype.kind == "u":
        return
    low = codes < -1
    if low.any():
        r, c = np.argwhere(low)[0]
        raise DataValidationError(
            f"'{name}' has code {codes[r, c]} at row {r}, variable {c}: code "
            f"{codes[r, c]} is neither missing (-1) nor a category (0 .. n_categories - "
            "1). Mark missing entries with -1 and code the categories from 0."
        )


def _n_categories_of(codes, n_categories, name) -> np.ndarray:
    """``n_categories`` checked against the columns of ``codes``; inferred when None."""
    if n_categories is None:
        n_cat = codes.max(axis=0).astype(np.int64) + 1
        small = np.flatnonzero(n_cat < 2)
        if small.size:
            raise DataValidationError(
                f"Variable(s) {small.tolist()} of '{name}' take at most one value, so "
                "their number of categories cannot be inferred and would be < 2. Pass "
                "'n_categories' explicitly or drop constant variables."
            )
        # only when inferring: a given 'n_categories' says category 0 exists
        _check_zero_based(codes, name)
        n_categories = n_cat
    return check_n_categories(n_categories, codes.shape[1], data_name=name)


def check_n_categories(
    n_categories, n_variables=None, *, owner: str = "", data_name: str | None = None
) -> np.ndarray:
    """Check alphabet sizes, one int in ``[2, MAX_CATEGORIES]`` per variable.

    Parameters
    ----------
    n_categories : int or sequence of int
        A non-empty 1-D sequence of ints; a single int stands for every variable where
        ``n_variables`` is given.
    n_variables : int, optional
        The number of variables, where the caller knows it (e.g. the columns of the
        data): a sequence must have that length.
    owner : str, optional
        The function or class whose argument this is, for the messages.
    data_name : str, optional
        The argument holding the data whose columns are the variables, for the
        messages.

    Returns
    -------
    ndarray of int64, shape (n_variables,)
        A new array.

    Raises
    ------
    DataValidationError
        Not ints, an empty or nested sequence, another length than ``n_variables``,
        or a size below 2 or above ``MAX_CATEGORIES``.

    Examples
    --------
    >>> check_n_categories([2, 3]), check_n_categories(4, n_variables=2)
    (array([2, 3]), array([4, 4]))
    >>> check_n_categories([2, 1], owner="f")
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: The 'n_categories' argument of f must ...
    """
    arg = f"The 'n_categories' argument of {owner}" if owner else "'n_categories'"
    try:
        arr = np.asarray(n_categories)
    except (TypeError, ValueError):  # ragged input and the like
        arr = np.asarray(None)
    if arr.ndim == 0 and arr.dtype.kind in "iu" and n_variables is not None:
        arr = np.full(n_variables, arr)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        alt = ", or one int for all of them" if n_variables is not None else ""
        raise DataValidationError(
            f"{arg} must be a non-empty 1-D sequence of ints, one alphabet size per "
            f"variable{alt}. Got {n_categories!r}."
        )
    if n_variables is not None and arr.size != n_variables:
        cols = f", the columns of '{data_name}'" if data_name else ""
        raise DataValidationError(
            f"{arg} ({arr.tolist()}) disagrees with the number of variables "
            f"({n_variables}{cols}): pass an int or a sequence of {n_variables} ints, "
            "one per variable."
        )
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < 2) | (arr > MAX_CATEGORIES))
    if bad.size:
        raise DataValidationError(
            f"{arg} must hold ints in [2, {MAX_CATEGORIES}]; got {arr[bad].tolist()} "
            f"for variable(s) {bad.tolist()}: every variable needs at least 2 "
            "categories (drop constant variables)."
        )
    return arr


def check_choice(value, name: str, choices: Sequence[str], owner: str) -> str:
    """``value`` lower-cased if it is one of ``choices``; else a message with a guess.

    Examples
    --------
    >>> check_choice("Dirichlet", "prior", ("dirichlet", "uniform"), owner="f")
    'dirichlet'
    >>> check_choice("dirichet", "prior", ("dirichlet", "uniform"), owner="f")
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: The 'prior' parameter ...?
    """
    if isinstance(value, str) and value.lower() in choices:
        return value.lower()
    close = difflib.get_close_matches(str(value).lower(), choices, n=2)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise DataValidationError(
        f"The '{name}' parameter of {owner} must be one of "
        f"{', '.join(repr(c) for c in choices)}. Got {value!r}.{hint}"
    )


#: How many per-variable minima a "codes look 1-based" message lists before "...".
_MAX_LISTED = 10


def _check_zero_based(codes, name: str) -> None:
    """Refuse codes whose smallest observed value is >= 1 in every variable.

    Inferring ``n_categories`` as ``max + 1`` from data coded ``1..K`` (poLCA and many
    survey files) would give every variable an empty category 0: a wrong alphabet
    that silently changes the parameter count, the identifiability limit and the
    category labels of every result. This raises rather than warns because nothing
    downstream can undo it and a warning is easily lost (filtered, or printed far from
    the fit); the fix is one line. A category 0 that legitimately never occurs in
    *every* variable is rare and is declared by passing ``n_categories``; a 0 missing
    from only some variables is an ordinary unused category and passes.
    """
    wide = codes.astype(np.int64, copy=False)
    # missing entries (-1) count as +inf: the minimum is over observed codes only
    col_min = np.where(wide >= 0, wide, np.iinfo(np.int64).max).min(axis=0)
    check_zero_based(col_min, name)


def check_zero_based(min_codes, name: str = "data") -> None:
    """Raise if the smallest observed code of every variable is at least 1.

    The check that :func:`as_codes` applies when it infers ``n_categories``, exposed
    for data sources that infer alphabets themselves (e.g. chunk by chunk).

    Parameters
    ----------
    min_codes : array_like of int, shape (n_variables,)
        Smallest observed (non-missing) code of each variable.
    name : str
        Name of the argument, used in the message.

    Raises
    ------
    DataValidationError
        If every entry of ``min_codes`` is >= 1: the codes look 1-based.

    Examples
    --------
    >>> check_zero_based([0, 2, 1])  # variable 0 uses code 0: fine
    >>> check_zero_based([1, 1], "codes")
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: 'codes' looks 1-based: ...
    """
    col_min = np.asarray(min_codes, dtype=np.int64).ravel()
    if col_min.size == 0 or np.any(col_min < 1):
        return
    shown = col_min[:_MAX_LISTED].tolist()
    more = ", ..." if col_min.size > _MAX_LISTED else ""
    listed = ", ".join(map(str, shown)) + more
    raise DataValidationError(
        f"'{name}' looks 1-based: code 0 never occurs in any variable (smallest "
        f"observed code per variable: [{listed}]), so inferring 'n_categories' as "
        "max code + 1 would give every variable an empty category 0. Shift the codes "
        "to start at 0 (codes - 1; np.where(codes > 0, codes - 1, -1) keeps -1 as "
        "missing), build the data with CategoricalData.from_pandas (labels in any "
        "coding), or pass 'n_categories' explicitly if 0 is a real category that "
        "happens never to occur."
    )


def _check_code_range(codes, n_cat, name) -> None:
    """Refuse codes at least their variable's ``n_categories`` (after _check_low_codes)."""
    high = codes >= n_cat[None, :]
    if high.any():
        r, c = np.argwhere(high)[0]
        raise CodeRangeError(
            f"'{name}' has code {codes[r, c]} at row {r}, variable {c}, but that "
            f"variable has n_categories={n_cat[c]}; codes must be in "
            f"[0, {n_cat[c]}) with -1 for missing. Pass a larger 'n_categories'.",
            row=int(r),
            variable=int(c),
            code=int(codes[r, c]),
            n_categories=int(n_cat[c]),
        )
