r"""The chunked data container of :mod:`bayespmf.dask` and its map-reduce helpers.

:class:`DaskCategoricalData` holds partially observed categorical data as a row-chunked
``dask.array`` of integer codes (``-1`` missing). The helpers here are shared by every
map-reduce of the package (:mod:`bayespmf.dask.marginals`, :mod:`bayespmf.dask.em`,
:mod:`bayespmf.dask.gibbs`): the tree reduction of ``dask.delayed`` parts, ``compute`` /
``persist`` on the caller's scheduler, and the argument checks.

Requires the ``dask`` extra: ``pip install "bayespmf[dask]"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayespmf._validation import DataValidationError, check_int, check_zero_based
from bayespmf.data import CategoricalData

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "SPLIT_EVERY",
    "DaskCategoricalData",
    "check_ddata",
    "check_split_every",
    "compute_on",
    "persist_on",
    "require_dask",
    "tree_reduce",
]

#: Rows per chunk when a chunk size is not given: 2**18 rows of 15 int64 codes are
#: 30 MiB, inside Dask's advice of 10-100 MiB per chunk, and one E-step pass over a
#: chunk is long next to the scheduler's per-task overhead (:ref:`bench-dask-fit`).
DEFAULT_CHUNK_ROWS = 2**18

#: Fan-in of the tree reductions: 8 partial results (each at most (sum I)^2 int64 or
#: (sum I) x F floats) are combined per task, so a reduction over B chunks has
#: ceil(log_8 B) levels and no task holds more than 8 partials.
SPLIT_EVERY = 8


def require_dask():
    """The ``dask`` module, or an ImportError that names the extra to install."""
    try:
        import dask
        import dask.array
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "bayespmf.dask needs Dask. Install the extra: pip install 'bayespmf[dask]' "
            "(dask[array,dataframe,distributed])."
        ) from err
    return dask


# -------------------------------------------------------------------------- container


@dataclass(frozen=True, eq=False, init=False)
class DaskCategoricalData:
    """Partially observed categorical data as a row-chunked ``dask.array`` of codes.

    The out-of-core counterpart of :class:`~bayespmf.data.CategoricalData`: the same
    coding (``-1`` missing, codes in ``[0, n_categories)``), the same names and
    category labels, but the codes are a lazy ``dask.array`` split into row chunks (all
    variables of a row in one chunk). The codes are validated chunk by chunk when a
    computation first reads them; a bad code raises
    :class:`~bayespmf.DataValidationError` from that computation.

    Parameters
    ----------
    codes : dask.array.Array, shape (n_samples, n_variables)
        Integer codes (float arrays with integral values are accepted per chunk).
        Column chunks are merged into one.
    n_categories : int or sequence of int, optional
        Alphabet sizes. When omitted they are inferred as ``max + 1`` per column, which
        costs one pass over the data.
    names, categories : optional
        As for :class:`~bayespmf.data.CategoricalData`.

    Attributes
    ----------
    codes : dask.array.Array
    n_categories : ndarray of int64, shape (n_variables,)
    names : list of str
    categories : list of list of str

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.from_array(np.array([[0, 1], [1, -1], [2, 0]]), chunks=(2, 2))
    >>> d = DaskCategoricalData.from_dask_array(x, n_categories=[3, 2])
    >>> d.n_chunks, d.compute().codes.tolist()
    (2, [[0, 1], [1, -1], [2, 0]])
    """

    codes: object
    n_categories: np.ndarray
    names: list
    categories: list

    def __init__(self, codes, n_categories=None, names=None, categories=None):
        require_dask()
        import dask.array as da

        if not isinstance(codes, da.Array):
            raise DataValidationError(
                f"'codes' must be a dask.array.Array; got {type(codes).__name__}. Use "
                "DaskCategoricalData.from_categorical_data for in-memory data."
            )
        if codes.ndim != 2:
            raise DataValidationError(
                f"'codes' must be 2-D (n_samples, n_variables); got shape {codes.shape}."
            )
        if codes.shape[1] == 0 or codes.shape[0] == 0:
            raise DataValidationError(f"'codes' is empty (shape {codes.shape}).")
        if codes.dtype.kind not in "iubf":
            raise DataValidationError(
                f"'codes' must hold integer codes (-1 for missing); got dtype "
                f"{codes.dtype}. Use from_dask_dataframe for labelled data."
            )
        if codes.numblocks[1] > 1:
            codes = codes.rechunk({1: -1})
        if n_categories is None:
            import dask
            import dask.array as da

            big = np.iinfo(np.int64).max
            # NaN columns are found in the same pass (the max of a NaN column is NaN)
            nan_cols = da.isnan(codes).any(axis=0) if codes.dtype.kind == "f" else None
            col_max, col_min, nan_cols = dask.compute(
                codes.max(axis=0), da.where(codes >= 0, codes, big).min(axis=0), nan_cols
            )
            _check_no_nan(nan_cols)
            # inferred alphabets of codes that never use 0 would get an empty category
            check_zero_based(col_min, "codes")
            n_categories = np.asarray(col_max, dtype=np.int64) + 1
        n_vars = int(codes.shape[1])
        n_cat = np.asarray(n_categories)
        if n_cat.ndim == 0:
            n_cat = np.full(n_vars, n_cat)
        # names, labels and alphabet sizes are checked exactly as CategoricalData does,
        # on a one-row stand-in (code 0 is valid for every alphabet of size >= 2)
        try:
            probe = CategoricalData(
                np.zeros((1, n_vars), dtype=np.int64), n_cat, names, categories
            )
        except DataValidationError as err:
            raise DataValidationError(f"Invalid DaskCategoricalData: {err}") from err
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "n_categories", probe.n_categories)
        object.__setattr__(self, "names", probe.names)
        object.__setattr__(self, "categories", probe.categories)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dask_array(
        cls, codes, n_categories=None, names=None, categories=None
    ) -> DaskCategoricalData:
        """Wrap a chunked array of integer codes (``-1`` = missing); see the class."""
        return cls(codes, n_categories, names, categories)

    @classmethod
    def from_categorical_data(
        cls, data: CategoricalData, chunk_rows: int = DEFAULT_CHUNK_ROWS
    ) -> DaskCategoricalData:
        """Split an in-memory :class:`~bayespmf.data.CategoricalData` into row chunks.

        Examples
        --------
        >>> d = CategoricalData.from_codes([[0, 1], [1, 0], [1, 1]])
        >>> DaskCategoricalData.from_categorical_data(d, chunk_rows=2).n_chunks
        2
        """
        import dask.array as da

        if not isinstance(data, CategoricalData):
            raise DataValidationError(
                f"'data' must be a CategoricalData; got {type(data).__name__}."
            )
        chunk_rows = check_int(
            chunk_rows, "chunk_rows", owner="from_categorical_data", low=1
        )
        codes = da.from_array(data.codes, chunks=(chunk_rows, data.n_variables))
        return cls(codes, data.n_categories, data.names, data.categories)

    @classmethod
    def from_dask_dataframe(cls, ddf) -> DaskCategoricalData:
        """Build from a ``dask.dataframe`` of labelled columns, one partition per chunk.

        The coding is that of :meth:`CategoricalData.from_pandas
        <bayespmf.data.CategoricalData.from_pandas>`: a ``category`` column with known
        categories keeps its declared categories in their order; any other column's
        alphabet is the sorted set of its observed values. ``NaN``/``None``/``pd.NA``
        are missing. One pass over the data finds the alphabets and partition lengths.

        Raises
        ------
        DataValidationError
            Not a Dask DataFrame, no columns, or a column with fewer than two
            distinct values.

        Examples
        --------
        >>> import dask.dataframe as dd, pandas as pd
        >>> df = pd.DataFrame({"colour": ["red", None, "blue"], "size": ["S", "M", "M"]})
        >>> d = DaskCategoricalData.from_dask_dataframe(dd.from_pandas(df, npartitions=2))
        >>> d.categories, d.compute().codes.tolist()
        ([['blue', 'red'], ['M', 'S']], [[1, 1], [-1, 0], [0, 0]])
        """
        dask = require_dask()
        import dask.array as da
        import dask.dataframe as dd
        import pandas as pd

        if not isinstance(ddf, dd.DataFrame):
            raise DataValidationError(
                f"'ddf' must be a dask.dataframe.DataFrame; got {type(ddf).__name__}."
            )
        columns = list(ddf.columns)
        if not columns:
            raise DataValidationError("'ddf' has no columns.")
        known, lazy = {}, {}
        for col in columns:
            dtype = ddf[col].dtype
            if isinstance(dtype, pd.CategoricalDtype) and ddf[col].cat.known:
                known[col] = list(dtype.categories)
            else:
                lazy[col] = ddf[col].dropna().unique()
        lengths_task = ddf.map_partitions(len)
        uniques, lengths = dask.compute(lazy, lengths_task)
        categories = []
        for col in columns:
            if col in known:
                cats = known[col]
            else:
                values = list(pd.unique(uniques[col]))
                try:
                    cats = sorted(values)
                except TypeError:  # mixed types: order by their string form
                    cats = sorted(values, key=str)
            if len(cats) < 2:
                raise DataValidationError(
                    f"Column {col!r} of 'ddf' has {len(cats)} distinct value(s); every "
                    "variable needs at least 2 categories. Drop constant columns."
                )
            categories.append(cats)
        lengths = [int(n) for n in np.asarray(lengths)]
        parts = [
            da.from_delayed(
                dask.delayed(_partition_codes)(part, columns, categories),
                shape=(n, len(columns)),
                dtype=np.int64,
            )
            for part, n in zip(ddf.to_delayed(), lengths, strict=True)
            if n > 0
        ]
        if not parts:
            raise DataValidationError("'ddf' has no rows.")
        return cls(
            da.concatenate(parts, axis=0),
            [len(c) for c in categories],
            [str(c) for c in columns],
            [[str(v) for v in c] for c in categories],
        )

    # ------------------------------------------------------------------ properties
    @property
    def n_samples(self) -> int:
        """Number of rows S."""
        return int(self.codes.shape[0])

    @property
    def n_variables(self) -> int:
        """Number of variables N."""
        return int(self.codes.shape[1])

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_samples, n_variables)``."""
        return (self.n_samples, self.n_variables)

    @property
    def n_chunks(self) -> int:
        """Number of row chunks."""
        return int(self.codes.numblocks[0])

    def __len__(self) -> int:
        return self.n_samples

    def __repr__(self) -> str:
        return (
            f"DaskCategoricalData(n_samples={self.n_samples}, "
            f"n_variables={self.n_variables}, "
            f"n_categories={self.n_categories.tolist()}, n_chunks={self.n_chunks})"
        )

    def blocks(self) -> list:
        """The row chunks as a list of ``dask.delayed`` objects (one per chunk)."""
        return list(self.codes.to_delayed().ravel())

    def compute(self, **kwargs) -> CategoricalData:
        """Load everything into an in-memory :class:`~bayespmf.data.CategoricalData`.

        ``kwargs`` go to ``dask.compute`` (e.g. ``scheduler=``).
        """
        import dask

        (codes,) = dask.compute(self.codes, **kwargs)
        return CategoricalData(codes, self.n_categories, self.names, self.categories)

    def persist(self, **kwargs) -> DaskCategoricalData:
        """Keep the chunks in (distributed) memory; see ``dask.persist``."""
        import dask

        (codes,) = dask.persist(self.codes, **kwargs)
        return DaskCategoricalData(codes, self.n_categories, self.names, self.categories)


