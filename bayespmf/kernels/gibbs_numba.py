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
    "PAD_CLASSES",
    "REFLECT_MIN_SHAPE",
    "draw_class_counts",
    "draw_conjugate",
    "draw_dirichlet",
    "exp_shifted",
    "inverse_cdf",
    "reflect_log_gamma",
    "run_blocks",
    "thread_pool",
]

#: Rows (patterns) per block: each block has its own seed and its own counts.
BLOCK_ROWS = 4096

#: Up to this many classes, the label draw pads the weights and factors to it: the
#: per-row sum of the factors then runs over a constant number of lanes, which the
#: compiler unrolls and vectorizes (the padded classes have weight 0, so none is
#: drawn).
PAD_CLASSES = 8


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
def _inverse_cdf_at(buf, u, n_components):  # pragma: no cover - numba
    """The class whose cumulative weight ``buf`` first reaches ``u``."""
    f = 0
    acc = buf[0]
    while acc < u and f < n_components - 1:
        f += 1
        acc += buf[f]
    return f


@numba.njit(cache=True, nogil=True, inline="always")
def inverse_cdf(buf, z, n_components):  # pragma: no cover - numba
    """A class drawn with weights ``buf[:rank]`` (sum ``z``) by one uniform.

    The uniform comes from numba's generator, which the caller seeds.
    """
    return _inverse_cdf_at(buf, np.random.random() * z, n_components)  # noqa: NPY002


@numba.njit(cache=True, nogil=True, inline="always")
def _splitmix64(x):  # pragma: no cover - numba
    """SplitMix64 (Steele et al. 2014): the next state and its output."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x, z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, inline="always")
def _xoshiro_seed(seed, state):  # pragma: no cover - numba
    """``state`` (4 uint64) of xoshiro256+ from an integer seed, by SplitMix64."""
    x = np.uint64(seed)
    for i in range(4):
        x, state[i] = _splitmix64(x)


@numba.njit(cache=True, nogil=True, inline="always")
def _xoshiro_uniform(state):  # pragma: no cover - numba
    """A uniform on [0, 1) from xoshiro256+ (Blackman & Vigna 2021), 53 bits."""
    s0, s1, s2, s3 = state[0], state[1], state[2], state[3]
    out = s0 + s3
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = (s3 << np.uint64(45)) | (s3 >> np.uint64(19))
    state[0], state[1], state[2], state[3] = s0, s1, s2, s3
    return float(out >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True)
def _draw_block(
    log_w, log_a, indptr, indices, row_count, lo, hi, seed, totals, counts
):  # pragma: no cover - numba
    # the rows' uniforms: xoshiro256+ seeded by the block's seed (fast, this block
    # only); numba's own generator, one per thread, for the binomials of patterns
    state = np.empty(4, dtype=np.uint64)
    _xoshiro_seed(seed, state)
    np.random.seed(seed)  # noqa: NPY002
    n_components = totals.size  # log_w and log_a may be padded to PAD_CLASSES
    padded = log_w.size == PAD_CLASSES
    buf = np.empty(log_w.size)
    for s in range(lo, hi):
        if padded:  # a loop of constant length: compiled unrolled, in SIMD lanes
            for f in range(PAD_CLASSES):
                buf[f] = log_w[f]
            for k in range(indptr[s], indptr[s + 1]):
                j = indices[k]
                for f in range(PAD_CLASSES):
                    buf[f] += log_a[j, f]
        else:
            row_log_joint(log_w, log_a, indptr, indices, s, buf)
        z = exp_shifted(buf, n_components)
        c = row_count[s]
        if c == 1:  # one row: inverse CDF of one uniform
            f = _inverse_cdf_at(buf, _xoshiro_uniform(state) * z, n_components)
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
    indptr, indices : ndarray of int
        CSR layout of the observed entries (flat indices ``offsets[n] + x_n``;
        :func:`bayespmf.pmf.observed_csr`; ``indices`` in any integer type, e.g.
        the smallest that holds them, ``index_dtype``).
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
    indices = np.ascontiguousarray(indices)  # any integer type (observed_csr's)
    if indices.dtype.kind not in "iu":
        indices = indices.astype(np.int64)
    row_count = np.ascontiguousarray(row_count, dtype=np.int64)
    n_rows = indptr.size - 1
    n_components = log_w.size
    if n_components < PAD_CLASSES:  # padded: weight 0 (log -inf), factors 1 (log 0)
        log_w = np.concatenate([log_w, np.full(PAD_CLASSES - n_components, -np.inf)])
        log_a = np.hstack([log_a, np.zeros((log_a.shape[0], PAD_CLASSES - n_components))])
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


#: Concentrations from which :func:`reflect_log_gamma` reflects a Gamma; a smaller one
#: is drawn afresh (the Wilson-Hilferty map is too rough there to be accepted often).
REFLECT_MIN_SHAPE = 1.0


def _numba_seed(rng) -> int:
    """A seed of numba's generator (32 bits) drawn from a NumPy generator."""
    return int(rng.integers(2**31 - 1))


