"""What users do with a joint PMF: classify a variable, predict held-out ratings.

Both tasks follow the protocol of the CNMF paper (Ibrahim & Fu, Sec. 5.3-5.4) and run
the baselines in the same loop, on the same splits:

* :func:`classify` -- MAP prediction of a target variable from the others. Each trial
  splits the rows at random 50 : 20 : 30 into training, validation and test parts; the
  rank (and, for the EM-based methods, the number of iterations) is the one with the
  best validation accuracy; accuracy is measured on the test part.
* :func:`predict_ratings` -- each trial hides 20 % (validation) and 30 % (test) of the
  observed ratings at random and learns from the remaining 50 %; a hidden rating is
  predicted from the user's remaining ratings by the conditional mean (MMSE) and the
  conditional mode (MAP); RMSE and MAE are measured on the test entries.

Both return a :class:`pandas.DataFrame` with one row per method, mean and standard
deviation over trials, and the per-trial records in ``.attrs["trials"]``.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from bayespmf._progress import progress_bar
from bayespmf._runtime import n_cpus
from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    check_int,
    check_random_state,
)
from bayespmf.apps.baselines import (
    CLASSIFIER_GRIDS,
    CLASSIFIERS,
    RATING_BASELINES,
    BiasedMF,
    classifier_features,
    fit_classifier,
    rating_average,
)
from bayespmf.data import CategoricalData
from bayespmf.fit.latent_class import EM_METHODS, METHODS, max_identifiable_rank
from bayespmf.pmf import LatentClassParams, conditional_pmf, split_factors

__all__ = [
    "CLASSIFY_METHODS",
    "DEFAULT_RANKS",
    "ITER_CHECKPOINTS",
    "POSTERIOR_COMBINE",
    "POSTERIOR_DEFAULTS",
    "RATING_METHODS",
    "check_task_inputs",
    "classify",
    "predict_ratings",
]

#: Latent-class methods run by default (CNMF-OPT is available but costs seconds to
#: minutes per fit; pass it explicitly).
CLASSIFY_METHODS = ("cnmf-spa", "cnmf-spa-em", "em", "squarem")
RATING_METHODS = ("cnmf-spa", "cnmf-spa-em", "em", "squarem")

#: Rank grid searched on the validation part: from a handful of classes to 20, roughly
#: geometric (accuracy changes little between neighbouring large ranks).
DEFAULT_RANKS = (2, 3, 5, 8, 12, 20)

#: Iterations at which an EM-based fit is scored on the validation part, besides its
#: last iterate: "the number of iterations is chosen on the validation set" (Sec. 5.3).
#: Roughly geometric so the cost stays a few evaluations per fit.
ITER_CHECKPOINTS = (5, 10, 20, 50, 100, 200, 500)

#: Methods whose last stage is one EM run (their iteration count is selected on
#: validation): the EM-based methods of bayespmf.fit but the multi-start "auto".
_EM_METHODS = tuple(m for m in EM_METHODS if m != "auto")

#: Hyperparameter grid of the biased-MF baseline, searched on the validation part.
BMF_GRID = {"rank": [2, 5, 10], "reg": [1.0, 3.0, 10.0, 30.0]}

#: ALS sweeps of the biased-MF baseline (the validation RMSE is flat after ~15 here).
BMF_EPOCHS = 30

#: Posterior-predictive defaults: small, so a trial takes about a minute on 2 cores.
#: ``ranks``, ``combine``, ``factor_prior``, ``weights_prior`` and ``label`` are
#: explained in :func:`classify` (``posterior``) and :data:`POSTERIOR_COMBINE`.
POSTERIOR_DEFAULTS = {
    "method": "nuts",
    "draws": 300,
    "tune": 300,
    "chains": 2,
    "cores": None,  # None: one process per chain, up to the CPUs available
    "n_trials": None,  # None: every trial
    "rank_from": "cnmf-spa-em",
    "ranks": None,  # None: only the rank rank_from chose on the validation part
    "combine": ("chosen",),
    "factor_prior": 1.0,
    "weights_prior": 1.0,
    "label": "",
}

#: How the posterior rows of one ``posterior`` configuration predict; each name in its
#: ``combine`` option gives one row, all from the same draws:
#:
#: * ``"chosen"``: the posterior at the rank ``rank_from`` chose on the validation
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
_LOO_COMBINE = ("stacking", "pseudo-BMA", "BB-pseudo-BMA")


# --------------------------------------------------------------------- inputs


def _resolve_classify(data_or_name, target):
    from bayespmf import datasets

    if isinstance(data_or_name, str):
        data, default = datasets.load(data_or_name)
    elif isinstance(data_or_name, datasets.Dataset):
        data, default = data_or_name
    elif isinstance(data_or_name, CategoricalData):
        data, default = data_or_name, None
    else:
        raise DataValidationError(
            "'data_or_name' must be a shipped data set's name (e.g. 'car'), a Dataset or "
            f"a CategoricalData; got {type(data_or_name).__name__}."
        )
    target = default if target is None else target
    if target is None:
        raise DataValidationError(
            "'target' is required: this data set has no default class variable."
        )
    return data, data.index_of(target)


def _resolve_ratings(data_or_genre):
    from bayespmf import datasets

    if isinstance(data_or_genre, str):
        genres = {g.lower(): g for g in datasets.movielens_genres()}
        genre = genres.get(data_or_genre.lower(), data_or_genre)
        return datasets.load_movielens(genre).data
    if isinstance(data_or_genre, datasets.Dataset):
        return data_or_genre.data
    if isinstance(data_or_genre, CategoricalData):
        return data_or_genre
    raise DataValidationError(
        "'data_or_genre' must be a MovieLens genre (e.g. 'action') or a CategoricalData "
        f"of ratings; got {type(data_or_genre).__name__}."
    )


def rating_values(data: CategoricalData) -> list[np.ndarray]:
    """Numeric value of every category of every variable (the rating scale).

    Categories that all parse as numbers give those numbers; otherwise the codes
    ``1..I_n``.

    Examples
    --------
    >>> d = CategoricalData.from_codes([[0, 2]], 3, categories=[["1", "2", "3"]] * 2)
    >>> [v.tolist() for v in rating_values(d)]
    [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    """
    out = []
    for cats, k in zip(data.categories, data.n_categories, strict=True):
        try:
            out.append(np.array([float(c) for c in cats]))
        except (TypeError, ValueError):
            out.append(np.arange(1.0, int(k) + 1.0))
    return out


def _check_names(names, allowed, what):
    names = [names] if isinstance(names, str) else list(names)
    bad = [m for m in names if m not in allowed]
    if bad:
        import difflib

        close = difflib.get_close_matches(str(bad[0]), list(allowed), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DataValidationError(
            f"Unknown {what} {bad[0]!r}; choose from {list(allowed)}.{hint}"
        )
    return names


def _check_ranks(ranks):
    ranks = [ranks] if isinstance(ranks, int | np.integer) else list(ranks)
    if not ranks:
        raise DataValidationError("'ranks' must list at least one rank.")
    return sorted({check_int(r, "ranks", low=1) for r in ranks})


def _posterior_options(posterior) -> list[dict]:
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
        _check_names(list(p), POSTERIOR_DEFAULTS, "posterior option")
        opts = POSTERIOR_DEFAULTS | p
        combine = opts["combine"]
        combine = [combine] if isinstance(combine, str) else list(combine)
        opts["combine"] = tuple(_check_names(combine, POSTERIOR_COMBINE, "combine"))
        if not opts["combine"]:
            raise DataValidationError("'combine' must name at least one row.")
        if opts["ranks"] is not None:
            opts["ranks"] = tuple(_check_ranks(opts["ranks"]))
        for row in opts["combine"]:
            name = _posterior_row_name(opts, row)
            if name in names:
                raise DataValidationError(
                    f"Two posterior configurations give the row {name!r}; tell them "
                    "apart with the 'label' option."
                )
            names.add(name)
        out.append(opts)
    return out


def _posterior_row_name(opts, combine) -> str:
    base = f"{opts['method']}-posterior"
    if opts["label"]:
        base += f" {opts['label']}"
    return base if combine == "chosen" else f"{base} ({combine})"


def _trial_seeds(random_state, n_trials):
    rng = check_random_state(random_state)
    return [int(s) for s in rng.integers(0, 2**31 - 1, size=n_trials)]


# --------------------------------------------------------------------- splits


class _ClassifySplit:
    """One random train/validation/test split for classification of variable ``j``."""

    metric = "accuracy"

    def __init__(self, data, j, fractions, seed):
        self.train, val, test = data.train_test_split(*fractions, random_state=seed)
        self.j = j
        self.n_cat = data.n_categories
        self.parts = {}
        for name, part in (("val", val), ("test", test)):
            obs = part.mask[:, j]
            if not obs.any():
                raise DataValidationError(
                    f"The {name} part of a split has no row with the target observed."
                )
            self.parts[name] = (part.codes[obs], part.codes[obs, j])

    def evaluate_proba(self, proba_fn, part):
        x, _ = self.parts[part]
        return self.evaluate_pred(np.argmax(proba_fn(x, self.j), axis=1), part)

    def evaluate_pred(self, pred, part):
        return {"accuracy": float(np.mean(pred == self.parts[part][1]))}

    def log_score(self, proba_fn, part):
        """Log predictive probability of each row's target, (n,)."""
        x, y = self.parts[part]
        p = proba_fn(x, self.j)
        with np.errstate(divide="ignore"):
            return np.log(p[np.arange(y.size), y])

    @staticmethod
    def score(metrics):
        return metrics["accuracy"]


class _RatingSplit:
    """One random hiding of 20 % (validation) and 30 % (test) of the observed entries."""

    metric = "rmse"

    def __init__(self, data, fractions, seed):
        train_f, val_f, _ = fractions
        rng = np.random.default_rng(seed)
        masked, hidden = data.hide_entries(1.0 - train_f, min_observed=1, random_state=rng)
        perm = rng.permutation(hidden.shape[0])
        n_val = round(val_f / (1.0 - train_f) * hidden.shape[0])
        self.train = masked
        self.n_cat = data.n_categories
        self.values = rating_values(data)
        self.parts = {
            "val": hidden[np.sort(perm[:n_val])],
            "test": hidden[np.sort(perm[n_val:])],
        }
        v = self.values
        for name, h in self.parts.items():
            if h.shape[0] == 0:
                raise DataValidationError(f"The {name} part hides no rating.")
            self.parts[name] = (h, np.array([v[c][k] for _, c, k in h]))
        vmax = max(len(x) for x in v)
        table = np.full((len(v), vmax), np.nan)
        for n, x in enumerate(v):
            table[n, : len(x)] = x
        codes = masked.codes
        cols = np.broadcast_to(np.arange(codes.shape[1]), codes.shape)
        self.ratings = np.where(codes >= 0, table[cols, np.maximum(codes, 0)], np.nan)
        self.lo = min(float(x.min()) for x in v)
        self.hi = max(float(x.max()) for x in v)

    def evaluate_proba(self, proba_fn, part):
        h, _ = self.parts[part]
        mmse = np.empty(h.shape[0])
        mode = np.empty(h.shape[0])
        codes = self.train.codes
        for j in np.unique(h[:, 1]):
            sel = np.flatnonzero(h[:, 1] == j)
            p = proba_fn(codes[h[sel, 0]], int(j))
            mmse[sel] = p @ self.values[j]
            mode[sel] = self.values[j][np.argmax(p, axis=1)]
        out = self.evaluate_pred(mmse, part)
        out_map = self.evaluate_pred(mode, part)
        out["rmse_map"], out["mae_map"] = out_map["rmse"], out_map["mae"]
        return out

    def log_score(self, proba_fn, part):
        """Log predictive probability of each hidden rating, (n,)."""
        h, _ = self.parts[part]
        out = np.empty(h.shape[0])
        codes = self.train.codes
        for j in np.unique(h[:, 1]):
            sel = np.flatnonzero(h[:, 1] == j)
            p = proba_fn(codes[h[sel, 0]], int(j))
            with np.errstate(divide="ignore"):
                out[sel] = np.log(p[np.arange(sel.size), h[sel, 2]])
        return out

    def evaluate_pred(self, pred, part):
        err = np.asarray(pred, dtype=float) - self.parts[part][1]
        return {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err)))}

    @staticmethod
    def score(metrics):
        return -metrics["rmse"]


