r"""Empirical statistics of partially observed categorical data.

Three families of low-order statistics, each computed over the rows in which the
variables involved are *all* observed (missing entries, coded ``-1``, are skipped):

* pairwise marginals :math:`\Pr(x_j = a, x_k = b)` for every pair of variables, stored
  as one symmetric block matrix (the input of CNMF, Ibrahim & Fu, eq. (6));
* triple marginals :math:`\Pr(x_j = a, x_k = b, x_l = c)` for chosen triples (the
  input of the coupled tensor decomposition baseline of Kargas et al.);
* one-dimensional PMFs of random two-sparse projections of pairs of variables (the
  discrete Radon transform of the pairwise marginals used by JUROR, Vora et al.,
  eqs. (4)-(6)).

Every statistic is computed without a Python loop over rows: the pairwise counts are
the Gram matrix :math:`O^\top O` of the sparse one-hot design matrix :math:`O`, the
triple counts are one :func:`numpy.bincount` per pair of leading variables. The
accumulators (:class:`PairwiseAccumulator`, :class:`TripleAccumulator`) take the rows
block by block and can be merged, so the statistics of a data set too large for
memory (or spread over Dask partitions) are a map-reduce.

References
----------
.. [1] S. Ibrahim, X. Fu, "Recovering joint probability of discrete random variables
   from pairwise marginals", IEEE Trans. Signal Process., 2021.
.. [2] N. Kargas, N. D. Sidiropoulos, X. Fu, "Tensors, learning, and 'Kolmogorov
   extension' for finite-alphabet random vectors", IEEE Trans. Signal Process., 2018.
.. [3] J. Vora, K. S. Gurumoorthy, A. Rajwade, "Recovery of joint probability
   distribution from one-way marginals: low rank tensors and random projections".
"""

from __future__ import annotations

