"""The posterior's front door: :func:`sample`, :func:`initvals` and :func:`align_labels`.

Each family (latent class, latent-class regression, simplex nest) is one
:class:`~bayespmf.models._families.Family` record in :data:`FAMILIES` (the
latent-class one is defined here: a point estimate bound by name to the model as the
chains' start, the pivot coordinates, label alignment); :func:`sample` runs them all
through one path (:func:`bayespmf.models._families.sample_family`), and
:func:`initvals` (the chains' starts) and :func:`align_labels` (label switching) run
the family's own start builder and alignment. Reading, predicting from and diagnosing
the draws live in :mod:`bayespmf.models.predict` and
:mod:`bayespmf.models.diagnostics`.
"""

from __future__ import annotations

import json

import numpy as np
import pymc as pm
import xarray as xr

from bayespmf._chunked import chunked_sampler
from bayespmf._validation import DataValidationError, check_int
from bayespmf.data import CategoricalData
from bayespmf.models._alignment import apply_permutations, hungarian_permutations
from bayespmf.models._binding import optima_starts, params_of
from bayespmf.models._draws import variable_names
from bayespmf.models._families import (
    DEFAULT_DRAWS,
    DEFAULT_TUNE,
    Family,
    sample_family,
)
from bayespmf.models._pivot import (
    drop_logratios,
    fused_pivot_model,
    logratio_initvals,
    pivot_transforms,
    pivots,
)
from bayespmf.models._sampling import SAMPLING_METHODS
from bayespmf.models._start import check_jitter, jitter_simplex, start_rng
from bayespmf.models.latent_class import (
    DATA_NAME,
    OBSERVED_NAME,
    factor_var_name,
    latent_class_model,
    model_data,
)
from bayespmf.models.regression import REGRESSION
from bayespmf.models.simplex_nest import SIMPLEX_NEST

