r"""The class-summed log-likelihood of rows and its gradient, as fused numba loops.

For rows of N integer codes (``-1`` for a missing entry) and the stacked log factors
``log_a`` (``sum_n I_n`` rows, F columns; variable ``n`` owns rows ``offsets[n]`` to
``offsets[n] + I_n - 1``),

.. math::

    \ell_s = \log \sum_f \exp\big(\log\lambda_{sf} + \textstyle\sum_{n:\,x_{sn}
    \ \mathrm{observed}} \log A_n(x_{sn}, f)\big)

(Ibrahim & Fu, eq. (3)), and the responsibilities :math:`r_{sf}` (the softmax over
``f`` of the same sums) are the gradient of :math:`\ell_s` with respect to
:math:`\log\lambda_{sf}` and to every :math:`\log A_n(x_{sn}, f)` the row uses. So
the gradient of :math:`\sum_s g_s \ell_s` is one scatter-add of :math:`g_s r_{sf}`
into the rows of ``log_a`` the observed entries name (:func:`rows_loglik_grad`).

Each loop touches only the observed entries (S x N_observed x F additions), where
the one-hot formulation multiplies the dense S x sum(I_n) design. These are the
kernels of :class:`bayespmf.models._rows.ClassSummedLoglik`, the likelihood of the
PyMC latent-class models; compiled once per machine and cached on disk.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["rows_loglik", "rows_loglik_grad"]


@numba.njit(cache=True, nogil=True)
def rows_loglik(codes, offsets, n_cat, log_prior, log_a):  # pragma: no cover - numba
    """Per-row log-likelihood ``(S,)`` and responsibilities ``(S, F)``.

    ``log_prior`` is ``(1, F)`` (shared by every row) or ``(S, F)``. A row with a code
    outside ``[-1, I_n)``, or that no class can produce, has log-likelihood ``-inf``
    and responsibilities 0.

    Examples
    --------
    >>> codes = np.array([[0, 1], [-1, 1]])
    >>> la = np.log(np.array([[0.9, 0.2], [0.1, 0.8], [0.5, 0.5], [0.5, 0.5]]))
    >>> ll, r = rows_loglik(codes, np.array([0, 2]), np.array([2, 2]),
    ...                    np.log(np.array([[0.5, 0.5]])), la)
    >>> bool(np.isclose(ll[0], np.log(0.5 * 0.9 * 0.5 + 0.5 * 0.2 * 0.5)))
    True
    """
    n_rows, n_var = codes.shape
    n_components = log_a.shape[1]
    shared = log_prior.shape[0] == 1
    loglik = np.empty(n_rows)
    resp = np.zeros((n_rows, n_components))
    buf = np.empty(n_components)
    for s in range(n_rows):
        p = 0 if shared else s
        for f in range(n_components):
            buf[f] = log_prior[p, f]
        valid = True
        for n in range(n_var):
            c = codes[s, n]
            if c == -1:
                continue
            if c < -1 or c >= n_cat[n]:
                valid = False
                break
            j = offsets[n] + c
            for f in range(n_components):
                buf[f] += log_a[j, f]
        m = -math.inf
        for f in range(n_components):
            if buf[f] > m:
                m = buf[f]
        if not valid or not m > -math.inf:
            loglik[s] = -math.inf
            continue
        z = 0.0
        for f in range(n_components):
            buf[f] = math.exp(buf[f] - m)
            z += buf[f]
        loglik[s] = m + math.log(z)
        for f in range(n_components):
            resp[s, f] = buf[f] / z
    return loglik, resp


@numba.njit(cache=True, nogil=True)
def rows_loglik_grad(codes, offsets, n_cat, resp, g, n_stacked):  # pragma: no cover - numba
    """Gradient of ``sum_s g[s] * loglik[s]`` with respect to ``log_a`` ``(P, F)``.

    ``resp`` are :func:`rows_loglik`'s responsibilities (0 on impossible rows, which
    therefore add nothing); ``n_stacked`` is ``P = sum_n I_n``.
    """
    n_rows, n_var = codes.shape
    n_components = resp.shape[1]
    out = np.zeros((n_stacked, n_components))
    for s in range(n_rows):
        gs = g[s]
        if gs == 0.0:
            continue
        for n in range(n_var):
            c = codes[s, n]
            if c < 0 or c >= n_cat[n]:  # missing, or an impossible row (resp 0)
                continue
            j = offsets[n] + c
            for f in range(n_components):
                out[j, f] += gs * resp[s, f]
    return out
