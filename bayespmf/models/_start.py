"""Starting points of the chains: one set of constants and one jitter for every family.

:data:`INIT_CLIP` and :data:`INIT_JITTER` and :func:`jitter_simplex` serve the
latent-class model, the latent-class regression and the simplex nest (the start
builders of their families, run by :func:`bayespmf.models.initvals` and
:func:`bayespmf.models.sample`); the latent-class point estimate's binding to its
model is :mod:`bayespmf.models._binding`.
"""

from __future__ import annotations

import numbers

import numpy as np

from bayespmf._validation import DataValidationError, check_random_state

__all__ = [
    "INIT_CLIP",
    "INIT_JITTER",
    "check_jitter",
    "clip_simplex",
    "jitter_simplex",
    "start_rng",
]

#: Entries of a starting point are clipped to at least this before the simplex
#: transform (an exact zero maps to -inf: "Bad initial energy", STACK-NOTES.md).
INIT_CLIP = 1e-4

#: Standard deviation of the per-chain jitter of a starting point, applied to the log
#: of every simplex entry (about the scale of the stick-breaking transform): chains
#: start apart enough for r-hat to mean something, close enough to share the mode.
INIT_JITTER = 0.05


def clip_simplex(x, axis) -> np.ndarray:
    """``x`` with every entry at least :data:`INIT_CLIP`, renormalized along ``axis``."""
    x = np.maximum(np.asarray(x, dtype=float), INIT_CLIP)
    return x / x.sum(axis=axis, keepdims=True)


def jitter_simplex(x, axis, jitter: float, rng) -> np.ndarray:
    """``x`` clipped, jittered on the log scale (``x * exp(jitter * z)``) and renormalized.

    Every result stays on the simplex along ``axis``; with ``jitter == 0`` no random
    number is drawn and ``x`` is only clipped (:data:`INIT_CLIP`) and renormalized.

    Examples
    --------
    >>> x = jitter_simplex([[0.0, 1.0]], 1, 0.05, np.random.default_rng(0))
    >>> bool(np.allclose(x.sum(1), 1.0) and x.min() > 0)
    True
    """
    z = rng.standard_normal(np.shape(x)) if jitter > 0 else 0.0
    return clip_simplex(clip_simplex(x, axis) * np.exp(jitter * z), axis)


def start_rng(random_seed) -> np.random.Generator:
    """The generator of a PyMC-facing start builder, from ``random_seed``.

    Examples
    --------
    >>> a = start_rng(0).integers(10**6)
    >>> bool(a == start_rng(0).integers(10**6))
    True
    """
    return check_random_state(random_seed)


def check_jitter(jitter, owner: str) -> float:
    """``jitter`` as a float >= 0 (``None``: :data:`INIT_JITTER`).

    Raises
    ------
    DataValidationError
        Anything else, naming ``jitter`` and ``owner``.

    Examples
    --------
    >>> check_jitter(None, "sample"), check_jitter(0, "sample")
    (0.05, 0.0)
    >>> check_jitter(-1.0, "sample")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: The 'jitter' parameter of sample must ...
    """
    if jitter is None:
        return INIT_JITTER
    ok = not isinstance(jitter, bool) and isinstance(jitter, numbers.Real)
    if not ok or not np.isfinite(jitter) or jitter < 0:
        raise DataValidationError(
            f"The 'jitter' parameter of {owner} must be a finite number >= 0 (the sd of "
            "each chain's jitter of its start; 0: every chain at the point estimate "
            f"itself, None: INIT_JITTER = {INIT_JITTER}); got {jitter!r}."
        )
    return float(jitter)
