"""The posterior's front door: :func:`sample` for every bayespmf model family.

Each family (latent class, latent-class regression, simplex nest) is one
:class:`~bayespmf.models._families.Family` record in :data:`FAMILIES` (the
latent-class one is defined here: a point estimate bound by name to the model as the
chains' start, the pivot coordinates, label alignment); :func:`sample` runs them all
through one path (:func:`bayespmf.models._families.sample_family`). Reading,
predicting from and diagnosing the draws live in :mod:`bayespmf.models.predict` and
:mod:`bayespmf.models.diagnostics`; the names re-exported below keep
``bayespmf.models.posterior.<name>`` working for one release.
"""

from __future__ import annotations

import json

import xarray as xr

from bayespmf._validation import DataValidationError
from bayespmf.models._binding import initvals_from_params, optima_starts
from bayespmf.models._draws import posterior_params
from bayespmf.models._families import Family, sample_family
from bayespmf.models._labels import align_labels
from bayespmf.models._pivot import (
    drop_logratios,
    fused_pivot_model,
    logratio_initvals,
    pivot_model,
    pivot_transforms,
    pivots,
)
from bayespmf.models._sampling import SAMPLING_METHODS
from bayespmf.models.diagnostics import convergence_summary
from bayespmf.models.latent_class import (
    DATA_NAME,
    OBSERVED_NAME,
    latent_class_model,
    model_data,
)
from bayespmf.models.predict import impute, posterior_class_proba, posterior_predict_proba
from bayespmf.models.regression import REGRESSION
from bayespmf.models.simplex_nest import SIMPLEX_NEST

__all__ = [
    "FAMILIES",
    "MODEL_FAMILIES",
    "SIMPLEX_TRANSFORMS",
    "family_of",
    "model_family",
    "sample",
    # re-exported from their own modules (see the module docstring)
    "align_labels",
    "convergence_summary",
    "impute",
    "initvals_from_params",
    "pivot_model",
    "posterior_class_proba",
    "posterior_params",
    "posterior_predict_proba",
]

#: The ``simplex_transform`` options of :func:`sample`.
SIMPLEX_TRANSFORMS = ("pivot", "pymc")


