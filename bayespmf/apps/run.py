"""Carry out a model specification: load, fit, sample, evaluate, write results.

The steps of :func:`run_spec`, each announced with its elapsed time:

1. load the data set, write ``summary.csv``;
2. ``[fit]``: split off ``data.test_fraction`` of the rows, fit a
   :class:`~bayespmf.estimators.LatentClassPMF` on the rest (a rank grid is resolved by
   held-out log-likelihood), write ``fit.npz``, ``estimate.nc`` and ``factors.png``;
3. ``[sample]``: NUTS or ADVI on the same training rows started from the fit, with the
   classes aligned to it; write ``posterior.nc``, ``convergence.json``/``.txt`` and
   ``trace.png``;
4. ``[task]``: :func:`bayespmf.apps.tasks.classify` or
   :func:`bayespmf.apps.tasks.predict_ratings` with its baselines; write ``task.csv``,
   ``task.md`` and ``task.png``;
5. ``results.json``: everything measured, in one file.

A spec with a ``[simplex]`` section runs :func:`bayespmf.apps._task_simplex.run_simplex`
instead of steps 1-4 (a Dirichlet simplex nest on a corpus or a returns panel).

**A results folder always describes exactly one run.** The output folder is checked
before any work (:func:`check_output_dir`: a folder, writable, and either new, empty or
the folder of an earlier run); the run then writes into a fresh staging folder beside
it (``.<name>.partial-<random>``, same file system), ``results.json`` last, and only
when every step has succeeded is that folder moved into place, replacing the earlier
run's folder (:func:`bayespmf._atomic.replace_folder`). A run that fails (a full
disk, an interrupt, an error in a step) removes its staging folder and leaves the
output folder as it was, the previous run's results included; a run killed outright
leaves at most a ``.<name>.partial-*`` folder beside it, never a result file inside.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from pathlib import Path

import numpy as np

from bayespmf._atomic import atomic_write, replace_folder, write_netcdf
from bayespmf._runtime import n_cpus
from bayespmf._validation import DataValidationError
from bayespmf.apps.spec import RunSpec, task_arguments

__all__ = [
    "OutputDirError",
    "check_output_dir",
    "estimate_dataset",
    "output_dir",
    "run_spec",
    "table_to_markdown",
]

#: Largest number of variables drawn in factor heatmaps and trace plots (a figure per
#: variable beyond that is unreadable; 12 covers the UCI sets but Mushroom).
_MAX_PLOTTED = 12


def _say(msg: str) -> None:
    print(msg, flush=True)  # noqa: T201 - the runner's job is to report


class _Step:
    """Announce a step and, on exit, how long it took."""

    def __init__(self, title: str):
        self.title = title

    def __enter__(self):
        self.t0 = time.perf_counter()
        _say(f"== {self.title} ...")
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            _say(f"   done in {time.perf_counter() - self.t0:.1f} s")


def _nc_name(name: str) -> str:
    # HDF5 (netCDF4) names cannot contain "/"
    return name.replace("/", "_")


def estimate_dataset(est, data):
    """A point estimate as an :class:`xarray.Dataset` laid out like the posterior.

    Variables ``weights`` (``class``) and ``A_<name>`` (``class``, ``<name>_category``),
    the names and dimensions of :func:`bayespmf.models.latent_class_model`, so a point
    estimate and posterior draws can be compared variable by variable.

    Examples
    --------
    >>> from bayespmf import CategoricalData
    >>> from bayespmf.estimators import LatentClassPMF
    >>> d = CategoricalData.from_codes([[0, 1], [1, 0]], names=["a", "b"])
    >>> est = LatentClassPMF.from_params([1.0], [np.array([[0.5], [0.5]])] * 2)
    >>> sorted(estimate_dataset(est, d).data_vars)
    ['A_a', 'A_b', 'weights']
    """
    import xarray as xr

    from bayespmf.models.latent_class import category_dim, factor_var_name

    coords = {"class": np.arange(est.weights_.size)}
    variables = {"weights": (("class",), est.weights_)}
    for name, cats, a in zip(data.names, data.categories, est.factors_, strict=True):
        dim = _nc_name(category_dim(name))
        coords[dim] = [str(c) for c in cats]
        variables[_nc_name(factor_var_name(name))] = (("class", dim), np.asarray(a).T)
    attrs = {
        "method": str(est.method),
        "n_components": int(est.weights_.size),
        "n_iter": int(getattr(est, "n_iter_", 0)),
        "converged": int(bool(getattr(est, "converged_", True))),
    }
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def table_to_markdown(table, float_format: str = "{:.3f}") -> str:
    """A DataFrame as a GitHub Markdown table (no extra dependency).

    Examples
    --------
    >>> import pandas as pd
    >>> print(table_to_markdown(pd.DataFrame({"a": [1.0]}, index=["x"])))
    |  | a |
    | --- | --- |
    | x | 1.000 |
    """

    def fmt(v):
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else float_format.format(v)
        return str(v)

    head = [str(table.index.name or "")] + [str(c) for c in table.columns]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * len(head)) + " |"]
    for idx, row in table.iterrows():
        lines.append("| " + " | ".join([str(idx)] + [fmt(v) for v in row]) + " |")
    return "\n".join(lines)


class OutputDirError(DataValidationError):
    """The output folder of a run cannot hold its results (a ``ValueError`` subclass)."""


def output_dir(spec: RunSpec, out_dir: str | os.PathLike | None = None) -> Path:
    """The absolute path of the folder a run of ``spec`` writes.

    ``out_dir`` (the ``--out`` option), else the spec's ``output.dir``, else
    ``results/<data set>``; a link to a folder stands for that folder.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> spec = SimpleNamespace(data={"name": "car"}, output={"dir": None})
    >>> output_dir(spec).parts[-2:]
    ('results', 'car')
    """
    out = Path(out_dir or spec.output.get("dir") or f"results/{spec.data['name']}")
    out = Path(os.path.abspath(out))
    return out.resolve() if out.is_symlink() else out


def check_output_dir(out, *, source: str = "output.dir") -> Path:
    """Check, before any work, that a run can write its results to the folder ``out``.

    Writes nothing. The folder must be a folder (or not exist yet, below a writable
    folder), writable, and either empty or the folder of an earlier run (its
    ``results.json`` lists every file in it): the run replaces it as a whole when it
    completes (see the module docstring), so a folder holding anything else is refused
    rather than deleted.

    Parameters
    ----------
    out : str or os.PathLike
        The output folder.
    source : str, default "output.dir"
        Where the path came from (``"--out"`` or ``"output.dir"``), for the messages.

    Returns
    -------
    pathlib.Path
        ``out`` as an absolute path.

    Raises
    ------
    OutputDirError
        ``out`` is a file, lies below a file, is or lies in a read-only folder, holds
        files that are not one run's, or holds the current folder; the message names
        the path and the fix.

    Examples
    --------
    >>> import tempfile
    >>> top = Path(tempfile.mkdtemp())
    >>> _ = (top / "notes.txt").write_text("mine")
    >>> check_output_dir(top / "notes.txt", source="--out")
    Traceback (most recent call last):
    ...
    bayespmf.apps.run.OutputDirError: --out .../notes.txt is a file, not a folder: ...
    """
    out = Path(os.path.abspath(out))
    where = f"{source} {out}"
    existing = out
    while not existing.exists() and not existing.is_symlink():
        existing = existing.parent
    if existing != out and not existing.is_dir():
        raise OutputDirError(
            f"{where} lies below {existing}, which is a file, not a folder: no folder "
            f"can be created there. Choose another output folder ({source}), e.g. "
            f"{existing}-results/{out.name}."
        )
    if existing == out and not out.is_dir():
        raise OutputDirError(
            f"{where} is a file, not a folder: the run writes a folder of results. "
            f"Choose a folder ({source}), e.g. {out.with_name(out.stem + '-results')}, "
            "or move the file away."
        )
    # the run creates its staging folder beside `out` and renames it into place, and
    # removes the files of an earlier run: it needs to write `out` and its parent
    for folder in dict.fromkeys([out] * (existing == out) + [out.parent, existing]):
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            raise OutputDirError(
                f"{where}: the folder {folder} is read-only (no write permission), so "
                "the results cannot be written there. Choose a writable output "
                f"folder ({source}), or make it writable (chmod u+w {folder})."
            )
    try:
        Path.cwd().relative_to(out)
    except (ValueError, OSError):
        pass
    else:
        raise OutputDirError(
            f"{where} holds the current folder; a completed run replaces the output "
            f"folder as a whole. Choose a folder below the current one ({source}), "
            "e.g. results/<name>."
        )
    if existing == out:
        strays = _not_from_one_run(out)
        if strays:
            shown = ", ".join(strays[:5]) + (", ..." if len(strays) > 5 else "")
            raise OutputDirError(
                f"{where} holds files that are not from one bayespmf run ({shown}); a "
                "completed run replaces the output folder as a whole, so it must be "
                f"empty, new or an earlier run's folder. Choose another folder "
                f"({source}), or move those files away."
            )
    return out


def _not_from_one_run(out: Path) -> list[str]:
    """The entries of the folder ``out`` that an earlier run did not write (sorted).

    An earlier run's ``results.json`` lists its files; hidden staging and temporary
    leftovers of runs and saves (``.partial-*``, ``.<name>.<random>.tmp``) count as
    the run's too.
    """
    names = sorted(p.name for p in out.iterdir())
    listed = {"results.json"}
    try:
        done = json.loads((out / "results.json").read_text(encoding="utf-8"))
        listed.update(str(f) for f in done.get("files", []))
    except (OSError, ValueError, AttributeError, TypeError):
        listed = set()  # no (readable) mark of a run: nothing in it is a run's
    leftover = (".partial-", ".tmp")
    return [
        n
        for n in names
        if n not in listed and not (n.startswith(leftover[0]) or n.endswith(leftover[1]))
    ]


def run_spec(
    spec: RunSpec, *, out_dir: str | None = None, progressbar: bool = True
) -> dict:
    """Run a validated :class:`~bayespmf.apps.spec.RunSpec` and write its outputs.

    The output folder is checked before any work (:func:`check_output_dir`); the
    outputs are written into a staging folder beside it, ``results.json`` last, which
    replaces the output folder only when the run is complete: a run that fails
    leaves the output folder as it was (see the module docstring).

    Returns
    -------
    dict
        What was computed: ``summary`` (DataFrame), ``out_dir``, and when run,
        ``estimator``, ``metrics``, ``idata``, ``convergence``, ``task_table``.

    Raises
    ------
    OutputDirError
        Before any work, when the output folder cannot hold the results.
    OSError
        A write failed (a full disk, say): nothing of the run is left behind.
    """
    out = check_output_dir(
        output_dir(spec, out_dir), source="--out" if out_dir else "output.dir"
    )
    created = _make_parents(out.parent)
    try:
        stage = out.with_name(f".{out.name}.partial-{secrets.token_hex(6)}")
        stage.mkdir()  # 0o777 & ~umask, as the output folder will have
        if out.is_dir():
            shutil.copymode(out, stage)
    except OSError as err:
        _remove_empty(created)
        raise OutputDirError(
            f"The output folder {out} cannot be written: {err}. Choose a writable "
            "output folder (--out)."
        ) from err
    try:
        return _run_staged(spec, out, stage, progressbar)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_empty(created)
        raise


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the created ones, deepest first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for f in reversed(missing):
        f.mkdir(exist_ok=True)
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed run created, deepest first, while they are empty."""
    for f in folders:
        try:
            f.rmdir()
        except OSError:
            return


