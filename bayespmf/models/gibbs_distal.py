r"""Gibbs for the latent-class model with a distal outcome (one-step Bayes).

The model of :func:`bayespmf.models.distal.latent_class_outcome_model` sums the class
out of :math:`\Pr(x_s, y_s) = \sum_f \pi_f(s)\, f(y_s \mid \theta_f) \prod_n
A_n(x_{sn}, f)`. Its priors are conjugate to the complete-data likelihood (the
gaussian standard deviation given the mean excepted, which has an exact draw of its
own): drawing every row's class

.. math:: \Pr(h_s = f \mid x_s, y_s) \propto \pi_f(s)\, f(y_s \mid \theta_f)
   \prod_{n\ \mathrm{observed}} A_n(x_{sn}, f)

(no :math:`y` term where the outcome is missing), then :math:`\lambda \sim
\mathrm{Dir}(\alpha_\lambda + n)`, :math:`A_n(:, f) \sim \mathrm{Dir}(\alpha_A +
m_{n,f,:})` and the outcome's parameters from their conditionals given the labels
(:func:`bayespmf.kernels.gibbs_distal_numba.draw_outcome_params`: Beta, Gamma and
Dirichlet for bernoulli, poisson and categorical; for gaussian the class means given
the standard deviations, Normal-Normal, then each variance given its mean from its
generalized inverse Gaussian conditional) is a Markov kernel whose stationary law,
the labels discarded, is the marginal posterior. :class:`OutcomeGibbs` is that kernel
as a PyMC step over the value variables of ``weights``, every ``A_<name>`` and the
outcome's parameters. With covariates the class prior is
:math:`\operatorname{softmax}(z_s^\top\beta)`: the step then leaves the coefficients
as they are (drawing the rest given them) and :func:`outcome_gibbs_steps` pairs it
with PyMC's NUTS on the coefficients, as
:func:`bayespmf.models.gibbs_regression.gibbs_steps` does for the factors alone.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.transforms import (
    LogOddsTransform,
    LogTransform,
    SimplexTransform,
)
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pytensor.graph.traversal import ancestors

from bayespmf._validation import DataValidationError, check_int
from bayespmf.kernels.gibbs_distal_numba import draw_outcome_params, draw_row_labels
from bayespmf.kernels.gibbs_numba import draw_conjugate
from bayespmf.models._names import OBSERVED_NAME, OUTCOME_NAME
from bayespmf.models._rows_dist import LatentClassRegressionRows
from bayespmf.models.gibbs import bind_step, default_sweeps, simplex_maps
from bayespmf.pmf import observed_csr

__all__ = [
    "DEFAULT_COVARIATE_SWEEPS",
    "OUTCOME_PRIORS",
    "OutcomeGibbs",
    "is_outcome_model",
    "outcome_gibbs_steps",
]

#: Gibbs sweeps per draw between two NUTS steps of the coefficients when the model has
#: covariates: the regression step's default
#: (:data:`bayespmf.models.gibbs_regression.DEFAULT_FACTOR_SWEEPS`, a test keeps them
#: equal), for the same balance of a sweep's cost against a NUTS step's.
DEFAULT_COVARIATE_SWEEPS = 4

_FACTOR_PREFIX = "A_"
_LOG_TINY = float(np.log(np.finfo(np.float64).tiny))

#: The distribution of the outcome given the class, by family: the component of
#: ``y``'s mixture.
_COMPONENTS = {
    "gaussian": pm.Normal,
    "poisson": pm.Poisson,
    "bernoulli": pm.Bernoulli,
    "categorical": pm.Categorical,
}

#: The priors of the outcome's parameters the step has conditionals for, by family
#: (those of :func:`bayespmf.models.distal.latent_class_outcome_model`).
OUTCOME_PRIORS = {
    "gaussian": {"outcome_mean": pm.Normal, "outcome_sigma": pm.HalfNormal},
    "poisson": {"outcome_mean": pm.Gamma},
    "bernoulli": {"outcome_mean": pm.Beta},
    "categorical": {"outcome_probs": pm.Dirichlet},
}


def _refuse(why: str):
    return DataValidationError(
        "OutcomeGibbs samples latent-class models with a distal outcome as "
        "bayespmf.models.latent_class_model(data, n_components, outcome=y, "
        f"outcome_family=...) builds them (with or without covariates): {why}. Sample "
        "this model by NUTS (bayespmf.models.sample(..., method='nuts'))."
    )


def is_outcome_model(model) -> bool:
    """Whether ``model`` has an observed distal outcome ``y`` besides its rows ``x``.

    Examples
    --------
    >>> from bayespmf.models import latent_class_model
    >>> x = np.array([[0, 1], [1, 0], [1, 1]])
    >>> is_outcome_model(latent_class_model(x, 2, outcome=[0.5, 1.0, 2.0]))
    True
    >>> is_outcome_model(latent_class_model(x, 2))
    False
    """
    return any(rv.name == OUTCOME_NAME for rv in model.observed_RVs)


def _constant(var, name: str, free) -> np.ndarray:
    """A prior's parameter as an array, refused if it depends on a free variable."""
    if set(ancestors([var])) & free:
        raise _refuse(f"the prior of {name!r} depends on a free variable")
    return np.asarray(var.eval(), dtype=np.float64)


