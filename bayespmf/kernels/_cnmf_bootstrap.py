"""Parametric bootstrap of pairwise marginals: ``X*_jk ~ Mult(n_jk, M_jk) / n_jk``.

Private to :mod:`bayespmf.kernels`: what CNMF-SPA's split selection
(:func:`bayespmf.kernels.cnmf_spa.cnmf_spa`, ``selection="bootstrap"``) refits every
candidate split on. :func:`replicate` draws one replicate; :func:`replicate_plan`,
:func:`replicate_base` and :func:`draw_replicate` are its parts, shared by the
replicates of one model.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "REPLICATE_BATCH_ENTRIES",
    "draw_replicate",
    "replicate",
    "replicate_base",
    "replicate_plan",
]

#: Block entries per call of ``Generator.multinomial`` when the bootstrap of CNMF-SPA
#: resamples the pairwise marginals (bounds the padded array of one call: 32 MiB).
REPLICATE_BATCH_ENTRIES = 2**22


def replicate_plan(model, counts, offsets, observed) -> list:
    """What every bootstrap replicate of ``model`` draws (see :func:`replicate`).

    The observed pairs ``j < k`` in row-major order, in batches of at most
    ``REPLICATE_BATCH_ENTRIES`` block entries (and at least one pair): per batch the
    counts ``n_jk``, the probabilities ``M_jk / sum M_jk`` of each pair right-aligned
    in a zero-padded row, which entries of the padded rows are the blocks' (``take``)
    and where they land in the flattened matrix (``upper``: block ``(j, k)``,
    ``lower``: its transpose ``(k, j)``). It depends on the model only, so the
    replicates of one model share it.
    """
    n_cat = np.diff(offsets)
    n_total = int(offsets[-1])
    jj, kk = np.nonzero(np.triu(observed, k=1))  # row-major: the order of the draws
    size = n_cat[jj] * n_cat[kk]
    n_all = counts[jj, kk].astype(np.int64)  # int(): truncation, as one count per pair
    ends = np.cumsum(size)
    batches, start = [], 0
    while start < jj.size:
        base = ends[start - 1] if start else 0
        stop = max(
            start + 1,
            int(np.searchsorted(ends, base + REPLICATE_BATCH_ENTRIES, side="right")),
        )
        j, k, sz = jj[start:stop], kk[start:stop], size[start:stop]
        first = np.concatenate([[0], np.cumsum(sz)[:-1]])
        pair = np.repeat(np.arange(sz.size), sz)
        local = np.arange(pair.size) - first[pair]  # a * I_k + b within the block
        width = n_cat[k][pair]
        rows = offsets[j][pair] + local // width
        cols = offsets[k][pair] + local % width
        p = np.maximum(model[rows, cols], 0.0)
        total = np.empty(sz.size)
        by_size = np.argsort(sz, kind="stable")
        cuts = np.flatnonzero(np.diff(sz[by_size])) + 1
        for same in np.split(by_size, cuts):  # blocks of one size: np.sum of each
            total[same] = p[first[same][:, None] + np.arange(sz[same[0]])].sum(axis=1)
        length = int(sz.max())
        take = pair * length + (length - sz[pair] + local)  # right-aligned
        pvals = np.zeros((sz.size, length))
        pvals.reshape(-1)[take] = p / total[pair]
        small = np.int32 if max(pvals.size, n_total * n_total) < 2**31 else np.int64
        upper = (rows * n_total + cols).astype(small)
        lower = (cols * n_total + rows).astype(small)
        batches.append((n_all[start:stop], pvals, take.astype(small), upper, lower))
        start = stop
    return batches


def draw_replicate(out, plan, rng) -> None:
    """Write one draw of every pair of ``plan`` into both triangles of ``out``."""
    flat = out.reshape(-1)
    for n, pvals, take, upper, lower in plan:
        block = (rng.multinomial(n, pvals) / n[:, None]).reshape(-1)[take]
        flat[upper] = block
        flat[lower] = block


def replicate_base(model, offsets) -> np.ndarray:
    """What every replicate holds besides the draws: zeros, the model's diagonal blocks."""
    out = np.zeros_like(model)
    for j in range(offsets.size - 1):
        rj = slice(int(offsets[j]), int(offsets[j + 1]))
        out[rj, rj] = model[rj, rj]
    return out


def replicate(model, counts, offsets, observed, rng, plan=None) -> np.ndarray:
    """Pairwise marginals resampled from ``model``: ``Mult(n_jk, M_jk) / n_jk`` per pair.

    Observed pairs only (the others stay zero, as CNMF-SPA never reads them); the
    diagonal blocks are the model's (CNMF-SPA does not read them either).

    The pairs ``j < k`` are drawn in row-major order, a batch of pairs per call of
    ``Generator.multinomial`` (``plan``: :func:`replicate_plan`, made here when not
    given). A leading zero probability draws nothing from the generator, so the
    right-aligned padded rows give the draws of one call per pair (the same stream),
    while the Python work is per batch, not per pair (N = 2000 variables: 2e6 pairs).
    """
    if plan is None:
        plan = replicate_plan(model, counts, offsets, observed)
    out = replicate_base(model, offsets)
    draw_replicate(out, plan, rng)
    return out
