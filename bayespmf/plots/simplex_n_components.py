"""The choice of the number of vertices of a simplex nest as a figure."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_simplex_n_components"]


def plot_simplex_n_components(table):
    """Held-out completion error (with error bars) against the number of vertices K.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`bayespmf.fit.simplex_selection.select_simplex_n_components`: indexed by
        ``n_components`` with ``completion_mse``, ``completion_se`` and, if present,
        ``heldout_distance2`` and ``chosen``.

    Returns
    -------
    matplotlib.figure.Figure
        Left: ``completion_mse`` +- ``completion_se`` (lower is better), the chosen K
        marked. Right (when the table has it): ``heldout_distance2``, the squared
        distance to the fitted simplex, which only falls with K.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"completion_mse": [3.0, 1.0, 1.2],
    ...                   "completion_se": [0.1, 0.1, 0.1],
    ...                   "chosen": [False, True, False]},
    ...                  index=pd.Index([2, 3, 4], name="n_components"))
    >>> len(plot_simplex_n_components(t).axes)
    1
    """
    import matplotlib.pyplot as plt

    ks = np.asarray(table.index, dtype=int)
    has_dist = "heldout_distance2" in table.columns
    fig, axes = plt.subplots(
        1,
        1 + has_dist,
        figsize=(4.4 * (1 + has_dist), 3.4),
        layout="constrained",
        squeeze=False,
    )
    ax = axes[0][0]
    mse = table["completion_mse"].to_numpy(dtype=float)
    ax.errorbar(ks, mse, yerr=table["completion_se"].to_numpy(dtype=float), fmt="-o")
    if "chosen" in table.columns and table["chosen"].any():
        best = np.flatnonzero(table["chosen"].to_numpy(dtype=bool))[0]
        ax.plot(ks[best], mse[best], "*", ms=16, color="C3", label=f"chosen K={ks[best]}")
        ax.legend()
    ax.set(xlabel="K (vertices)", ylabel="held-out completion MSE", xticks=ks)
    ax.set_title("completion: estimate weights on half, predict the rest", fontsize=9)
    if has_dist:
        ax = axes[0][1]
        ax.plot(ks, table["heldout_distance2"].to_numpy(dtype=float), "-s", color="C1")
        ax.set(xlabel="K (vertices)", ylabel="held-out squared distance", xticks=ks)
        ax.set_title("distance to the simplex (falls with K)", fontsize=9)
    return fig
