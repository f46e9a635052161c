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

**A failed run leaves nothing that looks complete.** The outputs are written into a
hidden staging folder inside the output folder (``.partial-<random>``) and moved into
place only when every step has succeeded: first the old ``results.json`` is removed,
then each output is renamed over its old version (:func:`bayespmf._atomic.replace_file`),
and ``results.json`` is written last, atomically. ``results.json`` is therefore the mark
of a complete run: it exists only when every file it lists (``"files"``) comes from the
run that wrote it. A run that fails (or is interrupted) removes its staging folder and
leaves the output folder as it was, the previous run's results included; a run killed
outright leaves at most a ``.partial-*`` folder, never a result file.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bayespmf._atomic import atomic_write, replace_file, write_netcdf
from bayespmf._runtime import n_cpus
from bayespmf.apps.spec import RunSpec, task_arguments

__all__ = ["estimate_dataset", "run_spec", "table_to_markdown"]

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
        "rank": int(est.weights_.size),
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


def run_spec(
    spec: RunSpec, *, out_dir: str | None = None, progressbar: bool = True
) -> dict:
    """Run a validated :class:`~bayespmf.apps.spec.RunSpec` and write its outputs.

    The outputs are staged and moved into the output folder only at the end, with
    ``results.json`` (the mark of a complete run) written last: a run that fails
    leaves the output folder as it was (see the module docstring).

    Returns
    -------
    dict
        What was computed: ``summary`` (DataFrame), ``out_dir``, and when run,
        ``estimator``, ``metrics``, ``idata``, ``convergence``, ``task_table``.
    """
    name = spec.data["name"]
    out = Path(out_dir or spec.output.get("dir") or f"results/{name}")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".partial-", dir=out))
    try:
        results = _run_staged(spec, out, stage, progressbar)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):  # only if empty
                out.rmdir()
        raise
    shutil.rmtree(stage, ignore_errors=True)
    return results


def _commit(stage: Path, out: Path, written: list[str], metrics: dict) -> None:
    """Move the staged outputs into ``out``; ``results.json`` last (the completion mark)."""
    marker = out / "results.json"
    marker.unlink(missing_ok=True)  # from here on, no set of files looks complete
    for name in written:
        replace_file(stage / name, out / name)
    with atomic_write(marker, text=True) as fh:
        fh.write(json.dumps(metrics, indent=2, default=str))


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
    _commit(stage, out, written, metrics)
    written.append("results.json")
    _say(f"wrote {', '.join(str(out / w) for w in written)}")
    _say(f"total {metrics['total_seconds']:.1f} s")
    results["metrics"] = metrics
    return results


def _fit(spec, data, target, out, metrics, written, progressbar):
    import matplotlib.pyplot as plt

    from bayespmf.estimators import LatentClassPMF
    from bayespmf.metrics import accuracy
    from bayespmf.models import select_rank
    from bayespmf.plots import plot_factors

    fit = spec.fit
    seed = fit["random_state"]
    tf = spec.data["test_fraction"]
    train, test = data.train_test_split(1.0 - tf, tf, random_state=seed)
    rank = fit["rank"]
    res: dict = {"method": fit["method"]}
    if isinstance(rank, list):
        with _Step(f"choosing the rank among {rank} by held-out log-likelihood"):
            table, rank = select_rank(train, rank, method=fit["method"], random_state=seed)
            _say(table.to_string(float_format=lambda v: f"{v:.4f}"))
            res["rank_selection"] = table.reset_index().to_dict(orient="records")
    est = LatentClassPMF(
        rank,
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
        rank=int(rank),
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
    label = (
        f"NUTS, {s['chains']} chains x ({s['tune']} tune + {s['draws']} draws), "
        f"{cores} cores"
        if s["method"] == "nuts"
        else f"ADVI, {s['advi_iterations']} iterations, {s['draws']} draws"
    )
    extra = (
        {"cores": cores, "target_accept": s["target_accept"]}
        if s["method"] == "nuts"
        else {}
    )
    with _Step(f"sampling the rank-{est.weights_.size} posterior: {label}"):
        idata = sample(
            train,
            rank=int(est.weights_.size),
            init=est,
            method=s["method"],
            draws=s["draws"],
            tune=s["tune"],
            chains=s["chains"] if s["method"] == "nuts" else 1,
            random_seed=s["random_seed"],
            progressbar=progressbar,
            advi_iterations=s["advi_iterations"],
            **extra,
        )
    res: dict = {
        "method": s["method"],
        "sampling_seconds": round(float(idata.posterior.attrs["sampling_time"]), 2),
    }
    conv = None
    with _Step("convergence diagnostics (classes aligned to the point estimate)"):
        if s["method"] == "nuts":
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
