"""Per-iteration time of the compiled EM step next to the SciPy sparse reference step.

Main setting (the requirement in bayespmf/kernels/em.py): S = 1e5 rows, N = 15
variables, I_n = 10 categories, rank F = 10, half the entries missing. Then narrow data
(UCI Car: 1728 rows, 6 variables, F = 4) and wide data (``--wide-rows`` rows of
``--wide-items`` binary items from a rank-4 latent-class model), each for a single
start and for ``--starts`` starts in one call (the multi-start exploration's batch).

Every kernel runs in the same process on the same data and parameters as the SciPy
step, interleaved with it (two rounds; the better median of each is kept), so that
noise from other jobs on the machine hits all alike. The SciPy step is timed on a
prebuilt one-hot design (its setup is not counted); for K starts its time is K times
that of one start (K separate steps), and the errors are taken against K SciPy steps.
Rows:

* ``default (build_em_kernel)``: :class:`~bayespmf.kernels.em.NumbaEMKernel`, the
  fused linear-space E-step (:func:`~bayespmf.kernels.em_numba.estep_starts`);
* ``default, one thread``: the same with :func:`bayespmf._runtime.n_cpus` set to 1;
* ``numba log-space reference``: the same EM map with the row-by-row log-space
  E-step :func:`~bayespmf.kernels.em_numba.estep_blocks_reference` (one ``exp`` per
  class and row: the numba kernel before the fused one);
* ``PyTensor graph``: ``backend="pytensor"`` under each of ``--pytensor-linkers``
  (main setting only).

Columns: median and min ms over ``--repeats`` calls after ``--warmup`` calls, the
ratio to the SciPy step, build plus first call (compilation) and the largest error
against the SciPy step (weights and factors absolute, log-likelihood relative). The
exit status checks the main setting's ratio default / SciPy <= 1.0; the last line
reports the target of the fused E-step, <= 0.25.

    python benchmarks/bench_em_step.py [--n-samples 100000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings

import numpy as np
from _common import parse_args_quick

#: The fused E-step's target on the main setting: default / SciPy at most this.
TARGET = 0.25
SCIPY = "SciPy sparse one-hot (reference)"
DEFAULT = "default (build_em_kernel)"


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


def random_starts(n_cat, n_components, n_starts, seed):
    """``n_starts`` RAND-EM starts: weights (K, F) and stacked factors (P, K, F)."""
    from bayespmf.kernels.em import init_random

    starts = [
        init_random(n_cat, n_components, random_state=seed + k) for k in range(n_starts)
    ]
    weights = np.array([s.weights for s in starts])
    factors = np.stack([np.concatenate(s.factors) for s in starts], axis=1)
    return weights, factors


@contextlib.contextmanager
def one_thread():
    """Every E-step of the block on one thread (:func:`bayespmf._runtime.n_cpus` = 1)."""
    from bayespmf.kernels import em_numba

    saved = em_numba.n_cpus
    em_numba.n_cpus = lambda: 1
    try:
        yield
    finally:
        em_numba.n_cpus = saved


class ReferenceKernel:
    """The EM map of :class:`~bayespmf.kernels.em.NumbaEMKernel` with the log-space
    E-step of :func:`~bayespmf.kernels.em_numba.estep_blocks_reference`."""

    def __init__(self, codes, n_cat, n_components):
        from bayespmf.pmf import index_dtype, observed_csr, offsets_of

        self.offsets = offsets_of(n_cat)
        self.n_components = n_components
        self.indptr, self.indices = observed_csr(
            codes, n_cat, drop_empty=True, index_dtype=index_dtype(n_cat)
        )
        self.row_weight = np.ones(self.indptr.size - 1)

    def step(self, weights, factors):
        from bayespmf.kernels.em import COUNT_FLOOR
        from bayespmf.kernels.em_numba import estep_blocks_reference

        one = np.ndim(weights) == 1
        w = np.asarray(weights, dtype=float).reshape(-1, self.n_components)
        a = np.asarray(factors, dtype=float).reshape(factors.shape[0], -1, w.shape[1])
        with np.errstate(divide="ignore"):
            log_w, log_a = np.log(w).ravel(), np.log(a).reshape(a.shape[0], -1)
        counts, totals, loglik = estep_blocks_reference(
            log_w, log_a, self.indptr, self.indices, self.row_weight, w.shape[0]
        )
        counts = (counts + COUNT_FLOOR).reshape(a.shape)
        sums = np.add.reduceat(counts, self.offsets[:-1], axis=0)
        a_new = counts / np.repeat(sums, np.diff(self.offsets), axis=0)
        w_new = (totals.reshape(w.shape) + COUNT_FLOOR) / (
            self.row_weight.sum() + w.shape[1] * COUNT_FLOOR
        )
        if one:
            return w_new[0], a_new[:, 0], float(loglik[0])
        return w_new, a_new, loglik


def error_vs(got, refs):
    """Largest error of a step's output against the SciPy steps, one per start."""
    w, a, ll = got
    if len(refs) == 1:
        w, a, ll = w[None], a[:, None], np.atleast_1d(ll)
    errs = []
    for k, (rw, ra, rll) in enumerate(refs):
        errs += [np.abs(w[k] - rw).max(), np.abs(a[:, k] - ra).max()]
        errs.append(abs(ll[k] - rll) / abs(rll))
    return float(max(errs))


