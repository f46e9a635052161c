"""VLAD, GDM and SimplexSPA: recovery on simulated nests, interface and errors."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from bayespmf._validation import DataValidationError
from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.estimators.latent_class import NotFittedError
from bayespmf.estimators.simplex import GDM, VLAD, SimplexSPA
from bayespmf.metrics import min_matching_distance
from bayespmf.plots import plot_simplex_estimates

ESTIMATORS = [VLAD, GDM, SimplexSPA]


def _diameter(V):
    return max(np.linalg.norm(a - b) for a in V for b in V)


# --------------------------------------------------------------------------------------
# exact data


def test_vlad_exact_on_noise_free_data():
    # sigma = 0: the nest itself; VLAD with the true alpha recovers the vertices up to
    # the k-means sampling error of the CVT centroids: ~6700 points a cell, within-cell
    # sd ~0.5, extended by gamma = 2.4 over 6 coordinates: ~0.036, 1 % of the diameter
    # (3.5). Lloyd run to tol=1e-8 on these data gives 0.038; the default stopping rule
    # gave 0.034-0.045 depending on the restart seeds.
    X, truth = make_simplex_nest(20_000, 6, 3, alpha=1.0, sigma=0.0, random_state=1)
    est = VLAD(3, alpha=1.0, random_state=0).fit(X)
    assert min_matching_distance(est.vertices_, truth.vertices) < 0.015 * _diameter(
        truth.vertices
    )


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_all_exact_when_points_sit_at_vertices(cls):
    # alpha -> 0 (separable data): the vertices are data points; every method is exact.
    X, truth = make_simplex_nest(3000, 8, 4, alpha=0.01, sigma=0.0, random_state=2)
    kw = {"alpha": 0.01} if cls is not SimplexSPA else {}
    est = cls(4, **kw, **({"random_state": 0} if cls is not SimplexSPA else {})).fit(X)
    assert min_matching_distance(est.vertices_, truth.vertices) < 0.01 * _diameter(
        truth.vertices
    )


# --------------------------------------------------------------------------------------
# alpha by the method of moments (Sec. 3.3, Lemma 3)

# High signal-to-noise settings: the moment equation is flat in alpha (d log phi /
# d log alpha ~ 0.1 at alpha = 2, Supplement A.3.2), so a 1 % error in the centroid
# spread is ~10 % in alpha. Measured errors over seeds 0-2 (noise_bias="bootstrap"):
# gaussian -3/-4/+10 % (0.5), +1/+4/+3 % (2); poisson -1/-3/-2 %, 0/-1/+1 %;
# multinomial +2/-1/-3 %, +8/+1/+6 %.
ALPHA_CASES = {
    "gaussian": dict(n_samples=20_000, n_features=100, sigma=0.3),
    "poisson": dict(n_samples=20_000, n_features=1000),
    "multinomial": dict(n_samples=20_000, n_features=500, words_per_doc=3000),
}


@pytest.mark.parametrize(
    "kernel",
    [
        "gaussian",
        pytest.param("poisson", marks=pytest.mark.slow),
        pytest.param("multinomial", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_alpha_recovered_within_10_percent(kernel, alpha):
    X, _ = make_simplex_nest(
        n_components=5, alpha=alpha, kernel=kernel, random_state=0, **ALPHA_CASES[kernel]
    )
    est = VLAD(5, kernel, random_state=0).fit(X)
    assert est.alpha_ == pytest.approx(alpha, rel=0.10)


@pytest.mark.slow
def test_small_n_alpha_bias_removed_by_the_bootstrap():
    # issue 15: at n = 1000 the plain moment equation (Alg. 1) finds alpha far too low
    # (k-means overfits the sample, noise spreads the centroids); the calibrated
    # default does not, and its vertices are closer. Measured: Alg. 1 alpha 1.10,
    # 1.24, 1.13, error 10.0, 11.0, 11.1; default 2.03, 2.50, 1.80, error 7.1, 9.2, 7.9.
    from bayespmf.kernels.extension_table import extension_parameter

    alphas, plain_alphas = [], []
    for seed in range(3):
        X, truth = make_simplex_nest(1000, 200, 8, alpha=2.0, sigma=1.0, random_state=seed)
        plain = VLAD(8, noise_bias="none", whiten="data", random_state=0).fit(X)
        boot = VLAD(8, random_state=0).fit(X)
        err = min_matching_distance(boot.vertices_, truth.vertices)
        assert err < min_matching_distance(plain.vertices_, truth.vertices)
        lo, hi = boot.alpha_interval_
        assert lo < boot.alpha_ < hi
        assert boot.gamma_ == pytest.approx(
            extension_parameter(boot.alpha_, 8) / boot.inflation_, rel=1e-6
        )
        alphas.append(boot.alpha_)
        plain_alphas.append(plain.alpha_)
    assert np.mean(plain_alphas) < 1.5
    assert np.mean(alphas) == pytest.approx(2.0, rel=0.2)


def test_bootstrap_with_known_alpha_deflates_the_centroids():
    X, _ = make_simplex_nest(1000, 50, 4, alpha=1.0, sigma=0.5, random_state=3)
    est = VLAD(4, alpha=1.0, random_state=0).fit(X)
    assert est.alpha_ == 1.0 and np.isnan(est.alpha_objective_)
    assert np.all(np.isnan(est.alpha_interval_))
    assert 1.0 < est.inflation_ < 1.2
    plain = VLAD(4, alpha=1.0, noise_bias="none", random_state=0).fit(X)
    assert plain.inflation_ == 1.0 and est.gamma_ == pytest.approx(
        plain.gamma_ / est.inflation_
    )


def test_vlad_beats_gdm_and_spa_at_alpha_2():
    X, truth = make_simplex_nest(2000, 100, 5, alpha=2.0, sigma=1.0, random_state=4)
    err = {
        name: min_matching_distance(e.fit(X).vertices_, truth.vertices)
        for name, e in {
            "vlad": VLAD(5, random_state=0),
            "gdm": GDM(5, random_state=0),
            "spa": SimplexSPA(5),
        }.items()
    }
    assert err["vlad"] < err["gdm"] and err["vlad"] < err["spa"]


# --------------------------------------------------------------------------------------
# transform / score


@pytest.mark.parametrize("kernel", ["gaussian", "poisson", "multinomial"])
@pytest.mark.filterwarnings("ignore::bayespmf.fit.simplex.UnresolvedSimplexWarning")
def test_transform_rows_on_simplex(kernel):
    # n = 300, D = 20: the Poisson nest's thin direction is inside the noise bulk (VLAD
    # says so); the test is about transform, not accuracy
    kw = {"words_per_doc": 200} if kernel == "multinomial" else {}
    X, _ = make_simplex_nest(300, 20, 3, alpha=1.0, kernel=kernel, random_state=5, **kw)
    for est in (
        VLAD(3, kernel, random_state=0),
        GDM(3, kernel, random_state=0),
        SimplexSPA(3, kernel),
    ):
        theta = est.fit(X).transform(X)
        assert theta.shape == (300, 3)
        assert np.all(theta >= 0)
        np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-12)


def test_transform_recovers_theta_and_score_is_zero_inside():
    X, truth = make_simplex_nest(500, 5, 3, alpha=1.0, sigma=0.0, random_state=6)
    est = VLAD(3, alpha=1.0, random_state=0).fit(X)
    est.vertices_ = truth.vertices  # plant the truth: exact barycentric coordinates
    np.testing.assert_allclose(est.transform(X), truth.theta, atol=1e-8)
    assert est.score(X) == pytest.approx(0.0, abs=1e-12)
    assert VLAD(3, alpha=1.0, random_state=0).fit(X).score(X) <= 0


# --------------------------------------------------------------------------------------
# determinism, no mutation, parameters


@pytest.mark.parametrize("cls", [VLAD, GDM])
def test_deterministic_with_random_state(cls):
    X, _ = make_simplex_nest(400, 10, 3, alpha=1.0, random_state=7)
    a = cls(3, random_state=11).fit(X).vertices_
    b = cls(3, random_state=11).fit(X).vertices_
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("kernel", ["gaussian", "multinomial"])
def test_input_not_mutated(cls, kernel):
    kw = {"words_per_doc": 100} if kernel == "multinomial" else {}
    X, _ = make_simplex_nest(200, 10, 3, alpha=1.0, kernel=kernel, random_state=8, **kw)
    before = X.copy()
    est = cls(3, kernel).fit(X)
    est.transform(X)
    est.score(X)
    np.testing.assert_array_equal(X, before)
    assert X.dtype == before.dtype


@pytest.mark.filterwarnings("ignore::bayespmf.fit.simplex.UnresolvedSimplexWarning")
def test_parameters_passed_through():
    # a small Poisson nest (n = 300, D = 10) inside the noise bulk: VLAD warns so; the
    # test is about the parameters
    est = VLAD(
        4,
        "poisson",
        1.5,
        n_init=3,
        max_iter=50,
        whiten="data",
        noise_bias="none",
        random_state=9,
    )
    assert (est.n_components, est.kernel, est.alpha, est.n_init, est.max_iter) == (
        4,
        "poisson",
        1.5,
        3,
        50,
    )
    assert est.whiten == "data" and est.random_state == 9 and est.noise_bias == "none"
    X, _ = make_simplex_nest(300, 10, 4, alpha=1.5, kernel="poisson", random_state=9)
    est.fit(X)
    assert est.alpha_ == 1.5 and np.isnan(est.alpha_objective_)
    assert est.vertices_.shape == (4, 10) and np.all(est.vertices_ >= 0)
    assert est.sigma_ is None and est.n_features_in_ == 10


def test_multinomial_vertices_on_simplex_and_gaussian_sigma():
    X, _ = make_simplex_nest(
        500, 30, 3, alpha=1.0, kernel="multinomial", words_per_doc=300, random_state=10
    )
    V = VLAD(3, "multinomial", random_state=0).fit(X).vertices_
    assert np.all(V >= 0)
    np.testing.assert_allclose(V.sum(axis=1), 1.0)
    X, _ = make_simplex_nest(2000, 40, 3, alpha=1.0, sigma=0.5, random_state=10)
    assert VLAD(3, random_state=0).fit(X).sigma_ == pytest.approx(0.5, rel=0.05)


# --------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_error_paths(cls):
    X, _ = make_simplex_nest(20, 3, 2, alpha=1.0, sigma=0.01, random_state=0)
    X = X - X.min() + 0.1  # positive, so that the count kernels accept it
    with pytest.raises(DataValidationError, match=r"'n_components'.*>= 2"):
        cls(1).fit(X)
    with pytest.raises(DataValidationError, match=r"'n_components'.*<= 4.*Lower"):
        cls(5).fit(X)
    with pytest.raises(DataValidationError, match=r"<= 3.*multinomial"):
        cls(4, "multinomial").fit(X)
    with pytest.raises(DataValidationError, match=r"2-D array.*ndim=1"):
        cls(2).fit(X[:, 0])
    with pytest.raises(DataValidationError, match=r"2-D array.*ndim=3"):
        cls(2).fit(X[None])
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(DataValidationError, match=r"NaN"):
        cls(2).fit(bad)
    neg = X.copy()
    neg[2, 0] = -1
    for kernel in ("poisson", "multinomial"):
        with pytest.raises(DataValidationError, match=r"negative count.*row 2"):
            cls(2, kernel).fit(neg)
    empty = np.rint(10 * X)
    empty[5] = 0
    with pytest.raises(DataValidationError, match=r"no words.*\[5\]"):
        cls(2, "multinomial").fit(empty)
    # issue 14: frequencies (or any non-integer values) are not word counts
    with pytest.raises(
        DataValidationError,
        match=r"'X' of \w+ must hold integer word counts.*row 0, column 0.*raw counts",
    ):
        cls(2, "multinomial").fit(X / X.sum(axis=1, keepdims=True))
    with pytest.raises(DataValidationError, match=r"Did you mean 'poisson'"):
        cls(2, "poison").fit(X)
    with pytest.raises(DataValidationError, match=r"at least one row per vertex"):
        cls(3).fit(X[:2])
    with pytest.raises(NotFittedError, match=r"not fitted"):
        cls(2).transform(X)
    est = cls(2).fit(X)
    with pytest.raises(DataValidationError, match=r"X has 3 features.*expecting 2.*fit"):
        est.fit(X[:, :2]).transform(X)
    with pytest.raises(NotFittedError, match=r"not fitted"):
        cls(2).score(X)
    # transform takes any number of rows, fewer than the vertices included
    assert est.transform(X[:1, :2]).shape == (1, 2)


def test_bad_hyperparameters():
    X = np.random.default_rng(0).random((20, 3))
    with pytest.raises(ValueError, match=r"'alpha' parameter of VLAD"):
        VLAD(2, alpha=0.0).fit(X)
    with pytest.raises(ValueError, match=r"'n_init' parameter of GDM"):
        GDM(2, n_init=0).fit(X)
    with pytest.raises(DataValidationError, match=r"'whiten'.*'corrected' or 'data'"):
        VLAD(2, whiten="raw").fit(X)
    with pytest.raises(
        DataValidationError, match=r"'noise_bias'.*'bootstrap', 'simex', 'none'.*'off'"
    ):
        VLAD(2, noise_bias="off").fit(X)


# --------------------------------------------------------------------------------------
# plot


@pytest.mark.parametrize("n_dims", [2, 3])
def test_plot_simplex_estimates(n_dims):
    X, truth = make_simplex_nest(300, 6, 3, alpha=2.5, sigma=0.1, random_state=0)
    vlad = VLAD(3, random_state=0).fit(X)
    fig = plot_simplex_estimates(
        X, {"VLAD": vlad, "SPA": SimplexSPA(3).fit(X)}, truth.vertices, n_dims=n_dims
    )
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["data", "truth", "VLAD", "SPA"]
    plt.close(fig)
    with pytest.raises(DataValidationError, match=r"'n_dims' must be 2 or 3"):
        plot_simplex_estimates(X, n_dims=4)
    with pytest.raises(DataValidationError, match=r"expected \(K, 6\)"):
        plot_simplex_estimates(X, {"bad": np.zeros((3, 2))})
