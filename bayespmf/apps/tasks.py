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

This module holds the protocol: the two tasks, their inputs, trial loop and summary.
Its parts are private modules of :mod:`bayespmf.apps`: the splits (``_splits``), the
latent-class point estimates selected on validation (``_task_latent``), the posterior
rows (``_task_posterior``), the baselines (``_task_baselines``) and the argument checks
they share (``_task_checks``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from bayespmf._progress import progress_bar
from bayespmf._validation import DataValidationError, check_int
from bayespmf.apps._splits import ClassifySplit, RatingSplit, trial_seeds
from bayespmf.apps._splits import rating_values as rating_values  # re-exported
from bayespmf.apps._task_baselines import classifier_trial, rating_baseline_trial
from bayespmf.apps._task_checks import check_n_components_grid, check_names
from bayespmf.apps._task_latent import (
    DEFAULT_SPA_STARTS,
    ITER_CHECKPOINTS,
    SPA_STARTS,
    check_spa_starts,
    params_proba,
    select_latent,
)
from bayespmf.apps._task_posterior import (
    POSTERIOR_COMBINE,
    POSTERIOR_DEFAULTS,
    posterior_options,
    posterior_row_name,
    posterior_rows,
)
from bayespmf.apps.baselines import CLASSIFIERS, RATING_BASELINES
from bayespmf.data import CategoricalData
from bayespmf.fit.latent_class import METHODS, max_identifiable_rank

__all__ = [
    "CLASSIFY_METHODS",
    "DEFAULT_RANKS",
    "DEFAULT_SPA_STARTS",
    "ITER_CHECKPOINTS",
    "POSTERIOR_COMBINE",
    "POSTERIOR_DEFAULTS",
    "PROTOCOL_DEFAULTS",
    "RATING_METHODS",
    "SPA_STARTS",
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

#: The options of the trial protocol that both tasks take, with their defaults (see
#: :func:`classify`).
PROTOCOL_DEFAULTS = {
    "n_trials": 20,
    "candidates": DEFAULT_RANKS,
    "fractions": (0.5, 0.2, 0.3),
    "max_iter": None,
    "tol": None,
    "random_state": None,
    "spa_starts": DEFAULT_SPA_STARTS,
    "posterior": False,
    "progressbar": False,
}


def _with_protocol(task_function):
    """Show the :data:`PROTOCOL_DEFAULTS` options in a task's signature (``**protocol``).

    ``help()``, the docs and :func:`check_task_inputs` read the signature.
    """
    sig = inspect.signature(task_function)
    own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in PROTOCOL_DEFAULTS.items()
    ]
    task_function.__signature__ = sig.replace(parameters=own + shared)
    return task_function


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


# --------------------------------------------------------------------- the two tasks


@dataclass(frozen=True)
class _Task:
    """What tells :func:`classify` and :func:`predict_ratings` apart in the trial loop.

    ``splits(args)`` takes the task function's arguments by name and returns
    ``(data, split_fn)``, ``split_fn(seed)`` one random split of ``data``;
    ``baseline_trial(name, split, seed)`` runs one baseline on a split;
    ``finish(records)`` turns the per-trial records into the table's.
    """

    name: str
    kind: str
    baselines: Mapping
    baseline_trial: Callable
    splits: Callable
    metrics: tuple[str, ...]
    scale: float
    finish: Callable = list


def _classify_splits(args):
    data, j = _resolve_classify(args["data_or_name"], args["target"])
    return data, lambda seed: ClassifySplit(data, j, args["fractions"], seed)


def _rating_splits(args):
    data = _resolve_ratings(args["data_or_genre"])
    return data, lambda seed: RatingSplit(data, args["fractions"], seed)


def _split_map_records(records):
    """A latent-class record carries both estimators; split MAP into its own rows."""
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
    return out


_TASKS = {
    "classify": _Task(
        "classify",
        "classify",
        CLASSIFIERS,
        classifier_trial,
        _classify_splits,
        ("accuracy",),
        100.0,
    ),
    "ratings": _Task(
        "predict_ratings",
        "ratings",
        RATING_BASELINES,
        rating_baseline_trial,
        _rating_splits,
        ("rmse", "mae"),
        1.0,
        _split_map_records,
    ),
}


# --------------------------------------------------------------------- driver


def _record(method, kind, at, metrics, selected, fit_s, total_s):
    """One per-trial row of the table's ``.attrs["trials"]``; ``at``: (trial, seed)."""
    trial, seed = at
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
    }


