"""The latent-class joint PMF as a PyMC model with the latent class summed out."""

from __future__ import annotations

import re

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import scipy.sparse as sp

from bayespmf._validation import DataValidationError, as_codes, check_float, check_int
from bayespmf.data import CategoricalData
from bayespmf.pmf import offsets_of

__all__ = ["factor_var_name", "latent_class_model", "one_hot_design"]


def factor_var_name(name: str) -> str:
    """Name of the PyMC variable holding the factor of data variable ``name``.

    Examples
    --------
    >>> factor_var_name("lug_boot")
    'A_lug_boot'
    """
    return f"A_{name}"


def category_dim(name: str) -> str:
    """Name of the category dimension of data variable ``name``."""
    return f"{name}_category"


def one_hot_design(codes, n_categories) -> sp.csr_matrix:
    """Sparse one-hot design ``O`` (S, sum I_n): ``O[s, off_n + x_sn] = 1`` if observed.

    Examples
    --------
    >>> one_hot_design(np.array([[0, 1], [-1, 0]]), [2, 2]).toarray()
    array([[1., 0., 0., 1.],
           [0., 0., 1., 0.]])
    """
    codes = np.asarray(codes)
    off = offsets_of(n_categories)
    rows, cols = np.nonzero(codes >= 0)
    flat = off[cols] + codes[rows, cols]
    return sp.csr_matrix(
        (np.ones(rows.size), (rows, flat)), shape=(codes.shape[0], int(off[-1]))
    )


def _as_data(data, n_categories) -> CategoricalData:
    if isinstance(data, CategoricalData):
        if n_categories is not None:
            as_codes(data, n_categories)  # raises on disagreement
        return data
    codes, n_cat = as_codes(data, n_categories, name="data")
    return CategoricalData(codes, n_cat)


def latent_class_model(
    data,
    rank: int,
    *,
    n_categories=None,
    weights_prior: float = 1.0,
    factor_prior: float = 1.0,
    coords: dict | None = None,
) -> pm.Model:
    r"""PyMC model of a rank-F latent-class PMF with the class marginalized out.

    .. math::

        \lambda \sim \mathrm{Dir}(\alpha_\lambda 1_F), \quad
        A_n(:, f) \sim \mathrm{Dir}(\alpha_A 1_{I_n}), \quad
        \log p(x_s) = \operatorname{logsumexp}_f \Big(\log\lambda_f
            + \sum_{n:\,x_{sn}\ \mathrm{observed}} \log A_n(x_{sn}, f)\Big).

    The sum over observed entries is one product of the (constant, sparse) one-hot
    design ``O`` (S, sum I_n) with the stacked ``log A`` (sum I_n, F) — the fastest of
    the formulations measured in ``STACK-NOTES.md`` (one-hot ``pt.dot``) — and the
    log-likelihood enters as a ``pm.Potential`` named ``"loglik"``. Per-row
    log-likelihoods for LOO/WAIC are added after sampling by
    :func:`bayespmf.models.sample`. Rows with every entry missing carry no information
    and are dropped.

    Parameters
    ----------
    data : CategoricalData or array_like of int (S, N)
        ``-1`` marks missing entries.
    rank : int
        Number of classes F.
    n_categories : sequence of int, optional
        Alphabet sizes when ``data`` is an array.
    weights_prior, factor_prior : float, default 1.0
        Symmetric Dirichlet concentrations of :math:`\lambda` and of every column of
        every :math:`A_n` (1.0 = uniform on the simplex).
    coords : dict, optional
        Extra coordinates merged into the model's.

    Returns
    -------
    pymc.Model
        Variables ``weights`` (dims ``class``) and ``A_<name>`` for each data variable
        (dims ``(class, <name>_category)``: each row is the PMF of the variable given
        the class); the potential ``loglik``. Data variable names come from ``data``.

    Raises
    ------
    DataValidationError
        Malformed data, a variable never observed, ``rank < 1`` or non-positive
        priors.

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 1], [1, -1], [1, 0]], 2, names=["a", "b"])
    >>> model = latent_class_model(data, rank=2)
    >>> sorted(model.named_vars)
    ['A_a', 'A_b', 'loglik', 'weights']
    >>> model.named_vars_to_dims["A_b"]
    ('class', 'b_category')
    """
    data = _as_data(data, n_categories)
    rank = check_int(rank, "rank", owner="latent_class_model", low=1)
    weights_prior = check_float(weights_prior, "weights_prior", low=0.0, low_open=True)
    factor_prior = check_float(factor_prior, "factor_prior", low=0.0, low_open=True)
    as_codes(data, name="data")  # a variable never observed cannot be learned
    data = data.drop_empty_rows()
    names = list(data.names)
    bad = [v for v in names if not re.fullmatch(r"[^\s].*", v)]
    if bad:
        raise DataValidationError(f"Variable names must not be empty or blank: {bad!r}.")
    model_coords = {"class": np.arange(rank), "row": np.arange(data.n_samples)}
    for name, cats in zip(names, data.categories, strict=True):
        model_coords[category_dim(name)] = list(cats)
    if coords:
        model_coords.update(coords)
    design = one_hot_design(data.codes, data.n_categories)
    with pm.Model(coords=model_coords) as model:
        weights = pm.Dirichlet("weights", a=np.full(rank, weights_prior), dims="class")
        log_factors = []
        for name, k in zip(names, data.n_categories, strict=True):
            a = pm.Dirichlet(
                factor_var_name(name),
                a=np.full((rank, int(k)), factor_prior),
                dims=("class", category_dim(name)),
            )
            log_factors.append(pt.log(a).T)
        log_a = pt.concatenate(log_factors, axis=0)  # (sum I, F)
        o = pt.as_tensor_variable(design.toarray())
        log_joint = pt.dot(o, log_a) + pt.log(weights)[None, :]
        pm.Potential("loglik", pt.logsumexp(log_joint, axis=1).sum())
    model._bayespmf_data = data
    model._bayespmf_rank = rank
    return model
