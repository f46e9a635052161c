"""PyMC pieces shared by the class-summed row models (latent class, regression).

The distribution shell of their observed rows, the items' generative graph, the
coordinates of the rows and the Dirichlet priors of the factors.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt

from bayespmf._validation import DataValidationError, as_codes
from bayespmf.data import CategoricalData
from bayespmf.models._names import category_dim, factor_var_name
from bayespmf.models._rows import rows_signature

__all__ = [
    "RowsDistribution",
    "as_model_data",
    "factor_priors",
    "items_given_class",
    "rows_coords",
]


def as_model_data(data, n_categories) -> CategoricalData:
    """``data`` as a CategoricalData (a DataFrame's labels kept; NaN/None missing)."""
    if isinstance(data, pd.DataFrame):  # labelled columns, NaN/None missing
        data = CategoricalData.from_pandas(data)
    if isinstance(data, CategoricalData):
        if n_categories is not None:
            as_codes(data, n_categories)  # raises on disagreement
        return data
    codes, n_cat = as_codes(data, n_categories, name="data")
    return CategoricalData(codes, n_cat)


def rows_coords(data) -> dict:
    """Coordinates ``row``, ``variable`` and each variable's categories, of the rows.

    Raises
    ------
    DataValidationError
        A variable name that is empty or blank.
    """
    names = list(data.names)
    bad = [v for v in names if not re.fullmatch(r"[^\s].*", v)]
    if bad:
        raise DataValidationError(f"Variable names must not be empty or blank: {bad!r}.")
    coords = {"row": np.arange(data.n_samples), "variable": names}
    for name, cats in zip(names, data.categories, strict=True):
        coords[category_dim(name)] = list(cats)
    return coords


def factor_priors(data, n_components: int, factor_prior: float) -> list:
    """The factors ``A_<name>`` ~ Dirichlet(``factor_prior``), one per variable of ``data``.

    Call inside the model; dims ``("class", <name>_category)``.
    """
    return [
        pm.Dirichlet(
            factor_var_name(name),
            a=np.full((n_components, int(k)), factor_prior),
            dims=("class", category_dim(name)),
        )
        for name, k in zip(data.names, data.n_categories, strict=True)
    ]


def items_given_class(classes, factors):
    """Generative graph of the items: ``x_n | class ~ Categorical(A_n[class])``, stacked.

    ``classes`` is a class draw (a PyMC variable), ``factors[n]`` the (F, I_n) PMFs.
    """
    return pt.stack([pm.Categorical.dist(p=a[classes]) for a in factors], axis=-1)


class RowsDistribution:
    """A ``pm.CustomDist`` over rows of categorical codes, built from class attributes.

    A subclass names its generative graph (``rows_dist``), its log-probability
    (``rows_logp``) and the check of the factors' static sizes (``check_factors``),
    all as ``staticmethod``; this class
    turns them into the constructor ``Cls(name, prior, factors, **kwargs)`` and
    ``Cls.dist(prior, factors, **kwargs)`` of a PyMC distribution (``prior``: the
    class weights or the per-row logits).
    """

    rows_dist = rows_logp = check_factors = None
    signature = staticmethod(rows_signature)

    def __new__(cls, name, prior, factors, **kwargs):
        factors = [pt.as_tensor_variable(a) for a in factors]
        return pm.CustomDist(name, prior, *factors, **cls._custom_kwargs(factors), **kwargs)

    @classmethod
    def dist(cls, prior, factors, **kwargs):
        """The distribution outside a model (see the class docstring)."""
        factors = [pt.as_tensor_variable(a) for a in factors]
        return pm.CustomDist.dist(prior, *factors, **cls._custom_kwargs(factors), **kwargs)

    @classmethod
    def _custom_kwargs(cls, factors) -> dict:
        cls.check_factors(factors)  # raise early on a factor without static size
        return {
            "dist": cls.rows_dist,
            "logp": cls.rows_logp,
            "signature": cls.signature(len(factors)),
            "class_name": cls.__name__,
        }
