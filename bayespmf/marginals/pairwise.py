r"""Pairwise marginals :math:`\Pr(x_j = a, x_k = b)` of every pair of variables.

Stored as one symmetric block matrix, the input of CNMF (Ibrahim & Fu, eq. (6)), and
computed as the Gram matrix :math:`O^\top O` of the sparse one-hot design :math:`O`
over the rows in which both variables are observed; :class:`PairwiseAccumulator` takes
the rows block by block and merges (a map-reduce over partitions).

References
----------
.. [1] S. Ibrahim, X. Fu, "Recovering joint probability of discrete random variables
   from pairwise marginals", IEEE Trans. Signal Process., 2021.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayespmf._validation import DataValidationError, check_n_categories
from bayespmf.marginals._common import (
    POPULATION_COUNT,
    as_block,
    check_int_arg,
    check_variable,
    codes_and_chunks,
    readonly,
)
from bayespmf.pmf import check_params, offsets_of, one_hot_design, stack_factors

__all__ = [
    "BLOCK_ROWS",
    "PairwiseAccumulator",
    "PairwiseMarginals",
    "block_sums",
    "cooccurrence_counts",
    "pairwise_marginals",
]

#: Rows per block of the sparse product O^T O. The product keeps a dense accumulator per
#: output row; with blocks of this size the block and the accumulator stay in cache
#: (faster than one block, :ref:`bench-marginals`), and a
#: block's counts fit the int32 the product is computed in (no overflow below 2**31).
BLOCK_ROWS = 16_384

#: A block whose one-hot design has at least this share of nonzero entries (about one
#: over the mean alphabet size when little is missing) is multiplied as a dense float32
#: matrix (BLAS) instead of a sparse one: the sparse product costs ~S (N_obs)^2
#: scattered updates, the dense one S (sum I)^2 multiply-adds at BLAS speed: dense is
#: much faster for binary items and slower below about this density
#: (:ref:`bench-marginals`).
#: Exact: the counts of one block stay below BLOCK_ROWS < 2**24, which float32 holds.
DENSE_DENSITY = 0.125

#: Entries (rows x sum I) of one dense block of the design: 32 MiB of float32.
DENSE_BLOCK_ENTRIES = 2**23


def cooccurrence_counts(codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Raw co-occurrence counts ``O^T O`` of validated codes, (sum I, sum I) int64."""
    n_total = int(offsets[-1])
    n_cat = np.diff(offsets)
    out = np.zeros((n_total, n_total), dtype=np.int64)
    for start in range(0, codes.shape[0], BLOCK_ROWS):
        design = one_hot_design(codes[start : start + BLOCK_ROWS], n_cat, dtype=np.int32)
        if not design.nnz:
            continue
        if design.nnz < DENSE_DENSITY * design.shape[0] * n_total:
            out += (design.T.tocsr() @ design).toarray()
            continue
        step = max(1, DENSE_BLOCK_ENTRIES // n_total)
        for row in range(0, design.shape[0], step):
            dense = design[row : row + step].toarray().astype(np.float32)
            np.add(out, dense.T @ dense, out=out, casting="unsafe")
    return out


def block_sums(matrix: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sum of each ``(j, k)`` block of a ``(sum I, sum I)`` matrix: an ``(N, N)`` array."""
    starts = offsets[:-1]
    return np.add.reduceat(np.add.reduceat(matrix, starts, axis=0), starts, axis=1)


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
    counts : ndarray of int64 (or float64 for weighted rows), shape (N, N)
        ``counts[j, k]``: number (total weight) of rows where ``x_j`` and ``x_k`` are
        both observed; ``counts[j, j]``: of rows where ``x_j`` is observed.
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
        n_cat = readonly(check_n_categories(self.n_categories, owner=owner))
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
        ok_kind = counts.dtype.kind in "iu" or (
            counts.dtype.kind == "f" and np.all(np.isfinite(counts)) and (counts >= 0).all()
        )
        if counts.shape != (n_cat.size, n_cat.size) or not ok_kind:
            raise DataValidationError(
                f"The 'counts' of {owner} must be an array of shape ({n_cat.size}, "
                f"{n_cat.size}) of row counts (int) or weight sums (float >= 0). Got "
                f"{counts.dtype} {counts.shape}."
            )
        n_samples = check_int_arg(self.n_samples, "n_samples", owner=owner, low=0)
        object.__setattr__(self, "n_categories", n_cat)
        object.__setattr__(self, "offsets", readonly(offsets))
        object.__setattr__(self, "joint", readonly(joint))
        if counts.dtype.kind in "iu":
            counts = counts.astype(np.int64)
        object.__setattr__(self, "counts", readonly(counts))
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
        j = check_variable(j, self.n_variables, "j")
        k = check_variable(k, self.n_variables, "k")
        return np.array(self.joint[self._block(j), self._block(k)])

    def one_way(self, j: int) -> np.ndarray:
        """Return the ``(I_j,)`` empirical PMF of ``x_j`` (zeros if never observed).

        Examples
        --------
        >>> pairwise_marginals([[0, 1], [1, 1], [1, 0]]).one_way(1).round(3)
        array([0.333, 0.667])
        """
        j = check_variable(j, self.n_variables, "j")
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
        min_count = check_int_arg(
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
        n_samples = check_int_arg(
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
        self.n_categories = readonly(
            check_n_categories(n_categories, owner="PairwiseAccumulator")
        )
        self.offsets = readonly(offsets_of(self.n_categories))
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
        codes = as_block(codes_block, self.n_categories, type(self).__name__)
        if codes is not None:
            self._update_codes(codes)
        return self

    def _update_codes(self, codes: np.ndarray) -> None:
        """Add already validated codes."""
        self._cooc += cooccurrence_counts(codes, self.offsets)
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
        counts = block_sums(self._cooc, self.offsets)
        denom = np.repeat(
            np.repeat(counts, self.n_categories, axis=0), self.n_categories, 1
        )
        joint = np.divide(
            self._cooc, denom, out=np.zeros(self._cooc.shape), where=denom > 0
        )
        return PairwiseMarginals(
            self.n_categories, self.offsets, joint, counts, self.n_samples
        )


def pairwise_marginals(
    data, n_categories=None, *, chunk_size=None, sample_weight=None
) -> PairwiseMarginals:
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
    sample_weight : array_like, shape (S,), optional
        Weight of each row (frequencies or survey weights, finite and >= 0): every
        count becomes a sum of weights, ``C = O^T W O``, and ``counts`` the weight of
        the co-observed rows (floats). Integer weights equal repeating the rows.

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
    n_cat, chunks = codes_and_chunks(data, n_categories, chunk_size, "pairwise_marginals")
    acc = PairwiseAccumulator(n_cat)
    if sample_weight is None:
        for chunk in chunks:
            acc._update_codes(chunk)
        return acc.finalize()
    n_rows = sum(c.shape[0] for c in chunks)
    w = np.array(sample_weight, dtype=np.float64).ravel()
    if w.shape != (n_rows,) or not np.all(np.isfinite(w)) or (w < 0).any():
        raise DataValidationError(
            "The 'sample_weight' parameter of pairwise_marginals must hold one finite "
            f"weight >= 0 per row ({n_rows}); got shape {np.shape(sample_weight)}."
        )
    acc._cooc = np.zeros(acc._cooc.shape)  # sums of weights
    start = 0
    for chunk in chunks:
        for b in range(0, chunk.shape[0], BLOCK_ROWS):
            block = chunk[b : b + BLOCK_ROWS]
            design = one_hot_design(block, n_cat, dtype=np.float64)
            wb = w[start + b : start + b + block.shape[0]]
            acc._cooc += (design.T.tocsr() @ design.multiply(wb[:, None]).tocsr()).toarray()
        start += chunk.shape[0]
    acc.n_samples = n_rows
    return acc.finalize()
