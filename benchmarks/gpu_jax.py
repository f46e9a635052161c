"""numpyro's NUTS on a GPU (or this machine's JAX backend) beside the CPU Gibbs step.

Issue 36, item 4. The data are the ``scale`` row of ``bayes_scale.py``: S rows of
``make_latent_class(S, 10, 5, 0.5, n_variables=20, drop_empty_rows=True,
random_state=0)`` (20 variables of 10 categories, rank 5, half of the entries
missing). The start of every run is one ``LatentClassPMF(5, random_state=0,
n_init=4)`` fit on the first 20,000 rows, made once in this process. Each
measurement runs in its own Python process with a time limit (a stalled compilation
cannot stop the others) and a share of one overall budget, in this order:

* ``logp``: the jitted log-density and gradient that numpyro evaluates
  (``jax.value_and_grad``), with the rows as constants of the program (PyMC's
  ``get_jaxified_logp``, ``jax_data="constant"``) and as arguments
  (``jax_data="argument"``): the first call (tracing, XLA compilation, one
  evaluation) and the mean of later calls.
* ``nuts``: ``sample(model, nuts_sampler="numpyro", jax_data=..., chains, draws,
  tune)`` from the start: wall seconds of the call, of which XLA compilation (the
  backend-compile events JAX reports, ``jax.monitoring``), worst aligned r-hat and
  smallest bulk ESS over the weights and factors, divergences, mean tree depth.
* ``gibbs``: ``sample(model, method="gibbs", ...)`` from the same start on the CPU
  (``cores`` = chains), the same figures.

Every finished measurement is printed as a table row at once and written to
``--out`` (JSON), so a run stopped at its time limit keeps what it measured. Run::

    python benchmarks/gpu_jax.py --sizes 100000 1000000 --out gpu_jax.json
    python benchmarks/gpu_jax.py --quick        # small, on whatever backend JAX has
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))

#: Events JAX reports for every compilation (``jax._src.dispatch``): tracing to a
#: jaxpr, lowering to an MLIR module, and XLA's compilation of it.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


def _compile_clock():
    """A dict of seconds per compile event, filled while JAX compiles."""
    import jax

    spent = dict.fromkeys(COMPILE_EVENTS, 0.0)

    def listen(event, duration, **_):
        if event in spent:
            spent[event] += duration

    jax.monitoring.register_event_duration_secs_listener(listen)
    return spent


def _load(path):
    import numpy as np

    from bayespmf.data import CategoricalData
    from bayespmf.models import latent_class_model

    z = np.load(path)
    data = CategoricalData(z["codes"], [int(k) for k in z["n_cat"]])
    start = (z["weights"], [z[f"factor{n}"] for n in range(len(z["n_cat"]))])
    return data, latent_class_model(data, len(z["weights"])), start


def _summary(idata):
    import numpy as np

    from bayespmf.models.diagnostics import rhat_ess_bulk

    post = idata["posterior"].to_dataset()
    names = [v for v in post.data_vars if v == "weights" or v.startswith("A_")]
    rhat, ess = [], []
    for v in names:
        x = post[v].values.reshape(post.sizes["chain"], post.sizes["draw"], -1)
        r, e = rhat_ess_bulk(x)
        rhat.append(np.max(r))
        ess.append(np.min(e))
    out = {"r_hat": float(max(rhat)), "ess_bulk": float(min(ess))}
    stats = idata.get("sample_stats")
    if stats is not None:
        stats = stats.to_dataset()
        if "diverging" in stats:
            out["divergences"] = int(stats["diverging"].values.sum())
        if "tree_depth" in stats:
            out["mean_tree_depth"] = float(stats["tree_depth"].values.mean())
        if "n_steps" in stats:
            out["mean_steps"] = float(stats["n_steps"].values.mean())
    return out


def child_logp(args):
    """One route's first and later calls of the jitted value and gradient."""
    import jax
    import jax.numpy as jnp

    clock = _compile_clock()
    _, model, _ = _load(args.data)
    point = model.initial_point()
    x = [jnp.asarray(point[v.name]) for v in model.value_vars]
    if args.route == "constant":
        from pymc.sampling.jax import get_jaxified_logp

        logp = get_jaxified_logp(model)
        fn = jax.jit(jax.value_and_grad(logp))
        call = (x,)
    else:
        from bayespmf.models._jax_data import jaxified_logp_with_data

        formulation = "gather" if jax.default_backend() == "cpu" else "matmul"
        logp, data = jaxified_logp_with_data(model, formulation)
        fn = jax.jit(jax.value_and_grad(lambda x, d: logp(*x, *d)))
        call = (x, [jnp.asarray(d) for d in data])
    t0 = time.perf_counter()
    value, _ = jax.block_until_ready(fn(*call))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(args.repeats):
        jax.block_until_ready(fn(*call))
    each = (time.perf_counter() - t0) / args.repeats
    return {
        "formulation": formulation if args.route == "argument" else "gather",
        "first_s": first,
        "compile_s": sum(clock.values()),
        "xla_compile_s": clock[COMPILE_EVENTS[2]],
        "per_call_ms": each * 1e3,
        "value": float(value),
    }


