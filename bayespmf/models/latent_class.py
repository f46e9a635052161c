"""The latent-class joint PMF as a PyMC model with the latent class summed out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.logprob.transforms import Transform

from bayespmf._validation import DataValidationError, as_codes, check_float, check_int
from bayespmf.data import CategoricalData
from bayespmf.models._names import (  # re-exported: part of this module's API
    DATA_NAME,
    OBSERVED_NAME,
    category_dim,
    factor_var_name,
)
from bayespmf.models._rows_dist import (  # re-exported: part of this module's API
    LatentClassRows,
    as_model_data,
    factor_priors,
    rows_coords,
)

__all__ = [
    "DATA_NAME",
    "OBSERVED_NAME",
    "LatentClassRows",
    "PivotLogRatio",
    "category_dim",
    "factor_var_name",
    "latent_class_model",
    "model_data",
]


class PivotLogRatio(Transform):
    r"""Log-ratios to a chosen pivot entry: a simplex transform for NUTS near a mode.

    Each simplex row :math:`x` (last axis, K entries) is mapped to the K - 1 numbers
    :math:`y_j = \log x_j - \log x_p`, :math:`j \ne p`, where the pivot :math:`p` is
    fixed per row (an additive log-ratio with a chosen reference); the inverse is a
    softmax with a zero put at the pivot, and :math:`\log |J| = \sum_k \log x_k`
    (PyMC's ``simplex`` transform has the same Jacobian up to the constant
    :math:`\log K`, so both give the same posterior on the simplex).

    Why: PyMC's default ``simplex`` transform subtracts the mean of *all* the logs
    (:math:`\log x_j - \overline{\log x}`), so the broad posterior of the log of an
    entry near zero (a conditional probability the data put at 0) leaks into every
    coordinate of its row. NUTS with a diagonal mass matrix then faces strongly
    correlated coordinates. With the pivot at the entry that is largest at the
    starting point, the well-determined coordinates stay nearly independent: where
    conditional probabilities are at 0 in the MLE (UCI Car at rank 4) the scaled
    posterior covariance is far better conditioned in these coordinates, and NUTS
    takes several times fewer leapfrog steps per draw at a similar ESS per draw
    (:ref:`bench-pivot`).

    A simplex of one entry (the class weights of a rank-1 model) has no free
    coordinate: it is mapped to an empty vector, the inverse gives the constant
    ``[1.0]`` and the log-Jacobian is 0, as PyMC's ``simplex`` transform does.

    Parameters
    ----------
    pivot : array_like of int, shape = the simplex's batch shape
        Index of the pivot entry of every row (a scalar for a single simplex).
    n_entries : int
        K >= 1, the size of the simplex (last axis).

    Examples
    --------
    >>> t = PivotLogRatio([2, 0], 3)
    >>> x = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    >>> y = t.forward(x).eval()
    >>> bool(np.allclose(y[0], np.log([0.2 / 0.5, 0.3 / 0.5])))
    True
    >>> bool(np.allclose(t.backward(y).eval(), x))
    True
    >>> one = PivotLogRatio(0, 1)  # n_components 1: the weights are [1.0], nothing is free
    >>> one.forward(np.array([1.0])).eval().shape, one.backward(np.zeros(0)).eval()
    ((0,), array([1.]))
    """

    name = "pivot_logratio"
    ndim_supp = 1

    def __init__(self, pivot, n_entries: int):
        pivot = np.asarray(pivot, dtype=np.int64)
        n_entries = int(n_entries)
        if n_entries < 1 or (pivot.size and (pivot.min() < 0 or pivot.max() >= n_entries)):
            raise DataValidationError(
                f"PivotLogRatio needs n_entries >= 1 and pivots in [0, n_entries); got "
                f"n_entries={n_entries}, pivots {pivot.tolist()}."
            )
        self.pivot = pivot
        # embed[..., j, k] = 1 where the j-th free coordinate is entry k (k != pivot)
        others = np.array(
            [[k for k in range(n_entries) if k != p] for p in pivot.ravel()]
        ).reshape(*pivot.shape, n_entries - 1)
        self._embed = (others[..., None] == np.arange(n_entries)).astype(
            pytensor.config.floatX
        )
        self._at_pivot = (pivot[..., None] == np.arange(n_entries)).astype(
            pytensor.config.floatX
        )

    def forward(self, value, *inputs):
        """Simplex rows (..., K) to log-ratios to the pivot (..., K - 1)."""
        log_x = pt.log(pt.as_tensor(value))
        ref = pt.sum(log_x * self._at_pivot, axis=-1, keepdims=True)
        return pt.sum(log_x[..., None, :] * self._embed, axis=-1) - ref

    def _logits(self, value):
        return pt.sum(pt.as_tensor(value)[..., :, None] * self._embed, axis=-2)

    def backward(self, value, *inputs):
        """Log-ratios (..., K - 1) to simplex rows: a softmax with 0 at the pivot."""
        return pt.special.softmax(self._logits(value), axis=-1)

    def log_jac_det(self, value, *inputs):
        """``sum_k log x_k`` per row, the log-Jacobian of :meth:`backward`."""
        return pt.sum(pt.special.log_softmax(self._logits(value), axis=-1), axis=-1)

    def __str__(self):
        """Return a string representation of the object."""
        return f"PivotLogRatio(pivot={self.pivot.tolist()})"


def latent_class_model(
    data,
    n_components: int,
    *,
    n_categories=None,
    weights_prior: float = 1.0,
    factor_prior: float = 1.0,
    coords: dict | None = None,
    covariates=None,
    outcome=None,
    outcome_family: str = "gaussian",
) -> pm.Model:
    r"""PyMC model of a rank-F latent-class PMF with the class marginalized out.

    .. math::

        \lambda \sim \mathrm{Dir}(\alpha_\lambda 1_F), \quad
        A_n(:, f) \sim \mathrm{Dir}(\alpha_A 1_{I_n}), \quad
        x_s \sim \mathrm{LatentClassRows}(\lambda, A_1, \dots, A_N), \quad
        \log p(x_s) = \operatorname{logsumexp}_f \Big(\log\lambda_f
            + \sum_{n:\,x_{sn}\ \mathrm{observed}} \log A_n(x_{sn}, f)\Big).

    The rows are a ``pm.Data`` container and the likelihood an observed
    :class:`LatentClassRows` variable, so the PyMC tools work as usual:
    ``pm.sample_prior_predictive``, ``pm.sample_posterior_predictive`` (new rows),
    ``pm.compute_log_likelihood`` (one value per row, for ``az.loo``), and
    ``pm.set_data`` with new rows. Rows with every entry missing carry no information
    and are dropped. Everything :func:`bayespmf.models.sample` needs is read back from
    the model's variables, dims and coordinates (:func:`model_data`).

    The likelihood is one fused loop over the observed entries with a hand-written
    gradient (``bayespmf.models._rows.ClassSummedLoglik``; numba kernels, rewritten
    into a gather graph for the JAX backends): no one-hot design of the rows is
    built, so large data take far less memory and compile time, at the same cost per
    gradient (:ref:`bench-frozen-data`).
    :func:`bayespmf.models.sample` samples the model with its data frozen
    (``pymc.model.transform.optimization.freeze_dims_and_data``); the JAX backends
    need that (static shapes), so freeze it likewise when calling ``pm.sample``
    with them yourself.

    Parameters
    ----------
    data : CategoricalData, pandas.DataFrame or array_like of int (S, N)
        ``-1`` (NaN/None in a DataFrame) marks missing entries.
    n_components : int
        Number of classes F.
    n_categories : sequence of int, optional
        Alphabet sizes when ``data`` is an array.
    weights_prior, factor_prior : float, default 1.0
        Symmetric Dirichlet concentrations of :math:`\lambda` and of every column of
        every :math:`A_n` (1.0 = uniform on the simplex). With ``covariates``,
        ``weights_prior`` must stay 1.0 (there is no :math:`\lambda`).
    coords : dict, optional
        Extra coordinates merged into the model's (not with ``covariates``).
    covariates : array_like or pandas.DataFrame (S, D), optional
        Covariates on class membership: the model is then
        :func:`bayespmf.models.latent_class_regression_model` (``Pr(H = f | z) =
        softmax(z beta)_f`` with an intercept; ``weights_prior`` does not apply, the
        coefficients get its ``coef_prior_sd``), sampled by
        :func:`bayespmf.models.sample` as every model is.
    outcome : array_like (S,), optional
        A distal outcome whose distribution depends on the class (NaN where
        missing): the model is then
        :func:`bayespmf.models.distal.latent_class_outcome_model` (the outcome's
        density enters the class-summed likelihood; covariates allowed together with
        it; ``coords`` not taken).
    outcome_family : {"gaussian", "poisson", "bernoulli", "categorical"}
        The outcome's distribution given the class (with ``outcome``).

    Returns
    -------
    pymc.Model
        Free variables ``weights`` (dims ``class``) and ``A_<name>`` for each data
        variable (dims ``(class, <name>_category)``: each row is the PMF of the
        variable given the class); the data ``rows`` and the observed variable ``x``
        (both dims ``(row, variable)``). Variable names and category labels come
        from ``data`` (coordinates ``variable`` and ``<name>_category``).

    Raises
    ------
    DataValidationError
        Malformed data, a variable never observed, ``rank < 1``, non-positive
        priors, or ``weights_prior``/``coords`` with ``covariates``.

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 1], [1, -1], [1, 0]], 2, names=["a", "b"])
    >>> model = latent_class_model(data, n_components=2)
    >>> sorted(model.named_vars)
    ['A_a', 'A_b', 'rows', 'weights', 'x']
    >>> model.named_vars_to_dims["A_b"]
    ('class', 'b_category')
    >>> prior = pm.sample_prior_predictive(draws=3, model=model, random_seed=0)
    >>> prior.prior_predictive["x"].shape
    (1, 3, 3, 2)
    """
    if outcome is not None:
        from bayespmf.models.distal import latent_class_outcome_model

        if coords is not None:
            raise DataValidationError(
                "latent_class_model(outcome=...) does not take 'coords'. Drop them."
            )
        return latent_class_outcome_model(
            data,
            n_components,
            outcome,
            outcome_family,
            n_categories=n_categories,
            weights_prior=weights_prior,
            factor_prior=factor_prior,
            covariates=covariates,
        )
    if covariates is not None:
        from bayespmf.models.regression import latent_class_regression_model

        # the regression has no class-weight prior and takes no coordinates: refuse
        # them rather than build a model that ignores them
        if weights_prior != 1.0 or coords is not None:
            given = ["weights_prior"] * (weights_prior != 1.0) + ["coords"] * (
                coords is not None
            )
            raise DataValidationError(
                f"latent_class_model(covariates=...) builds a latent-class regression, "
                f"which does not take {given}: the class weights are softmax(z beta) "
                "(set the coefficients' prior with latent_class_regression_model's "
                "'coef_prior_sd'). Drop them."
            )
        if isinstance(data, pd.DataFrame):
            data = CategoricalData.from_pandas(data)
        return latent_class_regression_model(
            data,
            covariates,
            n_components,
            factor_prior=factor_prior,
            n_categories=n_categories,
        )
    data = as_model_data(data, n_categories)
    n_components = check_int(
        n_components, "n_components", owner="latent_class_model", low=1
    )
    weights_prior = check_float(weights_prior, "weights_prior", low=0.0, low_open=True)
    factor_prior = check_float(factor_prior, "factor_prior", low=0.0, low_open=True)
    as_codes(data, name="data")  # a variable never observed cannot be learned
    data = data.drop_empty_rows()
    model_coords = {"class": np.arange(n_components), **rows_coords(data)}
    if coords:
        model_coords.update(coords)
    with pm.Model(coords=model_coords) as model:
        rows = pm.Data(DATA_NAME, np.asarray(data.codes), dims=("row", "variable"))
        weights = pm.Dirichlet(
            "weights", a=np.full(n_components, weights_prior), dims="class"
        )
        factors = factor_priors(data, n_components, factor_prior)
        LatentClassRows(
            OBSERVED_NAME, weights, factors, observed=rows, dims=("row", "variable")
        )
    return model


def model_data(model) -> tuple[CategoricalData, int]:
    """The data and rank of a model from :func:`latent_class_model`, read from the model.

    The codes come from the ``rows`` data container (its current value, so
    ``pm.set_data`` is followed), the variable names from the ``variable``
    coordinate, the category labels from the ``<name>_category`` coordinates and the
    rank from the ``class`` coordinate.

    Returns
    -------
    data : CategoricalData
    n_components : int

    Raises
    ------
    DataValidationError
        If ``model`` was not built by :func:`latent_class_model`.

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 1], [1, -1]], 2, names=["a", "b"])
    >>> got, n_components = model_data(latent_class_model(data, n_components=3))
    >>> got == data, n_components
    (True, 3)
    """
    needed = {DATA_NAME, OBSERVED_NAME, "weights"}
    if not isinstance(model, pm.Model) or not needed <= set(model.named_vars):
        raise DataValidationError(
            "'model' must be built by bayespmf.models.latent_class_model (a pm.Model "
            f"with variables {sorted(needed)}); got {type(model).__name__}."
        )
    names = [str(v) for v in model.coords["variable"]]
    categories = [list(model.coords[category_dim(n)]) for n in names]
    codes = np.asarray(model[DATA_NAME].get_value(), dtype=np.int64)
    data = CategoricalData(codes, [len(c) for c in categories], names, categories)
    return data, len(model.coords["class"])
