"""The posterior-predictive rows of the tasks (their ``posterior`` option).

:func:`posterior_options` checks and completes the configurations
(:data:`POSTERIOR_DEFAULTS`); :func:`posterior_rows` samples the latent-class
posterior at each rank of one configuration on a split's training part, started from
the validation-best point estimates (:mod:`bayespmf.apps._task_latent`), and scores on
the test part one row per ``combine`` name (:data:`POSTERIOR_COMBINE`): the draw
average at the chosen rank, the plug-in posterior mean, or a mixture over ranks.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable

import numpy as np

from bayespmf._runtime import n_cpus
from bayespmf._validation import DataValidationError
from bayespmf.apps._task_checks import check_n_components_grid, check_names
from bayespmf.apps._task_latent import params_proba
from bayespmf.fit.latent_class import max_identifiable_rank
from bayespmf.pmf import LatentClassParams, split_factors

#: Posterior-predictive defaults: small, so that a trial stays short
#: (:ref:`bench-apps`).
#: ``ranks``, ``combine``, ``factor_prior``, ``weights_prior`` and ``label`` are
#: explained in :func:`bayespmf.apps.tasks.classify` (``posterior``) and
#: :data:`POSTERIOR_COMBINE`.
POSTERIOR_DEFAULTS = {
    "method": "nuts",
    "draws": 300,
    "tune": 300,
    "chains": 2,
    "cores": None,  # None: one process per chain, up to the CPUs available
    "n_trials": None,  # None: every trial
    "n_components_from": "cnmf-spa-em",
    "candidates": None,  # None: the rank n_components_from chose on the validation part
    "combine": ("chosen",),
    "factor_prior": 1.0,
    "weights_prior": 1.0,
    "label": "",
}

#: How the posterior rows of one ``posterior`` configuration predict; each name in its
#: ``combine`` option gives one row, all from the same draws:
#:
#: * ``"chosen"``: the posterior at the rank ``n_components_from`` chose on the validation
#:   part, ``Pr(y | x)`` averaged over the draws (row ``"<method>-posterior"``);
#: * ``"plugin"``: the same posterior, its mean PMF (aligned draws) plugged into
#:   Bayes' rule, for comparison with the draw average;
#: * ``"val-best"``: the sampled rank whose draw-averaged prediction scores best on
#:   the validation part (accuracy, or RMSE of the conditional mean);
#: * ``"stacking"``, ``"pseudo-BMA"``, ``"BB-pseudo-BMA"``: the mixture of the
#:   posteriors at every sampled rank with ``az.compare``'s weights from PSIS-LOO of
#:   the training rows' log-likelihood
#:   (:func:`bayespmf.models.averaging.rank_weights`);
#: * ``"val-stacking"``: the same mixture with the stacking weights of the
#:   validation part's log predictive density of the predicted entries
#:   (:func:`bayespmf.models.averaging.stacking_weights`).
POSTERIOR_COMBINE = (
    "chosen",
    "plugin",
    "val-best",
    "stacking",
    "pseudo-BMA",
    "BB-pseudo-BMA",
    "val-stacking",
)

#: The ``combine`` options that weight the ranks by PSIS-LOO (``az.compare``).
LOO_COMBINE = ("stacking", "pseudo-BMA", "BB-pseudo-BMA")


def posterior_options(posterior) -> list[dict]:
    """The posterior configurations (a list, empty for none), checked and completed."""
    if posterior is False or posterior is None:
        return []
    if posterior is True:
        posterior = [{}]
    elif isinstance(posterior, dict):
        posterior = [posterior]
    if not isinstance(posterior, list | tuple) or not all(
        isinstance(p, dict) for p in posterior
    ):
        raise DataValidationError(
            "'posterior' must be False, True or a dict of options (or a list of such "
            f"dicts); got {posterior!r}."
        )
    out, names = [], set()
    for p in posterior:
        check_names(list(p), POSTERIOR_DEFAULTS, "posterior option")
        opts = POSTERIOR_DEFAULTS | p
        combine = opts["combine"]
        combine = [combine] if isinstance(combine, str) else list(combine)
        opts["combine"] = tuple(check_names(combine, POSTERIOR_COMBINE, "combine"))
        if not opts["combine"]:
            raise DataValidationError("'combine' must name at least one row.")
        if opts["candidates"] is not None:
            opts["candidates"] = tuple(check_n_components_grid(opts["candidates"]))
        for row in opts["combine"]:
            name = posterior_row_name(opts, row)
            if name in names:
                raise DataValidationError(
                    f"Two posterior configurations give the row {name!r}; tell them "
                    "apart with the 'label' option."
                )
            names.add(name)
        out.append(opts)
    return out


def posterior_row_name(opts, combine) -> str:
    base = f"{opts['method']}-posterior"
    if opts["label"]:
        base += f" {opts['label']}"
    return base if combine == "chosen" else f"{base} ({combine})"


def sample_posterior(train, n_components, init, opts, seed, progressbar, log_likelihood):
    """NUTS (or ADVI) on ``train`` at ``n_components`` from ``init``: (idata, seconds)."""
    from bayespmf.models import latent_class_model, sample

    sampler = {k: opts[k] for k in ("method", "draws", "tune", "chains")}
    if opts["method"] == "nuts":
        sampler["cores"] = opts["cores"] or min(opts["chains"], n_cpus())
    else:  # ADVI: one chain of draws from the fitted approximation
        sampler["chains"] = 1
    if opts["factor_prior"] == 1.0 and opts["weights_prior"] == 1.0:
        target, extra = (
            train,
            {"n_components": n_components},
        )  # sample() builds the default model
    else:
        target, extra = (
            latent_class_model(
                train,
                n_components,
                factor_prior=opts["factor_prior"],
                weights_prior=opts["weights_prior"],
            ),
            {},
        )
    t0 = time.perf_counter()
    logger = logging.getLogger("pymc")
    level = logger.level
    if not progressbar:  # PyMC announces every run at INFO level
        logger.setLevel(logging.WARNING)
    try:
        idata = sample(
            target,
            init=init,
            random_seed=seed,
            progressbar=progressbar,
            log_likelihood=log_likelihood,
            **extra,
            **sampler,
        )
    finally:
        logger.setLevel(level)
    return idata, time.perf_counter() - t0


class CachedProba:
    """``proba(codes, j)`` that computes each distinct request once.

    The posterior rows of one configuration score the same posteriors on the same
    rows several times (validation and test, alone and in mixtures).
    """

    def __init__(self, fn):
        self.fn = fn
        self.cache = {}

    def __call__(self, codes, j):
        codes = np.ascontiguousarray(codes)
        key = (int(j), codes.shape, codes.tobytes())
        if key not in self.cache:
            self.cache[key] = self.fn(codes, j)
        return self.cache[key]


def mixture_proba(probas: dict, weights: dict) -> Callable:
    """``proba(codes, j)`` of the mixture ``sum_r weights[r] probas[r]``."""
    used = {r: w for r, w in weights.items() if w > 0}
    total = sum(used.values())

    def proba(codes, j):
        p = sum(w / total * probas[r](codes, j) for r, w in used.items())
        return p / p.sum(axis=1, keepdims=True)

    return proba


def plugin_proba(idata, train) -> Callable:
    """``proba(codes, j)`` of the posterior-mean PMF (aligned draws) plugged in."""
    from bayespmf.models import posterior_params

    w, stacked = posterior_params(idata, train)
    params = LatentClassParams(
        w.mean(axis=0), split_factors(stacked.mean(axis=0), train.n_categories)
    )
    return params_proba(params)


def weights_text(weights: dict) -> str:
    return " ".join(f"{r}:{w:.2f}" for r, w in weights.items())


def posterior_rows(split, src, opts, seed, progressbar=False):
    """The posterior rows of one configuration on one split.

    ``src`` is the validation selection of ``opts["n_components_from"]``
    (:func:`select_latent`):
    its rank is the chosen rank and its best iterate at every rank starts the chains
    there. Returns a list of ``(row name, test metrics, selected, seconds, max r-hat,
    extra record fields)``.
    """
    from bayespmf.models import convergence_summary, posterior_predict_proba
    from bayespmf.models.averaging import rank_weights, stacking_weights

    combine = opts["combine"]
    train = split.train.drop_empty_rows()
    chosen = src["n_components"]
    limit = max_identifiable_rank(split.n_cat)
    candidates = {chosen} if opts["candidates"] is None else set(opts["candidates"])
    if {"chosen", "plugin"} & set(combine):
        candidates.add(chosen)
    candidates = sorted(r for r in candidates if r <= limit)
    if not candidates:
        raise DataValidationError(
            f"No posterior rank in {opts['candidates']} is identifiable (at most {limit})."
        )
    need_loo = any(c in LOO_COMBINE for c in combine) and len(candidates) > 1
    fits = {}
    for r in candidates:
        init = src["by_rank"].get(r, {}).get("params", "auto")
        idata, elapsed = sample_posterior(train, r, init, opts, seed, progressbar, need_loo)
        rhat = np.nan
        if opts["method"] == "nuts" and opts["chains"] > 1:
            rhat = float(convergence_summary(idata)["table"]["r_hat_max"].max())

        def proba(codes, j, idata=idata):
            return posterior_predict_proba(idata, codes, j, model_data=train)

        fits[r] = {
            "idata": idata,
            "elapsed": elapsed,
            "rhat": rhat,
            "proba": CachedProba(proba),
        }
    probas = {r: f["proba"] for r, f in fits.items()}
    all_s = sum(f["elapsed"] for f in fits.values())
    all_rhat = max(f["rhat"] for f in fits.values())
    rows = []
    for how in combine:
        extra = {}
        if how in ("chosen", "plugin"):
            f = fits[chosen]
            proba = probas[chosen] if how == "chosen" else plugin_proba(f["idata"], train)
            selected = f"n_components={chosen} (from {opts['n_components_from']})"
            rows.append(
                (
                    posterior_row_name(opts, how),
                    split.evaluate_proba(proba, "test"),
                    selected,
                    f["elapsed"],
                    f["rhat"],
                    extra,
                )
            )
            continue
        if how == "val-best":
            scores = {
                r: split.score(split.evaluate_proba(probas[r], "val")) for r in candidates
            }
            top = max(scores, key=scores.get)
            weights = {r: float(r == top) for r in candidates}
        elif how == "val-stacking":
            lpd = np.column_stack([split.log_score(probas[r], "val") for r in candidates])
            # a rating no posterior can predict (probability 0 in floating point)
            lpd = np.maximum(lpd, np.log(np.finfo(float).tiny))
            weights = dict(zip(candidates, stacking_weights(lpd).tolist(), strict=True))
        elif need_loo:
            idatas = {r: fits[r]["idata"] for r in candidates}
            with warnings.catch_warnings():  # Pareto k warnings: PSIS-LOO is a guide
                warnings.simplefilter("ignore", UserWarning)
                weights = rank_weights(idatas, method=how, seed=seed).to_dict()
        else:  # one rank: nothing to weight
            weights = {candidates[0]: 1.0}
        top = max(weights, key=weights.get)
        extra["rank_weights"] = weights_text(weights)
        rows.append(
            (
                posterior_row_name(opts, how),
                split.evaluate_proba(mixture_proba(probas, weights), "test"),
                f"top n_components={top} of {candidates}",
                all_s,
                all_rhat,
                extra,
            )
        )
    return rows
