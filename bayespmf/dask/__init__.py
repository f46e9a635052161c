r"""Out-of-core and distributed latent-class estimation with Dask.

Data too large for one machine's memory live in a :class:`DaskCategoricalData`: a
chunked ``dask.array`` of integer codes (``-1`` missing), row chunks only. Everything
here is a map-reduce over the row chunks:

* :func:`pairwise_marginals` and :func:`triple_marginals` run one
  :class:`~bayespmf.marginals.PairwiseAccumulator` (``TripleAccumulator``) per chunk and
  merge them in a tree reduction (the accumulators hold integer counts, so the result
  is *exactly* that of the in-memory functions);
* :class:`DaskEMKernel` applies the compiled E-step Op
  :class:`~bayespmf.kernels.em.EStepStats` to every chunk with the current parameters
  broadcast, sums the expected counts ``K``, class totals ``C`` and log-likelihood in a
  tree reduction and does the (tiny) M-step on the client; :func:`fit_em_dask` drives it
  like :func:`~bayespmf.fit.fit_em`, optionally with SQUAREM-PMF, and
  :func:`fit_latent_class` runs any method of
  :class:`~bayespmf.estimators.LatentClassPMF` this way;
* :func:`sample_gibbs` draws the latent-class posterior by Gibbs sweeps, each sweep a
  pass over the chunks that returns only class counts.

One module per idea: :mod:`bayespmf.dask._data` (the container and the map-reduce
helpers), :mod:`bayespmf.dask.marginals`, :mod:`bayespmf.dask.em` (the EM kernel,
:func:`fit_em_dask`, :func:`fit_latent_class`) and :mod:`bayespmf.dask.gibbs`
(:func:`sample_gibbs`, loaded on first access since it imports PyMC).

Any Dask scheduler works: the synchronous or threaded one, or a
``dask.distributed.Client`` (the default client when one exists, or the one passed as
``client``).

The EM statistics of disjoint row sets add, so only arrays of the size of the
parameters travel between workers and client (:mod:`bayespmf.dask.em`, Notes).

Requires the ``dask`` extra: ``pip install "bayespmf[dask]"``.

Examples
--------
>>> import dask
>>> from bayespmf.datasets import make_latent_class
>>> data, _ = make_latent_class(600, 3, n_components=2, n_variables=4, observed_prob=0.7,
...                             random_state=0)
>>> ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=200)
>>> ddata
DaskCategoricalData(n_samples=600, n_variables=4, n_categories=[3, 3, 3, 3], n_chunks=3)
>>> with dask.config.set(scheduler="synchronous"):
...     params, info = fit_em_dask(
...         ddata, n_components=2, accelerate="squarem", random_state=0
...     )
>>> info.converged
True
"""

from __future__ import annotations

from bayespmf._chunked import register_chunked_sampler
from bayespmf.dask._data import DEFAULT_CHUNK_ROWS, SPLIT_EVERY, DaskCategoricalData
from bayespmf.dask.em import DaskEMKernel, DaskLatentClassFit, fit_em_dask, fit_latent_class
from bayespmf.dask.marginals import pairwise_marginals, triple_marginals

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "SPLIT_EVERY",
    "DaskCategoricalData",
    "DaskEMKernel",
    "DaskLatentClassFit",
    "fit_em_dask",
    "fit_latent_class",
    "pairwise_marginals",
    "sample_gibbs",
    "triple_marginals",
]


def _sample_gibbs(*args, **kwargs):
    from bayespmf.dask.gibbs import sample_gibbs

    return sample_gibbs(*args, **kwargs)


# bayespmf.models.sample(ddata, n_components=..., method="gibbs") hands chunked data to
# sample_gibbs (imported then, not now)
register_chunked_sampler(DaskCategoricalData, _sample_gibbs)


def __getattr__(name):
    # sample_gibbs imports bayespmf.models (PyMC): load it on first access only, so
    # ``import bayespmf.dask`` stays as light as the EM and marginals need
    if name == "sample_gibbs":
        from bayespmf.dask.gibbs import sample_gibbs

        return sample_gibbs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"sample_gibbs"})
