"""The container for partially observed categorical data."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayespmf._validation import (
    DataValidationError,
    as_codes,
    check_float,
    check_int,
    check_random_state,
)

__all__ = [
    "MISSING",
    "CategoricalData",
    "alphabet_error",
    "as_categorical",
    "bind_rows",
    "layout_of",
]

#: The integer code of a missing entry.
MISSING = -1


@dataclass(frozen=True, eq=False, init=False)
class CategoricalData:
    """N categorical variables observed on S rows, with missing entries.

    Each variable ``n`` takes values in ``{0, ..., I_n - 1}``; alphabet sizes ``I_n``
    may differ between variables. A missing entry is coded ``-1`` (:data:`MISSING`).
    Instances are immutable: the codes array is read-only and every operation returns
    a new object.

    Build one with :meth:`from_codes` or :meth:`from_pandas`; the shipped data sets in
    :mod:`bayespmf.datasets` and the simulators return one too.

    Attributes
    ----------
    codes : ndarray of int64, shape (n_samples, n_variables)
        Read-only integer codes, ``-1`` for missing.
    n_categories : ndarray of int64, shape (n_variables,)
        Alphabet size ``I_n`` of each variable.
    names : list of str
        Variable names (used as coordinates by the PyMC models).
    categories : list of list of str
        Category labels of each variable, ``categories[n][i]`` for code ``i``.

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 2], [1, -1], [-1, 0]], n_categories=[2, 3])
    >>> data
    CategoricalData(n_samples=3, n_variables=2, n_categories=[2, 3], missing=33.3%)
    >>> data.mask.sum(axis=0)
    array([2, 2])
    """

    codes: np.ndarray
    n_categories: np.ndarray
    names: list
    categories: list

    def __init__(self, codes, n_categories=None, names=None, categories=None):
        codes, n_cat = as_codes(codes, n_categories, name="codes", allow_empty_columns=True)
        n_vars = codes.shape[1]
        if names is None:
            names = [f"x{j}" for j in range(n_vars)]
        names = [str(v) for v in names]
        if len(names) != n_vars:
            raise DataValidationError(
                f"'names' must have one entry per variable ({n_vars}); got {len(names)}."
            )
        if len(set(names)) != n_vars:
            dup = sorted({v for v in names if names.count(v) > 1})
            raise DataValidationError(f"'names' must be unique; repeated: {dup}.")
        if categories is None:
            categories = [[str(i) for i in range(k)] for k in n_cat]
        categories = [[str(c) for c in cats] for cats in categories]
        if len(categories) != n_vars or any(
            len(c) != k for c, k in zip(categories, n_cat, strict=True)
        ):
            raise DataValidationError(
                "'categories' must hold one list of labels per variable, of length "
                f"n_categories={n_cat.tolist()}; got lengths "
                f"{[len(c) for c in categories]}."
            )
        for var, cats in zip(names, categories, strict=True):
            if dup := _repeated(cats):
                raise DataValidationError(
                    f"'categories' of variable {var!r} repeat the label(s) {dup}: each "
                    "code of a variable needs its own label. Merge the codes that share "
                    "a label, or give them distinct labels."
                )
        n_cat = n_cat.copy()
        n_cat.setflags(write=False)
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "n_categories", n_cat)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "categories", categories)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_codes(
        cls,
        codes,
        n_categories: int | Sequence[int] | None = None,
        names: Sequence[str] | None = None,
        categories: Sequence[Sequence[str]] | None = None,
    ) -> CategoricalData:
        """Build from integer codes (``-1`` = missing).

        Parameters
        ----------
        codes : array_like of int, shape (n_samples, n_variables)
            The caller's array is copied, never modified.
        n_categories : int or sequence of int, optional
            Alphabet sizes; inferred as ``max code + 1`` per variable when omitted.
            Codes must then start at 0: if no variable uses code 0, the codes look
            1-based (as poLCA and many survey files code ``1..K``) and are refused.
        names : sequence of str, optional
            Variable names, ``x0, x1, ...`` by default.
        categories : sequence of sequences of str, optional
            Category labels per variable, ``"0", "1", ...`` by default.

        Returns
        -------
        CategoricalData
            A read-only copy of ``codes`` with its alphabets and labels.

        Raises
        ------
        DataValidationError
            For wrong ndim, an empty array, NaN, codes below -1 or at least
            ``n_categories``, a variable with fewer than two categories, a label
            repeated within a variable's ``categories``, or, with ``n_categories``
            omitted, 1-based codes (code 0 observed in no variable).

        Examples
        --------
        >>> CategoricalData.from_codes([[0, 1], [1, 0]]).n_categories
        array([2, 2])

        Data coded ``1..K`` are shifted to start at 0 (``-1`` stays missing):

        >>> codes = np.array([[1, 3], [2, -1], [2, 1]])
        >>> CategoricalData.from_codes(np.where(codes > 0, codes - 1, -1)).n_categories
        array([2, 3])
        """
        return cls(codes, n_categories, names, categories)

    @classmethod
    def from_pandas(
        cls, df: pd.DataFrame, *, dropna_rows: bool = False, like=None
    ) -> CategoricalData:
        """Build from a DataFrame of labelled columns.

        Object, string, integer, boolean and pandas ``category`` columns are accepted;
        ``NaN``/``None``/``pd.NA`` are missing entries. For a ``category`` column the
        declared categories (in their order) are the alphabet, so categories that never
        occur are kept; otherwise the alphabet is the sorted set of observed values.
        Labels are the values' string forms, so a column must not mix strings with
        other values (``1`` and ``"1"`` would both be ``'1'``): such a column is
        refused, not guessed at; convert it first (e.g. ``df[col].astype(str)``).

        Parameters
        ----------
        df : pandas.DataFrame
            One column per variable; column names become variable names.
        dropna_rows : bool, default False
            Drop rows in which every entry is missing.
        like : CategoricalData, optional
            Encode with its variable names and alphabets (e.g. new rows for a model
            fitted on ``like``): columns are matched by name, labels by their string
            form; a label outside the alphabet is an error, a column absent from
            ``df`` is missing in every row.

        Returns
        -------
        CategoricalData
            One variable per column, named after it; missing entries coded ``-1``.

        Raises
        ------
        DataValidationError
            An empty frame, duplicated column names, a column with fewer than two
            distinct values, a column mixing strings with other values (or whose
            distinct values share a string form), or with ``like`` a column or label
            the fitted data did not have.

        Examples
        --------
        >>> df = pd.DataFrame({"colour": ["red", None, "blue"], "size": ["S", "M", "M"]})
        >>> data = CategoricalData.from_pandas(df)
        >>> data.categories
        [['blue', 'red'], ['M', 'S']]
        >>> data.codes.tolist()
        [[1, 1], [-1, 0], [0, 0]]
        """
        if not isinstance(df, pd.DataFrame):
            raise DataValidationError(
                f"'df' must be a pandas.DataFrame; got {type(df).__name__}. Use "
                "CategoricalData.from_codes for integer arrays."
            )
        if df.shape[0] == 0 or df.shape[1] == 0:
            raise DataValidationError(f"'df' is empty (shape {df.shape}).")
        if dup := _repeated(str(c) for c in df.columns):
            raise DataValidationError(
                f"'df' has duplicated column name(s) {dup}; every variable needs its "
                "own name. Rename or drop the duplicates (e.g. "
                "df.loc[:, ~df.columns.duplicated()])."
            )
        if like is not None:
            return cls._encode_like(df, like)
        codes = np.empty(df.shape, dtype=np.int64)
        categories = []
        for j, col in enumerate(df.columns):
            s = df[col]
            if isinstance(s.dtype, pd.CategoricalDtype):
                cat = s.cat
                cats = list(cat.categories)
                c = cat.codes.to_numpy(dtype=np.int64)
            else:
                missing = s.isna().to_numpy()
                values = s[~missing]
                uniq = pd.unique(values)
                _check_label_types(uniq, col)
                try:
                    cats = sorted(uniq)
                except TypeError as err:  # e.g. numbers and other objects
                    raise DataValidationError(
                        f"Column {col!r} of 'df' holds values that cannot be ordered "
                        f"({err}); convert it to one type first (e.g. "
                        "df[col].astype(str))."
                    ) from None
                index = {v: i for i, v in enumerate(cats)}
                c = np.full(len(s), MISSING, dtype=np.int64)
                c[~missing] = [index[v] for v in values]
            codes[:, j] = c
            if len(cats) < 2:
                raise DataValidationError(
                    f"Column {col!r} of 'df' has {len(cats)} distinct value(s); every "
                    "variable needs at least 2 categories. Drop constant columns."
                )
            categories.append([str(v) for v in cats])
        if dropna_rows:
            codes = codes[(codes >= 0).any(axis=1)]
        return cls(
            codes,
            [len(c) for c in categories],
            [str(c) for c in df.columns],
            categories,
        )

    @classmethod
    def _encode_like(cls, df: pd.DataFrame, like: CategoricalData) -> CategoricalData:
        if like.names is None or like.categories is None:
            raise DataValidationError(
                "A DataFrame can only be encoded like data with variable names and "
                "category labels (built by CategoricalData.from_pandas); the model was "
                "fitted on unlabelled codes. Pass integer codes instead."
            )
        names = [str(c) for c in df.columns]
        unknown = [c for c in names if c not in like.names]
        if unknown:
            raise DataValidationError(
                f"Column(s) {unknown} of 'df' are not variables of the fitted data "
                f"{list(like.names)}. Drop or rename them."
            )
        codes = np.full((df.shape[0], len(like.names)), MISSING, dtype=np.int64)
        for j, (name, cats) in enumerate(zip(like.names, like.categories, strict=True)):
            if name not in names:
                continue
            s = df[df.columns[names.index(name)]]
            missing = s.isna().to_numpy()
            index = {c: i for i, c in enumerate(cats)}
            labels = s[~missing].astype(str).to_numpy()
            bad = sorted({v for v in labels if v not in index})
            if bad:
                raise DataValidationError(
                    f"Column {name!r} of 'df' holds label(s) {bad[:5]} that the fitted "
                    f"data never had (its categories: {list(cats)}). Map them to known "
                    "categories or set them to missing (NaN)."
                )
            codes[~missing, j] = [index[v] for v in labels]
        return cls(codes, like.n_categories, list(like.names), like.categories)

    def to_pandas(self) -> pd.DataFrame:
        """Return a DataFrame of ``category`` columns with the labels (missing = NaN).

        Examples
        --------
        >>> data = CategoricalData.from_codes([[0, 1], [-1, 0]], 2, names=["a", "b"])
        >>> data.to_pandas()["a"].tolist()
        ['0', nan]
        """
        cols = {}
        for j, name in enumerate(self.names):
            cols[name] = pd.Categorical.from_codes(
                self.codes[:, j], categories=self.categories[j]
            )
        return pd.DataFrame(cols)

    # ------------------------------------------------------------------ properties
    @property
    def n_samples(self) -> int:
        """Number of rows S."""
        return self.codes.shape[0]

    @property
    def n_variables(self) -> int:
        """Number of variables N."""
        return self.codes.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_samples, n_variables)``."""
        return self.codes.shape

    @property
    def mask(self) -> np.ndarray:
        """Boolean array, True where an entry is observed."""
        return self.codes >= 0

    @property
    def missing_fraction(self) -> float:
        """Fraction of entries that are missing."""
        return float(1.0 - self.mask.mean())

    def __len__(self) -> int:
        return self.n_samples

    def __repr__(self) -> str:
        return (
            f"CategoricalData(n_samples={self.n_samples}, n_variables={self.n_variables}"
            f", n_categories={self.n_categories.tolist()}, "
            f"missing={100 * self.missing_fraction:.1f}%)"
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, CategoricalData):
            return NotImplemented
        return (
            self.codes.shape == other.codes.shape
            and bool(np.all(self.codes == other.codes))
            and bool(np.all(self.n_categories == other.n_categories))
            and self.names == other.names
            and self.categories == other.categories
        )

    __hash__ = None  # mutable-looking container semantics: compare by value only

    def index_of(self, variable: int | str) -> int:
        """Return the column index of a variable given by name or index.

        Examples
        --------
        >>> CategoricalData.from_codes([[0, 1], [1, 0]], names=["a", "b"]).index_of("b")
        1
        """
        if isinstance(variable, str):
            try:
                return self.names.index(variable)
            except ValueError:
                import difflib

                close = difflib.get_close_matches(variable, self.names, n=3)
                hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
                raise DataValidationError(
                    f"Unknown variable {variable!r}; the variables are {self.names}.{hint}"
                ) from None
        if isinstance(variable, bool) or not isinstance(variable, int | np.integer):
            raise DataValidationError(
                f"A variable is named by its name (str) or index (int); got {variable!r}."
            )
        j = int(variable)
        if not -self.n_variables <= j < self.n_variables:
            raise DataValidationError(
                f"Variable index {j} is out of range for {self.n_variables} variables."
            )
        return j % self.n_variables

    def summary(self) -> pd.DataFrame:
        """One row per variable: categories, observed count and the most common label.

        Examples
        --------
        >>> CategoricalData.from_codes([[0, 1], [1, 1]]).summary()["n_observed"].tolist()
        [2, 2]
        """
        rows = []
        for j, name in enumerate(self.names):
            col = self.codes[:, j]
            obs = col[col >= 0]
            counts = np.bincount(obs, minlength=self.n_categories[j])
            rows.append(
                {
                    "variable": name,
                    "n_categories": int(self.n_categories[j]),
                    "n_observed": int(obs.size),
                    "missing_%": 100.0 * (1 - obs.size / max(col.size, 1)),
                    "mode": self.categories[j][int(np.argmax(counts))] if obs.size else "",
                    "mode_%": 100.0 * counts.max() / obs.size if obs.size else np.nan,
                }
            )
        return pd.DataFrame(rows).set_index("variable")

    # ------------------------------------------------------------------ subsetting
    def _new(self, codes) -> CategoricalData:
        return CategoricalData(codes, self.n_categories, self.names, self.categories)

    def __getitem__(self, rows) -> CategoricalData:
        """Row subset (an int, an int array, a boolean mask or a slice).

        The variables, alphabets and labels are kept, so that every subset (the folds
        of a cross-validation, say) describes the same variables as the whole. A
        ``(rows, ...)`` or ``(rows, :)`` key selects the same rows: it is how
        scikit-learn indexes array-likes (``sklearn.utils._safe_indexing``), so
        ``GridSearchCV``, ``cross_val_score`` and ``train_test_split`` split a
        CategoricalData as they split an array.

        Raises
        ------
        DataValidationError
            A key that selects columns (use :meth:`select_variables`) or no row.

        Examples
        --------
        >>> data = CategoricalData.from_codes([[0, 1], [1, 0], [1, 1]])
        >>> data[1:].n_samples
        2
        >>> data[np.array([0, 2]), ...].codes.tolist()
        [[0, 1], [1, 1]]
        """
        if isinstance(rows, tuple):
            rows = self._row_key(rows)
        codes = self.codes[rows]
        if codes.ndim == 1:
            codes = codes[None, :]
        if codes.shape[0] == 0:
            raise DataValidationError("The row selection is empty.")
        return self._new(codes)

    @staticmethod
    def _row_key(key: tuple):
        """The rows of a ``(rows,)``, ``(rows, ...)`` or ``(rows, :)`` key."""
        rest = key[1:]
        every_column = not rest or (
            len(rest) == 1
            and (
                rest[0] is Ellipsis
                or (isinstance(rest[0], slice) and rest[0] == slice(None))
            )
        )
        if not every_column:
            raise DataValidationError(
                "CategoricalData is indexed by rows only (data[rows], data[rows, ...] or "
                "data[rows, :]); use select_variables() for columns."
            )
        return key[0]

    def select_variables(self, variables: Sequence[int | str]) -> CategoricalData:
        """Keep only the given variables (by name or index), in the given order.

        Examples
        --------
        >>> data = CategoricalData.from_codes([[0, 1, 2]], n_categories=3, names="abc")
        >>> data.select_variables(["c", "a"]).names
        ['c', 'a']
        """
        idx = [self.index_of(v) for v in variables]
        if not idx:
            raise DataValidationError("'variables' must name at least one variable.")
        return CategoricalData(
            self.codes[:, idx],
            self.n_categories[idx],
            [self.names[j] for j in idx],
            [self.categories[j] for j in idx],
        )

    def drop_empty_rows(self) -> CategoricalData:
        """Drop rows in which every entry is missing.

        Examples
        --------
        >>> CategoricalData.from_codes([[0, 1], [-1, -1]], 2).drop_empty_rows().n_samples
        1
        """
        return self[self.mask.any(axis=1)]

    def train_test_split(
        self, *fractions: float, random_state=None
    ) -> tuple[CategoricalData, ...]:
        """Randomly split the rows into parts of the given fractions.

        Parameters
        ----------
        *fractions : float
            Fractions of the parts, e.g. ``0.5, 0.2, 0.3`` for train/validation/test
            (the protocol of the CNMF paper, Sec. 7.2). They must sum to 1; a single
            fraction ``f`` means ``f, 1 - f``.
        random_state : None, int or numpy.random.Generator

        Returns
        -------
        tuple of CategoricalData
            One per fraction, in the given order.

        Examples
        --------
        >>> data = CategoricalData.from_codes(np.arange(20).reshape(10, 2) % 3)
        >>> train, val, test = data.train_test_split(0.5, 0.2, 0.3, random_state=0)
        >>> (train.n_samples, val.n_samples, test.n_samples)
        (5, 2, 3)
        """
        if len(fractions) == 1:
            fractions = (fractions[0], 1.0 - fractions[0])
        if len(fractions) < 2:
            raise DataValidationError(
                "train_test_split needs the fractions of the parts, e.g. (0.8, 0.2)."
            )
        fr = np.array(
            [
                check_float(f, "fractions", low=0.0, high=1.0, low_open=True)
                for f in fractions
            ]
        )
        if abs(fr.sum() - 1.0) > 1e-9:
            raise DataValidationError(
                f"'fractions' must sum to 1; got {fr.tolist()} (sum {fr.sum():.4g})."
            )
        rng = check_random_state(random_state)
        perm = rng.permutation(self.n_samples)
        bounds = np.round(np.cumsum(fr) * self.n_samples).astype(int)
        bounds[-1] = self.n_samples
        parts = np.split(perm, bounds[:-1])
        if any(p.size == 0 for p in parts):
            raise DataValidationError(
                f"With {self.n_samples} rows, fractions {fr.tolist()} leave a part empty."
            )
        return tuple(self._new(self.codes[np.sort(p)]) for p in parts)

    def hide_entries(
        self,
        fraction: float,
        *,
        variables: Sequence[int | str] | None = None,
        min_observed: int = 1,
        random_state=None,
    ) -> tuple[CategoricalData, np.ndarray]:
        """Hide a random fraction of the observed entries (for prediction protocols).

        Parameters
        ----------
        fraction : float in (0, 1]
            Fraction of the eligible observed entries to hide.
        variables : sequence of int or str, optional
            Only entries of these variables are hidden (all variables by default).
        min_observed : int, default 1
            Each row keeps at least this many observed entries; entries that would
            break this are not eligible.
        random_state : None, int or numpy.random.Generator

        Returns
        -------
        masked : CategoricalData
            The data with the hidden entries set to missing.
        hidden : ndarray of int64, shape (n_hidden, 3)
            ``(row, variable, true_code)`` of every hidden entry.

        Examples
        --------
        >>> data = CategoricalData.from_codes(np.arange(40).reshape(10, 4) % 3)
        >>> masked, hidden = data.hide_entries(0.25, random_state=0)
        >>> hidden.shape
        (10, 3)
        >>> int((masked.codes[hidden[:, 0], hidden[:, 1]] == -1).sum())
        10
        """
        fraction = check_float(fraction, "fraction", low=0.0, high=1.0, low_open=True)
        min_observed = check_int(min_observed, "min_observed", owner="hide_entries", low=0)
        rng = check_random_state(random_state)
        if variables is not None and len(variables) == 0:
            raise DataValidationError(
                "'variables' must name at least one variable, or be None for all."
            )
        cols = (
            np.arange(self.n_variables)
            if variables is None
            else np.array([self.index_of(v) for v in variables], dtype=np.int64)
        )
        mask = self.mask
        eligible = np.zeros_like(mask)
        eligible[:, cols] = mask[:, cols]
        rows, vars_ = np.nonzero(eligible)
        n_hide = round(fraction * rows.size)
        if n_hide == 0:
            raise DataValidationError(
                f"'fraction'={fraction} of {rows.size} eligible observed entries hides "
                "nothing; increase it."
            )
        # Random priority per entry; within each row keep the `min_observed` entries of
        # lowest priority among *all* observed entries of the row, then hide the
        # n_hide eligible ones of highest priority. Vectorized, no loop over rows.
        prio = rng.random(rows.size)
        order = np.argsort(-prio, kind="stable")
        n_obs_row = mask.sum(axis=1)
        removable = np.maximum(n_obs_row - min_observed, 0)
        # rank of each eligible entry among the eligible entries of its row (by order)
        r_sorted = rows[order]
        sort_rows = np.argsort(r_sorted, kind="stable")
        rank_in_row = np.empty(rows.size, dtype=np.int64)
        starts = np.searchsorted(r_sorted[sort_rows], r_sorted[sort_rows], side="left")
        rank_in_row[sort_rows] = np.arange(rows.size) - starts
        allowed = rank_in_row < removable[r_sorted]
        chosen = order[allowed][:n_hide]
        if chosen.size < n_hide:
            raise DataValidationError(
                f"Cannot hide {n_hide} entries while keeping {min_observed} observed "
                f"per row; at most {chosen.size} can be hidden."
            )
        codes = self.codes.copy()
        hr, hv = rows[chosen], vars_[chosen]
        hidden = np.column_stack([hr, hv, codes[hr, hv]]).astype(np.int64)
        codes[hr, hv] = MISSING
        srt = np.lexsort((hidden[:, 1], hidden[:, 0]))
        return self._new(codes), hidden[srt]


