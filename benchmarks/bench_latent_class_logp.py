"""Gradient cost of the latent-class likelihood: its formulations side by side.

Formulations, built on the same data and evaluated at the same point in one process:

* ``potential one-hot (old)``: the likelihood as a ``pm.Potential`` on the dense one-hot
  design baked into the graph as a constant, ``logsumexp(O @ log A + log w)`` (the
  model of ``latent_class_model`` before issue 13);
* ``rows one-hot, frozen``: :func:`bayespmf.models.latent_class_model` with the
  likelihood built as the one-hot design product from the codes
  (``bayespmf.models._rows.FUSED = False``, the formulation of the observed rows
  before the fused Op), data frozen (``freeze_dims_and_data``), so PyTensor folds
  the design at compile time;
* ``rows fused``: the model as shipped, an observed
  :class:`~bayespmf.models.LatentClassRows` variable on a ``pm.Data`` container whose
  log-likelihood is one fused loop over the observed entries
  (``bayespmf.models._rows.ClassSummedLoglik``, hand-written gradient);
* ``rows fused, frozen``: the same after ``freeze_dims_and_data``: what
  :func:`bayespmf.models.sample` compiles.

For each backend asked for (``--backends``: ``c``, PyTensor's default, what PyMC's
NUTS runs; ``numba``, what nutpie runs; ``jax``, PyMC's JAX driver's
``get_jaxified_logp`` under ``jax.jit(jax.value_and_grad(...))``, what numpyro and
blackjax run; the frozen models only for JAX): compile time (first call included)
and milliseconds per log-density + gradient call, the median and the minimum over
``--rounds`` rounds of ``--calls`` calls, interleaved round by round so load from
other processes hits them alike. The log-densities must agree (they are printed).

Cases: ``notes`` (S=2000, N=5, I=10, F=5, half missing: the STACK-NOTES.md case),
``car`` (S=1728, alphabets 4,4,4,3,3,3,4 as UCI Car, F=4, nothing missing),
``n15`` (S=2000, N=15, I=10, F=5, half missing: issue 13's sampling target) and
``n15-big`` (the same with S=1e5).

    python benchmarks/bench_latent_class_logp.py [--cases notes car n15] [--rounds 30]
        [--backends c numba jax]

``--memory S`` instead compiles the frozen model of the ``n15`` case with S rows
once per formulation (``rows one-hot, frozen`` and ``rows fused, frozen``, C
backend), each in a fresh process, and prints the peak resident memory, the compile
time and milliseconds per call (median of 5): the one-hot design folded into the
compiled graph is S x sum(I_n) doubles.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

CASES = {
    "notes": {"n_samples": 2000, "n_categories": [10] * 5, "rank": 5, "observed": 0.5},
    "car": {"n_samples": 1728, "n_categories": [4, 4, 4, 3, 3, 3, 4], "rank": 4,
            "observed": 1.0},
    "n15": {"n_samples": 2000, "n_categories": [10] * 15, "rank": 5, "observed": 0.5},
    "n15-big": {"n_samples": 100_000, "n_categories": [10] * 15, "rank": 5,
                "observed": 0.5},
}  # fmt: skip


def old_potential_model(data, n_components):
    """The pre-issue-13 model: a Potential on a dense constant one-hot design."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayespmf.models.latent_class import category_dim, factor_var_name
    from bayespmf.pmf import one_hot_design

    coords = {"class": np.arange(n_components), "row": np.arange(data.n_samples)}
    for name, cats in zip(data.names, data.categories, strict=True):
        coords[category_dim(name)] = list(cats)
    design = one_hot_design(data.codes, data.n_categories)
    with pm.Model(coords=coords) as model:
        weights = pm.Dirichlet("weights", a=np.ones(n_components), dims="class")
        log_factors = []
        for name, k in zip(data.names, data.n_categories, strict=True):
            a = pm.Dirichlet(
                factor_var_name(name),
                a=np.ones((n_components, int(k))),
                dims=("class", category_dim(name)),
            )
            log_factors.append(pt.log(a).T)
        log_a = pt.concatenate(log_factors, axis=0)
        o = pt.as_tensor_variable(design.toarray())
        log_joint = pt.dot(o, log_a) + pt.log(weights)[None, :]
        pm.Potential("loglik", pt.logsumexp(log_joint, axis=1).sum())
    return model


def compiled(model, backend="c"):
    """``(fn, x, seconds, logp)``: a value-and-gradient function and a point."""
    from pymc.blocking import DictToArrayBijection

    t0 = time.perf_counter()
    point = model.initial_point(random_seed=0)
    if backend == "jax":
        import jax
        from pymc.sampling.jax import get_jaxified_logp

        logp_fn = get_jaxified_logp(model)
        jitted = jax.jit(jax.value_and_grad(lambda xs: logp_fn(xs)))
        x = [jax.numpy.asarray(point[v.name]) for v in model.value_vars]

        def fn(x):
            return jax.block_until_ready(jitted(x))

        logp = float(fn(x)[0])
        return fn, x, time.perf_counter() - t0, logp
    mode = {"c": None, "numba": "NUMBA"}[backend]
    fn = model.logp_dlogp_function(ravel_inputs=True, mode=mode)
    fn.set_extra_values({})
    x = DictToArrayBijection.map({v.name: point[v.name] for v in model.value_vars}).data
    logp = float(fn(x)[0])
    return fn, x, time.perf_counter() - t0, logp