# --------------------------------------------------------------------- latent class


def _params_proba(params: LatentClassParams) -> Callable:
    """``proba(codes, j)`` of a point estimate.

    A row that has probability zero under every class gets the model's marginal PMF of
    the target (``bayespmf.pmf.posterior_classes`` falls back to the prior).
    """

    def proba(codes, j):
        with np.errstate(divide="ignore"):
            return conditional_pmf(codes, params.weights, params.factors, j)

    return proba


def _fit_latent(method, train, rank, seed, max_iter, tol, on_checkpoint):
    """Fit one method, calling ``on_checkpoint(n_iter, params)`` along the way.

    It is called at the iterations of :data:`ITER_CHECKPOINTS` (EM-based methods) and
    at the end.

    The EM-based methods run exactly the stages of :class:`LatentClassPMF` (same random
    stream, same start, same EM), with a callback to score intermediate iterates.

    Returns ``(n_iter, converged)``.
    """
    from bayespmf.estimators import LatentClassPMF

    checkpoints = set(ITER_CHECKPOINTS) if method in _EM_METHODS else set()
    n_cat = train.n_categories

    def callback(it, state):
        if it in checkpoints:
            on_checkpoint(
                it,
                LatentClassParams(
                    state.weights, split_factors(state.factors_stacked, n_cat)
                ),
            )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = LatentClassPMF(rank, method, max_iter=max_iter, tol=tol, random_state=seed)
        est.fit(train, callback=callback)
    _reraise_others(caught)
    if est.n_iter_ not in checkpoints:
        on_checkpoint(est.n_iter_, est.params_)
    return est.n_iter_, est.converged_