import itertools
import numbers
import reprlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from bayespmf._validation import (
    MAX_CATEGORIES,
    DataValidationError,
    as_codes,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.pmf import check_params, offsets_of, stack_factors

__all__ = [
    "PairwiseAccumulator",
    "PairwiseMarginals",
    "ProjectionMarginals",
    "RandomProjections",
    "TripleAccumulator",
    "TripleMarginals",
    "pairwise_marginals",
    "projection_marginals",
    "random_projections",
    "triple_marginals",
]

#: Rows per block of the sparse product O^T O. The product keeps a dense accumulator per
#: output row; with blocks of this size the block and the accumulator stay in cache
#: (measured at S=1e5, N=15, I=10, half missing: ~25% faster than one block), and a
#: block's counts fit the int32 the product is computed in (no overflow below 2**31).
BLOCK_ROWS = 16_384

#: ``counts`` (and ``n_samples``) of population marginals built by ``from_params`` when
#: no sample size is given: "infinitely many rows". 2**53 is the largest integer float64
#: holds exactly, so an estimator that weights blocks by their counts stays exact.
POPULATION_COUNT = 2**53


# ---------------------------------------------------------------------------- helpers
def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _check_int_arg(value, name: str, *, owner: str, low=None) -> int:
    """:func:`check_int` raising :class:`DataValidationError`."""
    try:
        return check_int(value, name, owner=owner, low=low)
    except DataValidationError:
        raise
    except ValueError as err:
        raise DataValidationError(str(err)) from err


def _check_n_categories(n_categories, owner: str) -> np.ndarray:
    """Validate an explicit ``n_categories`` sequence; return a read-only int64 copy."""
    arr = np.asarray(n_categories)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise DataValidationError(
            f"The 'n_categories' argument of {owner} must be a non-empty 1-D sequence "
            f"of ints, one alphabet size per variable. Got {n_categories!r}."
        )
    arr = np.array(arr, dtype=np.int64)
    bad = np.flatnonzero((arr < 2) | (arr > MAX_CATEGORIES))
    if bad.size:
        raise DataValidationError(
            f"The 'n_categories' argument of {owner} must hold ints in "
            f"[2, {MAX_CATEGORIES}]; variable(s) {bad.tolist()} have "
            f"{arr[bad].tolist()}. Drop constant variables."
        )
    return _readonly(arr)


def _check_variable(j, n_vars: int, name: str) -> int:
    if isinstance(j, bool) or not isinstance(j, numbers.Integral) or not 0 <= j < n_vars:
        raise DataValidationError(
            f"The variable index '{name}' must be an int in [0, {n_vars}). Got {j!r}."
        )
    return int(j)


def _check_tuples(tuples, size: int, n_vars: int, name: str) -> np.ndarray:
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


def _as_block(codes_block, n_categories: np.ndarray, owner: str):
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


def _cooccurrence(codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Raw co-occurrence counts ``O^T O`` of validated codes, (sum I, sum I) int64."""
    n_total = int(offsets[-1])
    out = np.zeros((n_total, n_total), dtype=np.int64)
    for start in range(0, codes.shape[0], BLOCK_ROWS):
        block = codes[start : start + BLOCK_ROWS]
        mask = block >= 0
        # Row-major order lists each row's observed entries by increasing column, so
        # (indices, indptr) is a valid CSR one-hot design without any sorting.
        indices = (offsets[:-1] + block)[mask]
        if indices.size == 0:
            continue
        indptr = np.zeros(block.shape[0] + 1, dtype=np.int64)
        np.cumsum(mask.sum(axis=1), out=indptr[1:])
        design = sp.csr_array(
            (np.ones(indices.size, dtype=np.int32), indices, indptr),
            shape=(block.shape[0], n_total),
        )
        out += (design.T.tocsr() @ design).toarray()
    return out


def _block_sums(matrix: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    starts = offsets[:-1]
    return np.add.reduceat(np.add.reduceat(matrix, starts, axis=0), starts, axis=1)


# ------------------------------------------------------------------ pairwise marginals
@dataclass(frozen=True, eq=False, repr=False)
class PairwiseMarginals:
    r"""Empirical (or population) pairwise marginals of N categorical variables.

    Attributes
    ----------
    n_categories : ndarray of int64, shape (N,)
        Alphabet size :math:`I_n` of each variable.
    offsets : ndarray of int64, shape (N + 1,)
        ``offsets_of(n_categories)``: variable ``j`` owns rows and columns
        ``offsets[j]:offsets[j + 1]`` of ``joint``.
    joint : ndarray of float64, shape (sum I, sum I)
        Symmetric block matrix. Block ``(j, k)``, ``j != k``, is the empirical
        :math:`\Pr(x_j = a, x_k = b)` over the rows where both are observed (all
        zeros when there is no such row); block ``(j, j)`` is
        ``diag(Pr(x_j = a))`` over the rows where ``x_j`` is observed.
    counts : ndarray of int64, shape (N, N)
        ``counts[j, k]``: number of rows where ``x_j`` and ``x_k`` are both observed;
        ``counts[j, j]``: number of rows where ``x_j`` is observed.
    n_samples : int
        Number of rows the statistics were computed from (all-missing rows included).

    Notes
    -----
    With :math:`O \in \{0, 1\}^{S \times \sum_n I_n}` the one-hot design matrix
    (row :math:`s` has a one in column ``offsets[n] + x_{s,n}`` for every observed
    entry), the raw co-occurrence counts are :math:`C = O^\top O`, and

    .. math:: \mathrm{joint}_{jk} = C_{jk} / \max(1, n_{jk}),
        \qquad n_{jk} = \mathbf{1}^\top C_{jk} \mathbf{1} = \mathrm{counts}[j, k].

    Under the latent-class model the population block is
    :math:`A_j \operatorname{diag}(\lambda) A_k^\top` (Ibrahim & Fu, eq. (5)), see
    :meth:`from_params`. All arrays are read-only.

    Examples
    --------
    >>> m = pairwise_marginals([[0, 1], [1, 1], [1, -1]], n_categories=[2, 2])
    >>> m.pair(0, 1)
    array([[0. , 0.5],
           [0. , 0.5]])
    >>> m.one_way(0).round(3)
    array([0.333, 0.667])
    >>> m.counts
    array([[3, 2],
           [2, 2]])
    """

    n_categories: np.ndarray
    offsets: np.ndarray
    joint: np.ndarray
    counts: np.ndarray
    n_samples: int

    def __post_init__(self) -> None:
        owner = "PairwiseMarginals"
        n_cat = _check_n_categories(self.n_categories, owner)
        offsets = offsets_of(n_cat)
        given = np.asarray(self.offsets)
        if given.shape != offsets.shape or np.any(given != offsets):
            raise DataValidationError(
                f"The 'offsets' of {owner} must equal offsets_of(n_categories) = "
                f"{offsets.tolist()}. Got {given.tolist()}."
            )
        joint = np.array(self.joint, dtype=np.float64)
        n_total = int(offsets[-1])
        if joint.shape != (n_total, n_total):
            raise DataValidationError(
                f"The 'joint' matrix of {owner} must have shape ({n_total}, {n_total}) "
                f"(sum of n_categories, twice). Got {joint.shape}."
            )
        counts = np.array(self.counts)
        if counts.shape != (n_cat.size, n_cat.size) or counts.dtype.kind not in "iu":
            raise DataValidationError(
                f"The 'counts' of {owner} must be an int array of shape "
                f"({n_cat.size}, {n_cat.size}). Got {counts.dtype} {counts.shape}."
            )
        n_samples = _check_int_arg(self.n_samples, "n_samples", owner=owner, low=0)
        object.__setattr__(self, "n_categories", n_cat)
        object.__setattr__(self, "offsets", _readonly(offsets))
        object.__setattr__(self, "joint", _readonly(joint))
        object.__setattr__(self, "counts", _readonly(counts.astype(np.int64)))
        object.__setattr__(self, "n_samples", n_samples)

    def __repr__(self) -> str:
        n_obs = len(self.observed_pairs())
        n_pairs = self.n_variables * (self.n_variables - 1) // 2
        return (
            f"PairwiseMarginals(n_variables={self.n_variables}, "
            f"n_categories={self.n_categories.tolist()}, n_samples={self.n_samples}, "
            f"observed_pairs={n_obs}/{n_pairs})"
        )

    @property
    def n_variables(self) -> int:
        """Number of variables N."""
        return int(self.n_categories.size)

    def _block(self, j: int) -> slice:
        return slice(int(self.offsets[j]), int(self.offsets[j + 1]))

    def pair(self, j: int, k: int) -> np.ndarray:
        """Return a copy of block ``(j, k)``: the ``(I_j, I_k)`` matrix ``Pr(x_j, x_k)``.

        For ``j == k`` this is ``diag(Pr(x_j))``.

        Raises
        ------
        DataValidationError
            If ``j`` or ``k`` is not a variable index.

        Examples
        --------
        >>> m = pairwise_marginals([[0, 1], [1, 0]])
        >>> m.pair(1, 0)
        array([[0. , 0.5],
               [0.5, 0. ]])
        """
        j = _check_variable(j, self.n_variables, "j")
        k = _check_variable(k, self.n_variables, "k")
        return np.array(self.joint[self._block(j), self._block(k)])

    def one_way(self, j: int) -> np.ndarray:
        """Return the ``(I_j,)`` empirical PMF of ``x_j`` (zeros if never observed).

        Examples
        --------
        >>> pairwise_marginals([[0, 1], [1, 1], [1, 0]]).one_way(1).round(3)
        array([0.333, 0.667])
        """
        j = _check_variable(j, self.n_variables, "j")
        return np.diag(self.joint[self._block(j), self._block(j)]).copy()

    def observed_pairs(self, min_count: int = 1) -> list[tuple[int, int]]:
        """Return the pairs ``(j, k)``, ``j < k``, co-observed in ``>= min_count`` rows.

        Examples
        --------
        >>> m = pairwise_marginals([[0, 1, -1], [1, 0, -1], [1, -1, 1]], [2, 2, 2])
        >>> m.observed_pairs()
        [(0, 1), (0, 2)]
        >>> m.observed_pairs(min_count=2)
        [(0, 1)]
        """
        min_count = _check_int_arg(
            min_count, "min_count", owner="PairwiseMarginals.observed_pairs", low=0
        )
        rows, cols = np.nonzero(np.triu(self.counts >= min_count, k=1))
        return [(int(j), int(k)) for j, k in zip(rows, cols, strict=True)]

    @classmethod
    def from_params(cls, weights, factors, n_samples: int | None = None):
        r"""Population pairwise marginals of a latent-class model.

        Parameters
        ----------
        weights : array_like, shape (F,)
            Class prior :math:`\lambda` (on the simplex).
        factors : list of array_like, each (I_n, F)
            Column-stochastic factors :math:`A_n`.
        n_samples : int, optional
            Stored as ``n_samples`` and in every entry of ``counts``; by default
            :data:`POPULATION_COUNT` (infinitely many rows, every pair observed).

        Returns
        -------
        PairwiseMarginals
            Blocks :math:`A_j \operatorname{diag}(\lambda) A_k^\top` and diagonal
            blocks :math:`\operatorname{diag}(A_j \lambda)`.

        Raises
        ------
        DataValidationError
            Malformed parameters (see :func:`bayespmf.pmf.check_params`) or a negative
            ``n_samples``.

        Notes
        -----
        Ibrahim & Fu, eq. (5); Vora et al., eq. (6) (:math:`Z_{j,k}`).

        Examples
        --------
        >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])] * 2
        >>> m = PairwiseMarginals.from_params([0.5, 0.5], A, n_samples=100)
        >>> m.pair(0, 1)
        array([[0.425, 0.125],
               [0.125, 0.325]])
        >>> m.one_way(0)
        array([0.55, 0.45])
        """
        params = check_params(weights, factors)
        if n_samples is None:
            n_samples = POPULATION_COUNT
        n_samples = _check_int_arg(
            n_samples, "n_samples", owner="PairwiseMarginals.from_params", low=0
        )
        n_cat = np.array([a.shape[0] for a in params.factors], dtype=np.int64)
        offsets = offsets_of(n_cat)
        stacked = stack_factors(params.factors)
        joint = (stacked * params.weights) @ stacked.T
        joint = 0.5 * (joint + joint.T)  # exact symmetry whatever the BLAS summation order
        for j in range(n_cat.size):
            blk = slice(int(offsets[j]), int(offsets[j + 1]))
            joint[blk, blk] = np.diag(stacked[blk] @ params.weights)
        counts = np.full((n_cat.size, n_cat.size), n_samples, dtype=np.int64)
        return cls(n_cat, offsets, joint, counts, n_samples)


class PairwiseAccumulator:
    r"""Accumulate pairwise co-occurrence counts block by block.

    Parameters
    ----------
    n_categories : sequence of int, shape (N,)
        Alphabet size of each variable; every block is validated against it.

    Attributes
    ----------
    n_categories : ndarray of int64, shape (N,)
    offsets : ndarray of int64, shape (N + 1,)
    n_samples : int
        Rows seen so far.

    Notes
    -----
    The state is the integer matrix :math:`C = \sum_{\text{blocks}} O_b^\top O_b` of
    raw co-occurrence counts, so blocks may come in any order and two accumulators
    merge by adding their states (:meth:`merge`): a map-reduce over partitions.

    Examples
    --------
    >>> acc = PairwiseAccumulator([2, 3])
    >>> acc = acc.update([[0, 2], [1, -1]]).update([[1, 2]])
    >>> acc.n_samples
    3
    >>> acc.finalize().pair(0, 1)
    array([[0. , 0. , 0.5],
           [0. , 0. , 0.5]])
    """

    def __init__(self, n_categories) -> None:
        self.n_categories = _check_n_categories(n_categories, "PairwiseAccumulator")
        self.offsets = _readonly(offsets_of(self.n_categories))
        n_total = int(self.offsets[-1])
        self._cooc = np.zeros((n_total, n_total), dtype=np.int64)
        self.n_samples = 0

    def __repr__(self) -> str:
        return (
            f"PairwiseAccumulator(n_categories={self.n_categories.tolist()}, "
            f"n_samples={self.n_samples})"
        )

    @property
    def cooccurrence(self) -> np.ndarray:
        r"""Copy of the raw counts :math:`C = O^\top O`, shape (sum I, sum I), int64."""
        return self._cooc.copy()

    def update(self, codes_block) -> PairwiseAccumulator:
        """Add the rows of ``codes_block``; return ``self`` (so calls chain).

        Parameters
        ----------
        codes_block : CategoricalData or array_like of int, shape (n_rows, N)
            Codes in ``[0, n_categories)``, ``-1`` for missing; all-missing rows are
            accepted (they count in ``n_samples`` only). A ``(0, N)`` array is a no-op.

        Raises
        ------
        DataValidationError
            Wrong shape, codes out of range, or a CategoricalData with other
            ``n_categories``.
        """
        codes = _as_block(codes_block, self.n_categories, type(self).__name__)
        if codes is not None:
            self._update_codes(codes)
        return self

    def _update_codes(self, codes: np.ndarray) -> None:
        """Add already validated codes."""
        self._cooc += _cooccurrence(codes, self.offsets)
        self.n_samples += int(codes.shape[0])

    def merge(self, other: PairwiseAccumulator) -> PairwiseAccumulator:
        """Return a new accumulator holding the rows of both (neither is modified).

        Raises
        ------
        DataValidationError
            If ``other`` is not a PairwiseAccumulator over the same ``n_categories``.

        Examples
        --------
        >>> a = PairwiseAccumulator([2, 2]).update([[0, 1]])
        >>> b = PairwiseAccumulator([2, 2]).update([[1, 1]])
        >>> a.merge(b).n_samples
        2
        """
        if not isinstance(other, PairwiseAccumulator) or not np.array_equal(
            other.n_categories, self.n_categories
        ):
            raise DataValidationError(
                "The 'other' argument of PairwiseAccumulator.merge must be a "
                f"PairwiseAccumulator with n_categories={self.n_categories.tolist()}. "
                f"Got {other!r}."
            )
        out = PairwiseAccumulator(self.n_categories)
        out._cooc = self._cooc + other._cooc
        out.n_samples = self.n_samples + other.n_samples
        return out

    def finalize(self) -> PairwiseMarginals:
        """Normalize the counts into :class:`PairwiseMarginals`.

        Each block is divided by its number of co-observed rows; a block with none
        stays zero.
        """
        counts = _block_sums(self._cooc, self.offsets)
        denom = np.repeat(
            np.repeat(counts, self.n_categories, axis=0), self.n_categories, 1
        )
        joint = np.divide(
            self._cooc, denom, out=np.zeros(self._cooc.shape), where=denom > 0
        )
        return PairwiseMarginals(
            self.n_categories, self.offsets, joint, counts, self.n_samples
        )


def _codes_and_chunks(data, n_categories, chunk_size, owner):
    """Validate ``data`` and ``chunk_size``; return ``(n_categories, row blocks)``."""
    if chunk_size is not None:
        chunk_size = _check_int_arg(chunk_size, "chunk_size", owner=owner, low=1)
    codes, n_cat = as_codes(data, n_categories, name="data", allow_empty_columns=True)
    if chunk_size is None:
        return n_cat, [codes]
    return n_cat, [codes[s : s + chunk_size] for s in range(0, codes.shape[0], chunk_size)]


def pairwise_marginals(data, n_categories=None, *, chunk_size=None) -> PairwiseMarginals:
    r"""Empirical pairwise marginals of partially observed categorical data.

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        Codes in ``[0, n_categories)``; ``-1`` marks a missing entry.
    n_categories : sequence of int, optional
        Alphabet sizes; inferred from ``data`` when omitted (``max + 1`` per column).
    chunk_size : int, optional
        Pass the rows through a :class:`PairwiseAccumulator` in blocks of this many
        rows (same result; bounds the memory of the one-hot design).

    Returns
    -------
    PairwiseMarginals

    Raises
    ------
    DataValidationError
        Malformed ``data`` (see :func:`bayespmf._validation.as_codes`), ``n_categories``
        that disagree with it, or ``chunk_size < 1``.

    Notes
    -----
    With the sparse one-hot design :math:`O` (one column per category of each
    variable), the raw counts are :math:`C = O^\top O`; block :math:`(j, k)` of
    :math:`C` counts the rows with :math:`x_j = a, x_k = b`, and its total is the
    number :math:`n_{jk}` of rows where both are observed. The estimate is
    :math:`\hat Z_{jk} = C_{jk} / n_{jk}` (zero when :math:`n_{jk} = 0`), the
    :math:`\widehat{\Pr}(x_j, x_k)` of Ibrahim & Fu, Sec. 2 (eq. (5)) computed with
    pairwise deletion of missing entries.

    Examples
    --------
    >>> m = pairwise_marginals([[0, 1], [1, 1], [1, 0], [-1, 0]])
    >>> m.pair(0, 1).round(3)
    array([[0.   , 0.333],
           [0.333, 0.333]])
    >>> m.counts
    array([[3, 3],
           [3, 4]])
    """
    n_cat, chunks = _codes_and_chunks(data, n_categories, chunk_size, "pairwise_marginals")
    acc = PairwiseAccumulator(n_cat)
    for chunk in chunks:
        acc._update_codes(chunk)
    return acc.finalize()


# -------------------------------------------------------------------- triple marginals
@dataclass(frozen=True, eq=False, repr=False)
class TripleMarginals:
    r"""Empirical (or population) three-way marginals of chosen variable triples.

    Attributes
    ----------
    n_categories : ndarray of int64, shape (N,)
    triples : tuple of tuple of int
        The triples ``(j, k, l)``, ``j < k < l``, in lexicographic order.
    joint : dict
        ``joint[(j, k, l)]``: read-only ``(I_j, I_k, I_l)`` array, the empirical
        :math:`\Pr(x_j = a, x_k = b, x_l = c)` over the rows where all three are
        observed (zeros if there is no such row).
    counts : dict
        ``counts[(j, k, l)]``: number of rows where all three are observed.
    n_samples : int
        Number of rows the statistics were computed from.

    Notes
    -----
    Under the latent-class model the population tensor is
    :math:`\sum_f \lambda_f A_j(:, f) \circ A_k(:, f) \circ A_l(:, f)` (Kargas et
    al.; Ibrahim & Fu, eq. (4)), see :meth:`from_params`.

    Examples
    --------
    >>> t = triple_marginals([[0, 1, 1], [1, 1, 0], [1, -1, 0]])
    >>> t.triples
    ((0, 1, 2),)
    >>> t.counts[(0, 1, 2)]
    2
    >>> t.tensor(0, 1, 2)[:, 1, :]
    array([[0. , 0.5],
           [0.5, 0. ]])
    """

    n_categories: np.ndarray
    triples: tuple
    joint: dict
    counts: dict
    n_samples: int

    def __repr__(self) -> str:
        return (
            f"TripleMarginals(n_variables={self.n_categories.size}, "
            f"n_triples={len(self.triples)}, n_samples={self.n_samples})"
        )

    def tensor(self, j: int, k: int, l: int) -> np.ndarray:  # noqa: E741
        """Return a copy of the ``(I_j, I_k, I_l)`` PMF of ``(x_j, x_k, x_l)``.

        The indices may come in any order; the axes of the result follow it.

        Raises
        ------
        DataValidationError
            If the (sorted) triple was not computed.

        Examples
        --------
        >>> t = triple_marginals([[0, 1, 2], [1, 0, 0]], n_categories=[2, 2, 3])
        >>> t.tensor(2, 0, 1).shape
        (3, 2, 2)
        """
        n_vars = self.n_categories.size
        idx = tuple(_check_variable(v, n_vars, n) for v, n in zip((j, k, l), "jkl"))
        order = np.argsort(idx, kind="stable")
        key = tuple(int(idx[i]) for i in order)
        if key not in self.joint:
            raise DataValidationError(
                f"The triple {idx} was not computed; pass it in 'triples' to "
                f"triple_marginals. Computed: {len(self.triples)} triple(s), e.g. "
                f"{list(self.triples[:3])}."
            )
        return np.array(np.transpose(self.joint[key], np.argsort(order)))

    @classmethod
    def from_params(cls, weights, factors, triples=None, n_samples: int | None = None):
        """Population triple marginals of a latent-class model.

        Parameters
        ----------
        weights : array_like, shape (F,)
        factors : list of array_like, each (I_n, F)
        triples : sequence of (j, k, l), optional
            All triples by default.
        n_samples : int, optional
            Stored as ``n_samples`` and in every ``counts`` entry; by default
            :data:`POPULATION_COUNT`.

        Returns
        -------
        TripleMarginals

        Examples
        --------
        >>> A = [np.eye(2)] * 3
        >>> TripleMarginals.from_params([0.5, 0.5], A).tensor(0, 1, 2)[:, 1, 1]
        array([0. , 0.5])
        """
        params = check_params(weights, factors)
        n_vars = len(params.factors)
        triples = _default_triples(triples, n_vars, "TripleMarginals.from_params")
        if n_samples is None:
            n_samples = POPULATION_COUNT
        n_samples = _check_int_arg(
            n_samples, "n_samples", owner="TripleMarginals.from_params", low=0
        )
        w, a = params.weights, params.factors
        joint, counts = {}, {}
        for j, k, l in triples:  # noqa: E741
            key = (int(j), int(k), int(l))
            joint[key] = _readonly(np.einsum("f,af,bf,cf->abc", w, a[j], a[k], a[l]))
            counts[key] = n_samples
        n_cat = _readonly(np.array([x.shape[0] for x in a], dtype=np.int64))
        return cls(n_cat, tuple(joint), joint, counts, n_samples)


def _default_triples(triples, n_vars: int, owner: str) -> np.ndarray:
    if triples is None:
        if n_vars < 3:
            raise DataValidationError(
                f"{owner} needs at least 3 variables for triple marginals; the data "
                f"have {n_vars}."
            )
        return np.array(list(itertools.combinations(range(n_vars), 3)), dtype=np.int64)
    return _check_tuples(triples, 3, n_vars, "triples")


class TripleAccumulator:
    """Accumulate three-way co-occurrence counts block by block.

    Parameters
    ----------
    n_categories : sequence of int, shape (N,)
    triples : sequence of (j, k, l), optional
        The triples to count (any order within a triple; repeats are dropped). All
        ``N choose 3`` triples by default.

    Attributes
    ----------
    n_categories : ndarray of int64, shape (N,)
    triples : tuple of tuple of int
        Sorted triples ``j < k < l`` in lexicographic order.
    n_samples : int

    Notes
    -----
    The state is one flat int64 array holding every triple's ``(I_j, I_k, I_l)`` count
    tensor. Triples sharing their first two variables ``(j, k)`` are stored next to
    each other, and one :func:`numpy.bincount` per pair ``(j, k)`` counts them all: on
    the rows where ``x_j`` and ``x_k`` are observed, the observed entry ``x_l`` goes to
    ``start_l + (x_j I_k + x_k) I_l + x_l``.

    Examples
    --------
    >>> acc = TripleAccumulator([2, 2, 2]).update([[0, 1, 1], [1, 1, -1]])
    >>> acc.finalize().counts
    {(0, 1, 2): 1}
    """

    def __init__(self, n_categories, triples=None) -> None:
        self.n_categories = _check_n_categories(n_categories, "TripleAccumulator")
        arr = _default_triples(triples, self.n_categories.size, "TripleAccumulator")
        self.triples = tuple((int(j), int(k), int(l)) for j, k, l in arr)  # noqa: E741
        n_cat = self.n_categories
        sizes = n_cat[arr[:, 0]] * n_cat[arr[:, 1]] * n_cat[arr[:, 2]]
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._flat = np.zeros(int(self._starts[-1]), dtype=np.int64)
        # groups of consecutive triples with the same leading pair (j, k)
        lead = arr[:, 0] * n_cat.size + arr[:, 1]
        cuts = np.flatnonzero(np.diff(lead)) + 1
        bounds = np.concatenate([[0], cuts, [arr.shape[0]]])
        self._groups = []
        for g0, g1 in itertools.pairwise(bounds):
            j, k = int(arr[g0, 0]), int(arr[g0, 1])
            ls = arr[g0:g1, 2]
            base = self._starts[g0:g1] - self._starts[g0]  # start of each triple in group
            self._groups.append(
                (j, k, ls, base, n_cat[ls], int(self._starts[g0]), int(self._starts[g1]))
            )
        self.n_samples = 0

    def __repr__(self) -> str:
        return (
            f"TripleAccumulator(n_variables={self.n_categories.size}, "
            f"n_triples={len(self.triples)}, n_samples={self.n_samples})"
        )

    def update(self, codes_block) -> TripleAccumulator:
        """Add the rows of ``codes_block``; return ``self`` (so calls chain).

        Parameters
        ----------
        codes_block : CategoricalData or array_like of int, shape (n_rows, N)
            Validated like :meth:`PairwiseAccumulator.update`.

        Raises
        ------
        DataValidationError
            Wrong shape or codes out of range.
        """
        codes = _as_block(codes_block, self.n_categories, type(self).__name__)
        if codes is not None:
            self._update_codes(codes)
        return self

    def _update_codes(self, codes: np.ndarray) -> None:
        mask = codes >= 0
        for j, k, ls, base, n_l, g0, g1 in self._groups:
            rows = np.flatnonzero(mask[:, j] & mask[:, k])
            if rows.size == 0:
                continue
            pair_code = codes[rows, j] * self.n_categories[k] + codes[rows, k]
            tail = codes[np.ix_(rows, ls)]  # (r, L)
            idx = base + pair_code[:, None] * n_l + tail
            self._flat[g0:g1] += np.bincount(idx[tail >= 0], minlength=g1 - g0)
        self.n_samples += int(codes.shape[0])

    def merge(self, other: TripleAccumulator) -> TripleAccumulator:
        """Return a new accumulator holding the rows of both (neither is modified).

        Raises
        ------
        DataValidationError
            If ``other`` counts other triples or has other ``n_categories``.

        Examples
        --------
        >>> a = TripleAccumulator([2, 2, 2]).update([[0, 1, 1]])
        >>> b = TripleAccumulator([2, 2, 2]).update([[0, 1, 1]])
        >>> a.merge(b).finalize().counts
        {(0, 1, 2): 2}
        """
        if (
            not isinstance(other, TripleAccumulator)
            or not np.array_equal(other.n_categories, self.n_categories)
            or other.triples != self.triples
        ):
            raise DataValidationError(
                "The 'other' argument of TripleAccumulator.merge must be a "
                "TripleAccumulator with the same n_categories and triples. Got "
                f"{other!r}."
            )
        out = TripleAccumulator(self.n_categories, self.triples)
        out._flat = self._flat + other._flat
        out.n_samples = self.n_samples + other.n_samples
        return out

    def finalize(self) -> TripleMarginals:
        """Normalize the counts into :class:`TripleMarginals`."""
        joint, counts = {}, {}
        n_cat = self.n_categories
        for t, key in enumerate(self.triples):
            raw = self._flat[self._starts[t] : self._starts[t + 1]]
            total = int(raw.sum())
            pmf = raw / total if total > 0 else np.zeros(raw.shape)
            joint[key] = _readonly(pmf.reshape(tuple(int(n_cat[v]) for v in key)))
            counts[key] = total
        return TripleMarginals(n_cat, self.triples, joint, counts, self.n_samples)


def triple_marginals(
    data, n_categories=None, triples=None, *, chunk_size=None
) -> TripleMarginals:
    r"""Empirical three-way marginals of partially observed categorical data.

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        Codes, ``-1`` for missing.
    n_categories : sequence of int, optional
        Alphabet sizes; inferred from ``data`` when omitted.
    triples : sequence of (j, k, l), optional
        Triples to compute (any order within a triple; stored sorted). All
        ``N choose 3`` by default (``N^3/6`` tensors of ``I^3`` entries: pass a list
        for many variables).
    chunk_size : int, optional
        Process the rows in blocks of this many rows (same result).

    Returns
    -------
    TripleMarginals

    Raises
    ------
    DataValidationError
        Malformed ``data``, ``n_categories`` or ``triples`` (not index triples, out of
        range, a repeated variable), fewer than 3 variables, or ``chunk_size < 1``.

    Notes
    -----
    :math:`\hat T_{jkl}(a, b, c) = n_{jkl}(a, b, c) / n_{jkl}` with
    :math:`n_{jkl}(a, b, c)` the number of rows with :math:`x_j = a, x_k = b, x_l = c`
    and :math:`n_{jkl}` the number of rows where all three are observed: the third-order
    statistics of the CTD baseline (Kargas et al.; Ibrahim & Fu, Sec. 7).

    Examples
    --------
    >>> t = triple_marginals([[0, 1, 1, 0], [1, 1, 0, 1]], triples=[(3, 0, 1)])
    >>> t.triples
    ((0, 1, 3),)
    >>> t.tensor(0, 1, 3)[:, 1, :]
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    n_cat, chunks = _codes_and_chunks(data, n_categories, chunk_size, "triple_marginals")
    acc = TripleAccumulator(n_cat, triples)
    for chunk in chunks:
        acc._update_codes(chunk)
    return acc.finalize()


