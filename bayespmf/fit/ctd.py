"""CTD (Kargas, Sidiropoulos & Fu) under the one loop.

The AO-ADMM sweep is :func:`bayespmf.kernels.ctd.ctd_step`; :func:`ctd` runs it under
:func:`bayespmf.fit.loop.iterate` with the rule of the CTD code, a relative change of
the misfit below ``tol`` (or an exact fit).
"""

from __future__ import annotations

import functools

import numpy as np

from bayespmf._validation import check_float, check_int
from bayespmf.fit.loop import iterate
from bayespmf.kernels.ctd import ctd_init, ctd_step
from bayespmf.pmf import LatentClassParams

__all__ = ["ctd"]


def ctd(
    triple_marginals,
    n_components: int,
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
    n_components : int
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
        Malformed ``n_components``, ``max_iter``, ``tol`` or ``init``.

    Warns
    -----
    ConvergenceWarning
        When the misfit still changes by more than ``tol`` after ``max_iter`` sweeps.

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
    the work per sweep (:func:`~bayespmf.kernels.ctd.ctd_step`) is a handful of
    ``einsum`` calls on ``I^3``-entry tensors; the sweeps run under
    :func:`bayespmf.fit.loop.iterate` with the rule above (``tol``).

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
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    problem, state = ctd_init(
        triple_marginals, n_components, init=init, random_state=random_state, owner=owner
    )

    def small_change(trace, info, tol) -> bool:  # Kargas et al.'s rule, or an exact fit
        before = -info.objective
        return abs(before - info.misfit) <= tol * before or info.misfit <= problem.floor

    n_iter, converged, objective = 0, True, np.array([state.misfit])
    if state.misfit > problem.floor:
        loop = {"max_iter": max_iter, "tol": tol, "progressbar": progressbar}
        step = functools.partial(ctd_step, problem=problem)
        state, it = iterate(step, state, desc="CTD", owner=owner, rule=small_change, **loop)
        n_iter, converged = it.n_iter, it.converged
        objective = np.append(-it.trace, state.misfit)
    params = LatentClassParams(state.weights.copy(), [a.copy() for a in state.factors])
    info = {
        "objective": objective,
        "n_iter": n_iter,
        "converged": converged,
        "triples": tuple(problem.tensors),
    }
    return params, info
