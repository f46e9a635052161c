r"""The E-step of the latent-class PMF for K starts at once, as one numba loop.

:func:`estep_starts` is the sufficient-statistics pass of EM (Chege et al., eqs.
(5)-(6); Ibrahim & Fu, App. C.1, eqs. (33a)-(33b)) for K parameter sets ("starts") of
F classes each. For every row it gathers the joint ``lambda_f prod_n A_n(x_n, f)`` of
every class over the observed entries, normalizes it per start and scatter-adds the
responsibilities (times the row's weight) into the expected counts: one fused pass over
the observed entries, nothing of size ``S x K x F`` stored. A row that a start gives
probability 0 (an exact zero in a factor it needs, e.g. after a projection onto the
simplex) makes that start's log-likelihood ``-inf`` and adds nothing to its counts.

**Linear space, without underflow.** The joint is computed as the product it is, with
no ``exp`` per class and row (the log-space sum of :func:`estep_blocks_reference` needs
one). A row takes one of two paths:

* *plain*, when it has at most ``r_plain`` observed entries: ``r_plain`` is computed
  once per call from the smallest and largest positive weight and factor entry, so
  that no product can leave ``[2**-1020, 2**1000]`` (no underflow, no subnormal
  number, no overflow). The rows of narrow data take it.
* *long* (wide data): every class keeps its own binary exponent. Every ``r_long``
  entries the products are split into a mantissa in ``[1, 2)`` and an integer
  exponent (``r_long`` multiplications from ``[1, 2)`` can neither underflow nor
  overflow), and the classes are put on a common scale at the end of the row only, as
  the max-shift of a log-sum-exp does: a class far below the largest becomes 0 there,
  as ``exp`` of a very negative number does, but no class underflows on the way and
  misses a later recovery.

Either way the result is that of the log-space sum up to rounding (a relative error of
a few ``n eps`` per row of ``n`` entries). Weights or factors outside this scheme's
domain (negative, NaN or infinite entries, or positive ones outside
``[SMALLEST, 1 / SMALLEST]``) fall back to :func:`estep_blocks_reference`.

**Vector lanes.** A group of ``kg`` starts is stored class-major: lane ``f * kg + b``
holds class ``f`` of start ``b``, ``kg`` padded to a multiple of :data:`LANES` with
starts of weight 0. The gather, the scatter and the normalization of every start then
run over contiguous lanes, which the compiler vectorizes. A single start is stored with
its classes padded to a multiple of :data:`LANES` (weight 0); with at most
:data:`LANES` classes it keeps them in registers (``_estep_four``).

**Threads.** The loops release the GIL. With many starts (at least
``2 * MIN_BLOCKS_PER_THREAD``) the starts are cut into groups shared out between
threads (:func:`bayespmf._runtime.n_cpus`): every start's numbers come from the same
operations in the same order whatever the grouping, so they do not depend on the
threads. Groups are also cut so that a group's factors and counts fit in a core's
cache (:data:`GROUP_BYTES`), which matters for wide data. Few starts on large data split
the rows between threads instead (:data:`MIN_WORK_PER_THREAD`), each with its own
counts, summed after: the result then differs from a single thread's by the rounding of
that sum only, and is the same for a given number of threads.

The loops are compiled by numba (a dependency of PyTensor) once per machine and cached
on disk (``cache=True``), far faster in an empty cache than PyTensor's C modules
(:ref:`bench-em-kernel`).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from bayespmf._runtime import n_cpus

__all__ = [
    "GROUP_BYTES",
    "LANES",
    "MIN_BLOCKS_PER_THREAD",
    "MIN_WORK_PER_THREAD",
    "SMALLEST",
    "estep_blocks_reference",
    "estep_starts",
    "estep_stats",
    "numba_estep_stats",
    "row_log_joint",
    "run_lengths",
]

#: The starts of one E-step are split between threads when every thread gets at
#: least this many (the multi-start exploration runs 300; a single fit runs 1).
MIN_BLOCKS_PER_THREAD = 16

#: Fewer starts split the rows between threads when every thread gets at least this
#: much work, counted in lane-entries (observed entries times lanes): below it the
#: hand-off to the threads costs more than it saves (a single start on UCI Car's 1728
#: rows stays on one thread).
MIN_WORK_PER_THREAD = 2**19

#: Vector lanes (float64 in a 256-bit register): a group's starts, or a single start's
#: classes, are padded to a multiple of it.
LANES = 4

#: A group of starts holds at most this many bytes of factors and counts (when it holds
#: more than :data:`LANES` starts), so that the factors and counts a row touches stay in
#: a core's cache however many variables the data have.
GROUP_BYTES = 2**20

#: The linear-space E-step takes weights and factor entries that are 0 or in
#: ``[SMALLEST, 1 / SMALLEST]``; anything else (a subnormal number, say) goes to
#: :func:`estep_blocks_reference`.
SMALLEST = 2.0**-1000

_MANTISSA = 0x000FFFFFFFFFFFFF  # the 52 fraction bits of a float64
_ONE = 0x3FF0000000000000  # the exponent bits of 1.0
_ZERO_EXPONENT = -(2**40)  # the exponent given to a product that is exactly 0
_LN2 = math.log(2.0)
_SQRT2 = math.sqrt(2.0)
_NO_LIMIT = 2**62  # a run length no row reaches


@cache
def _pool(workers: int, pid: int) -> ThreadPoolExecutor:
    """One pool of threads per process, made on first use and reused by every E-step.

    Keyed by the process id: a process forked from one that made a pool inherits the
    pool object but not its threads, so it makes its own.
    """
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bayespmf-estep")


@numba.njit(cache=True, nogil=True, inline="always")
def row_log_joint(log_w, log_a, indptr, indices, s, buf):  # pragma: no cover - numba
    """Write the log joint of row ``s`` and every column of ``log_a`` into ``buf``.

    ``buf = log_w + sum_k log_a[indices[k]]`` over row ``s``'s observed entries: the
    per-row gather of the E-step and of the Gibbs label draw
    (:mod:`bayespmf.kernels.gibbs_numba`), compiled into its caller.

    Parameters
    ----------
    log_w : ndarray, shape (C,)
        Log class weights (of every start, block after block).
    log_a : ndarray, shape (P, C)
        Log stacked factors.
    indptr, indices : ndarray of int64
        CSR layout of the observed entries.
    s : int
        The row.
    buf : ndarray, shape (C,)
        Overwritten with the row's log joint.

    Examples
    --------
    >>> buf = np.empty(2)
    >>> row_log_joint(np.zeros(2), np.log([[0.5, 0.25], [0.5, 0.75]]),
    ...               np.array([0, 2]), np.array([0, 1]), 0, buf)
    >>> np.exp(buf).round(4).tolist()
    [0.25, 0.1875]
    """
    for c in range(buf.size):
        buf[c] = log_w[c]
    for k in range(indptr[s], indptr[s + 1]):
        j = indices[k]
        for c in range(buf.size):
            buf[c] += log_a[j, c]


# ------------------------------------------------------------------ float64 bits


@intrinsic
def _as_bits(typingctx, x):
    """The IEEE 754 bits of a float64 as an int64 (a reinterpretation, no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx, bits):
    """The float64 whose IEEE 754 bits are the int64 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@numba.njit(cache=True, nogil=True)
def _log_positive(z):  # pragma: no cover - numba
    """``log(z)`` of a positive normal float64, in operations a loop can vectorize.

    With ``z = m 2**e``, ``m`` in ``[sqrt(1/2), sqrt(2))``: ``log(m) = 2 atanh(t)``,
    ``t = (m - 1) / (m + 1)``, ``|t| < 0.172``, as its series to ``t**21`` (the first
    term left out is below ``2**-60`` of the sum). ``math.log`` is a call to the C
    library that a loop runs one lane at a time.
    """
    bits = _as_bits(z)
    e = (bits >> 52) - 1023
    m = _from_bits((bits & _MANTISSA) | _ONE)
    high = m > _SQRT2
    m = m * 0.5 if high else m
    e = e + 1 if high else e
    f = m - 1.0
    t = f / (2.0 + f)
    t2 = t * t
    q = 2.0 / 21.0
    q = q * t2 + 2.0 / 19.0
    q = q * t2 + 2.0 / 17.0
    q = q * t2 + 2.0 / 15.0
    q = q * t2 + 2.0 / 13.0
    q = q * t2 + 2.0 / 11.0
    q = q * t2 + 2.0 / 9.0
    q = q * t2 + 2.0 / 7.0
    q = q * t2 + 2.0 / 5.0
    q = q * t2 + 2.0 / 3.0
    return e * _LN2 + t * (2.0 + q * t2)


@numba.njit(cache=True, nogil=True)
def _split(value, exponent):  # pragma: no cover - numba
    """``value * 2**exponent`` as a mantissa in ``[1, 2)`` and an int exponent.

    ``value`` is 0 or a positive normal float64; 0 gives ``(0.0, _ZERO_EXPONENT)``.
    """
    bits = _as_bits(value)
    if value != 0.0:
        return _from_bits((bits & _MANTISSA) | _ONE), exponent + ((bits >> 52) - 1023)
    return 0.0, _ZERO_EXPONENT


@numba.njit(cache=True, nogil=True, inline="always")
def _split_lanes(buf, exponent):  # pragma: no cover - numba
    """``_split`` of every lane of ``buf`` (in place), in vectorizable form."""
    for c in range(buf.size):
        x = buf[c]
        bits = _as_bits(x)
        nonzero = x != 0.0
        buf[c] = _from_bits((bits & _MANTISSA) | _ONE) if nonzero else 0.0
        exponent[c] = exponent[c] + ((bits >> 52) - 1023) if nonzero else _ZERO_EXPONENT


@numba.njit(cache=True, nogil=True)
def _times_pow2(value, shift):  # pragma: no cover - numba
    """``value * 2**shift`` for ``shift <= 0``: exact, or 0 below ``2**-1022``.

    ``value`` is 0 or in ``[1, 2)``, so the result is 0 or a normal number (never
    subnormal, whose arithmetic is slow).
    """
    scale = _from_bits((max(shift, -1022) + 1023) << 52)
    return value * scale if shift >= -1022 else 0.0


# ------------------------------------------------------------------ the kernels


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _estep_lanes(
    weights,
    factors,
    indptr,
    indices,
    row_weight,
    r_plain,
    r_long,
    g_lo,
    g_hi,
    lo,
    hi,
    counts,
    totals,
    loglik,
):  # pragma: no cover - numba
    """Add rows ``lo:hi`` of groups ``g_lo:g_hi`` to ``counts``, ``totals``, ``loglik``.

    ``weights`` (G, L), ``factors`` and ``counts`` (G, P, L), ``totals`` (G, L) and
    ``loglik`` (G, kg): lane ``f * kg + b`` of group ``g`` is class ``f`` of its start
    ``b``. With ``kg > 1`` every start's numbers come from lane-wise operations and
    per-start sums over its classes in class order, the same whatever ``kg``; a lone
    start (``kg == 1``) sums its classes in four interleaved partial sums (a shorter
    chain of dependent additions), the same numbers up to rounding.
    """
    kg = loglik.shape[1]  # starts per group
    n_lanes = weights.shape[1]
    n_class = n_lanes // kg
    buf = np.empty(n_lanes)
    exponent = np.empty(n_lanes, dtype=np.int64)
    w_mant = np.empty(n_lanes)
    w_exp = np.empty(n_lanes, dtype=np.int64)
    per_start = np.empty(kg)
    shift = np.zeros(kg, dtype=np.int64)
    for g in range(g_lo, g_hi):
        w = weights[g]
        a = factors[g]
        cnt = counts[g]
        tot = totals[g]
        ll = loglik[g]
        for c in range(n_lanes):
            w_mant[c] = w[c]
            w_exp[c] = 0
        _split_lanes(w_mant, w_exp)
        ll_single = 0.0  # one start: its log-likelihood in a register
        for s in range(lo, hi):
            k0 = indptr[s]
            k1 = indptr[s + 1]
            ws = row_weight[s]
            plain = k1 - k0 <= r_plain
            # gather: the joint of every lane
            if plain:
                for c in range(n_lanes):
                    buf[c] = w[c]
                for k in range(k0, k1):
                    j = indices[k]
                    for c in range(n_lanes):
                        buf[c] *= a[j, c]
            else:
                for c in range(n_lanes):
                    buf[c] = w_mant[c]
                    exponent[c] = w_exp[c]
                for k_run in range(k0, k1, r_long):
                    for k in range(k_run, min(k_run + r_long, k1)):
                        j = indices[k]
                        for c in range(n_lanes):
                            buf[c] *= a[j, c]
                    _split_lanes(buf, exponent)
                # each start on the scale of its largest class
                for b in range(kg):
                    shift[b] = exponent[b]
                for f in range(1, n_class):
                    for b in range(kg):
                        shift[b] = max(shift[b], exponent[f * kg + b])
                for f in range(n_class):
                    for b in range(kg):
                        c = f * kg + b
                        buf[c] = _times_pow2(buf[c], exponent[c] - shift[b])
            # normalize: the responsibilities times the row's weight
            if kg == 1:
                z0 = buf[0]
                z1 = buf[1]
                z2 = buf[2]
                z3 = buf[3]
                for c in range(4, n_lanes, 4):
                    z0 += buf[c]
                    z1 += buf[c + 1]
                    z2 += buf[c + 2]
                    z3 += buf[c + 3]
                z = (z0 + z1) + (z2 + z3)
                if z > 0.0:
                    ll_single += ws * (math.log(z) + (0.0 if plain else shift[0] * _LN2))
                    inv = 1.0 / z
                else:  # the row is impossible under this start (a zero it needs)
                    ll_single = -math.inf
                    inv = 0.0
                for c in range(n_lanes):
                    buf[c] = buf[c] * inv * ws
            else:
                for b in range(kg):
                    per_start[b] = buf[b]
                for f in range(1, n_class):
                    for b in range(kg):
                        per_start[b] += buf[f * kg + b]
                for b in range(kg):
                    z = per_start[b]
                    log_z = _log_positive(z) + (0.0 if plain else shift[b] * _LN2)
                    ll[b] += ws * log_z if z > 0.0 else -math.inf
                    per_start[b] = 1.0 / z if z > 0.0 else 0.0
                for f in range(n_class):
                    for b in range(kg):
                        c = f * kg + b
                        buf[c] = buf[c] * per_start[b] * ws
            # scatter
            for c in range(n_lanes):
                tot[c] += buf[c]
            for k in range(k0, k1):
                j = indices[k]
                for c in range(n_lanes):
                    cnt[j, c] += buf[c]
        if kg == 1:
            ll[0] += ll_single


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _estep_four(
    weights,
    factors,
    indptr,
    indices,
    row_weight,
    r_plain,
    r_long,
    lo,
    hi,
    counts,
    totals,
    loglik,
):  # pragma: no cover - numba
    """``_estep_lanes`` for one start of at most four classes, in registers.

    ``weights`` (4,), ``factors`` and ``counts`` (P, 4), ``totals`` (4,), ``loglik``
    (1,). Four lanes are too few for the vector loops of ``_estep_lanes`` to pay
    their set-up per entry; four scalars in registers carry no memory traffic either.
    """
    w0 = weights[0]
    w1 = weights[1]
    w2 = weights[2]
    w3 = weights[3]
    m0, e0 = _split(w0, 0)
    m1, e1 = _split(w1, 0)
    m2, e2 = _split(w2, 0)
    m3, e3 = _split(w3, 0)
    t0 = t1 = t2 = t3 = 0.0
    ll = 0.0
    for s in range(lo, hi):
        k0 = indptr[s]
        k1 = indptr[s + 1]
        if k1 - k0 <= r_plain:
            v0, v1, v2, v3 = w0, w1, w2, w3
            for k in range(k0, k1):
                j = indices[k]
                v0 *= factors[j, 0]
                v1 *= factors[j, 1]
                v2 *= factors[j, 2]
                v3 *= factors[j, 3]
            shift = 0
        else:
            v0, v1, v2, v3 = m0, m1, m2, m3
            x0, x1, x2, x3 = e0, e1, e2, e3
            for k_run in range(k0, k1, r_long):
                for k in range(k_run, min(k_run + r_long, k1)):
                    j = indices[k]
                    v0 *= factors[j, 0]
                    v1 *= factors[j, 1]
                    v2 *= factors[j, 2]
                    v3 *= factors[j, 3]
                v0, x0 = _split(v0, x0)
                v1, x1 = _split(v1, x1)
                v2, x2 = _split(v2, x2)
                v3, x3 = _split(v3, x3)
            shift = max(max(x0, x1), max(x2, x3))
            v0 = _times_pow2(v0, x0 - shift)
            v1 = _times_pow2(v1, x1 - shift)
            v2 = _times_pow2(v2, x2 - shift)
            v3 = _times_pow2(v3, x3 - shift)
        z = (v0 + v1) + (v2 + v3)
        ws = row_weight[s]
        if z > 0.0:
            ll += ws * (math.log(z) + shift * _LN2)
            inv = 1.0 / z
        else:  # the row is impossible under this start (a zero it needs)
            ll = -math.inf
            inv = 0.0
        v0 = v0 * inv * ws
        v1 = v1 * inv * ws
        v2 = v2 * inv * ws
        v3 = v3 * inv * ws
        t0 += v0
        t1 += v1
        t2 += v2
        t3 += v3
        for k in range(k0, k1):
            j = indices[k]
            counts[j, 0] += v0
            counts[j, 1] += v1
            counts[j, 2] += v2
            counts[j, 3] += v3
    totals[0] += t0
    totals[1] += t1
    totals[2] += t2
    totals[3] += t3
    loglik[0] += ll


@numba.njit(cache=True, nogil=True)
def _positive_range(x):  # pragma: no cover - numba
    """``(smallest positive, largest, ok)`` of ``x``; ``ok``: no negative, NaN or inf."""
    lo = math.inf
    hi = 0.0
    ok = True
    for v in x:
        if v > 0.0:
            lo = min(lo, v)
            hi = max(hi, v)
        elif v != 0.0:
            ok = False
    return lo, hi, ok and hi < math.inf


# ------------------------------------------------------------------ the E-step


def run_lengths(w_lo: float, w_hi: float, a_lo: float, a_hi: float) -> tuple[int, int]:
    """``(r_plain, r_long)`` of the linear-space E-step (module docstring).

    Parameters
    ----------
    w_lo, w_hi : float
        Smallest positive and largest weight (``inf`` and 0 when none is positive).
    a_lo, a_hi : float
        The same of the factor entries.

    Returns
    -------
    r_plain : int
        Rows of at most this many observed entries keep every product in
        ``[2**-1020, 2**1000]``: ``w_lo a_lo**r >= 2**-1020`` and
        ``w_hi a_hi**r <= 2**1000``.
    r_long : int
        At least 1: this many multiplications of a mantissa in ``[1, 2)`` stay in
        ``[2**-1022, 2**1023)``.

    Examples
    --------
    >>> run_lengths(0.1, 0.9, 1e-3, 0.99)
    (102, 102)
    >>> run_lengths(0.5, 0.5, 0.5, 1.0)
    (1019, 1022)
    """
    r_plain = r_long = _NO_LIMIT
    if not (w_hi > 0.0 and a_hi > 0.0):  # every joint is 0
        return r_plain, r_long
    if a_lo < 1.0:
        r_plain = min(r_plain, math.floor((1020.0 + math.log2(w_lo)) / -math.log2(a_lo)))
        r_long = min(r_long, math.floor(1022.0 / -math.log2(a_lo)))
    if a_hi > 1.0:
        r_plain = min(r_plain, math.floor((1000.0 - math.log2(w_hi)) / math.log2(a_hi)))
        r_long = min(r_long, math.floor(1022.0 / math.log2(a_hi)))
    return max(r_plain, 0), max(r_long, 1)


def _in_threads(fn, workers: int) -> None:
    """``fn(0), ..., fn(workers - 1)``, each on its own thread (inline for one)."""
    if workers < 2:
        fn(0)
        return
    list(_pool(workers, os.getpid()).map(fn, range(workers)))


def _ceil_div(n: int, d: int) -> int:
    """``ceil(n / d)`` of positive integers."""
    return -(-n // d)


def _cuts(n: int, parts: int) -> list[int]:
    """``parts + 1`` bounds cutting ``range(n)`` into near-equal contiguous parts."""
    return [n * i // parts for i in range(parts + 1)]


def _row_workers(n_rows: int, work: int) -> int:
    """Threads that split the rows: one per :data:`MIN_WORK_PER_THREAD` of work."""
    if work < 2 * MIN_WORK_PER_THREAD:
        return 1
    return max(1, min(n_cpus(), work // MIN_WORK_PER_THREAD, n_rows))


def estep_starts(weights, factors, indptr, indices, row_weight):
    """E-step statistics of K starts in one fused pass over the observed entries.

    Parameters
    ----------
    weights : ndarray, shape (K, F)
        Class weights of every start.
    factors : ndarray, shape (P, K, F)
        Stacked factors of every start.
    indptr : ndarray of int64, shape (S + 1,)
    indices : ndarray of unsigned or int64 integers
        CSR layout of the observed entries (flat indices ``offsets[n] + x_n``;
        :func:`bayespmf.pmf.observed_csr`, the smallest type that fits:
        :func:`bayespmf.pmf.index_dtype`).
    row_weight : ndarray of float64, shape (S,)
        Weight of each row (1 for plain rows; a pattern's count; a survey weight).

    Returns
    -------
    counts : ndarray, shape (P, K, F)
        Weighted expected counts ``sum_s w_s gamma_{s,f} [j in s]``.
    totals : ndarray, shape (K, F)
        Weighted class totals ``sum_s w_s gamma_{s,f}``.
    loglik : ndarray, shape (K,)
        ``sum_s w_s log sum_f lambda_f prod_{j in s} A(j, f)`` of each start.

    Examples
    --------
    >>> w = np.array([[0.5, 0.5]])
    >>> a = np.array([[[0.9, 0.2]], [[0.1, 0.8]]])
    >>> c, t, ll = estep_starts(w, a, np.array([0, 1, 2]), np.array([0, 1]), np.ones(2))
    >>> t.round(3), ll.round(4)
    (array([[0.929, 1.071]]), array([-1.3963]))
    """
    w = np.ascontiguousarray(weights, dtype=np.float64)
    a = np.ascontiguousarray(factors, dtype=np.float64)
    row_weight = np.ascontiguousarray(row_weight, dtype=np.float64)
    n_stack, n_start = a.shape[:2]
    w_lo, w_hi, w_ok = _positive_range(w.reshape(-1))
    a_lo, a_hi, a_ok = _positive_range(a.reshape(-1))
    if not (w_ok and a_ok) or min(w_lo, a_lo) < SMALLEST or max(w_hi, a_hi) > 1 / SMALLEST:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_w, log_a = np.log(w).reshape(-1), np.log(a).reshape(n_stack, -1)
        counts, totals, loglik = estep_blocks_reference(
            log_w, log_a, indptr, indices, row_weight, n_start
        )
        return counts.reshape(a.shape), totals.reshape(w.shape), loglik
    r_plain, r_long = run_lengths(w_lo, w_hi, a_lo, a_hi)
    if n_start == 1:
        return _one_start(w[0], a[:, 0], indptr, indices, row_weight, r_plain, r_long)
    return _many_starts(w, a, indptr, indices, row_weight, r_plain, r_long)


def _one_start(w, a, indptr, indices, row_weight, r_plain, r_long):
    """:func:`estep_starts` of one start: classes padded to lanes, rows split."""
    n_stack, n_class = a.shape
    n_lanes = _ceil_div(n_class, LANES) * LANES
    if n_lanes != n_class:  # padded classes: weight 0
        w = np.concatenate([w, np.zeros(n_lanes - n_class)])
        a = np.concatenate([a, np.zeros((n_stack, n_lanes - n_class))], axis=1)
    n_rows = indptr.size - 1
    workers = _row_workers(n_rows, int(indptr[-1]) * n_lanes)
    counts = np.zeros((workers, n_stack, n_lanes))
    totals = np.zeros((workers, n_lanes))
    loglik = np.zeros((workers, 1))
    cuts = _cuts(n_rows, workers)
    args = (indptr, indices, row_weight, r_plain, r_long)
    if n_lanes == LANES:

        def rows(t):
            _estep_four(w, a, *args, cuts[t], cuts[t + 1], counts[t], totals[t], loglik[t])

    else:
        w3, a3 = w[None], a[None]

        def rows(t):
            _estep_lanes(
                w3,
                a3,
                *args,
                0,
                1,
                cuts[t],
                cuts[t + 1],
                counts[t : t + 1],
                totals[t : t + 1],
                loglik[t : t + 1],
            )

    _in_threads(rows, workers)
    if workers > 1:
        counts, totals, loglik = counts.sum(0), totals.sum(0), loglik.sum(0)
    else:
        counts, totals, loglik = counts[0], totals[0], loglik[0]
    return counts[:, None, :n_class], totals[None, :n_class], loglik


def _many_starts(w, a, indptr, indices, row_weight, r_plain, r_long):
    """:func:`estep_starts` of K >= 2 starts: class-major groups of starts."""
    n_stack, n_start, n_class = a.shape
    n_rows = indptr.size - 1
    # starts per group: a multiple of LANES, as many as GROUP_BYTES holds, and at least
    # one group per thread when the starts are shared out between threads
    fit = max(GROUP_BYTES // (16 * n_stack * n_class) // LANES * LANES, LANES)
    group_workers = min(n_cpus(), n_start // MIN_BLOCKS_PER_THREAD)
    n_groups = max(_ceil_div(n_start, fit), group_workers)
    per_group = _ceil_div(_ceil_div(n_start, n_groups), LANES) * LANES
    n_groups = _ceil_div(n_start, per_group)
    padded = n_groups * per_group
    # (K, F) and (P, K, F), padded with starts of weight 0, to class-major groups:
    # (G, F * per_group) and (G, P, F * per_group)
    shape = (n_groups, per_group, n_class)
    wp = np.zeros((padded, n_class))
    wp[:n_start] = w
    wp = np.ascontiguousarray(wp.reshape(shape).transpose(0, 2, 1))
    ap = np.zeros((n_stack, padded, n_class))
    ap[:, :n_start] = a
    ap = np.ascontiguousarray(ap.reshape((n_stack, *shape)).transpose(1, 0, 3, 2))
    wp = wp.reshape(n_groups, -1)
    ap = ap.reshape(n_groups, n_stack, -1)
    args = (wp, ap, indptr, indices, row_weight, r_plain, r_long)
    if group_workers >= 2:
        counts = np.zeros_like(ap)
        totals = np.zeros_like(wp)
        loglik = np.zeros((n_groups, per_group))
        cuts = _cuts(n_groups, group_workers)

        def groups(t):
            _estep_lanes(*args, cuts[t], cuts[t + 1], 0, n_rows, counts, totals, loglik)

        _in_threads(groups, group_workers)
    else:
        workers = _row_workers(n_rows, int(indptr[-1]) * ap.shape[2] * n_groups)
        counts = np.zeros((workers, *ap.shape))
        totals = np.zeros((workers, *wp.shape))
        loglik = np.zeros((workers, n_groups, per_group))
        cuts = _cuts(n_rows, workers)

        def rows(t):
            _estep_lanes(
                *args, 0, n_groups, cuts[t], cuts[t + 1], counts[t], totals[t], loglik[t]
            )

        _in_threads(rows, workers)
        if workers > 1:
            counts, totals, loglik = counts.sum(0), totals.sum(0), loglik.sum(0)
        else:
            counts, totals, loglik = counts[0], totals[0], loglik[0]
    # back to (P, K, F), (K, F) and (K,)
    counts = counts.reshape(n_groups, n_stack, n_class, per_group).transpose(1, 0, 3, 2)
    counts = counts.reshape(n_stack, padded, n_class)[:, :n_start]
    totals = totals.reshape(n_groups, n_class, per_group).transpose(0, 2, 1)
    totals = totals.reshape(padded, n_class)[:n_start]
    return counts, totals, loglik.reshape(-1)[:n_start]


# ------------------------------------------------------- the log-space reference


@numba.njit(cache=True, nogil=True)
def _estep_blocks_reference(
    log_w, log_a, indptr, indices, row_weight, n_blocks, counts, totals, loglik
):  # pragma: no cover - numba
    n_rows = indptr.size - 1
    n_col = log_a.shape[1]
    n_components = n_col // n_blocks
    buf = np.empty(n_col)
    for s in range(n_rows):
        row_log_joint(log_w, log_a, indptr, indices, s, buf)
        ws = row_weight[s]
        for b in range(n_blocks):
            lo = b * n_components
            m = buf[lo]
            for f in range(lo + 1, lo + n_components):
                if buf[f] > m:
                    m = buf[f]
            if not math.isfinite(m):
                m = 0.0
            z = 0.0
            for f in range(lo, lo + n_components):
                buf[f] = math.exp(buf[f] - m)
                z += buf[f]
            if z > 0.0 and math.isfinite(z):
                loglik[b] += ws * (math.log(z) + m)
                scale = ws / z
            else:  # the row is impossible under this start (a zero it needs)
                loglik[b] = -math.inf
                scale = 0.0
            for f in range(lo, lo + n_components):
                buf[f] *= scale
        for c in range(n_col):
            totals[c] += buf[c]
        for k in range(indptr[s], indptr[s + 1]):
            j = indices[k]
            for c in range(n_col):
                counts[j, c] += buf[c]


def estep_blocks_reference(log_w, log_a, indptr, indices, row_weight, n_blocks: int):
    """E-step statistics of ``n_blocks`` starts in log space, one row at a time.

    The reference of :func:`estep_starts` and its fallback: for every row, the log
    joint of every class (:func:`row_log_joint`), a max-shifted log-sum-exp per start
    (one ``exp`` per class) and the scatter of the responsibilities. It takes any
    weights and factors (their logs), including ``-inf`` and NaN. Many starts are
    shared out between threads as in :func:`estep_starts`.

    Parameters
    ----------
    log_w : ndarray, shape (K * F,)
        Log class weights of every start, block after block.
    log_a : ndarray, shape (P, K * F)
        Log stacked factors of every start, C-contiguous.
    indptr, indices : ndarray of int64
        CSR layout of the observed entries (flat indices ``offsets[n] + x_n``).
    row_weight : ndarray, shape (S,)
        Weight of each row (1 for plain rows; a pattern's count; a survey weight).
    n_blocks : int
        K.

    Returns
    -------
    counts : ndarray, shape (P, K * F)
        Weighted expected counts ``sum_s w_s gamma_{s,f} [j in s]``.
    totals : ndarray, shape (K * F,)
        Weighted class totals ``sum_s w_s gamma_{s,f}``.
    loglik : ndarray, shape (K,)
        ``sum_s w_s log sum_f exp(l_{s,f})`` of each start.

    Examples
    --------
    >>> lw = np.log([0.5, 0.5])
    >>> la = np.log([[0.9, 0.2], [0.1, 0.8]])
    >>> c, t, ll = estep_blocks_reference(
    ...     lw, la, np.array([0, 1, 2]), np.array([0, 1]), np.ones(2), 1
    ... )
    >>> t.round(3), ll.round(4)
    (array([0.929, 1.071]), array([-1.3963]))
    """
    log_a = np.ascontiguousarray(log_a, dtype=np.float64)
    log_w = np.ascontiguousarray(log_w, dtype=np.float64)
    row_weight = np.ascontiguousarray(row_weight, dtype=np.float64)
    n_blocks = int(n_blocks)
    counts = np.zeros_like(log_a)
    totals = np.zeros(log_a.shape[1])
    loglik = np.zeros(n_blocks)
    workers = min(n_cpus(), n_blocks // MIN_BLOCKS_PER_THREAD)
    if workers < 2:
        _estep_blocks_reference(
            log_w, log_a, indptr, indices, row_weight, n_blocks, counts, totals, loglik
        )
        return counts, totals, loglik
    n_components = log_a.shape[1] // n_blocks
    cuts = np.linspace(0, n_blocks, workers + 1).astype(int)

    def group(g):
        lo, hi = cuts[g] * n_components, cuts[g + 1] * n_components
        part = np.ascontiguousarray(log_a[:, lo:hi])
        c = np.zeros_like(part)
        t = np.zeros(hi - lo)
        ll = np.zeros(cuts[g + 1] - cuts[g])
        _estep_blocks_reference(
            log_w[lo:hi], part, indptr, indices, row_weight, ll.size, c, t, ll
        )
        counts[:, lo:hi], totals[lo:hi], loglik[cuts[g] : cuts[g + 1]] = c, t, ll

    list(_pool(workers, os.getpid()).map(group, range(workers)))
    return counts, totals, loglik


@numba.njit(cache=True, nogil=True)
def estep_stats(log_w, log_a, indptr, indices, with_counts):  # pragma: no cover - numba
    """:class:`bayespmf.kernels.em.EStepStats` in numba: the loop of its C code."""
    n_stack, n_components = log_a.shape
    n_rows = indptr.size - 1
    if log_w.size != n_components:
        raise ValueError("EStepStats: log_weights and log_factors disagree on the rank F.")
    if n_rows < 0 or indptr[0] != 0 or indptr[n_rows] > indices.size:
        raise ValueError("EStepStats: indptr is inconsistent.")
    counts = np.zeros((n_stack, n_components) if with_counts else (0, n_components))
    totals = np.zeros(n_components)
    buf = np.empty(n_components)
    total = 0.0
    for s in range(n_rows):
        for f in range(n_components):
            buf[f] = log_w[f]
        for k in range(indptr[s], indptr[s + 1]):
            j = indices[k]
            if j < 0 or j >= n_stack:
                raise IndexError("EStepStats: index out of range.")
            for f in range(n_components):
                buf[f] += log_a[j, f]
        m = buf[0]
        for f in range(1, n_components):
            if buf[f] > m:
                m = buf[f]
        if not math.isfinite(m):
            m = 0.0
        z = 0.0
        for f in range(n_components):
            buf[f] = math.exp(buf[f] - m)
            z += buf[f]
        total += math.log(z) + m
        if with_counts:
            for f in range(n_components):
                buf[f] /= z
                totals[f] += buf[f]
            for k in range(indptr[s], indptr[s + 1]):
                j = indices[k]
                for f in range(n_components):
                    counts[j, f] += buf[f]
    return counts, totals, np.asarray(total)


@cache
def numba_estep_stats(with_counts: bool):
    """The numba function PyTensor's numba linker calls for ``EStepStats(with_counts)``."""
    if with_counts:

        @numba.njit
        def estep(log_w, log_a, indptr, indices):  # pragma: no cover - numba
            return estep_stats(log_w, log_a, indptr, indices, True)

    else:

        @numba.njit
        def estep(log_w, log_a, indptr, indices):  # pragma: no cover - numba
            return estep_stats(log_w, log_a, indptr, indices, False)[2]

    return estep