@numba.njit(cache=True, nogil=True, inline="always")
def _nb_log_gamma(alpha):  # pragma: no cover - numba
    """``log G``, ``G ~ Gamma(alpha)``, without underflow for ``alpha`` far below 1.

    ``log G' + log(U) / alpha`` with ``G' ~ Gamma(alpha + 1)`` and ``U ~ U(0, 1]``
    (as :func:`draw_dirichlet`), from numba's generator.
    """
    return math.log(np.random.gamma(alpha + 1.0, 1.0)) + (  # noqa: NPY002
        math.log1p(-np.random.random()) / alpha  # noqa: NPY002
    )


@numba.njit(cache=True, nogil=True, inline="always")
def _nb_reflect(log_old, alpha, rho):  # pragma: no cover - numba
    """One Gamma's move of :func:`reflect_log_gamma`: ``(log_new, accepted)``."""
    if alpha < REFLECT_MIN_SHAPE:
        return _nb_log_gamma(alpha), False
    log_a = math.log(alpha)
    log_y = (log_old - log_a) / 3.0
    y = math.exp(log_y)
    m = 1.0 - 1.0 / (9.0 * alpha)
    if rho >= 1.0:
        y_new = 2.0 * m - y
        log_q = 0.0  # the reflection is its own inverse, with unit Jacobian
    else:
        c = 1.0 / (3.0 * math.sqrt(alpha))
        xi = np.random.standard_normal()  # noqa: NPY002
        y_new = m - rho * (y - m) + math.sqrt(1.0 - rho * rho) * c * xi
        # the proposal is reversible for N(m, c^2): the ratio of that normal's density
        log_q = ((y_new - m) ** 2 - (y - m) ** 2) / (2.0 * c * c)
    if y_new <= 0.0:
        return log_old, False
    log_y_new = math.log(y_new)
    log_ratio = (
        (3.0 * alpha - 1.0) * (log_y_new - log_y) - alpha * (y_new**3 - y**3) + log_q
    )
    if math.log1p(-np.random.random()) < log_ratio:  # noqa: NPY002
        return 3.0 * log_y_new + log_a, True
    return log_old, False


@numba.njit(cache=True, nogil=True)
def _reflect_all(log_old, alpha, rho, seed, log_new, accepted):  # pragma: no cover
    np.random.seed(seed)  # noqa: NPY002
    for k in range(alpha.size):
        log_new[k], accepted[k] = _nb_reflect(log_old[k], alpha[k], rho)


@numba.njit(cache=True, nogil=True, inline="always")
def _nb_gammas(alpha, previous, rho, relax, out):  # pragma: no cover - numba
    """One Dirichlet vector (``alpha``) drawn or overrelaxed, normalized, into ``out``.

    Fresh: normalized Gammas. Overrelaxed: ``previous`` (its logs) lifted by a fresh
    scale ``Gamma(sum alpha)``, each Gamma moved by :func:`_nb_reflect`.
    """
    if relax:
        total = 0.0
        for k in range(alpha.size):
            total += alpha[k]
        log_s = _nb_log_gamma(total)
        for k in range(alpha.size):
            out[k] = _nb_reflect(previous[k] + log_s, alpha[k], rho)[0]
    else:
        for k in range(alpha.size):
            out[k] = _nb_log_gamma(alpha[k])
    top = out[0]
    for k in range(1, alpha.size):
        top = max(top, out[k])
    z = 0.0
    for k in range(alpha.size):
        z += math.exp(out[k] - top)
    norm = top + math.log(z)
    for k in range(alpha.size):
        out[k] -= norm


@numba.njit(cache=True, nogil=True)
def _conjugate(
    w_alpha, a_alpha, offsets, prev_w, prev_a, rho, relax, seed, out_w, out_a
):  # pragma: no cover - numba
    np.random.seed(seed)  # noqa: NPY002
    _nb_gammas(w_alpha, prev_w, rho, relax, out_w)
    n_components = w_alpha.size
    size = 0
    for n in range(offsets.size - 1):
        size = max(size, offsets[n + 1] - offsets[n])
    alpha, previous, out = np.empty(size), np.empty(size), np.empty(size)
    for n in range(offsets.size - 1):
        lo, hi = offsets[n], offsets[n + 1]
        for f in range(n_components):
            for i in range(lo, hi):
                alpha[i - lo] = a_alpha[i, f]
                previous[i - lo] = prev_a[i, f]
            _nb_gammas(alpha[: hi - lo], previous[: hi - lo], rho, relax, out)
            for i in range(lo, hi):
                out_a[i, f] = out[i - lo]


