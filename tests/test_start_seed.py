"""The PyMC-facing start builder (``initvals``) takes ``random_seed`` (PyMC's name) only."""

import numpy as np
import pytest

from bayespmf import CategoricalData
from bayespmf.models import initvals, latent_class_model


def _model():
    data = CategoricalData.from_codes([[0, 1], [1, 0], [1, 1]], 2, names=["a", "b"])
    point = ([0.4, 0.6], [np.array([[0.3, 0.6], [0.7, 0.4]])] * 2)
    return latent_class_model(data, n_components=2), point


def test_random_seed_reproduces_and_varies():
    model, point = _model()
    a = initvals(model, point, chains=2, random_seed=0)
    b = initvals(model, point, chains=2, random_seed=0)
    c = initvals(model, point, chains=2, random_seed=1)
    np.testing.assert_array_equal(a[1]["A_a"], b[1]["A_a"])
    assert not np.allclose(a[1]["A_a"], c[1]["A_a"])


def test_random_state_is_not_taken():
    model, point = _model()
    with pytest.raises(TypeError, match="random_state"):
        initvals(model, point, chains=2, random_state=3)
