import numpy as np
import pytest

from bayespmf import ConvergenceWarning, DataValidationError
from bayespmf.fit.ctd import ctd
from bayespmf.kernels.ctd import triple_misfit
from bayespmf.marginals import TripleMarginals, triple_marginals
from bayespmf.metrics import factor_mse


@pytest.fixture(scope="module")
def exact():
    rng = np.random.default_rng(3)
    w = np.array([0.4, 0.6])
    a = [rng.dirichlet(0.5 * np.ones(4), size=2).T for _ in range(4)]
    return w, a, TripleMarginals.from_params(w, a)


def test_exact_triples_recover_truth(exact):
    w, a, t = exact
    params, info = ctd(t, 2, random_state=0)
    assert info["converged"]
    assert factor_mse(params.weights, params.factors, w, a) < 1e-10
    assert triple_misfit(t, params) < 1e-14
    assert np.all(np.diff(info["objective"]) <= 1e-12)


def test_subset_of_triples_and_determinism(exact):
    w, a, _ = exact
    t = TripleMarginals.from_params(w, a, triples=[(0, 1, 2), (1, 2, 3)])
    p1, i1 = ctd(t, 2, random_state=4)
    p2, _ = ctd(t, 2, random_state=4)
    assert np.array_equal(p1.weights, p2.weights)
    assert i1["triples"] == ((0, 1, 2), (1, 2, 3))
    assert factor_mse(p1.weights, p1.factors, w, a) < 1e-8


def test_init_is_not_modified(exact):
    w, a, t = exact
    init = (w.copy(), [x.copy() for x in a])
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        ctd(
            t,
            2,
            init=(np.array([0.5, 0.5]), [x[:, ::-1].copy() for x in a]),
            max_iter=2,
            tol=0.0,
        )
    params, _ = ctd(t, 2, init=init)
    assert np.array_equal(init[0], w)
    assert factor_mse(params.weights, params.factors, w, a) < 1e-12


def test_missing_rows_skip_unobserved_triples():
    codes = np.array([[0, 1, 1, -1], [1, 0, 1, -1], [0, 0, -1, 1], [1, 1, -1, 0]])
    t = triple_marginals(codes, [2, 2, 2, 2])
    params, info = ctd(t, 1, random_state=0)
    assert (0, 2, 3) not in info["triples"]
    assert np.isclose(params.weights.sum(), 1.0)


def test_errors(exact):
    _, a, t = exact
    with pytest.raises(DataValidationError, match="must be a TripleMarginals"):
        ctd(np.zeros((2, 2, 2)), 2)
    with pytest.raises(ValueError, match="'n_components'"):
        ctd(t, 0)
    with pytest.raises(ValueError, match="'init'"):
        ctd(t, 2, init="spa")
    with pytest.raises(DataValidationError, match="n_components=3"):
        ctd(t, 3, init=([0.5, 0.5], a))
    with pytest.raises(DataValidationError, match="no co-observed triple"):
        ctd(
            TripleMarginals.from_params(
                [1.0], [np.ones((2, 1)) / 2] * 4, triples=[(0, 1, 2)]
            ),
            1,
        )
    none = triple_marginals([[0, 1, -1], [1, -1, 0]], [2, 2, 2])
    with pytest.raises(DataValidationError, match="co-observed"):
        ctd(none, 1)
