"""Checks of the tasks' arguments shared by the trial loop and the posterior options.

A list of names against the names allowed (with a close match suggested) and a rank
grid; :mod:`bayespmf.apps.tasks` and :mod:`bayespmf.apps._task_posterior` both use them.
"""

from __future__ import annotations

import numpy as np

from bayespmf._validation import DataValidationError, check_int


def check_names(names, allowed, what):
    """``names`` (one or a sequence) as a list; raise on the first not in ``allowed``."""
    names = [names] if isinstance(names, str) else list(names)
    bad = [m for m in names if m not in allowed]
    if bad:
        import difflib

        close = difflib.get_close_matches(str(bad[0]), list(allowed), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DataValidationError(
            f"Unknown {what} {bad[0]!r}; choose from {list(allowed)}.{hint}"
        )
    return names


def check_n_components_grid(candidates):
    """A rank grid (one rank or a sequence) as sorted distinct ints >= 1."""
    candidates = (
        [candidates] if isinstance(candidates, int | np.integer) else list(candidates)
    )
    if not candidates:
        raise DataValidationError("'candidates' must list at least one rank.")
    return sorted({check_int(r, "candidates", low=1) for r in candidates})
