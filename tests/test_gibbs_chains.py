"""The latent-class Gibbs chains as threads of this process (issue 36, item 1)."""

import multiprocessing

import numpy as np
import pymc as pm
import pytest

from bayespmf import DataValidationError
from bayespmf.datasets import make_latent_class
from bayespmf.models import LatentClassGibbs, latent_class_model, sample
from bayespmf.models._gibbs_chains import run_gibbs_chains, runs_here
from bayespmf.models._sampling import run_sampler
from bayespmf.models.gibbs import PLAIN_TUNE_SWEEPS


@pytest.fixture(scope="module")
def model():
    data, _ = make_latent_class(300, 3, 3, 0.3, n_variables=4, random_state=1)
    return latent_class_model(data, 3)


def _threads(model, step, seed, **kw):
    kw = dict(draws=12, tune=6, chains=3, initvals=None, progressbar=False) | kw
    return run_gibbs_chains(model, step, random_seed=seed, **kw)


def test_same_draws_as_pm_sample(model):
    """The threads give pm.sample's draws of the same step, seed and starts (up to
    the rounding of the value transforms pm.sample goes through), burn-in
    included (pm.sample calls setup_chain, which starts the burn-in's fresh
    sweeps; test_setup_chain_starts_a_burn_in_with_fresh_draws checks it)."""
    with model:
        step = LatentClassGibbs(n_sweeps=2)
        ref = pm.sample(
            draws=12,
            tune=6,
            chains=3,
            step=step,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
            cores=1,  # no fork: JAX may run in this test process
        )
    got = _threads(model, step, 5, cores=2)
    assert set(got.posterior.data_vars) == set(ref.posterior.data_vars)
    for name in ref.posterior.data_vars:
        a, b = ref.posterior[name], got.posterior[name]
        assert a.dims == b.dims
        np.testing.assert_allclose(b.values, a.values, rtol=0, atol=1e-12)
        for d in a.dims[2:]:
            np.testing.assert_array_equal(b[d].values, a[d].values)
    assert got.posterior.attrs["tuning_steps"] == 6
    assert "sample_stats" in got.children


def test_cores_do_not_change_draws_and_seed_does(model):
    with model:
        step = LatentClassGibbs(n_sweeps=1)
    one = _threads(model, step, 3, cores=1).posterior["weights"].values
    two = _threads(model, step, 3, cores=3).posterior["weights"].values
    np.testing.assert_array_equal(one, two)
    other = _threads(model, step, 4, cores=3).posterior["weights"].values
    assert not np.allclose(one, other)
    # the chains differ from each other, and the step given is left as it was
    assert not np.allclose(one[0], one[1])
    assert step.threads >= 1 and step._plain_left == 0


def test_setup_chain_starts_a_burn_in_with_fresh_draws(model):
    """pm.sample's chain processes and the threads call setup_chain, not
    reset_tuning: with a burn-in it sets the PLAIN_TUNE_SWEEPS fresh sweeps (whose
    draws test_gibbs checks), without one none; the generator is the chain's."""
    with model:
        step = LatentClassGibbs(n_sweeps=1)
    rng = np.random.default_rng(3)
    step.setup_chain(rng, 5, 10)
    assert step._plain_left == PLAIN_TUNE_SWEEPS and step.rng is rng
    step.setup_chain(rng, 0, 10)
    assert step._plain_left == 0
    # with a burn-in, the first sweeps are those of overrelax=0; without, not
    with model:
        plain = LatentClassGibbs(n_sweeps=PLAIN_TUNE_SWEEPS, overrelax=0)
        relaxed = LatentClassGibbs(n_sweeps=PLAIN_TUNE_SWEEPS)
    start = relaxed.point_logs(model.initial_point())
    plain.setup_chain(np.random.default_rng(4), 0, 1)
    want = plain.sweeps(*start)[0]
    relaxed.setup_chain(np.random.default_rng(4), 1, 1)
    np.testing.assert_array_equal(relaxed.sweeps(*start)[0], want)
    relaxed.setup_chain(np.random.default_rng(4), 0, 1)
    assert not np.allclose(relaxed.sweeps(*start)[0], want)


def test_initvals_start_each_chain(model):
    """initvals per chain: one sweep moves each chain from its own start."""
    with model:
        step = LatentClassGibbs(n_sweeps=1)
    w = np.array([[0.98, 0.01, 0.01], [0.01, 0.01, 0.98]])
    init = [{"weights": w[c]} for c in range(2)]
    got = _threads(model, step, 0, chains=2, tune=0, draws=1, initvals=init)
    weights = got.posterior["weights"].values[:, 0]
    assert weights[0, 0] > weights[0, 2] and weights[1, 2] > weights[1, 0]


def test_run_sampler_routes(model):
    """run_sampler runs a LatentClassGibbs step here (no chain processes); a
    pm.sample keyword the route does not implement keeps pm.sample."""
    assert runs_here(LatentClassGibbs(model=model), {"cores": 2})
    assert not runs_here(LatentClassGibbs(model=model), {"callback": print})
    kw = dict(
        method="gibbs",
        initvals=None,
        draws=5,
        tune=2,
        chains=2,
        random_seed=1,
        progressbar=False,
        advi_iterations=0,
    )
    before = multiprocessing.active_children()
    here = run_sampler(model, **kw)
    assert multiprocessing.active_children() == before
    assert "threads" in here.posterior.attrs["sampler"]
    there = run_sampler(model, discard_tuned_samples=True, cores=1, **kw)
    assert "sampler" not in there.posterior.attrs
    np.testing.assert_allclose(
        here.posterior["weights"].values, there.posterior["weights"].values, atol=1e-12
    )


def test_a_chain_error_reaches_the_caller(model, monkeypatch):
    with model:
        step = LatentClassGibbs(n_sweeps=1)

    def broken(self, log_w, log_a):
        raise DataValidationError("broken sweep")

    monkeypatch.setattr(LatentClassGibbs, "sweeps", broken)
    with pytest.raises(DataValidationError, match="broken sweep"):
        _threads(model, step, 0)


def test_front_door_default_gibbs_runs_here(model):
    idata = sample(
        model,
        method="gibbs",
        draws=20,
        tune=10,
        chains=2,
        random_seed=0,
        progressbar=False,
    )
    assert "threads" in idata.posterior.attrs["sampler"]
    assert idata.posterior["weights"].shape == (2, 20, 3)
    assert "observed_data" in idata.children
