"""PyMC pieces shared by the class-summed row models (latent class, regression).

The distributions of their observed rows (:class:`LatentClassRows`,
:class:`LatentClassRegressionRows`, re-exported by :mod:`bayespmf.models.latent_class`
and :mod:`bayespmf.models.regression`; here, below both models and below the Gibbs
steps that recognize them), the shell they share, the items' generative graph, the
coordinates of the rows and the Dirichlet priors of the factors.
"""

from __future__ import annotations

import re
import weakref

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt

from bayespmf._validation import DataValidationError, as_codes
from bayespmf.data import CategoricalData
from bayespmf.models._names import category_dim, factor_var_name
from bayespmf.models._rows import class_summed_loglik, rows_signature, static_categories

__all__ = [
    "LatentClassRegressionRows",
    "LatentClassRows",
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

    PyMC makes a new Op class for every such variable (``CustomDist`` builds its
    ``rv_type`` per call), so there is no one class to import: each subclass records
    the Op classes made for it, and :meth:`op_types` gives them to ``isinstance``
    (how the Gibbs steps recognize their rows).
    """

    rows_dist = rows_logp = check_factors = None
    signature = staticmethod(rows_signature)
    _op_types: weakref.WeakSet

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._op_types = weakref.WeakSet()

    def __new__(cls, name, prior, factors, **kwargs):
        factors = [pt.as_tensor_variable(a) for a in factors]
        rv = pm.CustomDist(name, prior, *factors, **cls._custom_kwargs(factors), **kwargs)
        return cls._record(rv)

    @classmethod
    def dist(cls, prior, factors, **kwargs):
        """The distribution outside a model (see the class docstring)."""
        factors = [pt.as_tensor_variable(a) for a in factors]
        rv = pm.CustomDist.dist(prior, *factors, **cls._custom_kwargs(factors), **kwargs)
        return cls._record(rv)

    @classmethod
    def op_types(cls) -> tuple[type, ...]:
        """The Op classes of the variables this distribution made (for ``isinstance``).

        Examples
        --------
        >>> from bayespmf.models import LatentClassRows
        >>> rows = LatentClassRows.dist([0.5, 0.5], [np.full((2, 3), 1 / 3)])
        >>> isinstance(rows.owner.op, LatentClassRows.op_types())
        True
        """
        return tuple(cls._op_types)

    @classmethod
    def _record(cls, rv):
        cls._op_types.add(type(rv.owner.op))
        return rv

    @classmethod
    def _custom_kwargs(cls, factors) -> dict:
        cls.check_factors(factors)  # raise early on a factor without static size
        return {
            "dist": cls.rows_dist,
            "logp": cls.rows_logp,
            "signature": cls.signature(len(factors)),
            "class_name": cls.__name__,
        }


# ---------------------------------------------------------- the two row distributions


def _latent_class_categories(factors) -> list[int]:
    return static_categories(factors)


def _latent_class_rows_logp(value, weights, *factors):
    """Per-row log-likelihood, the class summed out, missing entries (``-1``) skipped.

    :func:`bayespmf.models._rows.class_summed_loglik`: one fused loop over the
    observed entries with a hand-written gradient, so the data stay integer codes
    (``pm.Data``) and no one-hot design is built. Rows with a code outside
    ``[-1, I_n)`` have log-probability ``-inf``.
    """
    return class_summed_loglik(
        value, pt.log(weights), factors, _latent_class_categories(factors)
    )


def _latent_class_rows_dist(weights, *factors_and_size):
    """Generative graph: class ~ Categorical(weights), x_n | class ~ A_n[class]."""
    *factors, size = factors_and_size
    return items_given_class(pm.Categorical.dist(p=weights, size=size), factors)


class LatentClassRows(RowsDistribution):
    r"""Rows of N categorical variables from a latent-class model, the class summed out.

    .. math::

        \Pr(x_s) = \sum_{f=1}^F \lambda_f \prod_{n:\,x_{sn}\ \mathrm{observed}}
        A_n(x_{sn}, f)

    (Ibrahim & Fu, eq. (3)): a PyMC distribution over rows (support: a vector of N
    integer codes, ``-1`` for a missing entry, which the likelihood skips). Its
    ``logp`` is the class-marginalized log-likelihood of each row, so as an observed
    variable it gives ``pm.compute_log_likelihood`` (one value per row) and
    ``az.loo``; its generative graph (class ~ Categorical(:math:`\lambda`), then each
    :math:`x_n` ~ Categorical(:math:`A_n(:, \mathrm{class})`)) gives
    ``pm.sample_prior_predictive`` and ``pm.sample_posterior_predictive``, which draw
    whole new rows. To impute the missing cells of observed rows use
    :func:`bayespmf.models.impute` (it draws the class given the row's observed
    entries).

    Built on ``pm.CustomDist``; call it like a PyMC distribution.

    Parameters
    ----------
    name : str
        Variable name (only for the constructor; ``.dist`` takes none).
    weights : tensor_like, shape (F,)
        Class weights :math:`\lambda`.
    factors : sequence of tensor_like, each (F, I_n)
        Row ``f`` of ``factors[n]`` is the PMF of variable ``n`` given class ``f``
        (the transpose of :attr:`LatentClassPMF.factors_`); the number of categories
        must be static.
    **kwargs
        ``observed``, ``dims``, ``shape``, ... as for any PyMC distribution; the last
        dimension is the variables'.

    Examples
    --------
    >>> w = np.array([0.3, 0.7])
    >>> a = np.array([[0.9, 0.1], [0.2, 0.8]])  # (class, category)
    >>> x = LatentClassRows.dist(w, [a, a], shape=(5, 2))
    >>> pm.draw(x, random_seed=0).shape
    (5, 2)
    >>> lp = pm.logp(x, np.array([[0, 1], [-1, 1]])).eval()
    >>> bool(np.isclose(lp[1], np.log(0.3 * 0.1 + 0.7 * 0.8)))
    True
    """

    rows_dist = staticmethod(_latent_class_rows_dist)
    rows_logp = staticmethod(_latent_class_rows_logp)
    check_factors = staticmethod(_latent_class_categories)


def _static_categories(factors) -> list[int]:
    return static_categories(factors, require_matrix=False)


def _regression_rows_logp(value, logits, *factors):
    r"""Per-row log-likelihood, the class summed out, missing entries (``-1``) skipped.

    :math:`\log \sum_f \mathrm{softmax}(\eta_s)_f \prod_n A_n(x_{sn}, f)`, where
    ``logits`` are :math:`\eta_s = z_s^\top\beta`, (..., S, F). As in
    :func:`bayespmf.models.latent_class.LatentClassRows`, one fused loop over the
    observed entries with a per-row prior (``bayespmf.models._rows.class_summed_loglik``;
    batched logits fall back to the one-hot design product); a row with a code
    outside ``[-1, I_n)`` has log-probability ``-inf``.
    """
    n_cat = _static_categories(factors)
    # the factors are not batched over rows: drop any leading broadcast dimensions
    factors = [a.reshape(a.shape[-2:]) if a.ndim > 2 else a for a in factors]
    log_prior = logits - pt.logsumexp(logits, axis=-1, keepdims=True)
    return class_summed_loglik(value, log_prior, factors, n_cat)


def _regression_rows_dist(logits, *factors_and_size):
    """Generative graph: class ~ Categorical(softmax(logits)), x_n | class ~ A_n[class]."""
    *factors, size = factors_and_size
    return items_given_class(pm.Categorical.dist(logit_p=logits, size=size), factors)


class LatentClassRegressionRows(RowsDistribution):
    r"""Rows of N categorical items whose class prior is a softmax of per-row logits.

    .. math::

        \log \Pr(x_s \mid \eta_s) = \operatorname{logsumexp}_f \Big(
            \eta_{sf} - \operatorname{logsumexp}_g \eta_{sg}
            + \sum_{n:\,x_{sn}\ \mathrm{observed}} \log A_n(x_{sn}, f)\Big)

    The per-row generalization of :class:`bayespmf.models.LatentClassRows` (whose
    weights are shared by every row): ``logits`` is batched over rows, so that
    :math:`\eta_s = z_s^\top\beta` gives the latent-class regression likelihood. Its
    ``logp`` gives ``pm.compute_log_likelihood`` one value per row; its generative
    graph (class ~ Categorical(softmax(:math:`\eta_s`)), then the items) gives
    ``pm.sample_prior_predictive`` and ``pm.sample_posterior_predictive``.

    Parameters
    ----------
    name : str
        Variable name (only for the constructor; ``.dist`` takes none).
    logits : tensor_like, shape (S, F) or (F,)
        Unnormalized log class priors of every row.
    factors : sequence of tensor_like, each (F, I_n)
        Row ``f`` of ``factors[n]`` is the PMF of item ``n`` given class ``f``; the
        number of categories must be static.
    **kwargs
        ``observed``, ``dims``, ``shape``, ... as for any PyMC distribution.

    Examples
    --------
    >>> logits = np.array([[0.0, 1.0], [0.0, -1.0]])
    >>> a = np.array([[0.9, 0.1], [0.2, 0.8]])  # (class, category)
    >>> x = LatentClassRegressionRows.dist(logits, [a, a])
    >>> pm.draw(x, random_seed=0).shape
    (2, 2)
    >>> lp = pm.logp(x, np.array([[0, 1], [-1, 1]])).eval()
    >>> w = 1 / (1 + np.exp(1.0))  # Pr(class 1 | row 1)
    >>> bool(np.isclose(lp[1], np.log((1 - w) * 0.1 + w * 0.8)))
    True
    """

    rows_dist = staticmethod(_regression_rows_dist)
    rows_logp = staticmethod(_regression_rows_logp)
    check_factors = staticmethod(_static_categories)
