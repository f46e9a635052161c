"""Samplers of data held outside memory, registered by type.

:func:`bayespmf.models.sample` hands a data set of a registered type to its sampler
(``bayespmf.dask`` registers ``DaskCategoricalData``), so that ``bayespmf.models``
never imports dask, and ``bayespmf.dask``, which builds on ``bayespmf.models``, is not
imported back.
"""

from __future__ import annotations

from collections.abc import Callable

#: Data type -> its sampler, ``sampler(data, n_components, *, init, draws, tune,
#: chains, random_seed, align, progressbar, **options)`` returning the draws as
#: :func:`bayespmf.models.sample` does.
CHUNKED_SAMPLERS: dict[type, Callable] = {}


def register_chunked_sampler(data_type: type, sampler: Callable) -> None:
    """Let :func:`bayespmf.models.sample` hand data of ``data_type`` to ``sampler``."""
    CHUNKED_SAMPLERS[data_type] = sampler


def chunked_sampler(data) -> Callable | None:
    """The sampler registered for ``data``'s type, or None."""
    for data_type, sampler in CHUNKED_SAMPLERS.items():
        if isinstance(data, data_type):
            return sampler
    return None
