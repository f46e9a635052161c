"""The Dask row of ``benchmarks/bayes_scale.py``: a Gibbs posterior of 1e6-1e7 rows.

The rows (N = 20 variables of 5 categories, rank F = 5, 80 % observed) are never held
in memory: the ``dask.array`` is built from a generating function per chunk (a
latent-class sample drawn with the per-chunk generator ``default_rng([seed, chunk])``),
and :func:`bayespmf.dask.sample_gibbs` runs with ``persist=False`` (``--persist``
keeps the chunks' patterns instead), so every sweep regenerates each chunk, draws its
classes for all chains at once and keeps only the counts. The start is a CNMF-SPA-EM
fit of the first rows of the first chunk (in memory, timed apart).

:func:`run_dask_row` runs one size in a fresh process, so that its peak resident
memory (``ru_maxrss``) is that of this row alone; the goal is flat memory: the peak
does not grow with the rows. Run alone::

    python benchmarks/_scale_dask.py --rows 1e6 1e7 --chains 2 --draws 40
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

N_VARS, N_CAT, RANK, OBSERVED = 20, 5, 5, 0.8
CHUNK_ROWS = 2**18
#: Rows of the first chunk the start is fitted on (at most one chunk).
INIT_ROWS = 50_000
#: At most this many rows in a ``quick`` run.
QUICK_ROWS = 200_000


def truth(seed: int):
    """Class weights and per-class CDFs of every variable, from ``seed``."""
    rng = np.random.default_rng([seed, 2**20])
    weights = rng.dirichlet(np.full(RANK, 5.0))
    cdfs = [
        np.cumsum(rng.dirichlet(np.ones(N_CAT), size=RANK), axis=1) for _ in range(N_VARS)
    ]
    return weights, cdfs


def make_chunk(index: int, n_rows: int, weights, cdfs, seed: int) -> np.ndarray:
    """One chunk of the sample (int8 codes, -1 missing): ``default_rng([seed, index])``.

    The rows come class by class (multinomial class sizes), which the model does not
    see: its rows are exchangeable.
    """
    rng = np.random.default_rng([seed, index])
    sizes = rng.multinomial(n_rows, weights)
    codes = np.empty((n_rows, N_VARS), dtype=np.int8)
    start = 0
    for f, size in enumerate(sizes):
        for n, cdf in enumerate(cdfs):
            u = rng.random(size)
            codes[start : start + size, n] = np.searchsorted(cdf[f], u, side="right")
        start += size
    np.minimum(codes, N_CAT - 1, out=codes)
    codes[rng.random((n_rows, N_VARS)) >= OBSERVED] = -1
    return codes


def generated(n_rows: int, seed: int, chunk_rows: int = CHUNK_ROWS):
    """The lazily generated rows as a DaskCategoricalData (nothing is drawn yet)."""
    import dask
    import dask.array as da

    from bayespmf.dask import DaskCategoricalData

    weights, cdfs = truth(seed)
    sizes = [chunk_rows] * (n_rows // chunk_rows)
    if n_rows % chunk_rows:
        sizes.append(n_rows % chunk_rows)
    blocks = [
        da.from_delayed(
            dask.delayed(make_chunk, pure=True)(i, n, weights, cdfs, seed),
            shape=(n, N_VARS),
            dtype=np.int8,
        )
        for i, n in enumerate(sizes)
    ]
    return DaskCategoricalData.from_dask_array(da.concatenate(blocks), [N_CAT] * N_VARS)


def _rss_mb() -> float:
    """Peak resident memory of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(
    n_rows: int,
    *,
    chains: int,
    draws: int,
    tune: int,
    seed: int,
    chunk_rows: int,
    persist: bool = False,
) -> dict:
    """Run one size in this process and return its figures."""
    from bayespmf.dask import sample_gibbs
    from bayespmf.data import CategoricalData
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.models import convergence_summary

    rss_imports = _rss_mb()
    ddata = generated(n_rows, seed, chunk_rows)
    weights, cdfs = truth(seed)
    t0 = time.perf_counter()
    first = make_chunk(0, min(INIT_ROWS, chunk_rows, n_rows), weights, cdfs, seed)
    point = LatentClassPMF(RANK, method="cnmf-spa-em", random_state=seed).fit(
        CategoricalData(first.astype(np.int64), N_CAT)
    )
    init_seconds = time.perf_counter() - t0
    del first
    rss_start = _rss_mb()
    t0 = time.perf_counter()
    idata = sample_gibbs(
        ddata,
        RANK,
        init=point,
        draws=draws,
        tune=tune,
        chains=chains,
        random_seed=seed,
        persist=persist,
        progressbar=False,
    )
    seconds = time.perf_counter() - t0
    table = convergence_summary(idata)["table"]
    sweeps = (draws + tune) * int(idata.posterior.attrs["n_sweeps"])
    return {
        "n_rows": n_rows,
        "chains": chains,
        "draws": draws,
        "tune": tune,
        "n_chunks": ddata.n_chunks,
        "persist": persist,
        "seconds": seconds,
        "seconds_per_sweep": seconds / sweeps,
        "init_seconds": init_seconds,
        "peak_rss_mb": _rss_mb(),
        "rss_after_imports_mb": rss_imports,
        "rss_before_sampling_mb": rss_start,
        "data_mb_if_in_memory": n_rows * N_VARS / 2**20,  # int8 codes
        "ess_bulk_min": float(table["ess_bulk_min"].min()),
        "rhat_max": float(table["r_hat_max"].max()),
    }