# ------------------------------------------------------- random projections (JUROR)
@dataclass(frozen=True, eq=False, repr=False)
class RandomProjections:
    r"""Two-sparse projection directions for pairs of variables, and their binning.

    For the pair ``pairs[p] = (j, k)`` and projection ``m``, the direction
    :math:`\phi = \mathrm{directions}[p, m] \in \mathbb{R}^2` projects the pair
    of codes to :math:`t = \phi_0 x_j + \phi_1 x_k` (codes ``0 .. I - 1``), and
    :math:`t` is binned into ``n_bins[p]`` equal-width bins spanning the range of
    :math:`t` over the grid :math:`\{0..I_j-1\} \times \{0..I_k-1\}`:

    .. math::
        t_{\min} = \min(0, \phi_0 (I_j - 1)) + \min(0, \phi_1 (I_k - 1)),\quad
        t_{\max} = \max(0, \phi_0 (I_j - 1)) + \max(0, \phi_1 (I_k - 1)),

        w = (t_{\max} - t_{\min}) / B, \qquad
        \mathrm{bin}(t) = \min(B - 1, \lfloor (t - t_{\min}) / w \rfloor),

    i.e. bin ``b`` is :math:`[t_{\min} + b w, t_{\min} + (b + 1) w)`, the last bin
    closed; all in float64 exactly as written (``lower`` is :math:`t_{\min}`,
    ``width`` is :math:`w`). Shifting the codes to ``1 .. I`` (the paper's indexing)
    shifts :math:`t` and the range alike, so the bins are the same.

    Attributes
    ----------
    n_categories : ndarray of int64, shape (N,)
    pairs : ndarray of int64, shape (P, 2)
        Pairs ``(j, k)``, ``j < k``, in lexicographic order.
    directions : ndarray of float64, shape (P, M, 2)
        Non-zero directions (unit norm when drawn by :func:`random_projections`).
    n_bins : ndarray of int64, shape (P,)
        Number of bins :math:`B` of each pair's histograms.

    Notes
    -----
    The histogram of the projected values is the discretized Radon transform (Vora et
    al., eqs. (4)-(5)) of the pair's joint PMF :math:`Z_{jk}`:
    :math:`Y_{jk}[m, b] = \sum_{a, c} Z_{jk}[a, c]\, [\mathrm{bin}_m(a, c) = b]`,
    eq. (6), :math:`Y_{jk} = \mathfrak{R}(Z_{jk}) \in \mathbb{R}^{M \times B}`.
    :meth:`bin_index` gives :math:`\mathrm{bin}_m(a, c)`, :meth:`radon_operator` the
    matrix of :math:`\mathfrak{R}` and :meth:`apply` the transform itself.

    Examples
    --------
    >>> proj = RandomProjections([2, 3], [[0, 1]], [[[1.0, 0.0], [0.6, 0.8]]], [3])
    >>> proj.bin_index(0, 1)[1]    # t = 0.6 a + 0.8 c on [0, 2.2], bins of width 2.2/3
    array([[0, 1, 2],
           [0, 1, 2]])
    >>> proj.apply(0, 1, np.full((2, 3), 1 / 6)).round(3)
    array([[0.5  , 0.   , 0.5  ],
           [0.333, 0.333, 0.333]])
    """

    n_categories: np.ndarray
    pairs: np.ndarray
    directions: np.ndarray
    n_bins: np.ndarray

    def __post_init__(self) -> None:
        owner = "RandomProjections"
        n_cat = _check_n_categories(self.n_categories, owner)
        pairs = np.asarray(self.pairs)
        if pairs.ndim != 2 or pairs.shape[1:] != (2,) or pairs.shape[0] == 0:
            raise DataValidationError(
                f"The 'pairs' of {owner} must have shape (P, 2) with P >= 1. Got "
                f"{pairs.shape}."
            )
        checked = _check_tuples(pairs, 2, n_cat.size, "pairs")
        if not np.array_equal(checked, pairs):
            raise DataValidationError(
                f"The 'pairs' of {owner} must be sorted (j < k, lexicographic order, no "
                "repeats); build it with random_projections(..., pairs=...), which sorts."
            )
        n_pairs = pairs.shape[0]
        directions = np.array(self.directions, dtype=np.float64)
        if directions.ndim != 3 or directions.shape[::2] != (n_pairs, 2):
            raise DataValidationError(
                f"The 'directions' of {owner} must have shape (P, M, 2) = ({n_pairs}, "
                f"M, 2). Got {directions.shape}."
            )
        if directions.shape[1] == 0:
            raise DataValidationError(f"The 'directions' of {owner} need M >= 1.")
        if not np.all(np.isfinite(directions)) or np.any(np.all(directions == 0, axis=2)):
            raise DataValidationError(
                f"The 'directions' of {owner} must be finite and non-zero."
            )
        n_bins = np.asarray(self.n_bins)
        if (
            n_bins.shape != (n_pairs,)
            or n_bins.dtype.kind not in "iu"
            or np.any(n_bins < 1)
        ):
            raise DataValidationError(
                f"The 'n_bins' of {owner} must be {n_pairs} ints >= 1 (one per pair). "
                f"Got {n_bins.tolist()}."
            )
        object.__setattr__(self, "n_categories", n_cat)
        object.__setattr__(self, "pairs", _readonly(pairs.astype(np.int64)))
        object.__setattr__(self, "directions", _readonly(directions))
        object.__setattr__(self, "n_bins", _readonly(n_bins.astype(np.int64)))
        lookup = {(int(j), int(k)): p for p, (j, k) in enumerate(self.pairs)}
        object.__setattr__(self, "_lookup", lookup)
        low, high = self._extent()
        object.__setattr__(self, "_lower", _readonly(low))
        object.__setattr__(self, "_width", _readonly((high - low) / self.n_bins[:, None]))

    def __repr__(self) -> str:
        return (
            f"RandomProjections(n_variables={self.n_categories.size}, "
            f"n_pairs={self.n_pairs}, n_projections={self.n_projections})"
        )

    @property
    def n_pairs(self) -> int:
        """Number of pairs P."""
        return int(self.pairs.shape[0])

    @property
    def n_projections(self) -> int:
        """Number of projections M per pair."""
        return int(self.directions.shape[1])

    def _extent(self) -> tuple[np.ndarray, np.ndarray]:
        span = (self.n_categories[self.pairs] - 1).astype(np.float64)  # (P, 2)
        scaled = self.directions * span[:, None, :]  # (P, M, 2)
        low = np.minimum(scaled, 0.0)
        high = np.maximum(scaled, 0.0)
        return low[..., 0] + low[..., 1], high[..., 0] + high[..., 1]

    @property
    def lower(self) -> np.ndarray:
        r"""Lower end :math:`t_{\min}` of the binned range, shape (P, M)."""
        return self._lower.copy()

    @property
    def width(self) -> np.ndarray:
        r"""Bin width :math:`w = (t_{\max} - t_{\min}) / B`, shape (P, M)."""
        return self._width.copy()

    def pair_index(self, j: int, k: int) -> int:
        """Return the position ``p`` of the pair ``(j, k)`` (either order) in ``pairs``.

        Raises
        ------
        DataValidationError
            If the pair has no projections.

        Examples
        --------
        >>> random_projections([2, 2, 2], 1, random_state=0).pair_index(2, 0)
        1
        """
        n_vars = self.n_categories.size
        j, k = _check_variable(j, n_vars, "j"), _check_variable(k, n_vars, "k")
        try:
            return self._lookup[(min(j, k), max(j, k))]
        except KeyError:
            raise DataValidationError(
                f"The pair ({j}, {k}) has no projections; the pairs are "
                f"{[tuple(p) for p in self.pairs.tolist()[:5]]}"
                f"{' ...' if self.n_pairs > 5 else ''}. Pass it in 'pairs' of "
                "random_projections."
            ) from None

    def bin_index(self, j: int, k: int) -> np.ndarray:
        """Bin of every grid point: ``(M, I_j, I_k)`` int64 array of ``bin_m(a, c)``.

        Entry ``[m, a, c]`` is the bin of projection ``m`` for ``x_j = a, x_k = c``.
        For ``j > k`` this is the transpose (axes 1, 2) of ``bin_index(k, j)``: the
        projections of a pair do not depend on the order it is named in.

        Raises
        ------
        DataValidationError
            If the pair has no projections.

        Examples
        --------
        >>> proj = random_projections([2, 3], 4, random_state=0)
        >>> proj.bin_index(0, 1).shape, proj.bin_index(1, 0).shape
        ((4, 2, 3), (4, 3, 2))
        """
        p = self.pair_index(j, k)
        i_j, i_k = (int(v) for v in self.n_categories[self.pairs[p]])
        phi = self.directions[p]
        a = np.arange(i_j, dtype=np.float64)[None, :, None]
        c = np.arange(i_k, dtype=np.float64)[None, None, :]
        t = phi[:, 0, None, None] * a + phi[:, 1, None, None] * c
        bins = _bin(
            t,
            self._lower[p][:, None, None],
            self._width[p][:, None, None],
            int(self.n_bins[p]),
        )
        return bins if j < k else np.ascontiguousarray(bins.transpose(0, 2, 1))

    def radon_operator(self, j: int, k: int) -> sp.csr_array:
        r"""The Radon transform of pair ``(j, k)`` as a sparse 0/1 matrix.

        Returns
        -------
        scipy.sparse.csr_array, shape (M * B, I_j * I_k)
            ``R[m * B + b, a * I_k + c] = 1`` iff ``bin_m(a, c) = b``, so that
            ``(R @ Z.ravel()).reshape(M, B)`` is :math:`\mathfrak{R}(Z)` (row-major
            ravel of the ``(I_j, I_k)`` matrix :math:`Z`). Each column holds M ones.

        Examples
        --------
        >>> proj = random_projections([2, 3], 4, random_state=0)
        >>> proj.radon_operator(0, 1).shape
        (12, 6)
        """
        bins = self.bin_index(j, k)
        m, i_j, i_k = bins.shape
        n_bins = int(self.n_bins[self.pair_index(j, k)])
        rows = (np.arange(m)[:, None, None] * n_bins + bins).ravel()
        cols = np.broadcast_to(np.arange(i_j * i_k).reshape(1, i_j, i_k), bins.shape)
        return sp.csr_array(
            (np.ones(rows.size), (rows, cols.ravel())), shape=(m * n_bins, i_j * i_k)
        )

    def apply(self, j: int, k: int, z) -> np.ndarray:
        r"""Apply the Radon transform of pair ``(j, k)`` to an ``(I_j, I_k)`` array.

        Returns
        -------
        ndarray, shape (M, B)
            :math:`\mathfrak{R}(Z)[m, b] = \sum_{a, c} Z[a, c]\,
            [\mathrm{bin}_m(a, c) = b]`.
        """
        bins = self.bin_index(j, k)
        z = np.asarray(z, dtype=np.float64)
        if z.shape != bins.shape[1:]:
            raise DataValidationError(
                f"The 'z' argument of RandomProjections.apply must have shape "
                f"{bins.shape[1:]} (I_j, I_k) for the pair ({j}, {k}). Got {z.shape}."
            )
        return _radon(bins, z, int(self.n_bins[self.pair_index(j, k)]))