def _reraise_others(caught):
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _select_latent(method, split, ranks, seed, max_iter, tol):
    """Fit ``method`` at every rank; keep the (rank, iterate) best on validation."""
    best = {"score": -np.inf}
    limit = max_identifiable_rank(split.n_cat)
    notes = []
    n_not_converged = 0
    per_rank = {}
    by_rank = {}
    t_all = time.perf_counter()
    for rank in ranks:
        if rank > limit:
            notes.append(f"rank {rank} > identifiable {limit}, skipped")
            continue
        t0 = time.perf_counter()

        def on_checkpoint(it, params, rank=rank, t0=t0):
            m = split.evaluate_proba(_params_proba(params), "val")
            s = split.score(m)
            if s > best["score"]:
                best.update(score=s, rank=rank, n_iter=it, params=params, t0=t0)
            # the best iterate of every rank: starts of posteriors at several ranks
            if s > by_rank.get(rank, {"score": -np.inf})["score"]:
                by_rank[rank] = {"score": s, "n_iter": it, "params": params}

        try:
            _, converged = _fit_latent(
                method, split.train, rank, seed, max_iter, tol, on_checkpoint
            )
        except DataValidationError as err:
            notes.append(f"rank {rank}: {err}")
            continue
        n_not_converged += not converged
        per_rank[rank] = time.perf_counter() - t0
    if "params" not in best:
        raise DataValidationError(
            f"No rank in {ranks} could be fitted by {method!r}: {'; '.join(notes)}"
        )
    best["fit_s"] = per_rank[best["rank"]]
    best["total_s"] = time.perf_counter() - t_all
    best["not_converged"] = n_not_converged
    best["notes"] = notes
    best["by_rank"] = by_rank
    return best