def reflect_log_gamma(log_old, alpha, rng, strength=1.0):
    r"""An overrelaxed move of independent Gamma variables, exact for ``Gamma(alpha)``.

    Each :math:`g \sim \mathrm{Gamma}(a)` with :math:`a \ge`
    :data:`REFLECT_MIN_SHAPE` is moved in the Wilson-Hilferty coordinate
    :math:`y = (g / a)^{1/3}`, nearly normal with mean :math:`m = 1 - 1 / (9a)` and
    standard deviation :math:`c = 1 / (3\sqrt{a})` (Wilson & Hilferty 1931), by
    Adler's (1981) overrelaxation with coefficient :math:`-\rho` (``strength``):
    :math:`y' = m - \rho (y - m) + \sqrt{1 - \rho^2}\, c\, \xi`, which is reversible
    for :math:`N(m, c^2)`; a Metropolis-Hastings test against the exact law of
    :math:`y`, :math:`\log p(y) = (3a - 1)\log y - a y^3`, makes the move leave
    :math:`\mathrm{Gamma}(a)` exactly invariant. Nearly every move is accepted. With
    ``strength`` 1 the move is the reflection :math:`y' = 2m - y`; below 1 it keeps
    some fresh noise, so that the size of a deviation is forgotten too (a pure
    reflection would keep it sweep after sweep where the data pin a value down). A
    concentration below :data:`REFLECT_MIN_SHAPE` gets a fresh draw. The moves are
    compiled; their random numbers come from numba's generator, seeded by one draw of
    ``rng``.

    Parameters
    ----------
    log_old : ndarray
        Logs of the current values.
    alpha : ndarray, same shape
        Their shapes (positive).
    rng : numpy.random.Generator
    strength : float, default 1.0
        :math:`\rho` in ``[0, 1]``: 0 is a fresh draw from the normal approximation
        (then tested), 1 the reflection.

    Returns
    -------
    log_new : ndarray
        Logs of the moved values.
    accepted : ndarray of bool
        Which moves were accepted (False where a fresh draw was made).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> alpha = np.full(20_000, 50.0)
    >>> g = np.exp(reflect_log_gamma(np.log(rng.gamma(alpha)), alpha, rng, 0.9)[0])
    >>> bool(abs(g.mean() - 50) < 0.3), bool(abs(g.var() - 50) < 3)
    (True, True)
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    log_old = np.broadcast_to(np.asarray(log_old, dtype=np.float64), alpha.shape)
    log_new = np.empty(alpha.shape)
    accepted = np.empty(alpha.shape, dtype=np.bool_)
    _reflect_all(
        log_old.ravel(),
        alpha.ravel(),
        float(strength),
        _numba_seed(rng),
        log_new.reshape(-1),
        accepted.reshape(-1),
    )
    return log_new, accepted


def draw_conjugate(w_alpha, a_alpha, offsets, rng, *, previous=None, strength=1.0):
    r"""Draw the class weights and every stacked factor's Dirichlet in one Gamma call.

    The draw of :func:`draw_dirichlet` (normalized Gammas in log space) for
    ``Dir(w_alpha)`` and, for every variable ``n`` and class ``f``, for the column
    ``a_alpha[offsets[n]:offsets[n + 1], f]``, in one compiled loop whose Gammas come
    from numba's generator seeded by one draw of ``rng``.

    With ``previous`` (the current log weights and factors) the update is
    overrelaxed instead of a fresh draw: each current Dirichlet vector
    :math:`\theta` is lifted to independent Gammas :math:`g = s\theta` with a fresh
    scale :math:`s \sim \mathrm{Gamma}(\sum_k \alpha_k)` (then
    :math:`g_k \sim \mathrm{Gamma}(\alpha_k)` independently), every :math:`g_k` is
    reflected by :func:`reflect_log_gamma`, and the result normalized. The move
    leaves each Dirichlet exactly invariant. In a Gibbs sampler whose labels are
    drawn from the current :math:`\theta`, the current :math:`\theta` is a draw of
    its conditional, so the move is a valid update; in the slow directions of the
    data augmentation it turns the autoregression :math:`r` of a fresh draw into
    about :math:`r - \rho(1 - r)` (:math:`\rho` the ``strength``), which for
    :math:`\rho` near 1 about halves the autocorrelation time (Adler 1981; Neal
    1998).

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
    previous : tuple of ndarray, optional
        ``(log_w, log_a)``, the current log weights and factors in the layout
        returned here: the update is then overrelaxed.
    strength : float, default 1.0
        The overrelaxation's strength (:func:`reflect_log_gamma`), with ``previous``.

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
    >>> lw2, la2 = draw_conjugate(np.full(2, 9.0), np.full((5, 2), 9.0),
    ...                           np.array([0, 2, 5]), np.random.default_rng(1),
    ...                           previous=(lw, la))
    >>> np.exp(la2[2:]).sum(axis=0).round(12).tolist()
    [1.0, 1.0]
    """
    w_alpha = np.ascontiguousarray(w_alpha, dtype=np.float64)
    a_alpha = np.ascontiguousarray(a_alpha, dtype=np.float64)
    relax = previous is not None
    prev_w, prev_a = (
        (w_alpha, a_alpha)  # unread
        if not relax
        else (
            np.ascontiguousarray(previous[0], dtype=np.float64),
            np.ascontiguousarray(previous[1], dtype=np.float64),
        )
    )
    log_w, log_a = np.empty_like(w_alpha), np.empty_like(a_alpha)
    _conjugate(
        w_alpha,
        a_alpha,
        np.asarray(offsets, dtype=np.int64),
        prev_w,
        prev_a,
        float(strength),
        relax,
        _numba_seed(rng),
        log_w,
        log_a,
    )
    return log_w, log_a