def child_sample(args):
    """One ``sample`` call from the saved start (NUTS through numpyro, or Gibbs)."""
    from bayespmf.models import sample

    clock = _compile_clock() if args.kind == "nuts" else None
    _, model, start = _load(args.data)
    kw = {"nuts_sampler": "numpyro", "jax_data": args.route} if args.kind == "nuts" else {}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = sample(
            model,
            init=start,
            method="nuts" if args.kind == "nuts" else "gibbs",
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            random_seed=0,
            progressbar=args.progress,
            log_likelihood=False,
            **({"cores": args.chains} if args.kind == "gibbs" else {}),
            **kw,
        )
    wall = time.perf_counter() - t0
    out = {"wall_s": wall, **_summary(idata)}
    if clock is not None:
        out["compile_s"] = sum(clock.values())
        out["xla_compile_s"] = clock[COMPILE_EVENTS[2]]
        out["jax_data"] = idata.posterior.attrs.get("jax_data")
    return out


def _child_main(args):
    if args.kind == "gibbs":  # the Gibbs step needs no JAX
        out = child_sample(args)
        out["backend"] = f"cpu, {args.chains} processes"
    else:
        import jax

        jax.config.update("jax_enable_x64", True)
        out = (child_logp if args.kind == "logp" else child_sample)(args)
        out["backend"] = jax.default_backend()
    print("RESULT " + json.dumps(out), flush=True)


def _device():
    import jax

    dev = jax.devices()[0]
    return f"JAX {jax.__version__}, {jax.default_backend()}: {dev.device_kind}"


def _prepare(n_rows, path):
    import numpy as np

    from bayespmf.datasets import make_latent_class
    from bayespmf.estimators import LatentClassPMF

    data, _ = make_latent_class(
        n_rows, 10, 5, 0.5, n_variables=20, drop_empty_rows=True, random_state=0
    )
    t0 = time.perf_counter()
    fit = LatentClassPMF(5, random_state=0, n_init=4).fit(data[:20_000])
    fit_s = time.perf_counter() - t0
    factors = {f"factor{n}": np.asarray(a) for n, a in enumerate(fit.factors_)}
    np.savez(
        path,
        codes=np.asarray(data.codes),
        n_cat=np.asarray(data.n_categories),
        weights=np.asarray(fit.weights_),
        **factors,
    )
    return data.n_samples, fit_s


