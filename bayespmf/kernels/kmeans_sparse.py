"""k-means of sparse rows: :func:`bayespmf.kernels.kmeans.kmeans` takes them as they are.

``kmeans_sparse`` is kept as another name of :func:`~bayespmf.kernels.kmeans.kmeans`:
a SciPy sparse matrix of points is clustered without densifying it (each restart is
scikit-learn's ``KMeans`` on the sparse matrix; see the Notes of ``kmeans``).
"""

from __future__ import annotations

from bayespmf.kernels.kmeans import kmeans as kmeans_sparse

__all__ = ["kmeans_sparse"]
