"""Factor heatmaps and convergence curves (matplotlib, imported lazily)."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_convergence", "plot_factors"]


def plot_factors(weights, factors, *, names=None, categories=None, max_variables=12):
    """Heatmaps of the conditional PMFs ``A_n(i, f)`` with the class weights on top.

    Parameters
    ----------
    weights : array_like, shape (F,)
    factors : list of array_like, each (I_n, F)
    names : list of str, optional
        Variable names for the panel titles.
    categories : list of list of str, optional
        Category labels for the rows of each panel.
    max_variables : int, default 12
        Only the first ``max_variables`` variables are drawn.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = plot_factors([0.3, 0.7], [np.array([[0.2, 0.9], [0.8, 0.1]])] * 2)
    >>> len(fig.axes) >= 3
    True
    """
    import matplotlib.pyplot as plt

    w = np.asarray(weights, dtype=float)
    fs = [np.asarray(a, dtype=float) for a in factors][:max_variables]
    n = len(fs)
    ncols = min(4, n)
    nrows = 1 + int(np.ceil(n / ncols))
    fig = plt.figure(figsize=(3.2 * ncols, 0.8 + 2.4 * (nrows - 1)), layout="constrained")
    grid = fig.add_gridspec(nrows, ncols, height_ratios=[0.35] + [1] * (nrows - 1))
    ax = fig.add_subplot(grid[0, :])
    ax.bar(np.arange(w.size), w, color="tab:blue")
    ax.set_xticks(np.arange(w.size))
    ax.set_ylabel("Pr(H = f)")
    ax.set_title("class weights")
    for k, a in enumerate(fs):
        ax = fig.add_subplot(grid[1 + k // ncols, k % ncols])
        im = ax.imshow(a, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set_title(names[k] if names is not None else f"x{k}", fontsize=9)
        ax.set_xticks(np.arange(a.shape[1]))
        ax.set_xlabel("class f", fontsize=8)
        if categories is not None:
            ax.set_yticks(np.arange(a.shape[0]), categories[k], fontsize=7)
    fig.colorbar(im, ax=fig.axes[1:], shrink=0.6, label="Pr(x_n = i | H = f)")
    return fig


def plot_convergence(traces: dict, *, ylabel="log-likelihood", xlabel="iteration"):
    """Convergence curves, one per named trace (e.g. EM vs SQUAREM).

    Examples
    --------
    >>> fig = plot_convergence({"EM": [-3.0, -2.0, -1.5]})
    >>> fig.axes[0].get_ylabel()
    'log-likelihood'
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    for label, trace in traces.items():
        ax.plot(np.arange(1, len(trace) + 1), np.asarray(trace, dtype=float), label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    return fig
