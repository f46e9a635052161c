"""Sampling, label alignment and posterior prediction for the latent-class model."""

from __future__ import annotations

import json

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import logsumexp

from bayespmf._arviz import hdi_of_draws
from bayespmf._validation import (
    DataValidationError,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData, as_categorical, layout_of
from bayespmf.models import latent_class
from bayespmf.models._alignment import apply_permutations, hungarian_permutations
from bayespmf.models._pivot import drop_logratios, fused_pivot_model, logratio_initvals
from bayespmf.models._sampling import check_nuts_sampler, check_sampler_args, run_sampler
from bayespmf.models.latent_class import (
    DATA_NAME,
    OBSERVED_NAME,
    factor_var_name,
    latent_class_model,
)
from bayespmf.pmf import LatentClassParams, check_params, offsets_of, one_hot_design

__all__ = [
    "align_labels",
    "convergence_summary",
    "impute",
    "MODEL_FAMILIES",
    "initvals_from_params",
    "model_family",
    "pivot_model",
    "posterior_class_proba",
    "posterior_params",
    "posterior_predict_proba",
    "sample",
    "select_rank",
]

#: Entries of a starting point are clipped to at least this before the simplex
#: transform (an exact zero maps to -inf: "Bad initial energy", STACK-NOTES.md).
INIT_CLIP = 1e-4

#: Standard deviation of the per-chain jitter of a starting point, applied to the log
#: of every simplex entry (about the scale of the stick-breaking transform): chains
#: start apart enough for r-hat to mean something, close enough to share the mode.
INIT_JITTER = 0.05

#: ``sample(init="optima")`` starts chains at the optima within this many
#: log-likelihood units of the best: a few units is the scale on which the posterior
#: mass of a mode can still compete with the best one's.
OPTIMA_WINDOW = 5.0

#: ``convergence_summary`` reports chains in different modes when their mean total
#: log-likelihoods differ by more than this many pooled within-chain sds.
MODE_GAP_SDS = 3.0

#: The ``simplex_transform`` options of :func:`sample`.
SIMPLEX_TRANSFORMS = ("pivot", "pymc")

#: Draws per block when a posterior quantity is computed over all draws at once.
_DRAW_BLOCK = 64

#: About this many numbers (8 bytes each) per block of rows x all draws x classes
#: when per-draw class probabilities are summarized (64 MB).
_BLOCK_VALUES = 8_000_000


def _model_data(model) -> tuple[CategoricalData, int]:
    return latent_class.model_data(model)


def _params_of(init, data: CategoricalData, rank: int) -> LatentClassParams:
    """The point estimate ``init`` as parameters laid out like ``data``'s variables.

    A fitted estimator (``variable_names_``, ``category_labels_``) or a dict with
    ``"names"`` (and ``"categories"``) is bound to the model by name: its factors are
    reordered to the model's variables and each factor's rows to the model's category
    labels, or a mismatch is refused. A bare ``(weights, factors)`` pair is positional.
    """
    names = labels = None
    if hasattr(init, "weights_") and hasattr(init, "factors_"):
        weights, factors = init.weights_, init.factors_
        names = getattr(init, "variable_names_", None)
        labels = getattr(init, "category_labels_", None)
    elif isinstance(init, LatentClassParams | tuple) and len(init) == 2:
        weights, factors = init
    elif isinstance(init, dict) and {"weights", "factors"} <= set(init):
        weights, factors = init["weights"], init["factors"]
        names, labels = init.get("names"), init.get("categories")
    else:
        raise DataValidationError(
            "'init' must be a fitted LatentClassPMF, a (weights, factors) pair or a dict "
            f"with 'weights' and 'factors'; got {type(init).__name__}."
        )
    if np.shape(weights) != (rank,):
        raise DataValidationError(
            f"'init' has {np.shape(weights)[0] if np.ndim(weights) else '?'} classes but "
            f"the model has rank {rank}."
        )
    if names is not None and len(names) == len(factors):
        factors = _bind_factors(factors, list(names), labels, data)
    return check_params(weights, factors, data.n_categories)


def _bind_factors(factors, names, labels, data: CategoricalData) -> list:
    """``factors`` (one per name in ``names``) in ``data``'s variable and label order."""
    like = layout_of([np.shape(a)[0] for a in factors], names, labels)
    # the model's variables and labels, one row per category so that every label is
    # checked against the estimate's alphabet
    n_rows = int(np.max(data.n_categories))
    model_vars = CategoricalData(
        np.minimum(np.arange(n_rows)[:, None], np.asarray(data.n_categories) - 1),
        data.n_categories,
        data.names,
        data.categories,
    )
    try:  # the same variables (any order) with the same labels (any order)
        as_categorical(model_vars, like, name="the model's data")
        model_sizes = _bound_sizes(model_vars, like)
        for var, k, want in zip(like.names, model_sizes, like.n_categories, strict=True):
            if k != want:
                raise DataValidationError(
                    f"variable {var!r} has {k} categories in the model and {want} in "
                    "the estimate."
                )
    except DataValidationError as err:
        raise DataValidationError(
            f"'init' does not fit the model (an estimate is matched to the model's "
            f"variables by name): {err}"
        ) from None
    if set(names) != set(data.names):
        return list(factors)  # unnamed data on one side (checked above): positional
    out = []
    for j, name in enumerate(data.names):
        k = names.index(name)
        a = np.asarray(factors[k])
        if labels is not None:
            index = {str(c): i for i, c in enumerate(labels[k])}
            rows = [index.get(str(c)) for c in data.categories[j]]
            if None not in rows:  # default labels on the model's side: positional
                a = a[rows]
        out.append(a)
    return out


def _bound_sizes(data: CategoricalData, like: CategoricalData) -> list[int]:
    """Alphabet sizes of ``data``'s variables, in ``like``'s variable order."""
    if set(data.names) == set(like.names):
        return [int(data.n_categories[data.names.index(n)]) for n in like.names]
    return [int(k) for k in data.n_categories]  # names carry no information


def _clip_simplex(x, axis):
    x = np.maximum(np.asarray(x, dtype=float), INIT_CLIP)
    return x / x.sum(axis=axis, keepdims=True)


def initvals_from_params(
    model, init, *, chains: int = 1, jitter: float = INIT_JITTER, random_state=None
) -> list[dict]:
    """Starting points (one dict per chain, constrained values) from a point estimate.

    Entries are clipped away from 0 and renormalized; each chain's start is jittered
    multiplicatively (``x * exp(jitter * z)``, renormalized), i.e. on the log scale of
    the simplex, so every start stays on the simplex.

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> model = latent_class_model(data, rank=1)
    >>> iv = initvals_from_params(model, ([1.0], [np.array([[0.5], [0.5]])] * 2), chains=2)
    >>> len(iv), iv[0]["A_a"].shape
    (2, (1, 2))
    """
    data, rank = _model_data(model)
    params = _params_of(init, data, rank)
    rng = check_random_state(random_state)
    chains = check_int(chains, "chains", low=1)
    out = []
    for _ in range(chains):

        def jit(x, axis):
            z = rng.standard_normal(np.shape(x)) if jitter > 0 else 0.0
            return _clip_simplex(_clip_simplex(x, axis) * np.exp(jitter * z), axis)

        d = {"weights": jit(params.weights, 0)}
        for name, a in zip(data.names, params.factors, strict=True):
            d[factor_var_name(name)] = jit(np.asarray(a).T, 1)
        out.append(d)
    return out


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
    names = _names(idata, data)
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


def _log_joint_draws(design, weights, stacked_log):
    # (D, S, F) = O (S, sumI) @ log A (D, sumI, F) + log w (D, 1, F)
    out = np.stack([design @ la for la in stacked_log])
    return out + np.log(weights)[:, None, :]


def align_labels(
    idata, reference, data: CategoricalData | None = None, *, n_refine: int = 2
):
    """Relabel every draw's classes to match a reference by the Hungarian method.

    Mixture posteriors are invariant to permuting the classes, and samplers visit
    several permutations (STACK-NOTES.md), so raw r-hat/ESS are meaningless. For each
    draw, the permutation minimizing the squared distance between its stacked factors
    (and weights) and the reference's is applied to every variable with a ``class``
    dimension. With ``n_refine > 0`` the reference is then replaced by the aligned
    posterior mean and the alignment repeated (the first pivot must come from outside
    the chains, e.g. a point estimate; a chain's own mean mixes labels).

    Parameters
    ----------
    idata : xarray.DataTree
        With a ``posterior`` group from :func:`latent_class_model`.
    reference : LatentClassPMF, (weights, factors) or dict
        The pivot.
    data : CategoricalData, optional
        The model's data (for the variable names); taken from
        ``idata.attrs["bayespmf_variables"]`` when omitted.
    n_refine : int, default 2
        Rounds of refinement against the aligned posterior mean.

    Returns
    -------
    xarray.DataTree
        A new object whose ``posterior`` is aligned; the draws as sampled are kept in
        the group ``unaligned_posterior`` and the permutations (``perm[f]`` = raw
        class put at position ``f``) in ``sample_stats["class_permutation"]``.
    """
    names = _names(idata, data)
    post = idata.posterior
    rank = post.sizes["class"]
    n_cat = [post.sizes[f"{n}_category"] for n in names]
    labels = [[str(c) for c in post[f"{n}_category"].values] for n in names]
    fake = CategoricalData(np.zeros((1, len(names)), dtype=np.int64), n_cat, names, labels)
    ref = _params_of(reference, fake, rank)
    ref_stacked = np.concatenate([np.asarray(a) for a in ref.factors], axis=0)
    ref_w = np.asarray(ref.weights)
    w, stacked = posterior_params(idata, fake)
    c, d = post.sizes["chain"], post.sizes["draw"]
    # components are the classes: stacked factor columns plus the weight
    feats = np.concatenate([stacked, w[:, None, :]], axis=1).transpose(0, 2, 1)
    ref_feats = np.concatenate([ref_stacked, ref_w[None, :]], axis=0).T
    perms = hungarian_permutations(feats, ref_feats, n_refine=n_refine)
    return apply_permutations(
        idata, perms.reshape(c, d, rank), "class", "class_permutation"
    )


def _names(idata, data):
    if data is not None:
        return list(data.names)
    names = idata.posterior.attrs.get("bayespmf_variables")
    if names is not None:
        return json.loads(names) if isinstance(names, str) else list(names)
    for group, var in (("observed_data", OBSERVED_NAME), ("constant_data", DATA_NAME)):
        if group in idata.children and var in idata[group]:
            return [str(v) for v in idata[group][var]["variable"].values]
    raise DataValidationError("Pass 'data' (the data the model was built from).")


def _posterior_variables(idata, data=None) -> CategoricalData:
    """The posterior's variables (names, category labels) as a one-row CategoricalData.

    ``data`` (a CategoricalData the model was built from) gives the names when
    ``idata`` records none; the labels come from the posterior's coordinates.
    """
    try:  # the names recorded at sampling time come first
        names = _names(idata, None)
    except DataValidationError:
        if not isinstance(data, CategoricalData):
            raise
        names = list(data.names)
    post = idata.posterior
    labels = []
    for n in names:
        dim = latent_class.category_dim(n)
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


def _idata_data(idata, data) -> CategoricalData:
    """``data`` bound by name to the posterior's variables, or the rows it records.

    ``data`` may be a CategoricalData, a DataFrame (columns matched by name, labels
    by their string form) or integer codes in the model's variable order
    (:func:`bayespmf.data.as_categorical`).
    """
    if data is not None:
        return as_categorical(data, _posterior_variables(idata, data), name="data")
    for group, var in (("observed_data", OBSERVED_NAME), ("constant_data", DATA_NAME)):
        if group in idata.children and var in idata[group]:
            rows = idata[group][var]
            names = [str(v) for v in rows["variable"].values]
            cats = [
                [str(c) for c in idata.posterior[latent_class.category_dim(n)].values]
                for n in names
            ]
            return CategoricalData(
                rows.values.astype(np.int64), [len(c) for c in cats], names, cats
            )
    raise DataValidationError(
        "Pass 'data': 'idata' records no rows (no observed_data or constant_data group "
        "from bayespmf.models.sample)."
    )


def sample(
    model_or_data,
    *,
    rank: int | None = None,
    init="auto",
    method: str = "nuts",
    nuts_sampler: str = "pymc",
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    random_seed=None,
    progressbar: bool = True,
    align: bool = True,
    log_likelihood: bool = True,
    advi_iterations: int = 20000,
    simplex_transform: str | None = None,
    **sample_kwargs,
):
    """Draw from the posterior of a bayespmf model by NUTS or ADVI: the one front door.

    Every model family goes through here with the same options: a latent-class model
    (:func:`latent_class_model`), a latent-class regression
    (``latent_class_model(..., covariates=z)`` or
    :func:`~bayespmf.models.regression.latent_class_regression_model`: runs
    :func:`~bayespmf.models.regression.sample_regression`) and a Dirichlet simplex
    nest (:func:`~bayespmf.models.simplex_nest.simplex_nest_model`: runs
    :func:`~bayespmf.models.simplex_nest.sample_simplex_nest`). An option a family
    does not have (ADVI and ``simplex_transform`` for the regression,
    ``simplex_transform`` for the simplex nest) is refused, never ignored.

    Parameters
    ----------
    model_or_data : pymc.Model or CategoricalData
        A model of one of the families above, or latent-class data (then ``rank`` is
        required and the model is built with default priors).
    rank : int, optional
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
        uses PyMC's default initialization, whose chains can settle in different modes:
        on UCI Car at rank 4 they did (r-hat 2.37 after label alignment), while every
        chain started at a CNMF-SPA-EM estimate agreed (r-hat 1.007, bulk ESS 2527;
        ``benchmarks/bayes_latent_class.py``).
    method : {"nuts", "advi"}
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
        (otherwise vectorized on one device): on S=2000 rows of 15 variables, rank 5,
        2 cores, numpyro's 2 x (1000 + 2000) took 82 s against 189 s vectorized,
        aligned r-hat 1.007 and min bulk ESS 470 (``benchmarks/bayes_latent_class.py
        --compare``), the fastest sampler measured on larger data.
    draws, tune, chains : int
        For NUTS; for ADVI ``draws`` samples are taken from the fitted approximation
        (one chain) after ``advi_iterations`` optimization steps.
    random_seed : int, optional
    align : bool, default True
        Relabel classes draw by draw (see :func:`align_labels`) against the point
        estimate (``init``, or a CNMF-SPA-EM fit when ``init`` is None).
    log_likelihood : bool, default True
        Add a ``log_likelihood`` group with the per-row log-likelihood of the
        observed rows ``x`` (``pm.compute_log_likelihood``; for ``az.loo``).
    simplex_transform : {"pivot", "pymc"}, optional
        Latent-class models only; the default is ``"pivot"``.
        The unconstrained coordinates the sampler moves in (the model, and so the
        posterior, are the same either way). ``"pivot"``: every simplex row (the
        weights, each class's PMF of each variable) as log-ratios to its entry that
        is largest at the point estimate (:func:`pivot_model`,
        :class:`~bayespmf.models.latent_class.PivotLogRatio`); ``"pymc"``: PyMC's
        default ``simplex`` transform. ``"pivot"`` needs a point estimate and falls
        back to ``"pymc"`` with ``init=None``. On UCI Car at rank 4 (2 chains x
        (500 + 500), same start, side by side) it cut the leapfrog steps per draw
        from 59 to 15 and raised the smallest bulk ESS per second of PyMC's NUTS
        3.9 and 4.6 times (seeds 0 and 1), and of numpyro's about 1.9 times
        (``benchmarks/bayes_latent_class.py --compare``). With PyMC's NUTS, nutpie
        and ADVI the pivot coordinates of all the simplexes are one free vector
        (``simplex_logratios``, dropped from the draws) and one fused Op for their
        log-probabilities, priors and Jacobians (``bayespmf.models._pivot``; the
        same log-density and gradient, to rounding): the graph PyTensor's numba
        backend compiles for a model shrinks from 160 nodes to 17 (UCI Car, rank
        4). Measured on 2 cores, one chain of 5 + 5 draws in an empty cache: 21.9 s
        against 51.6 s with one value transform per variable, and a further model
        (another rank) 3.8-4.1 s against 14.2-15.5 s (``benchmarks/stack_compare.py``
        compile row, 2 chains, against PyMC 5 on PyTensor's C backend: 19.9 s
        against 32.5 s, and 3.6 s against 6.1 s). numpyro and blackjax (JAX has no
        numba) keep the value transforms.
    **sample_kwargs
        Passed to ``pm.sample`` (e.g. ``target_accept``; PyMC's 0.8 is kept: on UCI
        Car at rank 4 with the pivot transform, 0.9 took as many leapfrog steps per
        draw and gave about half the bulk ESS (two seeds), while 0.8 gave 3
        divergences in 4 x 1000 draws (in the left tail of a small class's entry);
        pass 0.9 when divergences must be zero); see
        :func:`bayespmf.models._sampling.run_sampler` for the defaults of ``init``
        and ``cores``.

    Returns
    -------
    xarray.DataTree
        ``posterior`` (aligned), the model's rows as ``observed_data["x"]`` and
        ``constant_data["rows"]``; ``posterior.attrs`` record the wall time
        (``sampling_time``) and the method. The sampler runs on the model with its
        data frozen (``freeze_dims_and_data``): the rows are constants of static
        shape while sampling (what the JAX backends need); the model passed in is
        unchanged.
    """
    import pymc as pm
    from pymc.model.transform.optimization import freeze_dims_and_data

    from bayespmf.estimators import LatentClassPMF

    draws, tune, chains = check_sampler_args(method, draws, tune, chains, "sample")
    family = model_family(model_or_data) if isinstance(model_or_data, pm.Model) else None
    if family not in (None, "latent_class"):
        return _sample_other_family(
            model_or_data,
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
    # unknown keywords and empty ADVI runs are refused before the point estimate is fit
    check_sampler_args(
        method,
        draws,
        tune,
        chains,
        "sample",
        advi_iterations=advi_iterations,
        sample_kwargs={"nuts_sampler": nuts_sampler, **sample_kwargs},
    )
    simplex_transform = "pivot" if simplex_transform is None else simplex_transform
    if simplex_transform not in SIMPLEX_TRANSFORMS:
        raise DataValidationError(
            f"The 'simplex_transform' parameter of sample must be one of "
            f"{list(SIMPLEX_TRANSFORMS)}; got {simplex_transform!r}."
        )
    if method == "nuts":  # before the point estimate, which takes a while
        check_nuts_sampler(nuts_sampler, tune)
        sample_kwargs["nuts_sampler"] = nuts_sampler
    if isinstance(model_or_data, pm.Model):
        model = model_or_data
    else:
        if rank is None:
            raise DataValidationError(
                "'rank' is required when data (not a model) are given."
            )
        model = latent_class_model(model_or_data, rank)
    data, rank = _model_data(model)
    rng = np.random.default_rng(random_seed)
    point = None
    starts = None
    if isinstance(init, tuple) and len(init) == 2 and isinstance(init[0], str):
        init, point = "optima", init[1]
    if isinstance(init, str):
        if init not in ("auto", "optima"):
            raise DataValidationError(
                f"The 'init' parameter of sample must be 'auto', 'optima', a point "
                f"estimate or None; got {init!r}."
            )
        if point is None:
            point = LatentClassPMF(rank, random_state=random_seed).fit(data)
        if init == "optima":
            starts = _optima_starts(point)
    elif init is not None:
        point = init
    initvals = None
    n_chains = chains if method == "nuts" else 1
    if starts is not None:
        initvals = [
            initvals_from_params(model, starts[c % len(starts)], random_state=rng)[0]
            for c in range(n_chains)
        ]
    elif point is not None:
        initvals = initvals_from_params(model, point, chains=n_chains, random_state=rng)
    # the rows are fixed while sampling: frozen, they are constants of static shape
    frozen = freeze_dims_and_data(model)
    fused = None
    if simplex_transform == "pivot" and point is not None:
        pivots = _pivots(frozen, point)
        if method == "advi" or nuts_sampler in ("pymc", "nutpie"):
            # numba (or C) compiles it: every simplex in one fused Op, far less to compile
            fused = fused_pivot_model(frozen, data.codes, *pivots)
        if fused is not None:
            frozen, initvals = fused, logratio_initvals(fused, initvals)
        else:  # JAX cannot run the numba Op: the same coordinates as value transforms
            frozen = _pivot_transforms(frozen, *pivots)
    idata = run_sampler(
        frozen,
        method=method,
        initvals=initvals,
        draws=draws,
        tune=tune,
        chains=chains,
        random_seed=random_seed,
        progressbar=progressbar,
        advi_iterations=advi_iterations,
        **sample_kwargs,
    )
    if fused is not None:
        idata = drop_logratios(idata)
    idata.posterior.attrs["bayespmf_variables"] = json.dumps(list(data.names))
    if starts is not None:
        idata.posterior.attrs["chain_start_optimum"] = [
            c % len(starts) for c in range(n_chains)
        ]
        idata.posterior.attrs["start_optima_loglik"] = [
            float(v) for v in point.optima_["loglik"].iloc[: len(starts)]
        ]
    if align:
        if point is None:
            point = LatentClassPMF(rank, random_state=random_seed).fit(data)
        idata = align_labels(idata, point, data)
    _add_data_groups(idata, model)
    if log_likelihood:  # per row, label-invariant: the same before and after alignment
        pm.compute_log_likelihood(idata, model=model, progressbar=False)
    return idata


#: The model families :func:`sample` runs (see :func:`model_family`).
MODEL_FAMILIES = ("latent_class", "regression", "simplex_nest")


def model_family(model) -> str:
    """Which of :data:`MODEL_FAMILIES` a bayespmf PyMC model belongs to.

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> model_family(latent_class_model(data, rank=2))
    'latent_class'
    """
    from bayespmf.models.regression import COEF_FULL_NAME
    from bayespmf.models.simplex_nest import is_simplex_nest_model

    if is_simplex_nest_model(model):
        return "simplex_nest"
    if COEF_FULL_NAME in model.named_vars:
        return "regression"
    return "latent_class"


def _sample_other_family(
    model,
    *,
    init,
    method,
    nuts_sampler,
    simplex_transform,
    advi_iterations,
    log_likelihood,
    **common,
):
    """:func:`sample` for the latent-class regression and the simplex nest."""
    from bayespmf.models.regression import sample_regression
    from bayespmf.models.simplex_nest import sample_simplex_nest

    family = model_family(model)
    if simplex_transform is not None:
        raise DataValidationError(
            f"'simplex_transform' applies to latent-class models only; this is a "
            f"{family} model. Drop the argument."
        )
    if isinstance(init, str) or (isinstance(init, tuple) and isinstance(init[0], str)):
        if init != "auto":
            raise DataValidationError(
                f"init={init!r} applies to latent-class models only; for a {family} "
                "model pass 'auto', a fitted estimator or None."
            )
        init = None  # each family fits its own point estimate
    if family == "regression":
        if method != "nuts":
            raise DataValidationError(
                "The latent-class regression is sampled by NUTS only; got "
                f"method={method!r}."
            )
        return sample_regression(
            model,
            init=init,
            nuts_sampler=nuts_sampler,
            log_likelihood=log_likelihood,
            **common,
        )
    if method == "nuts":
        common["nuts_sampler"] = nuts_sampler
    return sample_simplex_nest(
        model,
        init=init,
        method=method,
        advi_iterations=advi_iterations,
        log_likelihood=log_likelihood,
        **common,
    )


def pivot_model(model, point):
    """The model with every simplex sampled as log-ratios to its largest entry.

    The pivot of each simplex row (the weights, and each class's row of every
    ``A_<name>``) is the entry largest in ``point``. Only the value transforms
    change (``pymc.model.transform.conditioning.change_value_transforms``): the
    model's density on the simplex, its variables and their names are the same, so
    draws, ``initvals`` and the log-likelihood are unaffected. See
    :class:`~bayespmf.models.latent_class.PivotLogRatio` for why it helps NUTS.

    Parameters
    ----------
    model : pymc.Model
        From :func:`latent_class_model` (frozen or not).
    point : LatentClassPMF, (weights, factors) or dict
        A point estimate (e.g. the start of the chains).

    Returns
    -------
    pymc.Model
        A new model; ``model`` is unchanged.

    Examples
    --------
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> model = latent_class_model(data, rank=2)
    >>> point = ([0.3, 0.7], [np.array([[0.9, 0.2], [0.1, 0.8]])] * 2)
    >>> new = pivot_model(model, point)
    >>> new.rvs_to_transforms[new["A_a"]].pivot.tolist()
    [0, 1]
    """
    return _pivot_transforms(model, *_pivots(model, point))


def _pivots(model, point) -> tuple[int, list[np.ndarray]]:
    """The pivot of the weights and of each class's row of each ``A_n``: the largest."""
    # names and sizes from the coordinates: a frozen model has no data container
    names = [str(v) for v in model.coords["variable"]]
    labels = [[str(c) for c in model.coords[latent_class.category_dim(n)]] for n in names]
    rank = len(model.coords["class"])
    fake = CategoricalData(
        np.zeros((1, len(names)), dtype=np.int64), [len(c) for c in labels], names, labels
    )
    params = _params_of(point, fake, rank)
    # factors are (I_n, F): the pivot of class f's row is argmax_i a[i, f]
    factor_pivots = [np.argmax(np.asarray(a), axis=0) for a in params.factors]
    return int(np.argmax(params.weights)), factor_pivots


def _pivot_transforms(model, weights_pivot, factor_pivots):
    """``model`` with :class:`PivotLogRatio` value transforms at these pivots."""
    names = [str(v) for v in model.coords["variable"]]
    rank = len(model.coords["class"])
    transforms = {"weights": latent_class.PivotLogRatio(weights_pivot, rank)}
    for name, piv in zip(names, factor_pivots, strict=True):
        k = len(model.coords[latent_class.category_dim(name)])
        transforms[factor_var_name(name)] = latent_class.PivotLogRatio(piv, k)
    return _change_value_transforms(model, transforms)


def _change_value_transforms(model, transforms: dict):
    """``pymc.model.transform.conditioning.change_value_transforms`` for simplexes.

    PyMC's version gives the new value variable the static shape of the variable
    itself, which is wrong for a transform that drops an entry (a K-simplex has K - 1
    free coordinates); here the value variable has the type of the transformed
    value, as ``pm.Model`` creates it.
    """
    from pymc.model.fgraph import (
        ModelFreeRV,
        fgraph_from_model,
        model_free_rv,
        model_from_fgraph,
    )
    from pymc.pytensorf import toposort_replace
    from pymc.util import get_transformed_name

    fgraph, _ = fgraph_from_model(model)
    replacements = []
    for node in fgraph.apply_nodes:
        if not isinstance(node.op, ModelFreeRV):
            continue
        [dummy_rv] = node.outputs
        rv, _value = node.inputs
        transform = transforms.get(node.op.name)
        if transform is None:
            continue
        new_value = transform.forward(rv, *rv.owner.inputs).type()
        new_value.name = get_transformed_name(node.op.name, transform)
        replacements.append(
            (dummy_rv, model_free_rv(rv, new_value, transform, node.op.name, *node.op.dims))
        )
    toposort_replace(fgraph, tuple(replacements))
    return model_from_fgraph(fgraph, mutate_fgraph=True)


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


def _optima_starts(point) -> list:
    """The distinct optima of a multi-start fit within OPTIMA_WINDOW of the best."""
    table = getattr(point, "optima_", None)
    if table is None or getattr(point, "optima_params_", None) is None:
        raise DataValidationError(
            "init='optima' needs a LatentClassPMF fitted with method='auto' (it has "
            "optima_); got one without."
        )
    keep = int((table["gap"] <= OPTIMA_WINDOW).sum())
    return list(point.optima_params_[:keep])


def posterior_predict_proba(idata, data, target, *, model_data=None) -> np.ndarray:
    """Posterior-averaged PMF of ``target`` given each row's other observed entries.

    ``Pr(x_t | x_obs, D) = mean over draws of Pr(x_t | x_obs, lambda, A)``: the
    model-averaged counterpart of :meth:`LatentClassPMF.predict_proba`.

    Parameters
    ----------
    idata : xarray.DataTree
        From :func:`sample` (aligned or not: the average does not depend on labels).
    data : CategoricalData, pandas.DataFrame or array_like of int
        Rows to predict for. A CategoricalData or DataFrame is matched to the model's
        variables by name (any column order; a DataFrame may lack variables, which
        are then missing) and its codes to the posterior's categories by label (any
        alphabet order; a label the posterior lacks is an error); integer codes are
        the model's codes in its variable order (:func:`bayespmf.data.as_categorical`).
    target : int or str
        The variable to predict.
    model_data : CategoricalData, optional
        The model's data, for the variable names when ``idata`` records none.

    Returns
    -------
    ndarray, shape (S, I_t)
        Rows sum to one.
    """
    like = _posterior_variables(idata, model_data)
    names, n_cat = list(like.names), [int(k) for k in like.n_categories]
    codes = as_categorical(data, like, name="data").codes
    if isinstance(target, str):
        if target not in names:
            raise DataValidationError(f"Unknown target {target!r}; variables: {names}.")
        target = names.index(target)
    target = check_int(target, "target", low=0, high=len(names) - 1)
    codes = codes.copy()
    codes[:, target] = -1
    fake = CategoricalData(np.zeros((1, len(names)), dtype=np.int64), n_cat, names)
    w, stacked = posterior_params(idata, fake)
    off = offsets_of(n_cat)
    design = one_hot_design(codes, n_cat)
    total = np.zeros((codes.shape[0], n_cat[target]))
    for start in range(0, w.shape[0], _DRAW_BLOCK):
        sl = slice(start, start + _DRAW_BLOCK)
        lj = _log_joint_draws(design, w[sl], np.log(stacked[sl]))  # (d, S, F)
        post_cls = np.exp(lj - logsumexp(lj, axis=2, keepdims=True))
        a_t = stacked[sl, off[target] : off[target + 1], :]  # (d, I_t, F)
        total += np.einsum("dsf,dif->si", post_cls, a_t)
    p = total / w.shape[0]
    return p / p.sum(axis=1, keepdims=True)


def _class_posterior(design, weights, stacked) -> np.ndarray:
    """Pr(class | observed entries of each row) per draw, (D, S, F), Bayes' rule."""
    with np.errstate(divide="ignore"):  # an exact zero is a possible (point) value
        lj = _log_joint_draws(design, weights, np.log(stacked))
    return np.exp(lj - logsumexp(lj, axis=2, keepdims=True))


def posterior_class_proba(
    idata, data=None, *, hdi_prob: float = 0.94, return_draws: bool = False
) -> xr.Dataset | xr.DataArray:
    r"""Per-row class membership from the posterior, with credible intervals.

    For every draw :math:`(\lambda, A)` and row :math:`s`, Bayes' rule gives

    .. math::

        \Pr(h_s = f \mid x_s, \lambda, A) = \frac{\lambda_f \prod_{n \in O_s}
        A_n(x_{sn}, f)}{\sum_g \lambda_g \prod_{n \in O_s} A_n(x_{sn}, g)},

    with :math:`O_s` the observed entries of the row; the draws give its posterior
    mean and highest-density interval (the class counterpart of pymc-extras'
    ``recover_marginals`` for this model, computed from the draws without
    recompiling the model). Class labels are those of ``idata``: pass draws aligned
    by :func:`sample` or :func:`align_labels`, or the average mixes classes.

    Parameters
    ----------
    idata : xarray.DataTree
        Posterior draws from :func:`sample` (aligned).
    data : CategoricalData, pandas.DataFrame or array_like of int, optional
        Rows to classify, matched to the model's variables by name (see
        :func:`posterior_predict_proba`); by default the model's rows recorded in
        ``idata``.
    hdi_prob : float, default 0.94
        Probability mass of the highest-density interval (ArviZ's default).
    return_draws : bool, default False
        Return the per-draw probabilities (chain, draw, row, class) instead of the
        summary.

    Returns
    -------
    xarray.Dataset or xarray.DataArray
        Dims ``(row, class)``: ``mean``, ``sd``, ``hdi_lower``, ``hdi_upper``
        (``.to_dataframe()`` gives one line per row and class); ``hdi_prob`` in
        ``attrs``. With ``return_draws``, the DataArray ``class_proba``.

    Examples
    --------
    >>> import arviz as az
    >>> w, a = np.array([0.5, 0.5]), np.array([[0.9, 0.1], [0.2, 0.8]])  # (class, cat)
    >>> idata = az.from_dict({"posterior": {
    ...     "weights": np.tile(w, (1, 4, 1)), "A_v": np.tile(a, (1, 4, 1, 1))}})
    >>> data = CategoricalData.from_codes([[0], [1]], [2], names=["v"])
    >>> member = posterior_class_proba(idata, data)
    >>> member["mean"].values.round(3)  # Bayes' rule: 0.9 / (0.9 + 0.2), ...
    array([[0.818, 0.182],
           [0.111, 0.889]])
    """
    data = _idata_data(idata, data)
    w, stacked = posterior_params(idata, data)
    post = idata.posterior
    c, d, f = post.sizes["chain"], post.sizes["draw"], w.shape[1]
    design = one_hot_design(data.codes, data.n_categories)
    n_rows = data.n_samples
    # rows per block so that one block of all draws holds about _BLOCK_VALUES numbers
    block = max(1, _BLOCK_VALUES // (c * d * f))
    draws_out = np.empty((c * d, n_rows, f)) if return_draws else None
    mean, sd = np.empty((n_rows, f)), np.empty((n_rows, f))
    hdi = np.empty((n_rows, f, 2))
    for r0 in range(0, n_rows, block):
        rows = slice(r0, r0 + block)
        probs = np.concatenate(
            [
                _class_posterior(design[rows], w[sl], stacked[sl])
                for sl in _draw_slices(w.shape[0])
            ]
        )
        if return_draws:
            draws_out[:, rows] = probs
            continue
        mean[rows], sd[rows] = probs.mean(0), probs.std(0)
        hdi[rows] = hdi_of_draws(probs.reshape(c, d, -1, f), hdi_prob)
    class_coord = post["class"].values if "class" in post.coords else np.arange(f)
    coords = {"row": np.arange(n_rows), "class": class_coord}
    if return_draws:
        return xr.DataArray(
            draws_out.reshape(c, d, n_rows, f),
            dims=("chain", "draw", "row", "class"),
            coords={"chain": post["chain"].values, "draw": post["draw"].values} | coords,
            name="class_proba",
        )
    return xr.Dataset(
        {
            "mean": (("row", "class"), mean),
            "sd": (("row", "class"), sd),
            "hdi_lower": (("row", "class"), hdi[..., 0]),
            "hdi_upper": (("row", "class"), hdi[..., 1]),
        },
        coords=coords,
        attrs={"hdi_prob": hdi_prob},
    )


def impute(idata, data=None, *, random_seed=None) -> xr.DataArray:
    r"""Draws of the missing cells of each row given its observed entries.

    The posterior predictive of the missing entries conditional on the observed ones:
    for each posterior draw :math:`(\lambda, A)` and row :math:`s`, a class is drawn
    from :math:`\Pr(h_s = f \mid x_{s, O_s}, \lambda, A) \propto \lambda_f
    \prod_{n \in O_s} A_n(x_{sn}, f)` (Bayes' rule on the observed entries
    :math:`O_s`), then every missing :math:`x_{sn}` from :math:`A_n(:, h_s)`.
    Observed entries are copied. Over the draws, the frequency of category ``i`` in
    cell ``(s, n)`` estimates :func:`posterior_predict_proba` ``(idata, data, n)[s, i]``
    (for rows where ``n`` is missing). The result does not depend on the class labels,
    so aligned and raw draws give the same distribution.

    ``pm.sample_posterior_predictive`` on the model draws whole new rows instead (the
    class from :math:`\lambda`), for posterior predictive checks.

    Parameters
    ----------
    idata : xarray.DataTree
        Posterior draws from :func:`sample`.
    data : CategoricalData, pandas.DataFrame or array_like of int, optional
        Rows to complete (``-1`` = missing), matched to the model's variables by name
        (see :func:`posterior_predict_proba`); by default the model's rows recorded in
        ``idata``.
    random_seed : int or numpy.random.Generator, optional

    Returns
    -------
    xarray.DataArray
        Integer codes (the smallest signed type that holds them), dims ``(chain,
        draw, row, variable)``, named ``x``: one completed copy of the rows per draw.
        The codes and the ``variable`` order are the posterior's (the model's
        category labels, ``<name>_category`` coordinates of ``idata.posterior``),
        whatever the order or alphabets of ``data``.

    Examples
    --------
    >>> import arviz as az
    >>> w, a = np.array([0.5, 0.5]), np.array([[1.0, 0.0], [0.0, 1.0]])  # (class, cat)
    >>> idata = az.from_dict({"posterior": {
    ...     "weights": np.tile(w, (1, 4, 1)),
    ...     "A_u": np.tile(a, (1, 4, 1, 1)), "A_v": np.tile(a, (1, 4, 1, 1))}})
    >>> data = CategoricalData.from_codes([[0, -1], [-1, 1]], [2, 2], names=["u", "v"])
    >>> filled = impute(idata, data, random_seed=0)
    >>> filled.shape, filled.values[0, 0].tolist()  # u and v always agree here
    ((1, 4, 2, 2), [[0, 0], [1, 1]])
    """
    data = _idata_data(idata, data)
    rng = np.random.default_rng(random_seed)
    w, stacked = posterior_params(idata, data)
    post = idata.posterior
    c, d = post.sizes["chain"], post.sizes["draw"]
    codes = np.asarray(data.codes)
    n_cat = np.asarray(data.n_categories)
    off = offsets_of(n_cat)
    design = one_hot_design(codes, n_cat)
    # the smallest signed integer type that holds the codes (one copy of the rows
    # per draw adds up: 4000 draws of UCI Car are 48 million cells)
    dtype = np.min_scalar_type(-int(n_cat.max()))
    out = np.broadcast_to(codes.astype(dtype), (c * d, *codes.shape)).copy()
    missing = [(n, np.flatnonzero(codes[:, n] < 0)) for n in range(codes.shape[1])]
    missing = [(n, rows) for n, rows in missing if rows.size]
    for sl in _draw_slices(w.shape[0]):
        probs = _class_posterior(design, w[sl], stacked[sl])  # (d, S, F)
        cls = _draw_categorical(probs, rng)  # (d, S)
        for n, rows in missing:
            a_t = np.swapaxes(stacked[sl, off[n] : off[n + 1], :], 1, 2)  # (d, F, I_n)
            p = np.take_along_axis(a_t, cls[:, rows, None], axis=1)  # (d, m, I_n)
            out[sl, rows, n] = _draw_categorical(p, rng)
    return xr.DataArray(
        out.reshape(c, d, *codes.shape),
        dims=("chain", "draw", "row", "variable"),
        coords={
            "chain": post["chain"].values,
            "draw": post["draw"].values,
            "row": np.arange(codes.shape[0]),
            "variable": list(data.names),
        },
        name=OBSERVED_NAME,
    )


def _draw_slices(n_draws: int):
    return [slice(s, s + _DRAW_BLOCK) for s in range(0, n_draws, _DRAW_BLOCK)]


def _draw_categorical(probs, rng) -> np.ndarray:
    """One category per leading index from PMFs along the last axis (inverse CDF)."""
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random((*probs.shape[:-1], 1)) * cdf[..., -1:]
    return np.minimum((cdf <= u).sum(-1), probs.shape[-1] - 1)


def convergence_summary(idata, *, rhat_max: float = 1.01, ess_min: float = 400) -> dict:
    """r-hat, bulk/tail ESS and divergences per variable, with problems named in words.

    Returns
    -------
    dict
        ``table`` (pandas.DataFrame, one row per variable: worst r-hat, smallest bulk and
        tail ESS), ``divergences`` (int), ``problems`` (list of str; empty if none)
        and ``ok`` (bool).
    """
    post = idata["posterior"].to_dataset()
    rows = []
    for var in post.data_vars:  # per variable: different dims (STACK-NOTES.md)
        one = post[[var]]
        rows.append(
            {
                "variable": var,
                "r_hat_max": float(az.rhat(one)[var].max()),
                "ess_bulk_min": float(az.ess(one, method="bulk")[var].min()),
                "ess_tail_min": float(az.ess(one, method="tail")[var].min()),
            }
        )
    table = pd.DataFrame(rows).set_index("variable")
    div = 0
    if "sample_stats" in idata.children and "diverging" in idata.sample_stats:
        div = int(idata.sample_stats["diverging"].values.sum())
    problems = []
    levels = _chain_levels(idata)
    if post.sizes.get("chain", 1) > 1:
        bad = table.index[table["r_hat_max"] > rhat_max].tolist()
        if bad and levels is not None and len(levels[0]) == 1:
            _, means, pooled = levels
            problems.append(
                f"r-hat above {rhat_max} for {bad}: chains disagree, but their mean "
                f"total log-likelihoods agree (largest gap {np.ptp(means):.3g}, "
                f"within-chain sd {pooled:.3g}), so they explore the same region of "
                "the posterior slowly (or label switching was not undone): draw more "
                "(longer tune and draws)."
            )
        elif bad:
            problems.append(
                f"r-hat above {rhat_max} for {bad}: chains disagree (label switching "
                "not undone, several modes, or too few draws)."
            )
    modes = _chain_modes(idata, levels)
    if modes is not None:
        problems.append(modes)
    low = table.index[table["ess_bulk_min"] < ess_min].tolist()
    if low:
        problems.append(
            f"bulk ESS below {ess_min:g} for {low}: draw more or reparametrize."
        )
    if div:
        problems.append(
            f"{div} divergent transitions: raise target_accept (e.g. 0.95) or check the "
            "priors."
        )
    return {"table": table, "divergences": div, "problems": problems, "ok": not problems}


def _chain_levels(idata):
    """``(groups, means, pooled_sd)`` of the chains' total log-likelihood, or None.

    Chains are grouped by their mean total log-likelihood: a gap of more than
    ``MODE_GAP_SDS`` pooled within-chain sds starts a new group (a mode).
    """
    if "log_likelihood" not in idata.children or idata.posterior.sizes.get("chain", 1) < 2:
        return None
    group = idata["log_likelihood"].to_dataset()
    ll = sum(  # (chain, draw): the total over every observed variable and entry
        v.sum([d for d in v.dims if d not in ("chain", "draw")]).values
        for v in group.data_vars.values()
    )
    means, sds = ll.mean(axis=1), ll.std(axis=1)
    pooled = float(np.sqrt(np.mean(sds**2)))
    order = np.argsort(-means)
    groups = [[int(order[0])]]
    for c in order[1:]:
        if means[groups[-1][-1]] - means[c] > MODE_GAP_SDS * max(pooled, 1e-12):
            groups.append([int(c)])
        else:
            groups[-1].append(int(c))
    return groups, means, pooled


def _chain_modes(idata, levels=None) -> str | None:
    """In words: which chains sit in which mode, by their total log-likelihood."""
    levels = _chain_levels(idata) if levels is None else levels
    if levels is None or len(levels[0]) == 1:
        return None
    groups, means, pooled = levels
    parts = [f"chains {sorted(g)} around {means[g].mean():.6g}" for g in groups]
    gap = float(means[groups[0]].mean() - means[groups[-1]].mean())
    started = idata.posterior.attrs.get("chain_start_optimum")
    origin = (
        f" The chains started at optima {list(started)} of the multi-start fit."
        if started is not None
        else ""
    )
    return (
        f"chains sit in {len(groups)} different modes of the posterior (mean total "
        f"log-likelihood: {'; '.join(parts)}; gap {gap:.3g}, within-chain sd "
        f"{pooled:.3g}).{origin} The posterior is multimodal: report the modes "
        "separately (select chains) or sample longer; averages over all chains mix "
        "them."
    )


def select_rank(
    data,
    ranks,
    *,
    criterion: str = "heldout",
    method: str = "auto",
    test_fraction: float = 0.2,
    random_state=None,
    sample_kwargs: dict | None = None,
    n_init: int | None = None,
    bootstrap: bool = False,
):
    """Compare ranks by every criterion at once: fit, information criteria, held-out, LOO.

    The point-estimate columns come from :func:`bayespmf.estimators.compare_ranks`
    (maximized log-likelihood, free parameters, AIC, BIC, CAIC, SABIC, relative entropy,
    replication of the best optimum, the held-out mean log-likelihood per row of a
    random ``test_fraction`` of the rows, and with ``bootstrap`` the bootstrap LRT of
    F - 1 against F classes); ``criterion="loo"`` adds PSIS-LOO (``elpd_loo``, ``se``,
    ``p_loo``) from each rank's posterior (:func:`sample` with ``sample_kwargs``).
    :func:`bayespmf.plots.plot_rank_selection` draws the table.

    Parameters
    ----------
    data : CategoricalData, pandas.DataFrame or array_like of int
    ranks : sequence of int
    criterion : {"heldout", "loo", "bic", "aic", "caic", "sabic"}, default "heldout"
        What picks the returned rank: the highest held-out log-likelihood or ELPD, or
        the lowest information criterion.
    method : str, default "auto"
        :class:`~bayespmf.estimators.LatentClassPMF`'s method for the point estimates.
    test_fraction : float, default 0.2
    random_state : None or int
    sample_kwargs : dict, optional
        Passed to :func:`sample` (``criterion="loo"``).
    n_init : int, optional
    bootstrap : bool, default False
        Add the bootstrap likelihood-ratio test columns (``blrt_lr``, ``blrt_p``).

    Returns
    -------
    table : pandas.DataFrame
        One row per rank.
    best : int
        The rank ``criterion`` prefers.
    """
    from bayespmf.estimators import best_rank, compare_ranks

    keys = {"heldout": "heldout_loglik", "loo": "elpd_loo"}
    keys |= {c: c for c in ("bic", "aic", "caic", "sabic")}
    if criterion not in keys:
        raise DataValidationError(
            f"'criterion' must be one of {list(keys)}; got {criterion!r}."
        )
    data = as_categorical(data)
    table = compare_ranks(
        data,
        ranks,
        method=method,
        n_init=n_init,
        random_state=random_state,
        test_fraction=test_fraction,
        bootstrap=bootstrap,
    )
    if criterion == "loo":
        kw = {"progressbar": False, "random_seed": random_state} | dict(sample_kwargs or {})
        loo = {}
        for r in table.index:
            res = az.loo(sample(data.drop_empty_rows(), rank=int(r), **kw))
            loo[int(r)] = (res.elpd, res.se, res.p)
        for k, name in enumerate(("elpd_loo", "se", "p_loo")):
            table[name] = [loo[int(r)][k] for r in table.index]
    return table, best_rank(table, keys[criterion])
