"""The rank-selection table as a figure (matplotlib, imported lazily)."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_n_components_selection"]

_IC = ("aic", "bic", "caic", "sabic")
_FIT = ("heldout_loglik", "elpd_loo")


def plot_n_components_selection(table, *, criteria=None):
    """Information criteria and held-out fit against the number of classes.

    Parameters
    ----------
    table : pandas.DataFrame
        Indexed by rank, from :func:`bayespmf.estimators.compare_n_components` or
        :func:`bayespmf.models.select_n_components`.
    criteria : sequence of str, optional
        Information criteria to draw (default: those of ``aic``, ``bic``, ``caic``,
        ``sabic`` in ``table``); the minimum of each is marked.

    Returns
    -------
    matplotlib.figure.Figure
        One panel of criteria (lower is better), a second of ``heldout_loglik`` /
        ``elpd_loo`` (higher is better) when the table has them, a third of the
        bootstrap LRT p-values (``blrt_p``) when present; ranks whose best optimum was
        not replicated are drawn hollow.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"bic": [10.0, 8.0, 9.0], "aic": [9.0, 6.0, 5.5]},
    ...                  index=pd.Index([1, 2, 3], name="n_components"))
    >>> len(plot_n_components_selection(t).axes)
    1
    """
    import matplotlib.pyplot as plt

    candidates = np.asarray(table.index, dtype=int)
    ics = [c for c in (criteria or _IC) if c in table.columns]
    fits = [c for c in _FIT if c in table.columns]
    has_p = "blrt_p" in table.columns
    n_panels = 1 + bool(fits) + has_p
    fig, axes = plt.subplots(
        1, n_panels, figsize=(4.2 * n_panels, 3.4), layout="constrained", squeeze=False
    )
    axes = axes[0]
    hollow = None
    if "replicated" in table.columns:
        hollow = ~table["replicated"].to_numpy(dtype=bool)
    ax = axes[0]
    for c in ics:
        v = table[c].to_numpy(dtype=float)
        (line,) = ax.plot(candidates, v, "-o", label=c.upper())
        if hollow is not None and hollow.any():
            ax.plot(candidates[hollow], v[hollow], "o", mfc="white", color=line.get_color())
        k = np.nanargmin(v)
        ax.plot(candidates[k], v[k], "*", ms=14, color=line.get_color())
    ax.set_xlabel("classes F")
    ax.set_ylabel("criterion (lower is better)")
    ax.set_xticks(candidates)
    ax.legend(fontsize=8)
    panel = 1
    if fits:
        ax = axes[panel]
        panel += 1
        for c in fits:
            v = table[c].to_numpy(dtype=float)
            se = (
                table["se"].to_numpy(dtype=float)
                if c == "elpd_loo" and "se" in table
                else None
            )
            ax.errorbar(candidates, v, yerr=se, fmt="-o", capsize=3, label=c)
            k = np.nanargmax(v)
            ax.plot(candidates[k], v[k], "*", ms=14, color="k")
        ax.set_xlabel("classes F")
        ax.set_ylabel("held-out fit (higher is better)")
        ax.set_xticks(candidates)
        ax.legend(fontsize=8)
    if has_p:
        ax = axes[panel]
        p = table["blrt_p"].to_numpy(dtype=float)
        ax.bar(candidates, p, color="tab:gray")
        ax.axhline(0.05, color="tab:red", ls="--", lw=1, label="0.05")
        ax.set_xlabel("classes F (tested against F - 1)")
        ax.set_ylabel("bootstrap LRT p-value")
        ax.set_xticks(candidates)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
    return fig
