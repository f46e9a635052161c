r"""The latent-class posterior of chunked data by Gibbs sampling: counts per chunk.

The Gibbs kernel of :class:`bayespmf.models.gibbs.LatentClassGibbs` needs, per sweep,
only the class totals :math:`n_f` and the category-by-class counts :math:`m_{j,f}` of
the labels :math:`z \mid \theta, x` it draws; both are sums over rows. Over a
:class:`~bayespmf.dask.DaskCategoricalData` a sweep is therefore a map-reduce:

* every chunk draws the classes of its rows with
  :func:`bayespmf.kernels.gibbs_numba.draw_class_counts` (a chunk with at most half
  distinct rows is collapsed into unique patterns with counts, a pattern's rows getting
  multinomial class counts, as in memory) and returns only the counts, for every chain
  at once (the chunk is read once per sweep); no label is kept;
* the counts are added in a tree reduction (integers: exact in any order);
* the driver draws the Dirichlet conditionals :math:`\lambda \sim
  \mathrm{Dir}(\alpha_\lambda + n)`, :math:`A_n(f, :) \sim \mathrm{Dir}(\alpha_A +
  m_{n,f,:})` (:func:`~bayespmf.kernels.gibbs_numba.draw_conjugate`).

Only arrays of size ``chains x (sum I_n) x F`` travel; nothing of the size of the rows
reaches the driver. Chunk ``b`` of chain ``c`` at sweep ``t`` draws from the stream
``SeedSequence(seed, spawn_key=(1, c, t, b))`` and chain ``c``'s Dirichlet draws come
from ``SeedSequence(seed, spawn_key=(0, c))``, so a seed and a chunking give the same
draws whatever the scheduler, its threads or the order the tasks run in.

Requires the ``dask`` extra: ``pip install "bayespmf[dask]"``.
"""

from __future__ import annotations

import functools
import json
import numbers
import time
from typing import NamedTuple

import numpy as np
import xarray as xr

from bayespmf._progress import progress_bar
from bayespmf._validation import DataValidationError, as_codes, check_float, check_int
from bayespmf.dask._data import (
    SPLIT_EVERY,
    DaskCategoricalData,
    compute_on,
    persist_on,
    tree_reduce,
)
from bayespmf.dask.em import fit_latent_class
from bayespmf.data import CategoricalData
from bayespmf.kernels.gibbs_numba import draw_class_counts, draw_conjugate
from bayespmf.models import (
    align_labels,
    check_sampler_args,
    initvals,
    latent_class_model,
)
from bayespmf.models.gibbs import (
    DEFAULT_OVERRELAX,
    PLAIN_TUNE_SWEEPS,
    check_overrelax,
)
from bayespmf.models.latent_class import factor_var_name
from bayespmf.pmf import observed_csr, offsets_of

__all__ = ["DEFAULT_DASK_SWEEPS", "sample_gibbs"]

#: Gibbs sweeps per recorded draw of :func:`sample_gibbs`. In memory
#: (:data:`bayespmf.models.gibbs.DEFAULT_SWEEPS` = 8) several sweeps per draw spread
#: ``pm.sample``'s per-draw cost; here every sweep is a pass over the data and there is
#: no per-draw cost to spread, so every sweep is recorded.
DEFAULT_DASK_SWEEPS = 1

# the spawn keys of the random streams (see the module docstring)
_DRIVER_STREAM, _CHUNK_STREAM, _JITTER_STREAM, _INIT_STREAM = 0, 1, 2, 3
_OWNER = "sample_gibbs"


class _Chunk(NamedTuple):
    """A chunk's rows as unique patterns with counts, in the sweep's CSR layout."""

    indptr: np.ndarray  # (patterns + 1,) int32 where the entries fit, else int64
    indices: np.ndarray  # flat indices offsets[n] + x_n, the smallest unsigned dtype
    row_count: np.ndarray  # (patterns,) int64: rows each pattern stands for
    n_rows: int  # rows with at least one observed entry
    observed: np.ndarray  # (N,) observed entries per variable