def _commit(stage: Path, out: Path, metrics: dict) -> None:
    """Write ``results.json`` (the mark of a complete run), then move the run in place."""
    with atomic_write(stage / "results.json", text=True) as fh:
        fh.write(json.dumps(metrics, indent=2, default=str))
    replace_folder(stage, out)


def _run_staged(spec, out: Path, stage: Path, progressbar: bool) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    from bayespmf import datasets

    t_start = time.perf_counter()
    name = spec.data["name"]
    results: dict = {"out_dir": out}
    metrics: dict = {"spec": str(spec.path), "data": name, "seed": spec.seed}
    written: list[str] = []
    if spec.simplex is not None:  # a Dirichlet simplex nest instead of a latent class
        from bayespmf.apps._task_simplex import run_simplex

        results.update(run_simplex(spec, stage, metrics, written, _Step, _say))
        (stage / "methods.md").write_text(table_to_markdown(results["methods"]) + "\n")
        written.append("methods.md")
    else:
        with _Step(f"loading {name}"):
            dataset = datasets.load(name, **spec.data["options"])
            data = dataset.data
            target = spec.data["target"] or dataset.target
            if target is not None:
                data.index_of(target)  # fail early on a bad target name
            summary = data.summary()
            summary.to_csv(stage / "summary.csv")
            written.append("summary.csv")
            _say(f"   {name}: {data!r}")
            _say(summary.to_string(float_format=lambda v: f"{v:.1f}"))
        results["summary"] = summary
    est = train = test = None
    if spec.fit is not None:
        est, train, test = _fit(spec, data, target, stage, metrics, written, progressbar)
        results["estimator"] = est
    if spec.sample is not None:
        idata, conv = _sample(
            spec, data, target, est, train, test, stage, metrics, written, progressbar
        )
        results["idata"], results["convergence"] = idata, conv
    if spec.task is not None:
        results["task_table"] = _task(
            spec, data, target, stage, metrics, written, progressbar
        )
    metrics["total_seconds"] = round(time.perf_counter() - t_start, 2)
    metrics["files"] = [*written, "results.json"]
    _commit(stage, out, metrics)
    written.append("results.json")
    _say(f"wrote {', '.join(str(out / w) for w in written)}")
    _say(f"total {metrics['total_seconds']:.1f} s")
    results["metrics"] = metrics
    return results


