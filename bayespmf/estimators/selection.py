"""Choosing the number of latent classes: one table of criteria over a range of ranks.

:func:`compare_n_components` fits :class:`~bayespmf.estimators.LatentClassPMF` at every rank
and reports, side by side, what poLCA, StepMix and Mplus report for that choice: the
maximized log-likelihood, the number of free parameters, AIC, BIC, CAIC and the
sample-size adjusted BIC, the relative entropy of the class assignment, how many
starts reached the best optimum, and optionally the held-out log-likelihood and the
bootstrap likelihood-ratio test of F - 1 against F classes (Mplus TECH14; Nylund,
Asparouhov & Muthen 2007). :func:`bayespmf.models.select_n_components` adds PSIS-LOO from
the
posterior; :func:`bayespmf.plots.plot_n_components_selection` draws the table.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from bayespmf._validation import DataValidationError, as_codes, check_int
from bayespmf.data import CategoricalData
from bayespmf.estimators.latent_class import LatentClassPMF
from bayespmf.fit.bootstrap_lrt import bootstrap_lrt

__all__ = ["CRITERIA", "best_n_components", "compare_n_components"]

#: Columns a rank can be chosen by, and whether larger is better.
CRITERIA = {
    "aic": False,
    "bic": False,
    "caic": False,
    "sabic": False,
    "heldout_loglik": True,
    "elpd_loo": True,
}


def _as_data(data) -> CategoricalData:
    if isinstance(data, CategoricalData):
        return data
    if isinstance(data, pd.DataFrame):
        return CategoricalData.from_pandas(data)
    return CategoricalData(*as_codes(data))


def compare_n_components(
    data,
    candidates,
    *,
    method: str = "auto",
    n_init: int | None = None,
    random_state=None,
    test_fraction: float | None = None,
    bootstrap: bool = False,
    n_bootstrap: int = 100,
    sample_weight=None,
    progressbar: bool = False,
) -> pd.DataFrame:
    """Fit every rank and tabulate the criteria used to choose the number of classes.

    Parameters
    ----------
    data : CategoricalData, pandas.DataFrame or array_like of int (S, N)
        ``-1`` (or NaN/None in a DataFrame) marks missing entries.
    candidates : sequence of int
        The numbers of classes to compare (each >= 1).
    method : str, default "auto"
        :class:`LatentClassPMF`'s method (``"auto"``: the multi-start MLE).
    n_init : int, optional
        Starts of each fit (:class:`LatentClassPMF`'s default when None).
    random_state : None or int
        Seeds every fit (and the split and the bootstrap).
    test_fraction : float in (0, 1), optional
        Also fit on a random ``1 - test_fraction`` of the rows and report the mean
        log-likelihood per row of the rest (``heldout_loglik``).
    bootstrap : bool, default False
        Also run :func:`bayespmf.fit.bootstrap_lrt` for each rank F > 1 of ``candidates``
        (F - 1 against F classes; ``blrt_lr``, ``blrt_p``, ``blrt_draws``), with at most
        ``n_bootstrap`` draws and sequential stopping.
    n_bootstrap : int, default 100
    sample_weight : array_like, shape (S,), optional
        Row weights of every fit (information criteria then count ``S`` as the rows).
    progressbar : bool, default False

    Returns
    -------
    pandas.DataFrame
        Indexed by ``n_components``: ``loglik``, ``n_parameters``, ``aic``, ``bic``,
        ``caic``,
        ``sabic`` (lower is better), ``relative_entropy``, ``n_init_best`` (refined
        starts that reached the best optimum), ``replicated`` (False where the fit
        raised a ``LocalOptimumWarning``, which is recorded here instead of shown),
        ``seconds``, and the optional columns above.

    Raises
    ------
    DataValidationError
        Malformed data, an empty ``candidates`` or a rank below 1.

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(600, [3, 3, 4, 3, 3], n_components=2, random_state=0,
    ...                             factor_prior="separable", epsilon=0.1)
    >>> table = compare_n_components(data, [1, 2, 3], n_init=20, random_state=0)
    >>> best_n_components(table, "bic")
    2
    >>> list(table.columns[:6])
    ['loglik', 'n_parameters', 'aic', 'bic', 'caic', 'sabic']
    """
    import warnings

    from bayespmf.fit import LocalOptimumWarning

    data = _as_data(data)
    candidates = [
        check_int(r, "candidates", owner="compare_n_components", low=1) for r in candidates
    ]
    if not candidates:
        raise DataValidationError(
            "The 'candidates' parameter of compare_n_components must list at least one "
            "number of classes, e.g. "
            "range(1, 6)."
        )
    if test_fraction is not None and not 0.0 < float(test_fraction) < 1.0:
        raise DataValidationError(
            "The 'test_fraction' parameter of compare_n_components must be in (0, 1) or "
            "None; "
            f"got {test_fraction!r}."
        )
    split = None
    if test_fraction is not None:
        split = data.train_test_split(
            1 - test_fraction, test_fraction, random_state=random_state
        )
    rows = []
    for r in candidates:
        t0 = time.perf_counter()
        est = LatentClassPMF(
            r, method, n_init=n_init, random_state=random_state, progressbar=progressbar
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LocalOptimumWarning)
            est.fit(data, sample_weight=sample_weight)
        local = [w for w in caught if issubclass(w.category, LocalOptimumWarning)]
        for w in caught:  # the local-optimum notice becomes the 'replicated' column
            if w not in local:
                warnings.warn(w.message, w.category, stacklevel=2)
        row = {
            "n_components": r,
            "loglik": est.loglik_,
            "n_parameters": est.n_parameters_,
            "aic": est.aic(data),
            "bic": est.bic(data),
            "caic": est.caic(data),
            "sabic": est.sabic(data),
            "relative_entropy": est.relative_entropy(data),
            "n_init_best": est.n_init_best_,
            "replicated": not local,
        }
        if split is not None:
            held = LatentClassPMF(r, method, n_init=n_init, random_state=random_state)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LocalOptimumWarning)
                held.fit(split[0])
            row["heldout_loglik"] = held.score(split[1])
        if bootstrap and r > 1:
            test = bootstrap_lrt(
                data,
                r - 1,
                n_bootstrap=n_bootstrap,
                n_init=n_init,
                random_state=random_state,
                sample_weight=sample_weight,
                progressbar=progressbar,
            )
            row.update(
                blrt_lr=test.lr, blrt_p=test.p_value, blrt_draws=int(test.n_bootstrap)
            )
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
    return pd.DataFrame(rows).set_index("n_components")


def best_n_components(table: pd.DataFrame, criterion: str = "bic") -> int:
    """The rank of ``table`` that ``criterion`` prefers (lowest IC, highest fit).

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_n_components` or :func:`bayespmf.models.select_n_components`.
    criterion : str, default "bic"
        One of :data:`CRITERIA` present in ``table``.

    Examples
    --------
    >>> index = pd.Index([1, 2, 3], name="n_components")
    >>> t = pd.DataFrame({"bic": [10.0, 8.0, 9.0]}, index=index)
    >>> best_n_components(t, "bic")
    2
    """
    if criterion not in CRITERIA or criterion not in table.columns:
        have = [c for c in CRITERIA if c in table.columns]
        raise DataValidationError(
            f"The 'criterion' parameter of best_n_components must be one of {have} (the "
            f"criteria in this table); got {criterion!r}."
        )
    values = table[criterion].to_numpy(dtype=float)
    if not np.isfinite(values).any():
        raise DataValidationError(
            f"best_n_components: the column {criterion!r} has no value."
        )
    pick = np.nanargmax(values) if CRITERIA[criterion] else np.nanargmin(values)
    return int(table.index[pick])