def _family(y, free) -> tuple[str, set]:
    """The family of ``y``'s mixture components and the free variables they read."""
    for family, dist in _COMPONENTS.items():
        comps = [
            v
            for v in y.owner.inputs
            if v.owner is not None and isinstance(v.owner.op, dist.rv_type)
        ]
        if comps:
            reads = set(ancestors(comps[0].owner.op.dist_params(comps[0].owner))) & free
            return family, reads
    raise _refuse(
        f"the components of {OUTCOME_NAME!r} are none of "
        f"{[d.__name__ for d in _COMPONENTS.values()]}"
    )


def _outcome_prior(family, rvs, n_components, free) -> dict:
    """The constant parameters of the outcome's priors, as ``draw_outcome_params``."""
    params = {
        name: [_constant(v, name, free) for v in rv.owner.op.dist_params(rv.owner)]
        for name, rv in rvs.items()
    }

    def per_class(value):
        return np.broadcast_to(value, (n_components,)).astype(np.float64)

    if family == "gaussian":
        mu, sd = params["outcome_mean"]
        loc, scale = params["outcome_sigma"]
        if np.any(loc != 0):
            raise _refuse("the HalfNormal prior of 'outcome_sigma' is not centred at 0")
        return {
            "mean_mu": per_class(mu),
            "mean_sd": per_class(sd),
            "sigma_scale": per_class(scale),
        }
    if family == "poisson":
        alpha, scale = params["outcome_mean"]  # PyMC's Gamma draws by its scale
        return {"alpha": per_class(alpha), "rate": 1.0 / per_class(scale)}
    if family == "bernoulli":
        alpha, beta = params["outcome_mean"]
        return {"alpha": per_class(alpha), "beta": per_class(beta)}
    (alpha,) = params["outcome_probs"]
    n_cat = alpha.shape[-1]
    return {"alpha": np.broadcast_to(alpha, (n_components, n_cat)).astype(np.float64)}