def sample(
    model_or_data,
    *,
    n_components: int | None = None,
    init="auto",
    method: str = "nuts",
    nuts_sampler: str = "pymc",
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    random_seed=None,
    progressbar: bool = True,
    align: bool = True,
    log_likelihood: bool | str = "auto",
    advi_iterations: int = 20000,
    simplex_transform: str | None = None,
    **sample_kwargs,
):
    """Draw from the posterior of a bayespmf model by NUTS or ADVI: the one front door.

    Every model family goes through here with the same options: a latent-class model
    (:func:`latent_class_model`), a latent-class regression
    (``latent_class_model(..., covariates=z)`` or
    :func:`~bayespmf.models.regression.latent_class_regression_model`) and a
    Dirichlet simplex nest (:func:`~bayespmf.models.simplex_nest.simplex_nest_model`);
    :func:`~bayespmf.models.regression.sample_regression` and
    :func:`~bayespmf.models.simplex_nest.sample_simplex_nest` are aliases of this
    function, kept for one release. An option a family does not have (ADVI and
    ``simplex_transform`` for the regression; ``"gibbs"`` and ``simplex_transform``
    for the simplex nest) is refused, never ignored.

    Parameters
    ----------
    model_or_data : pymc.Model or CategoricalData
        A model of one of the families above, or latent-class data (then ``n_components`` is
        required and the model is built with default priors).
    n_components : int, optional
        Number of classes when data are given.
    init : "auto", "optima", LatentClassPMF, (weights, factors), dict or None
        Start every chain at this point estimate (jittered per chain on the log scale
        of the simplex). ``"auto"`` (default) fits the maximum-likelihood estimate
        first (``LatentClassPMF(rank, random_state=random_seed)``: many starts, the
        best kept) and starts every chain at its best optimum. ``"optima"`` fits the
        same estimate and starts the chains at its *distinct* optima within
        ``OPTIMA_WINDOW`` log-likelihood units of the best, in turn (chain ``c`` at
        optimum ``c mod k``; a fitted LatentClassPMF may be passed as
        ``("optima", estimator)``): when the posterior has several modes the chains
        then disagree, and :func:`convergence_summary` says which chains sit where;
        ``idata.posterior.attrs["chain_start_optimum"]`` records the starts. ``None``
        uses PyMC's default initialization, whose chains can settle in different modes
        where chains started at a point estimate agree (see
        :ref:`bench-default-init`).
    method : {"nuts", "advi", "gibbs"}
        ``"gibbs"`` (latent-class models, with or without covariates; see the end
        of this entry for the covariates): the conjugate Gibbs step
        :class:`~bayespmf.models.gibbs.LatentClassGibbs` (class labels drawn per row
        and discarded, then the Dirichlet conditionals; ``draws``, ``tune``,
        ``chains`` as for NUTS, ``tune`` draws discarded as burn-in, the same start,
        alignment and groups). It needs no gradient and no adaptation, and one step
        costs one pass over the observed entries (NUTS: one per leapfrog step, tens
        per draw), so prefer it on large data and where NUTS mixes slowly, as with
        weakly separated classes; where NUTS mixes well the two are about level
        (:ref:`bench-gibbs-vs-nuts`). Each recorded draw is ``n_sweeps`` Gibbs
        sweeps (a keyword of this function with ``method="gibbs"``; by default
        :func:`bayespmf.models.gibbs.default_sweeps`: 8 on Car, fewer as the observed
        entries grow, 1 from 1e5 entries on), so ``pm.sample``'s per-draw cost
        is spread over them where a sweep is cheap (:ref:`bench-gibbs-sweeps`).
        ``simplex_transform`` does not apply (the draws are the same in any
        coordinates). For a latent-class regression each draw is ``n_sweeps``
        Gibbs sweeps of the factors (every row's labels drawn with its own prior
        ``softmax(z beta)``; default
        :data:`bayespmf.models.gibbs_regression.DEFAULT_FACTOR_SWEEPS` = 4) and one
        NUTS step of the coefficients, tuned during ``tune``
        (:func:`bayespmf.models.gibbs_regression.gibbs_steps`), which mixes faster
        per second than NUTS on every variable (:ref:`bench-gibbs-regression`).
        For a model with a distal outcome (``latent_class_model(..., outcome=y,
        outcome_family=...)``, every family, with or without covariates) each sweep
        of :class:`~bayespmf.models.gibbs_distal.OutcomeGibbs` draws every row's class
        given its indicators and its outcome, then the weights and factors (Dirichlet)
        and the outcome's parameters from their conditionals given the classes: Beta
        (bernoulli), Gamma (poisson), Dirichlet (categorical); gaussian, the class
        means given the standard deviations (Normal), then each variance given its
        mean by an exact draw of its generalized inverse Gaussian conditional. With
        covariates the coefficients get one NUTS step per draw, as above. The
        outcome's parameters are aligned with the classes, and the groups are NUTS's
        (``log_likelihood`` holds ``x`` and ``y``).
    nuts_sampler : {"pymc", "nutpie", "numpyro", "blackjax"}, default "pymc"
        The NUTS implementation (the last three need ``pip install
        'bayespmf[samplers]'``). Every one starts chain ``c`` exactly at its start
        (nutpie: one single-chain run per start, run side by side; numpyro/blackjax:
        PyMC's jitter switched off); the draws are aligned the same way. numpyro and
        blackjax run through PyMC's JAX driver, which replaces the ``rows`` data by a
        constant of the compiled XLA program (``pymc.sampling.jax``), so the data are
        baked into the program there (as integer codes that the log-likelihood's
        gather reads); nutpie and PyMC compile the frozen model, whose likelihood is
        one fused numba loop over the observed entries. numpyro and blackjax run the
        chains in parallel, one CPU device each, when JAX starts inside this call
        (otherwise vectorized on one device, which is much slower); numpyro
        was the fastest NUTS on larger data (:ref:`bench-jax`).
    draws, tune, chains : int
        For NUTS; for ADVI ``draws`` samples are taken from the fitted approximation
        (one chain) after ``advi_iterations`` optimization steps.
    random_seed : int, sequence of int or numpy.random.Generator, optional
        Checked before any work: anything NumPy cannot seed with (a string, a float,
        a negative int) is a ``ValueError`` naming ``random_seed``.
    align : bool, default True
        Relabel classes draw by draw (see :func:`align_labels`) against the point
        estimate (``init``, or a CNMF-SPA-EM fit when ``init`` is None).
    log_likelihood : bool or "auto", default "auto"
        Add a ``log_likelihood`` group with the per-row log-likelihood of the
        observed rows ``x`` (``pm.compute_log_likelihood``; for ``az.loo``).
        ``"auto"`` adds it when it holds at most 1 GiB (chains x draws x rows,
        float64) and otherwise skips it with a warning that gives the
        size (at 1e6 rows, 4 x 1000 draws: 32 GB); ``True`` always adds it.
    simplex_transform : {"pivot", "pymc"}, optional
        Latent-class models only; the default is ``"pivot"``.
        The unconstrained coordinates the sampler moves in (the model, and so the
        posterior, are the same either way). ``"pivot"``: every simplex row (the
        weights, each class's PMF of each variable) as log-ratios to its entry that
        is largest at the point estimate (:func:`pivot_model`,
        :class:`~bayespmf.models.latent_class.PivotLogRatio`); ``"pymc"``: PyMC's
        default ``simplex`` transform. ``"pivot"`` needs a point estimate and falls
        back to ``"pymc"`` with ``init=None``. Where some conditional probabilities
        are near 0 it cuts the leapfrog steps per draw and raises the effective
        samples per second of PyMC's and numpyro's NUTS (:ref:`bench-pivot`). With
        PyMC's NUTS, nutpie and ADVI the pivot coordinates of all the simplexes are
        one free vector (``simplex_logratios``, dropped from the draws) and one fused
        Op for their log-probabilities, priors and Jacobians
        (``bayespmf.models._pivot``; the same log-density and gradient, to rounding):
        the graph PyTensor's numba backend compiles for a model shrinks from 160
        nodes to 17 (UCI Car, rank 4), so the first model and every further one
        (another rank) compile several times faster (:ref:`bench-pivot`). numpyro
        and blackjax (JAX has no numba) keep the value transforms.
    **sample_kwargs
        Passed to ``pm.sample`` (e.g. ``target_accept``; PyMC's 0.8 is kept: with
        the pivot transform 0.9 took as many leapfrog steps per draw for less bulk
        ESS, while 0.8 can leave a few divergences (:ref:`bench-pivot`);
        pass 0.9 when divergences must be zero); see
        :func:`bayespmf.models._sampling.run_sampler` for the defaults of ``init``
        and ``cores``.

    Returns
    -------
    xarray.DataTree
        ``posterior`` (aligned), the model's rows as ``observed_data["x"]`` and
        ``constant_data["rows"]``; ``posterior.attrs`` record the wall time
        (``sampling_time``) and the method. A latent-class model (with or without
        covariates) is sampled with its data frozen (``freeze_dims_and_data``): the
        rows are constants of static shape while sampling; the model passed in is
        unchanged. A simplex nest is sampled as built: its data are constants
        already, and freezing would only reorder its free variables (other draws for
        the same seed) and was no faster (:ref:`bench-frozen-data`). The JAX
        backends get static shapes
        either way (PyMC's JAX driver replaces the shared dimension lengths by
        constants).
    """
    import pymc as pm

    if isinstance(model_or_data, pm.Model):
        model = model_or_data
    else:
        if n_components is None:
            raise DataValidationError(
                "'n_components' is required when data (not a model) are given."
            )
        model = latent_class_model(model_or_data, n_components)
    return sample_family(
        family_of(model),
        model,
        owner="sample",
        init=init,
        method=method,
        nuts_sampler=nuts_sampler,
        draws=draws,
        tune=tune,
        chains=chains,
        random_seed=random_seed,
        progressbar=progressbar,
        align=align,
        log_likelihood=log_likelihood,
        advi_iterations=advi_iterations,
        simplex_transform=simplex_transform,
        **sample_kwargs,
    )


