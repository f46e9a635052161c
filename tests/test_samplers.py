"""Every NUTS backend starts each chain where it is told to, and its draws are aligned."""

import os
import subprocess
import sys

import numpy as np
import pytest
from pymc.model.transform.optimization import freeze_dims_and_data

from bayespmf.datasets import make_latent_class
from bayespmf.models import initvals, latent_class_model, sample
from bayespmf.models._sampling import run_sampler
from bayespmf.models.latent_class import factor_var_name

BACKENDS = [
    "pymc",
    "nutpie",
    pytest.param("numpyro", marks=pytest.mark.jax),
    pytest.param("blackjax", marks=pytest.mark.jax),
    # numpyro with the rows as an argument of one jitted program (jax_data)
    pytest.param("numpyro-argument", marks=pytest.mark.jax),
]


@pytest.fixture(scope="module")
def small():
    # enough rows that the posterior is narrow next to the gap between the two labelings
    data, truth = make_latent_class(
        600,
        [3, 2, 4, 4],
        n_components=2,
        observed_prob=0.9,
        drop_empty_rows=True,
        random_state=4,
    )
    return data, truth


def stacked(point, names):
    return np.concatenate([np.ravel(point[n]) for n in names])


def need(backend):
    if backend != "pymc":
        pytest.importorskip(backend.split("-")[0])


def backend_kwargs(backend) -> dict:
    """The ``sample`` / ``run_sampler`` keywords of a :data:`BACKENDS` entry."""
    if backend == "numpyro-argument":
        return {"nuts_sampler": "numpyro", "jax_data": "argument"}
    return {"nuts_sampler": backend}


def permuted(truth):
    perm = np.array([1, 0])
    return truth.weights[perm], [a[:, perm] for a in truth.factors]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_chain_starts_at_its_own_start(small, backend):
    need(backend)
    data, truth = small
    model = latent_class_model(data, n_components=2)
    # chain 0 at the truth with its classes swapped, chain 1 at the truth
    starts = [
        initvals(model, p, jitter=0.0)[0]
        for p in (permuted(truth), (truth.weights, truth.factors))
    ]
    idata = run_sampler(
        freeze_dims_and_data(model),
        method="nuts",
        initvals=starts,
        draws=3,
        tune=1,  # the least every backend takes (nutpie refuses 0)
        chains=2,
        random_seed=0,
        progressbar=False,
        advi_iterations=0,
        **backend_kwargs(backend),
    )
    assert idata.posterior.attrs["nuts_sampler"] == backend_kwargs(backend)["nuts_sampler"]
    if backend == "numpyro-argument":
        assert idata.posterior.attrs["jax_data"] == "argument"
    names = ["weights", *(factor_var_name(n) for n in data.names)]
    for c in range(2):
        first = stacked({n: idata.posterior[n].values[c, 0] for n in names}, names)
        own = np.abs(first - stacked(starts[c], names)).max()
        other = np.abs(first - stacked(starts[1 - c], names)).max()
        assert own < other, (backend, c, own, other)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_sample_with_backend_is_aligned_and_reproducible(small, backend):
    need(backend)
    data, truth = small
    model = latent_class_model(data, n_components=2)
    start = permuted(truth)
    kw = dict(
        init=start,
        **backend_kwargs(backend),
        draws=40,
        tune=40,
        chains=2,
        random_seed=3,
        progressbar=False,
        log_likelihood=False,
    )
    idata = sample(model, **kw)
    assert idata.posterior["weights"].shape == (2, 40, 2)
    assert {"unaligned_posterior", "observed_data"} <= set(idata.children)
    perms = idata.sample_stats["class_permutation"].values
    assert perms.shape == (2, 40, 2)
    # aligned to the start: the class order of the start, whatever the chains did
    mean_w = idata.posterior["weights"].mean(("chain", "draw")).values
    assert np.argmax(mean_w) == np.argmax(start[0])
    again = sample(model, **kw)
    np.testing.assert_array_equal(
        again.posterior["weights"].values, idata.posterior["weights"].values
    )


def test_unknown_backend_is_refused(small):
    data, truth = small
    model = latent_class_model(data, n_components=2)
    with pytest.raises(ValueError, match="'nuts_sampler' parameter must be one of"):
        sample(model, init=(truth.weights, truth.factors), nuts_sampler="stan")


def test_nutpie_needs_tuning(small):
    pytest.importorskip("nutpie")
    data, truth = small
    model = latent_class_model(data, n_components=2)
    with pytest.raises(ValueError, match="needs 'tune' >= 1"):
        sample(model, init=(truth.weights, truth.factors), nuts_sampler="nutpie", tune=0)


def test_external_backend_refuses_pymc_only_arguments(small):
    pytest.importorskip("numpyro")
    data, truth = small
    model = latent_class_model(data, n_components=2)
    with pytest.raises(ValueError, match=r"does not take \['discard_tuned_samples'\]"):
        sample(
            model,
            init=(truth.weights, truth.factors),
            nuts_sampler="numpyro",
            draws=5,
            tune=5,
            chains=1,
            progressbar=False,
            discard_tuned_samples=False,
        )