def layout_of(n_categories, names=None, categories=None) -> CategoricalData:
    """A one-row CategoricalData with this layout: the ``like`` of :func:`as_categorical`.

    Examples
    --------
    >>> layout_of([2, 3], ["a", "b"]).names
    ['a', 'b']
    """
    n_categories = np.asarray(n_categories, dtype=np.int64)
    return CategoricalData(
        np.zeros((1, n_categories.size), dtype=np.int64), n_categories, names, categories
    )


def bind_rows(data, n_categories, names=None, categories=None, *, name: str = "data"):
    """Rows given to a fitted estimator, bound to its layout by name and label.

    A DataFrame, or a CategoricalData when the fit has variable names, goes through
    :func:`as_categorical` against :func:`layout_of` the fit; anything else (integer
    codes, data given to a fit on bare codes) is returned as it is, positional. A
    CategoricalData given to a fit on bare codes must have its alphabet sizes
    (:func:`alphabet_error` names the first variable that differs).
    """
    if isinstance(data, pd.DataFrame) or (
        names is not None and isinstance(data, CategoricalData)
    ):
        return as_categorical(data, layout_of(n_categories, names, categories), name=name)
    if isinstance(data, CategoricalData):  # a fit on bare codes: positional, ...
        want = np.asarray(n_categories, dtype=np.int64)
        if data.n_variables == want.size:  # ... of the same alphabets
            for j in np.flatnonzero(data.n_categories != want):
                raise alphabet_error(
                    data.names[j], data.categories[j], _default_labels(want[j]), name
                )
    return data


