"""Old stack against new stack, side by side in one run (stack migration, item 5).

Runs every measurement once per stack, each in its own Python process of that stack's
virtual environment, interleaved (row 1 old, row 1 new, row 2 old, ...; the order
flips on every repeat) so that drifts in machine load hit both stacks alike, then
prints one Markdown table: row | old stack | new stack | new/old, after the versions
of Python, PyMC, PyTensor (and its default linker), ArviZ, NumPy and Numba that each
stack's child process reports. The rows:

1. wall time of the main job, ``<venv>/bin/bayespmf run models/car.toml --out <tmp>``,
   first with an empty compile cache (a fresh PyTensor ``base_compiledir`` and
   ``NUMBA_CACHE_DIR``), then again with the cache that run left (warm); and the
   first ``LatentClassPMF(n_components=4, random_state=0).fit`` on UCI Car in a fresh
   process
   with an empty cache (imports timed apart); the same fit at random_state 0-7 in one
   warm process (one seed's fit time varies 3-fold with its starts);
   the compile cost of a posterior: in a fresh process with an empty cache,
   ``sample()`` of 2 x (5 tune + 5 draws) on Car at rank 4 started at its point
   estimate (what a notebook's first sampling cell compiles), then the same at rank
   3 in that process (a further model: what each new rank or data set compiles);
2. NUTS on Car at rank 4, per ``nuts_sampler`` (pymc, nutpie, numpyro): ``sample()``
   from the default point estimate, 2 chains x (500 tune + 500 draws), seed 0, as
   ``benchmarks/bayes_latent_class.py --compare`` does; the smallest bulk ESS over all
   parameters of the label-aligned posterior, ESS per wall second (compilation
   included, the point estimate not), the largest r-hat and the divergences;
3. ``benchmarks/bench_em_step.py`` of each stack (compiled EM step against the SciPy
   reference step; its defaults, S = 1e5): compile time, median ms of both, ratio;
4. the default fit (``LatentClassPMF(4, random_state=0)``) against StepMix with
   ``n_init=20`` on Car (``lca_vs_peers.stepmix_fit``: ``measurement="categorical_nan"``,
   the same model as ``"categorical"`` on Car, which has no missing entries), both
   log-likelihoods by ``bayespmf.pmf.log_likelihood_rows``; "not installed" when
   StepMix is missing from a stack;
5. every notebook in ``notebooks/``, executed by nbclient as tests/test_notebooks.py
   does (kernel ``python3`` of that stack's environment, cell timeout 600 s).

Every child runs with its stack's repository root as working directory, that stack's
``bin`` first on ``PATH``, no ``PYTHONPATH``, ``MPLBACKEND=Agg``, and
``PYTENSOR_FLAGS=base_compiledir=...`` and ``NUMBA_CACHE_DIR`` in a cache folder of its
own stack (fresh for the empty-cache rows; ``--cache-dir``/<old|new> or a temporary
one for the others, so their first run may compile). A child reports its numbers as
one ``STACKCMP_JSON {...}`` line on stdout; a child that fails shows as
``failed: <last error line>`` in its stack's cell, and the study goes on. The parent
uses only the standard library, so either stack's Python can run it::

    python benchmarks/stack_compare.py \
        --old-python /work/venvs/py311/bin/python --old-root /work/old \
        --new-python /work/venvs/py313/bin/python --new-root /work/main

``--quick`` shrinks the sizes for a smoke run (job: draws = tune = 100, 2 chains,
2 task trials at ranks 2 and 3; NUTS: 100 + 100; EM step: S = 2e4, 10 repeats); the
notebooks keep their own sizes (select some with ``--notebooks``). ``--rows`` picks
row groups, ``--repeats`` runs each row more often (the cells show the median, and the
range), ``--json`` saves the raw results, ``--keep`` keeps the work folder (logs of
every child, outputs, caches). ``--vary-seed`` gives NUTS repeat r the sampling seed
r (the start stays the seed-0 estimate): with ``--repeats 5`` the NUTS cells show the
median and range over five seeds, which a single seed's ESS cannot.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

#: Prefix of the line with which a child reports its numbers on stdout.
TAG = "STACKCMP_JSON "
RANK = 4
SEED = 0
SAMPLERS = ("pymc", "nutpie", "numpyro")
ROW_GROUPS = (
    "job",
    "first-fit",
    "fits",
    "compile",
    "nuts",
    "em-step",
    "peers",
    "notebooks",
)
#: Seeds of the "fits" row (``--quick``: 2).
FIT_SEEDS = 8
#: Packages whose versions head the table (python, and the default PyTensor linker,
#: are added by the child).
PACKAGES = (
    "pymc",
    "pytensor",
    "arviz",
    "numpy",
    "numba",
    "scipy",
    "xarray",
    "nutpie",
    "numpyro",
    "jax",
    "stepmix",
)
#: Seconds a notebook cell may run (tests/test_notebooks.py's CELL_TIMEOUT).
CELL_TIMEOUT = 600
#: ``--quick`` overrides of models/car.toml: (section, key, value).
QUICK_JOB = (
    ("sample", "draws", 100),
    ("sample", "tune", 100),
    ("sample", "chains", 2),
    ("task", "n_trials", 2),
    ("task", "candidates", [2, 3]),
)
QUICK_EM_STEP = ["--n-samples", "20000", "--repeats", "10", "--warmup", "1"]


# --------------------------------------------------------------------------- child


def _child_path(root: Path) -> None:
    """Import the benchmarks of the child's own stack, never this file's folder."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != here]
    sys.path.insert(0, str(root / "benchmarks"))