def _fit(spec, data, target, out, metrics, written, progressbar):
    import matplotlib.pyplot as plt

    from bayespmf.estimators import LatentClassPMF
    from bayespmf.metrics import accuracy
    from bayespmf.models import select_n_components
    from bayespmf.plots import plot_factors

    fit = spec.fit
    seed = fit["random_state"]
    tf = spec.data["test_fraction"]
    train, test = data.train_test_split(1.0 - tf, tf, random_state=seed)
    n_components = fit["n_components"]
    res: dict = {"method": fit["method"]}
    if isinstance(n_components, list):
        with _Step(f"choosing the rank among {n_components} by held-out log-likelihood"):
            table, n_components = select_n_components(
                train, n_components, method=fit["method"], random_seed=seed
            )
            _say(table.to_string(float_format=lambda v: f"{v:.4f}"))
            res["rank_selection"] = table.reset_index().to_dict(orient="records")
    est = LatentClassPMF(
        n_components,
        method=fit["method"],
        max_iter=fit["max_iter"],
        tol=fit["tol"],
        random_state=seed,
        progressbar=progressbar,
    )
    with _Step(f"fitting {est!r} on {train.n_samples} training rows"):
        est.fit(train)
    if est.optima_ is not None:
        best = est.optima_.iloc[0]
        _say(
            f"best log-likelihood {est.loglik_:.4f}, reached by {best['n_starts']} of "
            f"{int(est.optima_['n_starts'].sum())} refined starts; "
            f"{len(est.optima_)} distinct optima"
        )
        res["optima"] = est.optima_[["loglik", "gap", "n_starts"]].to_dict(orient="list")
    res.update(
        n_components=int(n_components),
        fit_seconds=round(est.fit_time_, 3),
        n_iter=int(est.n_iter_),
        converged=bool(est.converged_),
        train_loglik=float(est.loglik_),
        train_loglik_per_row=est.score(train),
        test_loglik_per_row=est.score(test),
    )
    if target is not None:
        j = data.index_of(target)
        obs = test.mask[:, j]
        y = test.codes[obs, j]
        majority = int(np.argmax(np.bincount(train.codes[train.mask[:, j], j])))
        res["target"] = target
        res["test_accuracy_%"] = 100 * accuracy(y, est.predict(test[obs], j))
        res["majority_class_accuracy_%"] = 100 * accuracy(y, np.full_like(y, majority))
    for k, v in res.items():
        if k != "rank_selection":
            _say(f"   {k}: {v:.4f}" if isinstance(v, float) else f"   {k}: {v}")
    metrics["fit"] = res
    est.save(out / "fit.npz")
    written.append("fit.npz")
    if spec.output["netcdf"]:
        write_netcdf(estimate_dataset(est, data), out / "estimate.nc", engine="h5netcdf")
        written.append("estimate.nc")
    if spec.output["figures"]:
        k = _MAX_PLOTTED
        fig = plot_factors(
            est.weights_,
            est.factors_[:k],
            names=data.names[:k],
            categories=data.categories[:k],
        )
        fig.savefig(out / "factors.png", dpi=110)
        plt.close(fig)
        written.append("factors.png")
    return est, train, test


