import os
import sys

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

#: Thread pools of the BLAS and OpenMP runtimes, one thread each in every pytest-xdist
#: worker: the workers already use every CPU, and a pool of several threads per worker
#: spins on CPUs the other workers need (on 2 busy cores, two to three times the CPU).
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "jax: starts JAX (a JAX backend); run after the other tests of the session",
    )
    # in xdist's controller, before it starts the workers, which inherit its environment
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        for name in ONE_THREAD:
            os.environ.setdefault(name, "1")


@pytest.fixture
def rng():
    """A seeded generator; tests that need randomness take it from here."""
    return np.random.default_rng(20261122)


def _mc_summary(idata, name):
    """Posterior mean, sd and mean-ESS of one variable, entry by entry."""
    import arviz as az

    post = idata["posterior"].to_dataset()[[name]]
    mean = post[name].mean(("chain", "draw")).values
    sd = post[name].std(("chain", "draw")).values
    ess = az.ess(post, method="mean")[name].values
    return mean, sd, ess


@pytest.fixture
def mc_summary():
    """``(mean, sd, ess)`` of a posterior variable: for comparing two samplers."""
    return _mc_summary


def pytest_collection_modifyitems(config, items):
    """The tests marked ``jax`` last, in their order (every worker sorts alike).

    Once JAX has started in a process, :func:`bayespmf.models.sample` starts PyMC's
    chain processes by forkserver rather than by forking the process (JAX's threads do
    not survive a fork), and each such process imports the stack again: seconds per
    multi-chain run. Run last, the tests that import JAX leave every other test of
    their worker a process where it has not started.
    """
    items.sort(key=lambda item: item.get_closest_marker("jax") is not None)


def _jax_started():
    """Whether JAX has started a backend here (as ``bayespmf.models._sampling``)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bridge is not None and bool(bridge.backends_are_initialized())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Flag a test that starts JAX without the ``jax`` mark (it slows its worker)."""
    before = _jax_started()
    result = yield
    if not before and _jax_started() and item.get_closest_marker("jax") is None:
        item.warn(
            pytest.PytestWarning(
                "this test started JAX: mark it @pytest.mark.jax so that it runs after "
                "the tests that sample with PyMC's chain processes"
            )
        )
    return result