__all__ = [
    "FAMILIES",
    "MODEL_FAMILIES",
    "SIMPLEX_TRANSFORMS",
    "START_SUBSAMPLE_ROWS",
    "align_labels",
    "family_of",
    "initvals",
    "model_family",
    "sample",
    "subsample_start",
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
    draws: int | None = None,
    tune: int | None = None,
    chains: int = 4,
    random_seed=None,
    progressbar: bool = True,
    align: bool = True,
    log_likelihood: bool | str = "auto",
    advi_iterations: int = 20000,
    simplex_transform: str | None = None,
    jitter: float | None = None,
    target_ess: float | None = None,
    target_rhat: float | None = None,
    max_time: float | None = None,
    **sample_kwargs,
):
    """Draw from the posterior of a bayespmf model (NUTS, Gibbs or ADVI): the front door.

    Every model family goes through here with the same options: a latent-class model
    (:func:`latent_class_model`), a latent-class regression
    (``latent_class_model(..., covariates=z)`` or
    :func:`~bayespmf.models.regression.latent_class_regression_model`) and a
    Dirichlet simplex nest (:func:`~bayespmf.models.simplex_nest.simplex_nest_model`).
    An option a family does not have (ADVI and ``simplex_transform`` for the
    regression; ``"gibbs"`` and ``simplex_transform`` for the simplex nest) is
    refused, never ignored.

    Parameters
    ----------
    model_or_data : pymc.Model, CategoricalData or DaskCategoricalData
        A model of one of the families above, or latent-class data (then
        ``n_components`` is required and the model is built with default priors).
        Chunked data (:class:`bayespmf.dask.DaskCategoricalData`) are sampled with
        ``method="gibbs"`` by :func:`bayespmf.dask.sample_gibbs`, which never holds the
        rows in memory: ``init`` is ``"auto"`` (a distributed fit) or a point
        estimate; its options ``n_sweeps``, ``overrelax``, ``weights_prior``,
        ``factor_prior``, ``threads``, ``client``, ``split_every`` and ``persist``
        pass through ``**sample_kwargs``; the result has the same ``posterior`` (and
        ``unaligned_posterior``) as a model's, without ``log_likelihood`` and
        ``observed_data`` (their size is the rows').
    n_components : int, optional
        Number of classes when data are given.
    init : "auto", "optima", LatentClassPMF, (weights, factors), dict or None
        Start every chain at this point estimate (jittered per chain by ``jitter`` on
        the log scale of the simplex: the starts :func:`initvals` builds). For a
        regression: ``"auto"``, a LatentClassRegression, ``(coef, factors)`` or a dict;
        for a simplex nest: ``"auto"``, a fitted VLAD, GDM or SimplexSPA or a dict with
        ``vertices``; ``None`` fits their estimate as ``"auto"`` does. For a
        latent-class model, ``"auto"`` (default) fits the maximum-likelihood estimate
        first (``LatentClassPMF(rank, random_state=random_seed)``: many starts, the
        best kept) and starts every chain at its best optimum; above
        ``START_SUBSAMPLE_ROWS`` (20,000) rows it fits a random subsample of that
        many rows (30 starts) and refines that estimate on every row by SQUAREM-PMF
        (:func:`~bayespmf.models.posterior.subsample_start`: seconds where the fit of
        every row from hundreds of starts took minutes; ``"optima"`` then reads the
        subsample's optima), and ``posterior.attrs`` record it
        (``start_subsample_rows``, ``start_refine_iter``, ``start_refine_converged``,
        their seconds); ``posterior.attrs["start_time"]`` is the seconds of the
        start, every ``init``. ``"optima"`` fits the
        same estimate and starts the chains at its *distinct* optima within
        ``OPTIMA_WINDOW`` log-likelihood units of the best, in turn (chain ``c`` at
        optimum ``c mod k``; a fitted LatentClassPMF may be passed as
        ``("optima", estimator)``): when the posterior has several modes the chains
        then disagree, and :func:`convergence_summary` says which chains sit where;
        ``idata.posterior.attrs["chain_start_optimum"]`` records the starts. ``None``
        uses PyMC's default initialization, whose chains can settle in different modes
        where chains started at a point estimate agree (see
        :ref:`bench-default-init`).
    jitter : float >= 0, optional
        Standard deviation of each chain's jitter of its start, on the log scale of
        every simplex and positive value (``x * exp(jitter * z)``, renormalized), for
        the regression's coefficients additive, for a Gaussian simplex nest's vertices
        in units of each feature's data sd: every family the same way
        (:func:`initvals`). ``None`` (default): ``INIT_JITTER`` (0.05, every family);
        0 starts every chain at the point estimate itself. Refused with ``init=None``
        on a latent-class model (PyMC then initializes the chains, nothing is
        jittered).
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
        The weights and factors are overrelaxed rather than drawn afresh
        (``overrelax``, a keyword of this function with ``method="gibbs"``: a
        strength in ``[0, 1)``, default
        :data:`bayespmf.models.gibbs.DEFAULT_OVERRELAX`, 0 for fresh draws; an exact
        move that shortens the autocorrelation where classes overlap or rows are
        many, :ref:`bench-gibbs-overrelax`).
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
        was the fastest NUTS on larger data (:ref:`bench-jax`). ``jax_data``
        (numpyro only, a keyword of this function): ``"constant"`` as above;
        ``"argument"`` compiles the log-density with the rows as an argument and runs
        the warm-up and the draws as one jitted program (no per-draw progress bar),
        with the likelihood as a product of the rows' one-hot design and the
        log-factors where JAX's default device is an accelerator (a gather's
        gradient is a scatter-add, which a GPU runs as contended atomic additions);
        ``"auto"`` (default) is ``"argument"`` on an accelerator and ``"constant"``
        on a CPU (:ref:`bench-gpu`); ``posterior.attrs["jax_data"]`` records it.
    draws, tune, chains : int
        For NUTS; for ADVI ``draws`` samples are taken from the fitted approximation
        (one chain) after ``advi_iterations`` optimization steps. ``draws`` and
        ``tune`` not given: 1000 each, except with ``method="gibbs"`` on a
        latent-class model without covariates (at least 2 chains, no
        ``var_names``), which then samples **to a target by default**:
        ``target_ess`` 400 (``DEFAULT_TARGET_ESS``), ``target_rhat`` 1.01 and
        ``max_time`` ``DEFAULT_MAX_TIME`` (ten minutes) unless given, a first batch of
        200 draws after a burn-in of 200 (``TARGET_FIRST_DRAWS``, ``TARGET_TUNE``),
        each draw :func:`bayespmf.models.gibbs.target_sweeps` sweeps (thinned: 64
        on small data, 1 from 1e6 observed entries on) unless ``n_sweeps`` is
        given; see ``target_ess`` for the batches, the attrs and the
        ``ConvergenceWarning`` where ``max_time`` comes first. Pass ``draws`` for
        a run of fixed length (``tune`` then 1000 unless given).
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
    target_ess : float > 0, optional
        Sample to a target instead of a length (``method="gibbs"`` on a latent-class
        model without covariates, at least 2 chains): ``draws`` (after ``tune``) is
        the first batch, and further batches continue every chain from its last
        draw, with no tuning and the same step, until the worst r-hat is at most
        ``target_rhat`` and the smallest bulk ESS at least ``target_ess`` on every
        entry of the posterior (the weights and factors, and an outcome's
        parameters), or until ``max_time``. The target is judged on the draws as
        returned (aligned when ``align``): the ``r_hat_max`` and ``ess_bulk_min`` of
        :func:`~bayespmf.models.convergence_summary`. Between batches a cheaper
        check aligns the new draws to the mean of those before and computes the
        entries that were near or short of the target (within a factor 2); where
        it finds the target met, every draw is aligned again as a plain run's are and
        every entry judged, and the batches go on where that misses. A further batch
        is as long as the draws so far, shorter (at least an eighth of them) where
        the ESS per draw so far says fewer will reach the target, and shorter still
        where ``max_time`` leaves less time (sized by the speed of the batch before).
        The result holds every batch's draws joined per chain (``posterior``,
        ``unaligned_posterior``, ``sample_stats`` and ``log_likelihood`` alike);
        ``posterior.attrs`` record ``target_ess``, ``target_rhat``,
        ``target_max_time`` (when given), ``target_reached`` (1 or 0: netCDF files
        hold no booleans, so that the result can be written), the worst r-hat and
        smallest ESS of the result (``target_rhat_max``, ``target_ess_bulk_min``),
        the draws of each batch (``target_batches``), its seconds, sampling and
        check (``target_batch_seconds``), and its check's (``target_check_seconds``,
        the last with the alignment and judgement of every draw), the sampler's
        seconds over all batches (``sampling_time``) and the seconds since the call
        began, point estimate included (``total_time``). Where the target is not
        reached a :class:`~bayespmf.ConvergenceWarning` gives the r-hat and ESS
        reached, the draws and the seconds. The Gibbs step has no adaptation and no
        state but the point, so a batch continues each chain exactly (its random
        stream seeded from ``random_seed`` and the batch's number: one seed
        reproduces the whole run). Refused for NUTS: PyMC 6 resets a NUTS step's
        step size and mass matrix at the start of every chain and adapts them in the
        chain processes, which do not return them, so a chain cannot be continued
        with its adaptation; for the same reason for a latent-class regression (its
        Gibbs step draws the coefficients by NUTS); for ADVI (no chains); and for
        chunked data.
    target_rhat : float > 1, optional
        With ``target_ess``: the worst r-hat to reach (default
        ``DEFAULT_TARGET_RHAT``, 1.01).
    max_time : float > 0, optional
        With ``target_ess``: seconds since the call began (the point estimate
        included) after which no further batch starts; the batches are checked
        between them, so the first batch always runs in full and the call may end
        later by the last batch's start-up. ``None`` (default): no limit, which runs
        until the target is reached, and forever where chains sit in different
        modes: set it where that can happen.
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
        (``sampling_time``) and the method (and the target's outcome with
        ``target_ess``). A latent-class model (with or without
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

    if chunked_sampler(model_or_data) is not None:
        return _sample_chunked(
            model_or_data,
            n_components=n_components,
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
            simplex_transform=simplex_transform,
            jitter=jitter,
            target=(target_ess, target_rhat, max_time),
            **sample_kwargs,
        )
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
        jitter=jitter,
        target_ess=target_ess,
        target_rhat=target_rhat,
        max_time=max_time,
        **sample_kwargs,
    )


#: The options of :func:`bayespmf.dask.sample_gibbs` that :func:`sample` passes on.
CHUNKED_OPTIONS = (
    "n_sweeps",
    "overrelax",
    "weights_prior",
    "factor_prior",
    "threads",
    "client",
    "split_every",
    "persist",
)


def _sample_chunked(
    ddata,
    *,
    n_components,
    init,
    method,
    nuts_sampler,
    draws,
    tune,
    chains,
    random_seed,
    progressbar,
    align,
    log_likelihood,
    simplex_transform,
    jitter,
    target,
    **options,
):
    """:func:`sample` on chunked data: :func:`bayespmf.dask.sample_gibbs`."""
    sampler = chunked_sampler(ddata)
    why = (
        "chunked data (DaskCategoricalData) are sampled by the chunked Gibbs step "
        "(bayespmf.dask.sample_gibbs), which never holds the rows in memory"
    )
    for name, value in zip(("target_ess", "target_rhat", "max_time"), target, strict=True):
        if value is not None:
            raise DataValidationError(
                f"'{name}' does not apply to {why}: it samples a fixed length. Set "
                "'draws' (and 'n_sweeps')."
            )
    if method != "gibbs":
        raise DataValidationError(
            f"'method' is {method!r}, but {why}: pass method='gibbs' (or sample a "
            "CategoricalData held in memory by NUTS or ADVI)."
        )
    if n_components is None:
        raise DataValidationError(
            "'n_components' is required when data (not a model) are given."
        )
    refused = {
        "nuts_sampler": nuts_sampler != "pymc",
        "log_likelihood": log_likelihood is True,
        "simplex_transform": simplex_transform is not None,
        "jitter": jitter is not None,
    }
    for name, bad in refused.items():
        if bad:
            raise DataValidationError(
                f"'{name}' does not apply to {why}: leave it at its default. The "
                "log-likelihood per row would have the size of the rows; the starts "
                "are jittered as sample's default does."
            )
    unknown = sorted(set(options) - set(CHUNKED_OPTIONS))
    if unknown:
        raise DataValidationError(
            f"Unknown option(s) {unknown} for {why}; it takes {list(CHUNKED_OPTIONS)}."
        )
    if isinstance(init, str) and init == "auto":
        init = None  # sample_gibbs fits its own (distributed) estimate
    elif isinstance(init, str) or init is None:
        raise DataValidationError(
            f"'init' is {init!r}, but {why}: pass 'auto' (a distributed fit of the "
            "data) or a point estimate (a LatentClassPMF, (weights, factors) or a dict)."
        )
    return sampler(
        ddata,
        n_components,
        init=init,
        draws=DEFAULT_DRAWS if draws is None else draws,
        tune=DEFAULT_TUNE if tune is None else tune,
        chains=chains,
        random_seed=random_seed,
        align=align,
        progressbar=progressbar,
        **options,
    )


def initvals(
    model, init=None, *, chains: int = 1, jitter: float | None = None, random_seed=None
) -> list[dict]:
    """The chains' starts (one dict of constrained values per chain) at a point estimate.

    The start builder :func:`sample` uses, for every model family: the point estimate
    is bound to the model (a latent-class estimate by variable name and category
    label), its entries clipped away from 0 (``INIT_CLIP``) and renormalized, and each
    chain's start jittered: multiplicatively (``x * exp(jitter * z)``, renormalized)
    on every simplex and positive value, so every start stays in the support;
    additively on the regression's coefficients (``coef[:, 1:]``, re-referenced to
    class 0) and, in units of each feature's data sd, on a Gaussian simplex nest's
    vertices.

    Parameters
    ----------
    model : pymc.Model
        From :func:`~bayespmf.models.latent_class_model` (with or without covariates),
        :func:`~bayespmf.models.latent_class_regression_model` or
        :func:`~bayespmf.models.simplex_nest_model`.
    init : point estimate, optional
        A fitted LatentClassPMF, ``(weights, factors)`` or a dict with ``weights``
        and ``factors`` (latent class); a fitted LatentClassRegression, ``(coef,
        factors)`` or a dict (regression, ``coef`` on the model's design columns); a
        fitted VLAD, GDM or SimplexSPA or a dict with ``vertices`` (K, D) and
        optionally ``theta``, ``alpha``, ``sigma`` (simplex nest). ``None`` (default)
        fits the family's default estimate (what ``sample(init="auto")`` fits),
        seeded from ``random_seed``.
    chains : int, default 1
    jitter : float >= 0, optional
        Standard deviation of the per-chain jitter; ``None``: ``INIT_JITTER`` (0.05).
    random_seed : None, int or numpy.random.Generator
        Seeds the jitter and the default estimate.

    Returns
    -------
    list of dict
        The model's free variables by name (``weights`` and the ``A_<name>``
        factors; ``coef`` and the factors; ``vertices``, ``theta`` and, when free,
        ``alpha``/``sigma``).

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> model = latent_class_model(data, n_components=1)
    >>> iv = initvals(model, ([1.0], [np.array([[0.5], [0.5]])] * 2), chains=2)
    >>> len(iv), iv[0]["A_a"].shape
    (2, (1, 2))
    >>> from bayespmf.models import latent_class_regression_model, simplex_nest_model
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0], [1, 1]], 2, names=["a", "b"])
    >>> model = latent_class_regression_model(data, [[0.0], [1.0], [2.0]], 2)
    >>> point = (np.zeros((2, 2)), [np.full((2, 2), 0.5)] * 2)
    >>> iv = initvals(model, point, chains=2, random_seed=0)
    >>> len(iv), iv[0]["coef"].shape, iv[0]["A_a"].shape
    (2, (2, 1), (2, 2))
    >>> X = np.random.default_rng(0).normal(size=(30, 3))
    >>> iv = initvals(simplex_nest_model(X, 2), chains=2, random_seed=0)  # fits VLAD
    >>> len(iv), iv[0]["vertices"].shape, iv[0]["theta"].shape
    (2, (2, 3), (30, 2))
    """
    family = family_of(model)
    chains = check_int(chains, "chains", owner="initvals", low=1)
    jitter = check_jitter(jitter, "initvals")
    rng = start_rng(random_seed)
    if init is None:
        init = family.estimate(model, int(rng.integers(2**31 - 1)))
    return family.initvals(model, init, chains, jitter, rng)


def align_labels(idata, reference, data=None, *, n_refine: int = 2):
    r"""Relabel every draw's classes (or vertices) to match a reference: label switching.

    Mixture posteriors are invariant to permuting the classes (a simplex nest's to
    permuting the vertices with the columns of ``theta``), and samplers visit several
    permutations (STACK-NOTES.md), so raw r-hat/ESS are meaningless. For each draw the
    permutation minimizing the squared distance between its components and the
    reference's is found by the Hungarian method and applied to every posterior
    variable with a ``class`` (``vertex``) dimension. With ``n_refine > 0`` the
    reference is then replaced by the aligned posterior mean and the alignment
    repeated (the first pivot must come from outside the chains, e.g. a point
    estimate; a chain's own mean mixes labels). :func:`sample` runs it (``align=True``).

    The family is read from the draws. What a component is:

    * latent class: the class's stacked factor columns and its weight;
    * latent-class regression: the class's stacked factor columns (the coefficients
      are not comparable before the reference is fixed); the coefficients are then
      re-referenced so that the class now at position 0 is the reference again
      (``coef_full[:, f] -= coef_full[:, 0]``, ``coef = coef_full[:, 1:]``): the
      class priors ``softmax(z beta)`` are permuted, not changed, so every draw's
      likelihood is unchanged;
    * simplex nest: the vertex (``vertices``, the columns of ``theta`` with it).

    Parameters
    ----------
    idata : xarray.DataTree
        With a ``posterior`` group from :func:`~bayespmf.models.latent_class_model`
        (with or without covariates) or :func:`~bayespmf.models.simplex_nest_model`.
    reference : point estimate
        The pivot: a LatentClassPMF, ``(weights, factors)`` or dict (latent class); a
        LatentClassRegression, ``(coef, factors)`` or dict (regression: only its
        factors are used); a fitted estimator with ``vertices_`` or an array (K, D)
        of vertices (simplex nest).
    data : CategoricalData, optional
        The model's data, for the variable names of a latent-class model (with or
        without covariates); taken from ``idata.posterior.attrs["bayespmf_variables"]``
        when omitted. A simplex nest refuses it.
    n_refine : int, default 2
        Rounds of refinement against the aligned posterior mean.

    Returns
    -------
    xarray.DataTree
        A new object whose ``posterior`` is aligned; the draws as sampled are kept in
        the group ``unaligned_posterior`` and the permutations (``perm[f]`` = raw
        component put at position ``f``) in ``sample_stats["class_permutation"]``
        (``"vertex_permutation"`` for a simplex nest).

    Examples
    --------
    >>> import arviz as az
    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> draws = np.stack([V, V[[2, 0, 1]]])[None]  # 1 chain, 2 draws
    >>> idata = az.from_dict(
    ...     {"posterior": {"vertices": draws}}, dims={"vertices": ["vertex", "feature"]}
    ... )
    >>> out = align_labels(idata, V)
    >>> np.array_equal(out.posterior["vertices"].values[0, 1], V)
    True
    >>> out.sample_stats["vertex_permutation"].values[0, 1].tolist()
    [1, 2, 0]
    """
    post = getattr(idata, "posterior", None)
    if post is None:
        raise DataValidationError(
            "The 'idata' parameter of align_labels must hold a 'posterior' group (what "
            f"bayespmf.models.sample returns); got {type(idata).__name__}."
        )
    family = next((f for f in FAMILIES if f.drawn(post)), None)
    if family is None:
        raise DataValidationError(
            "'idata.posterior' holds no draws of a bayespmf model (no 'weights', "
            "'coef_full' or 'vertices' variable); pass the output of "
            "bayespmf.models.sample."
        )
    return family.align(idata, reference, data, n_refine)


# ------------------------------------------------------------ the latent-class family


#: Rows above which the default start of a latent-class model (``init="auto"``) is
#: fitted on a random subsample of this many rows, then refined on every row
#: (:func:`subsample_start`); at or below it, the full multi-start fit of every row.
START_SUBSAMPLE_ROWS = 20_000

#: Starts of the subsample's fit (the ``n_init`` of its ``LatentClassPMF``).
START_SUBSAMPLE_N_INIT = 30

#: Most SQUAREM-PMF cycles of the refinement on every row (it stops earlier at the
#: fit's own tolerance; where it stops here, the estimate records it). A start need
#: not be the maximum itself: draws of the posterior sit about half the number of
#: free parameters below it in log-likelihood, so a few cycles from the subsample's
#: estimate reach the posterior's bulk (:ref:`bench-gibbs-default-target`).
START_REFINE_MAX_ITER = 50


def subsample_start(data, n_components: int, random_seed=None):
    """The default start on large data: a subsample's fit, refined on every row.

    ``LatentClassPMF(n_components, n_init=START_SUBSAMPLE_N_INIT)`` is fitted on
    :data:`START_SUBSAMPLE_ROWS` rows drawn at random without replacement, and its
    estimate refined on every row by SQUAREM-PMF from that one start
    (:func:`bayespmf.fit.fit_em`, at most :data:`START_REFINE_MAX_ITER` cycles, its
    default tolerance). A fit of every row from hundreds of starts costs minutes
    at 1e5 rows; a start for the chains needs the basin of a good optimum and then
    the full-data optimum in it, which this finds in seconds (the chains then move
    away from it by the posterior's own spread). The subsample and the fits are
    seeded from ``random_seed`` (one seed, one start).

    Returns the subsample's :class:`~bayespmf.estimators.LatentClassPMF` with the
    refined ``weights_``, ``factors_`` and ``loglik_`` (of every row; its ``optima_``
    stay the subsample's, which ``init="optima"`` reads), and
    ``start_subsample_rows_``, ``start_subsample_loglik_`` (its fit's log-likelihood
    on the subsample), ``start_subsample_seconds_``, ``start_refine_iter_`` (the
    cycles on every row), ``start_refine_converged_`` (False where it stopped at
    ``START_REFINE_MAX_ITER``) and ``start_refine_seconds_``; :func:`sample` records
    them in ``posterior.attrs``. Where the refinement stops at the cycle cap, its
    ``ConvergenceWarning`` is recorded there instead of shown (a start need not be
    the optimum itself; the chains move from it).

    Examples
    --------
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(3000, 3, 2, 0.5, n_variables=6, random_state=0)
    >>> import bayespmf.models.posterior as post
    >>> post.START_SUBSAMPLE_ROWS, keep = 500, post.START_SUBSAMPLE_ROWS
    >>> est = subsample_start(data, 2, random_seed=0)
    >>> post.START_SUBSAMPLE_ROWS = keep
    >>> est.start_subsample_rows_, est.weights_.shape
    (500, (2,))
    """
    import copy
    import time
    import warnings

    from bayespmf._validation import ConvergenceWarning
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.fit.em import fit_em

    rng = np.random.default_rng(random_seed)
    n_rows = data.codes.shape[0]
    size = min(n_rows, START_SUBSAMPLE_ROWS)
    rows = np.sort(rng.choice(n_rows, size=size, replace=False))
    t0 = time.perf_counter()
    sub = LatentClassPMF(
        n_components,
        n_init=START_SUBSAMPLE_N_INIT,
        random_state=int(rng.integers(2**31 - 1)),
    ).fit(data[rows])
    t1 = time.perf_counter()
    with warnings.catch_warnings():  # the cycle cap is recorded below, not shown
        warnings.simplefilter("ignore", ConvergenceWarning)
        params, info = fit_em(
            data,
            n_components,
            init=(sub.weights_, sub.factors_),
            accelerate="squarem",
            max_iter=START_REFINE_MAX_ITER,
        )
    est = copy.copy(sub)  # the subsample's fit: names, labels, optima_
    est.weights_ = np.asarray(params.weights)
    est.factors_ = [np.asarray(a) for a in params.factors]
    est.loglik_ = float(info.loglik)
    est.start_subsample_rows_ = int(size)
    est.start_subsample_loglik_ = float(sub.loglik_)
    est.start_subsample_seconds_ = t1 - t0
    est.start_refine_iter_ = int(info.n_iter)
    est.start_refine_converged_ = bool(info.converged)
    est.start_refine_seconds_ = time.perf_counter() - t1
    return est


#: ``posterior.attrs`` that record a :func:`subsample_start` (its attribute + "_").
START_ATTRS = (
    "start_subsample_rows",
    "start_subsample_loglik",
    "start_subsample_seconds",
    "start_refine_iter",
    "start_refine_converged",
    "start_refine_seconds",
)


def _lc_estimate(model, random_seed):
    from bayespmf.estimators import LatentClassPMF

    data, n_components = model_data(model)
    if data.codes.shape[0] > START_SUBSAMPLE_ROWS:
        return subsample_start(data, n_components, random_seed)
    return LatentClassPMF(n_components, random_state=random_seed).fit(data)


def _lc_initvals(model, point, chains, jitter, rng):
    """The latent-class start builder (see :func:`initvals`)."""
    data, n_components = model_data(model)
    params = params_of(point, data, n_components)
    out = []
    for _ in range(chains):
        d = {"weights": jitter_simplex(params.weights, 0, jitter, rng)}
        for name, a in zip(data.names, params.factors, strict=True):
            d[factor_var_name(name)] = jitter_simplex(np.asarray(a).T, 1, jitter, rng)
        out.append(d)
    return out


def _lc_align(idata, reference, data, n_refine):
    """The latent-class alignment (see :func:`align_labels`): factors and weights."""
    names = variable_names(idata, data)
    post = idata["posterior"]  # the group apply_permutations relabels
    n_components = post.sizes["class"]
    n_cat = [post.sizes[f"{n}_category"] for n in names]
    labels = [[str(c) for c in post[f"{n}_category"].values] for n in names]
    fake = CategoricalData(np.zeros((1, len(names)), dtype=np.int64), n_cat, names, labels)
    ref = params_of(reference, fake, n_components)
    ref_stacked = np.concatenate([np.asarray(a) for a in ref.factors], axis=0)
    ref_w = np.asarray(ref.weights)
    c, d = post.sizes["chain"], post.sizes["draw"]
    # components are the classes: stacked factor columns plus the weight, written
    # into one array (no stacked copy beside it)
    feats = np.empty((c * d, n_components, sum(n_cat) + 1))
    at = 0
    for name in names:
        a = post[factor_var_name(name)].transpose("chain", "draw", "class", ...).values
        feats[:, :, at : at + a.shape[-1]] = a.reshape(c * d, n_components, -1)
        at += a.shape[-1]
    feats[:, :, at] = (
        post["weights"]
        .transpose("chain", "draw", "class")
        .values.reshape(c * d, n_components)
    )
    ref_feats = np.concatenate([ref_stacked, ref_w[None, :]], axis=0).T
    perms = hungarian_permutations(feats, ref_feats, n_refine=n_refine)
    return apply_permutations(
        idata, perms.reshape(c, d, n_components), "class", "class_permutation"
    )


def _lc_align_more(raw, aligned):
    """``raw``'s posterior aligned to the mean of an ``aligned`` posterior, one pass.

    The reference is the aligned draws' mean (weights and factors), as the last
    refinement of :func:`align_labels` takes it; each draw of ``raw`` gets the
    permutation that matches it best (no further refinement).
    """
    names = json.loads(aligned.attrs["bayespmf_variables"])
    mean = aligned.mean(("chain", "draw"))
    reference = (
        mean["weights"].values,
        [mean[factor_var_name(n)].values.T for n in names],
    )
    tree = raw.copy()
    posterior = raw["posterior"].to_dataset()
    posterior.attrs["bayespmf_variables"] = aligned.attrs["bayespmf_variables"]
    tree["posterior"] = posterior
    return _lc_align(tree, reference, None, 0)["posterior"].to_dataset()


def _lc_rewrite(model, point, initvals, method, nuts_sampler, simplex_transform):
    """Freeze the rows; the pivot coordinates (one fused Op where numba compiles)."""
    from pymc.model.transform.optimization import freeze_dims_and_data

    if method == "gibbs":  # the step reads the rows once; a frozen copy would idle
        return model, initvals, None
    # the rows are fixed while sampling: frozen, they are constants of static shape
    frozen = freeze_dims_and_data(model)
    if simplex_transform != "pivot" or point is None:
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
    for name in START_ATTRS:  # a subsample start (large data) says so
        if hasattr(point, name + "_"):
            value = getattr(point, name + "_")
            idata.posterior.attrs[name] = int(value) if isinstance(value, bool) else value
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
        idata = _lc_align(idata, point, data, 2)
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
    drawn=lambda posterior: "weights" in posterior,
    align=_lc_align,
    init_modes=("auto", "optima"),
    optima=optima_starts,
    simplex_transforms=SIMPLEX_TRANSFORMS,
    pymc_init_on_none=True,
    align_more=_lc_align_more,
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
    if not isinstance(model, pm.Model):
        raise DataValidationError(
            "'model' must be a PyMC model built by bayespmf.models "
            "(latent_class_model, latent_class_regression_model or "
            f"simplex_nest_model); got {type(model).__name__}."
        )
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
    """The rows as ``observed_data``/``constant_data``: one read-only view of the model's.

    (A frozen model has no data container, so ``pm.sample`` records no
    ``constant_data``; ADVI's draws carry neither.) Both groups hold a read-only view
    of the model's rows, in their type, instead of the sampler's copies (the
    observed rows are cast to int64 there): on large data those copies were several
    times the rows.
    """
    codes = model[DATA_NAME].get_value(borrow=True).view()
    codes.flags.writeable = False
    # model coordinates are tuples, which xarray would read as (dims, data)
    coords = {d: list(model.coords[d]) for d in ("row", "variable")}
    for group, var in (("observed_data", OBSERVED_NAME), ("constant_data", DATA_NAME)):
        if group not in idata.children:
            idata[group] = xr.Dataset({var: (("row", "variable"), codes)}, coords=coords)
        else:
            ds = idata[group].to_dataset()
            ds[var] = (("row", "variable"), codes)
            idata[group] = ds.assign_coords(coords)
