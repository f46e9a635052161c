r"""The label draw of the latent-class regression: every row with its own class prior.

In the latent-class regression the class prior of row :math:`s` is
:math:`\operatorname{softmax}(z_s^\top\beta)`, so the class of a row is drawn from
:math:`\Pr(h_s = f \mid x_s) \propto \pi_{sf} \prod_{n\ \mathrm{observed}}
A_n(x_{sn}, f)`, in log space. :func:`draw_row_class_counts` draws every row's class
in one numba loop over the observed entries (CSR layout, the per-row gather of
:func:`bayespmf.kernels.em_numba.row_log_joint` with the row's own log prior) and
returns only what the Dirichlet conditionals of the factors need: the
category-by-class counts :math:`m_{j,f}`. The labels are not kept.

Reproducibility: as in :mod:`bayespmf.kernels.gibbs_numba`, the rows are cut into
blocks of :data:`bayespmf.kernels.gibbs_numba.BLOCK_ROWS` rows and block ``b`` draws
from numba's generator seeded with ``seeds[b]`` (drawn by the caller's NumPy
generator), so a seed gives the same counts whatever the number of threads.
"""

from __future__ import annotations

import numba
import numpy as np

from bayespmf.kernels.em_numba import row_log_joint
from bayespmf.kernels.gibbs_numba import BLOCK_ROWS, exp_shifted, inverse_cdf, run_blocks

__all__ = ["draw_row_class_counts", "row_prior_inputs"]


@numba.njit(cache=True, nogil=True)
def _draw_rows(log_prior, log_a, indptr, indices, lo, hi, seed, counts):  # pragma: no cover
    np.random.seed(seed)  # noqa: NPY002 - numba's generator, this block only
    n_components = log_prior.shape[1]
    buf = np.empty(n_components)
    for s in range(lo, hi):
        if indptr[s] == indptr[s + 1]:
            continue  # nothing observed: its class adds to no count
        row_log_joint(log_prior[s], log_a, indptr, indices, s, buf)
        f = inverse_cdf(buf, exp_shifted(buf, n_components), n_components)
        for k in range(indptr[s], indptr[s + 1]):
            counts[indices[k], f] += 1


def draw_row_class_counts(
    log_prior, log_a, indptr, indices, rng, *, threads: int | None = None
) -> np.ndarray:
    """Draw the class of every row, each from its own prior; return the entry counts.

    Parameters
    ----------
    log_prior : ndarray, shape (S, F)
        Log class prior of every row (e.g. ``log_softmax(Z @ beta)``).
    log_a : ndarray, shape (P, F)
        Log stacked factors: row ``offsets[n] + i`` is ``log A_n(i, .)``.
    indptr, indices : ndarray of int64
        CSR layout of the rows' observed entries (flat indices ``offsets[n] + x_n``;
        :func:`bayespmf.pmf.observed_csr`), ``S + 1`` pointers.
    rng : numpy.random.Generator
        Draws one seed per block of ``BLOCK_ROWS`` rows.
    threads : int, optional
        Threads over the blocks (default: the CPUs this process may use, at most one
        per block). The counts do not depend on it.

    Returns
    -------
    ndarray of int64, shape (P, F)
        :math:`m_{j,f}`, the observed entries with flat index ``j`` in rows drawn in
        class ``f``.

    Raises
    ------
    ValueError
        ``log_prior`` does not have one row per CSR row and one column per class.

    Examples
    --------
    >>> from bayespmf.pmf import observed_csr
    >>> indptr, indices = observed_csr(np.array([[0, 1], [1, -1]]), [2, 2])
    >>> log_prior = np.log([[1.0, 1e-300], [1e-300, 1.0]])  # row 0 in 0, row 1 in 1
    >>> m = draw_row_class_counts(log_prior, np.log(np.full((4, 2), 0.5)), indptr,
    ...                           indices, np.random.default_rng(0))
    >>> m.tolist()
    [[1, 0], [0, 1], [0, 0], [1, 0]]
    """
    log_prior, log_a, indptr, indices = row_prior_inputs(log_prior, log_a, indptr, indices)
    n_rows = indptr.size - 1
    n_blocks = max(1, -(-n_rows // BLOCK_ROWS))
    seeds = rng.integers(2**31 - 1, size=n_blocks)
    counts = np.zeros((n_blocks, *log_a.shape), dtype=np.int64)

    def run(b):
        lo, hi = b * BLOCK_ROWS, min(n_rows, (b + 1) * BLOCK_ROWS)
        _draw_rows(log_prior, log_a, indptr, indices, lo, hi, seeds[b], counts[b])

    run_blocks(run, n_blocks, threads)
    return counts.sum(axis=0)


def row_prior_inputs(log_prior, log_a, indptr, indices):
    """The label draw's arguments as contiguous float64 / int64 arrays, checked.

    Raises
    ------
    ValueError
        ``log_prior`` does not have one row per CSR row and one column per class.

    Examples
    --------
    >>> out = row_prior_inputs([[0.0, 0.0]], np.zeros((2, 2)), [0, 1], [0])
    >>> [a.dtype.name for a in out]
    ['float64', 'float64', 'int64', 'int64']
    """
    log_prior = np.ascontiguousarray(log_prior, dtype=np.float64)
    log_a = np.ascontiguousarray(log_a, dtype=np.float64)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    n_rows = indptr.size - 1
    if log_prior.ndim != 2 or log_prior.shape != (n_rows, log_a.shape[1]):
        raise ValueError(
            f"'log_prior' must have shape (rows, classes) = {(n_rows, log_a.shape[1])} "
            f"(one row per CSR row, one column per class of 'log_a'); got "
            f"{log_prior.shape}."
        )
    return log_prior, log_a, indptr, indices
