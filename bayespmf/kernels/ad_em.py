r"""MLE-AD-EM: alternating-directions likelihood sweeps, then EM (Yeredor & Haardt).

The maximum-likelihood latent-class PMF from partially observed rows,

.. math:: \max_{\lambda, A_1..A_N} \sum_t \log \sum_f \lambda_f
    \prod_{n \in \mathcal O_t} A_n(x_{n,t}, f)

(Chege et al., eq. (4); Ibrahim & Fu, App. C.1), is concave in each "direction"
:math:`A_n` (or :math:`\lambda`) when the others are fixed: the probability of every
row is linear in it, so each direction is a convex KL-divergence minimization
(empirical distribution of the row's entry against a mixture with known components).
Yeredor & Haardt's AD stage maximizes the likelihood direction by direction; its
output initializes EM; :func:`bayespmf.fit.ad_em` runs both stages. Ibrahim & Fu (Sec. 5.1)
use the combination as the "MLE-AD-EM" baseline; Chege et al. (Sec. IV-A) run 20 AD
iterations before EM.

References
----------
.. [1] A. Yeredor and M. Haardt, "Maximum likelihood estimation of a low-rank
   probability mass tensor from partial observations," IEEE SPL 26(10), 2019.
.. [2] J. K. Chege, M. J. Grasis, A. Manina, A. Yeredor, M. Haardt, "Efficient
   probability mass function estimation from partially observed data".
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from bayespmf.kernels.em import COUNT_FLOOR

__all__ = ["DEFAULT_AD_ITER", "DEFAULT_INNER_ITER", "ad_sweep"]

#: AD iterations before EM: "for AD-EM, 20 AD iterations are used to initialize the
#: subsequent EM part" (Chege et al., Sec. IV-A).
DEFAULT_AD_ITER = 20

#: Fixed-point iterations spent on each direction per AD iteration. Each is one
#: pass over the rows observing the variable; the direction's sub-problem is concave
#: and every pass is monotone, so more passes only get closer to its maximum. 10 is a
#: cost/accuracy compromise, not a tuned value.
DEFAULT_INNER_ITER = 10


def _direction(logits: np.ndarray, codes: np.ndarray | None, n_cat: int):
    r"""Maximize :math:`\sum_t \log \sum_f e^{\ell_{tf}} p(c_t, f)` over column PMFs ``p``.

    ``logits`` (T, F) are the log-contributions of everything else; ``codes`` (T,) the
    row's category (``None`` for the prior :math:`\lambda`, one "category" per class).
    One iteration of the fixed point :math:`p(i, f) \propto \sum_{t: c_t = i}
    \gamma_{tf}` with :math:`\gamma_{tf} \propto e^{\ell_{tf}} p(c_t, f)`, which is
    the stationarity condition of the concave problem (Lagrange multiplier of
    :math:`\mathbf 1^\top p(:, f) = 1` equal to :math:`\sum_t \gamma_{tf}`) and an EM
    map for it (so the direction's likelihood never decreases).
    """
    if codes is not None:
        indicator = sp.csr_array(
            (np.ones(codes.size), (codes, np.arange(codes.size))),
            shape=(n_cat, codes.size),
        )

    def step(log_p):
        lj = logits + (log_p if codes is None else log_p[codes])
        resp = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))
        if codes is None:
            tot = resp.sum(axis=0) + COUNT_FLOOR
            return np.log(tot / tot.sum())
        counts = indicator @ resp + COUNT_FLOOR
        return np.log(counts / counts.sum(axis=0, keepdims=True))

    return step


def ad_sweep(codes, n_categories, weights, factors, *, inner_iter=DEFAULT_INNER_ITER):
    r"""One alternating-directions iteration: :math:`A_1, \dots, A_N`, then lambda.

    Parameters
    ----------
    codes : ndarray of int, shape (S, N)
        Validated codes (``-1`` missing).
    n_categories : sequence of int
    weights : ndarray, shape (F,)
    factors : list of ndarray, each (I_n, F)
    inner_iter : int
        Fixed-point passes per direction.

    Returns
    -------
    weights, factors, loglik
        Updated parameters (new arrays) and their log-likelihood.

    Examples
    --------
    >>> codes = np.array([[0, 0], [1, 1], [0, 0], [1, -1]])
    >>> w, A = np.array([0.5, 0.5]), [np.array([[0.6, 0.4], [0.4, 0.6]])] * 2
    >>> w1, A1, ll = ad_sweep(codes, [2, 2], w, A)
    >>> bool(ll > -5.0), [a.shape for a in A1]
    (True, [(2, 2), (2, 2)])
    """
    codes = np.asarray(codes)
    keep = (codes >= 0).any(axis=1)
    codes = codes[keep]
    log_w = np.log(np.maximum(np.asarray(weights, dtype=float), COUNT_FLOOR))
    log_a = [np.log(np.maximum(np.asarray(a, dtype=float), COUNT_FLOOR)) for a in factors]
    obs = codes >= 0
    total = np.broadcast_to(log_w, (codes.shape[0], log_w.size)).copy()
    for n, la in enumerate(log_a):
        total[obs[:, n]] += la[codes[obs[:, n], n]]
    for n in range(len(log_a)):
        rows = obs[:, n]
        c = codes[rows, n]
        other = total[rows] - log_a[n][c]
        step = _direction(other, c, int(log_a[n].shape[0]))
        for _ in range(inner_iter):
            log_a[n] = step(log_a[n])
        total[rows] = other + log_a[n][c]
    other = total - log_w
    step = _direction(other, None, log_w.size)
    for _ in range(inner_iter):
        log_w = step(log_w)
    total = other + log_w
    loglik = float(np.sum(logsumexp(total, axis=1)))
    return np.exp(log_w), [np.exp(la) for la in log_a], loglik
