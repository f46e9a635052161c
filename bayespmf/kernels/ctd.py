r"""Coupled tensor decomposition (CTD) of triple marginals (Kargas, Sidiropoulos & Fu).

Under the latent-class model every triple marginal is a rank-F canonical polyadic
decomposition sharing its factors with the others,
:math:`T_{jkl} = [\![\lambda; A_j, A_k, A_l]\!] = \sum_f \lambda_f A_j(:, f) \circ
A_k(:, f) \circ A_l(:, f)`. :func:`ctd` fits all given triples at once by least
squares under simplex constraints, alternating over :math:`A_1, \dots, A_N, \lambda`
with an ADMM solve of every block (AO-ADMM), the algorithm of Kargas et al. It is the
"CTD" baseline of Ibrahim & Fu (Sec. 5.1) and the "CTF" one of Vora et al. (Sec. 2.2).

References
----------
.. [1] N. Kargas, N. D. Sidiropoulos, X. Fu, "Tensors, learning, and 'Kolmogorov
   extension' for finite-alphabet random vectors", IEEE Trans. Signal Process. 66(18),
   2018.
.. [2] K. Huang, N. D. Sidiropoulos, A. P. Liavas, "A flexible and efficient
   algorithmic framework for constrained matrix and tensor factorization", IEEE Trans.
   Signal Process. 64(19), 2016 (AO-ADMM).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from bayespmf._progress import progress_bar
from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.kernels.em import init_random
from bayespmf.kernels.simplex import project_simplex
from bayespmf.marginals import TripleMarginals
from bayespmf.pmf import LatentClassParams, check_params

__all__ = ["ctd", "triple_misfit"]

#: ADMM iterations per block and sweep. AO-ADMM warm-starts the dual variable of every
#: block across sweeps, so a few inner iterations suffice; on exact triples of 4
#: variables (I = 3, F = 2) 50 instead of 10 saved only 10% of the sweeps at 3x the cost.
ADMM_ITER = 10
#: Inner ADMM stops early when both relative residuals (primal ||X - X~|| / ||X||, dual
#: ||X - X_old|| / ||U||) fall below this.
ADMM_TOL = 1e-4
#: A misfit below this fraction of sum_t w_t ||T_t||^2 is an exact fit (float64
#: rounding of the expanded quadratic form).
OBJECTIVE_FLOOR = 1e-14


def _check_triples(triple_marginals, owner) -> tuple[TripleMarginals, list]:
    if not isinstance(triple_marginals, TripleMarginals):
        raise DataValidationError(
            f"The 'triple_marginals' argument of {owner} must be a TripleMarginals (e.g. "
            "from bayespmf.marginals.triple_marginals(data)). Got "
            f"{type(triple_marginals).__name__}."
        )
    used = [t for t in triple_marginals.triples if triple_marginals.counts[t] > 0]
    if not used:
        raise DataValidationError(
            f"No triple of variables is co-observed in any row, so {owner} has nothing "
            "to fit. Collect rows that observe at least three variables, or use "
            "pairwise methods (cnmf_spa, juror)."
        )
    for t in used:
        x = triple_marginals.joint[t]
        if not np.all(np.isfinite(x)) or np.any(x < 0):
            raise DataValidationError(
                f"The triple marginal {t} passed to {owner} holds negative, NaN or "
                "infinite probabilities. Recompute it with triple_marginals(data)."
            )
    return triple_marginals, used


def _check_init(init, n_cat, rank, rng, owner):
    if init is None or (isinstance(init, str) and init == "random"):
        return init_random(n_cat, rank, rng)
    if isinstance(init, str):
        raise ValueError(
            f"The 'init' argument of {owner} must be None, 'random' or a "
            f"LatentClassParams / (weights, factors) pair. Got {init!r}."
        )
    try:
        weights, factors = init
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"The 'init' argument of {owner} must be a (weights, factors) pair. Got "
            f"{type(init).__name__}."
        ) from err
    p = check_params(weights, factors, n_cat)
    if p.weights.size != rank:
        raise DataValidationError(
            f"The 'init' of {owner} has {p.weights.size} classes but rank={rank}."
        )
    return p


def _model(weights, a, b, c) -> np.ndarray:
    return np.einsum("f,if,jf,kf->ijk", weights, a, b, c)


def triple_misfit(triple_marginals, params) -> float:
    r"""Weighted least-squares misfit of latent-class parameters to triple marginals.

    Parameters
    ----------
    triple_marginals : TripleMarginals
    params : LatentClassParams or (weights, factors)

    Returns
    -------
    float
        :math:`\sum_t w_t \|T_t - [\![\lambda; A_j, A_k, A_l]\!]\|_F^2` over the
        triples co-observed at least once, with equal weights :math:`w_t` summing to
        one (the objective of :func:`ctd`).

    Examples
    --------
    >>> from bayespmf.marginals import TripleMarginals
    >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])] * 3
    >>> t = TripleMarginals.from_params([0.5, 0.5], A)
    >>> triple_misfit(t, ([0.5, 0.5], A)) < 1e-30
    True
    """
    tm, used = _check_triples(triple_marginals, "triple_misfit")
    weights, factors = params
    p = check_params(weights, factors, tm.n_categories)
    w = 1.0 / len(used)
    return float(
        sum(
            w * np.sum((tm.joint[t] - _model(p.weights, *(p.factors[v] for v in t))) ** 2)
            for t in used
        )
    )


def _admm_simplex(x, dual, gram, mttkrp, n_iter, tol, axis=0):
    r"""``min_X 1/2 tr(X G X^T) - tr(K^T X)``, X on the simplex along ``axis``, by ADMM.

    Huang et al.'s AO-ADMM block update: :math:`\rho = \mathrm{tr}(G) / F`,
    :math:`\tilde X = (K + \rho (X + U)) (G + \rho I)^{-1}`,
    :math:`X = \Pi_\Delta(\tilde X - U)`, :math:`U \leftarrow U + X - \tilde X`.
    Returns the updated ``(x, dual)``.
    """
    rank = gram.shape[0]
    rho = max(np.trace(gram) / rank, np.finfo(float).tiny)
    chol = cho_factor(gram + rho * np.eye(rank))
    for _ in range(n_iter):
        x_old = x
        aux = cho_solve(chol, (mttkrp + rho * (x + dual)).T).T
        x = project_simplex(aux - dual, axis=axis)
        dual = dual + x - aux
        scale = max(np.linalg.norm(x), 1e-300)
        primal = np.linalg.norm(x - aux) / scale
        change = np.linalg.norm(x - x_old) / max(np.linalg.norm(dual), 1e-300)
        if primal < tol and change < tol:
            break
    return x, dual


def ctd(
    triple_marginals,
    rank: int,
    *,
    init=None,
    max_iter: int = 500,
    tol: float = 1e-7,
    random_state=None,
    progressbar: bool = False,
) -> tuple[LatentClassParams, dict]:
    r"""Latent-class parameters by coupled tensor decomposition of triple marginals.

    Parameters
    ----------
    triple_marginals : TripleMarginals
        Empirical or population triple marginals (all ``N choose 3`` triples, or a
        subset: every variable must appear in at least one co-observed triple).
    rank : int
        Number of latent classes F (>= 1).
    init : None, "random", LatentClassParams or (weights, factors)
        Starting point; default (``None``/"random") Uniform(0, 1) entries normalized
        (:func:`bayespmf.kernels.em.init_random`) from ``random_state``. Not modified.
    max_iter : int, default 500
        Maximum sweeps over :math:`A_1, \dots, A_N, \lambda`.
    tol : float, default 1e-7
        Stop when a sweep lowers the misfit by less than ``tol`` times its value, or
        the misfit reaches ``OBJECTIVE_FLOOR`` times :math:`\sum_t w_t \|T_t\|^2`.
    random_state : None, int or numpy.random.Generator
        Seeds the random start.
    progressbar : bool, default False

    Returns
    -------
    params : LatentClassParams
    info : dict
        ``objective`` (ndarray: misfit at the start and after every sweep),
        ``n_iter``, ``converged``, ``triples`` (the triples fitted).

    Raises
    ------
    DataValidationError
        Not a TripleMarginals, no co-observed triple, a variable in no co-observed
        triple, or a malformed ``init``.
    ValueError
        Malformed ``rank``, ``max_iter``, ``tol`` or ``init``.

    Warns
    -----
    ConvergenceWarning
        If ``max_iter`` sweeps end before the stopping rule holds.

    Notes
    -----
    Minimizes the coupled least-squares criterion of Kargas et al. (Vora et al.,
    Sec. 2.2; Ibrahim & Fu, Sec. 2.2)

    .. math:: \sum_{t = (j,k,l)} w_t \|T_t - [\![\lambda; A_j, A_k, A_l]\!]\|_F^2
        \quad \text{s.t.} \quad A_n \ge 0,\ \mathbf 1^\top A_n = \mathbf 1^\top,
        \ \lambda \ge 0,\ \mathbf 1^\top \lambda = 1,

    over the triples co-observed in at least one row, with equal weights
    :math:`w_t = 1/|\mathcal T|`. For the block :math:`A_n` the criterion is the
    quadratic :math:`\mathrm{tr}(A_n G_n A_n^\top) - 2\,\mathrm{tr}(K_n^\top A_n)`
    with, summed over the triples holding ``n`` (others ``k, l``),
    :math:`G_n = \sum_t w_t D(\lambda)\,(A_k^\top A_k * A_l^\top A_l)\,D(\lambda)`
    and the MTTKRP :math:`K_n = \sum_t w_t T_{t,(n)} (A_k \odot A_l) D(\lambda)`; for
    :math:`\lambda` it is :math:`\lambda^\top P \lambda - 2 q^\top \lambda` with
    :math:`P = \sum_t w_t (A_j^\top A_j * A_k^\top A_k * A_l^\top A_l)` and
    :math:`q_f = \sum_t w_t T_t \times_1 A_j(:, f) \times_2 A_k(:, f) \times_3
    A_l(:, f)`. Each block is solved by a few ADMM iterations with a warm-started
    dual (AO-ADMM, Huang et al., the solver Kargas et al. use); the simplex
    projection is :func:`~bayespmf.kernels.simplex.project_simplex`. All in NumPy:
    the work per sweep is a handful of ``einsum`` calls on ``I^3``-entry tensors.

    Examples
    --------
    >>> from bayespmf.marginals import TripleMarginals
    >>> A = [np.array([[0.8, 0.1], [0.1, 0.2], [0.1, 0.7]])] * 4
    >>> t = TripleMarginals.from_params([0.3, 0.7], A)
    >>> params, info = ctd(t, 2, random_state=0)
    >>> np.sort(params.weights).round(4)
    array([0.3, 0.7])
    """
    owner = "ctd"
    tm, used = _check_triples(triple_marginals, owner)
    rank = check_int(rank, "rank", owner=owner, low=1)
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    n_cat = np.asarray(tm.n_categories)
    n_vars = n_cat.size
    covered = {v for t in used for v in t}
    missing = sorted(set(range(n_vars)) - covered)
    if missing:
        raise DataValidationError(
            f"Variable(s) {missing} appear in no co-observed triple, so {owner} cannot "
            "estimate their factors. Pass triples covering every variable to "
            "triple_marginals(data, triples=...)."
        )
    rng = check_random_state(random_state)
    start = _check_init(init, n_cat, rank, rng, owner)
    lam = np.array(start.weights, dtype=float)
    factors = [np.array(a, dtype=float) for a in start.factors]
    w_t = 1.0 / len(used)
    tensors = {t: np.asarray(tm.joint[t]) for t in used}
    # the tensor of every triple with the axis of each of its variables first
    by_var = {n: [] for n in range(n_vars)}
    for t in used:
        for pos, v in enumerate(t):
            others = [u for i, u in enumerate(t) if i != pos]
            by_var[v].append((np.moveaxis(tensors[t], pos, 0), others))
    norm_sq = w_t * sum(float(np.sum(x * x)) for x in tensors.values())

    def misfit() -> float:
        return float(
            sum(
                w_t * np.sum((x - _model(lam, *(factors[v] for v in t))) ** 2)
                for t, x in tensors.items()
            )
        )

    duals = [np.zeros_like(a) for a in factors]
    dual_lam = np.zeros((1, rank))
    trace = [misfit()]
    floor = OBJECTIVE_FLOOR * norm_sq
    converged = trace[0] <= floor
    n_iter = 0
    with progress_bar(max_iter, "CTD", enabled=bool(progressbar)) as bar:
        while n_iter < max_iter and not converged:
            n_iter += 1
            for n in range(n_vars):
                gram = np.zeros((rank, rank))
                mttkrp = np.zeros((int(n_cat[n]), rank))
                for x, (k, l) in by_var[n]:  # noqa: E741
                    ak, al = factors[k], factors[l]
                    gram += (ak.T @ ak) * (al.T @ al)
                    mttkrp += np.einsum("ijk,jf,kf->if", x, ak, al)
                gram = w_t * lam[:, None] * gram * lam[None, :]
                mttkrp = w_t * mttkrp * lam
                factors[n], duals[n] = _admm_simplex(
                    factors[n], duals[n], gram, mttkrp, ADMM_ITER, ADMM_TOL
                )
            gram = np.zeros((rank, rank))
            rhs = np.zeros(rank)
            for t, x in tensors.items():
                a, b, c = (factors[v] for v in t)
                gram += (a.T @ a) * (b.T @ b) * (c.T @ c)
                rhs += np.einsum("ijk,if,jf,kf->f", x, a, b, c)
            new, dual_lam = _admm_simplex(
                lam[None, :],
                dual_lam,
                w_t * gram,
                w_t * rhs[None, :],
                ADMM_ITER,
                ADMM_TOL,
                axis=1,
            )
            lam = new[0]
            f = misfit()
            trace.append(f)
            bar.update()
            bar.set_postfix(objective=f)
            converged = abs(trace[-2] - f) <= tol * trace[-2] or f <= floor
    if not converged:
        warnings.warn(
            f"{owner} stopped after max_iter={max_iter} sweeps without meeting tol={tol} "
            f"(last relative change {abs(trace[-2] - trace[-1]) / trace[-2]:.2e}). "
            "Increase 'max_iter' or loosen 'tol'.",
            ConvergenceWarning,
            stacklevel=2,
        )
    params = LatentClassParams(lam.copy(), [a.copy() for a in factors])
    info = {
        "objective": np.asarray(trace),
        "n_iter": n_iter,
        "converged": converged,
        "triples": tuple(used),
    }
    return params, info
