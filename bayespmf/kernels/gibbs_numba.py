r"""The Gibbs sweep of the latent-class model: class labels, counts, Dirichlet draws.

Given the class weights :math:`\lambda` and the factors :math:`A_n`, the class of a
row is drawn from its responsibilities
:math:`\Pr(z_s = f \mid x_s) \propto \lambda_f \prod_{n\ \mathrm{observed}}
A_n(x_{sn}, f)` (missing entries skipped). :func:`draw_class_counts` draws them for
every row in one numba loop over the observed entries (CSR layout, as
:mod:`bayespmf.kernels.em_numba`) and returns only the counts the conjugate update
needs: the class totals :math:`n_f` and the category-by-class counts
:math:`m_{j,f}`. Rows may be unique patterns with integer counts: the ``c`` rows of
a pattern get multinomial class counts (sequential binomials), so collapsed data are
sampled exactly as the expanded rows. :func:`draw_dirichlet` draws the conjugate
Dirichlet conditionals as normalized Gammas, in log space.

Reproducibility: the rows are cut into blocks of a fixed size and block ``b`` draws
from numba's generator seeded with ``seeds[b]`` (drawn by the caller's NumPy
generator), so a seed gives the same counts whatever the number of threads.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numba
import numpy as np

from bayespmf._runtime import n_cpus
from bayespmf.kernels.em_numba import row_log_joint

__all__ = [
    "BLOCK_ROWS",
    "draw_class_counts",
    "draw_conjugate",
    "draw_dirichlet",
    "exp_shifted",
    "inverse_cdf",
    "run_blocks",
    "thread_pool",
]

#: Rows (patterns) per block: each block has its own seed and its own counts.
BLOCK_ROWS = 4096


@cache
def thread_pool(workers: int, pid: int) -> ThreadPoolExecutor:
    """One pool per process (keyed by pid: a forked child makes its own)."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bayespmf-gibbs")


@numba.njit(cache=True, nogil=True, inline="always")
def exp_shifted(buf, n_components):  # pragma: no cover - numba
    """``buf[:rank] = exp(buf - max buf)`` in place; returns their sum.

    All 1 where the max is not finite (a row no class can explain).
    """
    m = buf[0]
    for f in range(1, n_components):
        if buf[f] > m:
            m = buf[f]
    z = 0.0
    for f in range(n_components):
        buf[f] = math.exp(buf[f] - m) if math.isfinite(m) else 1.0
        z += buf[f]
    return z


@numba.njit(cache=True, nogil=True, inline="always")
def inverse_cdf(buf, z, n_components):  # pragma: no cover - numba
    """A class drawn with weights ``buf[:rank]`` (sum ``z``) by one uniform.

    The uniform comes from numba's generator, which the caller seeds.
    """
    u = np.random.random() * z  # noqa: NPY002
    f = 0
    acc = buf[0]
    while acc < u and f < n_components - 1:
        f += 1
        acc += buf[f]
    return f


@numba.njit(cache=True, nogil=True)
def _draw_block(
    log_w, log_a, indptr, indices, row_count, lo, hi, seed, totals, counts
):  # pragma: no cover - numba
    # numba's own generator, one per thread: seeded here, it serves this block only
    np.random.seed(seed)  # noqa: NPY002
    n_components = log_w.size
    buf = np.empty(n_components)
    for s in range(lo, hi):
        row_log_joint(log_w, log_a, indptr, indices, s, buf)
        z = exp_shifted(buf, n_components)
        c = row_count[s]
        if c == 1:  # one row: inverse CDF of one uniform
            f = inverse_cdf(buf, z, n_components)
            totals[f] += 1
            for k in range(indptr[s], indptr[s + 1]):
                counts[indices[k], f] += 1
            continue
        left = c  # a multinomial as sequential binomials
        rest = z
        for f in range(n_components):
            if left == 0:
                break
            if f == n_components - 1 or rest <= 0.0:
                n_f = left
            else:
                p = min(1.0, max(0.0, buf[f] / rest))
                n_f = np.random.binomial(left, p)  # noqa: NPY002
            rest -= buf[f]
            left -= n_f
            if n_f:
                totals[f] += n_f
                for k in range(indptr[s], indptr[s + 1]):
                    counts[indices[k], f] += n_f