def _check_run_args(task, args):
    """The checks of :func:`_run` before any trial (also run by :func:`check_task_inputs`).

    ``args``: the task function's arguments by name. Returns ``(methods, baselines,
    n_trials, ranks, configs, seeds)``; ``spa_starts`` is checked in place.
    """
    methods = check_names(args["methods"], METHODS, "method")
    baselines = check_names(args["baselines"], task.baselines, "baseline")
    n_trials = check_int(args["n_trials"], "n_trials", owner=task.name, low=1)
    candidates = check_n_components_grid(args["candidates"])
    fractions = args["fractions"]
    if len(fractions) != 3 or abs(sum(fractions) - 1.0) > 1e-9:
        raise DataValidationError(
            f"'fractions' must be three fractions summing to 1; got {fractions!r}."
        )
    args["spa_starts"] = check_spa_starts(args["spa_starts"])
    configs = posterior_options(args["posterior"])
    seeds = trial_seeds(args["random_state"], n_trials)
    return methods, baselines, n_trials, candidates, configs, seeds


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
        ``candidates``, ``random_state``, ``posterior``, ...).

    Raises
    ------
    DataValidationError
        What the task would raise on these inputs (an unknown target, method or
        baseline, a bad seed, rank grid or posterior option); an unknown keyword.

    Examples
    --------
    >>> check_task_inputs("classify", "car", "class", candidates=[2, 3], n_trials=1)
    >>> check_task_inputs("classify", "car", "klass")
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: Unknown variable 'klass'; ...
    """
    function = {"classify": classify, "ratings": predict_ratings}.get(kind)
    if function is None:
        raise DataValidationError(f"'kind' must be 'classify' or 'ratings'; got {kind!r}.")
    args = (data, target) if kind == "classify" else (data,)
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except TypeError as err:
        raise DataValidationError(f"{function.__name__}: {err}") from err
    bound.apply_defaults()
    task = _TASKS[kind]
    data, _ = task.splits(bound.arguments)
    candidates = _check_run_args(task, bound.arguments)[3]
    limit = max_identifiable_rank(data.n_categories)
    if min(candidates) > limit:
        raise DataValidationError(
            f"No rank in {candidates} can be identified on these data (the largest is "
            f"{limit}): every trial would skip them all. Use ranks <= {limit}."
        )


def _run(task, split_fn, args):
    """Check the arguments of ``task``; run its trials on ``split_fn(seed)``: records."""
    methods, baselines, n_trials, candidates, configs, seeds = _check_run_args(task, args)
    max_iter, tol = args["max_iter"], args["tol"]
    n_posts = [
        n_trials if o["n_trials"] is None else min(n_trials, int(o["n_trials"]))
        for o in configs
    ]
    total = n_trials * (len(methods) + len(baselines)) + sum(n_posts)
    records = []
    with progress_bar(total, task.name, enabled=args["progressbar"]) as bar:
        for trial, seed in enumerate(seeds):
            split = split_fn(seed)
            at = (trial, seed)
            chosen = {}
            run_methods = list(methods)
            for opts, n_post in zip(configs, n_posts, strict=True):
                need = opts["n_components_from"] if trial < n_post else None
                if need is not None and need not in run_methods:
                    run_methods.append(need)
            for method in run_methods:
                bar.set_description(f"{task.name} trial {trial + 1}/{n_trials}: {method}")
                best = select_latent(
                    method, split, candidates, seed, max_iter, tol, args["spa_starts"]
                )
                chosen[method] = best
                if method not in methods:
                    continue
                metrics = split.evaluate_proba(params_proba(best["params"]), "test")
                selected = f"n_components={best['n_components']}, iter={best['n_iter']}"
                if best.get("start") is not None:
                    selected += f", start={best['start']}"
                fit_s, total_s = best["fit_s"], best["total_s"]
                rec = _record(method, "latent-class", at, metrics, selected, fit_s, total_s)
                records.append(rec | {"not_converged": best["not_converged"]})
                bar.update()
            for name in baselines:
                bar.set_description(f"{task.name} trial {trial + 1}/{n_trials}: {name}")
                metrics, param, fit_s, total_s, *nc = task.baseline_trial(name, split, seed)
                rec = _record(name, "baseline", at, metrics, param, fit_s, total_s)
                records.append(rec | ({"not_converged": nc[0]} if nc else {}))
                bar.update()
            for opts, n_post in zip(configs, n_posts, strict=True):
                if trial >= n_post:
                    continue
                name = posterior_row_name(opts, "chosen")
                bar.set_description(f"{task.name} trial {trial + 1}/{n_trials}: {name}")
                rows = posterior_rows(split, chosen[opts["n_components_from"]], opts, seed)
                for name, metrics, selected, elapsed, rhat, extra in rows:
                    rec = _record(
                        name, "posterior", at, metrics, selected, elapsed, elapsed
                    )
                    records.append(rec | {"r_hat_max": rhat, **extra})
                bar.update()
    return records


def _perform(kind, data_args, methods, baselines, protocol):
    """Run the task ``kind``: the table.

    ``data_args``: its data arguments by name; ``protocol``: the options of
    :data:`PROTOCOL_DEFAULTS` given (the others take their defaults).
    """
    task = _TASKS[kind]
    unknown = sorted(set(protocol) - set(PROTOCOL_DEFAULTS))
    if unknown:
        raise DataValidationError(
            f"{task.name} got unknown option(s) {unknown}; its options are 'methods', "
            f"'baselines' and {list(PROTOCOL_DEFAULTS)}."
        )
    args = {**data_args, "methods": methods, "baselines": baselines}
    args |= PROTOCOL_DEFAULTS | protocol
    _, split_fn = task.splits(args)
    records = _run(task, split_fn, args)
    return _summarize(task.finish(records), task.metrics, task.scale, task.kind)


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


@_with_protocol
def classify(
    data_or_name,
    target=None,
    *,
    methods: Sequence[str] = CLASSIFY_METHODS,
    baselines: Sequence[str] = tuple(CLASSIFIERS),
    **protocol,
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
    candidates : sequence of int
        Rank grid; the rank with the best validation accuracy is used.
    fractions : (float, float, float), default (0.5, 0.2, 0.3)
        Train, validation and test fractions of the rows.
    max_iter, tol : optional
        Of the iterative stage (the estimator's defaults when None).
    random_state : None, int or numpy.random.Generator
        Seeds the splits and every fit; an int makes the table reproducible.
    spa_starts : sequence of str, default DEFAULT_SPA_STARTS
        The CNMF-SPA starts of the methods built on CNMF-SPA (``"cnmf-spa"`` itself,
        ``"cnmf-spa-em"``, ``"cnmf-spa-squarem"``, ``"cnmf-opt"``), keys of
        :data:`SPA_STARTS`: the package's bootstrap-chosen split (``"bootstrap"``,
        what :class:`~bayespmf.estimators.LatentClassPMF` fits), the paper's fixed
        split with ``M = 5`` (``"paper"``), and both with the regularized H step of
        :func:`~bayespmf.kernels.cnmf_spa.cnmf_spa` (``"bootstrap-ridge"``,
        ``"paper-ridge"``). The method is fitted from each at every rank, and the
        start is chosen on the validation part with the rank and the iteration count.
    posterior : bool, dict or list of dicts, default False
        Add posterior-predictive rows: NUTS (or ADVI) on the training part, started
        from the validation-best iterate of ``n_components_from`` (default
        ``"cnmf-spa-em"``) at each sampled rank, predicting ``Pr(y | x)`` averaged over
        the draws (not from a posterior-mean PMF). Options (dict; defaults in
        :data:`POSTERIOR_DEFAULTS`): ``method``, ``draws``, ``tune``, ``chains``,
        ``cores``, ``n_trials`` (only the first ``n_trials`` splits),
        ``n_components_from``; ``candidates`` (ranks to sample; default only the rank
        ``n_components_from`` chose on the validation part); ``combine`` (the rows, one
        per name in :data:`POSTERIOR_COMBINE`: ``"chosen"`` (default), ``"plugin"``,
        ``"val-best"``, ``"stacking"``, ``"pseudo-BMA"``, ``"BB-pseudo-BMA"`` (LOO
        weights of ``az.compare`` across ``candidates``), ``"val-stacking"`` (stacking
        weights fitted to the validation log score)); ``factor_prior`` and
        ``weights_prior`` (the Dirichlet concentrations of
        :func:`bayespmf.models.latent_class_model`, 1.0 = uniform); ``label`` (added
        to the row names). A list of dicts adds the rows of every configuration. The
        rows are named ``"<method>-posterior[ <label>][ (<combine>)]"``; a mixture's
        per-trial record carries its ``rank_weights``. The configurations that did
        best in ``benchmarks/applications.py`` are in :ref:`bench-apps`.
    progressbar : bool, default False

    Returns
    -------
    pandas.DataFrame
        Index ``method``; columns ``kind`` (latent-class / baseline / posterior),
        ``accuracy_mean``, ``accuracy_std`` (percent; std over trials, ddof 0),
        ``fit_s`` (seconds to fit the selected configuration, mean over trials),
        ``total_s`` (seconds for the whole grid of the trial), ``selected`` (the most
        frequent selected rank/iteration (and CNMF-SPA start) or hyperparameter),
        ``n_trials``, ``notes``.
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
    validation part, over :data:`DEFAULT_RANKS` and :data:`ITER_CHECKPOINTS` (and, for
    the methods built on CNMF-SPA, over the starts ``spa_starts``). The
    baselines' hyperparameters are chosen on the same validation part
    (:data:`bayespmf.apps.baselines.CLASSIFIER_GRIDS`). Only rows whose target is observed
    are scored.

    Examples
    --------
    >>> table = classify("votes", methods=["cnmf-spa-em"], baselines=["naive-bayes"],
    ...                  n_trials=2, candidates=[2, 3], random_state=0)
    >>> list(table.index)
    ['cnmf-spa-em', 'naive-bayes']
    >>> bool(table.loc["cnmf-spa-em", "accuracy_mean"] > 80)
    True
    """
    args = {"data_or_name": data_or_name, "target": target}
    return _perform("classify", args, methods, baselines, protocol)


@_with_protocol
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
    **protocol,
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
    n_trials, ranks, fractions, max_iter, tol, random_state, spa_starts, posterior
        As in :func:`classify` (the paper's split of ``spa_starts``: the first five
        movies in ``S1``); ``fractions`` are those of the *observed ratings*
        kept for training, hidden for validation and hidden for test.
    progressbar : bool, default False

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
    ...                     baselines=["movie-average"], n_trials=1, candidates=[3],
    ...                     random_state=0)
    >>> list(t.index)
    ['cnmf-spa-em', 'cnmf-spa-em (MAP)', 'movie-average']
    >>> bool(t.loc["cnmf-spa-em", "rmse_mean"] < 1.2)
    True
    """
    args = {"data_or_genre": data_or_genre}
    return _perform("ratings", args, methods, baselines, protocol)
