"""SQUAREM under the one loop: generic (Varadhan & Roland 2008) and SQUAREM-PMF.

The generic cycle is :func:`bayespmf.kernels.squarem.squarem_step`; :func:`squarem`
runs it under :func:`bayespmf.fit.loop.iterate` with R ``SQUAREM``'s own stopping rule,
``||F(x) - x|| < tol``, and its budget of map evaluations.

The SQUAREM-PMF cycle (Chege et al., Tables I-II) is
:func:`bayespmf.kernels.squarem.squarem_pmf_step`; :func:`squarem_pmf_steps` makes it a
loop step on :class:`~bayespmf.kernels.em.EMState`, :func:`squarem_pmf_converged` is its
stopping rule and :func:`squarem_pmf` runs the two under the loop.

The SQUAREM-PMF stopping rule
-----------------------------
EM's rule (:mod:`bayespmf.fit.loop`) stops when the Aitken estimate of the gain still to
come, taken from the last three increments of the log-likelihood, is at most
``tol * |L|``. That estimate assumes a linearly convergent sequence, as EM's is. The
log-likelihoods of successive SQUAREM-PMF cycles are not: the step length of Table I
alternates between short and long steps, so the gains alternate too, and near a saddle
point or a plateau of the likelihood the cycles slow down to EM's pace for a while
before they speed up again. Three shrinking gains there look like fast convergence,
and the estimate falls short of the gain still to come by orders of magnitude: with
EM's rule SQUAREM-PMF stopped well below where EM, run from the same start to the same
``tol``, ended (``benchmarks/paper_squarem.py`` prints the difference per trial). No
local estimate separates such a stall from the end (plain EM steps from a stalled point
predict a tail below ``tol`` too: it is a saddle, which EM from the start went past);
going deeper does, because a stall near a saddle ends by itself after a few more
cycles. :func:`squarem_pmf_converged` therefore asks the same estimate to be below
``SQUAREM_PMF_TOL_SCALE * tol * |L|``. The extra depth costs a few cheap cycles, so
SQUAREM-PMF stays faster than EM at the same ``tol``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bayespmf._validation import ConvergenceWarning, check_float, check_int
from bayespmf.fit.loop import StepInfo, iterate, predicted_gain
from bayespmf.kernels.em import EMState
from bayespmf.kernels.squarem import (
    SCHEMES,
    SquaremOptions,
    squarem_init,
    squarem_pmf_step,
    squarem_step,
)

__all__ = [
    "SQUAREM_PMF_CYCLE_MAPS",
    "SQUAREM_PMF_TOL_SCALE",
    "SquaremInfo",
    "squarem",
    "squarem_pmf",
    "squarem_pmf_converged",
    "squarem_pmf_steps",
]

#: A SQUAREM cycle maps ``x`` and ``F(x)`` before it can extrapolate or stop (R starts
#: a cycle only while two evaluations of the budget remain).
CYCLE_MIN_EVALS = 2

#: EM maps of one SQUAREM-PMF cycle at the least (Chege et al., Table I: three when its
#: extrapolation is accepted, one more per backtrack).
SQUAREM_PMF_CYCLE_MAPS = 3

#: How much further below ``tol * |L|`` SQUAREM-PMF's Aitken estimate of the gain still
#: to come must fall than EM's (module docstring). The estimate from three cycle gains
#: can miss the gain still to come by orders of magnitude where the cycles stall near a
#: saddle or a plateau; asking three orders of magnitude more of it carries SQUAREM-PMF
#: through such stalls. Each order costs a few cycles of a superlinearly converging
#: phase, so SQUAREM-PMF stays faster than EM at the same ``tol``. Less depth (1e-2)
#: still stopped in a stall on the Table III setting; more (1e-4) reached the same
#: maxima there at more cycles.
SQUAREM_PMF_TOL_SCALE = 1e-3


class SquaremInfo(NamedTuple):
    """Diagnostics of :func:`squarem`.

    Attributes
    ----------
    n_evals : int
        Evaluations of the fixed-point map.
    n_objective_evals : int
        Evaluations of the objective (0 without one).
    n_iter : int
        SQUAREM cycles.
    converged : bool
        Whether ``||F(x) - x|| < tol`` was reached within ``max_evals``.
    objective_trace : ndarray
        Objective after every cycle (empty without an objective).
    """

    n_evals: int
    n_objective_evals: int
    n_iter: int
    converged: bool
    objective_trace: np.ndarray


def _residual_below_tol(trace, info, tol) -> bool:
    """R ``SQUAREM``'s rule: the last residual ``||F(y) - y||`` fell below ``tol``."""
    return info.residual < tol


