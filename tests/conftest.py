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
