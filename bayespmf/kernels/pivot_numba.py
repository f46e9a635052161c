r"""Simplex rows from pivot log-ratios, with their Dirichlet log-density, as numba loops.

A latent-class model has many small simplexes: the class weights and, for every
variable and class, the PMF of the variable given the class. Sampled as log-ratios
to a pivot entry :math:`p` (an additive log-ratio, see
:class:`bayespmf.models.latent_class.PivotLogRatio`), row :math:`r` with :math:`K_r`
entries is stored as :math:`K_r - 1` free numbers :math:`z_j = \log x_j - \log x_p`,
:math:`j \ne p`, and

.. math::

    \log x_k = z_k - \log \textstyle\sum_i e^{z_i} \quad (z_p = 0), \qquad
    \log p(z) = \textstyle\sum_k \alpha_k \log x_k + c

is the Dirichlet(:math:`\alpha`) log-density of the row plus the log-Jacobian
:math:`\sum_k \log x_k` of the map :math:`z \mapsto x` (so the exponent is
:math:`\alpha_k`, not :math:`\alpha_k - 1`). With :math:`c_k = g_{\mathrm{lp}}
\alpha_k + g_k` the weights of a cost :math:`g_{\mathrm{lp}} \log p + \sum_k g_k \log
x_k`, its gradient is :math:`\partial/\partial z_j = c_j - x_j \sum_k c_k`.

All rows of a model are one flat vector ``theta``; row ``r`` reads
``theta[start[r] : start[r] + size[r] - 1]`` and writes entry ``k`` of its
``log x`` to ``out[base[r] + k * stride[r]]``, so the output can be laid out as the
stacked ``log A`` matrix that :mod:`bayespmf.kernels.rows_numba` reads. These are the
kernels of :class:`bayespmf.models._pivot.PivotLogSimplexes`: one generic loop for any
number and size of simplexes, compiled once per machine and cached on disk, where the
same computation written as a PyTensor graph is a few kernels per variable, compiled
again for every model.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["pivot_log_simplexes", "pivot_log_simplexes_grad"]


@numba.njit(cache=True, nogil=True)
def _row_logits(theta, s0, k, p, z):  # pragma: no cover - numba
    """Fill ``z[:k]`` with row's logits (0 at the pivot); return their log-sum-exp."""
    top = 0.0
    j = 0
    for i in range(k):
        if i == p:
            z[i] = 0.0
        else:
            z[i] = theta[s0 + j]
            j += 1
        if z[i] > top:
            top = z[i]
    total = 0.0
    for i in range(k):
        total += np.exp(z[i] - top)
    return top + np.log(total)


@numba.njit(cache=True, nogil=True)
def pivot_log_simplexes(theta, start, size, pivot, base, stride, alpha):  # pragma: no cover
    """``(lp, out)``: the summed log-density (without constants) and every ``log x``.

    ``out`` has ``alpha.size`` entries; entries no row writes are left at 0.
    """
    out = np.zeros(alpha.size)
    z = np.empty(max(1, size.max()) if size.size else 1)
    lp = 0.0
    for r in range(start.size):
        lse = _row_logits(theta, start[r], size[r], pivot[r], z)
        for i in range(size[r]):
            e = base[r] + i * stride[r]
            out[e] = z[i] - lse
            lp += alpha[e] * out[e]
    return lp, out


@numba.njit(cache=True, nogil=True)
def pivot_log_simplexes_grad(
    theta, start, size, pivot, base, stride, alpha, g_lp, g_out
):  # pragma: no cover - numba
    """Gradient of ``g_lp * lp + sum(g_out * out)`` with respect to ``theta``."""
    grad = np.zeros(theta.size)
    z = np.empty(max(1, size.max()) if size.size else 1)
    for r in range(start.size):
        k, p, s0 = size[r], pivot[r], start[r]
        lse = _row_logits(theta, s0, k, p, z)
        c_sum = 0.0
        for i in range(k):
            e = base[r] + i * stride[r]
            c_sum += g_lp * alpha[e] + g_out[e]
        j = 0
        for i in range(k):
            if i == p:
                continue
            e = base[r] + i * stride[r]
            grad[s0 + j] = g_lp * alpha[e] + g_out[e] - np.exp(z[i] - lse) * c_sum
            j += 1
    return grad