def as_categorical(data, like: CategoricalData | None = None, *, name: str = "data"):
    """``data`` as :class:`CategoricalData`, its variables bound to ``like``'s by name.

    The one place where data given to a fitted model or a posterior are matched to the
    variables the model was built on: columns are matched by *name*, never by position,
    and category labels by their string form, so data whose columns come in another
    order, or whose alphabets list the labels in another order (or only some of
    them), are recoded into ``like``'s layout; data that do not fit are refused with
    the difference named. Nothing is matched silently by position when names or
    labels say otherwise.

    The rules, variable by variable:

    - **Variables.** A CategoricalData with the same variable names as ``like`` (any
      order) is reordered by name. Names that are the defaults (``x0``, ``x1``, ...,
      on either side: data or a model never named) carry no information, and the
      variables are then taken in ``like``'s order. Any other difference in names is
      an error, as is a CategoricalData lacking a variable of ``like`` (a DataFrame
      may lack one: it is then missing in every row).
    - **Labels.** A variable whose labels equal ``like``'s is taken as it is. Labels
      that are the defaults (``"0"``, ``"1"``, ...: data never labelled) are codes,
      taken as they are when the alphabet has ``like``'s size; an alphabet of
      another size is an error naming the variable and both alphabets (the codes
      could not say which category is which). Other labels
      are matched by their string form: codes are recoded to ``like``'s, and a label
      ``like``'s alphabet lacks is an error naming the variable and the label when a
      row uses it (as a DataFrame label outside the alphabet is; unused categories of
      the data's alphabet are ignored).
    - Integer codes carry neither names nor labels: they are ``like``'s codes in
      ``like``'s variable order.

    Parameters
    ----------
    data : CategoricalData, pandas.DataFrame or array_like of int
        The rows. A DataFrame is encoded with ``like``'s alphabets
        (:meth:`CategoricalData.from_pandas` with ``like``).
    like : CategoricalData, optional
        The variables (names, alphabets) to bind to; ``None`` only validates ``data``.
    name : str, default "data"
        The argument's name, for error messages.

    Returns
    -------
    CategoricalData
        With ``like``'s variables, in ``like``'s order, and its alphabets.

    Raises
    ------
    DataValidationError
        Variables that are not ``like``'s (or missing from a CategoricalData), a
        different number of variables where names carry no information, labels
        outside ``like``'s alphabet, codes beyond it, or unlabelled categories in an
        alphabet of another size than ``like``'s.

    Examples
    --------
    >>> like = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> new = CategoricalData.from_codes([[1, 0]], 2, names=["b", "a"])
    >>> as_categorical(new, like).codes.tolist()  # columns matched by name
    [[0, 1]]
    >>> as_categorical(pd.DataFrame({"b": ["0"], "a": ["1"]}), like).codes.tolist()
    [[1, 0]]
    >>> flipped = CategoricalData.from_codes(  # the labels of "a" in another order
    ...     [[0, 1]], 2, names=["a", "b"], categories=[["1", "0"], ["0", "1"]])
    >>> as_categorical(flipped, like).codes.tolist()
    [[1, 1]]
    """
    if like is None:
        if isinstance(data, CategoricalData):
            return data
        if isinstance(data, pd.DataFrame):
            return CategoricalData.from_pandas(data)
        codes, n_cat = as_codes(data, name=name, allow_empty_columns=True)
        return CategoricalData(codes, n_cat)
    if isinstance(data, pd.DataFrame):
        return CategoricalData.from_pandas(data, like=like)
    if not isinstance(data, CategoricalData):
        # integer codes: positions are all there is to go by
        codes, _ = as_codes(data, like.n_categories, name=name, allow_empty_columns=True)
        return CategoricalData(codes, like.n_categories, like.names, like.categories)
    data = _bind_variables(data, like, name)
    if list(data.names) == list(like.names) and data.categories == like.categories:
        return data  # already in like's layout: no copy of the rows
    codes = np.array(data.codes)
    for j, var in enumerate(like.names):
        codes[:, j] = _recode_labels(
            codes[:, j], data.categories[j], like.categories[j], var, name
        )
    return CategoricalData(codes, like.n_categories, list(like.names), like.categories)


