"""The compiled passes of :func:`bayespmf.pmf.observed_csr` (imported on first use).

Two loops over the codes in their own integer type: the observed entries of every row,
then the rows' flat indices; nothing of the codes' size is allocated besides the result.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["csr_fill", "csr_row_counts"]


@numba.njit(cache=True, nogil=True)
def csr_row_counts(codes):  # pragma: no cover - numba
    """Observed entries (codes >= 0) of every row of ``codes``, as int64."""
    out = np.zeros(codes.shape[0], dtype=np.int64)
    for s in range(codes.shape[0]):
        k = 0
        for n in range(codes.shape[1]):
            if codes[s, n] >= 0:
                k += 1
        out[s] = k
    return out


@numba.njit(cache=True, nogil=True)
def csr_fill(codes, offsets, indptr, indices):  # pragma: no cover - numba
    """``indices[indptr[s]:indptr[s + 1]] = offsets[n] + codes[s, n]`` (observed n)."""
    for s in range(codes.shape[0]):
        k = indptr[s]
        for n in range(codes.shape[1]):
            x = codes[s, n]
            if x >= 0:
                indices[k] = offsets[n] + x
                k += 1