def draw_class_counts(
    log_w, log_a, indptr, indices, row_count, rng, *, threads: int | None = None
):
    """Draw the class of every row and return the class and category-by-class counts.

    Parameters
    ----------
    log_w : ndarray, shape (F,)
        Log class weights.
    log_a : ndarray, shape (P, F)
        Log stacked factors: row ``offsets[n] + i`` is ``log A_n(i, .)``.
    indptr, indices : ndarray of int64
        CSR layout of the observed entries (flat indices ``offsets[n] + x_n``;
        :func:`bayespmf.pmf.observed_csr`).
    row_count : ndarray of int64, shape (S,)
        How many rows each (unique) row stands for (1 for plain rows).
    rng : numpy.random.Generator
        Draws one seed per block of :data:`BLOCK_ROWS` rows.
    threads : int, optional
        Threads over the blocks (default: the CPUs this process may use, at most one
        per block). The counts do not depend on it.

    Returns
    -------
    totals : ndarray of int64, shape (F,)
        :math:`n_f`, the rows drawn in each class.
    counts : ndarray of int64, shape (P, F)
        :math:`m_{j,f}`, the observed entries with flat index ``j`` in rows of
        class ``f``.

    Examples
    --------
    >>> from bayespmf.pmf import observed_csr
    >>> codes = np.array([[0, 1], [1, -1]])
    >>> indptr, indices = observed_csr(codes, [2, 2])
    >>> log_w, log_a = np.log([0.5, 0.5]), np.log(np.full((4, 2), 0.5))
    >>> t, m = draw_class_counts(
    ...     log_w, log_a, indptr, indices, np.array([3, 1]), np.random.default_rng(0)
    ... )
    >>> int(t.sum()), m.sum(axis=1).tolist()
    (4, [3, 1, 0, 3])
    """
    log_w = np.ascontiguousarray(log_w, dtype=np.float64)
    log_a = np.ascontiguousarray(log_a, dtype=np.float64)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    row_count = np.ascontiguousarray(row_count, dtype=np.int64)
    n_rows = indptr.size - 1
    n_components = log_w.size
    n_blocks = max(1, -(-n_rows // BLOCK_ROWS))
    seeds = rng.integers(2**31 - 1, size=n_blocks)
    totals = np.zeros((n_blocks, n_components), dtype=np.int64)
    counts = np.zeros((n_blocks, log_a.shape[0], n_components), dtype=np.int64)

    def run(b):
        lo, hi = b * BLOCK_ROWS, min(n_rows, (b + 1) * BLOCK_ROWS)
        _draw_block(
            log_w,
            log_a,
            indptr,
            indices,
            row_count,
            lo,
            hi,
            seeds[b],
            totals[b],
            counts[b],
        )

    run_blocks(run, n_blocks, threads)
    return totals.sum(axis=0), counts.sum(axis=0)


def run_blocks(run, n_blocks: int, threads: int | None) -> None:
    """``run(b)`` for every block ``b``, on up to ``threads`` threads (default: the CPUs).

    Each block has its own seed and output, so the result does not depend on the
    threads.
    """
    workers = min(n_blocks, n_cpus() if threads is None else max(1, int(threads)))
    if workers > 1:
        list(thread_pool(workers, os.getpid()).map(run, range(n_blocks)))
    else:
        for b in range(n_blocks):
            run(b)


def draw_dirichlet(alpha, rng):
    """Draw a Dirichlet along the last axis as normalized Gammas, in log space.

    ``log G`` of a Gamma(a) draw is taken as ``log G' + log(U) / a`` with
    ``G' ~ Gamma(a + 1)`` and ``U ~ U(0, 1]`` (exact), so a concentration far below 1
    (a tiny prior with no count) gives a log-probability instead of an underflow to 0.

    Parameters
    ----------
    alpha : ndarray, shape (..., K)
        Positive concentrations.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (..., K)
        Log-probabilities of the draw (each row's ``logsumexp`` is 0).

    Examples
    --------
    >>> x = draw_dirichlet(np.array([[1.0, 2.0, 3.0]]), np.random.default_rng(0))
    >>> bool(np.isclose(np.exp(x).sum(), 1.0))
    True
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    log_g = np.log(rng.gamma(alpha + 1.0)) + np.log1p(-rng.random(alpha.shape)) / alpha
    top = log_g.max(axis=-1, keepdims=True)
    return log_g - top - np.log(np.exp(log_g - top).sum(axis=-1, keepdims=True))


def draw_conjugate(w_alpha, a_alpha, offsets, rng):
    """Draw the class weights and every stacked factor's Dirichlet in one Gamma call.

    The draw of :func:`draw_dirichlet` (normalized Gammas in log space) for
    ``Dir(w_alpha)`` and, for every variable ``n`` and class ``f``, for the column
    ``a_alpha[offsets[n]:offsets[n + 1], f]``; all the Gammas come from one call of
    ``rng``, so a sweep pays NumPy's per-call cost once, not once per variable.

    Parameters
    ----------
    w_alpha : ndarray, shape (F,)
        Concentrations of the class weights.
    a_alpha : ndarray, shape (P, F)
        Stacked concentrations of the factors (rows ``offsets[n]`` to
        ``offsets[n + 1]`` are variable ``n``'s categories).
    offsets : ndarray of int64, shape (N + 1,)
        Start of each variable's rows, then ``P``.
    rng : numpy.random.Generator

    Returns
    -------
    log_w : ndarray, shape (F,)
        Log class weights (``logsumexp`` 0).
    log_a : ndarray, shape (P, F)
        Log stacked factors (each variable's column sums to 1 in probability), the
        layout :func:`draw_class_counts` takes.

    Examples
    --------
    >>> lw, la = draw_conjugate(np.ones(2), np.ones((5, 2)), np.array([0, 2, 5]),
    ...                         np.random.default_rng(0))
    >>> np.exp(la[:2]).sum(axis=0).round(12).tolist(), la.shape
    ([1.0, 1.0], (5, 2))
    """
    w_alpha = np.asarray(w_alpha, dtype=np.float64)
    a_alpha = np.asarray(a_alpha, dtype=np.float64)
    n_components = w_alpha.size
    flat = np.concatenate([w_alpha, a_alpha.ravel()])
    log_g = np.log(rng.gamma(flat + 1.0)) + np.log1p(-rng.random(flat.size)) / flat
    log_w = log_g[:n_components]
    top = log_w.max()
    log_w = log_w - top - np.log(np.exp(log_w - top).sum())
    log_a = log_g[n_components:].reshape(a_alpha.shape)
    starts = np.asarray(offsets[:-1], dtype=np.int64)
    sizes = np.diff(offsets)
    top = np.repeat(np.maximum.reduceat(log_a, starts, axis=0), sizes, axis=0)
    log_a = log_a - top
    norm = np.log(np.add.reduceat(np.exp(log_a), starts, axis=0))
    log_a -= np.repeat(norm, sizes, axis=0)
    return log_w, log_a
