"""Figures of posterior draws (ArviZ and matplotlib, imported lazily)."""

from __future__ import annotations

import numpy as np

from bayespmf._arviz import hdi_of_draws

__all__ = ["plot_posterior_factors", "plot_posterior_trace"]


def plot_posterior_trace(idata, var_names=None, *, title: str | None = None):
    """Compact ArviZ trace plot of posterior draws, as one figure.

    ArviZ's ``plot_trace_dist`` (arviz-plots, matplotlib backend): per variable, the
    marginal density of each chain beside its trace.

    Parameters
    ----------
    idata : xarray.DataTree
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
    >>> idata = az.from_dict({"posterior": {"mu": np.zeros((2, 20)) + np.arange(20)}})
    >>> len(plot_posterior_trace(idata, ["mu"], title="trace").axes)
    2
    """
    import arviz as az

    plots = az.plot_trace_dist(
        idata, var_names=var_names, compact=True, backend="matplotlib"
    )
    fig = plots.viz["figure"].item()
    if title:
        fig.suptitle(title)
    fig.set_layout_engine("constrained")
    return fig


#: Total width (in category units) over which the classes' intervals are spread.
_CLASS_SPREAD = 0.7


def _factor_variables(post, names):
    """``[(name, posterior variable, category dim)]`` of the per-class factors."""
    found = {}
    for var in post.data_vars:
        dims = post[var].dims[2:]
        if len(dims) == 2 and dims[0] == "class" and dims[1].endswith("_category"):
            found[dims[1][: -len("_category")]] = (var, dims[1])
    if names is None:
        names = list(found)
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(
            f"'names' must be variables with factors (class, <name>_category) in the "
            f"posterior; got {missing}, available: {sorted(found)}."
        )
    return [(n, *found[n]) for n in names]


def plot_posterior_factors(
    idata, names=None, *, hdi_prob: float = 0.94, max_variables: int = 12, title=None
):
    """Posterior conditional PMFs per class, with credible intervals.

    One panel per data variable: for each category (labelled from the posterior's
    ``<name>_category`` coordinate) and each class, the posterior mean of
    ``Pr(x_n = category | class)`` with its highest-density interval; a top panel
    shows the class weights the same way. The posterior counterpart of
    :func:`~bayespmf.plots.plot_factors`; classes must be aligned (as
    :func:`bayespmf.models.sample` returns them) for the intervals to mean something.

    Parameters
    ----------
    idata : xarray.DataTree
        Posterior with ``weights`` (dims ``class``) and one factor per variable with
        dims ``(class, <name>_category)``, as :func:`bayespmf.models.latent_class_model`
        names them.
    names : list of str, optional
        Data variables to draw (default: all, in the posterior's order).
    hdi_prob : float, default 0.94
        Mass of the highest-density intervals.
    max_variables : int, default 12
        Only the first ``max_variables`` variables are drawn.
    title : str, optional
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        A name in ``names`` has no factor in the posterior.

    Examples
    --------
    >>> import arviz as az
    >>> rng = np.random.default_rng(0)
    >>> idata = az.from_dict(
    ...     {"posterior": {"weights": rng.dirichlet([1, 1], (2, 30)),
    ...                    "A_colour": rng.dirichlet([1, 1, 1], (2, 30, 2))}},
    ...     dims={"weights": ["class"], "A_colour": ["class", "colour_category"]},
    ...     coords={"colour_category": ["red", "green", "blue"]})
    >>> fig = plot_posterior_factors(idata, title="factors")
    >>> [t.get_text() for t in fig.axes[1].get_xticklabels()]
    ['red', 'green', 'blue']
    """
    import matplotlib.pyplot as plt

    post = idata.posterior
    found = _factor_variables(post, names)[:max_variables]
    n_components = post.sizes["class"]
    offsets = (np.arange(n_components) - (n_components - 1) / 2) * (
        _CLASS_SPREAD / max(n_components, 1)
    )
    colors = [f"C{f % 10}" for f in range(n_components)]
    n = len(found)
    ncols = max(1, min(3, n))
    nrows = 1 + int(np.ceil(n / ncols))
    fig = plt.figure(figsize=(3.8 * ncols, 1.0 + 2.6 * (nrows - 1)), layout="constrained")
    grid = fig.add_gridspec(nrows, ncols, height_ratios=[0.6] + [1] * (nrows - 1))

    def draw(ax, values, n_cat):
        # values: (chain, draw, class, n_cat)
        mean = values.mean(axis=(0, 1))
        hdi = hdi_of_draws(values, hdi_prob)  # (class, n_cat, 2)
        for f in range(n_components):
            x = np.arange(n_cat) + offsets[f]
            err = np.abs(hdi[f].T - mean[f])
            ax.errorbar(x, mean[f], yerr=err, fmt="o", ms=3, lw=1, color=colors[f])
        ax.set_ylim(0, 1)
        ax.set_xlim(-0.5, n_cat - 0.5)

    ax = fig.add_subplot(grid[0, :])
    draw(ax, post["weights"].values[..., None], 1)  # one "category": the weight
    ax.set_xticks([0], ["class weights"])
    ax.set_ylabel("Pr(class)")
    handles = [plt.Line2D([], [], color=c, marker="o", ls="") for c in colors]
    class_labels = post["class"].values if "class" in post.coords else range(n_components)
    labels = [f"class {c}" for c in class_labels]
    ax.legend(handles, labels, ncols=min(n_components, 6), fontsize=8, loc="upper right")
    for k, (name, var, dim) in enumerate(found):
        ax = fig.add_subplot(grid[1 + k // ncols, k % ncols])
        cats = [str(c) for c in post[dim].values]
        draw(ax, post[var].transpose("chain", "draw", "class", dim).values, len(cats))
        rotation = 30 if max(map(len, cats)) > 4 else 0
        ax.set_xticks(np.arange(len(cats)), cats, fontsize=7, rotation=rotation)
        ax.set_title(name, fontsize=9)
        if k % ncols == 0:
            ax.set_ylabel("Pr(x = category | class)", fontsize=8)
    fig.suptitle(title or f"posterior factors: means and {hdi_prob:.0%} HDI")
    return fig
