"""Euclidean projection onto the probability simplex (NumPy and PyTensor versions)."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

__all__ = ["project_blocks", "project_simplex", "project_simplex_pt"]


def project_simplex(x, axis: int = 0) -> np.ndarray:
    """Project each slice of ``x`` along ``axis`` onto the probability simplex.

    Solves ``min_y ||y - x||_2`` s.t. ``y >= 0, sum(y) = 1`` by the sort-based
    algorithm (Held, Wolfe & Crowder 1974; Duchi et al. 2008), vectorized over the
    other axes.

    Parameters
    ----------
    x : array_like
    axis : int, default 0
        The axis along which each vector lives (0: columns of a matrix).

    Returns
    -------
    ndarray
        Same shape as ``x``; every slice along ``axis`` is non-negative and sums to 1.

    Examples
    --------
    >>> project_simplex(np.array([0.5, 0.8, -0.2]))
    array([0.35, 0.65, 0.  ])
    """
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    n = x.shape[-1]
    u = -np.sort(-x, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    k = np.arange(1, n + 1)
    cond = u - css / k > 0
    rho = n - 1 - np.argmax(cond[..., ::-1], axis=-1)  # last index where cond holds
    theta = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1)
    return np.moveaxis(np.maximum(x - theta, 0.0), -1, axis)


def project_blocks(x, offsets) -> np.ndarray:
    """Project every block of rows ``x[offsets[n]:offsets[n + 1]]`` column by column.

    The same as projecting each block with ``project_simplex(block, axis=0)`` and
    stacking the results, number for number, but the blocks of equal size are
    projected in one call (a latent-class model's variables often share their number
    of categories, so one call serves many of them).

    Parameters
    ----------
    x : array_like, shape (offsets[-1], ...)
    offsets : array_like of int
        Block boundaries, starting at 0 (e.g. :func:`bayespmf.pmf.offsets_of`).

    Returns
    -------
    ndarray
        Same shape as ``x``; every column of every block is on the simplex.

    Examples
    --------
    >>> x = np.array([[0.5], [0.8], [-0.2], [2.0], [0.0]])
    >>> project_blocks(x, [0, 3, 5]).ravel()
    array([0.35, 0.65, 0.  , 1.  , 0.  ])
    """
    x = np.asarray(x, dtype=float)
    offsets = np.asarray(offsets)
    sizes = np.diff(offsets)
    out = np.empty_like(x)
    for size in np.unique(sizes):
        starts = offsets[:-1][sizes == size]
        rows = (starts[:, None] + np.arange(size)).ravel()
        block = x[rows].reshape(starts.size, size, *x.shape[1:])
        out[rows] = project_simplex(block, axis=1).reshape(rows.size, *x.shape[1:])
    return out


def project_simplex_pt(x, axis: int = 0):
    """PyTensor graph of :func:`project_simplex` (same algorithm, symbolic input).

    Examples
    --------
    >>> import pytensor
    >>> v = pt.dvector("v")
    >>> f = pytensor.function([v], project_simplex_pt(v))
    >>> f(np.array([0.5, 0.8, -0.2]))
    array([0.35, 0.65, 0.  ])
    """
    x = pt.moveaxis(pt.as_tensor_variable(x), axis, -1)
    n = x.shape[-1]
    u = -pt.sort(-x, axis=-1)
    css = pt.cumsum(u, axis=-1) - 1.0
    k = pt.arange(1, n + 1).astype(x.dtype)
    cond = pt.gt(u - css / k, 0)
    rho = n - 1 - pt.argmax(cond[..., ::-1], axis=-1)
    theta = pt.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1)
    return pt.moveaxis(pt.maximum(x - theta, 0.0), -1, axis)
