"""Model specifications (TOML) for ``bayespmf run``: parsing and validation.

A specification names a shipped data set, what to fit, whether to sample the posterior,
which task to evaluate and where to write. Every key is checked before any work starts;
an unknown key, a wrong type, a bad value or a missing file fails with a message that
names the key and the file. :func:`load_spec` makes every check the run would make on
its inputs (``bayespmf run --check`` runs it and nothing else): the parameters go
through the validators the run uses (the seeds, ``fit.tol``, ``fit.max_iter``, the
sampler's arguments, the task's), the loader options are checked against the loader's
signature (names and types), and the data set is loaded (well under a second for the
shipped ones), so that the target and the ranks are checked against the data.

Example specification (``models/car.toml``)::

    seed = 0                      # seeds the split, the fit, the sampler and the task

    [data]
    name = "car"                  # a shipped data set (bayespmf datasets)
    target = "class"              # the variable to classify (default: the data set's)
    options = {}                  # loader options, e.g. { genre = "Action" }
    test_fraction = 0.3           # rows held out from the showcase fit

    [fit]                         # the point estimate written to fit.npz / estimate.nc
    rank = 5                      # or a grid, e.g. [3, 5, 8]: chosen by held-out log-lik
    method = "auto"

    [sample]                      # optional: the posterior, written to posterior.nc
    method = "nuts"               # or "advi"
    draws = 500
    tune = 500
    chains = 2

    [task]                        # optional: the application and its baselines
    kind = "classify"             # or "ratings"
    n_trials = 10
    candidates = [2, 3, 5, 8, 12, 20]

    [output]
    dir = "results/car"

Sections and keys (defaults in brackets):

* top level: ``seed`` [0], ``description`` [""].
* ``[data]``: ``name`` (required), ``target``, ``options`` [{}], ``test_fraction`` [0.3].
* ``[fit]``: ``n_components`` (int or list of int) [5], ``method`` ["auto"],
  ``max_iter``, ``tol``, ``random_state`` [seed].
* ``[sample]``: ``method`` ["nuts"; or "gibbs", "advi"], ``draws`` [500], ``tune``
  [500], ``chains`` [2], ``cores`` [chains], ``target_accept`` [0.8] (NUTS),
  ``n_sweeps`` [the Gibbs step's default] (Gibbs), ``target_ess``, ``target_rhat``
  [1.01 with ``target_ess``] and ``max_time`` [no limit] (Gibbs: sample in batches
  until every entry reaches the target, ``draws`` the first batch; see
  :func:`bayespmf.models.sample`), ``advi_iterations`` [20000] (ADVI),
  ``random_seed`` [seed].
* ``[task]``: ``kind`` ["classify" if the data set has a class variable, else
  "ratings"], ``methods``, ``baselines``, ``n_trials`` [10], ``candidates``,
  ``posterior`` [false] (add a posterior-predictive row with the ``[sample]``
  settings), ``posterior_trials`` [1], ``random_state`` [seed].
* ``[simplex]`` (instead of ``[fit]``/``[sample]``/``[task]``; data sets ``wikipedia``
  and ``sp500``): ``kernel`` [the data set's], ``n_components`` (int or list: chosen by
  held-out completion) [5], ``methods`` [["vlad", "gdm", "spa"]], ``n_splits`` [3],
  ``max_rows``, ``max_words`` [0: all], ``nuts_rows`` [0: no NUTS], ``nuts_words``
  [200], ``draws``, ``tune`` [200], ``chains`` [2], ``top_words`` [10],
  ``random_state`` [seed]; see :mod:`bayespmf.apps._task_simplex`
  (``models/wikipedia-topics.toml``).
* ``[output]``: ``dir`` ["results/<name>"], ``figures`` [true], ``netcdf`` [true].
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bayespmf._validation import (
    DataValidationError,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.apps._task_simplex import (
    SIMPLEX_DATASETS,
    check_simplex_data,
    check_simplex_spec,
)

__all__ = ["RunSpec", "SpecError", "load_spec"]


class SpecError(DataValidationError):
    """A model specification file is invalid."""


class _ListOf:
    """Schema type: a TOML array whose items are all of ``item`` (non-empty)."""

    def __init__(self, item: type):
        self.item = item
        self.__name__ = f"list of {item.__name__}"


_INTS = _ListOf(int)
_STRS = _ListOf(str)

#: Sampler methods accepted in [sample].
_SAMPLERS = ("nuts", "gibbs", "advi")
#: Task kinds accepted in [task].
_TASKS = ("classify", "ratings")

# section -> key -> (accepted types, default); a default of ... means required.
# The section "" holds the top-level keys.
_SCHEMA: dict[str, dict[str, tuple[tuple, object]]] = {
    "": {
        "seed": ((int,), 0),
        "description": ((str,), ""),
    },
    "data": {
        "name": ((str,), ...),
        "target": ((str,), None),
        "options": ((dict,), {}),
        "test_fraction": ((float,), 0.3),
    },
    "fit": {
        "n_components": ((int, _INTS), 5),
        "method": ((str,), "auto"),
        "max_iter": ((int,), None),
        "tol": ((float,), None),
        "random_state": ((int,), None),
    },
    "sample": {
        "method": ((str,), "nuts"),
        "draws": ((int,), 500),
        "tune": ((int,), 500),
        "chains": ((int,), 2),
        "cores": ((int,), None),
        "target_accept": ((float,), 0.8),
        "advi_iterations": ((int,), 20000),
        "n_sweeps": ((int,), None),
        "target_ess": ((float,), None),
        "target_rhat": ((float,), None),
        "max_time": ((float,), None),
        "random_seed": ((int,), None),
    },
    "task": {
        "kind": ((str,), None),
        "methods": ((_STRS,), None),
        "baselines": ((_STRS,), None),
        "n_trials": ((int,), 10),
        "candidates": ((_INTS,), None),
        "posterior": ((bool,), False),
        "posterior_trials": ((int,), 1),
        "random_state": ((int,), None),
    },
    "simplex": {  # the Dirichlet simplex nest (bayespmf.apps._task_simplex)
        "kernel": ((str,), None),
        "n_components": ((int, _INTS), 5),
        "methods": ((_STRS,), ["vlad", "gdm", "spa"]),
        "n_splits": ((int,), 3),
        "max_rows": ((int,), 0),
        "max_words": ((int,), 0),
        "nuts_rows": ((int,), 0),
        "nuts_words": ((int,), 200),
        "draws": ((int,), 200),
        "tune": ((int,), 200),
        "chains": ((int,), 2),
        "top_words": ((int,), 10),
        "random_state": ((int,), None),
    },
    "output": {
        "dir": ((str,), None),
        "figures": ((bool,), True),
        "netcdf": ((bool,), True),
    },
}

#: Sections that may be left out altogether (their absence means "do not do this").
_OPTIONAL_SECTIONS = ("fit", "sample", "task", "simplex")


@dataclass
class RunSpec:
    """A validated specification (see the module docstring for the format).

    ``fit``, ``sample`` and ``task`` are None when the section is absent; every other
    key holds its value or its default.
    """

    path: Path
    seed: int = 0
    description: str = ""
    data: dict = field(default_factory=dict)
    fit: dict | None = None
    sample: dict | None = None
    task: dict | None = None
    simplex: dict | None = None
    output: dict = field(default_factory=dict)


def _fail(path, msg):
    raise SpecError(f"{path}: {msg}")


def _type_ok(value, types) -> bool:
    for t in types:
        if isinstance(t, _ListOf):
            if (
                isinstance(value, list)
                and value
                and all(isinstance(v, t.item) and not isinstance(v, bool) for v in value)
            ):
                return True
        elif isinstance(value, t) and not (isinstance(value, bool) and t is not bool):
            return True
    return False


def _check_section(path, section, given, keys) -> dict:
    values = {}
    for key, value in given.items():
        full = f"{section}.{key}" if section else key
        if key not in keys:
            close = difflib.get_close_matches(key, list(keys), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            where = f"[{section}]" if section else "the top level"
            _fail(path, f"unknown key '{full}'.{hint} Keys of {where}: {list(keys)}.")
        types, _ = keys[key]
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not _type_ok(value, types):
            _fail(
                path,
                f"'{full}' must be of type {' or '.join(t.__name__ for t in types)}; "
                f"got {value!r}.",
            )
        values[key] = value
    for key, (_, default) in keys.items():
        if key not in values:
            if default is ...:
                _fail(path, f"missing required key '{section}.{key}'.")
            values[key] = default
    return values


def _one_of(path, key, value, allowed):
    if value not in allowed:
        close = difflib.get_close_matches(str(value), list(allowed), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        _fail(path, f"'{key}' must be one of {list(allowed)}; got {value!r}.{hint}")


def _checked(path, key, check, *args, **kwargs):
    """``check(*args, **kwargs)`` (a validator of the run); its error names ``key``."""
    try:
        return check(*args, **kwargs)
    except ValueError as err:  # DataValidationError included
        raise SpecError(f"{path}: '{key}': {err}") from err


def _at_least(path, key, value, low):
    values = value if isinstance(value, list) else [value]
    if any(v < low for v in values):
        _fail(path, f"'{key}' must be >= {low}; got {value!r}.")


def _check_values(path, spec: RunSpec) -> None:
    from bayespmf.apps.baselines import CLASSIFIERS, RATING_BASELINES
    from bayespmf.datasets import get_info
    from bayespmf.estimators.latent_class import METHODS

    try:
        info = get_info(spec.data["name"])
    except DataValidationError as err:
        raise SpecError(f"{path}: 'data.name': {err}") from err
    spec.data["name"] = info.name
    if not 0.0 < spec.data["test_fraction"] < 1.0:
        _fail(
            path,
            f"'data.test_fraction' must be in (0, 1); got {spec.data['test_fraction']}.",
        )
    if spec.simplex is not None or info.name in SIMPLEX_DATASETS:
        if spec.simplex is None:
            _fail(path, f"the data set {info.name!r} needs a [simplex] section.")
        given = [f"[{s}]" for s in ("fit", "sample", "task") if getattr(spec, s)]
        if given:
            _fail(path, f"[simplex] replaces {', '.join(given)} (latent-class sections).")
        _checked(path, "[simplex]", check_simplex_spec, spec.simplex, info.name, spec.seed)
        return
    if spec.fit is not None:
        _at_least(path, "fit.n_components", spec.fit["n_components"], 1)
        _one_of(path, "fit.method", spec.fit["method"], METHODS)
        if spec.fit["max_iter"] is not None:
            _checked(
                path,
                "fit.max_iter",
                check_int,
                spec.fit["max_iter"],
                "max_iter",
                owner="LatentClassPMF",
                low=1,
            )
        if spec.fit["tol"] is not None:  # finite and >= 0, as LatentClassPMF asks
            _checked(
                path,
                "fit.tol",
                check_float,
                spec.fit["tol"],
                "tol",
                owner="LatentClassPMF",
                low=0.0,
            )
        if spec.fit["random_state"] is None:
            spec.fit["random_state"] = spec.seed
    if spec.sample is not None:
        s = spec.sample
        _one_of(path, "sample.method", s["method"], _SAMPLERS)
        _at_least(path, "sample.draws", s["draws"], 1)
        _at_least(path, "sample.tune", s["tune"], 0)
        _at_least(path, "sample.chains", s["chains"], 1)
        _at_least(path, "sample.advi_iterations", s["advi_iterations"], 1)
        if s["cores"] is not None:
            _at_least(path, "sample.cores", s["cores"], 1)
        if not 0.0 < s["target_accept"] < 1.0:
            _fail(
                path, f"'sample.target_accept' must be in (0, 1); got {s['target_accept']}."
            )
        if s["random_seed"] is None:
            s["random_seed"] = spec.seed
        if spec.fit is None:
            _fail(
                path,
                "[sample] needs a [fit] section: the fit starts and aligns the chains.",
            )
    if spec.task is not None:
        t = spec.task
        if t["kind"] is None:
            t["kind"] = "ratings" if info.name == "movielens" else "classify"
        _one_of(path, "task.kind", t["kind"], _TASKS)
        for m in t["methods"] or ():
            _one_of(path, "task.methods", m, METHODS)
        allowed = CLASSIFIERS if t["kind"] == "classify" else RATING_BASELINES
        for b in t["baselines"] or ():
            _one_of(path, "task.baselines", b, allowed)
        _at_least(path, "task.n_trials", t["n_trials"], 1)
        _at_least(path, "task.posterior_trials", t["posterior_trials"], 1)
        if t["candidates"] is not None:
            _at_least(path, "task.candidates", t["candidates"], 1)
        if t["random_state"] is None:
            t["random_state"] = spec.seed
        if (
            t["kind"] == "classify"
            and spec.data["target"] is None
            and info.name in ("movielens",)
        ):
            _fail(path, "task.kind = 'classify' needs 'data.target' for this data set.")


def _check_seeds(path, spec: RunSpec) -> None:
    """Every seed through ``check_random_state``, which every step of the run uses."""
    seeds = {"seed": spec.seed}
    for section, key in (
        ("fit", "random_state"),
        ("sample", "random_seed"),
        ("task", "random_state"),
    ):
        values = getattr(spec, section)
        if values is not None:
            seeds[f"{section}.{key}"] = values[key]
    for key, value in seeds.items():
        _checked(path, key, check_random_state, value)


def _check_loader_options(path, name: str, options: dict) -> None:
    """``data.options`` against the loader's signature: names, types, required ones.

    A loader would take ``impute = "no"`` as true (a non-empty string), so the type
    of every option is checked against the loader's annotation.
    """
    import inspect
    import typing

    from bayespmf.datasets import loader as loader_of

    loader = loader_of(name)
    params = {
        p.name: p
        for p in inspect.signature(loader).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    hints = typing.get_type_hints(loader)
    for key, value in options.items():
        if key not in params:
            close = difflib.get_close_matches(key, list(params), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            _fail(
                path,
                f"unknown key 'data.options.{key}' for the data set {name!r}.{hint} Its "
                f"loader takes {list(params) or 'no options'}.",
            )
        want = hints.get(key)
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            options[key] = value = float(value)  # TOML writes 2 for 2.0
        if isinstance(want, type) and not (
            isinstance(value, want) and (want is bool or not isinstance(value, bool))
        ):
            _fail(
                path,
                f"'data.options.{key}' must be of type {want.__name__} for {name!r}; "
                f"got {value!r}.",
            )
    missing = [k for k, p in params.items() if p.default is p.empty and k not in options]
    if missing:
        _fail(
            path,
            f"the data set {name!r} needs 'data.options' to give {missing}, e.g. "
            f"options = {{ {missing[0]} = ... }}.",
        )


def _check_inputs(path, spec: RunSpec) -> None:
    """The checks the run makes on its inputs: seeds, loader options, data, sampler, task.

    The data set is loaded (as the run's first step does) so that the target, the
    ranks and the task are checked against it.
    """
    from bayespmf import datasets
    from bayespmf.fit.latent_class import check_identifiable_rank

    _check_seeds(path, spec)
    name, options = spec.data["name"], spec.data["options"]
    _check_loader_options(path, name, options)
    dataset = _checked(path, "data.options", datasets.load, name, **options)
    if spec.simplex is not None:  # a corpus or a returns panel, not categorical data
        _checked(
            path, "simplex.n_components", check_simplex_data, spec.simplex, name, options
        )
        return
    data = dataset.data
    target = spec.data["target"] or dataset.target
    if target is not None:
        key = "data.target" if spec.data["target"] is not None else "data.name"
        _checked(path, key, data.index_of, target)
    if spec.fit is not None:
        candidates = (
            spec.fit["n_components"]
            if isinstance(spec.fit["n_components"], list)
            else [spec.fit["n_components"]]
        )
        for n_components in candidates:
            _checked(
                path,
                "fit.n_components",
                check_identifiable_rank,
                n_components,
                data.n_categories,
                "LatentClassPMF",
            )
    if spec.sample is not None:
        from bayespmf.models import check_sample_target, check_sampler_args

        s = spec.sample
        nuts = s["method"] == "nuts"
        chained = s["method"] in ("nuts", "gibbs")
        # the keywords the run passes to bayespmf.models.sample
        kwargs = {}
        if chained:
            kwargs["cores"] = s["cores"] or 1
        if nuts:
            kwargs["target_accept"] = s["target_accept"]
        if s["method"] == "gibbs" and s["n_sweeps"] is not None:
            kwargs["n_sweeps"] = s["n_sweeps"]
        _checked(
            path,
            "[sample]",
            check_sampler_args,
            s["method"],
            s["draws"],
            s["tune"],
            s["chains"] if chained else 1,
            "sample",
            advi_iterations=s["advi_iterations"],
            sample_kwargs=kwargs,
        )
        goal = _checked(
            path,
            "[sample]",
            check_sample_target,
            s["target_ess"],
            s["target_rhat"],
            s["max_time"],
            owner="sample",
            method=s["method"],
            family_name="latent_class",
            chains=s["chains"] if chained else 1,
            sample_kwargs=kwargs,
        )
        if goal is not None:  # the r-hat target the run passes (its default filled)
            s["target_rhat"] = goal.rhat
    if spec.task is not None:
        from bayespmf.apps import tasks

        t = spec.task
        kw = task_arguments(spec)  # what bayespmf.apps.run passes to the task
        if t["kind"] == "classify":
            _checked(
                path,
                "[task]",
                tasks.check_task_inputs,
                "classify",
                datasets.Dataset(data, target),
                **kw,
            )
        else:
            _checked(path, "[task]", tasks.check_task_inputs, "ratings", data, **kw)


def task_arguments(spec: RunSpec) -> dict:
    """The keyword arguments of the ``[task]`` of ``spec`` for its task function.

    :func:`bayespmf.apps.tasks.classify` or :func:`~bayespmf.apps.tasks.predict_ratings`
    (the run adds ``progressbar``); ``--check`` validates the same arguments, so the
    two cannot drift. A task without ``candidates`` takes a rank grid from ``[fit]``; a
    task with ``posterior = true`` takes its sampler sizes from ``[sample]`` (or the
    task's defaults).
    """
    from bayespmf.apps import tasks

    t = spec.task
    kw = {"n_trials": t["n_trials"], "random_state": t["random_state"]}
    for key in ("methods", "baselines", "candidates"):
        if t[key] is not None:
            kw[key] = t[key]
    if (
        t["candidates"] is None
        and spec.fit is not None
        and isinstance(spec.fit["n_components"], list)
    ):
        kw["candidates"] = spec.fit["n_components"]
    if t["posterior"]:
        s = spec.sample or {}
        kw["posterior"] = {
            "method": s.get("method", "nuts"),
            "draws": s.get("draws", tasks.POSTERIOR_DEFAULTS["draws"]),
            "tune": s.get("tune", tasks.POSTERIOR_DEFAULTS["tune"]),
            "chains": s.get("chains", tasks.POSTERIOR_DEFAULTS["chains"]),
            "n_trials": t["posterior_trials"],
        }
    return kw


def load_spec(path: str | Path) -> RunSpec:
    r"""Read and validate a TOML model specification.

    Raises
    ------
    SpecError
        Missing or unreadable file, invalid TOML, an unknown section or key (with a
        "did you mean"), a value of the wrong type or out of range, or an unknown data
        set, method, sampler, task or baseline; whatever the run would refuse in its
        inputs: a seed, ``fit.tol`` or sampler argument its validators refuse, an
        unknown or wrongly typed loader option, an unknown target, a rank the data
        cannot identify, task arguments the task refuses.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "s.toml"
    >>> lines = ['[data]', 'name = "car"', '[fit]', 'n_components = 3']
    >>> _ = p.write_text(chr(10).join(lines))
    >>> load_spec(p).fit["n_components"]
    3
    >>> lines[-1] = 'n_component = 3'
    >>> _ = p.write_text(chr(10).join(lines))
    >>> load_spec(p)
    Traceback (most recent call last):
    ...
    bayespmf.apps.spec.SpecError: ...: unknown key 'fit.n_component'. ...
    """
    path = Path(path)
    if not path.is_file():
        _fail(
            path,
            "file not found. Pass the path of a .toml specification, e.g. models/car.toml.",
        )
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from err
    sections = [s for s in _SCHEMA if s]
    top = {}
    for key, value in raw.items():
        if isinstance(value, dict) and key not in _SCHEMA[""]:
            if key not in _SCHEMA:
                close = difflib.get_close_matches(key, sections, n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                _fail(path, f"unknown section [{key}].{hint} Sections: {sections}.")
        elif key in sections:
            _fail(path, f"'{key}' must be a table [{key}].")
        else:
            top[key] = value
    if "data" not in raw:
        _fail(path, 'missing section [data] (with at least name = "...").')
    spec = RunSpec(path=path)
    for key, value in _check_section(path, "", top, _SCHEMA[""]).items():
        setattr(spec, key, value)
    for section in sections:
        if section not in raw:
            if section not in _OPTIONAL_SECTIONS:
                setattr(spec, section, _check_section(path, section, {}, _SCHEMA[section]))
            continue
        setattr(
            spec, section, _check_section(path, section, raw[section], _SCHEMA[section])
        )
    _check_values(path, spec)
    _check_inputs(path, spec)
    return spec