def _bin(t, lower, width, n_bins: int) -> np.ndarray:
    """``min(B - 1, floor((t - lower) / width))`` as int64 (float64 arithmetic)."""
    return np.clip(np.floor((t - lower) / width), 0, n_bins - 1).astype(np.int64)


def _radon(bins: np.ndarray, z: np.ndarray, n_bins: int) -> np.ndarray:
    m = bins.shape[0]
    idx = (np.arange(m)[:, None, None] * n_bins + bins).ravel()
    weights = np.broadcast_to(z, bins.shape).ravel()
    return np.bincount(idx, weights=weights, minlength=m * n_bins).reshape(m, n_bins)


def random_projections(
    n_categories, n_projections: int, *, pairs=None, n_bins=None, random_state=None
) -> RandomProjections:
    r"""Draw M random two-sparse projection directions for every pair of variables.

    Parameters
    ----------
    n_categories : sequence of int, shape (N,)
        Alphabet sizes (the binning depends on them).
    n_projections : int
        Number M of directions per pair (the paper uses M = 200).
    pairs : sequence of (j, k), optional
        Pairs to project (any order within a pair; stored sorted, repeats dropped).
        All pairs :math:`\mathcal{B} = \{(j, k): j < k\}` by default.
    n_bins : int, optional
        Number of bins B of every histogram; by default ``max(I_j, I_k)`` per pair
        (the paper's :math:`Y_{j,k} \in \mathbb{R}^{M \times I}`).
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    RandomProjections

    Raises
    ------
    DataValidationError
        Malformed ``n_categories`` or ``pairs``, ``n_projections < 1``,
        ``n_bins < 1``, or fewer than two variables.

    Notes
    -----
    Following Vora et al., Sec. 2.3 (the rows of :math:`\Phi` have i.i.d.
    :math:`\mathcal{N}(0, 1)` entries and are normalized to unit norm) restricted,
    as in Sec. 3, to directions with two non-zero entries, one pair
    :math:`X_{j,k} = [X_j, X_k]^\top` at a time: every
    :math:`\phi_m \in \mathbb{R}^2` is :math:`g / \lVert g \rVert_2` with
    :math:`g \sim \mathcal{N}(0, I_2)`, i.e. uniform on the unit circle. The draws are
    one ``standard_normal((P, M, 2))`` call (pair-major order), so a seed fixes them.
    The histogram of :math:`\phi_m^\top X_{j,k}` (eq. (5)) is binned as described in
    :class:`RandomProjections`; stacking the M histograms gives :math:`Y_{j,k}` of
    eq. (6).

    Examples
    --------
    >>> proj = random_projections([3, 3, 4], 5, random_state=0)
    >>> proj.pairs.tolist()
    [[0, 1], [0, 2], [1, 2]]
    >>> proj.directions.shape, proj.n_bins.tolist()
    ((3, 5, 2), [3, 4, 4])
    >>> np.allclose(np.linalg.norm(proj.directions, axis=2), 1.0)
    True
    """
    owner = "random_projections"
    n_cat = _check_n_categories(n_categories, owner)
    n_projections = _check_int_arg(n_projections, "n_projections", owner=owner, low=1)
    if n_cat.size < 2:
        raise DataValidationError(
            f"{owner} needs at least 2 variables (pairs of variables are projected); "
            f"'n_categories' has {n_cat.size}."
        )
    if pairs is None:
        pair_arr = np.column_stack(np.triu_indices(n_cat.size, k=1)).astype(np.int64)
    else:
        pair_arr = _check_tuples(pairs, 2, n_cat.size, "pairs")
    if n_bins is None:
        bins = n_cat[pair_arr].max(axis=1)
    else:
        n_bins = _check_int_arg(n_bins, "n_bins", owner=owner, low=1)
        bins = np.full(pair_arr.shape[0], n_bins, dtype=np.int64)
    rng = check_random_state(random_state)
    g = rng.standard_normal((pair_arr.shape[0], n_projections, 2))
    directions = g / np.linalg.norm(g, axis=2, keepdims=True)
    return RandomProjections(n_cat, pair_arr, directions, bins)


