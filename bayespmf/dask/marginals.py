"""Pairwise and three-way marginals of chunked data, by map-reduce over the chunks.

:func:`pairwise_marginals` and :func:`triple_marginals` run one
:class:`~bayespmf.marginals.PairwiseAccumulator` (``TripleAccumulator``) per chunk and
merge them in a tree reduction (the accumulators hold integer counts, so the result
is *exactly* that of the in-memory functions).

Requires the ``dask`` extra: ``pip install "bayespmf[dask]"``.
"""

from __future__ import annotations

import functools

import numpy as np

from bayespmf.dask._data import (
    SPLIT_EVERY,
    DaskCategoricalData,
    check_ddata,
    check_split_every,
    compute_on,
    tree_reduce,
)
from bayespmf.marginals import (
    PairwiseAccumulator,
    PairwiseMarginals,
    TripleAccumulator,
    TripleMarginals,
)

__all__ = ["pairwise_marginals", "triple_marginals"]


def _pairwise_chunk(block, n_cat) -> PairwiseAccumulator:
    return PairwiseAccumulator(n_cat).update(np.asarray(block))


def _triple_chunk(block, n_cat, triples) -> TripleAccumulator:
    return TripleAccumulator(n_cat, triples).update(np.asarray(block))


def _merge_all(*accs):
    return functools.reduce(lambda a, b: a.merge(b), accs)


def pairwise_marginals(
    ddata: DaskCategoricalData, *, split_every: int = SPLIT_EVERY, client=None
) -> PairwiseMarginals:
    """Empirical pairwise marginals of chunked data, by map-reduce over the chunks.

    Parameters
    ----------
    ddata : DaskCategoricalData
    split_every : int, default SPLIT_EVERY
        Fan-in of the tree reduction (>= 2).
    client : dask.distributed.Client, optional
        Scheduler to use; Dask's current default when omitted.

    Returns
    -------
    PairwiseMarginals
        Exactly :func:`bayespmf.marginals.pairwise_marginals` of the computed data
        (the chunks' integer counts are added).

    Raises
    ------
    DataValidationError
        ``ddata`` of another type, or a chunk with invalid codes.

    Examples
    --------
    >>> import dask, dask.array as da
    >>> x = da.from_array(np.array([[0, 1], [1, 1], [1, 0], [-1, 0]]), chunks=(2, 2))
    >>> d = DaskCategoricalData.from_dask_array(x, n_categories=[2, 2])
    >>> pairwise_marginals(d, client=None).counts
    array([[3, 3],
           [3, 4]])
    """
    from dask import delayed

    ddata = check_ddata(ddata, "pairwise_marginals")
    split_every = check_split_every(split_every, "pairwise_marginals")
    n_cat = ddata.n_categories
    parts = [delayed(_pairwise_chunk, pure=True)(b, n_cat) for b in ddata.blocks()]
    return compute_on(tree_reduce(parts, _merge_all, split_every), client).finalize()


def triple_marginals(
    ddata: DaskCategoricalData,
    triples=None,
    *,
    split_every: int = SPLIT_EVERY,
    client=None,
) -> TripleMarginals:
    """Empirical three-way marginals of chunked data, by map-reduce over the chunks.

    Same result as :func:`bayespmf.marginals.triple_marginals` (exactly).

    Parameters
    ----------
    ddata : DaskCategoricalData
    triples : sequence of (j, k, l), optional
        All ``N choose 3`` triples by default.
    split_every : int, default SPLIT_EVERY
    client : dask.distributed.Client, optional

    Returns
    -------
    TripleMarginals

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.from_array(np.array([[0, 1, 1], [1, 1, -1], [0, 1, 1]]), chunks=(2, 3))
    >>> d = DaskCategoricalData.from_dask_array(x, n_categories=2)
    >>> triple_marginals(d).counts
    {(0, 1, 2): 2}
    """
    from dask import delayed

    ddata = check_ddata(ddata, "triple_marginals")
    split_every = check_split_every(split_every, "triple_marginals")
    n_cat = ddata.n_categories
    # validate the triples once on the client, before any chunk is read
    triples = TripleAccumulator(n_cat, triples).triples
    parts = [delayed(_triple_chunk, pure=True)(b, n_cat, triples) for b in ddata.blocks()]
    return compute_on(tree_reduce(parts, _merge_all, split_every), client).finalize()
