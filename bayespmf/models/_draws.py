"""Reading a latent-class posterior: its variables, its draws as arrays, its rows.

The posterior functions (:mod:`bayespmf.models.predict`, label alignment, the
sampler's front door) find the model's variables, category labels and rows in the
``DataTree`` that :func:`bayespmf.models.sample` returns, and compute per-draw class
probabilities over the draws in blocks (:data:`DRAW_BLOCK`).
"""

from __future__ import annotations

import json

import numpy as np
from scipy.special import logsumexp

from bayespmf._validation import DataValidationError
from bayespmf.data import CategoricalData, as_categorical
from bayespmf.models.latent_class import (
    DATA_NAME,
    OBSERVED_NAME,
    category_dim,
    factor_var_name,
)

__all__ = [
    "BLOCK_VALUES",
    "DRAW_BLOCK",
    "class_posterior",
    "draw_categorical",
    "draw_slices",
    "idata_data",
    "log_joint_draws",
    "posterior_params",
    "posterior_variables",
    "variable_names",
]

#: Draws per block when a posterior quantity is computed over all draws at once.
DRAW_BLOCK = 64

#: About this many numbers (8 bytes each) per block of rows x all draws x classes
#: when per-draw class probabilities are summarized (64 MB).
BLOCK_VALUES = 8_000_000


def variable_names(idata, data) -> list[str]:
    """The model's variable names: ``data``'s, else those ``idata`` records."""
    if data is not None:
        return list(data.names)
    names = idata.posterior.attrs.get("bayespmf_variables")
    if names is not None:
        return json.loads(names) if isinstance(names, str) else list(names)
    for group, var in (("observed_data", OBSERVED_NAME), ("constant_data", DATA_NAME)):
        if group in idata.children and var in idata[group]:
            return [str(v) for v in idata[group][var]["variable"].values]
    raise DataValidationError("Pass 'data' (the data the model was built from).")


def posterior_variables(idata, data=None) -> CategoricalData:
    """The posterior's variables (names, category labels) as a one-row CategoricalData.

    ``data`` (a CategoricalData the model was built from) gives the names when
    ``idata`` records none; the labels come from the posterior's coordinates.
    """
    try:  # the names recorded at sampling time come first
        names = variable_names(idata, None)
    except DataValidationError:
        if not isinstance(data, CategoricalData):
            raise
        names = list(data.names)
    post = idata.posterior
    labels = []
    for n in names:
        dim = category_dim(n)
        if dim in post.dims:
            labels.append([str(c) for c in post[dim].values])
        elif isinstance(data, CategoricalData) and n in data.names:
            # a posterior without coordinates: the data's labels of that variable,
            # which must at least be as many as the posterior's categories
            cats = list(data.categories[data.names.index(n)])
            size = post[factor_var_name(n)].shape[-1]
            if len(cats) != size:
                raise DataValidationError(
                    f"Variable {n!r} of 'data' has {len(cats)} categories; the "
                    f"posterior's factor {factor_var_name(n)!r} has {size}. Pass rows "
                    "with the model's alphabets."
                )
            labels.append(cats)
        else:  # ... and no labels anywhere: the factor's size, default labels
            size = post[factor_var_name(n)].shape[-1]
            labels.append([str(i) for i in range(size)])
    return CategoricalData(
        np.zeros((1, len(names)), dtype=np.int64), [len(c) for c in labels], names, labels
    )


def idata_data(idata, data) -> CategoricalData:
    """``data`` bound by name to the posterior's variables, or the rows it records.

    ``data`` may be a CategoricalData, a DataFrame (columns matched by name, labels
    by their string form) or integer codes in the model's variable order
    (:func:`bayespmf.data.as_categorical`).
    """
    if data is not None:
        return as_categorical(data, posterior_variables(idata, data), name="data")
    for group, var in (("observed_data", OBSERVED_NAME), ("constant_data", DATA_NAME)):
        if group in idata.children and var in idata[group]:
            rows = idata[group][var]
            names = [str(v) for v in rows["variable"].values]
            cats = [
                [str(c) for c in idata.posterior[category_dim(n)].values] for n in names
            ]
            return CategoricalData(
                rows.values.astype(np.int64), [len(c) for c in cats], names, cats
            )
    raise DataValidationError(
        "Pass 'data': 'idata' records no rows (no observed_data or constant_data group "
        "from bayespmf.models.sample)."
    )


def posterior_params(idata, data: CategoricalData | None = None, group: str = "posterior"):
    """Stacked draws: weights (D, F) and stacked factors (D, sum I, F).

    ``D`` is chains x draws, in chain-major order. The variable order is that of
    ``data`` or, when omitted, the one recorded in ``idata`` (see :func:`sample`).

    Examples
    --------
    >>> import arviz as az
    >>> idata = az.from_dict({"posterior": {
    ...     "weights": np.full((1, 3, 2), 0.5), "A_a": np.full((1, 3, 2, 4), 0.25)}})
    >>> data = CategoricalData.from_codes([[0]], [4], names=["a"])
    >>> [x.shape for x in posterior_params(idata, data)]
    [(3, 2), (3, 4, 2)]
    """
    names = variable_names(idata, data)
    post = idata[group]
    w = post["weights"].values
    c, d, f = w.shape
    stacked = np.concatenate(
        [
            np.swapaxes(post[factor_var_name(n)].values, -1, -2).reshape(c * d, -1, f)
            for n in names
        ],
        axis=1,
    )
    return w.reshape(c * d, f), stacked


def log_joint_draws(design, weights, stacked_log):
    """``log w_f + sum_n log A_n(x_n, f)`` per draw, row and class: (D, S, F)."""
    # (D, S, F) = O (S, sumI) @ log A (D, sumI, F) + log w (D, 1, F)
    out = np.stack([design @ la for la in stacked_log])
    return out + np.log(weights)[:, None, :]


def class_posterior(design, weights, stacked) -> np.ndarray:
    """Pr(class | observed entries of each row) per draw, (D, S, F), Bayes' rule."""
    with np.errstate(divide="ignore"):  # an exact zero is a possible (point) value
        lj = log_joint_draws(design, weights, np.log(stacked))
    return np.exp(lj - logsumexp(lj, axis=2, keepdims=True))


def draw_slices(n_draws: int) -> list[slice]:
    """Slices of :data:`DRAW_BLOCK` draws covering ``n_draws``."""
    return [slice(s, s + DRAW_BLOCK) for s in range(0, n_draws, DRAW_BLOCK)]


def draw_categorical(probs, rng) -> np.ndarray:
    """One category per leading index from PMFs along the last axis (inverse CDF)."""
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random((*probs.shape[:-1], 1)) * cdf[..., -1:]
    return np.minimum((cdf <= u).sum(-1), probs.shape[-1] - 1)