def _bind_variables(data: CategoricalData, like: CategoricalData, name: str):
    """``data``'s variables in ``like``'s order: by name, or by position if unnamed."""
    if len(data.names) == len(like.names) and set(data.names) == set(like.names):
        if list(data.names) == list(like.names):
            return data
        return data.select_variables(list(like.names))
    if _default_names(data) or _default_names(like):  # names carry no information
        if data.n_variables != like.n_variables:
            raise DataValidationError(
                f"'{name}' has {data.n_variables} variables; the model has "
                f"{like.n_variables} ({list(like.names)}). Pass one column per variable "
                "of the model, in its order, or name the variables."
            )
        return data
    missing = [n for n in like.names if n not in data.names]
    extra = [n for n in data.names if n not in like.names]
    raise DataValidationError(
        f"The variables of '{name}' do not match the model's: missing {missing}, "
        f"not in the model {extra}. Pass data with the variables {list(like.names)} "
        "(in any order)."
    )


def _recode_labels(col, got, want, var, name) -> np.ndarray:
    """Codes ``col`` of labels ``got`` as codes of the labels ``want``."""
    got, want = [str(c) for c in got], [str(c) for c in want]
    if got == want:
        return col
    if got == _default_labels(len(got)):  # never labelled: codes are codes ...
        if len(got) != len(want):  # ... of another alphabet than the model's
            raise alphabet_error(var, got, want, name)
        return col
    index = {c: i for i, c in enumerate(want)}
    recode = np.array([index.get(c, -2) for c in got], dtype=np.int64)
    out = np.where(col >= 0, recode[np.maximum(col, 0)], col)
    if (out == -2).any():
        bad = [got[c] for c in np.unique(col[out == -2])]
        raise DataValidationError(
            f"Variable {var!r} of '{name}' holds the label(s) {bad[:5]} that the model "
            f"never had (its categories: {want}). Recode them to the model's "
            "categories or set them to missing (-1)."
        )
    return out


