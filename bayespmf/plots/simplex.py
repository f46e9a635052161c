"""Toy-simplex figures in the style of Fig. 1 of Yurochkin et al. (ICML 2019).

Matplotlib is imported lazily, so importing this module costs nothing.
"""

from __future__ import annotations

import itertools

import numpy as np

from bayespmf._validation import DataValidationError

__all__ = ["plot_simplex_estimates"]

#: At most this many data points are drawn (a random subset beyond it), so that figures
#: of large data sets stay light.
MAX_POINTS = 5000


def _projection(X: np.ndarray, n_dims: int):
    """Affine map to ``n_dims`` coordinates: identity if D <= n_dims, else top PCs."""
    center = X.mean(axis=0)
    D = X.shape[1]
    if D <= n_dims:
        return lambda A: np.asarray(A, dtype=float)
    _, _, Vt = np.linalg.svd(X - center, full_matrices=False)
    basis = Vt[:n_dims].T
    return lambda A: (np.asarray(A, dtype=float) - center) @ basis


def plot_simplex_estimates(
    X,
    estimates: dict | None = None,
    true_vertices=None,
    *,
    n_dims: int = 2,
    ax=None,
    max_points: int = MAX_POINTS,
    random_state=0,
    title: str | None = None,
):
    """Data points, the true simplex and each method's simplex, in 2-D or 3-D.

    Parameters
    ----------
    X : array_like (n, D)
        Data (frequencies for documents). When ``D > n_dims`` everything is projected
        on the top ``n_dims`` principal components of ``X``.
    estimates : dict of str -> array_like (K, D) or fitted estimator, optional
        Each method's vertices (or an object with ``vertices_``), e.g.
        ``{"VLAD": vlad, "GDM": gdm}``.
    true_vertices : array_like (K, D), optional
        Drawn in black.
    n_dims : {2, 3}, default 2
    ax : matplotlib Axes, optional
        Must be a 3-D axes for ``n_dims=3``.
    max_points : int, default 5000
        A random subset of at most this many points is drawn.
    random_state : int, default 0
        Seed of that subset.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    DataValidationError
        ``n_dims`` not 2 or 3, ``X`` not 2-D, or vertices with another ``D``.

    Examples
    --------
    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.3, 1.0]])
    >>> X = np.random.default_rng(0).dirichlet([2, 2, 2], 100) @ V
    >>> fig = plot_simplex_estimates(X, {"est": V + 0.05}, V)
    >>> len(fig.axes)
    1
    """
    import matplotlib.pyplot as plt

    if n_dims not in (2, 3):
        raise DataValidationError(f"'n_dims' must be 2 or 3; got {n_dims!r}.")
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise DataValidationError(f"'X' must be 2-D (n, D); got shape {X.shape}.")
    proj = _projection(X, n_dims)
    sets = {}
    if true_vertices is not None:
        sets["truth"] = np.asarray(true_vertices, dtype=float)
    for name, v in (estimates or {}).items():
        sets[name] = np.asarray(getattr(v, "vertices_", v), dtype=float)
    for name, v in sets.items():
        if v.ndim != 2 or v.shape[1] != X.shape[1]:
            raise DataValidationError(
                f"Vertices of {name!r} have shape {v.shape}; expected (K, {X.shape[1]})."
            )
    if ax is None:
        fig = plt.figure(figsize=(5.5, 5), layout="constrained")
        ax = fig.add_subplot(projection="3d" if n_dims == 3 else None)
    else:
        fig = ax.figure
    rng = np.random.default_rng(random_state)
    pts = X if X.shape[0] <= max_points else X[rng.choice(X.shape[0], max_points, False)]
    P = proj(pts)
    pad = np.zeros((P.shape[0], max(0, n_dims - P.shape[1])))
    P = np.hstack([P, pad])
    ax.scatter(*P.T[:n_dims], s=3, alpha=0.25, color="tab:gray", label="data")
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for name, v in sets.items():
        Q = proj(v)
        Q = np.hstack([Q, np.zeros((Q.shape[0], max(0, n_dims - Q.shape[1])))])
        color = "black" if name == "truth" else next(colors)
        style = "-" if name == "truth" else "--"
        for i, j in itertools.combinations(range(Q.shape[0]), 2):
            ax.plot(*Q[[i, j]].T[:n_dims], style, color=color, lw=1.5)
        ax.scatter(*Q.T[:n_dims], color=color, s=30, label=name, zorder=3)
    if X.shape[1] > n_dims:
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
        if n_dims == 3:
            ax.set_zlabel("PC 3")
    ax.legend(loc="best", fontsize=8)
    if title:
        ax.set_title(title)
    return fig