@dataclass(frozen=True, eq=False, repr=False)
class ProjectionMarginals:
    """One-dimensional PMFs of randomly projected pairs of variables (JUROR's input).

    Attributes
    ----------
    projections : RandomProjections
        The directions and binning.
    pmfs : ndarray of float64, shape (P, M, max(n_bins))
        ``pmfs[p, m, b]``: fraction of the rows co-observing ``pairs[p]`` whose
        projection ``m`` falls in bin ``b``; :math:`Y_{j,k}` of Vora et al., eq. (6).
        Entries ``b >= n_bins[p]`` are zero padding; a pair never co-observed has all
        zeros. Use :meth:`pmf` for the unpadded ``(M, B)`` matrix.
    counts : ndarray of int64, shape (P,)
        Number of rows where both variables of the pair are observed.
    n_samples : int
        Number of rows the statistics were computed from.

    Examples
    --------
    >>> proj = random_projections([2, 2], 3, random_state=0)
    >>> pm = projection_marginals([[0, 1], [1, 1], [1, -1]], proj)
    >>> pm.counts.tolist(), pm.pmf(0, 1).sum(axis=1).tolist()
    ([2], [1.0, 1.0, 1.0])
    """

    projections: RandomProjections
    pmfs: np.ndarray
    counts: np.ndarray
    n_samples: int

    def __repr__(self) -> str:
        return (
            f"ProjectionMarginals(n_pairs={self.projections.n_pairs}, "
            f"n_projections={self.projections.n_projections}, n_samples={self.n_samples})"
        )

    def pmf(self, j: int, k: int) -> np.ndarray:
        """Return a copy of the ``(M, B)`` matrix :math:`Y_{j,k}` of pair ``(j, k)``."""
        p = self.projections.pair_index(j, k)
        return np.array(self.pmfs[p, :, : int(self.projections.n_bins[p])])

    @classmethod
    def from_pairwise(
        cls, pairwise: PairwiseMarginals, projections: RandomProjections
    ) -> ProjectionMarginals:
        """Radon transforms of the pair blocks of ``pairwise`` (e.g. population ones).

        ``counts`` and ``n_samples`` are taken from ``pairwise``. Applied to
        ``pairwise_marginals(data)`` this equals ``projection_marginals(data, ...)``
        up to rounding.

        Examples
        --------
        >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])] * 2
        >>> pop = PairwiseMarginals.from_params([0.5, 0.5], A)
        >>> proj = random_projections([2, 2], 4, random_state=0)
        >>> ProjectionMarginals.from_pairwise(pop, proj).pmf(0, 1).sum(axis=1)
        array([1., 1., 1., 1.])
        """
        if not isinstance(pairwise, PairwiseMarginals) or not isinstance(
            projections, RandomProjections
        ):
            raise DataValidationError(
                "ProjectionMarginals.from_pairwise takes a PairwiseMarginals and a "
                f"RandomProjections. Got {type(pairwise).__name__} and "
                f"{type(projections).__name__}."
            )
        _check_same_categories(pairwise.n_categories, projections, "pairwise")
        pmfs = _projected(projections, pairwise.pair)
        counts = pairwise.counts[projections.pairs[:, 0], projections.pairs[:, 1]]
        return cls(
            projections, _readonly(pmfs), _readonly(counts.copy()), pairwise.n_samples
        )