def _missing(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


def child_versions(args) -> dict:
    import importlib.metadata as md

    info = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            info[name] = md.version(name)
        except md.PackageNotFoundError:
            info[name] = "not installed"
    import pytensor
    from pytensor.compile.mode import get_default_mode

    linker = get_default_mode().linker
    kind = type(linker).__name__
    if hasattr(linker, "use_cloop"):  # VMLinker: C thunks and C loop, or Python
        kind += f" (c_thunks={linker.c_thunks}, use_cloop={linker.use_cloop})"
    info["pytensor linker"] = f"{pytensor.config.linker}: {kind}"
    import bayespmf

    info["bayespmf from"] = str(Path(bayespmf.__file__).resolve().parents[1])
    return {"metrics": {}, "versions": info}


def child_first_fit(args) -> dict:
    t0 = time.perf_counter()
    from bayespmf.datasets import load_car
    from bayespmf.estimators import LatentClassPMF

    data = load_car().data
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        LatentClassPMF(n_components=RANK, random_state=SEED).fit(data)
    return {"metrics": {"fit_s": time.perf_counter() - t0, "import_s": t_import}}


def child_fits(args) -> dict:
    """The default fit on Car at FIT_SEEDS random states, warm, in one process.

    One seed's fit time varies 3-fold with the starts its random stream draws (the
    multi-start exploration refines 30 of 300 starts, and how long EM runs on each
    depends on the start), so a stack's fit speed is compared over many seeds: the
    same seeds on both stacks, after one warm-up fit (compilation and caches).
    """
    import numpy as np

    from bayespmf.datasets import load_car
    from bayespmf.estimators import LatentClassPMF

    data = load_car().data
    seeds = range(2 if args.quick else FIT_SEEDS)
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        LatentClassPMF(n_components=RANK, random_state=1000).fit(data)
        for seed in seeds:
            t0 = time.perf_counter()
            LatentClassPMF(n_components=RANK, random_state=seed).fit(data)
            times.append(time.perf_counter() - t0)
    return {
        "metrics": {"total_s": float(np.sum(times)), "median_s": float(np.median(times))}
    }


def _posterior_dataset(idata):
    """The posterior group as an xarray.Dataset (ArviZ 0.23 InferenceData or DataTree)."""
    import xarray as xr

    post = idata.posterior
    return post if isinstance(post, xr.Dataset) else post.to_dataset()


def ess_rhat(idata) -> tuple[float, float]:
    """Smallest bulk ESS and largest r-hat over all parameters, per variable."""
    import arviz as az
    import numpy as np

    post = _posterior_dataset(idata)
    ess, rhat = [], []
    for var in post.data_vars:
        one = post[[var]]
        ess.append(float(np.min(np.asarray(az.ess(one, method="bulk")[var]))))
        rhat.append(float(np.max(np.asarray(az.rhat(one)[var]))))
    return min(ess), max(rhat)


def _divergences(idata) -> float:
    import numpy as np

    try:
        return float(np.asarray(idata.sample_stats["diverging"]).sum())
    except (AttributeError, KeyError):
        return float("nan")


def child_compile(args) -> dict:
    """Seconds of a tiny ``sample()`` of a first model and of a further one."""
    from bayespmf.datasets import load_car
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.models import latent_class_model, sample

    data = load_car().data
    metrics = {}
    for n_components, key in ((RANK, "first_s"), (RANK - 1, "further_s")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = LatentClassPMF(n_components, random_state=SEED).fit(data)
            t0 = time.perf_counter()
            sample(
                latent_class_model(data, n_components),
                init=est,
                draws=5,
                tune=5,
                chains=2,
                cores=2,
                random_seed=SEED,
                progressbar=False,
            )
        metrics[key] = time.perf_counter() - t0
    return {"metrics": metrics}


def child_nuts(args) -> dict:
    if args.sampler != "pymc" and _missing(args.sampler):
        return {"status": "not installed", "message": args.sampler}
    from bayespmf.datasets import load_car
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.models import latent_class_model, sample

    data = load_car().data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LatentClassPMF(RANK, random_state=SEED).fit(data)
    model = latent_class_model(data, RANK)
    t0 = time.perf_counter()
    idata = sample(
        model,
        init=est,
        nuts_sampler=args.sampler,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=False,
        log_likelihood=False,
    )
    wall = time.perf_counter() - t0
    ess, rhat = ess_rhat(idata)
    return {
        "metrics": {
            "ess_per_s": ess / wall,
            "ess_min": ess,
            "rhat_max": rhat,
            "wall_s": wall,
            "divergences": _divergences(idata),
        }
    }


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
#: A line of bench_em_step.py's table: label, median ms, min ms, then more numbers.
_EM_ROW = re.compile(rf"^(\S.*?\S)\s{{2,}}({_NUM})\s+({_NUM})(?:\s+{_NUM})*\s*$")


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def parse_em_step(text: str) -> tuple[dict, dict]:
    """(metrics, labels of the extra metrics) from what bench_em_step.py prints.

    Reads both its layouts: "compiled PyTensor (EMKernel.step)" and, since the
    migration, "default (build_em_kernel)" plus one line per extra PyTensor linker.
    ValueError when the SciPy line, the default kernel's line or the ratio is missing.
    """
    metrics, labels, in_table = {}, {}, False
    for line in text.splitlines():
        if re.match(r"step\s+median ms", line):
            in_table = True
            continue
        ratio = re.match(rf"ratio \w+ / SciPy:\s+({_NUM})", line)
        if ratio:
            metrics["ratio"] = float(ratio.group(1))
            in_table = False
        row = _EM_ROW.match(line) if in_table else None
        if row is None:
            continue
        label, median = row.group(1), float(row.group(2))
        if label.startswith("SciPy"):
            metrics["scipy_ms"] = median
        elif "EMKernel.step" in label or "build_em_kernel" in label:
            metrics["compiled_ms"] = median
        else:
            key = f"{_slug(label)}_ms"
            metrics[key] = median
            labels[key] = f"{label}, median"
    missing = {"scipy_ms", "compiled_ms", "ratio"} - set(metrics)
    if missing:
        raise ValueError(f"no {sorted(missing)} in bench_em_step.py's output")
    return metrics, labels


def child_em_step(args) -> dict:
    import bench_em_step
    import numpy as np

    from bayespmf.kernels.em import build_em_kernel, init_random

    argv = QUICK_EM_STEP if args.quick else []
    # the kernel's build + first step (compilation), timed alike on both stacks before
    # the script runs (each version of the script times a different span)
    n = int(argv[argv.index("--n-samples") + 1]) if argv else 100_000
    codes = bench_em_step.make_data(n, 15, 10, 0.5, 0)
    n_cat = np.full(15, 10)
    start = init_random(n_cat, 10, random_state=0)
    t0 = time.perf_counter()
    kernel = build_em_kernel(codes, n_cat, 10)
    kernel.step(start.weights, np.concatenate(start.factors))
    build_s = time.perf_counter() - t0

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        bench_em_step.main(argv)
    sys.stderr.write(buf.getvalue())
    metrics, labels = parse_em_step(buf.getvalue())
    return {"metrics": {"build_s": build_s, **metrics}, "labels": labels}


def child_peers(args) -> dict:
    from bayespmf.datasets import load_car
    from bayespmf.estimators import LatentClassPMF
    from bayespmf.pmf import log_likelihood_rows

    data = load_car().data
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LatentClassPMF(RANK, random_state=SEED).fit(data)
    metrics = {
        "fit_s": time.perf_counter() - t0,
        "loglik": float(log_likelihood_rows(data, est.weights_, est.factors_).sum()),
    }
    if _missing("stepmix"):
        return {"metrics": metrics, "missing": "stepmix"}
    from lca_vs_peers import stepmix_fit

    params, t_sm, _, _ = stepmix_fit(data, RANK)
    metrics["stepmix_s"] = t_sm
    metrics["stepmix_loglik"] = float(log_likelihood_rows(data, *params).sum())
    metrics["loglik_gap"] = metrics["loglik"] - metrics["stepmix_loglik"]
    metrics["time_ratio"] = metrics["stepmix_s"] / metrics["fit_s"]
    return {"metrics": metrics}


def child_notebook(args) -> dict:
    path = args.root / "notebooks" / args.notebook_file
    if not path.exists():
        return {"status": "not installed", "message": f"no notebooks/{path.name}"}
    import nbclient
    import nbformat

    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        book,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    t0 = time.perf_counter()
    client.execute()
    return {"metrics": {"wall_s": time.perf_counter() - t0}}


CHILDREN = {
    "versions": child_versions,
    "first-fit": child_first_fit,
    "fits": child_fits,
    "compile": child_compile,
    "nuts": child_nuts,
    "em-step": child_em_step,
    "peers": child_peers,
    "notebook": child_notebook,
}


def one_line(err: BaseException) -> str:
    """``Type: last non-empty line of the message``, at most 200 characters."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    # strip ANSI colours (nbclient's CellExecutionError carries them)
    last = re.sub(r"\x1b\[[0-9;]*m", "", lines[-1]) if lines else ""
    return f"{type(err).__name__}: {last}"[:200]


def _where(err: BaseException, root: Path) -> str:
    """`` (at <file>:<line>)``: the innermost frame in the stack's repository."""
    this = Path(__file__).resolve()
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        path = Path(frame.filename).resolve()
        if path != this and path.is_relative_to(root.resolve()):
            return f" (at {path.relative_to(root.resolve())}:{frame.lineno})"
    return ""


def child_main(args) -> int:
    _child_path(args.root)
    try:
        result = CHILDREN[args.child](args)
        result.setdefault("status", "ok")
    except Exception as err:
        traceback.print_exc()
        result = {"status": "error", "message": one_line(err) + _where(err, args.root)}
    print(TAG + json.dumps(result), flush=True)
    return 0 if result["status"] != "error" else 1


# -------------------------------------------------------------------------- parent


@dataclass
class Stack:
    name: str
    python: Path
    root: Path
    cache: Path
    versions: dict = field(default_factory=dict)

    @property
    def bin(self) -> Path:
        return self.python.parent


@dataclass
class Metric:
    key: str
    label: str
    fmt: str  # "s", "ms", "int", "rhat", "ll", "x"
    compare: str = "ratio"  # "ratio" (new / old) or "diff" (new - old)
    extra: bool = False  # reported by only some children (not declared by the row)


@dataclass
class Row:
    """One measurement: a command per stack and the metrics it reports."""

    name: str
    label: str
    metrics: list[Metric]
    child: list[str] | None = None  # arguments of this script's child mode
    cache: str | None = None  # None: the stack's shared cache; else a named one
    fresh_cache: bool = False  # empty the named cache first
    results: dict = field(default_factory=lambda: {"old": [], "new": []})


def child_env(stack: Stack, cache: Path) -> dict:
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"):
        env.pop(name, None)
    pytensor_dir, numba_dir = cache / "pytensor", cache / "numba"
    pytensor_dir.mkdir(parents=True, exist_ok=True)
    numba_dir.mkdir(parents=True, exist_ok=True)
    own = [
        f
        for f in env.get("PYTENSOR_FLAGS", "").split(",")
        if f.strip() and not f.strip().startswith(("base_compiledir=", "compiledir="))
    ]
    env["PYTENSOR_FLAGS"] = ",".join([f"base_compiledir={pytensor_dir}", *own])
    env["NUMBA_CACHE_DIR"] = str(numba_dir)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONUNBUFFERED"] = "1"
    env["VIRTUAL_ENV"] = str(stack.bin.parent)
    env["PATH"] = os.pathsep.join([str(stack.bin), env.get("PATH", "")])
    return env


def last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def run_process(cmd, cwd: Path, env: dict, timeout: float) -> tuple[int, str, str, float]:
    """Run ``cmd`` in its own process group; (returncode, stdout, stderr, wall s)."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            [str(c) for c in cmd],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as err:  # no such interpreter or folder
        return -1, "", f"{type(err).__name__}: {err}", time.perf_counter() - t0
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return -9, out, err + f"\ntimeout after {timeout:.0f} s", time.perf_counter() - t0
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, out, err, time.perf_counter() - t0


#: The main job's steps (bayespmf.apps.run announces "== <title> ..." and, at its end,
#: "   done in <x> s"), by the first word of the title.
JOB_STEPS = {"fitting": "fit_step_s", "sampling": "sample_step_s", "task": "task_step_s"}


def job_steps(out: str) -> dict:
    """Seconds of the fit, sample and task steps the job printed."""
    steps, current = {}, None
    for line in out.splitlines():
        if line.startswith("== "):
            current = JOB_STEPS.get(line[3:].split(" ", 1)[0])
        match = re.match(r"\s+done in ([.\d]+) s", line)
        if match and current:
            steps[current] = float(match.group(1))
            current = None
    return steps


def parse_child(rc: int, out: str, err: str) -> dict:
    lines = [ln for ln in out.splitlines() if ln.startswith(TAG)]
    if lines:
        result = json.loads(lines[-1][len(TAG) :])
        if rc != 0 and result.get("status") == "ok":
            result = {"status": "error", "message": f"exit status {rc}"}
        return result
    return {"status": "error", "message": last_error_line(err or out)}


class Study:
    def __init__(self, args, work: Path):
        self.args = args
        self.work = work
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        shared = Path(args.cache_dir) if args.cache_dir else work / "cache"
        self.stacks = {
            "old": Stack("old", args.old_python, args.old_root, shared / "old"),
            "new": Stack("new", args.new_python, args.new_root, shared / "new"),
        }
        self.n_done = 0
        self.n_total = 0

    def cache_of(self, row: Row, stack: Stack, rep: int) -> Path:
        if row.cache is None:
            return stack.cache
        return self.work / "cache-runs" / f"{row.cache}-{stack.name}-{rep}"

    def command(self, row: Row, stack: Stack, rep: int) -> list:
        if row.child is None:  # the main job: the stack's console script
            spec = self.job_spec(stack)
            out = self.work / "out" / f"{row.name}-{stack.name}-{rep}"
            exe = stack.bin / "bayespmf"
            head = [exe] if exe.exists() else [stack.python, "-m", "bayespmf.apps.cli"]
            return [*head, "run", spec, "--out", out, "--no-progress"]
        cmd = [stack.python, Path(__file__).resolve(), "--child", *row.child]
        cmd += ["--root", stack.root]
        if row.name.startswith("nuts") and self.args.vary_seed:
            cmd += ["--seed", str(SEED + rep)]
        if self.args.quick:
            cmd.append("--quick")
        return cmd

    def job_spec(self, stack: Stack) -> Path:
        spec = stack.root / "models" / "car.toml"
        if not self.args.quick:
            return spec
        quick = self.work / f"car-quick-{stack.name}.toml"
        if not quick.exists():
            quick.write_text(quick_spec(spec.read_text(encoding="utf-8")), "utf-8")
        return quick

    def run_one(self, row: Row, stack: Stack, rep: int) -> dict:
        cache = self.cache_of(row, stack, rep)
        if row.fresh_cache and cache.exists():
            shutil.rmtree(cache)
        rc, out, err, wall = run_process(
            self.command(row, stack, rep),
            stack.root,
            child_env(stack, cache),
            self.args.timeout,
        )
        log = self.logs / f"{row.name}-{stack.name}-{rep}.log"
        log.write_text(f"$ rc={rc} wall={wall:.2f} s\n--- stdout\n{out}\n--- stderr\n{err}")
        if row.child is None:
            result = {"status": "ok", "metrics": {"wall_s": wall, **job_steps(out)}}
            if rc != 0:
                result = {"status": "error", "message": last_error_line(err or out)}
        else:
            result = parse_child(rc, out, err)
        self.n_done += 1
        state = result["status"]
        if state != "ok":
            state += f": {result.get('message', '')}"
        say(
            f"[{self.n_done}/{self.n_total}] {row.name} {stack.name}: {wall:.1f} s, {state}"
        )
        if result["status"] == "error":
            tail = "\n".join(err.splitlines()[-15:])
            say(f"    last lines of stderr (log: {log}):\n{tail}")
        return result

    def versions(self) -> None:
        row = Row("versions", "versions", [], child=["versions"])
        self.n_total += 2
        for stack in self.stacks.values():
            result = self.run_one(row, stack, 0)
            stack.versions = result.get("versions") or {
                "python": f"failed: {result.get('message', '')}"
            }

    def run(self, rows: list[Row]) -> None:
        self.n_total += 2 * len(rows) * self.args.repeats
        for row in rows:
            for rep in range(self.args.repeats):
                order = ("old", "new") if rep % 2 == 0 else ("new", "old")
                for name in order:
                    row.results[name].append(self.run_one(row, self.stacks[name], rep))


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def quick_spec(text: str) -> str:
    """models/car.toml with the QUICK_JOB sizes (tables one level deep, as specs are)."""
    import tomllib

    spec = tomllib.loads(text)
    for section, key, value in QUICK_JOB:
        if section in spec:
            spec[section][key] = value
    lines = [f"{k} = {_toml_value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    for name, table in spec.items():
        if isinstance(table, dict):
            lines += ["", f"[{name}]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def build_rows(args) -> list[Row]:
    rows: list[Row] = []
    wall = [Metric("wall_s", "wall", "s")]
    groups = args.rows
    if "job" in groups:
        job = "`bayespmf run models/car.toml`" + (" (quick sizes)" if args.quick else "")
        steps = [
            Metric("wall_s", "wall", "s"),
            Metric("fit_step_s", "fit step", "s"),
            Metric("sample_step_s", "sample step", "s"),
            Metric("task_step_s", "task step", "s"),
        ]
        rows.append(
            Row("job-cold", f"{job}, empty cache", steps, cache="job", fresh_cache=True)
        )
        rows.append(Row("job-warm", f"{job}, warm cache", steps, cache="job"))
    if "first-fit" in groups:
        rows.append(
            Row(
                "first-fit",
                f"first LatentClassPMF(n_components={RANK}).fit on Car, fresh process, "
                "empty cache",
                [
                    Metric("fit_s", "fit", "s"),
                    Metric("import_s", "imports + load_car", "s"),
                ],
                child=["first-fit"],
                cache="first-fit",
                fresh_cache=True,
            )
        )
    if "fits" in groups:
        n_seeds = 2 if args.quick else FIT_SEEDS
        rows.append(
            Row(
                "fits",
                f"LatentClassPMF(n_components={RANK}).fit on Car, "
                f"random_state 0-{n_seeds - 1}, warm, one process",
                [
                    Metric("total_s", f"{n_seeds} fits, total", "s"),
                    Metric("median_s", "one fit, median", "s"),
                ],
                child=["fits"],
            )
        )
    if "compile" in groups:
        rows.append(
            Row(
                "compile",
                "sample() 2 x (5 + 5) on Car, fresh process, empty cache",
                [
                    Metric("first_s", f"rank {RANK}, first model", "s"),
                    Metric("further_s", f"rank {RANK - 1}, a further model", "s"),
                ],
                child=["compile"],
                cache="compile",
                fresh_cache=True,
            )
        )
    if "nuts" in groups:
        draws, tune = (100, 100) if args.quick else (args.draws, args.tune)
        for sampler in args.samplers:
            rows.append(
                Row(
                    f"nuts-{sampler}",
                    f"NUTS {sampler}, Car rank {RANK}, {args.chains} x ({tune} + {draws})",
                    [
                        Metric("ess_per_s", "min bulk ESS / s", "x"),
                        Metric("ess_min", "min bulk ESS", "int"),
                        Metric("rhat_max", "max r-hat", "rhat", "diff"),
                        Metric("wall_s", "wall (compile incl.)", "s"),
                        Metric("divergences", "divergences", "int", "diff"),
                    ],
                    child=[
                        "nuts",
                        "--sampler",
                        sampler,
                        "--draws",
                        str(draws),
                        "--tune",
                        str(tune),
                        "--chains",
                        str(args.chains),
                    ],
                )
            )
    if "em-step" in groups:
        size = "S=2e4, quick" if args.quick else "S=1e5"
        rows.append(
            Row(
                "em-step",
                f"bench_em_step.py ({size}, N=15, I=10, F=10)",
                [
                    Metric("build_s", "build_em_kernel + 1st step", "s"),
                    Metric("scipy_ms", "SciPy step, median", "ms"),
                    Metric("compiled_ms", "compiled step, median", "ms"),
                    Metric("ratio", "compiled / SciPy", "x"),
                ],
                child=["em-step"],
            )
        )
    if "peers" in groups:
        rows.append(
            Row(
                "peers",
                f"Car rank {RANK}: default fit vs StepMix n_init=20",
                [
                    Metric("fit_s", "bayespmf default fit", "s"),
                    Metric("loglik", "bayespmf loglik", "ll", "diff"),
                    Metric("stepmix_s", "StepMix fit", "s"),
                    Metric("stepmix_loglik", "StepMix loglik", "ll", "diff"),
                    Metric("loglik_gap", "loglik bayespmf - StepMix", "ll", "diff"),
                    Metric("time_ratio", "StepMix s / bayespmf s", "x"),
                ],
                child=["peers"],
            )
        )
    if "notebooks" in groups:
        for name in args.notebooks or notebook_names(args):
            rows.append(
                Row(
                    f"nb-{Path(name).stem}",
                    f"notebook {name}",
                    wall,
                    child=["notebook", "--notebook-file", name],
                )
            )
    return rows


def notebook_names(args) -> list[str]:
    names = {
        p.name for r in (args.old_root, args.new_root) for p in r.glob("notebooks/*.ipynb")
    }
    return sorted(names)


FORMATS = {
    "s": "{:.1f} s",
    "ms": "{:.2f} ms",
    "int": "{:.0f}",
    "rhat": "{:.4f}",
    "ll": "{:.2f}",
    "x": "{:.3f}",
}


def summary(results: list[dict], metric: Metric) -> tuple[str, float | None]:
    """(cell text, median) of one metric over the repeats of one stack."""
    values, notes = [], []
    for res in results:
        if res["status"] == "error":
            notes.append(f"failed: {res.get('message', '')}")
        elif res["status"] == "not installed":
            notes.append(f"not installed ({res.get('message', '')})")
        elif metric.key in res.get("metrics", {}):
            values.append(float(res["metrics"][metric.key]))
        elif res.get("missing"):
            notes.append(f"not installed ({res['missing']})")
        else:  # an extra metric: this stack's version of the script has no such line
            notes.append("-" if metric.extra else "not reported")
    if not values:
        return (notes[0] if notes else "not run").replace("|", "\\|"), None
    fmt = FORMATS[metric.fmt]
    med = statistics.median(values)
    text = fmt.format(med)
    if len(values) > 1:
        text += f" ({fmt.format(min(values))} - {fmt.format(max(values))})"
    if notes:
        text += f"; {len(notes)} of {len(results)} runs: {notes[0]}".replace("|", "\\|")
    return text, med


def extra_metrics(row: Row) -> list[Metric]:
    """Metrics a child reported beyond the row's own (with their labels)."""
    known = {m.key for m in row.metrics}
    extra = {}
    for res in row.results["old"] + row.results["new"]:
        for key, label in res.get("labels", {}).items():
            if key not in known:
                extra.setdefault(key, label)
    fmt = {"_ms": "ms", "_s": "s"}
    return [
        Metric(
            k, label, next((f for e, f in fmt.items() if k.endswith(e)), "x"), extra=True
        )
        for k, label in extra.items()
    ]


def compare(metric: Metric, old: float | None, new: float | None) -> str:
    if old is None or new is None:
        return ""
    if metric.compare == "diff":
        return f"diff {new - old:+.4g}"
    if old == 0:
        return ""
    return f"{new / old:.3f}"


def render(study: Study, rows: list[Row], elapsed: float) -> str:
    old, new = study.stacks["old"], study.stacks["new"]
    args = study.args
    out = [
        f"## Stack comparison{' (--quick)' if args.quick else ''}",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
        f"{args.repeats} repeat(s) per row and stack, interleaved; study wall time "
        f"{elapsed / 60:.1f} min.",
        "",
    ]
    if args.quick:
        sizes = ", ".join(f"{s}.{k}={v}" for s, k, v in QUICK_JOB)
        out += [f"Quick sizes: job {sizes}; EM step {' '.join(QUICK_EM_STEP)}.", ""]
    out += [
        "| | old stack | new stack |",
        "|---|---|---|",
        f"| root | {old.root} | {new.root} |",
        f"| interpreter | {old.python} | {new.python} |",
    ]
    keys = list(dict.fromkeys([*old.versions, *new.versions]))
    for key in keys:
        out.append(f"| {key} | {old.versions.get(key, '')} | {new.versions.get(key, '')} |")
    out += ["", "| row | old stack | new stack | new/old |", "|---|---|---|---|"]
    for row in rows:
        for metric in row.metrics + extra_metrics(row):
            o_text, o_val = summary(row.results["old"], metric)
            n_text, n_val = summary(row.results["new"], metric)
            label = row.label if len(row.metrics) == 1 else f"{row.label}: {metric.label}"
            out.append(
                f"| {label} | {o_text} | {n_text} | {compare(metric, o_val, n_val)} |"
            )
    return "\n".join(out) + "\n"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old-python", type=Path, help="Python of the old stack's venv")
    ap.add_argument("--old-root", type=Path, help="repository root of the old stack")
    ap.add_argument("--new-python", type=Path, help="Python of the new stack's venv")
    ap.add_argument("--new-root", type=Path, help="repository root of the new stack")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--rows", nargs="+", choices=ROW_GROUPS, default=list(ROW_GROUPS))
    ap.add_argument("--repeats", type=int, default=1, help="runs per row and stack")
    ap.add_argument("--samplers", nargs="+", default=list(SAMPLERS))
    ap.add_argument("--notebooks", nargs="+", help="notebook file names (default: all)")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument(
        "--cache-dir",
        help="folder of the shared compile caches (<dir>/old, <dir>/new; default: in "
        "the work folder); the empty-cache rows always use fresh ones",
    )
    ap.add_argument(
        "--vary-seed",
        action="store_true",
        help="NUTS rows: repeat r samples with random_seed r (the start stays the "
        "seed-0 estimate), so --repeats gives a spread over seeds, not over timing",
    )
    ap.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    ap.add_argument("--work-dir", help="work folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child")
    ap.add_argument("--json", help="also write the raw results to this file")
    ap.add_argument("--output", help="also write the Markdown table to this file")
    # child mode (run by the parent in each stack's Python)
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--sampler", help=argparse.SUPPRESS)
    ap.add_argument("--notebook-file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is None:
        for name in ("old_python", "old_root", "new_python", "new_root"):
            if getattr(args, name) is None:
                ap.error(f"--{name.replace('_', '-')} is required")
            # absolute, but not resolved: a venv's python is a link to the base one
            setattr(args, name, Path(os.path.abspath(getattr(args, name))))
        if args.repeats < 1:
            ap.error("--repeats must be >= 1")
    elif args.root is not None:
        args.root = Path(os.path.abspath(args.root))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        return child_main(args)
    t0 = time.perf_counter()
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="stack_compare_"))
    work.mkdir(parents=True, exist_ok=True)
    say(f"work folder: {work}")
    study = Study(args, work)
    rows = build_rows(args)
    try:
        study.versions()
        study.run(rows)
    finally:
        table = render(study, rows, time.perf_counter() - t0)
        print(table, flush=True)
        if args.output:
            Path(args.output).write_text(table, encoding="utf-8")
        if args.json:
            raw = {
                "stacks": {k: vars(s) for k, s in study.stacks.items()},
                "rows": {r.name: {"label": r.label, "results": r.results} for r in rows},
            }
            text = json.dumps(raw, indent=1, default=str)
            Path(args.json).write_text(text, encoding="utf-8")
        if args.keep or args.work_dir:
            say(f"kept the work folder {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
