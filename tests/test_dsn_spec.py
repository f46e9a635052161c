"""The Dirichlet simplex nest in `bayespmf run`: the [simplex] section on a small slice."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pandas as pd
import pytest

from bayespmf.apps.cli import main
from bayespmf.apps.run import run_spec
from bayespmf.apps.spec import SpecError, load_spec

SPEC = pathlib.Path(__file__).parents[1] / "models" / "wikipedia-topics.toml"


def write(tmp_path, text, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.slow
def test_shipped_topic_spec_runs_on_a_slice(tmp_path):
    spec = load_spec(SPEC)
    assert spec.simplex["kernel"] == "multinomial" and spec.fit is None
    # the shipped settings on a slice: 200 paragraphs x 300 words, tiny NUTS
    spec.simplex.update(
        max_rows=200,
        max_words=300,
        n_components=[3, 4],
        n_splits=2,
        nuts_rows=30,
        nuts_words=20,
        draws=5,
        tune=40,  # a few adapted steps: 5 left the step size at tree depth 10
        chains=1,
        top_words=5,
    )
    out = tmp_path / "out"
    res = run_spec(spec, out_dir=str(out), progressbar=False)
    metrics = json.loads((out / "results.json").read_text())
    for f in metrics["files"]:
        assert (out / f).is_file(), f
    K = metrics["simplex"]["n_components"]
    assert K in (3, 4) and res["k_table"]["chosen"].sum() == 1
    table = pd.read_csv(out / "methods.csv", index_col="method")
    assert list(table.index) == ["VLAD", "GDM", "SimplexSPA"]
    assert np.all(np.isfinite(table["perplexity"])) and (table["perplexity"] > 1).all()
    assert (table["coherence_umass"] <= np.log(2)).all()
    vertices = np.load(out / "vertices.npz")
    assert vertices["vlad"].shape == (K, 300)
    np.testing.assert_allclose(vertices["vlad"].sum(axis=1), 1.0)  # topics
    post = pd.read_csv(out / "posterior_vertices.csv")
    assert len(post) == K * 5 and (post["sd"] > 0).all()
    assert ((post["mean"] > 0) & (post["mean"] < 1)).all()
    assert len((out / "topics.txt").read_text().splitlines()) == 3 * (K + 1)


def test_returns_spec_runs(tmp_path, capsys):
    p = write(
        tmp_path,
        'seed = 1\n[data]\nname = "sp500"\noptions = { last_days = 300 }\n'
        "test_fraction = 0.2\n[simplex]\nn_components = 3\n"
        'methods = ["gdm", "spa"]\n[output]\nfigures = false\n',
    )
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--no-progress"]) == 0
    table = pd.read_csv(out / "methods.csv", index_col="method")
    assert list(table.index) == ["GDM", "SimplexSPA"]
    assert (table["frobenius_test"] > 0).all() and (table["volume"] > 0).all()
    metrics = json.loads((out / "results.json").read_text())
    assert metrics["simplex"]["n_test"] == 60 and metrics["simplex"]["kernel"] == "gaussian"
    assert "methods.md" in metrics["files"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[data]\nname = "sp500"\n', r"needs a \[simplex\] section"),
        (
            '[data]\nname = "sp500"\n[simplex]\nmethods = ["vlda"]\n',
            r"'simplex\.methods'.*'vlda'",
        ),
        ('[data]\nname = "car"\n[simplex]\nn_components = 3\n', r"simplex-nest workflow"),
        (
            '[data]\nname = "sp500"\n[simplex]\n[fit]\nn_components = 3\n',
            r"\[simplex\] replaces \[fit\]",
        ),
        ('[data]\nname = "sp500"\n[simplex]\nn_components = [3, 3]\n', "distinct"),
        ('[data]\nname = "sp500"\n[simplex]\nchains = 0\n', r"'simplex\.chains'"),
        (
            '[data]\nname = "sp500"\n[simplex]\nn_components = [3, 22]\n',
            r"'simplex\.n_components'.*must be <= 21",
        ),
        (
            '[data]\nname = "wikipedia"\n[simplex]\nkernel = "gaussian"\n',
            "'multinomial' for a corpus",
        ),
        ('[data]\nname = "sp500"\n[simplex]\nn_component = 3\n', "Did you mean"),
    ],
)
def test_bad_simplex_specs(tmp_path, text, match):
    p = write(tmp_path, text)
    with pytest.raises(SpecError, match=match) as info:
        load_spec(p)
    assert str(p) in str(info.value)
