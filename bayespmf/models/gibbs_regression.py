r"""Gibbs for the factors of the latent-class regression, NUTS for its coefficients.

The model of :func:`bayespmf.models.latent_class_regression_model` sums the class out
of a likelihood whose class prior is row-specific,
:math:`\pi_s = \operatorname{softmax}(z_s^\top\beta)`. Given :math:`\beta`, the
factors are still conjugate to the complete-data likelihood: drawing the class labels
:math:`h_s \mid \beta, A, x_s` (:math:`\Pr(h_s = f) \propto \pi_{sf}
\prod_{n\ \mathrm{observed}} A_n(x_{sn}, f)`) and then every column

.. math::

    A_n(:, f) \sim \mathrm{Dir}(\alpha_A + m_{n,f,:})

(:math:`m_{n,f,i}` the rows drawn in class :math:`f` with :math:`x_{sn} = i`, missing
entries skipped) leaves :math:`p(A \mid \beta, x)` invariant, the labels discarded.
:class:`RegressionFactorGibbs` is that kernel as a PyMC step over the ``A_<name>``
value variables (in the model's coordinates: the value transforms are applied to each
draw). :func:`gibbs_steps` pairs it with PyMC's NUTS on the coefficients, whose
target is the class-marginalized log-density with :math:`A` held at its current
value: each step leaves the joint posterior :math:`p(\beta, A \mid x)` invariant, so
their ``CompoundStep`` does too. ``bayespmf.models.sample(model, method="gibbs")``
runs it for a regression model (and :class:`bayespmf.models.LatentClassGibbs` for a
plain latent-class model).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, Competence, StepMethodState
from pytensor.graph.traversal import ancestors

from bayespmf._validation import DataValidationError, check_int
from bayespmf.kernels.gibbs_numba import draw_conjugate
from bayespmf.kernels.gibbs_regression_numba import draw_row_class_counts
from bayespmf.models._names import OBSERVED_NAME
from bayespmf.models._rows_dist import LatentClassRegressionRows
from bayespmf.models.gibbs import LatentClassGibbs, bind_step, simplex_maps
from bayespmf.models.gibbs_distal import is_outcome_model, outcome_gibbs_steps
from bayespmf.pmf import observed_csr

__all__ = ["DEFAULT_FACTOR_SWEEPS", "RegressionFactorGibbs", "gibbs_steps"]

#: Gibbs sweeps of the factors per recorded draw (between two NUTS steps of the
#: coefficients); see :ref:`bench-gibbs-regression` for the measurement.
DEFAULT_FACTOR_SWEEPS = 4

_FACTOR_PREFIX = "A_"
_LOG_TINY = float(np.log(np.finfo(np.float64).tiny))


def _refuse(why: str):
    return DataValidationError(
        f"RegressionFactorGibbs samples latent-class regression models only (built by "
        f"bayespmf.models.latent_class_regression_model): {why}. Sample this model by "
        "NUTS (bayespmf.models.sample(..., method='nuts'))."
    )


def _is_regression(model) -> bool:
    """Whether ``model``'s only observed variable is latent-class regression rows."""
    obs = model.observed_RVs
    return len(obs) == 1 and isinstance(
        obs[0].owner.op, LatentClassRegressionRows.op_types()
    )


def _model_parts(model):
    """Check ``model``; return (logits graph, factors, coefficients, codes, priors)."""
    if model.potentials:
        raise _refuse(f"it has potentials {[p.name for p in model.potentials]}")
    if len(model.observed_RVs) != 1 or model.observed_RVs[0].name != OBSERVED_NAME:
        raise _refuse(
            f"its observed variables are {[v.name for v in model.observed_RVs]}, not "
            f"one {OBSERVED_NAME!r}"
        )
    obs = model.observed_RVs[0]
    if not _is_regression(model):
        raise _refuse(f"{OBSERVED_NAME!r} is not a LatentClassRegressionRows variable")
    logits, *factors = obs.owner.op.dist_params(obs.owner)
    free = set(model.free_RVs)
    if not factors or not all(rv in free for rv in factors):
        raise _refuse("its factors are not free variables")
    for rv in factors:
        if not isinstance(rv.owner.op, pm.Dirichlet.rv_type) or not rv.name.startswith(
            _FACTOR_PREFIX
        ):
            raise _refuse(f"factor {rv.name!r} is not a Dirichlet named A_<variable>")
    coefs = [rv for rv in model.free_RVs if rv not in set(factors)]
    if not coefs or set(ancestors([logits])) & set(factors):
        raise _refuse("its class logits do not depend on coefficients alone")
    priors = []
    for rv in factors:
        alpha = rv.owner.op.dist_params(rv.owner)[0]
        if set(ancestors([alpha])) & free:
            raise _refuse(f"the prior of {rv.name!r} depends on a free variable")
        priors.append(np.asarray(alpha.eval(), dtype=np.float64))
    codes = np.asarray(model.rvs_to_values[obs].eval(), dtype=np.int64)
    return logits, factors, coefs, codes, priors


