r"""The E-step of the latent-class PMF for K starts at once, as one numba loop.

:func:`estep_blocks` is the sufficient-statistics pass of EM (Chege et al., eqs.
(5)-(6); Ibrahim & Fu, App. C.1, eqs. (33a)-(33b)) for K parameter sets ("starts")
of F classes each, stored as K blocks of F columns: for every row it gathers
``log lambda + sum_n log A_n(x_n, .)`` over the observed entries, takes a max-shifted
log-sum-exp *per block*, and scatter-adds the block's responsibilities (times the
row's weight) into the expected counts. A row that a start gives probability 0 (an
exact zero in a factor it needs, e.g. after a projection onto the simplex) makes that
start's log-likelihood ``-inf`` and adds nothing to its counts.

One pass over the rows serves every start and nothing of size ``S x K x F`` is
stored. With many starts (at least ``2 * MIN_BLOCKS_PER_THREAD``) the starts are cut
into one group per CPU (:func:`bayespmf._runtime.n_cpus`), and the groups run in
threads (the loop releases the GIL): every start's numbers are computed by the same
operations in the same order as in one pass, so the result does not depend on the
threads. The loop is compiled by numba (a dependency of PyTensor) once per machine and
cached on disk (``cache=True``), far faster in an empty cache than PyTensor's C modules
(:ref:`bench-em-kernel`).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numba
import numpy as np

from bayespmf._runtime import n_cpus

__all__ = [
    "MIN_BLOCKS_PER_THREAD",
    "estep_blocks",
    "estep_stats",
    "numba_estep_stats",
    "row_log_joint",
]

#: The starts of one E-step are split between threads when every thread gets at
#: least this many (the multi-start exploration runs 300; a single fit runs 1).
MIN_BLOCKS_PER_THREAD = 16


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


@numba.njit(cache=True, nogil=True)
def _estep_blocks(
    log_w, log_a, indptr, indices, row_weight, n_blocks, counts, totals, loglik
):
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


def estep_blocks(log_w, log_a, indptr, indices, row_weight, n_blocks: int):
    """E-step statistics of ``n_blocks`` starts in one pass over the rows.

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
    >>> c, t, ll = estep_blocks(lw, la, np.array([0, 1, 2]), np.array([0, 1]),
    ...                         np.ones(2), 1)
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
        _estep_blocks(
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
        _estep_blocks(log_w[lo:hi], part, indptr, indices, row_weight, ll.size, c, t, ll)
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
