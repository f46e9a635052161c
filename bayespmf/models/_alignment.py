"""Label alignment of mixture posteriors by the Hungarian method (shared by the models)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.optimize import linear_sum_assignment

__all__ = ["apply_permutations", "hungarian_permutations"]


def hungarian_permutations(draws, reference, *, n_refine: int = 2) -> np.ndarray:
    """Per-draw permutations matching components to a reference.

    Parameters
    ----------
    draws : ndarray, shape (S, K, P)
        ``S`` draws of ``K`` components, each described by ``P`` numbers.
    reference : ndarray, shape (K, P)
        The pivot. After each round the pivot is replaced by the mean of the aligned
        draws and the matching repeated ``n_refine`` times.

    Returns
    -------
    ndarray of int, shape (S, K)
        ``perm[s, k]``: the raw component of draw ``s`` put at position ``k``; it
        minimizes ``sum_k ||reference_k - draw_{s, perm[s, k]}||^2``.

    Examples
    --------
    >>> ref = np.array([[0.0], [1.0]])
    >>> hungarian_permutations(np.array([[[1.0], [0.0]]]), ref).tolist()
    [[1, 0]]
    """
    draws = np.asarray(draws, dtype=float)
    ref = np.asarray(reference, dtype=float)
    perms = np.tile(np.arange(draws.shape[1]), (draws.shape[0], 1))
    # ||draw_{s, j}||^2 without a squared copy of every draw
    sq = np.einsum("sjp,sjp->sj", draws, draws)
    for _ in range(1 + max(0, int(n_refine))):
        # cost[s, i, j] = ||ref_i - draw_{s, j}||^2, for all draws at once
        cost = (
            (ref**2).sum(1)[None, :, None]
            + sq[:, None, :]
            - 2 * np.einsum("ip,sjp->sij", ref, draws)
        )
        perms = np.stack([linear_sum_assignment(cm)[1] for cm in cost])
        # the aligned draws' mean, one component at a time (no aligned copy)
        rows = np.arange(draws.shape[0])
        ref = np.stack([draws[rows, perms[:, k]].mean(axis=0) for k in range(ref.shape[0])])
    return perms


def apply_permutations(idata, perms, dim: str, stat_name: str):
    """Return a copy of ``idata`` whose posterior is relabeled along ``dim``.

    ``idata`` is an ArviZ 1 ``xarray.DataTree`` (what ``pm.sample`` returns).
    ``perms`` has shape (chain, draw, K). The raw draws go to the group
    ``unaligned_posterior`` and the permutations to ``sample_stats[stat_name]``.
    """
    post = idata["posterior"].to_dataset()
    idx = xr.DataArray(perms, dims=("chain", "draw", dim))
    aligned = post.copy()
    for var in post.data_vars:
        if dim in post[var].dims:
            aligned[var] = post[var].isel({dim: idx}).transpose(*post[var].dims)
    if dim in post.coords:
        aligned = aligned.assign_coords({dim: post[dim].values})
    new = idata.copy()
    new["posterior"] = aligned
    if "unaligned_posterior" not in new.children:
        new["unaligned_posterior"] = post
    stats = xr.DataArray(
        perms,
        dims=("chain", "draw", dim),
        coords={
            "chain": post["chain"].values,
            "draw": post["draw"].values,
            dim: np.arange(perms.shape[-1]),
        },
    )
    if "sample_stats" in new.children:
        sample_stats = new["sample_stats"].to_dataset()
        sample_stats[stat_name] = stats
        new["sample_stats"] = sample_stats
    else:
        new["sample_stats"] = xr.Dataset({stat_name: stats})
    return new
