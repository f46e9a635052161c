"""CNMF-OPT (Ibrahim & Fu, Alg. 1) under the one loop.

The steps are in :mod:`bayespmf.kernels.cnmf_opt` (SQUAREM-accelerated EM of the
pairwise composite likelihood by default, or Alg. 1's mirror-descent sweep);
:func:`cnmf_opt` runs the chosen one under :func:`bayespmf.fit.loop.iterate` with the
paper's stopping rule, a relative decrease of the misfit (:func:`relative_decrease`).
"""

from __future__ import annotations

import functools

import numpy as np

from bayespmf._validation import check_choice, check_float, check_int
from bayespmf.fit.loop import iterate
from bayespmf.kernels.cnmf_common import OBJECTIVE_FLOOR
from bayespmf.kernels.cnmf_opt import (
    cnmf_opt_init,
    cnmf_opt_mm_step,
    cnmf_opt_squarem_step,
    cnmf_opt_step,
)
from bayespmf.pmf import LatentClassParams, split_factors

__all__ = ["CNMF_OPT_SOLVERS", "cnmf_opt", "relative_decrease"]

#: The steps CNMF-OPT can take, by ``solver`` name; each lowers the same objective.
CNMF_OPT_SOLVERS = {
    "squarem": cnmf_opt_squarem_step,
    "em": cnmf_opt_mm_step,
    "mirror-descent": cnmf_opt_step,
}


def relative_decrease(trace, info, tol) -> bool:
    """CNMF-OPT's rule: a sweep lowered the misfit by at most ``tol`` times its value.

    ``info`` is a :class:`~bayespmf.kernels.cnmf_opt.CNMFOptInfo` (``-info.objective`` is
    the misfit before the sweep, ``info.misfit`` after it); a misfit at or below
    ``OBJECTIVE_FLOOR`` is an exact fit and stops too.

    Examples
    --------
    >>> from bayespmf.kernels.cnmf_opt import CNMFOptInfo
    >>> relative_decrease([], CNMFOptInfo(-1.0, 1, 0.9999999), 1e-6)
    True
    """
    before = -info.objective
    return before - info.misfit <= tol * abs(before) or info.misfit <= OBJECTIVE_FLOOR


