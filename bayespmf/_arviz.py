"""Small ArviZ 1 helpers shared by the posterior functions and plots.

ArviZ 1 keeps a posterior as an ``xarray.DataTree`` (one child node per group) and its
array functions reduce the last axis; these helpers name the two operations the
posterior code does on raw NumPy draws.
"""

from __future__ import annotations

import numpy as np

__all__ = ["hdi_of_draws"]


def hdi_of_draws(values, prob: float) -> np.ndarray:
    """Highest-density interval over the leading (chain, draw) axes of ``values``.

    Parameters
    ----------
    values : array_like, shape (chain, draw, ...)
        Draws of a quantity.
    prob : float
        Probability mass of the interval, in (0, 1).

    Returns
    -------
    ndarray, shape (..., 2)
        Lower and upper bounds (ArviZ's ``hdi``, ``method="nearest"``).

    Examples
    --------
    >>> draws = np.r_[-5.0, np.zeros(98), 5.0].reshape(2, 50)  # 2 chains, 50 draws
    >>> hdi_of_draws(draws, 0.9).tolist()  # the outliers lie outside
    [0.0, 0.0]
    """
    import arviz as az

    values = np.asarray(values, dtype=float)
    flat = values.reshape((-1, *values.shape[2:]))
    return np.asarray(az.hdi(np.moveaxis(flat, 0, -1), prob=prob))
