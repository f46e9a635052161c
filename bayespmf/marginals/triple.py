r"""Three-way marginals :math:`\Pr(x_j = a, x_k = b, x_l = c)` of chosen triples.

The input of the coupled tensor decomposition baseline (Kargas et al.), computed over
the rows in which the three variables are observed with one :func:`numpy.bincount`
per pair of leading variables; :class:`TripleAccumulator` takes the rows block by
block and merges.

References
----------
.. [1] N. Kargas, N. D. Sidiropoulos, X. Fu, "Tensors, learning, and 'Kolmogorov
   extension' for finite-alphabet random vectors", IEEE Trans. Signal Process., 2018.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from bayespmf._validation import DataValidationError, check_n_categories
from bayespmf.marginals._common import (
    POPULATION_COUNT,
    as_block,
    check_int_arg,
    check_tuples,
    check_variable,
    codes_and_chunks,
    readonly,
)
from bayespmf.pmf import check_params

__all__ = ["TripleAccumulator", "TripleMarginals", "triple_marginals"]


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
        idx = tuple(check_variable(v, n_vars, n) for v, n in zip((j, k, l), "jkl"))
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
        n_samples = check_int_arg(
            n_samples, "n_samples", owner="TripleMarginals.from_params", low=0
        )
        w, a = params.weights, params.factors
        joint, counts = {}, {}
        for j, k, l in triples:  # noqa: E741
            key = (int(j), int(k), int(l))
            joint[key] = readonly(np.einsum("f,af,bf,cf->abc", w, a[j], a[k], a[l]))
            counts[key] = n_samples
        n_cat = readonly(np.array([x.shape[0] for x in a], dtype=np.int64))
        return cls(n_cat, tuple(joint), joint, counts, n_samples)


def _default_triples(triples, n_vars: int, owner: str) -> np.ndarray:
    if triples is None:
        if n_vars < 3:
            raise DataValidationError(
                f"{owner} needs at least 3 variables for triple marginals; the data "
                f"have {n_vars}."
            )
        return np.array(list(itertools.combinations(range(n_vars), 3)), dtype=np.int64)
    return check_tuples(triples, 3, n_vars, "triples")


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
        self.n_categories = readonly(
            check_n_categories(n_categories, owner="TripleAccumulator")
        )
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
        codes = as_block(codes_block, self.n_categories, type(self).__name__)
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
            joint[key] = readonly(pmf.reshape(tuple(int(n_cat[v]) for v in key)))
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
    n_cat, chunks = codes_and_chunks(data, n_categories, chunk_size, "triple_marginals")
    acc = TripleAccumulator(n_cat, triples)
    for chunk in chunks:
        acc._update_codes(chunk)
    return acc.finalize()
