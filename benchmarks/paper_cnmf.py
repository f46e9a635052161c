"""Ibrahim & Fu, "Recovering joint probability of discrete random variables from pairwise
marginals": every table and figure, ours beside the published numbers.

* Tables 1-5 (synthetic factor MSE and joint-PMF MRE) and Table 6 (runtime):
  ``_cnmf_synthetic.py`` (protocol, data generation and metrics in its docstring).
* Tables 7-14 (UCI classification, MovieLens rating prediction): ``_cnmf_real.py``.
* Fig. 1 (separable and sufficiently scattered H, an illustration): drawn, with the
  two conditions checked on the drawn matrices.
* Plots of Tables 1, 2, 4 and 5 (error against S, ours and published, one panel per
  table) next to the printed numbers.

Every cell prints ours (mean and standard deviation over the trials, the count said in
the output), the published number and, with ``--authors-code``, the authors' MATLAB
code run under GNU Octave on the first trial's data, or on the first
``--authors-trials`` (``_authors_cnmf.py``). ``--json`` saves the cells for
``paper_tables.py``, which writes the documentation's table.

Usage::

    python benchmarks/paper_cnmf.py                        # everything, 20 trials
    python benchmarks/paper_cnmf.py --tables 4 5 --trials 5
    python benchmarks/paper_cnmf.py --authors-code ~/joint-probability-estimation/\
jointprobability_code_tsp/JointProbability_synthetic --tables 1 4
    python benchmarks/paper_cnmf.py --quick                # smoke run (the test suite)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import _cnmf_synthetic as syn
import numpy as np
from _common import parse_args_quick
from _paper import RESULTS_DIR, Report, load

SYNTHETIC = (1, 2, 3, 4, 5)
REAL = (7, 8, 9, 10, 11, 12, 13, 14)


def _real_module():
    try:
        import _cnmf_real
    except ImportError:  # pragma: no cover - the module ships with the benchmarks
        return None
    return _cnmf_real


def figure_1(report: Report, plot_dir: Path, seed: int) -> None:
    """Fig. 1: a separable H and a sufficiently scattered H (20 x 3), rows on the simplex.

    Separable: the three unit rows plus 17 rows uniform on the simplex. Sufficiently
    scattered (Definition 2): 20 rows on the simplex whose convex hull contains the
    circle inscribed in the triangle (the intersection of the cone C with the simplex)
    without any row at a vertex. Both conditions are checked numerically.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon
    from scipy.spatial import ConvexHull

    rng = np.random.default_rng(seed)
    separable = np.vstack([np.eye(3), rng.dirichlet(np.ones(3), size=17)])
    # rows near the edges, none at a vertex: points on the edges at random positions
    edge = rng.uniform(0.15, 0.85, size=18)
    corners = np.eye(3)
    scattered = [
        corners[k] * t + corners[(k + 1) % 3] * (1 - t)
        for k, t in zip(np.repeat([0, 1, 2], 6), edge, strict=True)
    ]
    scattered = np.vstack([*scattered, rng.dirichlet(np.ones(3) * 5, size=2)])

    def to_xy(h):
        h = h / h.sum(axis=1, keepdims=True)
        return np.column_stack([h[:, 1] + 0.5 * h[:, 2], np.sqrt(3) / 2 * h[:, 2]])

    centre = to_xy(np.ones((1, 3)))[0]
    radius = np.sqrt(3) / 6  # inscribed circle of the unit-edge triangle

    def circle_inside(xy):
        hull = ConvexHull(xy)
        # every facet a x + b y + c <= 0 inside; the circle is inside if its centre is at
        # least `radius` from every facet
        dist = -(hull.equations[:, :2] @ centre + hull.equations[:, 2])
        return bool(np.all(dist >= radius - 1e-9))

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    checks = {}
    for ax, h, title in (
        (axes[0], separable, "separable"),
        (axes[1], scattered, "sufficiently scattered"),
    ):
        xy = to_xy(h)
        tri = to_xy(np.eye(3))
        ax.add_patch(Polygon(tri, closed=True, fill=False, lw=1.5))
        hull = ConvexHull(xy)
        ax.add_patch(Polygon(xy[hull.vertices], closed=True, alpha=0.25, color="C0"))
        ax.add_patch(Circle(centre, radius, fill=False, ls="--", color="C3"))
        ax.plot(xy[:, 0], xy[:, 1], "o", color="C0", ms=4)
        ax.set_title(f"H in R^(20x3): {title}")
        ax.set_aspect("equal")
        ax.axis("off")
        checks[title] = circle_inside(xy)
    vertices_hit = bool(np.all(np.isclose(separable[:3], np.eye(3))))
    fig.suptitle("Ibrahim & Fu, Fig. 1 (drawn by benchmarks/paper_cnmf.py)")
    path = plot_dir / "cnmf_fig1.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(
        f"\nFig. 1 drawn to {path}: separable H has a row at every vertex: {vertices_hit}; "
        "the inscribed circle (the cone C on the simplex) lies in the convex hull of "
        f"the rows: separable {checks['separable']}, sufficiently scattered "
        f"{checks['sufficiently scattered']} (no row at a vertex: "
        f"{not np.any(np.isclose(scattered, 1.0))})"
    )
    report.add(
        "Fig. 1",
        "separable H contains the inscribed circle",
        "drawn",
        "check",
        1.0,
        float(checks["separable"]),
        better="higher",
        note=f"figure: {path.name}",
    )
    report.add(
        "Fig. 1",
        "sufficiently scattered H contains the inscribed circle",
        "drawn",
        "check",
        1.0,
        float(checks["sufficiently scattered"]),
        better="higher",
        note=f"figure: {path.name}",
    )


