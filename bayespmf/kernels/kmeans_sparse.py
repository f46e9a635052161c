"""k-means of sparse rows (GDM on a document-term matrix) without densifying them."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import sparse

from bayespmf._validation import check_random_state
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, DEFAULT_N_INIT

__all__ = ["kmeans_sparse"]


def kmeans_sparse(
    points,
    n_clusters: int,
    *,
    n_init: int = DEFAULT_N_INIT,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """k-means of the rows of a SciPy sparse matrix, restarts as :func:`kmeans`.

    Each restart is scikit-learn's ``KMeans(n_init=1, random_state=seed)`` on the
    sparse matrix itself (its sparse Lloyd iterations and k-means++ seeding; the
    centres are dense ``(n_clusters, d)``), with the seeds drawn from
    ``random_state`` as :func:`bayespmf.kernels.kmeans.kmeans` draws them, so the
    same ``random_state`` gives the labels of :func:`~bayespmf.kernels.kmeans.kmeans`
    on the dense rows and its centres up to rounding (scikit-learn centres dense data
    and not sparse data, which changes the last bits). The run of lowest inertia is
    kept (the first of equal ones).

    Parameters
    ----------
    points : scipy.sparse matrix (n, d)
    n_clusters : int
    n_init, max_iter : int
        Restarts and Lloyd iterations per restart.
    random_state : None, int or Generator

    Returns
    -------
    centers : ndarray (n_clusters, d)
    labels : ndarray of int32 (n,)
    inertia : float

    Examples
    --------
    >>> pts = sparse.csr_matrix([[0.0, 1.0], [0.0, 1.1], [5.0, 0.0], [5.1, 0.0]])
    >>> c, lab, _ = kmeans_sparse(pts, 2, random_state=0)
    >>> np.sort(c[:, 0]).round(2)
    array([0.  , 5.05])
    """
    from sklearn.cluster import KMeans

    points = sparse.csr_matrix(points, dtype=np.float64)
    seeds = check_random_state(random_state).integers(2**31 - 1, size=n_init)
    runs = []
    for seed in seeds:
        with warnings.catch_warnings():
            # duplicate rows: fewer distinct clusters than asked; the centres are valid
            warnings.filterwarnings("ignore", message=".*distinct clusters.*")
            km = KMeans(n_clusters, n_init=1, max_iter=max_iter, random_state=int(seed))
            km.fit(points)
        runs.append((km.cluster_centers_, km.labels_.astype(np.int32), float(km.inertia_)))
    return min(runs, key=lambda r: r[2])
