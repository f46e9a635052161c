"""fit_simplex_nest: the one fit function behind VLAD, GDM and SimplexSPA."""

import numpy as np
import pytest

from bayespmf._validation import ConvergenceWarning
from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.estimators.simplex import GDM, VLAD, SimplexSPA
from bayespmf.fit import SimplexNestFit, fit_simplex_nest
from bayespmf.fit import simplex as fs
from bayespmf.kernels import vlad_moments


@pytest.fixture(scope="module")
def nest():
    return make_simplex_nest(1500, 5, 3, alpha=1.0, sigma=0.1, random_state=3)


@pytest.mark.parametrize(
    ("method", "cls", "kw"),
    [
        ("vlad", VLAD, {}),
        ("vlad", VLAD, {"alpha": 1.0, "noise_bias": "none", "whiten": "data"}),
        ("gdm", GDM, {}),
        ("gdm", GDM, {"alpha": 0.5}),
        ("spa", SimplexSPA, {}),
    ],
)
def test_function_matches_estimator_for_the_same_seed(nest, method, cls, kw):
    X, _ = nest
    seed = {} if method == "spa" else {"random_state": 7}
    fit = fit_simplex_nest(X, 3, method, **kw, **seed)
    est = cls(3, **kw, **seed).fit(X)
    assert isinstance(fit, SimplexNestFit) and fit.method == method
    np.testing.assert_array_equal(fit.vertices, est.vertices_)
    assert fit.n_features == est.n_features_in_ == 5
    for name, value in fit.details.items():
        np.testing.assert_equal(getattr(est, name + "_"), value)  # nan == nan here


def test_gdm_vertices_follow_the_farthest_point_rule(nest):
    # independent of the kernel code: each vertex is the data mean pushed along its
    # centroid direction to the distance of the farthest point of that cluster
    X, _ = nest
    fit = fit_simplex_nest(X, 3, "gdm", random_state=0)
    c, lab = fit.details["centroids"], fit.details["labels"]
    center = X.mean(axis=0)
    for k in range(3):
        far = np.max(np.linalg.norm(X[lab == k] - center, axis=1))
        u = (c[k] - center) / np.linalg.norm(c[k] - center)
        np.testing.assert_allclose(fit.vertices[k], center + far * u, rtol=1e-10)


def test_spa_picks_the_rows_of_a_hand_written_successive_projection(nest):
    X, _ = nest
    fit = fit_simplex_nest(X, 3, "spa")
    Xc = X - X.mean(axis=0)
    t = np.sqrt(np.max(np.sum(Xc**2, axis=1)))
    R = np.vstack([Xc.T, np.full((1, len(X)), t)])
    picks = []
    for _ in range(3):
        j = int(np.argmax(np.sum(R**2, axis=0)))
        picks.append(j)
        u = R[:, j] / np.linalg.norm(R[:, j])
        R = R - np.outer(u, u @ R)
    assert fit.details["indices"].tolist() == picks
    np.testing.assert_array_equal(fit.vertices, X[picks])


def test_unmatched_moment_equation_warns_in_the_fit_function_not_the_kernel(
    nest, monkeypatch
):
    # the kernel only reports a moment equation without a solution (nan objective) ...
    fn = lambda a: np.sqrt(1.0 + 3.0 * np.asarray(a))  # noqa: E731
    a, obj = vlad_moments.estimate_alpha(-1.0, 3, fn, (0.01, 100.0))
    assert a == 100.0 and np.isnan(obj)
    # ... and the fit function turns that into the warning
    monkeypatch.setattr(fs, "phi_star", lambda *args: -1.0)
    X, _ = nest
    with pytest.warns(ConvergenceWarning, match="alpha cannot be matched"):
        fit = fit_simplex_nest(X, 3, noise_bias="none", random_state=0)
    assert np.isnan(fit.details["alpha_objective"])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "nmf"}, r"'method' parameter of fit_simplex_nest"),
        ({"method": "spa", "alpha": 1.0}, r"method='spa' takes no 'alpha'"),
        ({"method": "gdm", "alpha": [1.0, 2.0, 3.0]}, r"'alpha' parameter of GDM"),
        ({"whiten": "pca"}, r"'whiten' parameter of VLAD"),
        ({"method": "gdm", "n_init": 0}, r"n_init"),
    ],
)
def test_bad_options_name_the_argument(nest, kw, match):
    X, _ = nest
    with pytest.raises(ValueError, match=match):  # DataValidationError or ValueError
        fit_simplex_nest(X, 3, **kw)