def plot_error_curves(report: Report, plot_dir: Path) -> Path | None:
    """Error against S for Tables 1, 2, 4, 5: ours (solid) and published (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (t, k)
        for t in ("Table 1", "Table 2", "Table 4", "Table 5")
        for k in ("MSE", "MRE")
        if any(c.table == t and c.metric == k for c in report.cells)
    ]
    if not panels:
        return None
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False
    )
    # one colour per method in every panel
    color = {
        row: f"C{i}"
        for i, row in enumerate(
            dict.fromkeys(c.row for c in report.cells if (c.table, c.metric) in panels)
        )
    }
    for ax, (table, metric) in zip(axes[0], panels, strict=True):
        cells = [c for c in report.cells if c.table == table and c.metric == metric]
        for row in dict.fromkeys(c.row for c in cells):
            mine = [c for c in cells if c.row == row and c.ours is not None]
            s = [10 ** int(c.column.split("e")[-1]) for c in mine]
            ax.loglog(s, [c.ours for c in mine], "-o", color=color[row], label=row, ms=4)
            if all(c.published is not None for c in mine):
                ax.loglog(s, [c.published for c in mine], "--", color=color[row], alpha=0.6)
        ax.set_title(f"{table}: {metric}")
        ax.set_xlabel("S (rows)")
        ax.grid(True, which="both", alpha=0.3)
    handles = {
        row: plt.Line2D([], [], color=c, marker="o", ms=4) for row, c in color.items()
    }
    fig.legend(
        handles.values(),
        handles.keys(),
        loc="lower center",
        ncol=3,
        fontsize=8,
        bbox_to_anchor=(0.5, -0.12),
    )
    fig.suptitle("Ibrahim & Fu: ours (solid) against published (dashed)")
    path = plot_dir / "cnmf_error_vs_S.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"\nplot of Tables 1, 2, 4, 5 written to {path}")
    return path


def authors_values(paths, seed, ap) -> dict:
    """``(table, row, column, metric) -> (authors' value, file name)`` of earlier runs."""
    out = {}
    for path in paths:
        earlier = load(path)
        if earlier.settings.get("seed") != seed:
            ap.error(
                f"--authors-from {path}: its run used seed "
                f"{earlier.settings.get('seed')}, not --seed {seed}: not the same data"
            )
        for c in earlier.cells:
            if c.authors is not None:
                out[(c.table, c.row, c.column, c.metric)] = (c.authors, path.name)
    return out


def merge_reports(paths, out, plot_dir) -> int:
    """Write the cells of the runs in ``paths`` (one paper) into one JSON file.

    The error curves of Tables 1, 2, 4, 5 are drawn again from the merged cells.
    """
    parts = [load(p) for p in paths]
    if len({r.paper for r in parts}) != 1:
        raise SystemExit(f"--merge: the files are of different papers: {paths}")
    merged = Report(parts[0].paper, parts[0].command)
    seen = set()  # a cell in two files: the first file's is kept
    for path, part in zip(paths, parts, strict=True):
        for c in part.cells:
            if (key := (c.table, c.row, c.column, c.metric)) not in seen:
                seen.add(key)
                merged.cells.append(c)
        merged.settings[path.name] = part.settings | {"tables": part.tables()}
    print(f"merged {len(merged.cells)} cells into {merged.save(out)}")
    plot_error_curves(merged, plot_dir)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tables",
        nargs="+",
        type=int,
        default=[*SYNTHETIC, 6, *REAL, 0],
        help="tables to run (1-14; 0 is Fig. 1); default all",
    )
    ap.add_argument("--trials", type=int, default=20, help="trials per cell (paper: 20)")
    ap.add_argument(
        "--trials-large",
        type=int,
        default=5,
        help="trials at S = 1e6 (each fit there takes seconds to minutes)",
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=list(syn.SIZES))
    ap.add_argument(
        "--p-obs",
        type=float,
        nargs="+",
        default=list(syn.P_SMALL),
        choices=list(syn.P_SMALL),
        help="Table 3's observation probabilities to run (its columns)",
    )
    ap.add_argument("--methods", nargs="+", default=None, choices=list(syn.LABEL))
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument(
        "--authors-code",
        type=Path,
        default=None,
        help="JointProbability_synthetic folder of the authors' repository: "
        "run their code under Octave on the first --authors-trials trials of every cell",
    )
    ap.add_argument(
        "--authors-trials",
        type=int,
        default=1,
        help="trials of each cell on which --authors-code runs (their mean is shown "
        "beside ours on the same data sets)",
    )
    ap.add_argument(
        "--authors-from",
        type=Path,
        nargs="+",
        default=[],
        help="JSON files of earlier runs (same --seed): their authors' column fills "
        "the cells where --authors-code is not given (their Octave runs take hours)",
    )
    ap.add_argument(
        "--json",
        type=Path,
        default=None,
        help=f"save the cells (e.g. {RESULTS_DIR / 'paper_cnmf.json'})",
    )
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="instead of running: merge these JSON files (runs of different tables) "
        "into --json",
    )
    ap.add_argument("--plot-dir", type=Path, default=RESULTS_DIR / "figures")
    real = _real_module()
    if real is not None:
        real.add_arguments(ap)
    quick = {
        "trials": 1,
        "trials_large": 1,
        "sizes": [1000],
        "tables": [1, 4, 6, 0],
        # a smoke run must not overwrite the figures of a full run
        "plot_dir": Path(tempfile.gettempdir()) / "bayespmf_paper_cnmf_quick",
    }
    if real is not None:
        quick.update(real.QUICK)
    args = parse_args_quick(ap, argv, **quick)
    if args.quick and real is not None:
        args.tables = [1, 4, 6, 0, min(REAL)]
    args.plot_dir.mkdir(parents=True, exist_ok=True)
    unknown = sorted(set(args.sizes) - set(syn.PAPER_SIZES))
    if unknown:
        ap.error(
            f"--sizes must be among the paper's {list(syn.PAPER_SIZES)}; got {unknown}"
        )
    syn.SIZES = tuple(args.sizes)
    syn.P_OBS = tuple(p for p in syn.P_SMALL if p in args.p_obs)
    if args.merge:
        if args.json is None:
            ap.error("--merge needs --json (the merged file)")
        return merge_reports(args.merge, args.json, args.plot_dir)
    authors_from = authors_values(args.authors_from, args.seed, ap)

    report = Report(syn.PAPER, "python benchmarks/paper_cnmf.py")
    report.settings = {
        "trials": args.trials,
        "trials_large": args.trials_large,
        "seed": args.seed,
        "sizes": args.sizes,
        "p_obs": list(syn.P_OBS),
        "authors_code": args.authors_code is not None,
        "quick": args.quick,
    }
    t_all = time.perf_counter()
    timings: dict = {}
    for number in [t for t in SYNTHETIC if t in args.tables]:
        table = f"Table {number}"
        t0 = time.perf_counter()
        print(f"\n{table}: running ({args.trials} trials per cell)", flush=True)
        syn.run_table(
            report,
            table,
            trials=args.trials,
            trials_large=args.trials_large,
            seed=args.seed,
            authors=args.authors_code,
            methods=args.methods,
            timings=timings,
            progress=lambda s: print(s, flush=True),
            authors_from=authors_from,
            authors_trials=args.authors_trials,
        )
        report.print_table(table)
        print(f"{table}: {time.perf_counter() - t0:.0f} s", flush=True)
        if args.json is not None:  # keep what is done if a later table fails
            report.save(args.json)
    if 6 in args.tables:
        syn.add_table6(report, timings)
        if any(c.table == "Table 6" for c in report.cells):
            report.print_table("Table 6", "mean wall time per fit (s) at S = 1e5")
        else:
            print("\nTable 6 needs Tables 1 and 4 at S = 1e5 (--sizes 100000): skipped")
    wanted_real = [t for t in REAL if t in args.tables]
    if wanted_real:
        if real is None:
            print("\nTables 7-14: _cnmf_real.py not found; skipped")
        else:
            real.run_real(report, wanted_real, args)
            for table in report.tables():
                if table.startswith("Table ") and int(table.split()[1]) in REAL:
                    report.print_table(table)
    if 0 in args.tables:
        figure_1(report, args.plot_dir, args.seed)
    plot_error_curves(report, args.plot_dir)
    report.print_summary()
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")
    if args.json is not None:
        print(f"cells saved to {report.save(args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
