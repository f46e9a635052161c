"""CNMF-OPT (Ibrahim & Fu, Alg. 1): the coupled KL fit of all observed pairwise marginals.

Its validated problem (:func:`cnmf_opt_init`, by default started from
:func:`bayespmf.kernels.cnmf_spa.cnmf_spa`) and three steps that lower the same
objective (problems (5)-(6) of the paper):

* :func:`cnmf_opt_step`, one sweep of Alg. 1 as the paper writes it: every factor
  block and then ``lambda`` take one exponentiated-gradient (mirror-descent) step with
  Armijo backtracking;
* :func:`cnmf_opt_mm_step`, one majorize-minimize step of all blocks at once: the
  EM update of the *pairwise composite likelihood*, of which the objective is minus
  the weighted log-likelihood (no step size, monotone);
* :func:`cnmf_opt_squarem_step`, one SQUAREM-PMF cycle (Chege et al., Tables I-II)
  over that EM update.

``bayespmf.fit.cnmf.cnmf_opt`` runs the steps under the one loop; what it shares with
CNMF-SPA (the checks, :func:`~bayespmf.kernels.cnmf_common.pairwise_misfit`) is
:mod:`bayespmf.kernels.cnmf_common`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt

from bayespmf._validation import DataValidationError, check_random_state
from bayespmf.kernels.cnmf_common import (
    PROB_FLOOR,
    check_marginals,
    check_n_components,
    expand_pair_weights,
    normalize_columns,
    observed_pairs,
    pair_weight_matrix,
)
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.kernels.squarem import squarem_pmf_step
from bayespmf.pmf import LatentClassParams, check_params, stack_factors

__all__ = [
    "ARMIJO_C",
    "INITIAL_STEP",
    "INIT_SMOOTHING",
    "MAX_BACKTRACK",
    "MAX_STEP",
    "STEP_GROW",
    "STEP_SHRINK",
    "CNMFOptInfo",
    "CNMFOptProblem",
    "CNMFOptState",
    "check_init_params",
    "cnmf_opt_init",
    "cnmf_opt_mm_map",
    "cnmf_opt_mm_step",
    "cnmf_opt_squarem_step",
    "cnmf_opt_step",
]

#: Share of the uniform PMF mixed into every column of a CNMF-OPT starting point.
#: Mirror descent is multiplicative: an exact zero (NNLS in CNMF-SPA makes many) could
#: never move again, and a tiny entry takes many sweeps to grow. From CNMF-SPA starts on
#: simulated data 1e-2 needed fewer sweeps than 1e-6 to the same optimum
#: (:ref:`bench-cnmf`); it moves a PMF by at most 2e-2 in l1, well below CNMF-SPA's own
#: error on sampled data.
INIT_SMOOTHING = 1e-2

#: Armijo sufficient-decrease constant (the usual 1e-4, Nocedal & Wright, Sec. 3.1).
ARMIJO_C = 1e-4
#: Step shrink factor per backtrack, and growth after an accepted step (so the step
#: size of every block tracks its local curvature across sweeps).
STEP_SHRINK = 0.5
STEP_GROW = 2.0
#: Backtracks before a block update is skipped: 0.5**60 ~ 1e-18 relative step, below
#: which no decrease is representable in float64.
MAX_BACKTRACK = 60
#: Starting (and largest) mirror-descent step size. The objective is an average of
#: KL divergences of PMFs, whose gradient entries are O(1) near a fit; larger steps
#: were always shrunk back by the line search in our runs.
INITIAL_STEP = 1.0
MAX_STEP = 1e6


@functools.cache
def _compiled_kl():
    """Compile the coupled KL objective and its gradients once per process.

    Inputs are the stacked factors ``A`` (sum I, F), ``lam`` (F,), the block weight
    matrix ``wt`` (sum I, sum I), the joint block matrix ``x`` and ``log_x`` (0 where
    ``x`` is 0). Shapes are free, so one compiled pair of functions serves every
    problem. The generalized KL ``x log(x / m) - x + m`` is summed term by term: each
    term is nonnegative and of second order in ``m - x``, so the objective keeps its
    precision down to ~1e-30 instead of the ~1e-15 left by ``sum x log x - sum x log
    m``. (The extra ``m - x`` adds a column-constant to the gradient of every block,
    which exponentiated-gradient steps with renormalization ignore.)
    """
    a = pt.dmatrix("A")
    lam = pt.dvector("lam")
    wt = pt.dmatrix("wt")
    x = pt.dmatrix("x")
    log_x = pt.dmatrix("log_x")
    model = pt.dot(a * lam[None, :], a.T)
    log_m = pt.log(pt.maximum(model, PROB_FLOOR))
    obj = pt.sum(wt * (x * (log_x - log_m) - x + model))
    g_a, g_lam = pytensor.grad(obj, [a, lam])
    inputs = [a, lam, wt, x, log_x]
    value = pytensor.function(inputs, obj, trust_input=True)
    value_grad = pytensor.function(inputs, [obj, g_a, g_lam], trust_input=True)
    return value, value_grad


def _interior(p: np.ndarray) -> np.ndarray:
    return (1.0 - INIT_SMOOTHING) * p + INIT_SMOOTHING / p.shape[0]


def check_init_params(
    init, n_categories, n_components: int, owner: str
) -> LatentClassParams:
    """A given starting point ``(weights, factors)`` checked against the data and rank.

    Raises
    ------
    DataValidationError
        ``init`` not a pair, factors of the wrong shapes, or not ``n_components`` classes.

    Examples
    --------
    >>> check_init_params(([1.0], [np.ones((2, 1)) / 2]), [2], 1, "me").weights
    array([1.])
    """
    try:
        weights, factors = init
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"The 'init' argument of {owner} must be a (weights, factors) pair. "
            f"Got {type(init).__name__}."
        ) from err
    p = check_params(weights, factors, n_categories)
    if p.weights.size != n_components:
        raise DataValidationError(
            f"The 'init' of {owner} has {p.weights.size} classes but "
            f"n_components={n_components}."
        )
    return p


def _check_init(init, marginals, n_components, rng, owner):
    n_cat = marginals.n_categories
    if init is None or (isinstance(init, str) and init == "random"):
        factors = [
            normalize_columns(rng.uniform(size=(int(i), n_components))) for i in n_cat
        ]
        weights = normalize_columns(rng.uniform(size=(n_components, 1)))[:, 0]
        return weights, stack_factors(factors)
    if isinstance(init, str) and init == "cnmf-spa":
        init, _ = cnmf_spa(marginals, n_components, random_state=rng)
    elif isinstance(init, str):
        raise ValueError(
            f"The 'init' argument of {owner} must be None, 'random', 'cnmf-spa' or a "
            f"LatentClassParams / (weights, factors) pair. Got {init!r}."
        )
    p = check_init_params(init, n_cat, n_components, owner)
    stacked = np.concatenate([_interior(a) for a in p.factors])
    return _interior(p.weights[:, None])[:, 0], stacked


def _eg_block(x, grad, f0, evaluate, step):
    """One exponentiated-gradient step on the columns of ``x`` with Armijo backtracking.

    Returns ``(x_new, f_new, step_used)``; ``x`` itself when no step decreases ``f``.
    """
    shifted = grad - grad.min(axis=0, keepdims=True)  # exp(.) <= 1: no overflow
    for _ in range(MAX_BACKTRACK):
        cand = x * np.exp(-step * shifted)
        cand = np.maximum(cand / cand.sum(axis=0, keepdims=True), PROB_FLOOR)
        cand /= cand.sum(axis=0, keepdims=True)
        f_new = evaluate(cand)
        if f_new <= f0 + ARMIJO_C * np.sum(grad * (cand - x)):
            return cand, f_new, step
        step *= STEP_SHRINK
    return x, f0, step


class CNMFOptProblem(NamedTuple):
    """The data of CNMF-OPT's objective, built once by :func:`cnmf_opt_init`.

    Attributes
    ----------
    pair_weights : ndarray, shape (sum I, sum I)
        Block weights ``w_jk / 2`` (0 off the observed off-diagonal blocks).
    joint, log_joint : ndarray, shape (sum I, sum I)
        The pairwise marginals as one block matrix, and its log (0 where it is 0).
    blocks : tuple of slice
        The rows of every variable in the stacked factors.
    n_categories : ndarray of int
    """

    pair_weights: np.ndarray
    joint: np.ndarray
    log_joint: np.ndarray
    blocks: tuple
    n_categories: np.ndarray


class CNMFOptState(NamedTuple):
    """One CNMF-OPT iterate.

    Attributes
    ----------
    weights : ndarray, shape (F,)
        ``lambda``.
    factors_stacked : ndarray, shape (sum I, F)
        The factors ``A_n`` stacked row-wise.
    misfit : float
        The objective (to minimize) at this iterate.
    steps : ndarray, shape (N + 1,)
        The last accepted mirror-descent step of every block (``A_1..A_N``, lambda).
    """

    weights: np.ndarray
    factors_stacked: np.ndarray
    misfit: float
    steps: np.ndarray


class CNMFOptInfo(NamedTuple):
    """What one :func:`cnmf_opt_step` (a sweep) reports.

    Attributes
    ----------
    objective : float
        Minus the misfit of the state the sweep was given (an objective to maximize).
    n_evals : int
        Sweeps (1).
    misfit : float
        The misfit after the sweep.
    """

    objective: float
    n_evals: int
    misfit: float


def cnmf_opt_init(
    marginals,
    n_components: int,
    *,
    init=None,
    pair_weighting: str = "uniform",
    min_count: int = 1,
    random_state=None,
    owner: str = "cnmf_opt",
) -> tuple[CNMFOptProblem, CNMFOptState]:
    """Validate CNMF-OPT's inputs; build its problem and starting state.

    Parameters are those of ``bayespmf.fit.cnmf.cnmf_opt`` (``owner`` names it in
    errors).

    Returns
    -------
    problem : CNMFOptProblem
    state : CNMFOptState

    Raises
    ------
    DataValidationError, ValueError
        As ``cnmf_opt``.

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals
    >>> A = [np.array([[0.7, 0.1], [0.2, 0.3], [0.1, 0.6]])] * 4
    >>> m = PairwiseMarginals.from_params([0.4, 0.6], A)
    >>> problem, state = cnmf_opt_init(m, 2, init="cnmf-spa", random_state=0)
    >>> state, info = cnmf_opt_step(state, problem)
    >>> bool(info.misfit <= -info.objective)
    True
    """
    m = check_marginals(marginals, owner)
    n_cat = m.n_categories
    n_components = check_n_components(n_components, n_cat, owner)
    observed = observed_pairs(m, min_count, owner)
    wt = expand_pair_weights(pair_weight_matrix(m, observed, pair_weighting), n_cat) / 2
    rng = check_random_state(random_state)
    lam, a = _check_init(init, m, n_components, rng, owner)
    x = np.ascontiguousarray(m.joint, dtype=np.float64)
    wt = np.ascontiguousarray(wt)
    log_x = np.log(x, out=np.zeros_like(x), where=x > 0)
    offsets = m.offsets
    blocks = tuple(slice(int(offsets[n]), int(offsets[n + 1])) for n in range(n_cat.size))
    problem = CNMFOptProblem(wt, x, log_x, blocks, n_cat)
    a = np.ascontiguousarray(a)
    lam = np.ascontiguousarray(lam)
    value, _ = _compiled_kl()
    f = float(value(a, lam, wt, x, log_x))
    return problem, CNMFOptState(lam, a, f, np.full(len(blocks) + 1, INITIAL_STEP))


def cnmf_opt_step(
    state: CNMFOptState, problem: CNMFOptProblem
) -> tuple[CNMFOptState, CNMFOptInfo]:
    """One sweep of CNMF-OPT (Alg. 1, lines 4-7): ``A_1, ..., A_N``, then ``lambda``.

    Every block takes one exponentiated-gradient step with Armijo backtracking from
    twice its last accepted step (see ``bayespmf.fit.cnmf.cnmf_opt``, Notes), so the
    misfit never rises. ``state`` is not modified.
    """
    value, value_grad = _compiled_kl()
    data = (problem.pair_weights, problem.joint, problem.log_joint)
    a = state.factors_stacked.copy()
    lam = state.weights
    steps = state.steps.copy()
    f = state.misfit
    for b, blk in enumerate(problem.blocks):  # Alg. 1, lines 4-6
        _, g_a, _ = value_grad(a, lam, *data)

        def eval_block(cand, blk=blk):
            trial = a.copy()
            trial[blk] = cand
            return float(value(trial, lam, *data))

        new, f, used = _eg_block(a[blk], g_a[blk], f, eval_block, steps[b])
        a[blk] = new
        steps[b] = min(used * STEP_GROW, MAX_STEP)
    _, _, g_lam = value_grad(a, lam, *data)  # line 7

    def eval_lam(cand):
        return float(value(a, np.ascontiguousarray(cand[:, 0]), *data))

    new, f, used = _eg_block(lam[:, None], g_lam[:, None], f, eval_lam, steps[-1])
    steps[-1] = min(used * STEP_GROW, MAX_STEP)
    new_state = CNMFOptState(np.ascontiguousarray(new[:, 0]), a, f, steps)
    return new_state, CNMFOptInfo(-state.misfit, 1, f)


# ------------------------------------------------------- majorize-minimize (EM) steps


def _block_sums(a: np.ndarray, blocks: tuple) -> np.ndarray:
    starts = [blk.start for blk in blocks]
    return np.add.reduceat(a, starts, axis=0)


def _misfit(a: np.ndarray, lam: np.ndarray, problem: CNMFOptProblem) -> tuple:
    """The objective at ``(lam, a)`` and the floored model ``A diag(lam) A^T``."""
    model = np.maximum((a * lam) @ a.T, PROB_FLOOR)
    x, wt = problem.joint, problem.pair_weights
    log_ratio = problem.log_joint - np.log(model)
    f = float(np.sum(wt * (x * log_ratio - x + model)))
    return f, model


def cnmf_opt_mm_map(weights, factors_stacked, problem: CNMFOptProblem):
    """One EM update of the pairwise composite likelihood (all blocks at once).

    Parameters
    ----------
    weights : ndarray, shape (F,)
        ``lambda``.
    factors_stacked : ndarray, shape (sum I, F)
        The stacked factors.
    problem : CNMFOptProblem

    Returns
    -------
    weights, factors_stacked : ndarray
        The updated point.
    objective : float
        Minus the misfit of the *input* point (to maximize).

    Notes
    -----
    With column-stochastic factors and ``lambda`` on the simplex every model block
    ``A_j diag(lambda) A_k^T`` sums to one, so the objective of problems (5)-(6) is a
    constant minus ``sum w_jk <X_jk, log(A_j diag(lambda) A_k^T)>``: the log-likelihood
    of the pair observations under the latent-class model, weighted by ``w_jk``. Its
    EM update, with ``R = W * X / M`` over the stacked blocks and ``G = R A``, is
    ``A <- A * G`` (columns of every block renormalized) and
    ``lambda <- lambda * sum_p A(p, :) G(p, :)`` (renormalized); every update keeps
    the constraints and never raises the objective (Dempster, Laird & Rubin 1977).
    A block column that receives no mass (a variable none of whose pairs was
    observed) is left as it was.
    """
    lam = np.asarray(weights, dtype=float)
    a = np.asarray(factors_stacked, dtype=float)
    f, model = _misfit(a, lam, problem)
    g = (problem.pair_weights * problem.joint / model) @ a
    a_new = a * g
    sums = np.repeat(_block_sums(a_new, problem.blocks), problem.n_categories, axis=0)
    # a block column with no pair observed (or no mass) has no update: it stays
    empty = sums <= 0.0
    a_new = np.where(empty, a, a_new / np.where(empty, 1.0, sums))
    lam_new = lam * np.einsum("pf,pf->f", a, g)
    total = lam_new.sum()
    lam_new = lam_new / total if total > 0.0 else lam
    return lam_new, a_new, -f


def cnmf_opt_mm_step(
    state: CNMFOptState, problem: CNMFOptProblem
) -> tuple[CNMFOptState, CNMFOptInfo]:
    """One EM (majorize-minimize) step of CNMF-OPT's objective (:func:`cnmf_opt_mm_map`).

    ``state.steps`` is carried along unused. ``state`` is not modified.

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals
    >>> A = [np.array([[0.7, 0.1], [0.2, 0.3], [0.1, 0.6]])] * 4
    >>> m = PairwiseMarginals.from_params([0.4, 0.6], A)
    >>> problem, state = cnmf_opt_init(m, 2, init="random", random_state=0)
    >>> new, info = cnmf_opt_mm_step(state, problem)
    >>> bool(new.misfit <= state.misfit)
    True
    """
    lam, a, objective = cnmf_opt_mm_map(state.weights, state.factors_stacked, problem)
    f, _ = _misfit(a, lam, problem)
    return CNMFOptState(lam, a, f, state.steps), CNMFOptInfo(objective, 1, f)


def cnmf_opt_squarem_step(
    state: CNMFOptState, problem: CNMFOptProblem
) -> tuple[CNMFOptState, CNMFOptInfo]:
    """One SQUAREM-PMF cycle over :func:`cnmf_opt_mm_map` (three or more EM maps).

    :func:`bayespmf.kernels.squarem.squarem_pmf_step` extrapolates two EM maps, keeps
    the extrapolated point on the simplexes and backtracks until the objective is no
    worse than at ``state``, so the misfit never rises. ``state`` is not modified.

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals
    >>> A = [np.array([[0.7, 0.1], [0.2, 0.3], [0.1, 0.6]])] * 4
    >>> m = PairwiseMarginals.from_params([0.4, 0.6], A)
    >>> problem, state = cnmf_opt_init(m, 2, init="random", random_state=0)
    >>> new, info = cnmf_opt_squarem_step(state, problem)
    >>> bool(new.misfit <= state.misfit), info.n_evals >= 3
    (True, True)
    """

    def em_map(w, a):
        return cnmf_opt_mm_map(w, a, problem)

    lam, a, objective, info = squarem_pmf_step(
        em_map, state.weights, state.factors_stacked, problem.n_categories
    )
    f, _ = _misfit(a, lam, problem)
    new = CNMFOptState(np.ascontiguousarray(lam), np.ascontiguousarray(a), f, state.steps)
    return new, CNMFOptInfo(objective, int(info.n_evals), f)