class RegressionFactorGibbs(BlockedStep):
    r"""Gibbs step of the factors of a latent-class regression, coefficients fixed.

    Each sweep draws the class of every row from its posterior given the current
    coefficients and factors (each row with its own prior
    :math:`\operatorname{softmax}(z_s^\top\beta)`, in log space), then every column
    :math:`A_n(:, f) \sim \mathrm{Dir}(\alpha_A + m_{n,f,:})`; the labels are
    discarded. The coefficients are read from the point (the step does not change
    them: pair it with a step that does, as :func:`gibbs_steps` does). The factor
    prior is read from the model (``factor_prior``), the draws written in the model's
    value coordinates. Its random generator is the one ``pm.sample`` gives each chain
    (``random_seed``).

    Parameters
    ----------
    vars : list, optional
        The value variables (default: every ``A_<name>`` of the model; it must be all
        of them).
    model : pymc.Model, optional
        From :func:`bayespmf.models.latent_class_regression_model` (no potentials, no
        other observed variables); default: the model in context.
    threads : int, optional
        Threads over blocks of rows in the label draw (default: the CPUs this
        process may use). The draws do not depend on it.
    rng : numpy.random.Generator or int, optional
    n_sweeps : int, optional
        Sweeps (labels, then factors) per step (default
        :data:`DEFAULT_FACTOR_SWEEPS`). Inside a :func:`gibbs_steps` compound, more
        sweeps move the factors further per NUTS step of the coefficients (a NUTS step
        costs several gradients, each a pass over the data; a sweep costs about one).
        The factors' ESS grows with the sweeps, the coefficients' does not (NUTS given
        the factors limits it); the figures are in :ref:`bench-gibbs-regression`.

    Raises
    ------
    DataValidationError
        The model is not a latent-class regression, ``vars`` are not its factors, or
        ``n_sweeps`` is not a positive integer.

    Examples
    --------
    >>> from bayespmf.models import latent_class_regression_model
    >>> model = latent_class_regression_model(
    ...     np.array([[0, 1], [1, 0], [1, 1]]), [[0.0], [1.0], [2.0]], 2,
    ...     n_categories=[2, 2])
    >>> step = RegressionFactorGibbs(model=model, rng=0)
    >>> point, _ = step.step(model.initial_point())
    >>> sorted(point), bool(np.array_equal(point["coef"], model.initial_point()["coef"]))
    (['A_x0_simplex__', 'A_x1_simplex__', 'coef'], True)
    """

    name = "regression_factor_gibbs"
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
        try:
            self.n_sweeps = check_int(
                DEFAULT_FACTOR_SWEEPS if n_sweeps is None else n_sweeps,
                "n_sweeps",
                owner="RegressionFactorGibbs",
                low=1,
            )
        except ValueError as err:
            raise DataValidationError(
                f"{err} It counts the Gibbs sweeps of the factors per draw: pass e.g. "
                "n_sweeps=1."
            ) from None
        model = modelcontext(model)
        logits, factors, coefs, codes, priors = _model_parts(model)
        values = [model.rvs_to_values[rv] for rv in factors]
        bind_step(self, model, values, vars, rng, threads, _refuse, "factor")
        n_components = int(model.initial_point()[values[0].name].shape[0])
        n_cat = [int(a.shape[-1]) for a in priors]
        self._offsets = np.concatenate([[0], np.cumsum(n_cat)])
        self._a_prior = np.ascontiguousarray(
            np.vstack([np.broadcast_to(a, (n_components, a.shape[-1])).T for a in priors])
        )
        self._w_alpha = np.ones(n_components)  # draw_conjugate's weights: drawn and unused
        self._indptr, self._indices = observed_csr(codes, n_cat)
        self._names = [v.name for v in values]
        coef_values = [model.rvs_to_values[rv] for rv in coefs]
        self._coef_names = [v.name for v in coef_values]
        # the rows' log class priors as a function of the coefficients' values
        (logits,) = model.replace_rvs_by_values([logits])
        log_prior = logits - pt.logsumexp(logits, axis=-1, keepdims=True)
        self._log_prior = pytensor.function(
            coef_values, pt.broadcast_to(log_prior, (codes.shape[0], n_components))
        )
        self._to_log, self._to_value = simplex_maps(model, factors, values)

    @staticmethod
    def competence(var, has_grad):  # noqa: D102 - never assigned automatically
        return Competence.INCOMPATIBLE

    def step(self, point):
        """``n_sweeps`` sweeps from ``point``: labels drawn and discarded, factors drawn."""
        log_prior = self._log_prior(*[point[n] for n in self._coef_names])
        log_a = np.vstack([la.T for la in self._to_log(*[point[n] for n in self._names])])
        rng, offsets = self.rng, self._offsets
        for _ in range(self.n_sweeps):
            counts = draw_row_class_counts(
                log_prior, log_a, self._indptr, self._indices, rng, threads=self.threads
            )
            _, log_a = draw_conjugate(self._w_alpha, self._a_prior + counts, offsets, rng)
            # kept at the smallest normal double, so the transforms never see log(0)
            np.maximum(log_a, _LOG_TINY, out=log_a)
        parts = [
            np.ascontiguousarray(log_a[offsets[n] : offsets[n + 1]].T)
            for n in range(offsets.size - 1)
        ]
        out = point.copy()
        for name, value in zip(self._names, self._to_value(*parts), strict=True):
            out[name] = np.asarray(value, dtype=point[name].dtype)
        return out, [{}]