def squarem(
    fixed_point: Callable[[np.ndarray], np.ndarray],
    x0,
    objective: Callable[[np.ndarray], float] | None = None,
    *,
    scheme: str = "SqS3",
    tol: float = 1e-7,
    max_evals: int = 1500,
    step_min: float = 1.0,
    step_max0: float = 1.0,
    mstep: float = 4.0,
    objective_increase: float = 1.0,
    progressbar: bool = False,
):
    """Find a fixed point of ``fixed_point`` by SQUAREM (Varadhan & Roland 2008).

    Parameters
    ----------
    fixed_point : callable
        ``x -> F(x)`` on a flat float vector (e.g. one EM step).
    x0 : array_like, shape (p,)
        Starting point (not modified).
    objective : callable, optional
        Merit function to *minimize*, e.g. the negative log-likelihood of an EM. When
        given, an extrapolated point that raises it by more than ``objective_increase``
        is rejected for the plain double step ``F(F(x))``. Without one, only non-finite
        points are rejected (R's ``squarem2``).
    scheme : {"SqS1", "SqS2", "SqS3"}
        Step length: ``-r'v / v'v``, ``-r'r / r'v`` or ``sqrt(r'r / v'v)``.
    tol : float, default 1e-7
        Stop when ``||F(x) - x||_2 < tol``.
    max_evals : int, default 1500
        Budget of fixed-point evaluations.
    step_min, step_max0, mstep : float
        Step-length bounds and their adaptation factor (R defaults): ``alpha`` is
        clipped to ``[step_min, step_max]``; when it hits ``step_max`` the bound grows
        by ``mstep``, and it shrinks back after a rejected step.
    objective_increase : float, default 1.0
        Allowed increase of the objective per cycle (R's ``objfn.inc``); 0 makes the
        iteration monotone.
    progressbar : bool, default False

    Returns
    -------
    x : ndarray, shape (p,)
    info : SquaremInfo

    Raises
    ------
    ValueError
        Bad ``scheme``, ``tol``, ``max_evals`` or ``x0``.

    Warns
    -----
    ConvergenceWarning
        When ``max_evals`` is exhausted before ``tol``, or the map returns a
        non-finite point.

    Notes
    -----
    One cycle (:func:`bayespmf.kernels.squarem.squarem_step`): ``x1 = F(x)``,
    ``x2 = F(x1)``, ``r = x1 - x``, ``v = x2 - 2 x1 + x``,
    ``x' = F(x + 2 alpha r + alpha^2 v)`` (Varadhan & Roland eq. (9) and their global
    safeguard; Chege et al. Table I steps 3-9 with ``alpha -> -alpha``). The loop is
    :func:`bayespmf.fit.loop.iterate` with the rule ``||F(y) - y|| < tol`` (tested on
    ``x`` and on ``x1`` within a cycle) and the budget ``max_evals``: a cycle starts
    only while two evaluations remain, as in R.

    Examples
    --------
    >>> x, info = squarem(lambda x: 0.5 * np.cos(x), np.zeros(1), tol=1e-12)
    >>> round(float(x[0]), 8), info.converged
    (0.45018361, True)
    """
    owner = "squarem"
    if scheme not in SCHEMES:
        raise ValueError(
            f"The 'scheme' parameter of squarem must be one of {list(SCHEMES)}. "
            f"Got {scheme!r}."
        )
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    max_evals = check_int(max_evals, "max_evals", owner=owner, low=CYCLE_MIN_EVALS)
    step_min = check_float(step_min, "step_min", owner=owner)
    step_max0 = check_float(step_max0, "step_max0", owner=owner, low=0.0, low_open=True)
    mstep = check_float(mstep, "mstep", owner=owner, low=1.0)
    state = squarem_init(x0, objective, step_min=step_min, step_max0=step_max0)
    options = SquaremOptions(scheme, tol, max_evals, step_max0, mstep, objective_increase)
    trace: list[float] = []

    def watch(_, s):  # the merit after every completed cycle; stop when the map fails
        if objective is not None and s.n_iter > len(trace):
            trace.append(s.objective)
        return s.failed

    # the budget is max_evals; max_iter never binds (every cycle maps at least once)
    budget = {"max_iter": max_evals, "max_evals": max_evals}
    state, it = iterate(
        lambda s: squarem_step(s, fixed_point, objective, options),
        state,
        tol=tol,
        callback=watch,
        progressbar=progressbar,
        desc="SQUAREM",
        owner=owner,
        rule=_residual_below_tol,
        min_step_evals=CYCLE_MIN_EVALS,
        **budget,
    )
    if state.failed:
        warnings.warn(
            f"{owner} stopped after {state.n_evals} map evaluations without reaching "
            f"tol={tol}: the fixed-point map returned a non-finite point. Check the "
            "map, or start from another 'x0'.",
            ConvergenceWarning,
            stacklevel=2,
        )
    counts = (state.n_evals, state.n_objective_evals, state.n_iter)
    return state.x, SquaremInfo(*counts, it.converged, np.asarray(trace))