def _model_parts(model):
    """Check ``model``; return what :class:`OutcomeGibbs` needs, as a dict."""
    if model.potentials:
        raise _refuse(f"it has potentials {[p.name for p in model.potentials]}")
    observed = {v.name: v for v in model.observed_RVs}
    if set(observed) != {OBSERVED_NAME, OUTCOME_NAME}:
        raise _refuse(
            f"its observed variables are {sorted(observed)}, not {OBSERVED_NAME!r} and "
            f"{OUTCOME_NAME!r}"
        )
    obs, y = observed[OBSERVED_NAME], observed[OUTCOME_NAME]
    if not isinstance(obs.owner.op, LatentClassRegressionRows.op_types()):
        raise _refuse(f"{OBSERVED_NAME!r} is not a LatentClassRegressionRows variable")
    free = set(model.free_RVs)
    logits, *factors = obs.owner.op.dist_params(obs.owner)
    if not factors or not all(rv in free for rv in factors):
        raise _refuse("its factors are not free variables")
    for rv in factors:
        if not isinstance(rv.owner.op, pm.Dirichlet.rv_type) or not rv.name.startswith(
            _FACTOR_PREFIX
        ):
            raise _refuse(f"factor {rv.name!r} is not a Dirichlet named A_<variable>")
    family, reads = _family(y, free)
    expected = OUTCOME_PRIORS[family]
    names = sorted(v.name for v in reads)
    if names != sorted(expected):
        raise _refuse(
            f"its {family} outcome reads the free variables {names}, not {sorted(expected)}"
        )
    outcome = {v.name: v for v in reads}
    for name, dist in expected.items():
        if not isinstance(outcome[name].owner.op, dist.rv_type):
            raise _refuse(
                f"{name!r} has a {type(outcome[name].owner.op).__name__} prior; the "
                f"Gibbs step has conditionals for a {family} outcome under "
                f"{ {k: d.__name__ for k, d in expected.items()} } priors only"
            )
    n_components = len(model.coords["class"])
    # the rows' log class weights before the indicators (class prior and outcome), as
    # the model writes them: they read the weights or the coefficients, not the factors
    seen = set(ancestors([logits])) & free
    if seen & set(factors):
        raise _refuse("its class logits depend on the factors")
    rest = free - set(factors) - set(outcome.values())
    if rest - seen:
        raise _refuse(f"it has other free variables {sorted(v.name for v in rest - seen)}")
    inputs = [v for v in model.free_RVs if v in rest]  # weights, or the coefficients
    if not inputs:
        raise _refuse("its class prior has neither 'weights' nor coefficients")
    weights = next((v for v in inputs if v.name == "weights"), None)
    if weights is not None and (
        len(inputs) > 1 or not isinstance(weights.owner.op, pm.Dirichlet.rv_type)
    ):
        raise _refuse("its class weights are not one Dirichlet 'weights'")
    a_priors = [
        _constant(rv.owner.op.dist_params(rv.owner)[0], rv.name, free) for rv in factors
    ]
    codes = np.asarray(model.rvs_to_values[obs].eval(), dtype=np.int64)
    y_values = np.asarray(model.rvs_to_values[y].eval())
    obs_rows = np.asarray(model.coords["outcome_row"], dtype=np.int64)
    if obs_rows.shape != y_values.shape:
        raise _refuse("its 'outcome_row' coordinate does not list the outcome's rows")
    return {
        "family": family,
        "logits": logits,
        "factors": factors,
        "a_priors": a_priors,
        "weights": weights,
        "coefs": [] if weights is not None else inputs,
        "inputs": inputs,
        "outcome": [outcome[name] for name in expected],
        "prior": _outcome_prior(
            family, {n: outcome[n] for n in expected}, n_components, free
        ),
        "w_prior": (
            None
            if weights is None
            else np.broadcast_to(
                _constant(weights.owner.op.dist_params(weights.owner)[0], "weights", free),
                (n_components,),
            ).copy()
        ),
        "codes": codes,
        "y": y_values if family == "gaussian" else y_values.astype(np.int64),
        "obs_rows": obs_rows,
        "n_components": n_components,
    }


def _transform_pair(model, rv, value):
    """``(to constrained, to value)`` of one outcome variable, NumPy where known."""
    transform = model.rvs_to_transforms.get(rv)
    if transform is None:
        return (lambda v: np.asarray(v, dtype=np.float64)), (lambda x: x)
    if type(transform) is LogTransform:
        return np.exp, np.log
    if type(transform) is LogOddsTransform:
        return (lambda v: 1.0 / (1.0 + np.exp(-v))), (lambda x: np.log(x) - np.log1p(-x))
    if type(transform) is SimplexTransform:
        logs, values = simplex_maps(model, [rv], [value])
        return (lambda v: np.exp(logs(v)[0])), (lambda x: values(np.log(x))[0])
    x = pt.tensor(dtype="float64", shape=(None,) * rv.ndim)
    backward = pytensor.function([value], transform.backward(value, *rv.owner.inputs))
    forward = pytensor.function([x], transform.forward(x, *rv.owner.inputs))
    return backward, forward


