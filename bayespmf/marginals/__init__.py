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

One module per statistic, each with its references: :mod:`~bayespmf.marginals.pairwise`
(Ibrahim & Fu), :mod:`~bayespmf.marginals.triple` (Kargas et al.),
:mod:`~bayespmf.marginals.projections` (Vora et al.); every public name is importable
from here.
"""

# The constants are importable from here as before (``X as X``: a re-export, not in
# __all__); BLOCK_ROWS is read in bayespmf.marginals.pairwise, which is where to set it.
from bayespmf.marginals._common import POPULATION_COUNT as POPULATION_COUNT
from bayespmf.marginals.pairwise import BLOCK_ROWS as BLOCK_ROWS
from bayespmf.marginals.pairwise import (
    PairwiseAccumulator,
    PairwiseMarginals,
    pairwise_marginals,
)
from bayespmf.marginals.projections import (
    ProjectionMarginals,
    RandomProjections,
    projection_marginals,
    random_projections,
)
from bayespmf.marginals.triple import TripleAccumulator, TripleMarginals, triple_marginals

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
