"""Old home of :func:`bayespmf.dask.gibbs.sample_gibbs`, kept so its imports still work.

The Gibbs posterior of chunked data now lives in :mod:`bayespmf.dask.gibbs` (also
importable as ``bayespmf.dask.sample_gibbs``).
"""

from bayespmf.dask.gibbs import DEFAULT_SWEEPS, sample_gibbs

__all__ = ["DEFAULT_SWEEPS", "sample_gibbs"]