def run_dask_row(
    n_rows: int, *, chains: int, draws: int, seed: int, quick: bool, persist: bool = False
) -> dict:
    """One Dask row of ``bayes_scale.py``, run in a fresh process.

    ``quick`` makes it a smoke run: at most :data:`QUICK_ROWS` rows, 10 draws, tune 5
    (the returned ``n_rows`` says how many rows ran). Otherwise ``tune`` is
    ``max(10, draws // 5)`` (the chains start at a point estimate). Returns the
    figures of :func:`measure`: ``seconds`` (sampling, the start excluded; it is
    ``init_seconds``), ``peak_rss_mb`` (the whole process, Python and imports
    included; ``rss_after_imports_mb`` and ``rss_before_sampling_mb`` are the levels
    before), ``ess_bulk_min``, ``rhat_max`` and more. ``persist=True`` keeps the
    chunks' patterns in memory (no regeneration per sweep; memory then grows with the
    rows).

    Raises
    ------
    RuntimeError
        The child process failed (its last output is in the message).
    """
    n_rows = min(int(n_rows), QUICK_ROWS) if quick else int(n_rows)
    draws = min(draws, 10) if quick else draws
    tune = 5 if quick else max(10, draws // 5)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--rows",
        str(n_rows),
        "--chains",
        str(chains),
        "--draws",
        str(draws),
        "--tune",
        str(tune),
        "--seed",
        str(seed),
        "--json",
        *(["--persist"] if persist else []),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"The Dask row at {n_rows} rows failed:\n{(proc.stderr or proc.stdout)[-2000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="+", type=float, default=[1e6])
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--tune", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk-rows", type=int, default=CHUNK_ROWS)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--persist", action="store_true", help="keep the chunks")
    parser.add_argument("--json", action="store_true", help="measure here, print JSON")
    args = parser.parse_args()
    if args.json:  # the child process of run_dask_row: one size
        tune = args.tune if args.tune is not None else max(10, args.draws // 5)
        out = measure(
            int(args.rows[0]),
            chains=args.chains,
            draws=args.draws,
            tune=tune,
            seed=args.seed,
            chunk_rows=args.chunk_rows,
            persist=args.persist,
        )
        print(json.dumps(out))
        return
    print(
        f"{'rows':>12} {'chunks':>6} {'seconds':>8} {'s/sweep':>8} {'init s':>7} "
        f"{'RSS MB':>7} {'(imports)':>9} {'ESS min':>8} {'r-hat':>6}"
    )
    for rows in args.rows:
        try:
            r = run_dask_row(
                int(rows),
                chains=args.chains,
                draws=args.draws,
                seed=args.seed,
                quick=args.quick,
                persist=args.persist,
            )
        except RuntimeError as err:
            print(f"{int(rows):>12,} failed: {err}")
            continue
        print(
            f"{r['n_rows']:>12,} {r['n_chunks']:>6} {r['seconds']:>8.1f} "
            f"{r['seconds_per_sweep']:>8.2f} {r['init_seconds']:>7.1f} "
            f"{r['peak_rss_mb']:>7.0f} {r['rss_after_imports_mb']:>9.0f} "
            f"{r['ess_bulk_min']:>8.0f} {r['rhat_max']:>6.3f}"
        )


if __name__ == "__main__":
    main()
