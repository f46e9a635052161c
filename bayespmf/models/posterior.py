"""Sampling, label alignment and posterior prediction for the latent-class model."""

from __future__ import annotations

import json

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import logsumexp

from bayespmf._validation import (
    DataValidationError,
    as_codes,
    check_int,
    check_random_state,
)
from bayespmf.data import CategoricalData
from bayespmf.models._alignment import apply_permutations, hungarian_permutations
from bayespmf.models._sampling import run_sampler
from bayespmf.models.latent_class import factor_var_name, latent_class_model, one_hot_design
from bayespmf.pmf import LatentClassParams, check_params, offsets_of

__all__ = [
    "align_labels",
    "convergence_summary",
    "initvals_from_params",
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

#: Draws per block when a posterior quantity is computed over all draws at once.
_DRAW_BLOCK = 64


def _model_data(model) -> tuple[CategoricalData, int]:
    try:
        return model._bayespmf_data, model._bayespmf_rank
    except AttributeError as err:
        raise DataValidationError(
            "'model' must be built by bayespmf.models.latent_class_model."
        ) from err


def _params_of(init, data: CategoricalData, rank: int) -> LatentClassParams:
    if hasattr(init, "weights_") and hasattr(init, "factors_"):
        weights, factors = init.weights_, init.factors_
    elif isinstance(init, LatentClassParams | tuple) and len(init) == 2:
        weights, factors = init
    elif isinstance(init, dict) and {"weights", "factors"} <= set(init):
        weights, factors = init["weights"], init["factors"]
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
    return check_params(weights, factors, data.n_categories)


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


def posterior_params(idata, data: CategoricalData, group: str = "posterior"):
    """Stacked draws: weights (D, F) and stacked factors (D, sum I, F).

    ``D`` is chains x draws, in chain-major order.
    """
    post = getattr(idata, group)
    w = post["weights"].values
    c, d, f = w.shape
    stacked = np.concatenate(
        [
            np.swapaxes(post[factor_var_name(n)].values, -1, -2).reshape(c * d, -1, f)
            for n in data.names
        ],
        axis=1,
    )
    return w.reshape(c * d, f), stacked


def _log_joint_draws(design, weights, stacked_log):
    # (D, S, F) = O (S, sumI) @ log A (D, sumI, F) + log w (D, 1, F)
    out = np.stack([design @ la for la in stacked_log])
    return out + np.log(weights)[:, None, :]


def _log_likelihood_rows_draws(data, weights, stacked):
    design = one_hot_design(data.codes, data.n_categories)
    rows = []
    for start in range(0, weights.shape[0], _DRAW_BLOCK):
        sl = slice(start, start + _DRAW_BLOCK)
        lj = _log_joint_draws(design, weights[sl], np.log(stacked[sl]))
        rows.append(logsumexp(lj, axis=2))
    return np.concatenate(rows, axis=0)  # (D, S)


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
    idata : arviz.InferenceData
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
    arviz.InferenceData
        A new object whose ``posterior`` is aligned; the draws as sampled are kept in
        the group ``unaligned_posterior`` and the permutations (``perm[f]`` = raw
        class put at position ``f``) in ``sample_stats["class_permutation"]``.
    """
    names = _names(idata, data)
    post = idata.posterior
    rank = post.sizes["class"]
    n_cat = [post.sizes[f"{n}_category"] for n in names]
    fake = CategoricalData(np.zeros((1, len(names)), dtype=np.int64), n_cat, names)
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
    if names is None:
        raise DataValidationError("Pass 'data' (the data the model was built from).")
    return json.loads(names) if isinstance(names, str) else list(names)


def sample(
    model_or_data,
    *,
    rank: int | None = None,
    init="auto",
    method: str = "nuts",
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    random_seed=None,
    progressbar: bool = True,
    align: bool = True,
    log_likelihood: bool = True,
    advi_iterations: int = 20000,
    **sample_kwargs,
):
    """Draw from the posterior of a latent-class model by NUTS or ADVI.

    Parameters
    ----------
    model_or_data : pymc.Model or CategoricalData
        A model from :func:`latent_class_model`, or data (then ``rank`` is required
        and the model is built with default priors).
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
    draws, tune, chains : int
        For NUTS; for ADVI ``draws`` samples are taken from the fitted approximation
        (one chain) after ``advi_iterations`` optimization steps.
    random_seed : int, optional
    align : bool, default True
        Relabel classes draw by draw (see :func:`align_labels`) against the point
        estimate (``init``, or a CNMF-SPA-EM fit when ``init`` is None).
    log_likelihood : bool, default True
        Add a ``log_likelihood`` group with the per-row log-likelihood (for
        ``az.loo``/``az.waic``).
    **sample_kwargs
        Passed to ``pm.sample`` (e.g. ``target_accept``); see
        :func:`bayespmf.models._sampling.run_sampler` for the defaults of ``init``
        and ``cores``.

    Returns
    -------
    arviz.InferenceData
        ``attrs`` record the wall time (``sampling_time``) and the method.
    """
    import pymc as pm

    from bayespmf.estimators import LatentClassPMF

    if method not in ("nuts", "advi"):
        raise DataValidationError(f"'method' must be 'nuts' or 'advi'; got {method!r}.")
    if isinstance(model_or_data, pm.Model):
        model = model_or_data
    else:
        if rank is None:
            raise DataValidationError(
                "'rank' is required when data (not a model) are given."
            )
        model = latent_class_model(model_or_data, rank)
    data, rank = _model_data(model)
    draws = check_int(draws, "draws", low=1)
    tune = check_int(tune, "tune", low=0)
    chains = check_int(chains, "chains", low=1)
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
    idata, elapsed = run_sampler(
        model,
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
    idata.posterior.attrs["bayespmf_variables"] = json.dumps(list(data.names))
    idata.posterior.attrs["sampling_method"] = method
    idata.posterior.attrs["sampling_time"] = elapsed
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
    if log_likelihood:
        w, st = posterior_params(idata, data)
        ll = _log_likelihood_rows_draws(data, w, st)
        c, d = idata.posterior.sizes["chain"], idata.posterior.sizes["draw"]
        ds = xr.Dataset(
            {"x": (("chain", "draw", "row"), ll.reshape(c, d, -1))},
            coords={
                "chain": idata.posterior["chain"],
                "draw": idata.posterior["draw"],
                "row": np.arange(ll.shape[1]),
            },
        )
        idata.add_groups({"log_likelihood": ds})
    return idata


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
    idata : arviz.InferenceData
        From :func:`sample` (aligned or not: the average does not depend on labels).
    data : CategoricalData or array_like of int
        Rows to predict for (same variables as the model's data).
    target : int or str
        The variable to predict.

    Returns
    -------
    ndarray, shape (S, I_t)
        Rows sum to one.
    """
    names = _names(idata, model_data)
    post = idata.posterior
    n_cat = [post.sizes[f"{n}_category"] for n in names]
    codes, _ = as_codes(data, n_cat, name="data", allow_empty_columns=True)
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


def convergence_summary(idata, *, rhat_max: float = 1.01, ess_min: float = 400) -> dict:
    """r-hat, bulk/tail ESS and divergences per variable, with problems named in words.

    Returns
    -------
    dict
        ``table`` (pandas.DataFrame, one row per variable: worst r-hat, smallest bulk and
        tail ESS), ``divergences`` (int), ``problems`` (list of str; empty if none)
        and ``ok`` (bool).
    """
    post = idata.posterior
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
    if "sample_stats" in idata.groups() and "diverging" in idata.sample_stats:
        div = int(idata.sample_stats["diverging"].values.sum())
    problems = []
    if post.sizes.get("chain", 1) > 1:
        bad = table.index[table["r_hat_max"] > rhat_max].tolist()
        if bad:
            problems.append(
                f"r-hat above {rhat_max} for {bad}: chains disagree (label switching "
                "not undone, several modes, or too few draws)."
            )
    modes = _chain_modes(idata)
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


def _chain_modes(idata) -> str | None:
    """In words: which chains sit in which mode, by their total log-likelihood."""
    if "log_likelihood" not in idata.groups() or idata.posterior.sizes.get("chain", 1) < 2:
        return None
    ll = idata.log_likelihood["x"].sum("row").values  # (chain, draw)
    means, sds = ll.mean(axis=1), ll.std(axis=1)
    pooled = float(np.sqrt(np.mean(sds**2)))
    order = np.argsort(-means)
    groups = [[int(order[0])]]
    for c in order[1:]:
        if means[groups[-1][-1]] - means[c] > MODE_GAP_SDS * max(pooled, 1e-12):
            groups.append([int(c)])
        else:
            groups[-1].append(int(c))
    if len(groups) == 1:
        return None
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
):
    """Compare ranks by held-out log-likelihood (point estimates) or PSIS-LOO (posteriors).

    Parameters
    ----------
    data : CategoricalData
    ranks : sequence of int
    criterion : {"heldout", "loo"}
        ``"heldout"``: fit :class:`LatentClassPMF` on a random ``1 - test_fraction``
        of the rows and score the rest (mean log-likelihood per row). ``"loo"``: sample
        each rank's posterior with :func:`sample` (``sample_kwargs``) and compare with
        ``az.loo`` (expected log pointwise predictive density).

    Returns
    -------
    table : pandas.DataFrame
        One row per rank.
    best : int
        The rank with the highest held-out log-likelihood or ELPD.
    """
    from bayespmf.estimators import LatentClassPMF

    if not isinstance(data, CategoricalData):
        data = CategoricalData(*as_codes(data))
    ranks = [check_int(r, "ranks", low=1) for r in ranks]
    if not ranks:
        raise DataValidationError("'ranks' must list at least one rank.")
    rows = []
    if criterion == "heldout":
        train, test = data.train_test_split(
            1 - test_fraction, test_fraction, random_state=random_state
        )
        for r in ranks:
            est = LatentClassPMF(r, method=method, random_state=random_state).fit(train)
            rows.append(
                {
                    "rank": r,
                    "train_loglik": est.score(train),
                    "heldout_loglik": est.score(test),
                    "seconds": est.fit_time_,
                }
            )
        key = "heldout_loglik"
    elif criterion == "loo":
        kw = {"progressbar": False, "random_seed": random_state} | dict(sample_kwargs or {})
        for r in ranks:
            idata = sample(data.drop_empty_rows(), rank=r, **kw)
            loo = az.loo(idata)
            rows.append(
                {"rank": r, "elpd_loo": loo.elpd_loo, "se": loo.se, "p_loo": loo.p_loo}
            )
        key = "elpd_loo"
    else:
        raise DataValidationError(
            f"'criterion' must be 'heldout' or 'loo'; got {criterion!r}."
        )
    table = pd.DataFrame(rows).set_index("rank")
    return table, int(table[key].idxmax())
