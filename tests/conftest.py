import os

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")


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
