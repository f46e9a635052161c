"""A latent-class point estimate bound by name to its model, as the chains' starts.

:func:`params_of` reorders a fitted estimator's factors to the model's variables and
each factor's rows to the model's category labels (or refuses a mismatch), so that a
model built on the same data with its columns in another order gets the right start
(the latent-class family's start builder in :mod:`bayespmf.models.posterior` turns it
into one jittered start per chain), and :func:`optima_starts` gives the distinct
optima of a multi-start fit.
"""

from __future__ import annotations

import numpy as np

from bayespmf._validation import DataValidationError
from bayespmf.data import CategoricalData, as_categorical, layout_of
from bayespmf.pmf import LatentClassParams, check_params

__all__ = [
    "OPTIMA_WINDOW",
    "bind_factors",
    "bound_sizes",
    "optima_starts",
    "params_of",
]

#: ``sample(init="optima")`` starts chains at the optima within this many
#: log-likelihood units of the best: a few units is the scale on which the posterior
#: mass of a mode can still compete with the best one's.
OPTIMA_WINDOW = 5.0


def params_of(init, data: CategoricalData, n_components: int) -> LatentClassParams:
    """The point estimate ``init`` as parameters laid out like ``data``'s variables.

    A fitted estimator (``variable_names_``, ``category_labels_``) or a dict with
    ``"names"`` (and ``"categories"``) is bound to the model by name: its factors are
    reordered to the model's variables and each factor's rows to the model's category
    labels, or a mismatch is refused. A bare ``(weights, factors)`` pair is positional.
    """
    names = labels = None
    if hasattr(init, "weights_") and hasattr(init, "factors_"):
        weights, factors = init.weights_, init.factors_
        names = getattr(init, "variable_names_", None)
        labels = getattr(init, "category_labels_", None)
    elif isinstance(init, LatentClassParams | tuple) and len(init) == 2:
        weights, factors = init
    elif isinstance(init, dict) and {"weights", "factors"} <= set(init):
        weights, factors = init["weights"], init["factors"]
        names, labels = init.get("names"), init.get("categories")
    else:
        raise DataValidationError(
            "'init' must be a fitted LatentClassPMF, a (weights, factors) pair or a dict "
            f"with 'weights' and 'factors'; got {type(init).__name__}."
        )
    if np.shape(weights) != (n_components,):
        raise DataValidationError(
            f"'init' has {np.shape(weights)[0] if np.ndim(weights) else '?'} classes but "
            f"the model has rank {n_components}."
        )
    if names is not None and len(names) == len(factors):
        factors = bind_factors(factors, list(names), labels, data)
    return check_params(weights, factors, data.n_categories)


def bind_factors(factors, names, labels, data: CategoricalData) -> list:
    """``factors`` (one per name in ``names``) in ``data``'s variable and label order."""
    like = layout_of([np.shape(a)[0] for a in factors], names, labels)
    # the model's variables and labels, one row per category so that every label is
    # checked against the estimate's alphabet
    n_rows = int(np.max(data.n_categories))
    model_vars = CategoricalData(
        np.minimum(np.arange(n_rows)[:, None], np.asarray(data.n_categories) - 1),
        data.n_categories,
        data.names,
        data.categories,
    )
    try:  # the same variables (any order) with the same labels (any order)
        as_categorical(model_vars, like, name="the model's data")
        model_sizes = bound_sizes(model_vars, like)
        for var, k, want in zip(like.names, model_sizes, like.n_categories, strict=True):
            if k != want:
                raise DataValidationError(
                    f"variable {var!r} has {k} categories in the model and {want} in "
                    "the estimate."
                )
    except DataValidationError as err:
        raise DataValidationError(
            f"'init' does not fit the model (an estimate is matched to the model's "
            f"variables by name): {err}"
        ) from None
    if set(names) != set(data.names):
        return list(factors)  # unnamed data on one side (checked above): positional
    out = []
    for j, name in enumerate(data.names):
        k = names.index(name)
        a = np.asarray(factors[k])
        if labels is not None:
            index = {str(c): i for i, c in enumerate(labels[k])}
            rows = [index.get(str(c)) for c in data.categories[j]]
            if None not in rows:  # default labels on the model's side: positional
                a = a[rows]
        out.append(a)
    return out


def bound_sizes(data: CategoricalData, like: CategoricalData) -> list[int]:
    """Alphabet sizes of ``data``'s variables, in ``like``'s variable order."""
    if set(data.names) == set(like.names):
        return [int(data.n_categories[data.names.index(n)]) for n in like.names]
    return [int(k) for k in data.n_categories]  # names carry no information


def optima_starts(point) -> list:
    """The distinct optima of a multi-start fit within OPTIMA_WINDOW of the best."""
    table = getattr(point, "optima_", None)
    if table is None or getattr(point, "optima_params_", None) is None:
        raise DataValidationError(
            "init='optima' needs a LatentClassPMF fitted with method='auto' (it has "
            "optima_); got one without."
        )
    keep = int((table["gap"] <= OPTIMA_WINDOW).sum())
    return list(point.optima_params_[:keep])