def test_jax_chains_get_one_cpu_device_each_only_before_jax_starts(monkeypatch):
    import sys

    from bayespmf.models import _sampling
    from bayespmf.models._sampling import _cpu_devices_for_chains

    class Bridge:  # jax._src.xla_bridge, backends started or not
        started = False

        @classmethod
        def backends_are_initialized(cls):
            return cls.started

    # JAX imported (by SciPy through ArviZ's placeholder, say) but not started
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", Bridge)
    # a jaxlib outside the range that takes the classic-runtime flag: no such flag
    monkeypatch.setattr(_sampling, "_jaxlib_version", lambda: (0, 13, 0))
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_foo=1")
    assert _cpu_devices_for_chains(3)
    assert os.environ["XLA_FLAGS"] == (
        "--xla_cpu_foo=1 --xla_force_host_platform_device_count=3"
    )
    # a count already set (by the user or a first call) is left alone
    assert not _cpu_devices_for_chains(4)
    assert os.environ["XLA_FLAGS"].endswith("count=3")
    # jaxlib 0.12 gets XLA:CPU's classic runtime too, unless the flags name it
    monkeypatch.setattr(_sampling, "_jaxlib_version", lambda: (0, 12, 0))
    monkeypatch.setenv("XLA_FLAGS", "")
    assert _cpu_devices_for_chains(2)
    assert os.environ["XLA_FLAGS"] == (
        "--xla_force_host_platform_device_count=2 --xla_cpu_use_thunk_runtime=false"
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=true")
    assert _cpu_devices_for_chains(2)
    assert "runtime=false" not in os.environ["XLA_FLAGS"]
    # once JAX has started its backend, XLA has read its flags: nothing changes
    monkeypatch.setenv("XLA_FLAGS", "")
    Bridge.started = True
    assert not _cpu_devices_for_chains(2)
    assert os.environ["XLA_FLAGS"] == ""
    monkeypatch.undo()  # the stand-in bridge leaves before the test ends


JAX_IMPORTED_NOT_STARTED = """
import sys
import numpy as np
import scipy.special
import arviz  # noqa: F401  (its lazy placeholder module named jax)
from bayespmf.models import _sampling
scipy.special.logsumexp(np.zeros((2, 2)), axis=1)  # looks up jax.Array in it
imported = "jax._src" in sys.modules
print(imported, _sampling._jax_started(), end=" ")
if imported:
    import jax
    jax.devices()
    print(_sampling._jax_started())
"""


def test_jax_imported_by_scipy_is_not_a_started_jax():
    """SciPy's array-API checks import JAX through ArviZ's placeholder module; until
    JAX starts a backend, forking is safe and the XLA flags can still be set."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("jax")  # not importorskip: that would import JAX here
    except PackageNotFoundError:
        pytest.skip("jax not installed")
    proc = subprocess.run(
        [sys.executable, "-c", JAX_IMPORTED_NOT_STARTED],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.split()
    if out[0] == "True":  # this SciPy and ArviZ import JAX: not started until asked
        assert out[1:] == ["False", "True"], proc.stdout
    else:
        assert out == ["False", "False"], proc.stdout


def test_missing_sampler_package_is_named_without_importing_it(monkeypatch):
    import sys

    from bayespmf.models import _sampling

    monkeypatch.setitem(_sampling.NUTS_SAMPLERS, "numpyro", "no_such_package_bayespmf")
    with pytest.raises(ValueError, match="needs the package 'no_such_package_bayespmf'"):
        _sampling.check_nuts_sampler("numpyro", tune=10)
    # an installed backend is found by its metadata: a lazy placeholder module (as
    # ArviZ 1 leaves for numpyro) is not imported by the check
    monkeypatch.setitem(_sampling.NUTS_SAMPLERS, "numpyro", "numpy")

    class Placeholder:
        def __getattr__(self, name):
            raise AssertionError(f"the check touched the placeholder's {name}")

    with monkeypatch.context() as m:  # importlib.util.find_spec would ask __spec__
        m.setitem(sys.modules, "numpy", Placeholder())
        assert _sampling.check_nuts_sampler("numpyro", tune=10) == "numpyro"


@pytest.mark.slow
@pytest.mark.jax
def test_numpyro_samples_a_simplex_nest():
    # the simplex nest is sampled as built: PyMC's JAX driver turns its mutable dims
    # into constants, so JAX gets static shapes without freezing the model first
    pytest.importorskip("numpyro")
    from bayespmf.datasets import make_simplex_nest
    from bayespmf.models.simplex_nest import simplex_nest_model

    X, _ = make_simplex_nest(30, 3, 2, alpha=2.0, sigma=0.1, random_state=0)
    model = simplex_nest_model(X, 2, alpha=2.0)
    kw = dict(nuts_sampler="numpyro", draws=5, tune=5, chains=1, progressbar=False)
    idata = sample(model, random_seed=1, **kw)
    post = idata.posterior
    assert post.attrs["nuts_sampler"] == "numpyro"
    assert post["vertices"].shape == (1, 5, 2, 3)
    assert "vertex_permutation" in idata.sample_stats
    loglik = idata.log_likelihood["x"]
    assert loglik.dims == ("chain", "draw", "obs") and np.isfinite(loglik.values).all()
    again = sample(model, random_seed=1, **kw)
    np.testing.assert_array_equal(again.posterior["vertices"].values, post["vertices"])
