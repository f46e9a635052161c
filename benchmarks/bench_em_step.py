"""Per-iteration time of the compiled EM step next to the SciPy sparse reference step.

Default setting (the requirement in bayespmf/kernels/em.py): S = 1e5 rows, N = 15
variables, I_n = 10 categories, rank F = 10, half the entries missing. Both steps run
in the same process on the same data and parameters; the SciPy step is timed on a
prebuilt one-hot design (its setup is not counted). Prints compile time, the median
over ``--repeats`` calls after ``--warmup`` calls, and the ratio compiled / SciPy
(the requirement is <= 1.0).

    python benchmarks/bench_em_step.py [--n-samples 100000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def make_data(n_samples, n_variables, n_categories, missing, seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_categories, size=(n_samples, n_variables))
    codes[rng.random(codes.shape) < missing] = -1
    return codes


def median_ms(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--n-variables", type=int, default=15)
    parser.add_argument("--n-categories", type=int, default=10)
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument("--missing", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.repeats < 10:
        parser.error("--repeats must be >= 10")

    warnings.filterwarnings("ignore", message="Using NumPy C-API based implementation")
    warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
    from bayespmf.kernels.em import build_em_kernel, init_random, sparse_em_step
    from bayespmf.pmf import offsets_of, one_hot_design

    codes = make_data(
        args.n_samples, args.n_variables, args.n_categories, args.missing, args.seed
    )
    n_cat = np.full(args.n_variables, args.n_categories)
    start = init_random(n_cat, args.rank, random_state=args.seed)
    w, a = start.weights, np.concatenate(start.factors)

    t = time.perf_counter()
    kernel = build_em_kernel(codes, n_cat, args.rank)
    compile_s = time.perf_counter() - t
    onehot = one_hot_design(codes, n_cat, drop_empty=True)
    offsets = offsets_of(n_cat)

    ref = sparse_em_step(onehot, offsets, w, a)
    got = kernel.step(w, a)
    err = max(
        np.abs(got[0] - ref[0]).max(),
        np.abs(got[1] - ref[1]).max(),
        abs(got[2] - ref[2]) / abs(ref[2]),
    )

    # interleave the two measurements so that machine noise hits both alike
    t_scipy, t_comp = [], []
    for _ in range(2):
        t_scipy.append(
            median_ms(
                lambda: sparse_em_step(onehot, offsets, w, a), args.warmup, args.repeats
            )
        )
        t_comp.append(median_ms(lambda: kernel.step(w, a), args.warmup, args.repeats))
    scipy_ms = min(m for m, _ in t_scipy)
    comp_ms = min(m for m, _ in t_comp)

    print(
        f"EM step: S={args.n_samples}, N={args.n_variables}, I={args.n_categories}, "
        f"F={args.rank}, missing={args.missing:.0%}, observed entries={onehot.nnz}"
    )
    print(f"compile (build_em_kernel):         {compile_s:8.2f} s")
    print(f"max |compiled - SciPy| (params, rel. loglik): {err:.2e}")
    print(f"{'step':34s} {'median ms':>10s} {'min ms':>8s}   (median of {args.repeats})")
    for label, runs in [
        ("SciPy sparse one-hot (reference)", t_scipy),
        ("compiled PyTensor (EMKernel.step)", t_comp),
    ]:
        med = min(m for m, _ in runs)
        mn = min(x for _, x in runs)
        print(f"{label:34s} {med:10.2f} {mn:8.2f}")
    ratio = comp_ms / scipy_ms
    print(
        f"ratio compiled / SciPy: {ratio:.3f}  ({'OK' if ratio <= 1.0 else 'FAIL'}: "
        "must be <= 1.0)"
    )
    return 0 if ratio <= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