class OutcomeGibbs(BlockedStep):
    r"""Gibbs step of a latent-class model with a distal outcome.

    Each sweep draws the class of every row given the current parameters, from
    :math:`\pi_f(s)\, f(y_s \mid \theta_f) \prod_n A_n(x_{sn}, f)` (the class prior
    :math:`\pi(s)` the weights, or with covariates :math:`\operatorname{softmax}(z_s^\top
    \beta)` at the current coefficients; no :math:`y` term where the outcome is
    missing), then the weights (without covariates) and every factor column from
    their Dirichlet conditionals and the outcome's parameters from theirs given the
    labels: Beta (bernoulli), Gamma (poisson), Dirichlet (categorical); gaussian, the
    class means given the standard deviations (Normal-Normal), then every variance
    given its mean, an exact draw of its generalized inverse Gaussian conditional
    under the HalfNormal prior (:func:`bayespmf.kernels.gibbs_distal_numba.draw_gig`).
    The labels are discarded. The rows are not collapsed into patterns: each has its
    own outcome. The priors are read from the model; the draws are written in its
    value coordinates. Its random generator is the one ``pm.sample`` gives each chain
    (``random_seed``).

    Parameters
    ----------
    vars : list, optional
        The value variables (default, and the only choice: ``weights`` where the
        model has them, every ``A_<name>`` and the outcome's parameters).
    model : pymc.Model, optional
        From ``latent_class_model(..., outcome=y, outcome_family=...)``, with or
        without covariates (then pair the step with one that moves the coefficients,
        as :func:`outcome_gibbs_steps` does); default: the model in context.
    threads : int, optional
        Threads over blocks of rows in the label draw (default: the CPUs this
        process may use). The draws do not depend on it.
    rng : numpy.random.Generator or int, optional
    n_sweeps : int, optional
        Sweeps per step: by default :func:`bayespmf.models.gibbs.default_sweeps` of
        the observed entries without covariates, and
        :data:`DEFAULT_COVARIATE_SWEEPS` between two NUTS steps of the coefficients
        with them. A step of ``n_sweeps`` sweeps makes
        the same chain as ``n_sweeps`` steps of one sweep with the same generator.

    Raises
    ------
    DataValidationError
        The model is not a latent-class model with a distal outcome as
        ``latent_class_model`` builds it (another observed variable, a potential, a
        free variable the step does not know, an outcome prior it has no
        conditional for), ``vars`` are not all of its variables, or ``n_sweeps`` is
        not a positive integer. The message names NUTS as the way to sample it.

    Examples
    --------
    >>> import pymc as pm
    >>> from bayespmf.models import latent_class_model
    >>> model = latent_class_model(np.array([[0, 1], [1, 0], [1, 1], [0, 0]]), 2,
    ...                            outcome=[0.3, 2.0, np.nan, -0.4])
    >>> with model:
    ...     idata = pm.sample(draws=20, tune=0, chains=1, step=OutcomeGibbs(),
    ...                       random_seed=0, progressbar=False,
    ...                       compute_convergence_checks=False)
    >>> idata.posterior["outcome_sigma"].shape
    (1, 20, 2)
    """

    name = "outcome_gibbs"
    stats_dtypes_shapes: ClassVar[dict] = {}
    _state_class = StepMethodState

    def __init__(
        self,
        vars=None,
        *,
        model=None,
        threads=None,
        rng=None,
        n_sweeps: int | None = None,
        blocked=True,
    ):
        if n_sweeps is not None:
            try:
                n_sweeps = check_int(n_sweeps, "n_sweeps", owner="OutcomeGibbs", low=1)
            except ValueError as err:
                raise DataValidationError(
                    f"{err} It counts the Gibbs sweeps per draw: pass e.g. n_sweeps=1."
                ) from None
        model = modelcontext(model)
        parts = _model_parts(model)
        self.family = parts["family"]
        simplexes = ([parts["weights"]] if parts["weights"] is not None else []) + parts[
            "factors"
        ]
        outcome = parts["outcome"]
        values = [model.rvs_to_values[rv] for rv in simplexes + outcome]
        bind_step(self, model, values, vars, rng, threads, _refuse, "parameter")
        self._has_weights = parts["weights"] is not None
        n_components = parts["n_components"]
        n_cat = [int(a.shape[-1]) for a in parts["a_priors"]]
        self._n_components = n_components
        self._offsets = np.concatenate([[0], np.cumsum(n_cat)])
        self._a_prior = np.ascontiguousarray(
            np.vstack(
                [
                    np.broadcast_to(a, (n_components, a.shape[-1])).T
                    for a in parts["a_priors"]
                ]
            )
        )
        self._w_prior = parts["w_prior"] if self._has_weights else np.ones(n_components)
        self._indptr, self._indices = observed_csr(parts["codes"], n_cat)
        if n_sweeps is None:
            n_sweeps = (
                default_sweeps(self.n_entries)
                if self._has_weights
                else DEFAULT_COVARIATE_SWEEPS
            )
        self.n_sweeps = int(n_sweeps)
        self._y, self._obs_rows, self._prior = parts["y"], parts["obs_rows"], parts["prior"]
        self._simplex_names = [model.rvs_to_values[rv].name for rv in simplexes]
        self._outcome_names = [rv.name for rv in outcome]
        self._outcome_values = [model.rvs_to_values[rv].name for rv in outcome]
        self._outcome_maps = [
            _transform_pair(model, rv, model.rvs_to_values[rv]) for rv in outcome
        ]
        self._coef_names = [model.rvs_to_values[rv].name for rv in parts["coefs"]]
        # every row's log class weights before the indicators (the class prior and the
        # outcome's log-density), as a function of the constrained prior variables
        # (weights or coefficients) and outcome parameters
        self._log_prior = pytensor.function(
            parts["inputs"] + outcome,
            pt.broadcast_to(parts["logits"], (parts["codes"].shape[0], n_components)),
        )
        self._log_prior.trust_input = True  # float64 arrays of the variables' shapes
        self._to_log, self._to_value = simplex_maps(
            model, simplexes, [model.rvs_to_values[rv] for rv in simplexes]
        )

    @property
    def n_entries(self) -> int:
        """The observed entries one sweep visits (the size of the rows' CSR)."""
        return int(self._indices.size)

    @staticmethod
    def competence(var, has_grad):  # noqa: D102 - never assigned automatically
        return Competence.INCOMPATIBLE

    def step(self, point):
        """``n_sweeps`` sweeps from ``point``: labels drawn and discarded."""
        logs = self._to_log(*[point[n] for n in self._simplex_names])
        if self._has_weights:
            log_w, *log_factors = logs
        else:
            log_w, log_factors = None, logs
        log_a = np.vstack([la.T for la in log_factors])
        theta = {
            name: backward(point[value])
            for name, value, (backward, _) in zip(
                self._outcome_names, self._outcome_values, self._outcome_maps, strict=True
            )
        }
        coefs = [np.asarray(point[n], dtype=np.float64) for n in self._coef_names]
        rng, offsets = self.rng, self._offsets
        for _ in range(self.n_sweeps):
            prior_in = [np.exp(log_w)] if self._has_weights else coefs
            log_prior = self._log_prior(*prior_in, *theta.values())
            labels, counts = draw_row_labels(
                log_prior, log_a, self._indptr, self._indices, rng, threads=self.threads
            )
            totals = np.bincount(labels, minlength=self._n_components)
            log_w_new, log_a = draw_conjugate(
                self._w_prior + totals, self._a_prior + counts, offsets, rng
            )
            # kept at the smallest normal double, so the transforms never see log(0)
            np.maximum(log_a, _LOG_TINY, out=log_a)
            if self._has_weights:
                log_w = np.maximum(log_w_new, _LOG_TINY)
            theta = draw_outcome_params(
                self.family,
                self._y,
                labels[self._obs_rows],
                self._n_components,
                self._prior,
                theta,
                rng,
            )
        parts = [
            np.ascontiguousarray(log_a[offsets[n] : offsets[n + 1]].T)
            for n in range(offsets.size - 1)
        ]
        out = point.copy()
        logs = ([log_w] if self._has_weights else []) + parts
        for name, value in zip(self._simplex_names, self._to_value(*logs), strict=True):
            out[name] = np.asarray(value, dtype=point[name].dtype)
        for name, value, (_, forward) in zip(
            self._outcome_names, self._outcome_values, self._outcome_maps, strict=True
        ):
            out[value] = np.asarray(forward(theta[name]), dtype=point[value].dtype)
        return out, [{}]


