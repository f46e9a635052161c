r"""A Gibbs step for the class-marginalized latent-class model, run by ``pm.sample``.

The model of :func:`bayespmf.models.latent_class_model` sums the class out, but its
priors are conjugate to the complete-data likelihood: drawing the class labels
:math:`z \mid \theta, x` and then :math:`\theta \mid z, x`,

.. math::

    \lambda \sim \mathrm{Dir}(\alpha_\lambda + n), \qquad
    A_n(f, :) \sim \mathrm{Dir}(\alpha_A + m_{n,f,:}),

(:math:`n_f` the rows in class :math:`f`, :math:`m_{n,f,i}` the rows of class
:math:`f` with :math:`x_n = i`, missing entries skipped) is a Markov kernel whose
stationary law, its :math:`z` discarded, is the marginal posterior of
:math:`\theta`. :class:`LatentClassGibbs` is that kernel as a PyMC step over the
model's value variables of ``weights`` and every ``A_<name>``, in whatever
coordinates the model samples them (the value transforms are applied to each draw),
so ``pm.sample(step=...)`` runs it with PyMC's chains, progress bar and seeding.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.model import modelcontext
from pymc.step_methods.compound import BlockedStep, StepMethodState
from pymc.util import get_random_generator
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.scalar import Cast
from pytensor.tensor.elemwise import Elemwise
from scipy.special import log_softmax

from bayespmf._runtime import n_cpus
from bayespmf._validation import DataValidationError
from bayespmf.kernels.gibbs_numba import draw_class_counts, draw_conjugate
from bayespmf.models._names import OBSERVED_NAME
from bayespmf.models._rows_dist import LatentClassRows
from bayespmf.pmf import index_dtype, observed_csr

__all__ = [
    "DEFAULT_OVERRELAX",
    "PLAIN_TUNE_SWEEPS",
    "LatentClassGibbs",
    "bind_step",
    "check_overrelax",
    "default_sweeps",
    "simplex_maps",
    "target_sweeps",
]

_FACTOR_PREFIX = "A_"
_LOG_TINY = float(np.log(np.finfo(np.float64).tiny))

#: Gibbs sweeps per recorded draw of :class:`LatentClassGibbs` on small data (chosen
#: on UCI Car, :ref:`bench-gibbs-sweeps`); the most the default (:func:`default_sweeps`)
#: gives.
DEFAULT_SWEEPS = 8

#: Strength of the overrelaxed Dirichlet updates of :class:`LatentClassGibbs`: chosen
#: on the weakly separated truths and 2e5 rows (:ref:`bench-gibbs-overrelax`), where
#: a pure reflection (1) kept bulk ESS but lost tail ESS and r-hat.
DEFAULT_OVERRELAX = 0.9

#: Sweeps at the start of a burn-in that draw the Dirichlets afresh: from a start far
#: from the posterior, an overrelaxed value that the data pin down only forgets its
#: distance by the strength per sweep, a fresh draw at once.
PLAIN_TUNE_SWEEPS = 20

#: Observed entries (of the unique patterns) that the default sweeps of one draw cover
#: at least: below it :func:`default_sweeps` gives several sweeps per draw.
SWEEP_ENTRIES = 100_000


def default_sweeps(n_entries: int) -> int:
    """Sweeps per draw by default: ``min(DEFAULT_SWEEPS, ceil(SWEEP_ENTRIES / n_entries))``.

    ``pm.sample`` has a fixed cost per recorded draw whatever the data; a sweep costs
    in proportion to the observed entries (:ref:`bench-gibbs-sweeps`). Several sweeps
    per draw spread that cost where a sweep is cheap (UCI Car: 10,368 entries, 8
    sweeps); from :data:`SWEEP_ENTRIES` entries on one sweep costs more than the draw's
    overhead, so each draw is one sweep, and ``draws`` is what it says.

    Examples
    --------
    >>> default_sweeps(10_368), default_sweeps(30_000), default_sweeps(10**7)
    (8, 4, 1)
    """
    return _sweeps(n_entries, SWEEP_ENTRIES, DEFAULT_SWEEPS)


def _sweeps(n_entries: int, entries: int, most: int) -> int:
    """``min(most, ceil(entries / n_entries))``, at least 1: sweeps covering ``entries``."""
    return int(min(most, max(1, -(-entries // max(1, int(n_entries))))))


#: Sampling to a target (``sample(..., method="gibbs")`` without ``draws``): the
#: observed entries that one recorded draw covers at least. ``pm.sample``'s cost per
#: draw, and the alignment and checks of every stored draw, are worth several sweeps
#: on small data; a draw of 1e6 entries makes them a small share
#: (:ref:`bench-gibbs-default-target`). With a target the number of draws is not the
#: user's, so they are thinned.
TARGET_SWEEP_ENTRIES = 1_000_000

#: The most sweeps per draw :func:`target_sweeps` gives (tiny data).
TARGET_MAX_SWEEPS = 64


def target_sweeps(n_entries: int) -> int:
    """Sweeps per draw when sampling to a target, unless ``n_sweeps`` is given.

    ``min(TARGET_MAX_SWEEPS, ceil(TARGET_SWEEP_ENTRIES / n_entries))``: one sweep
    from 1e6 observed entries on (as :func:`default_sweeps` from 1e5).

    Examples
    --------
    >>> target_sweeps(15_027), target_sweeps(10_368), target_sweeps(10**7)
    (64, 64, 1)
    >>> target_sweeps(100_000)
    10
    """
    return _sweeps(n_entries, TARGET_SWEEP_ENTRIES, TARGET_MAX_SWEEPS)


def _refuse(why: str):
    return DataValidationError(
        f"LatentClassGibbs samples plain latent-class models only (built by "
        f"bayespmf.models.latent_class_model without covariates): {why}. Sample this "
        "model by NUTS (bayespmf.models.sample(..., method='nuts'))."
    )


def _constant(var) -> np.ndarray:
    """A Dirichlet concentration (constant: any free variable has been refused)."""
    return np.asarray(var.eval(), dtype=np.float64)


def _rows_codes(value) -> np.ndarray:
    """The rows' codes behind the observed value, without a copy where they are held.

    A constant's or shared variable's own array (in its integer type), also behind
    the cast to int64 that the model puts on its data container; anything else is
    evaluated (``eval`` keeps a copy of its output with the compiled function).
    """
    owner = value.owner
    if (
        owner is not None
        and isinstance(owner.op, Elemwise)
        and isinstance(owner.op.scalar_op, Cast)
        and isinstance(owner.inputs[0], (pt.TensorConstant, SharedVariable))
        and owner.inputs[0].dtype.startswith(("int", "uint"))
    ):
        value = owner.inputs[0]
    if isinstance(value, pt.TensorConstant):
        codes = value.data
    elif isinstance(value, SharedVariable):
        codes = value.get_value(borrow=True)
    else:
        codes = value.eval()
    codes = np.asarray(codes)
    return codes if codes.dtype.kind in "iu" else codes.astype(np.int64)


def _model_parts(model):
    """Check ``model`` and return (weights rv, factor rvs, rows' codes, priors)."""
    if model.potentials:
        raise _refuse(f"it has potentials {[p.name for p in model.potentials]}")
    if len(model.observed_RVs) != 1 or model.observed_RVs[0].name != OBSERVED_NAME:
        raise _refuse(
            f"its observed variables are {[v.name for v in model.observed_RVs]}, not "
            f"one {OBSERVED_NAME!r}"
        )
    obs = model.observed_RVs[0]
    if not isinstance(obs.owner.op, LatentClassRows.op_types()):
        raise _refuse(f"{OBSERVED_NAME!r} is not a LatentClassRows variable")
    free = [v for v in obs.owner.inputs if v in model.free_RVs]
    if not free or free[0].name != "weights":
        raise _refuse("its rows do not depend on a free 'weights' variable")
    weights, factors = free[0], free[1:]
    if set(model.free_RVs) != set(free):
        extra = sorted(v.name for v in set(model.free_RVs) - set(free))
        raise _refuse(f"it has other free variables {extra}")
    for rv in free:
        if not isinstance(rv.owner.op, pm.Dirichlet.rv_type):
            raise _refuse(f"{rv.name!r} is not Dirichlet")
        if not rv.name.startswith(_FACTOR_PREFIX) and rv is not weights:
            raise _refuse(f"factor {rv.name!r} is not named A_<variable>")
    w_prior = _constant(weights.owner.op.dist_params(weights.owner)[0])
    a_priors = [_constant(rv.owner.op.dist_params(rv.owner)[0]) for rv in factors]
    n_components = w_prior.shape[-1]
    a_priors = [np.broadcast_to(a, (n_components, a.shape[-1])).copy() for a in a_priors]
    codes = _rows_codes(model.rvs_to_values[obs])
    return (
        weights,
        factors,
        codes,
        np.broadcast_to(w_prior, (n_components,)).copy(),
        a_priors,
    )


#: Rows are collapsed into unique patterns unless fewer than this share of them repeat
#: an earlier row (by a hash; :meth:`LatentClassGibbs._set_rows`).
COLLAPSE_MIN_SHARE = 0.1


def _few_repeats(rows: np.ndarray) -> bool:
    """Whether under ``COLLAPSE_MIN_SHARE`` of ``rows`` repeat another (by a hash)."""
    if rows.shape[0] < 2:
        return True
    # a 64-bit multiplicative hash of each row (wrapping): equal rows, equal keys
    mult = np.random.default_rng(0).integers(1, 2**62, size=rows.shape[1]) | 1
    key = np.zeros(rows.shape[0], dtype=np.uint64)
    for n in range(rows.shape[1]):  # a loop over columns, not rows
        key = key * np.uint64(1_000_003) + (rows[:, n] + 1).astype(np.uint64) * np.uint64(
            mult[n]
        )
    distinct = np.unique(key).size
    return distinct > (1.0 - COLLAPSE_MIN_SHARE) * rows.shape[0]


def _softmax_log(value: np.ndarray) -> np.ndarray:
    """PyMC's ``simplex`` transform, backward, in log space: ``log x`` of a value."""
    full = np.concatenate([value, -value.sum(axis=-1, keepdims=True)], axis=-1)
    top = full.max(axis=-1, keepdims=True)
    return full - top - np.log(np.exp(full - top).sum(axis=-1, keepdims=True))


def _simplex_value(log_x: np.ndarray) -> np.ndarray:
    """PyMC's ``simplex`` transform, forward, from ``log x``: the value."""
    return log_x[..., :-1] - log_x.mean(axis=-1, keepdims=True)


def _stack_logs(log_factors) -> np.ndarray:
    """Per-variable log factors ``(F, I_n)`` stacked as ``(P, F)``, the sweep's layout."""
    return np.vstack([np.asarray(la, dtype=np.float64).T for la in log_factors])


def _simplex_logs(*values):
    return [_softmax_log(np.asarray(v, dtype=np.float64)) for v in values]


def _simplex_values(*log_xs):
    return [_simplex_value(x) for x in log_xs]


def simplex_maps(model, rvs, values):
    """Two maps of the simplexes: values -> their log, and log simplexes -> values.

    Where every variable has PyMC's ``simplex`` transform (what ``sample`` samples
    the Gibbs step in) they are NumPy; otherwise the value transforms' own graphs,
    compiled once (slow, so only where needed).
    """
    from pymc.distributions.transforms import SimplexTransform

    transforms = [model.rvs_to_transforms.get(rv) for rv in rvs]
    if all(type(t) is SimplexTransform for t in transforms):
        return _simplex_logs, _simplex_values
    logs, forwards, log_xs = [], [], []
    for rv, value, transform in zip(rvs, values, transforms, strict=True):
        log_x = pt.tensor(dtype="float64", shape=(None,) * rv.ndim)
        if transform is None:
            logs.append(pt.log(value))
            forwards.append(pt.exp(log_x))
        else:
            logs.append(pt.log(transform.backward(value, *rv.owner.inputs)))
            forwards.append(transform.forward(pt.exp(log_x), *rv.owner.inputs))
        log_xs.append(log_x)
    to_log = pytensor.function(values, logs)
    to_value = pytensor.function(log_xs, forwards)
    # the step passes float64 arrays of the right shapes: skip PyTensor's checks
    to_log.trust_input = True
    to_value.trust_input = True
    return to_log, to_value


def check_overrelax(value) -> float:
    """``value`` as the strength of the overrelaxed Dirichlet updates, or an error.

    A real number in ``[0, 1)``; a boolean is refused (it has no strength).
    """
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not 0.0 <= float(value) < 1.0
    ):
        raise DataValidationError(
            f"'overrelax' must be a strength in [0, 1) (0: fresh Dirichlet draws); got "
            f"{value!r}. Pass e.g. overrelax={DEFAULT_OVERRELAX}."
        )
    return float(value)


