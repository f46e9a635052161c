"""The generated "published against ours" tables: verdicts, round trip, and freshness.

``docs/papers.md`` and the README's summary are written by
``benchmarks/paper_tables.py`` from the JSON files of the paper scripts; the check
below fails when someone edits them by hand or forgets to regenerate them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _paper import Cell, Report, load  # noqa: E402


def _cell(
    ours,
    published=1.0,
    *,
    sd=0.0,
    trials=1,
    authors=None,
    better="lower",
    same=None,
    paired_se=None,
):
    return Cell(
        "P",
        "Table 1",
        "m",
        "c",
        "MSE",
        published,
        ours,
        sd,
        trials,
        authors,
        better,
        ours_same_data=same,
        paired_se=paired_se,
    )


@pytest.mark.parametrize(
    ("cell", "verdict"),
    [
        (_cell(0.9), "ok"),
        (_cell(1.0), "ok"),
        (_cell(1.1), "worse"),
        # 1.1 against 1.0 with sd 0.4 over 16 trials: 2 standard errors are 0.2
        (_cell(1.1, sd=0.4, trials=16), "within MC error"),
        (_cell(1.5, sd=0.4, trials=16), "worse"),
        (_cell(1.5, authors=1.6), "worse, as the authors' code"),
        (_cell(1.5, authors=1.2), "worse, and worse than the authors' code"),
        (_cell(1.5, sd=0.4, trials=4, authors=1.2), "worse, as the authors' code"),
        (_cell(1.5, authors=0.8), "worse"),
        # their code ran on one trial's data: ours on that data decides, not our mean
        (
            _cell(1.5, sd=0.4, trials=4, authors=1.2, same=1.1),
            "worse, as the authors' code",
        ),
        (
            _cell(1.1, sd=0.01, trials=4, authors=1.2, same=1.3),
            "worse, and worse than the authors' code",
        ),
        # their code on several data sets: ours on the same ones, within two standard
        # errors of the paired difference
        (
            _cell(1.5, sd=0.4, trials=4, authors=1.20, same=1.25, paired_se=0.03),
            "worse, as the authors' code",
        ),
        (
            _cell(1.5, sd=0.4, trials=4, authors=1.20, same=1.25, paired_se=0.02),
            "worse, and worse than the authors' code",
        ),
        (_cell(0.8, better="higher"), "worse"),
        (_cell(1.2, better="higher"), "ok"),
        (_cell(5.0, better=None), "-"),
        (_cell(None), "not run"),
        (_cell(float("nan")), "worse"),
    ],
)
def test_verdicts(cell, verdict):
    assert cell.verdict == verdict


def test_authors_column_shows_ours_on_their_data():
    from _paper import fmt_authors

    assert fmt_authors(_cell(1.5, authors=1.2)) == "1.2"
    assert fmt_authors(_cell(1.5, authors=1.2, same=1.1)) == "1.2 (ours 1.1)"


def test_report_add_summary_and_json_round_trip(tmp_path):
    report = Report("Paper", "python x.py", settings={"trials": 3})
    c = report.add("Table 2", "EM", "S=1e3", "MSE", 0.5, [0.1, 0.2, 0.3])
    assert c.ours == pytest.approx(0.2) and c.sd == pytest.approx(0.1) and c.trials == 3
    report.add("Table 2", "EM", "S=1e4", "MSE", 0.05, None, note="refused")
    report.add("Fig. 1", "EM", "x", "time s", 1.0, 2.0, better=None)
    assert report.summary() == {"Table 2": {"ok": 1, "not run": 1}, "Fig. 1": {"-": 1}}
    back = load(report.save(tmp_path / "r.json"))
    assert [(c.row, c.ours, c.verdict) for c in back.cells] == [
        (c.row, c.ours, c.verdict) for c in report.cells
    ]
    assert back.settings["trials"] == 3


def test_juror_merge_takes_each_column_from_the_first_file(tmp_path):
    import paper_juror

    paper = paper_juror.PAPER

    def run(name, cells, trials):
        report = Report(paper, "cmd", settings={"trials": trials})
        for table, row, column, value in cells:
            report.add(table, row, column, "MAE", 1.0, value)
        return report.save(tmp_path / name)

    old = run(
        "old.json",
        [
            ("Table 2", "JUROR-A", "Ns=100", 9.0),
            ("Table 2", "flat", "Ns=100", 0.1),
            ("Table 2", "JUROR-A", "Ns=1000", 8.0),
            ("Table 7", "JUROR-A", "Car", 80.0),
            ("Table 7", "JUROR-A", "Mushroom", 95.0),
        ],
        2,
    )
    new = run(
        "new.json",
        [("Table 2", "JUROR-A", "Ns=100", 7.0), ("Table 7", "JUROR-A", "Car", 84.0)],
        5,
    )
    first = tmp_path / "first.json"
    assert paper_juror.main(["--merge", str(new), str(old), "--json", str(first)]) == 0
    got = load(first)
    # the re-run column replaces the old one whole (its "flat" row too); others stay
    assert [(c.table, c.row, c.column, c.ours) for c in got.cells] == [
        ("Table 2", "JUROR-A", "Ns=100", 7.0),
        ("Table 2", "JUROR-A", "Ns=1000", 8.0),
        ("Table 7", "JUROR-A", "Car", 84.0),
        ("Table 7", "JUROR-A", "Mushroom", 95.0),
    ]
    assert got.settings["new.json"]["columns_used"] == ["Table 2: Ns=100", "Table 7: Car"]
    assert got.settings["old.json"]["trials"] == 2
    # merging the merged file again keeps the runs it was made of, not itself
    again = tmp_path / "again.json"
    assert paper_juror.main(["--merge", str(first), "--json", str(again)]) == 0
    assert set(load(again).settings) >= {"new.json", "old.json"}
    assert "first.json" not in load(again).settings


def test_generated_tables_match_the_saved_results():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "paper_tables.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_authors_cell_pairs_their_runs_with_ours_on_the_same_data():
    from _cnmf_synthetic import _authors_cell

    ours = {("em", "MSE"): [0.30, 0.20, 0.40, 0.25, 0.35]}  # five trials of ours
    theirs = {("em", "MSE"): [0.28, 0.22, float("nan")]}  # theirs on the first three
    value, same, se, note = _authors_cell(theirs, ours, "em", "MSE", None)
    diff = np.array([0.30 - 0.28, 0.20 - 0.22])  # the NaN estimate is not counted
    assert value == pytest.approx(0.25) and same == pytest.approx(0.25)
    assert se == pytest.approx(diff.std(ddof=1) / np.sqrt(2))
    assert note == "authors' code on 2 data sets"
    # one data set: no paired standard error; none run: the earlier run's value
    assert _authors_cell({("em", "MSE"): [0.1]}, ours, "em", "MSE", None)[2] is None
    # ours refused every data set: their mean alone
    alone = _authors_cell({("ctd", "MSE"): [0.2, 0.4]}, {}, "ctd", "MSE", None)
    assert alone == (pytest.approx(0.3), None, None, "authors' code on 2 data sets")
    earlier = _authors_cell({}, ours, "em", "MSE", (0.5, "old.json"))
    assert earlier == (0.5, 0.30, None, "authors' code: from old.json, same data")