# ------------------------------------------------------------------------ SQUAREM-PMF


def squarem_pmf_converged(trace, info, tol) -> bool:
    """SQUAREM-PMF's stopping rule for :func:`bayespmf.fit.loop.iterate` (``rule=``).

    Parameters
    ----------
    trace : sequence of float
        Log-likelihood at the start of every SQUAREM-PMF cycle so far.
    info : StepInfo
        The last cycle's report (not used: the rule reads the trace).
    tol : float
        The fit's tolerance, as for EM.

    Returns
    -------
    bool
        Whether the Aitken estimate of the gain still to come
        (:func:`bayespmf.fit.loop.predicted_gain`) is at most
        ``SQUAREM_PMF_TOL_SCALE * tol * max(|L|, 1)``. A change at rounding level ends
        the fit as converged, as in EM's rule.

    Notes
    -----
    EM's rule with ``tol`` scaled down by :data:`SQUAREM_PMF_TOL_SCALE`; why the cycles
    of SQUAREM-PMF need the extra depth to end where EM ends is in the module
    docstring.

    Examples
    --------
    >>> squarem_pmf_converged([-10.0, -9.0, -8.5, -8.25], None, 0.1)  # 0.25 to go
    False
    >>> squarem_pmf_converged([-10.0, -9.0, -8.5, -8.25], None, 100.0)
    True
    """
    scale = SQUAREM_PMF_TOL_SCALE * tol * max(abs(float(trace[-1])), 1.0)
    return predicted_gain(trace) <= scale