def bind_step(step, model, values, vars, rng, threads, refuse, what: str) -> None:
    """Set what a Gibbs step shares: its value variables, generator and threads.

    ``vars`` (if given) must be exactly ``values``: the step updates every ``what`` at
    once, so a subset is refused with ``refuse``'s message.
    """
    if vars is not None:
        given = {model.rvs_to_values.get(v, v) for v in vars}
        if given != set(values):
            raise refuse(
                f"it must update every {what} at once: vars must be "
                f"{[v.name for v in values]}"
            )
    step.vars = values
    step.blocked = True
    step.rng = get_random_generator(rng)
    step.threads = n_cpus() if threads is None else max(1, int(threads))


class LatentClassGibbs(BlockedStep):
    r"""Gibbs step of a latent-class model: class labels drawn, then Dirichlets.

    Each step draws the class of every row given the current weights and factors
    (the rows collapsed into unique patterns with counts where at least
    :data:`COLLAPSE_MIN_SHARE` of them repeat; a pattern's rows get multinomial class
    counts), then :math:`\lambda \sim \mathrm{Dir}(\alpha_\lambda
    + n)` and every class's PMF of every variable
    :math:`A_n(f, :) \sim \mathrm{Dir}(\alpha_A + m_{n,f,:})`; the labels are
    discarded. The Dirichlet updates are overrelaxed (``overrelax``): the current
    weights and factors are moved to the far side of their Dirichlet conditionals
    rather than drawn afresh (:func:`~bayespmf.kernels.gibbs_numba.draw_conjugate`), a
    move that leaves the posterior exactly invariant and shortens the
    autocorrelation of the slow directions, where classes overlap or rows are many
    (:ref:`bench-gibbs-overrelax`). The priors are read from the model (``weights_prior``,
    ``factor_prior``). The draws are written in the model's value coordinates
    (PyMC's ``simplex`` transform in NumPy, any other value transform compiled once),
    so the step works with PyMC's ``simplex`` transform or
    :func:`bayespmf.models.pivot_model`'s. It has no tuning; its random generator is
    the one ``pm.sample`` gives each chain (``random_seed``).

    Parameters
    ----------
    vars : list, optional
        The value variables (default: all of the model's, which must be ``weights``
        and every ``A_<name>``).
    model : pymc.Model, optional
        A model from :func:`bayespmf.models.latent_class_model` (no covariates, no
        potentials, no other free variables); default: the model in context.
    threads : int, optional
        Threads over blocks of rows in the label draw (default: the CPUs this
        process may use). The draws do not depend on it.
    rng : numpy.random.Generator or int, optional
    n_sweeps : int, optional
        Gibbs sweeps per recorded draw (default :func:`default_sweeps` of the data's
        observed entries: :data:`DEFAULT_SWEEPS` = 8 on small data such as UCI Car,
        fewer from 12,500 entries on, one from :data:`SWEEP_ENTRIES` on; read when the
        step is made; ``sample(..., method="gibbs", n_sweeps=k)`` passes it). The value
        variables are converted once per draw, and ``pm.sample``'s own cost per draw
        is paid once per ``n_sweeps`` sweeps; on UCI Car the effective samples per
        second peak near the default and fall off on either side
        (:ref:`bench-gibbs-sweeps`). A step of ``n_sweeps`` sweeps makes the same
        chain as ``n_sweeps`` steps of one sweep with the same generator. Where classes
        overlap, bulk ESS grows with the sweeps, not the recorded draws: raise
        ``n_sweeps`` there rather than ``draws``.
    overrelax : float, default :data:`DEFAULT_OVERRELAX`
        Strength :math:`\rho` in ``[0, 1)`` of the overrelaxation of the weights and
        factors (Adler's, made exact by a Metropolis-Hastings test that nearly always
        accepts; :func:`~bayespmf.kernels.gibbs_numba.reflect_log_gamma`). In the
        slow directions of the data augmentation it turns an autoregression
        :math:`r` per sweep into about :math:`r - \rho(1 - r)`;
        where the data pin a value down it keeps a correlation of about
        :math:`-\rho` whose size the chain forgets only as fast as
        :math:`\rho^2` allows, hence a strength below 1. ``0`` gives the plain
        data-augmentation sampler. The first :data:`PLAIN_TUNE_SWEEPS` sweeps of a
        burn-in (``pm.sample``'s ``tune``) draw afresh, so that a start far from
        the posterior is forgotten at once.

    Raises
    ------
    DataValidationError
        The model is not a plain latent-class model, ``n_sweeps`` is not a
        positive integer, or ``overrelax`` is not a number in ``[0, 1)``.

    Examples
    --------
    >>> import pymc as pm
    >>> from bayespmf.models import latent_class_model
    >>> model = latent_class_model(np.array([[0, 1], [1, 0], [1, 1]]), 2,
    ...                            n_categories=[2, 2])
    >>> with model:
    ...     idata = pm.sample(draws=20, tune=0, chains=1, step=LatentClassGibbs(),
    ...                       random_seed=0, progressbar=False,
    ...                       compute_convergence_checks=False)
    >>> idata.posterior["weights"].shape
    (1, 20, 2)
    """

    name = "latent_class_gibbs"
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
        overrelax: float = DEFAULT_OVERRELAX,
        blocked=True,
    ):
        if n_sweeps is not None and (
            isinstance(n_sweeps, bool)
            or not isinstance(n_sweeps, (int, np.integer))
            or n_sweeps < 1
        ):
            raise DataValidationError(
                f"'n_sweeps' must be a positive integer (Gibbs sweeps per draw); got "
                f"{n_sweeps!r}. Pass e.g. n_sweeps=1."
            )
        self.overrelax = check_overrelax(overrelax)
        self._plain_left = 0
        model = modelcontext(model)
        weights, factors, codes, w_prior, a_priors = _model_parts(model)
        rvs = [weights, *factors]
        values = [model.rvs_to_values[rv] for rv in rvs]
        bind_step(self, model, values, vars, rng, threads, _refuse, "simplex")
        n_cat = [int(a.shape[-1]) for a in a_priors]
        self._n_cat = n_cat
        self._set_rows(codes)
        if n_sweeps is None:
            n_sweeps = default_sweeps(self.n_entries)
        self.n_sweeps = int(n_sweeps)
        self._offsets = np.concatenate([[0], np.cumsum(n_cat)])
        self._w_prior = w_prior
        self._a_prior = np.ascontiguousarray(np.vstack([a.T for a in a_priors]))
        self._names = [v.name for v in values]
        self.rv_names = [rv.name for rv in rvs]
        self._to_log, self._to_value = simplex_maps(model, rvs, values)

    @property
    def n_entries(self) -> int:
        """The observed entries one sweep visits (the size of the rows' CSR)."""
        return int(self._indices.size)

    def _set_rows(self, codes):
        """Collapse the rows' codes (-1 missing) into patterns with counts, as CSR.

        Where a hash of the rows finds at most ``1 - COLLAPSE_MIN_SHARE`` of them
        repeated, the rows stay as they are (counts 1): sorting them would cost
        seconds and copies of the data at 1e6 rows for a sweep barely shorter. A
        hash collision can only make the step collapse rows; either way it is exact.
        """
        keep = (codes >= 0).any(axis=1)
        rows = codes if keep.all() else codes[keep]
        if _few_repeats(rows):
            self._indptr, self._indices = observed_csr(
                rows, self._n_cat, index_dtype=index_dtype(self._n_cat)
            )
            self._row_count = np.ones(rows.shape[0], dtype=np.int64)
            return
        patterns, counts = np.unique(rows, axis=0, return_counts=True)
        self._indptr, self._indices = observed_csr(
            patterns, self._n_cat, index_dtype=index_dtype(self._n_cat)
        )
        self._row_count = counts.astype(np.int64)

    @staticmethod
    def competence(var, has_grad):  # noqa: D102 - never assigned automatically
        from pymc.step_methods.compound import Competence

        return Competence.INCOMPATIBLE

    def reset_tuning(self):
        """At the start of a chain: fresh draws for the first sweeps of a burn-in."""
        self._plain_left = PLAIN_TUNE_SWEEPS if getattr(self, "tune", False) else 0

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        """Before a chain: its generator, and fresh first sweeps of a burn-in.

        ``pm.sample``'s chain processes call this rather than :meth:`reset_tuning`.
        """
        super().setup_chain(rng, tune, draws)
        self._plain_left = PLAIN_TUNE_SWEEPS if tune > 0 else 0

    def stop_tuning(self):
        """At the end of the burn-in: every further sweep is overrelaxed."""
        super().stop_tuning()
        self._plain_left = 0

    def point_logs(self, point) -> tuple[np.ndarray, np.ndarray]:
        """The log weights ``(F,)`` and stacked log factors ``(P, F)`` of a point.

        ``point`` maps the value variables' names to their (transformed) values, as
        ``pm.sample`` passes them to :meth:`step`.
        """
        log_w, *log_factors = self._to_log(*[point[n] for n in self._names])
        return np.array(log_w, dtype=np.float64), _stack_logs(log_factors)

    def value_logs(self, values: dict) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`point_logs` of constrained values (``{rv name: simplex}``).

        Each simplex is normalized in log space, as PyMC's ``simplex`` transform
        reads it; an entry at 0 is kept at the smallest normal double.
        """
        tiny = np.exp(_LOG_TINY)
        log_w, *log_factors = (
            np.maximum(
                log_softmax(np.log(np.maximum(np.asarray(values[n], float), tiny)), -1),
                _LOG_TINY,
            )
            for n in self.rv_names
        )
        return log_w, _stack_logs(log_factors)

    def sweeps(self, log_w, log_a) -> tuple[np.ndarray, np.ndarray]:
        """``n_sweeps`` Gibbs sweeps from log weights and stacked log factors.

        The state of :meth:`step` without the value transforms: labels drawn and
        discarded, the Dirichlets drawn (overrelaxed past the first sweeps of a
        burn-in). Returns the new ``(log_w, log_a)``; the arguments are not changed.
        """
        rng, offsets = self.rng, self._offsets
        for _ in range(self.n_sweeps):
            strength = 0.0 if self._plain_left > 0 else self.overrelax
            self._plain_left = max(0, self._plain_left - 1)
            totals, counts = draw_class_counts(
                log_w,
                log_a,
                self._indptr,
                self._indices,
                self._row_count,
                rng,
                threads=self.threads,
            )
            log_w, log_a = draw_conjugate(
                self._w_prior + totals,
                self._a_prior + counts,
                offsets,
                rng,
                previous=(log_w, log_a) if strength else None,
                strength=strength,
            )
            # a probability below the smallest normal double is kept at that value,
            # so that the value transforms never see log(0)
            np.maximum(log_w, _LOG_TINY, out=log_w)
            np.maximum(log_a, _LOG_TINY, out=log_a)
        return log_w, log_a

    def factor_parts(self, log_a) -> list[np.ndarray]:
        """The stacked log factors ``(P, F)`` split per variable, ``(F, I_n)`` each."""
        offsets = self._offsets
        return [
            np.ascontiguousarray(log_a[offsets[n] : offsets[n + 1]].T)
            for n in range(offsets.size - 1)
        ]

    def step(self, point):
        """``n_sweeps`` Gibbs sweeps from ``point``: labels drawn and discarded."""
        log_w, log_a = self.sweeps(*self.point_logs(point))
        parts = self.factor_parts(log_a)
        out = point.copy()
        for name, value in zip(self._names, self._to_value(log_w, *parts), strict=True):
            out[name] = np.asarray(value, dtype=point[name].dtype)
        return out, [{}]
