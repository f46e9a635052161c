"""k-means with k-means++ restarts run side by side (VLAD, GDM and their calibrations).

Shared by :mod:`bayespmf.kernels.vlad` and :mod:`bayespmf.kernels.extension_table`, so
that neither imports the other.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from bayespmf._runtime import n_cpus
from bayespmf._validation import check_random_state

__all__ = ["DEFAULT_KMEANS_MAX_ITER", "DEFAULT_N_INIT", "kmeans"]

#: k-means restarts: the paper's setting (Supplement B, "8 restarts and ++
#: initialization").
DEFAULT_N_INIT = 8

#: Lloyd iterations per k-means run (scikit-learn's default).
DEFAULT_KMEANS_MAX_ITER = 300


def kmeans(
    points,
    n_clusters: int,
    *,
    n_init: int = DEFAULT_N_INIT,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    init=None,
    random_state=None,
    n_workers: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """k-means (scikit-learn's Lloyd with k-means++ seeding and restarts).

    Parameters
    ----------
    points : ndarray (n, d)
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
        Threads that run the restarts side by side; default one per core (at most one
        per run). The result does not depend on it.

    Returns
    -------
    centers : ndarray (n_clusters, d)
    labels : ndarray of int (n,)
    inertia : float

    Raises
    ------
    ValueError
        ``n_init`` is 0 and no ``init`` is given.

    Notes
    -----
    Each restart is one scikit-learn ``KMeans`` run (``n_init=1``) with its own seed
    drawn from ``random_state``, on one OpenMP and one BLAS thread; the restarts run in
    a pool of ``n_workers`` Python threads (the Lloyd loop releases the GIL). So the
    cores are used without the per-iteration fork/join of scikit-learn's own OpenMP
    loop, which splits every Lloyd iteration in chunks of 256 points: with few
    columns the join costs more than the work (on the project's 2-core machine under
    load, load average 9, 10-means on 9-dim points took 0.48 s / 2.6 s / 7.0 s with
    the default threads and 0.007 s / 0.019 s / 0.34 s with one, for n = 300 / 3,000 /
    30,000), and on a busy machine every join waits for the slowest thread (GDM on
    n = 5,000 multinomial documents, D = 2,000, load average 4.4: 13.8 s on one thread,
    23.9 s on two). Restarts in parallel have no joins: on a busy machine they take
    the time of the serial runs, on a free one that divided by the workers. Ties in
    inertia go to the earlier restart, then to ``init``, so the result is the same for
    any ``n_workers``.

    Examples
    --------
    >>> pts = np.array([[0.0], [0.1], [5.0], [5.1]])
    >>> c, lab, _ = kmeans(pts, 2, random_state=0)
    >>> np.sort(c.ravel()).round(2)
    array([0.05, 5.05])
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    if n_init < 1 and init is None:
        raise ValueError(
            f"The 'n_init' parameter of kmeans must be >= 1 when no 'init' is given. "
            f"Got {n_init}. Pass n_init >= 1 or an 'init' array."
        )
    points = np.asarray(points)
    seeds = check_random_state(random_state).integers(2**31 - 1, size=n_init)
    starts: list = [int(seed) for seed in seeds]
    if init is not None:
        starts.append(np.asarray(init))

    def run(start):
        # in each worker: omp_set_num_threads sets the calling thread's OpenMP threads
        with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="openmp"):
            # Duplicate points (e.g. noise-free data at the vertices) make scikit-learn
            # warn that fewer distinct clusters were found; the centroids are valid.
            warnings.filterwarnings("ignore", message=".*distinct clusters.*")
            if isinstance(start, int):
                km = KMeans(n_clusters, n_init=1, max_iter=max_iter, random_state=start)
            else:
                km = KMeans(n_clusters, init=start, n_init=1, max_iter=max_iter)
            km.fit(points)
        return km.cluster_centers_, km.labels_, float(km.inertia_)

    workers = min(len(starts), n_workers or n_cpus())
    # BLAS threads are process-wide: limited once here, not from racing workers
    with threadpool_limits(limits=1, user_api="blas"):
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                runs = list(pool.map(run, starts))
        else:
            runs = [run(start) for start in starts]
    return min(runs, key=lambda r: r[2])  # first of equal inertias
