r"""The one iteration loop of bayespmf: ``step(state) -> (state, info)`` until converged.

Every iterative point estimator (EM, SQUAREM-PMF, ...) supplies a pure ``step`` and
this loop owns the rest: the iteration cap, the stopping rule, the callback, the
progress bar and the :class:`~bayespmf.ConvergenceWarning` (BlackJAX style: kernels are
state -> state; the driver owns the loop).

The stopping rule
-----------------
A step reports the objective ``L_k`` (to maximize, e.g. the log-likelihood) of the
state it was given. Stopping when the *change* ``d_k = L_k - L_{k-1}`` is small is not
enough: on a likelihood plateau EM moves slowly but steadily, the change per iteration
is tiny, and yet many more iterations raise ``L`` by far more than the tolerance (seen
on public latent-class data, :ref:`bench-stopping-rule`). The loop therefore uses the
**Aitken estimate of the gain still to come**
(Böhning et al. 1994; McNicholas et al. 2010): for an iteration converging linearly at
rate ``r = d_k / d_{k-1}`` the remaining gain is ``d_k r / (1 - r)``, and it stops when

.. math:: \frac{d_k\, r}{1 - r} \le \mathrm{tol}\cdot\max(|L_k|, 1)
   \quad\text{with}\quad r = \max(d_k/d_{k-1},\ d_{k-1}/d_{k-2}) < 1,

i.e. only once the increments have shrunk twice in a row fast enough that their
geometric tail is within the tolerance. On a plateau (``r`` near or above 1) the
predicted gain is large or infinite and the loop goes on. The scale ``max(|L|, 1)``
keeps the rule meaningful for a log-likelihood that tends to 0 (a single row, an exact
fit), where a purely relative rule never stops. Changes at the level of rounding
(``|d_k| <= ROUNDOFF * max(|L_k|, 1)``) end the loop as converged: nothing more can be
gained in double precision.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from bayespmf._progress import progress_bar
from bayespmf._validation import ConvergenceWarning, check_float, check_int

__all__ = ["ROUNDOFF", "IterInfo", "StepInfo", "iterate", "predicted_gain"]

#: Relative size of an objective change that double precision cannot resolve reliably
#: (sums of 1e4-1e6 log terms carry rounding errors of ~1e-14-1e-13 relative).
ROUNDOFF = 1e-13


class StepInfo(NamedTuple):
    """What one step reports to :func:`iterate`.

    Attributes
    ----------
    objective : float
        Objective (to maximize) of the state the step was *given*.
    n_evals : int
        Evaluations of the underlying map (1 for EM, >= 3 for a SQUAREM-PMF cycle).
    """

    objective: float
    n_evals: int = 1


class IterInfo(NamedTuple):
    """What :func:`iterate` reports.

    Attributes
    ----------
    n_iter : int
        Steps taken.
    n_evals : int
        Map evaluations, summed over steps.
    trace : ndarray, shape (n_iter,)
        The objective reported by every step.
    converged : bool
        Whether the stopping rule (module docstring) was met.
    stopped : bool
        Whether the callback stopped the loop.
    """

    n_iter: int
    n_evals: int
    trace: np.ndarray
    converged: bool
    stopped: bool


def predicted_gain(trace) -> float:
    """Aitken estimate of the objective gain still to come after ``trace[-1]``.

    Returns ``inf`` while fewer than three values are known or the increments are not
    shrinking, ``0.0`` when the last change is at rounding level.

    Examples
    --------
    >>> predicted_gain([-10.0, -9.0, -8.5, -8.25])  # halving increments: 0.25 to go
    0.25
    >>> predicted_gain([-10.0, -9.0, -8.0, -7.0])   # a plateau: no end in sight
    inf
    """
    t = np.asarray(trace, dtype=float)
    if t.size >= 2:
        scale = max(abs(t[-1]), 1.0)
        if abs(t[-1] - t[-2]) <= ROUNDOFF * scale:
            return 0.0
    if t.size < 4:
        return float("inf")
    d = np.diff(t[-4:])
    if d[-1] < 0 or d[-2] <= 0 or d[-3] <= 0:
        # a decrease (beyond rounding) or a flat step before it: no geometric tail
        return float("inf")
    rate = max(d[-1] / d[-2], d[-2] / d[-3])
    if rate >= 1.0:
        return float("inf")
    return float(d[-1] * rate / (1.0 - rate))


def _converged(rule, trace, info, tol) -> bool:
    if rule == "aitken":
        return predicted_gain(trace) <= tol * max(abs(trace[-1]), 1.0)
    if rule == "relative":
        return len(trace) > 1 and abs(trace[-1] - trace[-2]) <= tol * abs(trace[-1])
    if callable(rule):
        return bool(rule(trace, info, tol))
    raise ValueError(
        f"The 'rule' parameter of iterate must be 'aitken', 'relative' or a callable. "
        f"Got {rule!r}."
    )


def iterate(
    step: Callable[[Any], tuple[Any, StepInfo]],
    state,
    *,
    max_iter: int,
    tol: float,
    callback: Callable[[int, Any], bool | None] | None = None,
    progressbar: bool = False,
    desc: str = "iterating",
    owner: str = "iterate",
    warn: bool = True,
    rule="aitken",
    max_evals: int | None = None,
    min_step_evals: int = 1,
):
    """Run ``state, info = step(state)`` until the stopping rule holds or ``max_iter``.

    Parameters
    ----------
    step : callable
        ``state -> (new_state, StepInfo)``; ``StepInfo.objective`` is the objective of
        the state it was given.
    state : any
        The starting state.
    max_iter : int
        Step cap (>= 1).
    tol : float
        Tolerance of the stopping rule (module docstring); 0 runs to ``max_iter``
        unless the objective stops changing at rounding level.
    callback : callable, optional
        ``callback(iteration, state)`` after every step; returning ``True`` stops the
        loop (reported in ``IterInfo.stopped``, without a warning).
    progressbar : bool, default False
    desc, owner : str
        Progress-bar label, and the name used in the warning.
    warn : bool, default True
        Warn (``ConvergenceWarning``) when ``max_iter`` is reached unconverged.
    rule : "aitken", "relative" or callable, default "aitken"
        The stopping rule. ``"aitken"``: the predicted remaining gain (module
        docstring); ``"relative"``: ``|L_k - L_{k-1}| <= tol * |L_k|``, the rule of
        several papers' code, kept so that their tables can be reproduced;
        a callable ``rule(trace, info, tol) -> bool`` for a kernel whose published rule
        looks at something else (e.g. a parameter change carried in its ``info``).
    max_evals : int, optional
        A budget of map evaluations (the sum of ``StepInfo.n_evals``) besides
        ``max_iter``: a step starts only while ``min_step_evals`` of it remain, and
        running out of it unconverged warns like ``max_iter``. With a budget the
        progress bar counts evaluations. Default: no budget.
    min_step_evals : int, default 1
        Evaluations a step needs at the least (2 for a SQUAREM cycle, which must map
        ``x`` and ``F(x)`` before it can extrapolate). Only used with ``max_evals``.

    Returns
    -------
    state : any
        The last state (one step past the last objective in ``info.trace``).
    info : IterInfo

    Examples
    --------
    Newton's iteration for sqrt(2), maximizing ``-|x^2 - 2|``:

    >>> def newton(x):
    ...     return 0.5 * (x + 2.0 / x), StepInfo(-abs(x * x - 2.0))
    >>> x, info = iterate(newton, 1.0, max_iter=50, tol=1e-12)
    >>> round(x, 12), info.converged
    (1.414213562373, True)
    """
    max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
    tol = check_float(tol, "tol", owner=owner, low=0.0)
    if max_evals is not None:
        max_evals = check_int(max_evals, "max_evals", owner=owner, low=min_step_evals)
    trace: list[float] = []
    n_evals = 0
    converged = stopped = spent = False
    total = max_iter if max_evals is None else max_evals
    with progress_bar(total, desc, enabled=progressbar) as bar:
        for it in range(1, max_iter + 1):
            if max_evals is not None and n_evals + min_step_evals > max_evals:
                spent = True
                break
            state, info = step(state)
            n_evals += int(info.n_evals)
            trace.append(float(info.objective))
            bar.update(1 if max_evals is None else int(info.n_evals))
            bar.set_postfix(objective=info.objective)
            converged = _converged(rule, trace, info, tol)
            if callback is not None and callback(it, state) is True:
                stopped = True
            if converged or stopped:
                break
    if warn and not converged and not stopped:
        limit, knob = f"in max_iter={max_iter} iterations", "max_iter"
        if spent:
            limit, knob = f"within max_evals={max_evals} evaluations", "max_evals"
        why = f"its stopping rule (tol={tol}) was not met"
        if rule == "aitken":
            last = predicted_gain(trace)
            more = "" if not np.isfinite(last) else f" (about {last:.3g} more to gain)"
            why = f"the objective was still rising{more} above tol={tol} relative"
        warnings.warn(
            f"{owner} did not converge {limit}: {why}. Increase '{knob}' or loosen 'tol'.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return state, IterInfo(len(trace), n_evals, np.asarray(trace), converged, stopped)
