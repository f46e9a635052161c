"""Generic SQUAREM (Varadhan & Roland 2008) under the one loop.

The cycle is :func:`bayespmf.kernels.squarem.squarem_step`; :func:`squarem` runs it
under :func:`bayespmf.fit.loop.iterate` with R ``SQUAREM``'s own stopping rule,
``||F(x) - x|| < tol``, and its budget of map evaluations.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bayespmf._validation import ConvergenceWarning, check_float, check_int
from bayespmf.fit.loop import iterate
from bayespmf.kernels.squarem import SCHEMES, SquaremOptions, squarem_init, squarem_step

__all__ = ["SquaremInfo", "squarem"]

#: A SQUAREM cycle maps ``x`` and ``F(x)`` before it can extrapolate or stop (R starts
#: a cycle only while two evaluations of the budget remain).
CYCLE_MIN_EVALS = 2


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