#: Labels of an alphabet listed in full in a message; longer ones are elided.
_MAX_LABELS_SHOWN = 10


def _alphabet_text(labels) -> str:
    labels = [str(c) for c in labels]
    more = ["..."] if len(labels) > _MAX_LABELS_SHOWN else []
    shown = labels[:_MAX_LABELS_SHOWN] + more
    return f"{len(labels)} categories [{', '.join(shown)}]"


def alphabet_error(var, got, want, name: str) -> DataValidationError:
    """The error for a variable whose alphabet (``got``) is not the model's (``want``).

    Raised where labels cannot tell which category is which (codes never labelled),
    so the codes would be taken against an alphabet of another size.

    Examples
    --------
    >>> print(alphabet_error("a", ["0", "1"], ["0", "1", "2"], "data"))
    Variable 'a' of 'data' has the alphabet of 2 categories [0, 1], but the model's ...
    """
    return DataValidationError(
        f"Variable {var!r} of '{name}' has the alphabet of {_alphabet_text(got)}, but "
        f"the model's alphabet of that variable has {_alphabet_text(want)}: the rows "
        "must have the model's alphabets. Build them with the model's, e.g. "
        "CategoricalData.from_codes(codes, n_categories=<the model's sizes>), or label "
        "the categories (from_pandas, categories=...) so that they are matched by label."
    )