def gibbs_steps(model=None, *, threads=None, n_sweeps=None, overrelax=None):
    """The step ``sample(model, method="gibbs")`` runs: Gibbs, with NUTS where needed.

    A plain latent-class model gets :class:`bayespmf.models.LatentClassGibbs`; a
    latent-class regression gets ``[RegressionFactorGibbs, NUTS(coefficients)]``
    (``pm.sample`` makes them a ``CompoundStep``: each draw is ``n_sweeps`` Gibbs
    sweeps of the factors, then one NUTS step of the coefficients, whose step size
    and mass matrix are tuned during ``tune``); a model with a distal outcome gets
    :func:`bayespmf.models.gibbs_distal.outcome_gibbs_steps` (the same, with the
    outcome's parameters drawn in the Gibbs sweeps).

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model in context.
    threads : int, optional
        Threads of the label draw.
    n_sweeps : int, optional
        Gibbs sweeps per draw (each step's own default if None).
    overrelax : float, optional
        Strength of the overrelaxed Dirichlet updates of the plain step
        (:class:`~bayespmf.models.LatentClassGibbs`; its default if None). The
        regression and distal steps draw afresh and refuse it.

    Returns
    -------
    BlockedStep or list of BlockedStep
        ``step=`` for ``pm.sample``.

    Raises
    ------
    DataValidationError
        The model is none of them (the plain step's message).

    Examples
    --------
    >>> from bayespmf.models import latent_class_model
    >>> codes = np.array([[0, 1], [1, 0], [1, 1]])
    >>> z = [[0.0], [1.0], [2.0]]
    >>> with latent_class_model(codes, 2, n_categories=[2, 2], covariates=z):
    ...     steps = gibbs_steps()
    >>> [type(s).__name__ for s in steps]
    ['RegressionFactorGibbs', 'NUTS']
    """
    model = modelcontext(model)
    plain = not is_outcome_model(model) and not _is_regression(model)
    if plain:
        kw = {} if overrelax is None else {"overrelax": overrelax}
        return LatentClassGibbs(model=model, threads=threads, n_sweeps=n_sweeps, **kw)
    if overrelax is not None:
        raise DataValidationError(
            "'overrelax' applies to the Gibbs step of a latent-class model without "
            "covariates or outcome; this model's step draws its conditionals afresh. "
            "Drop overrelax."
        )
    if is_outcome_model(model):  # a distal outcome: bayespmf.models.gibbs_distal
        return outcome_gibbs_steps(model, threads=threads, n_sweeps=n_sweeps)
    gibbs = RegressionFactorGibbs(model=model, threads=threads, n_sweeps=n_sweeps)
    factors = set(gibbs.vars)
    coefs = [v for v in model.value_vars if v not in factors]
    return [gibbs, pm.NUTS(vars=coefs, model=model)]
