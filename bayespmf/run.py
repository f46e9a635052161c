"""Carry out a model specification: load, summarize, fit, evaluate and write results."""

from __future__ import annotations

from pathlib import Path

from bayespmf.spec import RunSpec

__all__ = ["run_spec"]


def _say(msg: str) -> None:
    print(msg, flush=True)  # noqa: T201 - the runner's job is to report


def run_spec(
    spec: RunSpec, *, out_dir: str | None = None, progressbar: bool = True
) -> dict:
    """Run a validated :class:`~bayespmf.spec.RunSpec` and write its outputs.

    Returns
    -------
    dict
        What was computed (``summary`` DataFrame and, when fitted, the results).
    """
    from bayespmf import datasets

    name = spec.data["name"]
    dataset = datasets.load(name, **spec.data["options"])
    data = dataset.data
    out = Path(out_dir or spec.output.get("dir") or f"results/{name}")
    out.mkdir(parents=True, exist_ok=True)
    summary = data.summary()
    summary.to_csv(out / "summary.csv")
    _say(f"{name}: {data!r}")
    _say(summary.to_string(float_format=lambda v: f"{v:.1f}"))
    results: dict = {"summary": summary, "out_dir": out}
    _say(f"wrote {out / 'summary.csv'}")
    if spec.fit is not None:
        results.update(_fit_and_evaluate(spec, data, dataset.target, out, progressbar))
    return results


def _fit_and_evaluate(spec: RunSpec, data, default_target, out: Path, progressbar: bool):
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from bayespmf.estimators import LatentClassPMF
    from bayespmf.metrics import accuracy
    from bayespmf.plots import plot_factors

    fit = spec.fit
    seed = fit["random_state"]
    target = spec.data["target"] or default_target
    if target is not None:
        data.index_of(target)  # fail early on a bad target name
    train, test = data.train_test_split(
        1.0 - spec.data["test_fraction"], spec.data["test_fraction"], random_state=seed
    )
    rank = fit["rank"] or 5
    est = LatentClassPMF(
        rank,
        method=fit["method"],
        max_iter=fit["max_iter"],
        tol=fit["tol"],
        random_state=seed,
        progressbar=progressbar,
    )
    _say(f"fitting {est!r} on {train.n_samples} training rows ...")
    est.fit(train)
    res = {
        "method": fit["method"],
        "rank": rank,
        "fit_seconds": round(est.fit_time_, 3),
        "n_iter": int(est.n_iter_),
        "converged": bool(est.converged_),
        "train_loglik_per_row": est.score(train),
        "test_loglik_per_row": est.score(test),
    }
    if target is not None:
        j = data.index_of(target)
        obs = test.mask[:, j]
        y = test.codes[obs, j]
        pred = est.predict(test[obs], j)
        majority = int(np.argmax(np.bincount(train.codes[train.mask[:, j], j])))
        res["target"] = target
        res["test_accuracy_%"] = 100 * accuracy(y, pred)
        res["majority_class_accuracy_%"] = 100 * accuracy(y, np.full_like(y, majority))
    for k, v in res.items():
        _say(f"  {k}: {v:.4f}" if isinstance(v, float) else f"  {k}: {v}")
    est.save(out / "fit.npz")
    (out / "results.json").write_text(json.dumps(res, indent=2))
    fig = plot_factors(
        est.weights_, est.factors_, names=data.names, categories=data.categories
    )
    fig.savefig(out / "factors.png", dpi=110)
    plt.close(fig)
    _say(f"wrote {out / 'fit.npz'}, {out / 'results.json'}, {out / 'factors.png'}")
    return {"estimator": est, "metrics": res}
