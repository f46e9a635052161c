r"""One-way marginals of random two-sparse projections of pairs of variables (JUROR).

For each pair of variables, M random directions project the pair of codes to a line;
the histograms of the projected values are the discrete Radon transform of the pair's
joint PMF (Vora et al., eqs. (4)-(6)). They are computed from the pairwise
co-occurrence counts (:func:`~bayespmf.marginals.pairwise.cooccurrence_counts`), so
their cost does not grow with the number of rows beyond one sparse product.

References
----------
.. [1] J. Vora, K. S. Gurumoorthy, A. Rajwade, "Recovery of joint probability
   distribution from one-way marginals: low rank tensors and random projections".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from bayespmf._validation import (
    DataValidationError,
    as_codes,
    check_n_categories,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.marginals._common import (
    check_int_arg,
    check_tuples,
    check_variable,
    readonly,
)
from bayespmf.marginals.pairwise import PairwiseMarginals, block_sums, cooccurrence_counts
from bayespmf.pmf import offsets_of

__all__ = [
    "ProjectionMarginals",
    "RandomProjections",
    "projection_marginals",
    "random_projections",
]


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
        n_cat = readonly(check_n_categories(self.n_categories, owner=owner))
        pairs = np.asarray(self.pairs)
        if pairs.ndim != 2 or pairs.shape[1:] != (2,) or pairs.shape[0] == 0:
            raise DataValidationError(
                f"The 'pairs' of {owner} must have shape (P, 2) with P >= 1. Got "
                f"{pairs.shape}."
            )
        checked = check_tuples(pairs, 2, n_cat.size, "pairs")
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
        object.__setattr__(self, "pairs", readonly(pairs.astype(np.int64)))
        object.__setattr__(self, "directions", readonly(directions))
        object.__setattr__(self, "n_bins", readonly(n_bins.astype(np.int64)))
        lookup = {(int(j), int(k)): p for p, (j, k) in enumerate(self.pairs)}
        object.__setattr__(self, "_lookup", lookup)
        low, high = self._extent()
        object.__setattr__(self, "_lower", readonly(low))
        object.__setattr__(self, "_width", readonly((high - low) / self.n_bins[:, None]))

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
        j, k = check_variable(j, n_vars, "j"), check_variable(k, n_vars, "k")
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
            If the pair has no projections (see :meth:`pair_index`).

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
    n_cat = readonly(check_n_categories(n_categories, owner=owner))
    n_projections = check_int_arg(n_projections, "n_projections", owner=owner, low=1)
    if n_cat.size < 2:
        raise DataValidationError(
            f"{owner} needs at least 2 variables (pairs of variables are projected); "
            f"'n_categories' has {n_cat.size}."
        )
    if pairs is None:
        pair_arr = np.column_stack(np.triu_indices(n_cat.size, k=1)).astype(np.int64)
    else:
        pair_arr = check_tuples(pairs, 2, n_cat.size, "pairs")
    if n_bins is None:
        bins = n_cat[pair_arr].max(axis=1)
    else:
        n_bins = check_int_arg(n_bins, "n_bins", owner=owner, low=1)
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
        return cls(projections, readonly(pmfs), readonly(counts.copy()), pairwise.n_samples)


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
    cooc = cooccurrence_counts(codes, offsets)

    def counts_block(j, k):
        return cooc[offsets[j] : offsets[j + 1], offsets[k] : offsets[k + 1]]

    hist = _projected(projections, counts_block)
    pairs = projections.pairs
    counts = block_sums(cooc, offsets)[pairs[:, 0], pairs[:, 1]]
    pmfs = np.divide(
        hist,
        counts[:, None, None],
        out=np.zeros(hist.shape),
        where=counts[:, None, None] > 0,
    )
    return ProjectionMarginals(
        projections, readonly(pmfs), readonly(counts), int(codes.shape[0])
    )
