"""Figures of task tables from :mod:`bayespmf.apps.tasks` (matplotlib, imported lazily)."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_task"]


def plot_task(table):
    """Bar chart of a task table: accuracy or RMSE (mean ± std) per method.

    Bars are coloured by kind (latent-class, posterior, baseline).

    Parameters
    ----------
    table : pandas.DataFrame
        A table of :func:`bayespmf.apps.tasks.classify` (columns ``accuracy_mean``,
        ``accuracy_std``) or :func:`bayespmf.apps.tasks.predict_ratings` (``rmse_mean``,
        ``rmse_std``), with the columns ``kind`` and ``n_trials``.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame(
    ...     {"accuracy_mean": [90.0, 85.0], "accuracy_std": [1.0, 2.0],
    ...      "kind": ["latent-class", "baseline"], "n_trials": [3, 3]},
    ...     index=["em", "naive-bayes"],
    ... )
    >>> plot_task(table).axes[0].get_ylabel()
    'test accuracy (%)'
    """
    import matplotlib.pyplot as plt

    metric = "accuracy" if "accuracy_mean" in table else "rmse"
    colors = {"latent-class": "tab:blue", "posterior": "tab:purple", "baseline": "tab:gray"}
    fig, ax = plt.subplots(figsize=(1.0 + 0.7 * len(table), 3.8), layout="constrained")
    x = np.arange(len(table))
    ax.bar(
        x,
        table[f"{metric}_mean"],
        yerr=table[f"{metric}_std"],
        color=[colors.get(k, "tab:blue") for k in table["kind"]],
        capsize=3,
    )
    ax.set_xticks(x, table.index, rotation=40, ha="right", fontsize=8)
    lo = float((table[f"{metric}_mean"] - table[f"{metric}_std"]).min())
    hi = float((table[f"{metric}_mean"] + table[f"{metric}_std"]).max())
    pad = 0.15 * (hi - lo + 1e-9)
    ax.set_ylim(max(0.0, lo - pad), hi + pad)
    ax.set_ylabel("test accuracy (%)" if metric == "accuracy" else "test RMSE")
    shown = [k for k in colors if k in set(table["kind"])]  # only kinds with bars
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[k]) for k in shown]
    ax.legend(handles, shown, fontsize=7, loc="best")
    ax.set_title(
        f"{table.attrs.get('task', '')}: mean ± std over "
        f"{int(table['n_trials'].max())} trials"
    )
    return fig