# ------------------------------------------------------------ the latent-class family


def _lc_estimate(model, random_seed):
    from bayespmf.estimators import LatentClassPMF

    data, n_components = model_data(model)
    return LatentClassPMF(n_components, random_state=random_seed).fit(data)


def _lc_initvals(model, point, chains, jitter, rng):
    return initvals_from_params(model, point, chains=chains, jitter=jitter, random_seed=rng)


def _lc_rewrite(model, point, initvals, method, nuts_sampler, simplex_transform):
    """Freeze the rows; the pivot coordinates (one fused Op where numba compiles)."""
    from pymc.model.transform.optimization import freeze_dims_and_data

    # the rows are fixed while sampling: frozen, they are constants of static shape
    frozen = freeze_dims_and_data(model)
    if simplex_transform != "pivot" or point is None or method == "gibbs":
        return frozen, initvals, None
    at = pivots(frozen, point)
    if method == "advi" or nuts_sampler in ("pymc", "nutpie"):
        # numba (or C) compiles it: every simplex in one fused Op, far less to compile
        fused = fused_pivot_model(frozen, model_data(model)[0].codes, *at)
        if fused is not None:
            return fused, logratio_initvals(fused, initvals), drop_logratios
    # JAX cannot run the numba Op: the same coordinates as value transforms
    return pivot_transforms(frozen, *at), initvals, None