def _run_child(spec, path, limit, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", spec["kind"]]
    cmd += ["--data", path, "--route", spec.get("route", "argument")]
    cmd += ["--chains", str(args.chains), "--draws", str(args.draws)]
    cmd += ["--tune", str(args.tune), "--repeats", str(args.repeats)]
    if args.progress:
        cmd.append("--progress")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=limit, env=os.environ
        )
    except subprocess.TimeoutExpired as err:
        tail = (err.stderr or b"")[-600:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        return {"status": f"not finished in {limit:.0f} s", "tail": tail}
    wall = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return {"status": "ok", "process_s": wall, **json.loads(line[7:])}
    return {"status": f"failed (exit {proc.returncode})", "tail": proc.stderr[-1500:]}


def _row(size, spec, r):
    what = spec["kind"] + (f" {spec['route']}" if spec["kind"] != "gibbs" else " cpu")
    if r["status"] != "ok":
        return f"| {size:.0e} | {what} | {r['status']} |"
    if spec["kind"] == "logp":
        return (
            f"| {size:.0e} | {what} | first call {r['first_s']:.2f} s (compile "
            f"{r['compile_s']:.2f} s, XLA {r['xla_compile_s']:.2f} s), per call "
            f"{r['per_call_ms']:.3f} ms, logp {r['value']:.6e} ({r['backend']}, "
            f"{r['formulation']}) |"
        )
    extra = ""
    if "compile_s" in r:
        extra = f", compile {r['compile_s']:.1f} s (XLA {r['xla_compile_s']:.1f} s)"
    if "divergences" in r:
        extra += f", {r['divergences']} divergences, mean tree depth "
        extra += f"{r.get('mean_tree_depth', float('nan')):.2f}"
    return (
        f"| {size:.0e} | {what} | {r['wall_s']:.1f} s{extra}; r-hat {r['r_hat']:.3f}, "
        f"bulk ESS {r['ess_bulk']:.0f} ({r['backend']}) |"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--budget", type=float, default=450.0, help="seconds, all runs")
    ap.add_argument(
        "--plan",
        nargs="+",
        default=[
            "0:logp:argument:45",
            "0:logp:constant:45",
            "0:nuts:argument:100",
            "1:logp:argument:45",
            "1:nuts:argument:150",
            "0:gibbs::60",
            "0:nuts:constant:60",
            "1:logp:constant:45",
        ],
        help="size index:kind:route:time limit s, run in this order",
    )
    ap.add_argument("--out", default=None, help="JSON file of the results")
    ap.add_argument("--progress", action="store_true", help="numpyro's progress bar")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", choices=["logp", "nuts", "gibbs"], help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--route", default="argument", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.kind = args.child
        _child_main(args)
        return
    if args.quick:
        args.sizes, args.draws, args.tune, args.repeats = [3000, 6000], 30, 30, 2
        args.chains, args.budget = 2, 400.0
    sys.path.insert(0, os.path.dirname(HERE))
    t_start = time.perf_counter()
    print(
        f"{_device()}; Python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"chains {args.chains} x ({args.tune} + {args.draws}); budget {args.budget:.0f} s",
        flush=True,
    )
    tmp = tempfile.mkdtemp(prefix="gpu_jax_")
    paths, results = {}, {"device": _device(), "runs": []}
    for i, n in enumerate(args.sizes):
        paths[i] = os.path.join(tmp, f"rows{n}.npz")
        rows, fit_s = _prepare(n, paths[i])
        print(
            f"# S={n:.0e}: {rows} rows; start fitted on the first "
            f"{min(rows, 20_000)} rows in {fit_s:.1f} s"
        )
    print("| rows | run | result |\n|---|---|---|", flush=True)
    for item in args.plan:
        idx, kind, route, limit = item.split(":")
        idx = int(idx)
        if idx >= len(args.sizes):
            continue
        spec = {"kind": kind, "route": route or "cpu"}
        left = args.budget - (time.perf_counter() - t_start)
        if left < 10:
            print(f"| {args.sizes[idx]:.0e} | {kind} {route} | skipped: budget spent |")
            continue
        r = _run_child(spec, paths[idx], min(float(limit), left), args)
        results["runs"].append({"rows": args.sizes[idx], **spec, **r})
        print(_row(args.sizes[idx], spec, r), flush=True)
        if r["status"] != "ok" and r.get("tail"):
            print("#   " + r["tail"].strip().replace("\n", "\n#   ")[-800:], flush=True)
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(results, fh, indent=1)
    print(f"# total {time.perf_counter() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
