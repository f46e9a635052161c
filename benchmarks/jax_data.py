"""Rows as a constant of the XLA program (PyMC's JAX driver) vs rows as an argument.

PyMC's JAX samplers (``nuts_sampler="numpyro"`` / ``"blackjax"``) compile the model's
log-density with every ``pm.Data`` replaced by a constant
(``pymc.sampling.jax.get_jaxified_graph``): the rows of the latent-class model are
baked into the compiled program. Issue 13 asked for the data to enter as data, because
with the former dense one-hot formulation XLA spent minutes constant-folding a 120 MB
design at S = 1e5. This study measures, in one run and per data size, the log-density
and gradient that the JAX samplers evaluate (``jax.jit(jax.value_and_grad(...))`` of
the model's log-density at its initial point), compiled both ways:

* ``constants``: PyMC's ``get_jaxified_logp(model)``, as the samplers use it;
* ``arguments``: the same rewritten PyTensor graph with the shared data variables as
  extra inputs of the JAX function, passed to the jitted function at every call.

It prints the first call (tracing, XLA compilation and one evaluation) and the mean
time of later calls, and checks that both give the same value. Simulated data as in
issue 13: S rows, N = 15 variables with 10 categories, rank 5, half of the entries
missing. Usage::

    python benchmarks/jax_data.py                      # S = 2e3, 2e4, 1e5
    python benchmarks/jax_data.py --sizes 2000 --repeats 50
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

from _common import parse_args_quick


def _timed(fn, *args, repeats: int):
    import jax

    t0 = time.perf_counter()
    value = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(*args))
    return value, first, (time.perf_counter() - t0) / repeats


def measure(n_rows: int, repeats: int) -> dict:
    """First-call and per-call seconds of the value and gradient, both ways."""
    import jax
    import jax.numpy as jnp
    from pymc.sampling.jax import get_jaxified_logp
    from pytensor.compile import mode
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph import FunctionGraph
    from pytensor.graph.traversal import graph_inputs
    from pytensor.link.jax.dispatch import jax_funcify

    from bayespmf.datasets import make_latent_class
    from bayespmf.models import latent_class_model

    data, _ = make_latent_class(
        n_rows, 10, 5, 0.5, n_variables=15, drop_empty_rows=True, random_state=0
    )
    model = latent_class_model(data, 5)
    point = model.initial_point()
    x = [jnp.asarray(point[v.name]) for v in model.value_vars]

    as_constants = get_jaxified_logp(model)
    grad_c = jax.jit(jax.value_and_grad(as_constants))
    (val_c, _), first_c, each_c = _timed(grad_c, x, repeats=repeats)

    outputs = [model.logp()]  # what get_jaxified_logp(model) returns
    shared = [v for v in graph_inputs(outputs) if isinstance(v, SharedVariable)]
    fgraph = FunctionGraph(list(model.value_vars) + shared, outputs, clone=True)
    mode.JAX.optimizer.rewrite(fgraph)
    fn = jax_funcify(fgraph)
    values = [jnp.asarray(s.get_value(borrow=True)) for s in shared]
    grad_a = jax.jit(jax.value_and_grad(lambda x, d: fn(*x, *d)[0]))
    (val_a, _), first_a, each_a = _timed(grad_a, x, values, repeats=repeats)
    return {
        "rows": data.n_samples,
        "data": ", ".join(f"{s.name} {s.get_value().shape}" for s in shared),
        "constants": (first_c, each_c),
        "arguments": (first_a, each_a),
        "rel_diff": abs(float(val_c) - float(val_a)) / abs(float(val_c)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", nargs="+", type=int, default=[2000, 20000, 100000])
    ap.add_argument("--repeats", type=int, default=20)
    args = parse_args_quick(ap, None, sizes=[500], repeats=2)
    warnings.filterwarnings("ignore", category=UserWarning)
    import jax

    print(
        f"JAX {jax.__version__} on {jax.devices()[0].platform}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "| rows | shared data | constants: first call s | constants: per call ms "
        "| arguments: first call s | arguments: per call ms | arguments / constants "
        "per call | value rel. diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        r = measure(n, args.repeats)
        (fc, ec), (fa, ea) = r["constants"], r["arguments"]
        print(
            f"| {r['rows']} | {r['data']} | {fc:.2f} | {ec * 1e3:.2f} | {fa:.2f} "
            f"| {ea * 1e3:.2f} | {ea / ec:.2f} | {r['rel_diff']:.1e} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