def _check_no_nan(nan_cols) -> None:
    """Refuse NaN codes, naming the columns (``nan_cols``: a mask, or None)."""
    if nan_cols is None or not np.any(nan_cols):
        return
    cols = np.flatnonzero(nan_cols).tolist()
    raise DataValidationError(
        f"'codes' has NaN in column {cols[0]}"
        + (f" (and in {cols[1:]})" if len(cols) > 1 else "")
        + ": use -1 for missing entries (e.g. da.where(da.isnan(codes), -1, codes)), or "
        "build the data with DaskCategoricalData.from_dask_dataframe, which reads "
        "NaN/None as missing."
    )


def _partition_codes(df, columns, categories) -> np.ndarray:
    """Integer codes of one pandas partition, ``-1`` for missing or unknown values."""
    import pandas as pd

    out = np.empty((len(df), len(columns)), dtype=np.int64)
    for j, (col, cats) in enumerate(zip(columns, categories, strict=True)):
        out[:, j] = pd.Categorical(df[col], categories=cats).codes
    return out


def check_ddata(ddata, owner: str) -> DaskCategoricalData:
    """``ddata`` if it is a DaskCategoricalData, else a DataValidationError."""
    if not isinstance(ddata, DaskCategoricalData):
        raise DataValidationError(
            f"The 'ddata' argument of {owner} must be a DaskCategoricalData; got "
            f"{type(ddata).__name__}. Build one with DaskCategoricalData.from_dask_array "
            "or from_categorical_data."
        )
    return ddata


def tree_reduce(parts: list, combine, split_every: int):
    """Combine ``dask.delayed`` parts ``split_every`` at a time until one is left."""
    from dask import delayed

    if not parts:
        raise DataValidationError("There are no chunks to reduce.")
    while len(parts) > 1:
        parts = [
            delayed(combine, pure=True)(*parts[i : i + split_every])
            for i in range(0, len(parts), split_every)
        ]
    return parts[0]


def compute_on(obj, client):
    """``dask.compute(obj)`` on ``client`` (Dask's current scheduler when None)."""
    import dask

    kwargs = {} if client is None else {"scheduler": client}
    (out,) = dask.compute(obj, **kwargs)
    return out


def persist_on(objs: list, client) -> list:
    """``dask.persist(*objs)`` on ``client`` (Dask's current scheduler when None)."""
    import dask

    kwargs = {} if client is None else {"scheduler": client}
    return list(dask.persist(*objs, **kwargs))


def check_split_every(split_every, owner: str) -> int:
    """The fan-in of a tree reduction, an int >= 2."""
    return check_int(split_every, "split_every", owner=owner, low=2)
