"""Figures: factors, simplices, posterior draws and task results.

Every function returns a :class:`matplotlib.figure.Figure` and imports matplotlib (and
ArviZ) on call, so importing this package costs nothing and the library never needs a
display. Nothing in :mod:`bayespmf.kernels` or :mod:`bayespmf.fit` draws.

* :mod:`~bayespmf.plots.factors`: :func:`plot_factors` (heatmaps of the conditional
  PMFs), :func:`plot_convergence` (log-likelihood per iteration);
* :mod:`~bayespmf.plots.simplex`: :func:`plot_simplex_estimates` (data and estimated
  simplices, Yurochkin et al., Fig. 1);
* :mod:`~bayespmf.plots.posterior`: :func:`plot_posterior_trace`,
  :func:`plot_posterior_factors` (conditional PMFs per class with credible intervals);
* :mod:`~bayespmf.plots.n_components`: :func:`plot_n_components_selection` (criteria
  against the number of classes);
* :mod:`~bayespmf.plots.tasks`: :func:`plot_task` (a task table as bars).
"""

from bayespmf.plots.factors import plot_convergence, plot_factors
from bayespmf.plots.n_components import plot_n_components_selection
from bayespmf.plots.posterior import plot_posterior_factors, plot_posterior_trace
from bayespmf.plots.simplex import plot_simplex_estimates
from bayespmf.plots.simplex_n_components import plot_simplex_n_components
from bayespmf.plots.tasks import plot_task

__all__ = [
    "plot_simplex_n_components",
    "plot_convergence",
    "plot_factors",
    "plot_posterior_factors",
    "plot_posterior_trace",
    "plot_n_components_selection",
    "plot_simplex_estimates",
    "plot_task",
]
