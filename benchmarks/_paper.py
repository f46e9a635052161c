"""Published-against-ours cells shared by the paper scripts (``paper_*.py``).

Every paper script collects its results as :class:`Cell` records in a :class:`Report`:
one cell per number of a published table or figure (our mean over trials, its standard
deviation and trial count, the published number, and where it was run here, the
authors' own code on the same data). The report prints each table side by side and,
with ``--json PATH``, writes the cells to a JSON file; ``paper_tables.py`` turns the
JSON files under ``benchmarks/paper_results/`` into the documentation's table, so that
table is generated from what the scripts measured, never typed.

A cell's verdict compares ours with the published number in the direction the metric
improves (``better="lower"`` for errors and times, ``"higher"`` for accuracies):

* ``"ok"``: ours is at least as good as published;
* ``"within MC error"``: ours is worse, by less than two standard errors of our mean
  (``sd / sqrt(trials)``), so the difference is not resolved by the trials run;
* ``"worse"``: ours is worse by more than that; with the authors' code also run and
  worse than published too, the verdict is ``"worse, as the authors' code"`` where ours
  is no worse than theirs and ``"worse, and worse than the authors' code"`` where it
  is. "No worse" compares like with like: where their code ran on some trials' data
  only (``ours_same_data`` is ours on those data sets), ours on that data against
  theirs, within two standard errors of the paired difference where it ran on more
  than one data set (``paired_se``); otherwise (their code on the same splits as
  ours) our mean against theirs, within two standard errors of our mean;
* ``"not run"``: ours gave no number (the method refused the data, with the reason in
  the cell's note);
* ``"-"``: a cell that is reported, not judged (``better=None``: runtimes on other
  hardware, counts, settings).
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Where the paper scripts' ``--json`` files live (``paper_tables.py`` reads them).
RESULTS_DIR = Path(__file__).resolve().parent / "paper_results"


@dataclass
class Cell:
    """One published number and ours beside it.

    ``table`` names the table or figure as the paper does ("Table 4", "Fig. 1");
    ``row`` the method (or estimator) and ``column`` the setting ("S=1e4", "p=0.1",
    "accuracy %"). ``metric`` names what is measured ("MSE", "MRE", "time s").
    ``ours`` is the mean over ``trials`` runs with standard deviation ``sd``.
    ``authors`` is the authors' public code run here on the same data (None where not
    run); ``ours_same_data`` is ours on the data their code ran on, where that is some
    trials' data rather than all of ours, and ``paired_se`` the standard error of the
    mean of the paired differences (ours - theirs) over those data sets, where there are
    several. ``better`` is "lower", "higher" or None (not judged). ``note`` is free
    text shown beside the cell (e.g. what differs from the paper's protocol).
    """

    paper: str
    table: str
    row: str
    column: str
    metric: str
    published: float | None
    ours: float | None
    sd: float | None = None
    trials: int = 1
    authors: float | None = None
    better: str | None = "lower"
    ours_same_data: float | None = None
    note: str = ""
    paired_se: float | None = None

    @property
    def verdict(self) -> str:
        if self.better is None or self.published is None:
            return "-"
        if self.ours is None:
            return "not run"
        if not math.isfinite(self.ours):
            return "worse"
        sign = 1.0 if self.better == "lower" else -1.0
        gap = sign * (self.ours - self.published)
        if gap <= 0:
            return "ok"
        se = (self.sd or 0.0) / math.sqrt(max(self.trials, 1))
        if self.trials > 1 and gap <= 2 * se:
            return "within MC error"
        if self.authors is not None and sign * (self.authors - self.published) > 0:
            # the authors' code misses the published number too; ours is excused only
            # where it is no worse than theirs: on the same data where that is one
            # trial's, else our mean up to its Monte Carlo error
            if self.ours_same_data is not None:
                no_worse = sign * (self.ours_same_data - self.authors) <= 2 * (
                    self.paired_se or 0.0
                )
            else:
                no_worse = sign * (self.ours - self.authors) <= 2 * se
            if no_worse:
                return "worse, as the authors' code"
            return "worse, and worse than the authors' code"
        return "worse"


def fmt_authors(cell: Cell) -> str:
    """The authors' column: their value, and ours on the same data where it differs."""
    if cell.ours_same_data is None or cell.authors is None:
        return fmt(cell.authors)
    return f"{fmt(cell.authors)} (ours {fmt(cell.ours_same_data)})"


def fmt(value: float | None, digits: int = 4) -> str:
    """A number as the tables print it: ``-`` for None, 4 significant digits."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}"


@dataclass
class Report:
    """The cells of one paper, printed as tables and saved as JSON."""

    paper: str
    command: str
    cells: list[Cell] = field(default_factory=list)
    settings: dict = field(default_factory=dict)

    def add(self, table, row, column, metric, published, values=None, **kwargs) -> Cell:
        """Add a cell from the per-trial ``values`` (mean, sd and count computed here).

        ``values`` may be one number or a sequence; ``None`` (not run) gives an empty
        cell. Keyword arguments go to :class:`Cell` (``authors``, ``better``, ``note``).
        """
        ours = sd = None
        trials = 0
        if values is not None:
            vals = [float(v) for v in (values if hasattr(values, "__len__") else [values])]
            trials = len(vals)
            if vals:
                ours = sum(vals) / trials
                sd = (
                    math.sqrt(sum((v - ours) ** 2 for v in vals) / (trials - 1))
                    if trials > 1
                    else 0.0
                )
        cell = Cell(
            self.paper, table, row, column, metric, published, ours, sd, trials, **kwargs
        )
        self.cells.append(cell)
        return cell

    def tables(self) -> list[str]:
        seen = []
        for c in self.cells:
            if c.table not in seen:
                seen.append(c.table)
        return seen

    def print_table(self, table: str, title: str = "") -> None:
        """Print one table: a row per (row, metric), ours | published per column."""
        cells = [c for c in self.cells if c.table == table]
        columns = list(dict.fromkeys(c.column for c in cells))
        rows = list(dict.fromkeys((c.row, c.metric) for c in cells))
        show_authors = any(c.authors is not None for c in cells)
        print(f"\n{self.paper}, {table}" + (f": {title}" if title else ""))
        sub = ["ours (sd)", "paper"] + (["authors' code"] if show_authors else [])
        head = [
            f"{col}: {s}" if i == 0 else s for col in columns for i, s in enumerate(sub)
        ]
        print("| method | metric | " + " | ".join(head) + " |")
        print("|---|---|" + "---|" * len(head))
        index = {(c.row, c.metric, c.column): c for c in cells}
        for row, metric in rows:
            parts = []
            for col in columns:
                c = index.get((row, metric, col))
                if c is None:
                    parts += [""] * len(sub)
                    continue
                mark = {"ok": "", "-": "", "within MC error": " ~", "not run": ""}.get(
                    c.verdict, " !"
                )
                parts += [f"{fmt(c.ours)} ({fmt(c.sd, 2)}){mark}", fmt(c.published)]
                if show_authors:
                    parts.append(fmt_authors(c))
            print(f"| {row} | {metric} | " + " | ".join(parts) + " |")
        trials = sorted({c.trials for c in cells if c.ours is not None})
        notes = sorted({c.note for c in cells if c.note})
        print(
            f"trials per cell: {', '.join(map(str, trials)) or '-'}; "
            "'!' worse than published, '~' worse within 2 standard errors"
        )
        for note in notes:
            print(f"  note: {note}")

    def summary(self) -> dict:
        """Counts of verdicts per table."""
        out: dict = {}
        for c in self.cells:
            out.setdefault(c.table, {}).setdefault(c.verdict, 0)
            out[c.table][c.verdict] += 1
        return out

    def print_summary(self) -> None:
        print(f"\n{self.paper}: verdicts per table (cells)")
        for table, counts in self.summary().items():
            text = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            print(f"  {table}: {text}")

    def save(self, path) -> Path:
        """Write the cells, settings and provenance to ``path`` (JSON)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "paper": self.paper,
            "command": self.command,
            "settings": self.settings,
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "machine": f"{platform.machine()}, {platform.python_version()}",
            "cells": [asdict(c) | {"verdict": c.verdict} for c in self.cells],
        }
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(payload, indent=1))
        tmp.replace(path)
        return path


def load(path) -> Report:
    """A :class:`Report` back from its JSON file."""
    payload = json.loads(Path(path).read_text())
    report = Report(payload["paper"], payload["command"], settings=payload["settings"])
    for c in payload["cells"]:
        c.pop("verdict", None)
        report.cells.append(Cell(**c))
    report.settings.setdefault("when", payload.get("when"))
    report.settings.setdefault("machine", payload.get("machine"))
    return report
