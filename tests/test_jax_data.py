"""numpyro with the rows as arguments of the compiled program (``jax_data``)."""

import numpy as np
import pytest

from bayespmf.datasets import make_latent_class
from bayespmf.models import latent_class_model, sample
from bayespmf.models._rows import jax_formulation
from bayespmf.models._sampling import check_jax_data
from bayespmf.models.latent_class import factor_var_name


@pytest.fixture(scope="module")
def small():
    return make_latent_class(
        300, [3, 2, 4, 4], 2, 0.7, drop_empty_rows=True, random_state=4
    )


@pytest.mark.jax
@pytest.mark.parametrize("formulation", ["gather", "matmul"])
@pytest.mark.slow
def test_logp_with_data_as_arguments_matches_pymc(small, formulation):
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jnp

    from bayespmf.models._jax_data import jaxified_logp_with_data

    jax.config.update("jax_enable_x64", True)
    data, _ = small
    model = latent_class_model(data, n_components=2)
    rng = np.random.default_rng(0)
    point = {
        k: v + 0.3 * rng.standard_normal(v.shape) for k, v in model.initial_point().items()
    }
    logp, shared = jaxified_logp_with_data(model, formulation)
    assert data.codes.shape in [np.asarray(s).shape for s in shared]
    x = [jnp.asarray(point[v.name]) for v in model.value_vars]
    value, grad = jax.value_and_grad(lambda x: logp(*x, *shared))(x)
    # PyMC's own compiled log-density and gradient (the numba backend, not JAX)
    expected = model.compile_logp()(point)
    np.testing.assert_allclose(float(value), expected, rtol=1e-10)
    dlogp = model.compile_dlogp()(point)
    np.testing.assert_allclose(
        np.concatenate([np.ravel(g) for g in grad]), dlogp, rtol=1e-8
    )


@pytest.mark.jax
@pytest.mark.slow
def test_argument_route_agrees_with_constants(small):
    pytest.importorskip("numpyro")
    data, truth = small
    model = latent_class_model(data, n_components=2)
    kw = dict(
        init=(truth.weights, truth.factors),
        nuts_sampler="numpyro",
        draws=150,
        tune=150,
        chains=2,
        random_seed=5,
        progressbar=False,
        log_likelihood=False,
    )
    a = sample(model, jax_data="argument", **kw)
    assert {"sample_stats", "unaligned_posterior", "observed_data"} <= set(a.children)
    for stat in ("diverging", "tree_depth", "step_size", "lp"):
        assert a.sample_stats[stat].shape == (2, 150)
    c = sample(model, jax_data="constant", **kw)
    assert c.posterior.attrs["jax_data"] == "constant"
    # the same posterior: the means agree within a few Monte Carlo errors
    for name in ("weights", factor_var_name(data.names[0])):
        ma, mc = (x.posterior[name].mean(("chain", "draw")).values for x in (a, c))
        sd = c.posterior[name].std(("chain", "draw")).values
        assert np.all(np.abs(ma - mc) < 0.5 * sd + 0.02), (name, ma, mc)


def test_jax_data_is_checked():
    check_jax_data("auto", "numpyro")
    with pytest.raises(ValueError, match="nuts_sampler='numpyro' only"):
        check_jax_data("argument", "blackjax")
    with pytest.raises(ValueError, match="'jax_data' parameter"):
        check_jax_data("rows", "numpyro")
    with pytest.raises(ValueError, match="'jax_data' parameter"):
        check_jax_data(None, "numpyro")


def test_jax_data_is_refused_where_it_does_not_apply(small):
    data, _ = small
    model = latent_class_model(data, n_components=2)
    with pytest.raises(ValueError, match="jax_data"):
        sample(model, jax_data="argument", draws=5, tune=5, chains=1)
    with pytest.raises(ValueError, match="jax_data"):
        sample(model, method="gibbs", jax_data="argument", draws=5, tune=5, chains=1)


def test_jax_formulation_is_checked_and_restored():
    from bayespmf.models import _rows

    with pytest.raises(ValueError, match="gather"):
        with jax_formulation("dense"):
            pass
    with pytest.raises(RuntimeError):
        with jax_formulation("matmul"):
            assert _rows._JAX_FORMULATION[0] == "matmul"
            raise RuntimeError
    assert _rows._JAX_FORMULATION[0] == "gather"
