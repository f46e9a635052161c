"""Time and peak memory of the Dask map-reduce paths for S = 1e5 ... 1e7 rows.

The rows are never held whole in memory by the Dask path: the ``dask.array`` is built
from a generating function per chunk (a latent-class sample drawn with a per-chunk
seeded generator ``default_rng([seed, chunk])``), so a chunk exists only while a task
uses it. Per size the script measures

* ``marginals``: :func:`bayespmf.dask.pairwise_marginals` (generate + count, streaming);
* ``em build``: :class:`bayespmf.dask.DaskEMKernel` with ``persist=True`` (generate,
  validate, keep the chunks' CSR layout in memory);
* ``em step``: the mean of ``--em-steps`` EM steps on the persisted chunks;
* ``em step stream``: one EM step with ``persist=False`` (every step regenerates the
  chunks; memory bounded by a few chunks);

and, where the codes fit (``--in-memory-max``), the same on the in-memory path
(``bayespmf.marginals.pairwise_marginals`` and ``bayespmf.kernels.em.EMKernel``) after
materializing the codes. Peak memory is ``tracemalloc``'s peak of each phase (NumPy
buffers included), the growth per row is peak / S.

Usage::

    python benchmarks/dask_scaling.py --sizes 1e5,1e6,1e7
"""

import argparse
import time
import tracemalloc
import warnings

import dask
import dask.array as da
import numpy as np
from _common import parse_args_quick

from bayespmf.dask import DaskCategoricalData, DaskEMKernel, pairwise_marginals
from bayespmf.kernels.em import build_em_kernel, init_random
from bayespmf.marginals import pairwise_marginals as pairwise_in_memory

N_VARS, N_CAT, RANK, OBSERVED = 15, 10, 10, 0.5
SEED = 20261122


def model(seed=SEED):
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.ones(RANK))
    cdfs = [
        np.cumsum(rng.dirichlet(np.ones(N_CAT), size=RANK), axis=1) for _ in range(N_VARS)
    ]
    return weights, cdfs


def make_chunk(index, n_rows, weights, cdfs, seed=SEED):
    """One chunk of a latent-class sample, seeded per chunk (reproducible, parallel)."""
    rng = np.random.default_rng([seed, index])
    z = rng.choice(RANK, size=n_rows, p=weights)
    codes = np.empty((n_rows, N_VARS), dtype=np.int64)
    for n, cdf in enumerate(cdfs):
        u = rng.random(n_rows)
        codes[:, n] = (u[:, None] > cdf[z]).sum(axis=1)
    np.minimum(codes, N_CAT - 1, out=codes)
    codes[rng.random((n_rows, N_VARS)) >= OBSERVED] = -1
    return codes


def generated(n_samples, chunk_rows):
    weights, cdfs = model()
    sizes = [chunk_rows] * (n_samples // chunk_rows)
    if n_samples % chunk_rows:
        sizes.append(n_samples % chunk_rows)
    blocks = [
        da.from_delayed(
            dask.delayed(make_chunk, pure=True)(i, n, weights, cdfs),
            shape=(n, N_VARS),
            dtype=np.int64,
        )
        for i, n in enumerate(sizes)
    ]
    return DaskCategoricalData.from_dask_array(da.concatenate(blocks), [N_CAT] * N_VARS)


class Phase:
    """Time and tracemalloc peak of a block of code."""

    def __enter__(self):
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.peak = tracemalloc.get_traced_memory()[1] - self.base


def row(size, path, phase, p: Phase, per=1):
    mib = p.peak / 2**20
    print(
        f"| {size:>10,} | {path:<9} | {phase:<15} | {p.seconds / per:9.3f} | "
        f"{1e6 * p.seconds / per / size:9.3f} | {mib:10.1f} | {p.peak / size:9.1f} |",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7")
    parser.add_argument("--chunk-rows", type=int, default=250_000)
    parser.add_argument("--em-steps", type=int, default=3)
    parser.add_argument("--in-memory-max", type=float, default=1e7)
    parser.add_argument("--scheduler", default="threads")
    args = parse_args_quick(parser, None, sizes="2e4", chunk_rows=5000, em_steps=1)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    warnings.filterwarnings("ignore", message=".*BLAS.*")

    start = init_random([N_CAT] * N_VARS, RANK, random_state=0)
    w0, a0 = start.weights, np.concatenate(start.factors)
    print(
        f"N={N_VARS} variables, I={N_CAT}, F={RANK}, {OBSERVED:.0%} observed, "
        f"chunks of {args.chunk_rows:,} rows, dask scheduler={args.scheduler!r}"
    )
    print(
        "| S          | path      | phase           | seconds   | s / 1e6 rows | "
        "peak MiB   | bytes/row |"
    )
    print("|---|---|---|---|---|---|---|")
    tracemalloc.start()
    # warm the compile caches so that timings are of the steady state
    tiny = generated(1000, 500)
    with dask.config.set(scheduler="synchronous"):
        DaskEMKernel(tiny, RANK).step(w0, a0)
    build_em_kernel(tiny.compute(), n_components=RANK).step(w0, a0)

    with dask.config.set(scheduler=args.scheduler):
        for size in sizes:
            ddata = generated(size, args.chunk_rows)
            with Phase() as p:
                marg = pairwise_marginals(ddata)
            row(size, "dask", "marginals", p)
            with Phase() as p:
                kernel = DaskEMKernel(ddata, RANK, persist=True)
            row(size, "dask", "em build", p)
            with Phase() as p:
                for _ in range(args.em_steps):
                    _, _, ll_dask = kernel.step(w0, a0)
            row(size, "dask", "em step", p, per=args.em_steps)
            del kernel
            with Phase() as p:
                DaskEMKernel(ddata, RANK, persist=False).step(w0, a0)
            row(size, "dask", "em step stream", p)
            if size <= args.in_memory_max:
                with Phase() as p:
                    codes = ddata.compute()
                row(size, "in-memory", "materialize", p)
                with Phase() as p:
                    ref = pairwise_in_memory(codes)
                row(size, "in-memory", "marginals", p)
                assert np.array_equal(ref.joint, marg.joint)
                with Phase() as p:
                    mem_kernel = build_em_kernel(codes, n_components=RANK)
                row(size, "in-memory", "em build", p)
                with Phase() as p:
                    for _ in range(args.em_steps):
                        _, _, ll_mem = mem_kernel.step(w0, a0)
                row(size, "in-memory", "em step", p, per=args.em_steps)
                rel = abs(ll_dask - ll_mem) / abs(ll_mem)
                print(f"|            | check     | loglik rel diff {rel:.1e} | | | | |")
                del codes, mem_kernel, ref
    tracemalloc.stop()


if __name__ == "__main__":
    main()
