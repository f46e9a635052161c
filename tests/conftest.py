import os

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
