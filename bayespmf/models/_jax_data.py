"""numpyro's NUTS with the model's data as arguments of the compiled program.

PyMC's JAX driver (``pymc.sampling.jax``) replaces every shared variable of the
log-density (``pm.Data``, the latent-class model's ``rows``) by a constant before it
hands the graph to JAX, so the rows are baked into the XLA program. On a CPU that
program is somewhat faster per call (:ref:`bench-jax`); on a GPU, XLA embeds every
constant in the device code it compiles, and the compilation grows with the rows.
:func:`numpyro_nuts_data_args` runs the same NUTS on the same log-density with the
shared variables as inputs of the JAX function: a numpyro model with one improper
flat site per value variable and a ``numpyro.factor`` of the model's log-density,
run by ``MCMC(..., jit_model_args=True)`` with the data as its arguments, so they
reach the compiled warm-up and sampling loops as device buffers.

It has the signature of ``pymc.sampling.jax._sample_numpyro_nuts`` and stands in for
it during one ``pm.sample(nuts_sampler="numpyro")`` call (:func:`data_as_arguments`):
PyMC's driver still builds the starts, turns the draws back into the model's
variables and assembles the result, so the two routes return the same groups.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np

__all__ = ["data_as_arguments", "jaxified_logp_with_data", "numpyro_nuts_data_args"]

#: numpyro's name of the factor site that holds the model's log-density.
_FACTOR_SITE = "__bayespmf_logp"

#: The per-draw statistics PyMC's numpyro driver records (the same names here).
_EXTRA_FIELDS = (
    "num_steps",
    "potential_energy",
    "energy",
    "adapt_state.step_size",
    "accept_prob",
    "diverging",
)


def jaxified_logp_with_data(model, formulation: str | None = None):
    """The model's log-density as a JAX function of its values and its shared data.

    Returns ``(fn, data)``: ``fn(*values, *data)`` returns the joint log-density
    (``model.logp()``, rewritten by PyTensor's JAX mode as PyMC's driver rewrites it)
    and ``data`` are the shared variables' current values, in ``fn``'s order.
    ``formulation`` is how the latent-class likelihood is written
    (:func:`bayespmf.models._rows.jax_formulation`); ``None``: ``"matmul"`` where
    JAX's default backend is an accelerator, ``"gather"`` on a CPU.

    Raises
    ------
    ValueError
        The log-density depends on a shared random generator (it cannot be an
        argument of a pure function).
    """
    from pytensor.compile import mode
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph import FunctionGraph
    from pytensor.graph.traversal import graph_inputs
    from pytensor.link.jax.dispatch import jax_funcify
    from pytensor.tensor.random.type import RandomType

    from bayespmf.models._rows import jax_formulation

    if formulation is None:
        import jax

        formulation = "gather" if jax.default_backend() == "cpu" else "matmul"

    outputs = [model.logp()]
    shared = [v for v in graph_inputs(outputs) if isinstance(v, SharedVariable)]
    if any(isinstance(v.type, RandomType) for v in shared):
        raise ValueError(
            "The model's log-density holds a shared random generator; it cannot be "
            "compiled with its data as arguments. Use jax_data='constant'."
        )
    fgraph = FunctionGraph(list(model.value_vars) + shared, outputs, clone=True)
    with jax_formulation(formulation):
        mode.JAX.optimizer.rewrite(fgraph)
    fn = jax_funcify(fgraph)
    return (lambda *args: fn(*args)[0]), [s.get_value(borrow=True) for s in shared]


def numpyro_nuts_data_args(
    model,
    target_accept,
    tune,
    draws,
    chains,
    chain_method,
    progressbar,
    random_seed,
    initial_points,
    nuts_kwargs,
    logp_fn=None,
):
    """``pymc.sampling.jax._sample_numpyro_nuts`` with the data as arguments.

    The parameters are that function's (PyMC 6.3-6.4); ``logp_fn`` (PyMC's
    log-density with the data as constants) is not used. Returns the raw draws of
    the value variables (chain first), the sample statistics under PyMC's names, and
    the numpyro module.
    """
    import jax
    import jax.numpy as jnp
    import numpyro
    from numpyro import distributions as dist
    from numpyro.infer import MCMC, NUTS

    logp, data = jaxified_logp_with_data(model)
    names = [v.name for v in model.value_vars]
    starts = [np.asarray(x) for x in initial_points]
    shapes = [x.shape[1:] if chains > 1 else x.shape for x in starts]

    def numpyro_model(*data):
        values = [
            numpyro.sample(
                name, dist.ImproperUniform(dist.constraints.real, (), event_shape=shape)
            )
            for name, shape in zip(names, shapes, strict=True)
        ]
        numpyro.factor(_FACTOR_SITE, logp(*values, *data))

    kwargs = dict(nuts_kwargs)
    kwargs.setdefault("adapt_step_size", True)
    kwargs.setdefault("adapt_mass_matrix", True)
    kwargs.setdefault("dense_mass", False)
    kernel = NUTS(numpyro_model, target_accept_prob=target_accept, **kwargs)

    def run(key, inits, data):
        # run under one jit with the rows as its argument: numpyro's own run starts
        # the chains outside a jit (its step-size search is traced under vmap with
        # the rows closed over, so XLA would fold them into that program)
        mcmc = MCMC(
            kernel,
            num_warmup=tune,
            num_samples=draws,
            num_chains=chains,
            chain_method=chain_method,
            progress_bar=False,
            jit_model_args=True,
        )
        mcmc.run(key, *data, init_params=inits, extra_fields=_EXTRA_FIELDS)
        return mcmc.get_samples(group_by_chain=True), mcmc.get_extra_fields(
            group_by_chain=True
        )

    key = jax.random.PRNGKey(random_seed)
    if chains > 1:
        key = jax.random.split(key, chains)
    if progressbar:  # one jitted program has no per-draw progress bar
        logging.getLogger("pymc").info(
            "numpyro: %d chains x (%d + %d) draws, compiled and run as one program "
            "with the rows as its argument (no progress bar)",
            chains,
            tune,
            draws,
        )
    samples, fields = jax.jit(run)(
        key, dict(zip(names, starts, strict=True)), [jnp.asarray(d) for d in data]
    )
    raw = [samples[name] for name in names]
    return raw, _stats(fields), numpyro


def _stats(fields) -> dict:
    """The extra fields of numpyro under PyMC's names (``_numpyro_stats_to_dict``)."""
    rename = {
        "potential_energy": "lp",
        "adapt_state.step_size": "step_size",
        "num_steps": "n_steps",
        "accept_prob": "acceptance_rate",
    }
    out = {}
    for stat, value in fields.items():
        if isinstance(value, dict | tuple):
            continue
        value = np.asarray(value).copy()
        out[rename.get(stat, stat)] = value
        if stat == "num_steps":
            out["tree_depth"] = np.log2(value).astype(int) + 1
    return out


@contextlib.contextmanager
def data_as_arguments():
    """Pass the data as arguments in ``pm.sample(nuts_sampler="numpyro")`` calls.

    Within the block :func:`numpyro_nuts_data_args` stands in for PyMC's numpyro
    runner; the original is back when the block ends, also on an error.
    """
    import pymc.sampling.jax as pmjax

    original = pmjax._sample_numpyro_nuts
    pmjax._sample_numpyro_nuts = numpyro_nuts_data_args
    try:
        yield
    finally:
        pmjax._sample_numpyro_nuts = original
