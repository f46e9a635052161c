r"""MLE-AD-EM: alternating-directions likelihood sweeps, then EM (Yeredor & Haardt).

The maximum-likelihood latent-class PMF from partially observed rows,

.. math:: \max_{\lambda, A_1..A_N} \sum_t \log \sum_f \lambda_f
    \prod_{n \in \mathcal O_t} A_n(x_{n,t}, f)

(Chege et al., eq. (4); Ibrahim & Fu, App. C.1), is concave in each "direction"
:math:`A_n` (or :math:`\lambda`) when the others are fixed: the probability of every
row is linear in it, so each direction is a convex KL-divergence minimization
(empirical distribution of the row's entry against a mixture with known components).
Yeredor & Haardt's AD stage maximizes the likelihood direction by direction; its
output initializes EM (:func:`bayespmf.kernels.em.fit_em`). Ibrahim & Fu (Sec. 5.1)
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

from bayespmf._progress import progress_bar
from bayespmf._validation import as_codes, check_int, check_random_state
from bayespmf.kernels.em import COUNT_FLOOR, fit_em, init_random
from bayespmf.pmf import LatentClassParams

__all__ = ["ad_em", "ad_sweep"]

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


def ad_em(
    data,
    rank: int,
    *,
    n_categories=None,
    ad_iter: int = DEFAULT_AD_ITER,
    inner_iter: int = DEFAULT_INNER_ITER,
    max_iter: int = 500,
    tol: float = 1e-8,
    random_state=None,
    progressbar: bool = False,
) -> tuple[LatentClassParams, dict]:
    r"""Maximum-likelihood latent-class PMF by alternating directions, then EM.

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        ``-1`` marks missing entries (marginalized out).
    rank : int
        Number of latent classes F (>= 1).
    n_categories : sequence of int, optional
        Inferred from ``data`` when omitted.
    ad_iter : int, default 20
        AD iterations (sweeps over all directions) from the random start.
    inner_iter : int, default 10
        Fixed-point passes per direction and AD iteration.
    max_iter : int, default 500
        Maximum EM iterations after AD (:func:`~bayespmf.kernels.em.fit_em`).
    tol : float, default 1e-8
        EM's relative log-likelihood tolerance.
    random_state : None, int or numpy.random.Generator
        Seeds the random start (:func:`~bayespmf.kernels.em.init_random`).
    progressbar : bool, default False

    Returns
    -------
    params : LatentClassParams
    info : dict
        ``ad_loglik`` (log-likelihood after every AD iteration, non-decreasing),
        ``ad_params`` (the AD output that started EM), ``em`` (the
        :class:`~bayespmf.kernels.em.EMInfo` of the EM stage), ``n_iter`` (EM
        iterations), ``converged`` (EM's).

    Raises
    ------
    DataValidationError
        Malformed data.
    ValueError
        Malformed ``rank``, ``ad_iter``, ``inner_iter``, ``max_iter`` or ``tol``.

    Warns
    -----
    ConvergenceWarning
        From :func:`~bayespmf.kernels.em.fit_em` when EM uses ``max_iter``.

    Notes
    -----
    One AD iteration visits the directions :math:`A_1, \dots, A_N, \lambda`. For
    :math:`A_n`, with :math:`\ell_{tf}` the log of everything else in the row's
    likelihood (:math:`\log\lambda_f + \sum_{m \ne n} \log A_m(x_{m,t}, f)`), the
    direction maximizes :math:`\sum_{t: x_{n,t}\ \mathrm{observed}} \log \sum_f
    e^{\ell_{tf}} A_n(x_{n,t}, f)` over column-stochastic :math:`A_n`: a concave
    problem (a KL divergence between the row-wise empirical distribution and a
    mixture with known components), solved by ``inner_iter`` passes of its
    fixed-point (EM) map :math:`A_n(i, f) \propto \sum_{t: x_{n,t} = i}
    \gamma_{tf}`, :math:`\gamma_{tf} \propto e^{\ell_{tf}} A_n(x_{n,t}, f)`; likewise
    :math:`\lambda_f \propto \sum_t \gamma_{tf}`. Every pass is monotone, so the
    likelihood never decreases over AD. The full text of Yeredor & Haardt is not in
    this repository; the papers that use it (Ibrahim & Fu, Sec. 5.1; Chege et al.,
    Sec. I, IV-A) describe AD as direction-wise likelihood maximization followed by EM,
    which is what this implements; the inner solver of each direction is our choice.
    With ``inner_iter=1`` an AD iteration is an ECM sweep. The AD stage is vectorized
    NumPy/SciPy (gather, ``logsumexp``, a sparse indicator product per
    direction); EM is the compiled kernel of :func:`~bayespmf.kernels.em.fit_em`.

    Examples
    --------
    >>> codes = np.array([[0, 0, 1], [1, 1, 0], [0, 0, 1], [1, 1, -1], [0, -1, 1]] * 20)
    >>> params, info = ad_em(codes, 2, ad_iter=5, random_state=0)
    >>> bool(np.all(np.diff(info["ad_loglik"]) >= -1e-9)), info["converged"]
    (True, True)
    """
    owner = "ad_em"
    rank = check_int(rank, "rank", owner=owner, low=1)
    ad_iter = check_int(ad_iter, "ad_iter", owner=owner, low=0)
    inner_iter = check_int(inner_iter, "inner_iter", owner=owner, low=1)
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    codes, n_cat = as_codes(data, n_categories)
    rng = check_random_state(random_state)
    start = init_random(n_cat, rank, rng)
    w, factors = start.weights, start.factors
    trace = []
    with progress_bar(ad_iter, "AD", enabled=bool(progressbar)) as bar:
        for _ in range(ad_iter):
            w, factors, ll = ad_sweep(codes, n_cat, w, factors, inner_iter=inner_iter)
            trace.append(ll)
            bar.update()
            bar.set_postfix(loglik=ll)
    ad_params = LatentClassParams(w, factors)
    params, em_info = fit_em(
        codes,
        rank,
        init=ad_params,
        n_categories=n_cat,
        max_iter=max_iter,
        tol=tol,
        random_state=rng,
        progressbar=progressbar,
    )
    info = {
        "ad_loglik": np.asarray(trace),
        "ad_params": ad_params,
        "em": em_info,
        "n_iter": em_info.n_iter,
        "converged": em_info.converged,
    }
    return params, info
