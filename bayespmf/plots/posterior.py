"""Figures of posterior draws (ArviZ and matplotlib, imported lazily)."""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["plot_posterior_trace"]


def plot_posterior_trace(idata, var_names=None, *, title: str | None = None):
    """Compact ArviZ trace plot of posterior draws, as one figure.

    Parameters
    ----------
    idata : arviz.InferenceData
        Draws, e.g. from :func:`bayespmf.models.sample` (classes already aligned).
    var_names : list of str, optional
        Variables to draw; all by default.
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        With the constrained layout engine, which keeps panel titles off tick labels.

    Examples
    --------
    >>> import arviz as az
    >>> idata = az.from_dict(posterior={"mu": np.zeros((2, 20)) + np.arange(20)})
    >>> len(plot_posterior_trace(idata, ["mu"], title="trace").axes)
    2
    """
    import arviz as az

    with warnings.catch_warnings():
        # arviz 0.23's plot_trace calls a matplotlib 3.11-deprecated helper
        warnings.filterwarnings(
            "ignore", "Passing a dict or None as alias_mapping", category=Warning
        )
        axes = az.plot_trace(idata, var_names=var_names, compact=True, show=False)
    fig = np.asarray(axes).ravel()[0].figure
    if title:
        fig.suptitle(title)
    fig.set_layout_engine("constrained")
    return fig
