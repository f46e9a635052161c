"""Euclidean projection onto the probability simplex (NumPy and PyTensor versions)."""

from __future__ import annotations

import functools

import numpy as np
import pytensor.tensor as pt

__all__ = ["MICHELOT_MIN_SIZE", "project_blocks", "project_simplex", "project_simplex_pt"]

#: :func:`project_blocks` projects a block of at least this many rows (a variable of as
#: many categories) by Michelot's iteration, a few passes over the block, instead of
#: sorting it (:func:`project_simplex`); smaller blocks of equal size are sorted
#: together in one call.
MICHELOT_MIN_SIZE = 256


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
    stacking the results, but the blocks of equal size are projected in one call (a
    latent-class model's variables often share their number of categories, so one call
    serves many of them), and a block of at least :data:`MICHELOT_MIN_SIZE` rows by
    Michelot's iteration, which needs no sort (equal up to rounding).

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
        if size >= MICHELOT_MIN_SIZE:  # few blocks, each long: no sort
            for lo in starts.tolist():
                out[lo : lo + size] = _project_michelot(x[lo : lo + size])
            continue
        rows = (starts[:, None] + np.arange(size)).ravel()
        block = x[rows].reshape(starts.size, size, *x.shape[1:])
        out[rows] = project_simplex(block, axis=1).reshape(rows.size, *x.shape[1:])
    return out


def _project_michelot(x):
    """:func:`project_simplex` of the columns of ``x`` (axis 0) by Michelot's iteration.

    The threshold ``theta`` of the projection ``max(x - theta, 0)`` solves
    ``sum_i max(x_i - theta, 0) = 1``. Michelot (1986) finds it without sorting: from
    the set of all entries, ``theta = (sum of the set - 1) / |set|``, then the entries
    at or below ``theta`` leave the set, until none does. ``theta`` only rises, so an
    entry that left stays below it, and the largest entry never leaves: the result is
    the exact projection (up to rounding) in a few passes over a shrinking set, where
    the sort needs ``log n`` passes over all of it.
    """
    flat = np.ascontiguousarray(x.reshape(x.shape[0], -1), dtype=float)
    theta = _michelot_kernel()(flat)
    return np.maximum(x - theta.reshape(1, *x.shape[1:]), 0.0)


@functools.cache
def _michelot_kernel():
    """The compiled :func:`_michelot_thresholds` (numba imported on first use)."""
    import numba

    return numba.njit(cache=True, nogil=True)(_michelot_thresholds)


def _michelot_thresholds(x):  # pragma: no cover - numba
    """The threshold of :func:`_project_michelot` of every column of ``x`` (n, m)."""
    n, m = x.shape
    theta = np.empty(m)
    kept = np.empty(n)
    for j in range(m):
        total = 0.0
        for i in range(n):
            kept[i] = x[i, j]
            total += kept[i]
        count = n
        t = (total - 1.0) / count
        while True:
            new_count = 0
            new_total = 0.0
            for i in range(count):
                v = kept[i]
                if v > t:
                    kept[new_count] = v
                    new_count += 1
                    new_total += v
            if new_count == count:
                break
            count = new_count
            total = new_total
            t = (total - 1.0) / count
        theta[j] = t
    return theta


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
