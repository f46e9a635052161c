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
    return results
