"""Choosing the number of classes by every criterion at once (fit, ICs, held-out, LOO)."""

from __future__ import annotations

import arviz as az

from bayespmf._validation import DataValidationError
from bayespmf.data import as_categorical
from bayespmf.models.posterior import sample

__all__ = ["select_n_components"]


def select_n_components(
    data,
    candidates,
    *,
    criterion: str = "heldout",
    method: str = "auto",
    test_fraction: float = 0.2,
    random_seed=None,
    sample_kwargs: dict | None = None,
    n_init: int | None = None,
    bootstrap: bool = False,
):
    """Compare ranks by every criterion at once: fit, information criteria, held-out, LOO.

    The point-estimate columns come from :func:`bayespmf.estimators.compare_n_components`
    (maximized log-likelihood, free parameters, AIC, BIC, CAIC, SABIC, relative entropy,
    replication of the best optimum, the held-out mean log-likelihood per row of a
    random ``test_fraction`` of the rows, and with ``bootstrap`` the bootstrap LRT of
    F - 1 against F classes); ``criterion="loo"`` adds PSIS-LOO (``elpd_loo``, ``se``,
    ``p_loo``) from each rank's posterior (:func:`sample` with ``sample_kwargs``).
    :func:`bayespmf.plots.plot_n_components_selection` draws the table.

    Parameters
    ----------
    data : CategoricalData, pandas.DataFrame or array_like of int
    candidates : sequence of int
    criterion : {"heldout", "loo", "bic", "aic", "caic", "sabic"}, default "heldout"
        What picks the returned rank: the highest held-out log-likelihood or ELPD, or
        the lowest information criterion.
    method : str, default "auto"
        :class:`~bayespmf.estimators.LatentClassPMF`'s method for the point estimates.
    test_fraction : float, default 0.2
    random_seed : None or int
        Seeds the point-estimate fits, the held-out split and the chains (PyMC's
        name: this function samples).
    sample_kwargs : dict, optional
        Passed to :func:`sample` (``criterion="loo"``).
    n_init : int, optional
    bootstrap : bool, default False
        Add the bootstrap likelihood-ratio test columns (``blrt_lr``, ``blrt_p``).

    Returns
    -------
    table : pandas.DataFrame
        One row per rank.
    best : int
        The rank ``criterion`` prefers.
    """
    from bayespmf.estimators import best_n_components, compare_n_components

    keys = {"heldout": "heldout_loglik", "loo": "elpd_loo"}
    keys |= {c: c for c in ("bic", "aic", "caic", "sabic")}
    if criterion not in keys:
        raise DataValidationError(
            f"'criterion' must be one of {list(keys)}; got {criterion!r}."
        )
    data = as_categorical(data)
    table = compare_n_components(
        data,
        candidates,
        method=method,
        n_init=n_init,
        random_state=random_seed,
        test_fraction=test_fraction,
        bootstrap=bootstrap,
    )
    if criterion == "loo":
        kw = {"progressbar": False, "random_seed": random_seed} | dict(sample_kwargs or {})
        loo = {}
        for r in table.index:
            res = az.loo(sample(data.drop_empty_rows(), n_components=int(r), **kw))
            loo[int(r)] = (res.elpd, res.se, res.p)
        for k, name in enumerate(("elpd_loo", "se", "p_loo")):
            table[name] = [loo[int(r)][k] for r in table.index]
    return table, best_n_components(table, keys[criterion])