def run_case(name, spec, rounds, calls, seed, backends):
    from pymc.model.transform.optimization import freeze_dims_and_data

    from bayespmf.datasets import make_latent_class
    from bayespmf.models import _rows, latent_class_model

    data, _ = make_latent_class(
        spec["n_samples"],
        spec["n_categories"],
        n_components=spec["rank"],
        observed_prob=spec["observed"],
        drop_empty_rows=True,
        random_state=seed,
    )
    n_components = spec["rank"]
    _rows.FUSED = False
    try:
        one_hot = freeze_dims_and_data(latent_class_model(data, n_components))
    finally:
        _rows.FUSED = True
    fused = latent_class_model(data, n_components)
    models = {
        "potential one-hot (old)": old_potential_model(data, n_components),
        "rows one-hot, frozen": one_hot,
        "rows fused": fused,
        "rows fused, frozen": freeze_dims_and_data(fused),
    }
    print(
        f"\n== {name}: S={data.n_samples}, I_n={list(map(int, data.n_categories))}, "
        f"F={n_components}, missing {100 * data.missing_fraction:.0f}% =="
    )
    fns = {}
    for backend in backends:
        for label, model in models.items():
            if backend == "jax" and label in ("potential one-hot (old)", "rows fused"):
                continue  # PyMC's JAX driver freezes the data itself
            fns[f"{label} [{backend}]"] = compiled(model, backend)
    times = {label: [] for label in fns}
    for _ in range(rounds):
        for label, (fn, x, _, _) in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(x)
            times[label].append(1e3 * (time.perf_counter() - t0) / calls)
    print(f"{'formulation [backend]':36s} {'compile s':>9s} {'median ms':>9s} "
          f"{'min ms':>7s}  logp")  # fmt: skip
    for label, (_, _, secs, logp) in fns.items():
        t = np.asarray(times[label])
        print(f"{label:36s} {secs:9.2f} {np.median(t):9.3f} {t.min():7.3f}  {logp:.6f}")
    for backend in backends:
        base = f"rows one-hot, frozen [{backend}]"
        for label in ("rows fused", "rows fused, frozen"):
            if f"{label} [{backend}]" in times:
                ratio = np.median(times[f"{label} [{backend}]"]) / np.median(times[base])
                print(f"{label} / rows one-hot, frozen [{backend}] (median): {ratio:.3f}")


def _memory_child(n_samples: int, formulation: str, seed: int) -> None:
    import resource

    from pymc.blocking import DictToArrayBijection
    from pymc.model.transform.optimization import freeze_dims_and_data

    from bayespmf.datasets import make_latent_class
    from bayespmf.models import _rows, latent_class_model

    spec = CASES["n15"]
    data, _ = make_latent_class(
        n_samples,
        spec["n_categories"],
        n_components=spec["rank"],
        observed_prob=spec["observed"],
        drop_empty_rows=True,
        random_state=seed,
    )
    _rows.FUSED = formulation == "fused"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = freeze_dims_and_data(latent_class_model(data, spec["rank"]))
    point = model.initial_point(random_seed=0)
    t0 = time.perf_counter()
    fn = model.logp_dlogp_function(ravel_inputs=True)
    fn.set_extra_values({})
    x = DictToArrayBijection.map({v.name: point[v.name] for v in model.value_vars}).data
    logp = float(fn(x)[0])
    secs = time.perf_counter() - t0
    calls = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(x)
        calls.append(1e3 * (time.perf_counter() - t0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"| rows {formulation}, frozen [c] | {data.n_samples} | {before:.0f} | {peak:.0f} "
        f"| {secs:.1f} | {np.median(calls):.1f} | {logp:.6f} |",
        flush=True,
    )


def memory(n_samples: int, seed: int) -> None:
    import subprocess
    import sys

    print(
        "| formulation | S | MB before the model | peak MB | compile s | ms/call | logp |"
    )
    print("|---|---|---|---|---|---|---|", flush=True)
    for formulation in ("one-hot", "fused"):
        code = (
            "import sys, warnings; warnings.simplefilter('ignore'); "
            f"sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r}); "
            "from bench_latent_class_logp import _memory_child; "
            f"_memory_child({n_samples}, {formulation!r}, {seed})"
        )
        subprocess.run([sys.executable, "-c", code], check=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--backends", nargs="+", default=["c"], choices=["c", "numba", "jax"]
    )
    parser.add_argument("--memory", type=int, default=None, metavar="S")
    args = parser.parse_args(argv)
    if args.memory is not None:
        memory(args.memory, args.seed)
        return
    warnings.filterwarnings("ignore", message="Using NumPy C-API based implementation")
    warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
    for name in args.cases:
        calls = max(1, args.calls * 2000 // CASES[name]["n_samples"])
        run_case(name, CASES[name], args.rounds, calls, args.seed, args.backends)


if __name__ == "__main__":
    main()