def _sample_posterior(train, rank, init, opts, seed, progressbar, log_likelihood):
    """NUTS (or ADVI) on ``train`` at ``rank`` from ``init``: ``(idata, seconds)``."""
    from bayespmf.models import latent_class_model, sample

    sampler = {k: opts[k] for k in ("method", "draws", "tune", "chains")}
    if opts["method"] == "nuts":
        sampler["cores"] = opts["cores"] or min(opts["chains"], n_cpus())
    else:  # ADVI: one chain of draws from the fitted approximation
        sampler["chains"] = 1
    if opts["factor_prior"] == 1.0 and opts["weights_prior"] == 1.0:
        target, extra = train, {"rank": rank}  # sample() builds the default model
    else:
        target, extra = (
            latent_class_model(
                train,
                rank,
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


class _CachedProba:
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


def _mixture_proba(probas: dict, weights: dict) -> Callable:
    """``proba(codes, j)`` of the mixture ``sum_r weights[r] probas[r]``."""
    used = {r: w for r, w in weights.items() if w > 0}
    total = sum(used.values())

    def proba(codes, j):
        p = sum(w / total * probas[r](codes, j) for r, w in used.items())
        return p / p.sum(axis=1, keepdims=True)

    return proba


def _plugin_proba(idata, train) -> Callable:
    """``proba(codes, j)`` of the posterior-mean PMF (aligned draws) plugged in."""
    from bayespmf.models import posterior_params

    w, stacked = posterior_params(idata, train)
    params = LatentClassParams(
        w.mean(axis=0), split_factors(stacked.mean(axis=0), train.n_categories)
    )
    return _params_proba(params)


def _weights_text(weights: dict) -> str:
    return " ".join(f"{r}:{w:.2f}" for r, w in weights.items())


def _posterior_rows(split, src, opts, seed, progressbar=False):
    """The posterior rows of one configuration on one split.

    ``src`` is the validation selection of ``opts["rank_from"]`` (:func:`_select_latent`):
    its rank is the chosen rank and its best iterate at every rank starts the chains
    there. Returns a list of ``(row name, test metrics, selected, seconds, max r-hat,
    extra record fields)``.
    """
    from bayespmf.models import convergence_summary, posterior_predict_proba
    from bayespmf.models.averaging import rank_weights, stacking_weights

    combine = opts["combine"]
    train = split.train.drop_empty_rows()
    chosen = src["rank"]
    limit = max_identifiable_rank(split.n_cat)
    ranks = {chosen} if opts["ranks"] is None else set(opts["ranks"])
    if {"chosen", "plugin"} & set(combine):
        ranks.add(chosen)
    ranks = sorted(r for r in ranks if r <= limit)
    if not ranks:
        raise DataValidationError(
            f"No posterior rank in {opts['ranks']} is identifiable (at most {limit})."
        )
    need_loo = any(c in _LOO_COMBINE for c in combine) and len(ranks) > 1
    fits = {}
    for r in ranks:
        init = src["by_rank"].get(r, {}).get("params", "auto")
        idata, elapsed = _sample_posterior(
            train, r, init, opts, seed, progressbar, need_loo
        )
        rhat = np.nan
        if opts["method"] == "nuts" and opts["chains"] > 1:
            rhat = float(convergence_summary(idata)["table"]["r_hat_max"].max())

        def proba(codes, j, idata=idata):
            return posterior_predict_proba(idata, codes, j, model_data=train)

        fits[r] = {
            "idata": idata,
            "elapsed": elapsed,
            "rhat": rhat,
            "proba": _CachedProba(proba),
        }
    probas = {r: f["proba"] for r, f in fits.items()}
    all_s = sum(f["elapsed"] for f in fits.values())
    all_rhat = max(f["rhat"] for f in fits.values())
    rows = []
    for how in combine:
        extra = {}
        if how in ("chosen", "plugin"):
            f = fits[chosen]
            proba = probas[chosen] if how == "chosen" else _plugin_proba(f["idata"], train)
            selected = f"rank={chosen} (from {opts['rank_from']})"
            rows.append(
                (
                    _posterior_row_name(opts, how),
                    split.evaluate_proba(proba, "test"),
                    selected,
                    f["elapsed"],
                    f["rhat"],
                    extra,
                )
            )
            continue
        if how == "val-best":
            scores = {r: split.score(split.evaluate_proba(probas[r], "val")) for r in ranks}
            top = max(scores, key=scores.get)
            weights = {r: float(r == top) for r in ranks}
        elif how == "val-stacking":
            lpd = np.column_stack([split.log_score(probas[r], "val") for r in ranks])
            # a rating no posterior can predict (probability 0 in floating point)
            lpd = np.maximum(lpd, np.log(np.finfo(float).tiny))
            weights = dict(zip(ranks, stacking_weights(lpd).tolist(), strict=True))
        elif need_loo:
            idatas = {r: fits[r]["idata"] for r in ranks}
            with warnings.catch_warnings():  # Pareto k warnings: PSIS-LOO is a guide
                warnings.simplefilter("ignore", UserWarning)
                weights = rank_weights(idatas, method=how, seed=seed).to_dict()
        else:  # one rank: nothing to weight
            weights = {ranks[0]: 1.0}
        top = max(weights, key=weights.get)
        extra["rank_weights"] = _weights_text(weights)
        rows.append(
            (
                _posterior_row_name(opts, how),
                split.evaluate_proba(_mixture_proba(probas, weights), "test"),
                f"top rank={top} of {ranks}",
                all_s,
                all_rhat,
                extra,
            )
        )
    return rows


# --------------------------------------------------------------------- baselines


def _classifier_trial(name, split, seed):
    train_codes = split.train.codes
    grid = CLASSIFIER_GRIDS[name]
    ((key, values),) = grid.items()
    best = {"score": -np.inf}
    t_all = time.perf_counter()
    n_not_converged = 0
    xs = {
        p: classifier_features(name, split.parts[p][0], split.n_cat, split.j)
        for p in ("val", "test")
    }
    for value in values:
        t0 = time.perf_counter()
        model, converged = fit_classifier(
            name, {key: value}, train_codes, split.n_cat, split.j, random_state=seed
        )
        fit_s = time.perf_counter() - t0
        n_not_converged += not converged
        s = split.score(split.evaluate_pred(model.predict(xs["val"]), "val"))
        if s > best["score"]:
            best.update(score=s, param=f"{key}={value:g}", model=model, fit_s=fit_s)
    metrics = split.evaluate_pred(best["model"].predict(xs["test"]), "test")
    return (
        metrics,
        best["param"],
        best["fit_s"],
        time.perf_counter() - t_all,
        n_not_converged,
    )


def _rating_baseline_trial(name, split, seed):
    t_all = time.perf_counter()
    h_val, h_test = split.parts["val"][0], split.parts["test"][0]
    if name in ("global-average", "user-average", "movie-average"):
        pred = rating_average(name, split.ratings, h_test[:, 0], h_test[:, 1])
        dt = time.perf_counter() - t_all
        return split.evaluate_pred(pred, "test"), "", dt, dt
    if name == "surprise-svd":
        return _surprise_trial(split, seed)
    best = {"score": -np.inf}
    for rank in BMF_GRID["rank"]:
        for reg in BMF_GRID["reg"]:
            t0 = time.perf_counter()
            m = BiasedMF(rank, reg, n_epochs=BMF_EPOCHS, random_state=seed).fit(
                split.ratings
            )
            fit_s = time.perf_counter() - t0
            pred = np.clip(m.predict(h_val[:, 0], h_val[:, 1]), split.lo, split.hi)
            s = split.score(split.evaluate_pred(pred, "val"))
            if s > best["score"]:
                best.update(
                    score=s, model=m, param=f"rank={rank}, reg={reg:g}", fit_s=fit_s
                )
    pred = np.clip(best["model"].predict(h_test[:, 0], h_test[:, 1]), split.lo, split.hi)
    return (
        split.evaluate_pred(pred, "test"),
        best["param"],
        best["fit_s"],
        time.perf_counter() - t_all,
    )


def _surprise_trial(split, seed):
    try:
        from surprise import SVD, Dataset, Reader
    except ImportError as err:
        raise DataValidationError(
            "The 'surprise-svd' baseline needs scikit-surprise (pip install "
            "scikit-surprise)."
        ) from err
    t0 = time.perf_counter()
    rows, cols = np.nonzero(~np.isnan(split.ratings))
    df = pd.DataFrame({"u": rows, "i": cols, "r": split.ratings[rows, cols]})
    trainset = Dataset.load_from_df(
        df, Reader(rating_scale=(split.lo, split.hi))
    ).build_full_trainset()
    algo = SVD(random_state=seed).fit(trainset)
    fit_s = time.perf_counter() - t0
    h = split.parts["test"][0]
    pred = np.array([algo.predict(int(u), int(i)).est for u, i in h[:, :2]])
    return split.evaluate_pred(pred, "test"), "defaults", fit_s, time.perf_counter() - t0


# --------------------------------------------------------------------- driver


def _record(method, kind, trial, seed, metrics, selected, fit_s, total_s, **extra):
    """One per-trial row of the table's ``.attrs["trials"]``."""
    return {
        "method": method,
        "kind": kind,
        "trial": trial,
        "seed": seed,
        **metrics,
        "selected": selected,
        "fit_s": fit_s,
        "total_s": total_s,
        "not_converged": 0,
    } | extra


def _check_run_args(
    owner,
    allowed_baselines,
    methods,
    baselines,
    n_trials,
    ranks,
    fractions,
    random_state,
    posterior,
):
    """The checks of :func:`_run` before any trial (also run by :func:`check_task_inputs`).

    Returns ``(methods, baselines, n_trials, ranks, configs, seeds)``.
    """
    methods = _check_names(methods, METHODS, "method")
    baselines = _check_names(baselines, allowed_baselines, "baseline")
    n_trials = check_int(n_trials, "n_trials", owner=owner, low=1)
    ranks = _check_ranks(ranks)
    if len(fractions) != 3 or abs(sum(fractions) - 1.0) > 1e-9:
        raise DataValidationError(
            f"'fractions' must be three fractions summing to 1; got {fractions!r}."
        )
    configs = _posterior_options(posterior)
    seeds = _trial_seeds(random_state, n_trials)
    return methods, baselines, n_trials, ranks, configs, seeds


def check_task_inputs(kind: str, data, target=None, **kwargs) -> None:
    """Check what :func:`classify` or :func:`predict_ratings` would refuse, running nothing.

    The same checks, on the same arguments (the function's defaults filled in), as
    the task makes before its first trial, and the rank grid against the data: a
    grid in which no rank can be identified fails every trial.

    Parameters
    ----------
    kind : {"classify", "ratings"}
    data : str, Dataset or CategoricalData
        As the task's first argument.
    target : str or int, optional
        The variable to classify (``"classify"`` only).
    **kwargs
        The task's keyword arguments (``methods``, ``baselines``, ``n_trials``,
        ``ranks``, ``random_state``, ``posterior``, ...).

    Raises
    ------
    DataValidationError
        What the task would raise on these inputs (an unknown target, method or
        baseline, a bad seed, rank grid or posterior option); an unknown keyword.

    Examples
    --------
    >>> check_task_inputs("classify", "car", "class", ranks=[2, 3], n_trials=1)
    >>> check_task_inputs("classify", "car", "klass")
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: Unknown variable 'klass'; ...
    """
    import inspect

    task = {"classify": classify, "ratings": predict_ratings}.get(kind)
    if task is None:
        raise DataValidationError(f"'kind' must be 'classify' or 'ratings'; got {kind!r}.")
    args = (data, target) if kind == "classify" else (data,)
    try:
        bound = inspect.signature(task).bind(*args, **kwargs)
    except TypeError as err:
        raise DataValidationError(f"{task.__name__}: {err}") from err
    bound.apply_defaults()
    a = bound.arguments
    if kind == "classify":
        data, _ = _resolve_classify(data, target)
        allowed = CLASSIFIERS
    else:
        data = _resolve_ratings(data)
        allowed = RATING_BASELINES
    _, _, _, ranks, _, _ = _check_run_args(
        task.__name__,
        allowed,
        a["methods"],
        a["baselines"],
        a["n_trials"],
        a["ranks"],
        a["fractions"],
        a["random_state"],
        a["posterior"],
    )
    limit = max_identifiable_rank(data.n_categories)
    if min(ranks) > limit:
        raise DataValidationError(
            f"No rank in {ranks} can be identified on these data (the largest is "
            f"{limit}): every trial would skip them all. Use ranks <= {limit}."
        )


def _run(
    owner,
    split_fn,
    baseline_fn,
    allowed_baselines,
    methods,
    baselines,
    n_trials,
    ranks,
    fractions,
    max_iter,
    tol,
    random_state,
    posterior,
    progressbar,
):
    """Check the arguments of ``owner`` (classify, predict_ratings); run its trials."""
    methods, baselines, n_trials, ranks, configs, seeds = _check_run_args(
        owner,
        allowed_baselines,
        methods,
        baselines,
        n_trials,
        ranks,
        fractions,
        random_state,
        posterior,
    )
    n_posts = [
        n_trials if o["n_trials"] is None else min(n_trials, int(o["n_trials"]))
        for o in configs
    ]
    total = n_trials * (len(methods) + len(baselines)) + sum(n_posts)
    records = []
    with progress_bar(total, owner, enabled=progressbar) as bar:
        for trial, seed in enumerate(seeds):
            split = split_fn(seed)
            chosen = {}
            run_methods = list(methods)
            for opts, n_post in zip(configs, n_posts, strict=True):
                need = opts["rank_from"] if trial < n_post else None
                if need is not None and need not in run_methods:
                    run_methods.append(need)
            for method in run_methods:
                bar.set_description(f"{owner} trial {trial + 1}/{n_trials}: {method}")
                best = _select_latent(method, split, ranks, seed, max_iter, tol)
                chosen[method] = best
                if method not in methods:
                    continue
                metrics = split.evaluate_proba(_params_proba(best["params"]), "test")
                selected = f"rank={best['rank']}, iter={best['n_iter']}"
                records.append(
                    _record(
                        method,
                        "latent-class",
                        trial,
                        seed,
                        metrics,
                        selected,
                        best["fit_s"],
                        best["total_s"],
                        not_converged=best["not_converged"],
                    )
                )
                bar.update()
            for name in baselines:
                bar.set_description(f"{owner} trial {trial + 1}/{n_trials}: {name}")
                metrics, param, fit_s, total_s, *nc = baseline_fn(name, split, seed)
                extra = {"not_converged": nc[0]} if nc else {}
                records.append(
                    _record(
                        name,
                        "baseline",
                        trial,
                        seed,
                        metrics,
                        param,
                        fit_s,
                        total_s,
                        **extra,
                    )
                )
                bar.update()
            for opts, n_post in zip(configs, n_posts, strict=True):
                if trial >= n_post:
                    continue
                name = _posterior_row_name(opts, "chosen")
                bar.set_description(f"{owner} trial {trial + 1}/{n_trials}: {name}")
                rows = _posterior_rows(split, chosen[opts["rank_from"]], opts, seed)
                for name, metrics, selected, elapsed, rhat, extra in rows:
                    records.append(
                        _record(
                            name,
                            "posterior",
                            trial,
                            seed,
                            metrics,
                            selected,
                            elapsed,
                            elapsed,
                            r_hat_max=rhat,
                            **extra,
                        )
                    )
                bar.update()
    return records


def _summarize(records, metrics, scale, task):
    trials = pd.DataFrame(records)
    rows = []
    for method, grp in trials.groupby("method", sort=False):
        row = {"method": method, "kind": grp["kind"].iloc[0]}
        for m in metrics:
            if m in grp and grp[m].notna().any():
                row[f"{m}_mean"] = scale * grp[m].mean()
                row[f"{m}_std"] = scale * grp[m].std(ddof=0)
        row["fit_s"] = grp["fit_s"].mean()
        row["total_s"] = grp["total_s"].mean()
        sel = grp["selected"].value_counts()
        row["selected"] = sel.index[0] if len(sel) and sel.index[0] else ""
        row["n_trials"] = len(grp)
        notes = []
        if grp["not_converged"].sum():
            notes.append(f"{int(grp['not_converged'].sum())} fits hit max_iter")
        if "r_hat_max" in grp and grp["r_hat_max"].notna().any():
            notes.append(f"max r-hat {grp['r_hat_max'].max():.3f}")
        row["notes"] = "; ".join(notes)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("method")
    table.attrs["task"] = task
    table.attrs["trials"] = trials.to_dict(orient="records")
    return table


def classify(
    data_or_name,
    target=None,
    *,
    methods: Sequence[str] = CLASSIFY_METHODS,
    baselines: Sequence[str] = tuple(CLASSIFIERS),
    n_trials: int = 20,
    ranks: Sequence[int] = DEFAULT_RANKS,
    fractions: tuple[float, float, float] = (0.5, 0.2, 0.3),
    max_iter: int | None = None,
    tol: float | None = None,
    random_state=None,
    posterior=False,
    progressbar: bool = False,
) -> pd.DataFrame:
    """MAP classification of a target variable, latent-class methods vs baselines.

    Parameters
    ----------
    data_or_name : str, Dataset or CategoricalData
        A shipped data set's name (``"car"``, ``"votes"``, ``"nursery"``,
        ``"mushroom"``) or data.
    target : str or int, optional
        The variable to predict (default: the data set's class variable).
    methods : sequence of str
        :class:`~bayespmf.estimators.LatentClassPMF` methods (``"cnmf-spa"``,
        ``"cnmf-opt"``, ``"cnmf-spa-em"``, ``"em"``, ``"squarem"``,
        ``"cnmf-spa-squarem"``).
    baselines : sequence of str
        Keys of :data:`bayespmf.apps.baselines.CLASSIFIERS`.
    n_trials : int, default 20
        Random splits.
    ranks : sequence of int
        Rank grid; the rank with the best validation accuracy is used.
    fractions : (float, float, float), default (0.5, 0.2, 0.3)
        Train, validation and test fractions of the rows.
    max_iter, tol : optional
        Of the iterative stage (the estimator's defaults when None).
    random_state : None, int or numpy.random.Generator
        Seeds the splits and every fit; an int makes the table reproducible.
    posterior : bool, dict or list of dicts, default False
        Add posterior-predictive rows: NUTS (or ADVI) on the training part, started
        from the validation-best iterate of ``rank_from`` (default ``"cnmf-spa-em"``)
        at each sampled rank, predicting ``Pr(y | x)`` averaged over the draws (not
        from a posterior-mean PMF). Options (dict; defaults in
        :data:`POSTERIOR_DEFAULTS`): ``method``, ``draws``, ``tune``, ``chains``,
        ``cores``, ``n_trials`` (only the first ``n_trials`` splits), ``rank_from``;
        ``ranks`` (ranks to sample; default only the rank ``rank_from`` chose on the
        validation part); ``combine`` (the rows, one per name in
        :data:`POSTERIOR_COMBINE`: ``"chosen"`` (default), ``"plugin"``,
        ``"val-best"``, ``"stacking"``, ``"pseudo-BMA"``, ``"BB-pseudo-BMA"`` (LOO
        weights of ``az.compare`` across ``ranks``), ``"val-stacking"`` (stacking
        weights fitted to the validation log score)); ``factor_prior`` and
        ``weights_prior`` (the Dirichlet concentrations of
        :func:`bayespmf.models.latent_class_model`, 1.0 = uniform); ``label`` (added
        to the row names). A list of dicts adds the rows of every configuration. The
        rows are named ``"<method>-posterior[ <label>][ (<combine>)]"``; a mixture's
        per-trial record carries its ``rank_weights``. On Votes and the three
        MovieLens subsets (``benchmarks/applications.py``, 3 splits) the best row was
        ``{"factor_prior": 0.25, "ranks": [2, 3, 5, 8], "combine": "val-stacking"}``
        (four NUTS runs per split); the default uniform prior at the chosen rank
        alone did worse than the point estimates on Votes and Animation.
    progressbar : bool, default False

    Returns
    -------
    pandas.DataFrame
        Index ``method``; columns ``kind`` (latent-class / baseline / posterior),
        ``accuracy_mean``, ``accuracy_std`` (percent; std over trials, ddof 0),
        ``fit_s`` (seconds to fit the selected configuration, mean over trials),
        ``total_s`` (seconds for the whole grid of the trial), ``selected`` (the most
        frequent selected rank/iteration or hyperparameter), ``n_trials``, ``notes``.
        ``.attrs["trials"]`` lists the per-trial records.

    Raises
    ------
    DataValidationError
        Unknown data set, target, method or baseline; a bad rank grid or ``posterior``.

    Notes
    -----
    The protocol of Ibrahim & Fu, Sec. 5.3: random 50 : 20 : 30 splits, the joint PMF of
    features and label learned on the training part, the label predicted by
    ``argmax_y Pr(y | x)``; rank and (EM-based methods) iteration count chosen on the
    validation part, over :data:`DEFAULT_RANKS` and :data:`ITER_CHECKPOINTS`. The
    baselines' hyperparameters are chosen on the same validation part
    (:data:`bayespmf.apps.baselines.CLASSIFIER_GRIDS`). Only rows whose target is observed
    are scored.

    Examples
    --------
    >>> table = classify("votes", methods=["cnmf-spa-em"], baselines=["naive-bayes"],
    ...                  n_trials=2, ranks=[2, 3], random_state=0)
    >>> list(table.index)
    ['cnmf-spa-em', 'naive-bayes']
    >>> bool(table.loc["cnmf-spa-em", "accuracy_mean"] > 80)
    True
    """
    data, j = _resolve_classify(data_or_name, target)
    records = _run(
        "classify",
        lambda seed: _ClassifySplit(data, j, fractions, seed),
        _classifier_trial,
        CLASSIFIERS,
        methods,
        baselines,
        n_trials,
        ranks,
        fractions,
        max_iter,
        tol,
        random_state,
        posterior,
        progressbar,
    )
    return _summarize(records, ["accuracy"], 100.0, "classify")


def predict_ratings(
    data_or_genre,
    *,
    methods: Sequence[str] = RATING_METHODS,
    baselines: Sequence[str] = (
        "global-average",
        "user-average",
        "movie-average",
        "biased-mf",
    ),
    n_trials: int = 20,
    ranks: Sequence[int] = DEFAULT_RANKS,
    fractions: tuple[float, float, float] = (0.5, 0.2, 0.3),
    max_iter: int | None = None,
    tol: float | None = None,
    random_state=None,
    posterior=False,
    progressbar: bool = False,
) -> pd.DataFrame:
    """Predict held-out ratings by MMSE and MAP, latent-class methods vs baselines.

    Parameters
    ----------
    data_or_genre : str, Dataset or CategoricalData
        A MovieLens genre (``"action"``, ``"animation"``, ``"romance"``, any case: the
        30 most-rated movies of the genre, :func:`bayespmf.datasets.load_movielens`) or
        rating data whose categories are the rating values (``"1"``..``"5"``).
    methods, baselines : sequence of str
        Latent-class methods and keys of :data:`bayespmf.apps.baselines.RATING_BASELINES`.
    n_trials, ranks, fractions, max_iter, tol, random_state, posterior, progressbar
        As in :func:`classify`; ``fractions`` are those of the *observed ratings*
        kept for training, hidden for validation and hidden for test.

    Returns
    -------
    pandas.DataFrame
        Index ``method``; a latent-class method ``m`` gives the rows ``"m"`` (MMSE
        prediction, the conditional mean) and ``"m (MAP)"`` (the conditional mode).
        Columns ``rmse_mean``, ``rmse_std``, ``mae_mean``, ``mae_std``, ``fit_s``,
        ``total_s``, ``selected``, ``n_trials``, ``notes``.

    Notes
    -----
    The protocol of Ibrahim & Fu, Sec. 5.4: every trial hides 20 % and 30 % of the
    observed ratings at random (every user keeps at least one) for validation and test,
    and learns from the remaining 50 %. A hidden rating of movie ``n`` by user ``k`` is
    predicted from user ``k``'s *training* ratings by
    ``E[x_n | observed]`` (MMSE) and ``argmax Pr(x_n | observed)`` (MAP). The rank and
    iteration count minimize the validation RMSE of the MMSE prediction. Baselines see
    the same training ratings; biased-MF predictions are clipped to the rating scale.

    Examples
    --------
    >>> t = predict_ratings("animation", methods=["cnmf-spa-em"],
    ...                     baselines=["movie-average"], n_trials=1, ranks=[3],
    ...                     random_state=0)
    >>> list(t.index)
    ['cnmf-spa-em', 'cnmf-spa-em (MAP)', 'movie-average']
    >>> bool(t.loc["cnmf-spa-em", "rmse_mean"] < 1.2)
    True
    """
    data = _resolve_ratings(data_or_genre)
    records = _run(
        "predict_ratings",
        lambda seed: _RatingSplit(data, fractions, seed),
        _rating_baseline_trial,
        RATING_BASELINES,
        methods,
        baselines,
        n_trials,
        ranks,
        fractions,
        max_iter,
        tol,
        random_state,
        posterior,
        progressbar,
    )
    # a latent-class record carries both estimators; split MAP into its own rows
    out = []
    for r in records:
        if "rmse_map" in r:
            mmse = {k: v for k, v in r.items() if not k.endswith("_map")}
            mapr = dict(
                mmse, method=f"{r['method']} (MAP)", rmse=r["rmse_map"], mae=r["mae_map"]
            )
            out += [mmse, mapr]
        else:
            out.append(r)
    return _summarize(out, ["rmse", "mae"], 1.0, "ratings")