def outcome_gibbs_steps(model=None, *, threads=None, n_sweeps=None):
    """The step ``sample(model, method="gibbs")`` runs on a model with an outcome.

    Without covariates :class:`OutcomeGibbs` alone; with covariates ``[OutcomeGibbs,
    NUTS(coefficients)]`` (``pm.sample`` makes them a ``CompoundStep``: each draw is
    ``n_sweeps`` Gibbs sweeps of the factors and the outcome's parameters, then one
    NUTS step of the coefficients given them, tuned during ``tune``).

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model in context.
    threads : int, optional
        Threads of the label draw.
    n_sweeps : int, optional
        Gibbs sweeps per draw (the step's default if None).

    Returns
    -------
    OutcomeGibbs or list
        ``step=`` for ``pm.sample``.

    Raises
    ------
    DataValidationError
        As :class:`OutcomeGibbs`.

    Examples
    --------
    >>> from bayespmf.models import latent_class_model
    >>> x = np.array([[0, 1], [1, 0], [1, 1]])
    >>> with latent_class_model(x, 2, outcome=[0, 1, 1], outcome_family="bernoulli",
    ...                         covariates=[[0.0], [1.0], [2.0]]):
    ...     steps = outcome_gibbs_steps()
    >>> [type(s).__name__ for s in steps]
    ['OutcomeGibbs', 'NUTS']
    """
    model = modelcontext(model)
    gibbs = OutcomeGibbs(model=model, threads=threads, n_sweeps=n_sweeps)
    if gibbs._has_weights:
        return gibbs
    drawn = set(gibbs.vars)
    coefs = [v for v in model.value_vars if v not in drawn]
    return [gibbs, pm.NUTS(vars=coefs, model=model)]
