"""Gradient cost of the latent-class likelihood: old ``pm.Potential`` vs observed rows.

Formulations, built on the same data and evaluated at the same point in one process:

* ``potential one-hot (old)``: the likelihood as a ``pm.Potential`` on the dense one-hot
  design baked into the graph as a constant, ``logsumexp(O @ log A + log w)`` (the
  model of ``latent_class_model`` before issue 13);
* ``observed rows (new)``: :func:`bayespmf.models.latent_class_model` as shipped, an
  observed :class:`~bayespmf.models.LatentClassRows` variable on a ``pm.Data``
  container (the one-hot design is built from the codes inside the graph);
* ``observed rows, frozen data``: the same model after PyMC's
  ``freeze_dims_and_data`` (the codes become a constant, so PyTensor folds the
  one-hot design at compile time): what :func:`bayespmf.models.sample` compiles.

For each: compile time (the ``logp_dlogp_function`` that ``pm.sample`` uses, first
call included) and milliseconds per log-density + gradient call, the median and the
minimum over ``--rounds`` rounds of ``--calls`` calls, the formulations interleaved
round by round so load from other processes hits them alike. The log-densities must
agree (they are printed).

Cases: ``notes`` (S=2000, N=5, I=10, F=5, half missing: the STACK-NOTES.md case) and
``car`` (S=1728, alphabets 4,4,4,3,3,3,4 as UCI Car, F=4, nothing missing).

    python benchmarks/bench_latent_class_logp.py [--cases notes car] [--rounds 30]
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
}  # fmt: skip


def old_potential_model(data, rank):
    """The pre-issue-13 model: a Potential on a dense constant one-hot design."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayespmf.models.latent_class import category_dim, factor_var_name
    from bayespmf.pmf import one_hot_design

    coords = {"class": np.arange(rank), "row": np.arange(data.n_samples)}
    for name, cats in zip(data.names, data.categories, strict=True):
        coords[category_dim(name)] = list(cats)
    design = one_hot_design(data.codes, data.n_categories)
    with pm.Model(coords=coords) as model:
        weights = pm.Dirichlet("weights", a=np.ones(rank), dims="class")
        log_factors = []
        for name, k in zip(data.names, data.n_categories, strict=True):
            a = pm.Dirichlet(
                factor_var_name(name),
                a=np.ones((rank, int(k))),
                dims=("class", category_dim(name)),
            )
            log_factors.append(pt.log(a).T)
        log_a = pt.concatenate(log_factors, axis=0)
        o = pt.as_tensor_variable(design.toarray())
        log_joint = pt.dot(o, log_a) + pt.log(weights)[None, :]
        pm.Potential("loglik", pt.logsumexp(log_joint, axis=1).sum())
    return model


def compiled(model):
    """``(fn, x, seconds)``: the value-and-gradient function pm.sample uses, and a point."""
    from pymc.blocking import DictToArrayBijection

    t0 = time.perf_counter()
    fn = model.logp_dlogp_function(ravel_inputs=True)
    fn.set_extra_values({})
    point = model.initial_point(random_seed=0)
    x = DictToArrayBijection.map({v.name: point[v.name] for v in model.value_vars}).data
    logp = float(fn(x)[0])
    return fn, x, time.perf_counter() - t0, logp


def run_case(name, spec, rounds, calls, seed):
    from pymc.model.transform.optimization import freeze_dims_and_data

    from bayespmf.datasets import make_latent_class
    from bayespmf.models import latent_class_model

    data, _ = make_latent_class(
        spec["n_samples"],
        spec["n_categories"],
        rank=spec["rank"],
        observed_prob=spec["observed"],
        drop_empty_rows=True,
        random_state=seed,
    )
    rank = spec["rank"]
    new = latent_class_model(data, rank)
    models = {
        "potential one-hot (old)": old_potential_model(data, rank),
        "observed rows (new)": new,
        "observed rows, frozen data": freeze_dims_and_data(new),
    }
    print(
        f"\n== {name}: S={data.n_samples}, I_n={list(map(int, data.n_categories))}, "
        f"F={rank}, missing {100 * data.missing_fraction:.0f}% =="
    )
    fns = {}
    for label, model in models.items():
        fns[label] = compiled(model)
    times = {label: [] for label in models}
    for _ in range(rounds):
        for label, (fn, x, _, _) in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(x)
            times[label].append(1e3 * (time.perf_counter() - t0) / calls)
    print(f"{'formulation':30s} {'compile s':>9s} {'median ms':>9s} {'min ms':>7s}  logp")
    for label, (_, _, secs, logp) in fns.items():
        t = np.asarray(times[label])
        print(f"{label:30s} {secs:9.2f} {np.median(t):9.3f} {t.min():7.3f}  {logp:.6f}")
    old = np.median(times["potential one-hot (old)"])
    for label in ("observed rows (new)", "observed rows, frozen data"):
        print(f"{label} / old (median): {np.median(times[label]) / old:.3f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="Using NumPy C-API based implementation")
    warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
    for name in args.cases:
        run_case(name, CASES[name], args.rounds, args.calls, args.seed)


if __name__ == "__main__":
    main()