def squarem_pmf_steps(em_step, n_categories):
    """The loop step ``EMState -> (EMState, StepInfo)`` of SQUAREM-PMF around ``em_step``.

    Parameters
    ----------
    em_step : callable
        ``(weights, factors_stacked) -> (weights, factors_stacked, loglik_of_input)``,
        e.g. the ``step`` of :func:`bayespmf.kernels.em.build_em_kernel`.
    n_categories : sequence of int

    Returns
    -------
    callable
        One cycle of :func:`bayespmf.kernels.squarem.squarem_pmf_step`: the new
        ``theta_0`` as an :class:`~bayespmf.kernels.em.EMState` and a ``StepInfo``
        with the log-likelihood of the state it was given and the EM maps it cost.

    Examples
    --------
    >>> from bayespmf.kernels.em import build_em_kernel
    >>> k = build_em_kernel([[0, 0], [1, 1]], [2, 2], n_components=1, backend="scipy")
    >>> step = squarem_pmf_steps(k.step, [2, 2])
    >>> state, info = step(EMState(np.ones(1), np.full((4, 1), 0.5), -np.inf))
    >>> round(info.objective, 4), info.n_evals  # 2 rows, each of probability 1/4
    (-2.7726, 3)
    """

    def step(state):
        w, a, ll, info = squarem_pmf_step(
            em_step, state.weights, state.factors_stacked, n_categories
        )
        return EMState(w, a, ll), StepInfo(ll, info.n_evals)

    return step


def squarem_pmf(
    em_step,
    weights,
    factors_stacked,
    n_categories,
    *,
    max_iter: int,
    tol: float,
    callback=None,
    progressbar: bool = False,
    owner: str = "squarem_pmf",
    warn: bool = True,
):
    """Run SQUAREM-PMF (Chege et al., Tables I-II) from a start until its rule holds.

    Parameters
    ----------
    em_step : callable
        The EM map, ``(weights, factors_stacked) -> (weights, factors_stacked,
        loglik_of_input)`` (the ``step`` of :func:`bayespmf.kernels.em.build_em_kernel`).
    weights : array_like, shape (F,)
    factors_stacked : array_like, shape (sum I_n, F)
        The start (not modified).
    n_categories : sequence of int
    max_iter : int
        Maximum SQUAREM-PMF cycles (>= 3 EM maps each).
    tol : float
        The tolerance EM would be given (:func:`squarem_pmf_converged`).
    callback : callable, optional
        ``callback(iteration, EMState)`` after every cycle; ``True`` stops the fit.
    progressbar : bool, default False
    owner : str
        The name used in warnings and errors.
    warn : bool, default True
        Warn (``ConvergenceWarning``) when ``max_iter`` is reached unconverged.

    Returns
    -------
    state : EMState
        The last ``theta_0`` (one EM map past the last log-likelihood of the trace).
    info : IterInfo
        Cycles, EM maps (``n_evals``), the log-likelihood trace and whether the rule
        held.

    Raises
    ------
    ValueError
        Bad ``max_iter`` or ``tol``.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` cycles end before the rule holds (and ``warn``).

    Notes
    -----
    The loop of ``fit_em(accelerate="squarem")``: :func:`squarem_pmf_steps` under
    :func:`bayespmf.fit.loop.iterate` with ``rule=`` :func:`squarem_pmf_converged`.

    Examples
    --------
    >>> from bayespmf.kernels.em import build_em_kernel, init_random
    >>> codes = np.array([[0, 0, 1], [1, 1, 0], [0, 0, 1], [1, 1, -1], [0, -1, 1]] * 20)
    >>> k = build_em_kernel(codes, [2, 2, 2], n_components=2)
    >>> start = init_random([2, 2, 2], 2, random_state=0)
    >>> state, info = squarem_pmf(k.step, start.weights, np.concatenate(start.factors),
    ...                           [2, 2, 2], max_iter=500, tol=1e-7)
    >>> info.converged, bool(np.all(np.diff(info.trace) >= -1e-9))
    (True, True)
    """
    start = EMState(
        np.array(weights, dtype=float), np.array(factors_stacked, dtype=float), -np.inf
    )
    return iterate(
        squarem_pmf_steps(em_step, n_categories),
        start,
        max_iter=max_iter,
        tol=tol,
        callback=callback,
        progressbar=progressbar,
        desc="SQUAREM-PMF",
        owner=owner,
        warn=warn,
        rule=squarem_pmf_converged,
    )
