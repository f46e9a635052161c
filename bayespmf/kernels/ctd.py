r"""Coupled tensor decomposition (CTD) of triple marginals (Kargas, Sidiropoulos & Fu).

Under the latent-class model every triple marginal is a rank-F canonical polyadic
decomposition sharing its factors with the others,
:math:`T_{jkl} = [\![\lambda; A_j, A_k, A_l]\!] = \sum_f \lambda_f A_j(:, f) \circ
A_k(:, f) \circ A_l(:, f)`. CTD fits all given triples at once by least squares under
simplex constraints, alternating over :math:`A_1, \dots, A_N, \lambda` with an ADMM
solve of every block (AO-ADMM), the algorithm of Kargas et al. It is the "CTD"
baseline of Ibrahim & Fu (Sec. 5.1) and the "CTF" one of Vora et al. (Sec. 2.2). Here
are its problem (:func:`ctd_init`) and one sweep (:func:`ctd_step`);
``bayespmf.fit.ctd.ctd`` runs the sweeps under the one loop.

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

from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from bayespmf._validation import DataValidationError, check_int, check_random_state
from bayespmf.kernels.cnmf_opt import check_init_params
from bayespmf.kernels.em import init_random
from bayespmf.kernels.simplex import project_simplex
from bayespmf.marginals import TripleMarginals
from bayespmf.pmf import check_params

__all__ = [
    "CTDInfo",
    "CTDProblem",
    "CTDState",
    "ctd_init",
    "ctd_step",
    "triple_misfit",
]

#: ADMM iterations per block and sweep. AO-ADMM warm-starts the dual variable of every
#: block across sweeps, so a few inner iterations suffice: more inner iterations saved
#: few sweeps at a higher cost (:ref:`bench-cnmf`).
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


def _check_init(init, n_cat, n_components, rng, owner):
    if init is None or (isinstance(init, str) and init == "random"):
        return init_random(n_cat, n_components, rng)
    if isinstance(init, str):
        raise ValueError(
            f"The 'init' argument of {owner} must be None, 'random' or a "
            f"LatentClassParams / (weights, factors) pair. Got {init!r}."
        )
    return check_init_params(init, n_cat, n_components, owner)


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
        one (the objective of ``bayespmf.fit.ctd.ctd``).

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
    n_components = gram.shape[0]
    rho = max(np.trace(gram) / n_components, np.finfo(float).tiny)
    chol = cho_factor(gram + rho * np.eye(n_components))
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


class CTDProblem(NamedTuple):
    """The triples CTD fits, arranged once by :func:`ctd_init`.

    Attributes
    ----------
    tensors : dict
        Triple ``(j, k, l)`` -> its marginal ``T_jkl`` (co-observed triples only).
    by_var : dict
        Variable ``n`` -> ``[(T moved to put n's axis first, (k, l)), ...]``.
    weight : float
        The weight ``w_t = 1 / |T|`` of every triple.
    floor : float
        An exact fit: ``OBJECTIVE_FLOOR * sum_t w_t ||T_t||^2``.
    n_categories : ndarray of int
    """

    tensors: dict
    by_var: dict
    weight: float
    floor: float
    n_categories: np.ndarray


class CTDState(NamedTuple):
    """One CTD iterate: the parameters, the ADMM duals of every block, the misfit."""

    weights: np.ndarray
    factors: tuple
    duals: tuple
    dual_weights: np.ndarray
    misfit: float


class CTDInfo(NamedTuple):
    """What one :func:`ctd_step` reports, like every misfit-descent sweep.

    ``objective`` is minus the misfit the sweep started from (the loop maximizes),
    ``n_evals`` is 1 and ``misfit`` the misfit it reached.
    """

    objective: float
    n_evals: int
    misfit: float


def _misfit(problem: CTDProblem, weights, factors) -> float:
    return float(
        sum(
            problem.weight * np.sum((x - _model(weights, *(factors[v] for v in t))) ** 2)
            for t, x in problem.tensors.items()
        )
    )


def ctd_init(
    triple_marginals, n_components: int, *, init=None, random_state=None, owner: str = "ctd"
) -> tuple[CTDProblem, CTDState]:
    """Validate CTD's inputs; arrange its triples and build the starting state.

    Parameters are those of ``bayespmf.fit.ctd.ctd`` (``owner`` names it in errors).

    Returns
    -------
    problem : CTDProblem
    state : CTDState

    Raises
    ------
    DataValidationError, ValueError
        As ``ctd``.

    Examples
    --------
    >>> from bayespmf.marginals import TripleMarginals
    >>> A = [np.array([[0.8, 0.1], [0.1, 0.2], [0.1, 0.7]])] * 4
    >>> problem, state = ctd_init(TripleMarginals.from_params([0.3, 0.7], A), 2,
    ...                           random_state=0)
    >>> new, info = ctd_step(state, problem)
    >>> bool(info.misfit < state.misfit), sorted(problem.tensors)[:2]
    (True, [(0, 1, 2), (0, 1, 3)])
    """
    tm, used = _check_triples(triple_marginals, owner)
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
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
    start = _check_init(init, n_cat, n_components, rng, owner)
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
    problem = CTDProblem(tensors, by_var, w_t, OBJECTIVE_FLOOR * norm_sq, n_cat)
    duals = tuple(np.zeros_like(a) for a in factors)
    state = CTDState(
        lam,
        tuple(factors),
        duals,
        np.zeros((1, n_components)),
        _misfit(problem, lam, factors),
    )
    return problem, state


def ctd_step(state: CTDState, problem: CTDProblem) -> tuple[CTDState, CTDInfo]:
    r"""One AO-ADMM sweep of CTD over :math:`A_1, \dots, A_N`, then :math:`\lambda`.

    The block quadratics and their ADMM solves are those of ``bayespmf.fit.ctd.ctd``
    (Notes). ``state`` is not modified.
    """
    lam, w_t, n_cat = state.weights, problem.weight, problem.n_categories
    n_components = lam.size
    factors, duals = list(state.factors), list(state.duals)
    for n in range(n_cat.size):
        gram = np.zeros((n_components, n_components))
        mttkrp = np.zeros((int(n_cat[n]), n_components))
        for x, (k, l) in problem.by_var[n]:  # noqa: E741
            ak, al = factors[k], factors[l]
            gram += (ak.T @ ak) * (al.T @ al)
            mttkrp += np.einsum("ijk,jf,kf->if", x, ak, al)
        gram = w_t * lam[:, None] * gram * lam[None, :]
        mttkrp = w_t * mttkrp * lam
        factors[n], duals[n] = _admm_simplex(
            factors[n], duals[n], gram, mttkrp, ADMM_ITER, ADMM_TOL
        )
    gram = np.zeros((n_components, n_components))
    rhs = np.zeros(n_components)
    for t, x in problem.tensors.items():
        a, b, c = (factors[v] for v in t)
        gram += (a.T @ a) * (b.T @ b) * (c.T @ c)
        rhs += np.einsum("ijk,if,jf,kf->f", x, a, b, c)
    new, dual_lam = _admm_simplex(
        lam[None, :],
        state.dual_weights,
        w_t * gram,
        w_t * rhs[None, :],
        ADMM_ITER,
        ADMM_TOL,
        axis=1,
    )
    lam = new[0]
    f = _misfit(problem, lam, factors)
    new_state = CTDState(lam, tuple(factors), tuple(duals), dual_lam, f)
    return new_state, CTDInfo(-state.misfit, 1, f)