def _sample(spec, data, target, est, train, test, out, metrics, written, progressbar):
    import matplotlib.pyplot as plt

    from bayespmf.models import convergence_summary, posterior_predict_proba, sample
    from bayespmf.plots import plot_posterior_factors, plot_posterior_trace

    s = spec.sample
    train = train.drop_empty_rows()
    cores = s["cores"] or min(s["chains"], n_cpus())
    chained = s["method"] in ("nuts", "gibbs")
    label = (
        f"{'NUTS' if s['method'] == 'nuts' else 'Gibbs'}, {s['chains']} chains x "
        f"({s['tune']} tune + {s['draws']} draws), {cores} cores"
        if chained
        else f"ADVI, {s['advi_iterations']} iterations, {s['draws']} draws"
    )
    extra = {"cores": cores} if chained else {}
    if s["method"] == "nuts":
        extra["target_accept"] = s["target_accept"]
    if s["method"] == "gibbs" and s["n_sweeps"] is not None:
        extra["n_sweeps"] = s["n_sweeps"]
    for key in ("target_ess", "target_rhat", "max_time"):
        if s[key] is not None:
            extra[key] = s[key]
    if s["target_ess"] is not None:
        limit = "" if s["max_time"] is None else f", at most {s['max_time']:g} s"
        label += (
            f", then on to r-hat <= {s['target_rhat']:g} and bulk "
            f"ESS >= {s['target_ess']:g}{limit}"
        )
    with _Step(f"sampling the rank-{est.weights_.size} posterior: {label}"):
        idata = sample(
            train,
            n_components=int(est.weights_.size),
            init=est,
            method=s["method"],
            draws=s["draws"],
            tune=s["tune"],
            chains=s["chains"] if chained else 1,
            random_seed=s["random_seed"],
            progressbar=progressbar,
            advi_iterations=s["advi_iterations"],
            **extra,
        )
    res: dict = {
        "method": s["method"],
        "sampling_seconds": round(float(idata.posterior.attrs["sampling_time"]), 2),
    }
    if s["target_ess"] is not None:
        attrs = idata.posterior.attrs
        res["target_reached"] = bool(attrs["target_reached"])
        res["draws_per_chain"] = int(idata.posterior.sizes["draw"])
        res["batches"] = [int(v) for v in attrs["target_batches"]]
        _say(
            f"   target {'reached' if res['target_reached'] else 'NOT reached'}: "
            f"{res['draws_per_chain']} draws per chain in {len(res['batches'])} batches"
        )
    conv = None
    with _Step("convergence diagnostics (classes aligned to the point estimate)"):
        if chained:
            conv = convergence_summary(idata)
            _say(conv["table"].to_string(float_format=lambda v: f"{v:.3f}"))
            _say(f"   divergences: {conv['divergences']}")
            for p in conv["problems"]:
                _say(f"   problem: {p}")
            if conv["ok"]:
                _say("   no problems found")
            doc = {
                "table": conv["table"].reset_index().to_dict(orient="records"),
                "divergences": conv["divergences"],
                "problems": conv["problems"],
                "ok": conv["ok"],
            }
            (out / "convergence.json").write_text(json.dumps(doc, indent=2))
            (out / "convergence.txt").write_text(
                conv["table"].to_string(float_format=lambda v: f"{v:.3f}")
                + f"\n\ndivergences: {conv['divergences']}\n"
                + ("\n".join(f"problem: {p}" for p in conv["problems"]) or "no problems")
                + "\n"
            )
            written += ["convergence.json", "convergence.txt"]
            res["ok"], res["problems"] = conv["ok"], conv["problems"]
            res["r_hat_max"] = float(conv["table"]["r_hat_max"].max())
            res["ess_bulk_min"] = float(conv["table"]["ess_bulk_min"].min())
        else:
            _say("   (ADVI: no r-hat/ESS; the approximation is not checked by chains)")
    if target is not None:
        j = data.index_of(target)
        obs = test.mask[:, j]
        p = posterior_predict_proba(idata, test[obs], j, model_data=train)
        res["posterior_predictive_test_accuracy_%"] = 100 * float(
            np.mean(np.argmax(p, axis=1) == test.codes[obs, j])
        )
        _say(
            "   posterior-predictive test accuracy: "
            f"{res['posterior_predictive_test_accuracy_%']:.2f} %"
        )
    metrics["sample"] = res
    if spec.output["netcdf"]:
        renamed = idata.copy()
        for group, node in idata.children.items():
            ds = node.to_dataset()
            mapping = {v: _nc_name(v) for v in list(ds.data_vars) + list(ds.dims)}
            mapping = {k: v for k, v in mapping.items() if k != v}
            if mapping:
                renamed[group] = ds.rename(mapping)
        write_netcdf(renamed, out / "posterior.nc", engine="h5netcdf")
        written.append("posterior.nc")
    if spec.output["figures"]:
        var_names = ["weights"] + [f"A_{n}" for n in data.names[: _MAX_PLOTTED // 4]]
        fig = plot_posterior_trace(idata, var_names, title="trace of the aligned draws")
        fig.savefig(out / "trace.png", dpi=90)
        plt.close(fig)
        written.append("trace.png")
        fig = plot_posterior_factors(idata, data.names[:_MAX_PLOTTED])
        fig.savefig(out / "posterior_factors.png", dpi=90)
        plt.close(fig)
        written.append("posterior_factors.png")
    return idata, conv


def _task(spec, data, target, out, metrics, written, progressbar):
    import matplotlib.pyplot as plt

    from bayespmf.apps import tasks
    from bayespmf.plots import plot_task

    t = spec.task
    kw = {**task_arguments(spec), "progressbar": progressbar}
    dataset = data if t["kind"] == "ratings" else (data, target)
    with _Step(f"task '{t['kind']}': {t['n_trials']} random splits, methods vs baselines"):
        if t["kind"] == "classify":
            from bayespmf.datasets import Dataset

            table = tasks.classify(Dataset(*dataset), **kw)
        else:
            table = tasks.predict_ratings(dataset, **kw)
    _say(table.drop(columns=["notes"]).to_string(float_format=lambda v: f"{v:.4f}"))
    table.to_csv(out / "task.csv")
    (out / "task.md").write_text(table_to_markdown(table) + "\n")
    written += ["task.csv", "task.md"]
    metrics["task"] = {
        "kind": t["kind"],
        "table": table.reset_index().to_dict(orient="records"),
    }
    if spec.output["figures"]:
        fig = plot_task(table)
        fig.savefig(out / "task.png", dpi=110)
        plt.close(fig)
        written.append("task.png")
    return table