def run_case(
    title, codes, n_cat, n_components, n_starts, args, repeats, extra=(), warmup=None
):
    """Time and check every kernel on one setting; print its table; return ratios."""
    from bayespmf.kernels.em import build_em_kernel, sparse_em_step
    from bayespmf.pmf import offsets_of, one_hot_design

    n_cat = np.asarray(n_cat)
    w, a = random_starts(n_cat, n_components, n_starts, args.seed)
    if n_starts == 1:
        w, a = w[0], a[:, 0]
    onehot = one_hot_design(codes, n_cat, drop_empty=True)
    onehot_t = onehot.T.tocsr()
    offsets = offsets_of(n_cat)
    w2, a3 = w.reshape(n_starts, -1), a.reshape(a.shape[0], n_starts, -1)

    def scipy_step(k=0):
        return sparse_em_step(onehot, offsets, w2[k], a3[:, k], onehot_t=onehot_t)

    refs = [scipy_step(k) for k in range(n_starts)]

    specs = [
        (DEFAULT, lambda: build_em_kernel(codes, n_cat, n_components), None),
        (
            "default, one thread",
            lambda: build_em_kernel(codes, n_cat, n_components),
            one_thread,
        ),
        (
            "numba log-space reference",
            lambda: ReferenceKernel(codes, n_cat, n_components),
            None,
        ),
        *extra,
    ]
    kernels, compile_s, errors = {}, {}, {}
    for label, build, context in specs:
        t = time.perf_counter()
        kernel = build()
        with context() if context else contextlib.nullcontext():
            got = kernel.step(w, a)  # the first call compiles
        compile_s[label] = time.perf_counter() - t
        errors[label] = error_vs(got, refs)
        kernels[label] = (kernel, context)

    # interleave the measurements so that machine noise hits all alike
    times = {SCIPY: []} | {k: [] for k in kernels}
    for _ in range(2):
        ms, mn = median_ms(scipy_step, args.warmup, args.repeats)
        times[SCIPY].append((n_starts * ms, n_starts * mn))
        for label, (kernel, context) in kernels.items():
            with context() if context else contextlib.nullcontext():
                times[label].append(
                    median_ms(
                        lambda k=kernel: k.step(w, a),
                        args.warmup if warmup is None else warmup,
                        repeats,
                    )
                )

    print(f"{title}, K={n_starts} start{'s' if n_starts > 1 else ''} ", end="")
    print(f"(observed entries {onehot.nnz})")
    print(
        f"  {'step':38s} {'median ms':>10s} {'min ms':>9s} {'/ SciPy':>8s} "
        f"{'build+1st s':>11s} {'max err':>9s}   (median of {args.repeats}; "
        f"kernels {repeats})"
    )
    scipy_ms = min(m for m, _ in times[SCIPY])
    ratios = {}
    for label, runs in times.items():
        med = min(m for m, _ in runs)
        mn = min(x for _, x in runs)
        name = label if label != SCIPY or n_starts == 1 else f"{SCIPY} x {n_starts}"
        extra_cols = (
            f"{compile_s[label]:11.2f} {errors[label]:9.1e}" if label in kernels else ""
        )
        print(f"  {name:38s} {med:10.2f} {mn:9.2f} {med / scipy_ms:8.3f} {extra_cols}")
        ratios[label] = med / scipy_ms
    return ratios


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--n-variables", type=int, default=15)
    parser.add_argument("--n-categories", type=int, default=10)
    parser.add_argument("--n-components", type=int, default=10)
    parser.add_argument("--missing", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pytensor-linkers",
        nargs="*",
        default=["default", "cvm"],
        help="also time the PyTensor graph (backend='pytensor') under these linkers "
        "('default' is PyTensor's default mode: numba in PyTensor 3; 'cvm' is C)",
    )
    parser.add_argument(
        "--starts", type=int, default=300, help="K of the narrow and wide multi-start rows"
    )
    parser.add_argument("--wide-rows", type=int, default=2000)
    parser.add_argument("--wide-items", type=int, default=2000)
    parser.add_argument(
        "--wide-start-repeats",
        type=int,
        default=2,
        help="repeats of the wide multi-start kernels (seconds per call)",
    )
    parser.add_argument(
        "--main-only", action="store_true", help="skip the narrow and wide settings"
    )
    args = parse_args_quick(
        parser,
        argv,
        n_samples=20_000,
        repeats=10,
        warmup=1,
        pytensor_linkers=[],
        starts=20,
        wide_rows=200,
        wide_items=200,
        wide_start_repeats=2,
    )
    if args.repeats < 10:
        parser.error("--repeats must be >= 10")

    warnings.filterwarnings("ignore", message="Using NumPy C-API based implementation")
    warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
    from pytensor.compile.mode import Mode

    from bayespmf.datasets import load_car, make_latent_class
    from bayespmf.kernels.em import build_em_kernel

    # the main setting, and the PyTensor graph under each linker (--pytensor-linkers)
    codes = make_data(
        args.n_samples, args.n_variables, args.n_categories, args.missing, args.seed
    )
    n_cat = np.full(args.n_variables, args.n_categories)
    linkers = []
    for linker in args.pytensor_linkers:
        mode = None if linker == "default" else Mode(linker=linker, optimizer="fast_run")

        def build(mode=mode):
            return build_em_kernel(
                codes, n_cat, args.n_components, backend="pytensor", mode=mode
            )

        linkers.append((f"PyTensor graph, {linker} linker", build, None))
    title = (
        f"EM step: S={args.n_samples}, N={args.n_variables}, I={args.n_categories}, "
        f"F={args.n_components}, missing={args.missing:.0%}"
    )
    main_ratios = run_case(
        title, codes, n_cat, args.n_components, 1, args, args.repeats, linkers
    )

    if not args.main_only:
        data, _ = load_car()
        car = (np.asarray(data.codes)[:, 1:], np.asarray(data.n_categories)[1:])
        wide, _ = make_latent_class(
            args.wide_rows, [2] * args.wide_items, n_components=4, random_state=args.seed
        )
        wide = (np.asarray(wide.codes), np.asarray(wide.n_categories))
        settings = [
            ("UCI Car: S=1728, N=6, F=4", car, args.repeats, None),
            (
                f"wide: S={args.wide_rows}, N={args.wide_items} binary, F=4",
                wide,
                args.wide_start_repeats,
                0,  # seconds per call: the checked first call is the warm-up
            ),
        ]
        for name, (c, k), multi_repeats, multi_warmup in settings:
            print()
            run_case(name, c, k, 4, 1, args, args.repeats)
            print()
            run_case(name, c, k, 4, args.starts, args, multi_repeats, warmup=multi_warmup)

    ratio = main_ratios[DEFAULT]
    print()
    print(
        f"ratio default / SciPy: {ratio:.3f}  ({'OK' if ratio <= 1.0 else 'FAIL'}: "
        "must be <= 1.0)"
    )
    print(
        f"target of the fused E-step on the main setting, default / SciPy <= {TARGET}: "
        f"{'met' if ratio <= TARGET else 'not met'}"
    )
    return 0 if ratio <= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