def _check_same_categories(n_cat, projections: RandomProjections, name: str) -> None:
    if not np.array_equal(n_cat, projections.n_categories):
        raise DataValidationError(
            f"The n_categories of '{name}' ({np.asarray(n_cat).tolist()}) disagree with "
            f"those of 'projections' ({projections.n_categories.tolist()}). Draw the "
            "projections with random_projections(data.n_categories, ...)."
        )


def _projected(projections: RandomProjections, block) -> np.ndarray:
    """Stack the Radon transforms of ``block(j, k)`` over the pairs, zero-padded."""
    out = np.zeros(
        (projections.n_pairs, projections.n_projections, int(projections.n_bins.max()))
    )
    for p, (j, k) in enumerate(projections.pairs.tolist()):
        n_bins = int(projections.n_bins[p])
        out[p, :, :n_bins] = _radon(projections.bin_index(j, k), block(j, k), n_bins)
    return out


def projection_marginals(data, projections, n_categories=None) -> ProjectionMarginals:
    r"""Empirical PMFs of the random projections of pairs of variables.

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        Codes, ``-1`` for missing.
    projections : RandomProjections
        From :func:`random_projections`.
    n_categories : sequence of int, optional
        Alphabet sizes; ``projections.n_categories`` by default (and must equal it).

    Returns
    -------
    ProjectionMarginals

    Raises
    ------
    DataValidationError
        ``projections`` not a RandomProjections, malformed ``data``, or alphabet sizes
        that disagree with ``projections``.

    Notes
    -----
    For the pair :math:`(j, k)` and direction :math:`\phi_m`, every row where both
    are observed contributes its projected value :math:`t = \phi_m^\top [x_j, x_k]`
    to bin :math:`\mathrm{bin}_m(x_j, x_k)` (see :class:`RandomProjections`), and the
    histogram is divided by the number of such rows: the empirical version of
    eq. (5) of Vora et al. Because the bin of a row depends only on
    :math:`(x_j, x_k)`, the histogram is the Radon operator applied to the pair's
    co-occurrence counts :math:`C_{jk} = O_j^\top O_k`, which is how it is computed:
    one sparse product over the rows, then :math:`O(M I_j I_k)` work per pair,
    independent of the number of rows.

    Examples
    --------
    >>> proj = RandomProjections([2, 2], [[0, 1]], [[[0.6, 0.8]]], [2])
    >>> pm = projection_marginals([[0, 0], [1, 1], [1, 0], [0, -1]], proj)
    >>> pm.pmf(0, 1).round(3)   # t = 0, 1.4, 0.6 on the range [0, 1.4]
    array([[0.667, 0.333]])
    """
    if not isinstance(projections, RandomProjections):
        raise DataValidationError(
            "The 'projections' argument of projection_marginals must be a "
            "RandomProjections (from random_projections). Got "
            f"{type(projections).__name__}."
        )
    if n_categories is not None:
        _check_same_categories(n_categories, projections, "n_categories")
    if isinstance(data, CategoricalData):
        _check_same_categories(data.n_categories, projections, "data")
    codes, _ = as_codes(
        data, projections.n_categories, name="data", allow_empty_columns=True
    )
    offsets = offsets_of(projections.n_categories)
    cooc = _cooccurrence(codes, offsets)

    def counts_block(j, k):
        return cooc[offsets[j] : offsets[j + 1], offsets[k] : offsets[k + 1]]

    hist = _projected(projections, counts_block)
    pairs = projections.pairs
    counts = _block_sums(cooc, offsets)[pairs[:, 0], pairs[:, 1]]
    pmfs = np.divide(
        hist,
        counts[:, None, None],
        out=np.zeros(hist.shape),
        where=counts[:, None, None] > 0,
    )
    return ProjectionMarginals(
        projections, _readonly(pmfs), _readonly(counts), int(codes.shape[0])
    )
