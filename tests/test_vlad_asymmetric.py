"""VLAD under an asymmetric Dirichlet: the triangle test of Supplement C (issue 26).

The old VLAD assumed a symmetric Dirichlet without checking and returned vertices far
off the truth on the triangle test (minimum-matching distance 42.6 at n = 5000, seed
0; 11.4 at n = 1000, seed 0). Now it tests the k-means cell masses, warns, and
estimates a vector alpha; a known vector alpha is used directly.
"""

import warnings

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.stats import dirichlet

from bayespmf._validation import DataValidationError
from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.estimators.simplex import GDM, VLAD
from bayespmf.fit.simplex import AsymmetricDirichletWarning
from bayespmf.kernels.vlad_asymmetric import dirichlet_cvt, mass_balance, match_cells
from bayespmf.metrics import min_matching_distance

TRIANGLE = (0.5, 1.5, 2.5)


def triangle(seed, n=1000):
    return make_simplex_nest(n, 3, 3, alpha=TRIANGLE, sigma=0.1, random_state=seed)


def test_triangle_warns_and_beats_gdm_where_old_code_was_badly_wrong():
    X, truth = triangle(0)
    with pytest.warns(AsymmetricDirichletWarning, match=r"chi2 = .*alpha_ = "):
        est = VLAD(3, random_state=0).fit(X)
    assert est.fallback_ == "vector_alpha"
    assert est.mass_balance_.p_value < 1e-4
    assert est.alpha_.shape == (3,) and np.all(est.alpha_ > 0)
    err = min_matching_distance(est.vertices_, truth.vertices)
    gdm = min_matching_distance(GDM(3, random_state=0).fit(X).vertices_, truth.vertices)
    # the symmetric fit (what VLAD returned before) is kept and is far off: 11.4
    assert min_matching_distance(est.symmetric_vertices_, truth.vertices) > 5.0
    assert err < gdm  # 0.53 against 0.85


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_triangle_never_silently_worse_than_gdm(seed):
    X, truth = triangle(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = VLAD(3, random_state=seed).fit(X)
    warned = any(issubclass(w.category, AsymmetricDirichletWarning) for w in caught)
    assert warned == (est.fallback_ == "vector_alpha")
    err = min_matching_distance(est.vertices_, truth.vertices)
    gdm = min_matching_distance(GDM(3, random_state=seed).fit(X).vertices_, truth.vertices)
    assert warned or err <= gdm
    assert err < 2.0 * gdm  # 0.46 / 0.59, 0.34 / 1.37, 0.18 / 1.09


def test_known_vector_alpha_is_used_and_aligned_with_the_vertices():
    X, truth = triangle(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no asymmetry warning when alpha is given
        est = VLAD(3, alpha=list(TRIANGLE), random_state=0).fit(X)
    assert est.fallback_ is None
    np.testing.assert_allclose(est.alpha_, TRIANGLE)
    assert min_matching_distance(est.vertices_, truth.vertices) < 0.3  # 0.13
    # vertices_[k] carries alpha_[k]: the best matching to the truth is the identity
    cost = np.linalg.norm(est.vertices_[:, None] - truth.vertices[None], axis=2)
    assert linear_sum_assignment(cost)[1].tolist() == [0, 1, 2]


def test_equal_vector_alpha_is_the_scalar():
    X, _ = make_simplex_nest(500, 4, 3, alpha=1.0, sigma=0.05, random_state=1)
    a = VLAD(3, alpha=[1.0, 1.0, 1.0], random_state=0).fit(X)
    b = VLAD(3, alpha=1.0, random_state=0).fit(X)
    np.testing.assert_array_equal(a.vertices_, b.vertices_)
    assert a.alpha_ == 1.0 and a.fallback_ is None


def test_symmetric_nest_does_not_fall_back():
    X, _ = make_simplex_nest(3000, 3, 3, alpha=1.5, sigma=0.1, random_state=0)
    est = VLAD(3, random_state=0).fit(X)  # filterwarnings=error: no warning
    assert est.fallback_ is None and est.symmetric_vertices_ is None
    assert isinstance(est.alpha_, float)
    assert est.mass_balance_.p_value > 1e-4


@pytest.mark.parametrize(
    "alpha, match",
    [
        ([1.0, 2.0], r"n_components=3 positive numbers.*shape \(2,\)"),
        ([[1.0, 2.0, 3.0]], r"shape \(1, 3\)"),
        ([1.0, 0.0, 2.0], "Replace the non-positive entries"),
        ([1.0, -1.0, 2.0], "Replace the non-positive entries"),
        ([1.0, np.nan, 2.0], "finite number > 0"),
        (-1.0, "alpha"),
    ],
)
def test_bad_alpha_refused_by_vlad_and_model(alpha, match):
    # DataValidationError for a bad vector; check_float's ValueError for a scalar
    from bayespmf.models.simplex_nest import simplex_nest_model

    X, _ = triangle(0, n=50)
    with pytest.raises(ValueError, match=match):
        VLAD(3, alpha=alpha).fit(X)
    with pytest.raises(ValueError, match=match):
        simplex_nest_model(X, 3, alpha=alpha)


def test_gdm_is_alpha_free_and_refuses_a_vector():
    X, _ = triangle(0, n=200)
    GDM(3, random_state=0).fit(X)  # no alpha needed, no warning
    with pytest.raises(DataValidationError, match="VLAD"):
        GDM(3, alpha=list(TRIANGLE)).fit(X)


def test_model_with_a_vector_alpha():
    import pymc as pm

    from bayespmf.models.simplex_nest import simplex_nest_model

    X, truth = triangle(0, n=30)
    model = simplex_nest_model(X, 3, alpha=np.array(TRIANGLE))
    assert "alpha" not in model.named_vars
    th = truth.theta
    got = float(pm.logp(model["theta"], th).sum().eval())
    assert got == pytest.approx(sum(dirichlet.logpdf(t, TRIANGLE) for t in th))


def test_dirichlet_cvt_and_masses():
    # symmetric: equal masses, centroids on the rays to the vertices
    V, m = dirichlet_cvt([1.0, 1.0, 1.0], random_state=0)
    np.testing.assert_allclose(m, 1 / 3, atol=0.01)
    off = V[~np.eye(3, dtype=bool)]
    np.testing.assert_allclose(off, off.mean(), atol=0.01)
    # asymmetric: the cell of the vertex with the largest alpha holds the most mass
    V, m = dirichlet_cvt(TRIANGLE, random_state=0)
    assert np.argsort(m).tolist() == [0, 1, 2]
    np.testing.assert_allclose(V.sum(axis=1), 1.0)
    # the masses are those of the k-means cells of the theta draws: recomputed here
    mb = mass_balance(np.repeat([0, 1, 2], [172, 351, 477]), 3)
    assert match_cells(mb.masses, m).tolist() == [0, 1, 2]
    assert mb.p_value < 1e-20