def cnmf_opt(
    marginals,
    n_components: int,
    *,
    init=None,
    pair_weighting: str = "uniform",
    min_count: int = 1,
    solver: str = "squarem",
    max_iter: int = 3000,
    tol: float = 1e-7,
    random_state=None,
    progressbar: bool = False,
) -> tuple[LatentClassParams, dict]:
    """Latent-class parameters by coupled KL factorization of pairwise marginals (Alg. 1).

    Parameters
    ----------
    marginals : PairwiseMarginals
        The pairwise marginals to fit (N >= 2 variables, empirical or population).
    n_components : int
        Latent classes F; at most ``max_cnmf_rank(n_categories)``, as for
        :func:`~bayespmf.kernels.cnmf_spa.cnmf_spa`.
    init : None, "random", "cnmf-spa", LatentClassParams or (weights, factors)
        Starting point. ``None``/"random": columns drawn uniformly from
        ``random_state`` and normalized; "cnmf-spa":
        :func:`~bayespmf.kernels.cnmf_spa.cnmf_spa`. A CNMF-SPA or
        given start is mixed with ``INIT_SMOOTHING`` of the uniform PMF (multiplicative
        updates cannot leave an exact zero). Not modified.
    pair_weighting : {"uniform", "counts"}, default "uniform"
        Weight of each observed pair in the objective: equal, as in eq. (5)-(6) of the
        paper, or proportional to its co-observation count. Weights sum to one.
    min_count : int, default 1
        A pair co-observed in fewer rows is left out of the objective.
    solver : {"squarem", "em", "mirror-descent"}, default "squarem"
        How the objective is lowered (see Notes): SQUAREM-PMF cycles over the EM update
        of the pairwise composite likelihood, that EM update alone, or Alg. 1's
        block-cyclic mirror descent as the paper writes it. All three minimize the
        same objective; they differ in how many iterations they need to reach its
        minimum (mirror descent takes the most, and with a loose ``tol`` can stop well
        above it).
    max_iter : int, default 3000
        Maximum number of iterations (a SQUAREM cycle, an EM update, or a sweep that
        updates A_1, ..., A_N, then lambda).
    tol : float, default 1e-7
        Stop when an iteration lowers the objective by less than ``tol`` times its
        value (the paper's rule, Sec. 5.1, with 1e-5), or when the objective falls
        below ``OBJECTIVE_FLOOR`` (an exact fit). The objective is flat along the
        directions the pairwise marginals barely identify, so a loose ``tol`` stops
        before its minimum along them.
    random_state : None, int or numpy.random.Generator
        Seeds the random start (and CNMF-SPA's random splits).
    progressbar : bool, default False
        Show a progress bar over sweeps.

    Returns
    -------
    params : LatentClassParams
    info : dict
        ``n_iter`` (sweeps run), ``objective`` (ndarray: the objective at the start and
        after every sweep, non-increasing), ``converged`` (bool).

    Raises
    ------
    DataValidationError
        ``marginals`` not a PairwiseMarginals, no observed pair, ``n_components`` above what
        the pairwise marginals identify, or a malformed ``init``.
    ValueError
        Malformed ``n_components``, ``max_iter``, ``tol``, ``init``, ``pair_weighting`` or
        ``solver``.

    Warns
    -----
    ConvergenceWarning
        If ``max_iter`` sweeps end before the stopping rule holds.

    Notes
    -----
    Minimizes ``sum_{(j,k) in Omega, j<k} w_jk D_KL(X_jk, A_j diag(lambda) A_k^T)``
    over column-stochastic ``A_n`` and ``lambda`` on the simplex (problems (5)-(6)).

    ``solver="mirror-descent"`` is Alg. 1: block-cyclic over ``A_1, ..., A_N, lambda``
    (lines 4-7), each block taking one mirror-descent step with the entropy mirror map
    (exponentiated gradient): ``A_n <- A_n * exp(-eta G_n)``, columns renormalized.
    ``eta`` comes from Armijo backtracking, ``f(new) <= f(old) + c <G, new - old>``,
    starting from twice the block's last accepted step, so every sweep is monotone.

    Because every model block sums to one on the constraint set, the objective is a
    constant minus the ``w_jk``-weighted log-likelihood of the pair observations, a
    composite likelihood whose EM update (``solver="em"``,
    :func:`~bayespmf.kernels.cnmf_opt.cnmf_opt_mm_map`) is closed-form, keeps the
    constraints and never raises the objective. ``solver="squarem"`` accelerates it
    with SQUAREM-PMF (Chege et al., Tables I-II), which also never raises it.

    A zero objective does not by itself mean the true parameters: near strictly
    positive factors, ``A_n -> A_n (I + E)`` with ``1^T E = 0`` and
    ``E diag(lambda) + diag(lambda) E^T`` diagonal keeps every ``X_jk``, a family of
    ``F (F - 1) / 2`` dimensions (checked numerically: the Jacobian of the pairwise
    marginals has exactly that many zero singular values). Identifiability comes from
    the nonnegativity boundary (sufficiently scattered factors, Theorem 2), so recovery
    is judged on factors with zeros or from a good start such as CNMF-SPA.

    With the stacked factors ``A`` (sum I, F) the model of every pair at once is the
    block matrix ``A diag(lambda) A^T``, compared with the joint block matrix under a
    block mask that keeps the observed off-diagonal blocks (the diagonal blocks
    ``diag(p_j)`` are not pairwise marginals). Mirror descent's objective and gradient
    are one PyTensor graph compiled once per process; the EM update is three matrix
    products. The steps run under :func:`bayespmf.fit.loop.iterate` with the rule above
    (``tol``).

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals
    >>> A = [np.array([[0.7, 0.1], [0.2, 0.3], [0.1, 0.6]])] * 4
    >>> m = PairwiseMarginals.from_params([0.4, 0.6], A)
    >>> params, info = cnmf_opt(m, 2, init="cnmf-spa", random_state=0)
    >>> bool(info["objective"][-1] <= info["objective"][0])
    True
    """
    owner = "cnmf_opt"
    solver = check_choice(solver, "solver", tuple(CNMF_OPT_SOLVERS), owner)
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    problem, state = cnmf_opt_init(
        marginals,
        n_components,
        init=init,
        pair_weighting=pair_weighting,
        min_count=min_count,
        random_state=random_state,
        owner=owner,
    )
    loop = {"max_iter": max_iter, "tol": tol, "progressbar": progressbar, "owner": owner}
    step = functools.partial(CNMF_OPT_SOLVERS[solver], problem=problem)
    state, it = iterate(step, state, desc="CNMF-OPT", rule=relative_decrease, **loop)
    factors = split_factors(state.factors_stacked, problem.n_categories)
    params = LatentClassParams(state.weights.copy(), factors)
    objective = np.append(-it.trace, state.misfit)
    return params, {"n_iter": it.n_iter, "objective": objective, "converged": it.converged}