def _lc_finish(idata, model, point, starts, align, random_seed):
    data, _ = model_data(model)
    idata.posterior.attrs["bayespmf_variables"] = json.dumps(list(data.names))
    if starts is not None:
        n_chains = idata.posterior.sizes["chain"]
        idata.posterior.attrs["chain_start_optimum"] = [
            c % len(starts) for c in range(n_chains)
        ]
        idata.posterior.attrs["start_optima_loglik"] = [
            float(v) for v in point.optima_["loglik"].iloc[: len(starts)]
        ]
    if align:
        if point is None:
            point = _lc_estimate(model, random_seed)
        idata = align_labels(idata, point, data)
    _add_data_groups(idata, model)
    return idata


#: The latent-class family (the default: a model that is none of the others).
LATENT_CLASS = Family(
    name="latent_class",
    detect=lambda model: True,
    methods=SAMPLING_METHODS,
    method_error="'method' must be 'nuts', 'advi' or 'gibbs'",
    estimate=_lc_estimate,
    point=lambda model, init, random_seed: init,
    initvals=_lc_initvals,
    rewrite=_lc_rewrite,
    finish=_lc_finish,
    init_modes=("auto", "optima"),
    optima=optima_starts,
    simplex_transforms=SIMPLEX_TRANSFORMS,
)

#: The model families :func:`sample` runs, in the order they are recognized.
FAMILIES = (SIMPLEX_NEST, REGRESSION, LATENT_CLASS)

#: Their names (see :func:`model_family`).
MODEL_FAMILIES = tuple(f.name for f in reversed(FAMILIES))


def family_of(model) -> Family:
    """The :class:`~bayespmf.models._families.Family` record of a bayespmf PyMC model.

    Examples
    --------
    >>> from bayespmf.data import CategoricalData
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> family_of(latent_class_model(data, n_components=2)).methods
    ('nuts', 'advi', 'gibbs')
    """
    return next(f for f in FAMILIES if f.detect(model))


def model_family(model) -> str:
    """Which of :data:`MODEL_FAMILIES` a bayespmf PyMC model belongs to.

    Examples
    --------
    >>> from bayespmf.data import CategoricalData
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> model_family(latent_class_model(data, n_components=2))
    'latent_class'
    """
    return family_of(model).name


def _add_data_groups(idata, model) -> None:
    """The rows as ``observed_data``/``constant_data`` where the sampler left them out.

    (A frozen model has no data container, so ``pm.sample`` records no
    ``constant_data``; ADVI's draws carry neither.)
    """
    codes = model[DATA_NAME].get_value()
    # model coordinates are tuples, which xarray would read as (dims, data)
    coords = {d: list(model.coords[d]) for d in ("row", "variable")}
    for group, var in (("observed_data", OBSERVED_NAME), ("constant_data", DATA_NAME)):
        if group not in idata.children:
            idata[group] = xr.Dataset({var: (("row", "variable"), codes)}, coords=coords)
        elif var not in idata[group]:
            ds = idata[group].to_dataset()
            ds[var] = (("row", "variable"), codes)
            idata[group] = ds.assign_coords(coords)