def _default_names(data) -> bool:
    """Whether ``data`` has the names a CategoricalData gets when given none."""
    return list(data.names) == [f"x{j}" for j in range(len(data.names))]


def _check_label_types(values, col) -> None:
    """Refuse a column mixing strings with other values, or with clashing labels.

    Labels are string forms, and new rows are matched to them by string form: ``1``
    and ``"1"`` in one column would be two categories with one label.
    """
    is_str = np.array([isinstance(v, str | bytes) for v in values], dtype=bool)
    if is_str.any() and not is_str.all():
        strs = [v for v, k in zip(values, is_str, strict=True) if k][:3]
        others = [v for v, k in zip(values, is_str, strict=True) if not k][:3]
        raise DataValidationError(
            f"Column {col!r} of 'df' mixes strings {strs} with other values "
            f"{others}; labels are string forms, so e.g. 1 and '1' would be two "
            "categories with one label. Convert the column to one type first (e.g. "
            "df[col].astype(str), or pd.to_numeric)."
        )
    labels = [str(v) for v in values]
    if len(set(labels)) != len(labels):
        dup = sorted({c for c in labels if labels.count(c) > 1})
        raise DataValidationError(
            f"Column {col!r} of 'df' holds distinct values with the same string form "
            f"{dup}; labels must be unique. Convert the column to one type first."
        )


def _default_labels(k: int) -> list[str]:
    """The labels a CategoricalData gives a variable of ``k`` categories by default."""
    return [str(i) for i in range(k)]


def _repeated(values) -> list:
    """The values that occur more than once in ``values``, sorted (empty: none)."""
    return sorted(v for v, n in Counter(values).items() if n > 1)
