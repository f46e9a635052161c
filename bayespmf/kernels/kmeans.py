"""k-means with k-means++ restarts (VLAD, GDM and their calibrations).

Shared by the VLAD kernels (:mod:`bayespmf.kernels.vlad_geometry`,
:mod:`bayespmf.kernels.vlad_calibration`) and :mod:`bayespmf.kernels.extension_table`,
so that neither imports the other.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
from scipy import sparse

from bayespmf._runtime import n_cpus
from bayespmf._validation import check_random_state

__all__ = [
    "BATCHED_MIN_FEATURES",
    "DEFAULT_KMEANS_MAX_ITER",
    "DEFAULT_KMEANS_N_INIT",
    "kmeans",
]

#: k-means restarts: the paper's setting (Supplement B, "8 restarts and ++
#: initialization").
DEFAULT_KMEANS_N_INIT = 8

#: Lloyd iterations per k-means run (scikit-learn's default).
DEFAULT_KMEANS_MAX_ITER = 300

#: From this many columns on, the restarts run batched (all restarts in lockstep, one
#: matrix product per block of rows); below, each restart is one scikit-learn
#: ``KMeans`` run. The crossover was measured (:ref:`bench-kmeans`); see the Notes of
#: :func:`kmeans`.
BATCHED_MIN_FEATURES = 32

#: scikit-learn's ``KMeans`` default ``tol``, scaled by the mean variance of the data.
_KMEANS_TOL = 1e-4

#: The rows are cut into about this many blocks, the units of work of the threads.
_N_ROW_BLOCKS = 16

#: Largest block of the distance matrix (rows x restarts*clusters) one thread holds.
_BLOCK_BYTES = 8 * 2**20


def kmeans(
    points,
    n_clusters: int,
    *,
    n_init: int = DEFAULT_KMEANS_N_INIT,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    init=None,
    random_state=None,
    n_workers: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """k-means (scikit-learn's Lloyd with k-means++ seeding and restarts).

    Parameters
    ----------
    points : ndarray or scipy.sparse matrix (n, d)
        Sparse rows (a GDM of a document-term matrix) are clustered as they are,
        without densifying them (see the Notes).
    n_clusters : int
    n_init : int
        Restarts from k-means++ seeds; the run of lowest inertia is kept. 0 runs only
        from ``init`` (which must then be given).
    max_iter : int
    init : ndarray (n_clusters, d), optional
        An extra start, run once and kept if its inertia is lower. Its row order is
        kept: when it wins, centre ``k`` is the one that started at ``init[k]``.
    random_state : None, int or Generator
    n_workers : int, optional
        Threads; default one per core. The result does not depend on it.

    Returns
    -------
    centers : ndarray (n_clusters, d)
    labels : ndarray of int32 (n,)
    inertia : float

    Raises
    ------
    ValueError
        ``n_init`` is 0 and no ``init`` is given.

    Notes
    -----
    Every restart is scikit-learn's ``KMeans(n_init=1, random_state=seed)`` (default
    ``tol=1e-4``, Lloyd), with its own seed drawn from ``random_state``; ``init`` is
    ``KMeans(init=init, n_init=1)``. Ties in inertia go to the earlier restart, then
    to ``init``.

    *Few columns* (``d <`` :data:`BATCHED_MIN_FEATURES`, float32 data, or not a 2-d
    array): each restart is one scikit-learn ``KMeans`` run on one OpenMP and one BLAS
    thread, and the restarts run in a pool of ``n_workers`` Python threads (the Lloyd
    loop releases the GIL), without the per-iteration fork/join of scikit-learn's own
    OpenMP loop, which splits every Lloyd iteration in chunks of 256 points: with few
    columns the join costs more than the work, many times more on a loaded machine
    (:ref:`bench-kmeans`).

    *Many columns*: the ``R`` restarts run in lockstep, so that every Lloyd iteration
    reads the data once for all of them instead of once per restart: the product of
    the points with one restart's ``K`` centres is a thin matrix product that reads
    the whole data for little arithmetic, the product with the ``R * K`` centres of
    all restarts one GEMM that runs near the core's peak, far cheaper per centre
    (:ref:`bench-kmeans`):

    * seeding: scikit-learn's k-means++ (:func:`sklearn.cluster.kmeans_plusplus`,
      its default ``2 + int(log K)`` local trials), with the random draws of
      ``numpy.random.RandomState(seed)`` in scikit-learn's order, on the data centred
      as ``KMeans.fit`` centres it; the distances to the candidates of all restarts
      come from one product per step. So every restart starts where
      ``KMeans(random_state=seed)`` starts (the same centres, bit for bit, in
      ``tests/test_kmeans_batched.py``);
    * assignment: the distances ``||c||^2 - 2 x.c`` to the centres of all unfinished
      restarts, one GEMM per block of rows (scikit-learn's Lloyd step computes the
      same expression with a GEMM per 256 rows), and the first nearest centre;
    * update: the sum of each cluster's points, added in row order as scikit-learn's
      Lloyd step adds them on one thread (a sparse product of the transposed one-hot
      label matrix with the data), times the reciprocal of its size; an empty cluster
      takes the point farthest from its centre, as in scikit-learn
      (``_relocate_empty_clusters_dense``: the farthest points by
      ``np.argpartition``, the point's weight moved from its old cluster);
    * stopping, per restart, as scikit-learn: when the labels did not change, or when
      the summed squared centre shifts are at most ``1e-4`` times the mean variance of
      the columns, or after ``max_iter`` iterations; a finished restart leaves the
      batch. Unless its labels did not change, a last assignment to the final
      centres gives its labels, and its inertia is ``sum(||x||^2) + sum(||c||^2 -
      2 x.c)`` over the points and their centres.

    The threads share the blocks of rows of each product and the clusters of each
    update; every number is computed by the same operations in the same order
    whatever the number of threads (the blocks of rows are fixed by ``n`` alone), so
    the result does not depend on ``n_workers``. BLAS runs on one thread. The labels
    and inertia agree with scikit-learn's restarts up to rounding (the same labels
    and inertias to about 1e-15 relative in the tests); points exactly halfway
    between two centres could be assigned differently.

    GDM.fit (8 restarts, K = 10; ``gdm_times`` of ``benchmarks/dsn_figures.py``) is
    faster with the batched restarts than with scikit-learn's ``KMeans(n_init=8)`` with
    its own OpenMP threads and than with the per-restart runs, with the same labels and
    vertices bit for bit. The batching pays from a few dozen columns on (relative to
    the per-restart runs it is slower at d = 9 on large n, level at 16 and faster from
    32 on), hence :data:`BATCHED_MIN_FEATURES` = 32 (so VLAD's k-means in the ``K - 1``
    dimensions of its subspace and the extension table's in ``K`` stay on the
    per-restart path up to ``K = 32``). The timings are in :ref:`bench-kmeans`.

    *Sparse rows* (a SciPy sparse matrix, as float64 CSR) take the per-restart path
    whatever their number of columns: each restart is ``KMeans(n_init=1,
    random_state=seed)`` on the sparse matrix itself (scikit-learn's sparse Lloyd
    iterations and k-means++ seeding; the centres are dense ``(n_clusters, d)``), with
    the same seeds as on dense rows, so the same ``random_state`` gives the labels of
    the dense rows and their centres up to rounding (scikit-learn centres dense data and
    not sparse data, which changes the last bits).

    Examples
    --------
    >>> pts = np.array([[0.0], [0.1], [5.0], [5.1]])
    >>> c, lab, _ = kmeans(pts, 2, random_state=0)
    >>> np.sort(c.ravel()).round(2)
    array([0.05, 5.05])
    >>> c, lab, _ = kmeans(sparse.csr_matrix(pts), 2, random_state=0)
    >>> np.sort(c.ravel()).round(2)
    array([0.05, 5.05])
    """
    if n_init < 1 and init is None:
        raise ValueError(
            f"The 'n_init' parameter of kmeans must be >= 1 when no 'init' is given. "
            f"Got {n_init}. Pass n_init >= 1 or an 'init' array."
        )
    is_sparse = sparse.issparse(points)
    if is_sparse:
        points = sparse.csr_matrix(points, dtype=np.float64)
    else:
        points = np.asarray(points)
    seeds = check_random_state(random_state).integers(2**31 - 1, size=n_init)
    starts: list = [int(seed) for seed in seeds]
    if init is not None:
        starts.append(np.asarray(init))
    workers = max(1, n_workers or n_cpus())
    batched = (
        not is_sparse
        and points.ndim == 2
        and points.shape[1] >= BATCHED_MIN_FEATURES
        and points.dtype != np.float32
    )
    # BLAS threads are process-wide: limited once here, not from racing workers
    with _thread_pools().limit(limits=1, user_api="blas"):
        if batched:
            runs = _batched_runs(points, n_clusters, starts, max_iter, workers)
        else:
            runs = _threaded_runs(points, n_clusters, starts, max_iter, workers)
    return min(runs, key=lambda r: r[2])  # first of equal inertias


@functools.cache
def _thread_pools():
    """One ``threadpoolctl.ThreadpoolController`` for every k-means call of the process.

    ``threadpool_limits(...)`` finds the thread-pool libraries again on each call by
    reading ``/proc/self/maps``, which grows with every library the process loads (JAX,
    numba's LLVM, ...), and k-means limits the pools once per call and once per
    restart; the controller finds them once, as scikit-learn's own does. scikit-learn
    is imported first, so that its OpenMP runtime is among them.
    """
    import sklearn.cluster  # noqa: F401  (loads scikit-learn's OpenMP runtime)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


# --------------------------------------------------------------------------------------
# few columns: one scikit-learn KMeans run per restart, restarts in parallel threads


def _threaded_runs(points, n_clusters, starts, max_iter, workers):
    """One scikit-learn ``KMeans`` run per start, the starts in ``workers`` threads."""
    workers = min(len(starts), workers)

    def run(start):
        return _sklearn_run(points, n_clusters, start, max_iter)

    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(run, starts))
    return [run(start) for start in starts]


def _sklearn_run(points, n_clusters, start, max_iter):
    """One scikit-learn ``KMeans`` run (``n_init=1``) on one OpenMP thread."""
    from sklearn.cluster import KMeans

    # in each worker: omp_set_num_threads sets the calling thread's OpenMP threads
    with warnings.catch_warnings(), _thread_pools().limit(limits=1, user_api="openmp"):
        # Duplicate points (e.g. noise-free data at the vertices) make scikit-learn
        # warn that fewer distinct clusters were found; the centroids are valid.
        warnings.filterwarnings("ignore", message=".*distinct clusters.*")
        if isinstance(start, int):
            km = KMeans(n_clusters, n_init=1, max_iter=max_iter, random_state=start)
        else:
            km = KMeans(n_clusters, init=start, n_init=1, max_iter=max_iter)
        km.fit(points)
    return km.cluster_centers_, km.labels_, float(km.inertia_)


# --------------------------------------------------------------------------------------
# many columns: all restarts in lockstep


def _batched_runs(points, n_clusters, starts, max_iter, workers):
    """Every start's ``(centers, labels, inertia)``, all starts in lockstep."""
    X = np.asarray(points, dtype=np.float64, order="C")
    n = X.shape[0]
    if n < n_clusters:
        raise ValueError(f"n_samples={n} should be >= n_clusters={n_clusters}.")
    # as KMeans.fit: the tolerance from the data, then the data centred
    tol = float(np.mean(np.var(X, axis=0))) * _KMEANS_TOL
    mean = X.mean(axis=0)
    X = X - mean
    xsq = np.einsum("ij,ij->i", X, X)  # scikit-learn's row_norms(X, squared=True)
    n_trials = 2 + int(np.log(n_clusters))  # k-means++ candidates per step
    blocks = _row_blocks(n, len(starts) * max(n_clusters, n_trials))
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else nullcontext()
    with pool:

        def run(fn, items):
            if workers > 1:
                return list(pool.map(fn, items))
            return [fn(item) for item in items]

        return _lloyd(X, xsq, mean, tol, n_clusters, starts, max_iter, blocks, run, workers)


def _row_blocks(n: int, n_cols: int) -> list[tuple[int, int]]:
    """Blocks of consecutive rows, the threads' units of work in the products.

    Fixed by ``n`` and ``n_cols`` alone, so the same for any number of threads: about
    :data:`_N_ROW_BLOCKS` blocks of at least 256 rows and at most
    :data:`_BLOCK_BYTES` of distances, never a block of one row (a one-row product is
    a GEMV, whose rounding differs from the GEMM's).
    """
    size = max(256, -(-n // _N_ROW_BLOCKS))
    size = max(2, min(size, _BLOCK_BYTES // (8 * n_cols)))
    cuts = [*range(0, n, size), n]
    if len(cuts) > 2 and cuts[-1] - cuts[-2] == 1:
        del cuts[-2]
    return list(itertools.pairwise(cuts))


def _lloyd(X, xsq, mean, tol, n_clusters, starts, max_iter, blocks, run, workers):
    """scikit-learn's Lloyd iterations for all starts in lockstep (centred ``X``)."""
    n, d = X.shape
    n_starts = len(starts)
    centers = np.empty((n_starts, n_clusters, d))
    seeded = [r for r, start in enumerate(starts) if isinstance(start, int)]
    if seeded:
        centers[seeded] = _kmeans_plusplus(
            X, xsq, n_clusters, [starts[r] for r in seeded], blocks, run
        )
    for r, start in enumerate(starts):
        if not isinstance(start, int):
            centers[r] = np.asarray(start, dtype=np.float64) - mean
    labels = np.full((n_starts, n), -1, dtype=np.int32)
    part = np.empty((n_starts, n))  # ||c||^2 - 2 x.c to the assigned centres
    strict = np.zeros(n_starts, dtype=bool)  # stopped as no label changed
    final = np.zeros(n_starts, dtype=bool)  # part final too
    active = np.arange(n_starts)
    for _ in range(max_iter):
        old = centers[active]
        new_labels, new_part = _assign(X, old, blocks, run)
        sums, counts = _cluster_sums(X, new_labels, n_clusters, run, workers)
        new = _new_centers(X, old, new_labels, sums, counts)
        same = (new_labels == labels[active]).all(axis=1)
        shift = np.sqrt(((new - old) ** 2).sum(axis=2))  # per centre, as scikit-learn
        done = same | ((shift**2).sum(axis=1) <= tol)
        centers[active] = new
        labels[active] = new_labels
        # no label changed: scikit-learn keeps these labels, and the centres did not
        # move (the same sums), unless an empty cluster was moved
        strict[active] = same
        final[active] = same & (new == old).all(axis=(1, 2))
        part[active[final[active]]] = new_part[final[active]]
        active = active[~done]
        if active.size == 0:
            break
    # the others: scikit-learn's last assignment to the final centres
    rest = np.flatnonzero(~strict)
    if rest.size:
        labels[rest], part[rest] = _assign(X, centers[rest], blocks, run)
    for r in np.flatnonzero(strict & ~final):  # labels kept, centres moved
        c = centers[r][labels[r]]
        part[r] = np.einsum("ij,ij->i", c, c) - 2 * np.einsum("ij,ij->i", X, c)
    x_total = xsq.sum()
    # the inertia from the distances of the assignment
    return [
        (centers[r] + mean, labels[r].copy(), max(float(x_total + part[r].sum()), 0.0))
        for r in range(n_starts)
    ]


def _assign(X, centers, blocks, run):
    """Nearest centre of every point for every restart.

    Returns the labels and the partial squared distances ``||c||^2 - 2 x.c`` to the
    assigned centres, both of shape (R, n), for the centres (R, K, d) of ``R``
    restarts: per block of rows one GEMM with all R*K centres.
    """
    n_runs, n_clusters, d = centers.shape
    C = centers.reshape(-1, d)
    csq = np.einsum("ij,ij->i", C, C)
    labels = np.empty((n_runs, X.shape[0]), dtype=np.int32)
    part = np.empty((n_runs, X.shape[0]))

    def block(rows):
        a, b = rows
        dist = X[a:b] @ C.T
        dist *= -2.0
        dist += csq  # as scikit-learn's Lloyd step: ||c||^2 - 2 x.c
        dist = dist.reshape(b - a, n_runs, n_clusters)
        lab = dist.argmin(axis=2)  # the first of equal distances, as scikit-learn
        labels[:, a:b] = lab.T
        part[:, a:b] = np.take_along_axis(dist, lab[..., None], axis=2)[..., 0].T

    run(block, blocks)
    return labels, part


def _cluster_sums(X, labels, n_clusters, run, n_parts):
    """Sum and size of every cluster of every restart.

    The sums are the product of the transposed one-hot label matrix (R*K, n) with
    ``X`` (SciPy's CSC product: one pass over the rows of ``X``, each added to its
    clusters), so every sum adds its points in row order, the order in which
    scikit-learn's Lloyd step adds them on one thread. The threads take blocks of
    restarts (``n_parts``, the number of threads); each sum is computed whole by one
    thread, so the sums do not depend on the threads.
    """
    import scipy.sparse as sp

    n_runs, n = labels.shape
    counts = np.stack([np.bincount(lab, minlength=n_clusters) for lab in labels])
    sums = np.empty((n_runs, n_clusters, X.shape[1]))
    offsets = n_clusters * np.arange(n_runs, dtype=np.int32)[:, None]

    def part(runs):
        lo, hi = runs[0], runs[-1] + 1
        cols = np.ascontiguousarray((labels[lo:hi] + offsets[: hi - lo]).T).ravel()
        onehot = sp.csr_matrix(
            (np.ones(cols.size), cols, np.arange(0, cols.size + 1, hi - lo)),
            shape=(n, (hi - lo) * n_clusters),
        )
        sums[lo:hi] = (onehot.T @ X).reshape(hi - lo, n_clusters, -1)

    run(part, np.array_split(np.arange(n_runs), min(n_parts, n_runs)))
    return sums, counts.astype(np.float64)


def _new_centers(X, old, labels, sums, counts):
    """Cluster means of every restart, as scikit-learn's Lloyd step.

    Empty clusters first take far points (:func:`_relocate_empty`); then each sum
    times the reciprocal of its size (``_average_centers``).
    """
    for r in np.flatnonzero((counts == 0).any(axis=1)):
        _relocate_empty(X, old[r], sums[r], counts[r], labels[r])
    filled = counts > 0
    new = sums * (1.0 / np.where(filled, counts, 1.0))[..., None]
    for r in np.flatnonzero(~filled.all(axis=1)):
        # still empty (more clusters than distinct points): at the largest cluster
        new[r, ~filled[r]] = new[r, np.argmax(counts[r])]
    return new


def _relocate_empty(X, centers_old, sums, counts, labels):
    """scikit-learn's ``_relocate_empty_clusters_dense`` for one restart, in place.

    Each empty cluster takes one of the points farthest from their centres (by
    ``np.argpartition``), whose weight leaves its old cluster; its label is kept.
    """
    empty = np.flatnonzero(counts == 0)
    dist = ((X - centers_old[labels]) ** 2).sum(axis=1)
    far = np.argpartition(dist, -empty.size)[: -empty.size - 1 : -1]
    if np.max(dist) == 0:  # more clusters than distinct points
        return
    for new, idx in zip(empty, far, strict=True):
        old = labels[idx]
        sums[old] -= X[idx]
        sums[new] = X[idx]
        counts[new] = 1.0
        counts[old] -= 1.0


def _kmeans_plusplus(X, xsq, n_clusters, seeds, blocks, run):
    """scikit-learn's k-means++ seeding for several seeds at once.

    As ``sklearn.cluster._kmeans._kmeans_plusplus`` with unit weights and its default
    ``2 + int(log(n_clusters))`` local trials: the random draws are those of
    ``numpy.random.RandomState(seed)`` in scikit-learn's order and the arithmetic is
    scikit-learn's (``_euclidean_distances``); only the distances to the candidates of
    all seeds come from one product per step, cut in the blocks of rows (blocks of a
    GEMM give the numbers of the whole GEMM).
    """
    n, d = X.shape
    n_trials = 2 + int(np.log(n_clusters))
    weight = np.ones(n)
    rngs = [np.random.RandomState(seed) for seed in seeds]
    rows = np.arange(len(seeds))
    centers = np.empty((len(seeds), n_clusters, d))
    first = np.array([rng.choice(n, p=weight / weight.sum()) for rng in rngs])
    centers[:, 0] = X[first]
    # one seed at a time: a one-row product is a GEMV, as in scikit-learn
    closest = np.concatenate(run(lambda i: _sq_dist(X[[i]], X, xsq), first))
    pot = [closest[[r]] @ weight for r in rows]
    for c in range(1, n_clusters):
        cand = np.empty((len(seeds), n_trials), dtype=np.intp)
        for r, rng in enumerate(rngs):
            rand = rng.uniform(size=n_trials) * pot[r]
            cand[r] = np.searchsorted(np.cumsum(weight * closest[r]), rand)
        np.clip(cand, None, n - 1, out=cand)
        A = X[cand.ravel()]
        dist = np.empty((A.shape[0], n))

        def block(rows_, A=A, dist=dist):
            a, b = rows_
            dist[:, a:b] = _sq_dist(A, X[a:b], xsq[a:b])

        run(block, blocks)
        dist = dist.reshape(len(seeds), n_trials, n)
        np.minimum(closest[:, None, :], dist, out=dist)
        best = np.empty(len(seeds), dtype=np.intp)
        for r in rows:
            cand_pot = dist[r] @ weight.reshape(-1, 1)
            best[r] = np.argmin(cand_pot)
            pot[r] = cand_pot[best[r]]
        closest = dist[rows, best]
        centers[:, c] = X[cand[rows, best]]
    return centers


def _sq_dist(A, X, xsq):
    """Squared distances of the rows of ``A`` to those of ``X`` (norms ``xsq``).

    scikit-learn's ``_euclidean_distances(A, X, Y_norm_squared=xsq, squared=True)``
    for float64 data, in its order of operations.
    """
    out = -2 * (A @ X.T)
    out += np.einsum("ij,ij->i", A, A)[:, None]
    out += xsq[None, :]
    return np.maximum(out, 0, out=out)
