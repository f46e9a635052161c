"""Run a fit and keep the warnings it gives, to count or report them, not show them.

Model selection, resampling loops and task reports refit many times; each warning of a
refit is a number to report (how many refits warned, and why), not a message to print.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["call_recording_warnings"]


def call_recording_warnings(
    func: Callable[..., Any], /, *args, **kwargs
) -> tuple[Any, list[warnings.WarningMessage]]:
    """``func(*args, **kwargs)`` and every warning it gave, none of them shown.

    Parameters
    ----------
    func : callable
    *args, **kwargs
        Passed to ``func``.

    Returns
    -------
    result
        What ``func`` returned.
    caught : list of warnings.WarningMessage
        Every warning ``func`` gave, in order, repeats included (the filter is
        ``"always"`` inside the call; the caller's filters are restored after it).

    Examples
    --------
    >>> def double(x):
    ...     warnings.warn("x is small")
    ...     return 2 * x
    >>> value, caught = call_recording_warnings(double, 3)
    >>> value, [str(w.message) for w in caught]
    (6, ['x is small'])
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = func(*args, **kwargs)
    return result, caught