def _patterns(codes: np.ndarray, n_cat: np.ndarray):
    """Rows with at least one observed entry, collapsed into unique patterns with counts.

    When the codes fit one int64 key per row (mixed radix ``I_n + 1``) the keys are
    sorted, far cheaper than ``np.unique(axis=0)``; when more than half the rows are
    distinct, collapsing would save less than it costs and the rows are kept as they
    are (each with count 1). Either way the posterior is the same (the draws differ).
    """
    radix = n_cat.astype(np.int64) + 1
    if float(np.prod(radix.astype(np.float64))) >= 2.0**62:
        patterns, counts = np.unique(codes, axis=0, return_counts=True)
        keep = (patterns >= 0).any(axis=1)
        return patterns[keep], counts[keep].astype(np.int64)
    place = np.concatenate([np.cumprod(radix[::-1])[::-1][1:], [1]])
    keys = np.zeros(codes.shape[0], dtype=np.int64)
    for n in range(codes.shape[1]):  # a loop over the variables, not the rows
        keys += (codes[:, n] + 1) * place[n]
    unique, counts = np.unique(keys, return_counts=True)
    if unique.size and unique[0] == 0:  # every entry missing: no information
        unique, counts = unique[1:], counts[1:]
    if 2 * unique.size > codes.shape[0]:  # mostly distinct rows: keep them
        observed = keys != 0
        rows = codes if observed.all() else codes[observed]
        return rows, np.ones(rows.shape[0], dtype=np.int64)
    patterns = (unique[:, None] // place[None, :]) % radix[None, :] - 1
    return patterns, counts.astype(np.int64)


def _prepare(block, n_cat) -> _Chunk:
    """Validate one chunk and collapse it into patterns (CSR layout, compact dtypes)."""
    block = np.asarray(block)
    n_vars = n_cat.size
    if block.ndim == 2 and block.shape[0] == 0:
        zero = np.zeros(1, dtype=np.int64)
        return _Chunk(zero, zero[:0], zero[:0], 0, np.zeros(n_vars, dtype=np.int64))
    codes, _ = as_codes(
        block, n_cat, name="codes", allow_empty_rows=True, allow_empty_columns=True
    )
    patterns, counts = _patterns(codes, n_cat)
    indptr, indices = observed_csr(patterns, n_cat)
    size = int(n_cat.sum())
    small = np.uint16 if size <= np.iinfo(np.uint16).max else np.uint32
    wide = np.int32 if indptr[-1] <= np.iinfo(np.int32).max else np.int64
    return _Chunk(
        indptr.astype(wide),
        indices.astype(small),
        counts,
        int(counts.sum()),
        (codes >= 0).sum(axis=0),
    )


def _summary(chunk: _Chunk):
    return chunk.n_rows, chunk.observed


def _add(*parts):
    """Sum tuples of arrays element by element (a node of the tree reduction)."""
    return tuple(functools.reduce(np.add, items) for items in zip(*parts, strict=True))


def _chunk_counts(chunk: _Chunk, log_params, entropy, sweep: int, index: int, threads):
    """Class totals (C, F) and category-by-class counts (C, P, F) of one chunk, per chain.

    Chain ``c`` draws from ``SeedSequence(entropy, spawn_key=(1, c, sweep, index))``.
    """
    log_w, log_a = log_params
    n_chains, n_components = log_w.shape
    totals = np.zeros((n_chains, n_components), dtype=np.int64)
    counts = np.zeros(log_a.shape, dtype=np.int64)
    if chunk.row_count.size == 0:
        return totals, counts
    # one int64 copy of the layout per task, shared by the chains
    indptr = np.ascontiguousarray(chunk.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(chunk.indices, dtype=np.int64)
    for c in range(n_chains):
        seq = np.random.SeedSequence(entropy, spawn_key=(_CHUNK_STREAM, c, sweep, index))
        totals[c], counts[c] = draw_class_counts(
            log_w[c],
            log_a[c],
            indptr,
            indices,
            chunk.row_count,
            np.random.default_rng(seq),
            threads=threads,
        )
    return totals, counts


def _seed_entropy(random_seed) -> int:
    """The root entropy of every stream, from ``random_seed``."""
    if random_seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(random_seed, np.random.Generator):
        return int(random_seed.integers(2**63))
    if isinstance(random_seed, np.random.SeedSequence):
        return int(random_seed.generate_state(1, np.uint64)[0])
    if isinstance(random_seed, bool) or not isinstance(random_seed, numbers.Integral):
        raise DataValidationError(
            f"The 'random_seed' parameter of {_OWNER} must be None, a non-negative int, "
            f"a numpy Generator or a SeedSequence; got {random_seed!r}. Pass e.g. "
            "random_seed=0."
        )
    return check_int(random_seed, "random_seed", owner=_OWNER, low=0)


def _check_n_sweeps(n_sweeps) -> int:
    if n_sweeps is None:
        return DEFAULT_DASK_SWEEPS
    if (
        isinstance(n_sweeps, bool)
        or not isinstance(n_sweeps, numbers.Integral)
        or n_sweeps < 1
    ):
        raise DataValidationError(
            f"The 'n_sweeps' parameter of {_OWNER} must be a positive integer (Gibbs "
            f"sweeps per recorded draw); got {n_sweeps!r}. Pass e.g. n_sweeps=1."
        )
    return int(n_sweeps)


def _stand_in(ddata: DaskCategoricalData) -> CategoricalData:
    """One row of code 0 with ``ddata``'s variables, names and labels (no data read)."""
    return CategoricalData(
        np.zeros((1, ddata.n_variables), dtype=np.int64),
        ddata.n_categories,
        ddata.names,
        ddata.categories,
    )


def _posterior(ws, a_stacked, ddata, n_components, offsets) -> xr.Dataset:
    """The draws as ``latent_class_model``'s variables, dims and coordinates."""
    chains, draws = ws.shape[:2]
    coords = {
        "chain": np.arange(chains),
        "draw": np.arange(draws),
        "class": np.arange(n_components),
    }
    data_vars = {"weights": (("chain", "draw", "class"), ws)}
    for n, (name, labels) in enumerate(zip(ddata.names, ddata.categories, strict=True)):
        dim = f"{name}_category"
        coords[dim] = list(labels)
        block = a_stacked[:, :, offsets[n] : offsets[n + 1], :].transpose(0, 1, 3, 2)
        data_vars[factor_var_name(name)] = (("chain", "draw", "class", dim), block)
    return xr.Dataset(data_vars, coords=coords)


def sample_gibbs(
    ddata: DaskCategoricalData,
    n_components: int,
    *,
    init=None,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    n_sweeps: int | None = None,
    overrelax: float = DEFAULT_OVERRELAX,
    random_seed=None,
    weights_prior: float = 1.0,
    factor_prior: float = 1.0,
    align: bool = True,
    progressbar: bool = True,
    threads: int | None = None,
    client=None,
    split_every: int = SPLIT_EVERY,
    persist: bool = True,
):
    r"""Draw the latent-class posterior of chunked data by Gibbs sampling, in flat memory.

    The posterior of :func:`bayespmf.models.latent_class_model` (the same priors, the
    same Gibbs kernel as ``sample(model, method="gibbs")``) for a
    :class:`~bayespmf.dask.DaskCategoricalData`: per sweep every chunk draws its rows'
    classes and returns only class and category-by-class counts, the counts are
    tree-reduced and the Dirichlet draws are made on the driver (module docstring).
    The draws are the same for a fixed ``random_seed`` and chunking, whatever the
    scheduler. Memory on the driver is that of the draws, never of the rows.

    Parameters
    ----------
    ddata : DaskCategoricalData
    n_components : int
        Number of classes F.
    init : LatentClassPMF, (weights, factors) or dict, optional
        Point estimate every chain starts at (jittered per chain on the log scale of
        the simplex, as :func:`bayespmf.models.sample` does) and the reference of the
        label alignment. A fitted estimator is matched to ``ddata``'s variables by
        name. Default: :func:`bayespmf.dask.fit_latent_class` of ``ddata`` (CNMF-SPA
        followed by EM, distributed), seeded from ``random_seed``.
    draws, tune, chains : int, default 1000, 1000, 4
        Recorded draws per chain, draws discarded first as burn-in, and chains. The
        chains share the passes over the data: a sweep reads each chunk once.
    n_sweeps : int, optional
        Gibbs sweeps per recorded draw (default :data:`DEFAULT_DASK_SWEEPS` = 1).
    overrelax : float, default DEFAULT_OVERRELAX
        Strength in ``[0, 1)`` of the overrelaxed Dirichlet updates, as
        :class:`~bayespmf.models.LatentClassGibbs` takes it (0: fresh draws; the
        first sweeps of the burn-in draw afresh, as there).
    random_seed : None, int, numpy.random.Generator or numpy.random.SeedSequence
        Seeds every stream (starts' jitter, default point estimate, chunks, driver).
    weights_prior, factor_prior : float, default 1.0
        Symmetric Dirichlet concentrations of :math:`\lambda` and of every class's PMF
        of every variable, as :func:`~bayespmf.models.latent_class_model` takes them.
    align : bool, default True
        Relabel the classes draw by draw against ``init``
        (:func:`bayespmf.models.align_labels`); the raw draws go to
        ``unaligned_posterior``.
    progressbar : bool, default True
    threads : int, optional
        Threads over blocks of rows inside each chunk task (default: the CPUs this
        process may use). The draws do not depend on it.
    client : dask.distributed.Client, optional
        Scheduler; Dask's current default when omitted.
    split_every : int, default SPLIT_EVERY
        Fan-in of the tree reduction of the counts (>= 2).
    persist : bool, default True
        Keep the chunks' patterns in (distributed) memory (about 2 bytes per observed
        entry of a distinct row plus 12 per distinct row). With ``False`` every sweep
        recomputes the chunks from ``ddata``'s graph (re-reads files or regenerates
        them), so memory stays at a few chunks whatever the number of rows.

    Returns
    -------
    xarray.DataTree
        ``posterior`` with ``weights`` (dims ``chain, draw, class``) and ``A_<name>``
        (``chain, draw, class, <name>_category``), the variables, dims and coordinates
        of ``latent_class_model``'s draws; ``unaligned_posterior`` and
        ``sample_stats["class_permutation"]`` when aligned; ``sample_stats["sweep_time"]``
        (seconds per recorded draw, all chains). ``posterior.attrs`` record
        ``sampling_method`` ("gibbs"), ``sampling_time``, ``tuning_steps``,
        ``n_sweeps``, ``n_chunks`` and ``bayespmf_variables``, so
        :func:`bayespmf.models.convergence_summary` and
        :func:`bayespmf.models.posterior_params` read it. There is no
        ``observed_data`` or ``log_likelihood`` group: both have the size of the rows.

    Notes
    -----
    A sweep costs one Dask graph (its scheduling) plus one pass over the
    chunks, so data that fit in memory are sampled faster by
    ``bayespmf.models.sample(..., method="gibbs")``. ``persist=True`` makes the sweeps
    several times faster where the chunks fit in the cluster's memory (the same draws);
    the peak memory is flat in the rows (:ref:`bench-dask-gibbs`).

    Raises
    ------
    DataValidationError
        ``ddata`` not a DaskCategoricalData, bad ``n_components``, ``draws``, ``tune``,
        ``chains``, ``n_sweeps``, priors or ``random_seed``, an ``init`` that does not
        fit the data, a chunk with invalid codes, a variable never observed.

    Examples
    --------
    >>> import dask
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(400, 3, n_components=2, n_variables=4, random_state=0)
    >>> ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=150)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     idata = sample_gibbs(ddata, 2, draws=50, tune=20, chains=2, random_seed=0,
    ...                          progressbar=False)
    >>> idata.posterior["A_x0"].dims
    ('chain', 'draw', 'class', 'x0_category')
    >>> idata.posterior["weights"].shape
    (2, 50, 2)
    """
    from dask import delayed

    if not isinstance(ddata, DaskCategoricalData):
        raise DataValidationError(
            f"The 'ddata' argument of {_OWNER} must be a DaskCategoricalData; got "
            f"{type(ddata).__name__}. Build one with DaskCategoricalData.from_dask_array "
            "or from_categorical_data, or sample in-memory data with "
            "bayespmf.models.sample(..., method='gibbs')."
        )
    n_components = check_int(n_components, "n_components", owner=_OWNER, low=1)
    draws, tune, chains = check_sampler_args("gibbs", draws, tune, chains, _OWNER)
    n_sweeps = _check_n_sweeps(n_sweeps)
    overrelax = check_overrelax(overrelax)
    w_prior = check_float(
        weights_prior, "weights_prior", owner=_OWNER, low=0.0, low_open=True
    )
    a_prior = check_float(
        factor_prior, "factor_prior", owner=_OWNER, low=0.0, low_open=True
    )
    split_every = check_int(split_every, "split_every", owner=_OWNER, low=2)
    if threads is not None:
        threads = check_int(threads, "threads", owner=_OWNER, low=1)
    entropy = _seed_entropy(random_seed)
    stand_in = _stand_in(ddata)
    # the stand-in model binds ``init`` to the variables by name and jitters the starts
    # exactly as bayespmf.models.sample does; it holds one row, never the data
    stand_in_model = latent_class_model(stand_in, n_components)
    if init is not None:  # refuse a bad start before any pass over the data
        initvals(stand_in_model, init)

    n_cat = ddata.n_categories
    offsets = offsets_of(n_cat)
    chunks = [delayed(_prepare, pure=True)(b, n_cat) for b in ddata.blocks()]
    if persist:
        chunks = persist_on(chunks, client)
    n_rows, observed = compute_on(
        tree_reduce([delayed(_summary, pure=True)(c) for c in chunks], _add, split_every),
        client,
    )
    never = np.flatnonzero(np.asarray(observed) == 0)
    if never.size:
        raise DataValidationError(
            f"Variable(s) {[ddata.names[j] for j in never]} of 'ddata' are never observed "
            "(every entry is missing); their posterior is the prior. Drop those columns."
        )
    if init is None:
        init = fit_latent_class(
            ddata,
            n_components,
            random_state=np.random.default_rng(
                np.random.SeedSequence(entropy, spawn_key=(_INIT_STREAM,))
            ),
            client=client,
            split_every=split_every,
            persist=persist,
        )
    jitter_rng = np.random.default_rng(
        np.random.SeedSequence(entropy, spawn_key=(_JITTER_STREAM,))
    )
    starts = initvals(stand_in_model, init, chains=chains, random_seed=jitter_rng)
    log_w = np.log(np.stack([s["weights"] for s in starts]))
    log_a = np.log(
        np.stack(
            [
                np.concatenate([s[factor_var_name(n)].T for n in ddata.names], axis=0)
                for s in starts
            ]
        )
    )
    rngs = [
        np.random.default_rng(
            np.random.SeedSequence(entropy, spawn_key=(_DRIVER_STREAM, c))
        )
        for c in range(chains)
    ]
    a_alpha = np.full((int(offsets[-1]), n_components), a_prior)
    ws = np.empty((chains, draws, n_components))
    a_stacked = np.empty((chains, draws, int(offsets[-1]), n_components))
    sweep_time = np.empty((chains, draws))
    t0 = time.perf_counter()
    sweep = 0
    with progress_bar(tune + draws, "Gibbs (Dask)", progressbar) as bar:
        for d in range(tune + draws):
            t_draw = time.perf_counter()
            for _ in range(n_sweeps):
                params = delayed((log_w, log_a), pure=True)
                parts = [
                    delayed(_chunk_counts, pure=True)(c, params, entropy, sweep, b, threads)
                    for b, c in enumerate(chunks)
                ]
                totals, counts = compute_on(tree_reduce(parts, _add, split_every), client)
                # fresh draws for the first sweeps of the burn-in (LatentClassGibbs)
                strength = (
                    overrelax if sweep >= min(tune * n_sweeps, PLAIN_TUNE_SWEEPS) else 0.0
                )
                for c in range(chains):  # the conjugate draws: tiny, on the driver
                    log_w[c], log_a[c] = draw_conjugate(
                        w_prior + totals[c],
                        a_alpha + counts[c],
                        offsets,
                        rngs[c],
                        previous=(log_w[c], log_a[c]) if strength else None,
                        strength=strength,
                    )
                sweep += 1
            if d >= tune:
                ws[:, d - tune] = np.exp(log_w)
                a_stacked[:, d - tune] = np.exp(log_a)
                sweep_time[:, d - tune] = time.perf_counter() - t_draw
            bar.update()
    elapsed = time.perf_counter() - t0
    post = _posterior(ws, a_stacked, ddata, n_components, offsets)
    post.attrs.update(
        sampling_method="gibbs",
        sampling_time=elapsed,
        tuning_steps=tune,
        n_sweeps=n_sweeps,
        n_chunks=len(chunks),
        n_rows=int(n_rows),
        bayespmf_variables=json.dumps(list(ddata.names)),
    )
    stats = xr.Dataset(
        {"sweep_time": (("chain", "draw"), sweep_time)},
        coords={"chain": post["chain"].values, "draw": post["draw"].values},
    )
    idata = xr.DataTree.from_dict({"posterior": post, "sample_stats": stats})
    if align:
        idata = align_labels(idata, init, stand_in)
    return idata
