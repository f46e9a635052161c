"""VLAD kernels and the extension-parameter table against independent computations."""

import numpy as np
import pytest
from scipy.optimize import minimize

from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.kernels import vlad_geometry
from bayespmf.kernels.extension_table import (
    ExtensionTableWarning,
    compute_extension_parameter,
    dirichlet_common_draws,
    extension_gamma_fn,
    extension_parameter,
    load_extension_table,
)
from bayespmf.kernels.kmeans import kmeans
from bayespmf.kernels.vlad_calibration import (
    CALIBRATION_MAX_EVALS,
    NOISE_SIMULATORS,
    calibrate_alpha,
)
from bayespmf.kernels.vlad_geometry import (
    Subspace,
    barycentric_weights,
    center_and_gram,
    top_subspace,
    vlad_centroids,
)
from bayespmf.kernels.vlad_moments import dirichlet_cov_scale, noise_variance


def gamma_eq20(alpha, K, m, rng):
    """Supplement A.3.2, eq. (20): gamma = (1 - 1/K) / (E[max_k theta_k] - 1/K).

    Independent of the table: NumPy's Dirichlet sampler, no k-means. Returns the
    estimate and its delta-method standard error.
    """
    mx = rng.dirichlet(np.full(K, alpha), size=m).max(axis=1)
    mean, se = mx.mean(), mx.std(ddof=1) / np.sqrt(m)
    g = (1 - 1 / K) / (mean - 1 / K)
    return g, g**2 / (1 - 1 / K) * se


# --------------------------------------------------------------------------------------
# extension table


def test_table_is_small_and_covers_k_2_to_20():
    tab = load_extension_table()
    assert tab.k_values.tolist() == list(range(2, 21))
    assert tab.alpha_grid[0] == pytest.approx(0.01) and tab.alpha_grid[-1] == 100
    assert np.all(np.diff(tab.gamma, axis=1) > 0)  # gamma increases with alpha
    assert np.all(tab.gamma > 1)
    from bayespmf.kernels.extension_table import TABLE_PATH

    assert TABLE_PATH.stat().st_size < 1_000_000


def test_k2_alpha1_closed_form():
    # K = 2, alpha = 1: theta_1 ~ U(0, 1); 2-means centroids 1/4, 3/4; gamma = 2.
    assert extension_parameter(1.0, 2) == pytest.approx(2.0, rel=0.01)


@pytest.mark.parametrize("K", [3, 10])
@pytest.mark.parametrize("alpha", [0.3, 1.0, 2.5])
def test_table_matches_independent_monte_carlo(K, alpha):
    rng = np.random.default_rng(K * 100 + int(alpha * 10))
    g_ref, se_ref = gamma_eq20(alpha, K, 20_000, rng)
    tab = load_extension_table()
    j = np.argmin(np.abs(np.log(tab.alpha_grid) - np.log(alpha)))
    se_tab = tab.gamma_se[K - 2, j]
    tol = 4 * np.hypot(se_ref, se_tab)
    assert abs(extension_parameter(alpha, K) - g_ref) < tol


def test_alg2_kmeans_agrees_with_eq20_on_fresh_draws():
    # Alg. 2 on 5000 fresh draws vs eq. (20) on independent draws.
    g = compute_extension_parameter(2.0, 3, n_draws=5000, n_init=2, random_state=1)
    g_ref, se = gamma_eq20(2.0, 3, 20_000, np.random.default_rng(2))
    assert abs(g - g_ref) < 4 * np.hypot(se, 2 * se)


def test_extension_parameter_vectorized_and_range():
    out = extension_parameter(np.array([0.5, 1.0, 2.0]), 5)
    assert out.shape == (3,) and np.all(np.diff(out) > 0)
    fn, rng = extension_gamma_fn(5)
    np.testing.assert_allclose(fn(np.array([0.5, 1.0, 2.0])), out)
    assert rng == (0.01, 100.0)


def test_outside_table_warns_and_computes():
    with pytest.warns(ExtensionTableWarning, match=r"K=21"):
        g = extension_parameter(1.0, 21, random_state=0)
    ref, se = gamma_eq20(1.0, 21, 20_000, np.random.default_rng(3))
    assert abs(g - ref) < 6 * se
    with pytest.warns(ExtensionTableWarning, match=r"alpha="):
        extension_parameter(200.0, 3, random_state=0)


# --------------------------------------------------------------------------------------
# linear algebra


def test_center_and_gram_matches_numpy(rng):
    X = rng.normal(size=(50, 7))
    c0, G, ss = center_and_gram(X)
    Xc = X - X.mean(0)
    np.testing.assert_allclose(c0, X.mean(0))
    np.testing.assert_allclose(G, Xc.T @ Xc, rtol=1e-10, atol=1e-10)
    assert ss == pytest.approx(np.sum(Xc**2))


def test_top_subspace_routes_agree(rng, monkeypatch):
    X, _ = make_simplex_nest(400, 30, 4, alpha=1.0, sigma=0.5, random_state=0)
    a = top_subspace(X, 3)
    monkeypatch.setattr(vlad_geometry, "GRAM_MAX_FEATURES", 0)  # force ARPACK
    b = top_subspace(X, 3, random_state=0)
    np.testing.assert_allclose(a.singular_values, b.singular_values, rtol=1e-8)
    np.testing.assert_allclose(a.components, b.components, atol=1e-7)  # same signs
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-7)
    s = np.linalg.svd(X - X.mean(0), compute_uv=False)
    np.testing.assert_allclose(a.singular_values, s[:3], rtol=1e-8)
    np.testing.assert_allclose(a.scores.T @ a.scores, np.eye(3), atol=1e-10)


def test_dirichlet_cov_scale_matches_sampling(rng):
    K, alpha = 4, 1.5
    th = rng.dirichlet(np.full(K, alpha), size=200_000)
    S = dirichlet_cov_scale(alpha, K) * (np.eye(K) - 1 / K)
    np.testing.assert_allclose(np.cov(th.T), S, atol=2e-4)


def _qp_reference(y, V):
    K = V.shape[0]
    res = minimize(
        lambda t: np.sum((y - t @ V) ** 2),
        np.full(K, 1 / K),
        jac=lambda t: -2 * (y - t @ V) @ V.T,
        bounds=[(0, 1)] * K,
        constraints=[{"type": "eq", "fun": lambda t: t.sum() - 1}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return res.x


def test_barycentric_weights_matches_qp(rng):
    V = rng.normal(size=(4, 6)) * [[3], [1], [1], [0.5]]
    Y = rng.normal(size=(25, 6)) * 2
    theta, _ = barycentric_weights(Y, V)
    assert np.all(theta >= 0)
    np.testing.assert_allclose(theta.sum(1), 1.0)
    for y, t in zip(Y, theta, strict=True):
        ref = _qp_reference(y, V)
        assert np.sum((y - t @ V) ** 2) <= np.sum((y - ref @ V) ** 2) + 1e-8


def test_barycentric_weights_exact_inside(rng):
    V = rng.normal(size=(3, 5))
    th = rng.dirichlet([1, 1, 1], size=40)
    theta, n_iter = barycentric_weights(th @ V, V)
    np.testing.assert_allclose(theta, th, atol=1e-9)
    assert n_iter <= 2


# --------------------------------------------------------------------------------------
# Lemma 3: the sign and size of each kernel's covariance correction


def _true_bsb(truth, K):
    B = truth.vertices.T  # (D, K)
    return B @ (dirichlet_cov_scale(truth.alpha, K) * (np.eye(K) - 1 / K)) @ B.T


def test_poisson_correction_sign_follows_lemma_3b():
    K = 3
    X, truth = make_simplex_nest(40_000, 8, K, alpha=1.0, kernel="poisson", random_state=0)
    S_hat = np.cov(X.T, bias=True)
    target = _true_bsb(truth, K)
    minus = np.linalg.norm(S_hat - np.diag(X.mean(0)) - target)
    plus = np.linalg.norm(S_hat + np.diag(X.mean(0)) - target)
    # Lemma 3(b): Sigma = B S B^T + Diag(B 1 / K): the mean is SUBTRACTED.
    assert minus < 0.1 * np.linalg.norm(target) < plus


def test_multinomial_correction_follows_lemma_3c():
    K, N = 3, 50
    X, truth = make_simplex_nest(
        40_000,
        6,
        K,
        alpha=1.0,
        kernel="multinomial",
        words_per_doc=N,
        eta=1.0,
        random_state=0,
    )
    Y = X / N
    c0 = Y.mean(0)
    S_hat = np.cov(Y.T, bias=True)
    corrected = (S_hat - (np.diag(c0) - np.outer(c0, c0)) / N) / (1 - 1 / N)
    target = _true_bsb(truth, K)
    assert np.linalg.norm(corrected - target) < 0.1 * np.linalg.norm(target)
    assert np.linalg.norm(S_hat - target) > 0.5 * np.linalg.norm(target)


def test_gaussian_noise_variance_from_trailing_spectrum():
    X, _ = make_simplex_nest(5000, 40, 4, alpha=1.0, sigma=0.7, random_state=0)
    sub = top_subspace(X, 3)
    assert np.sqrt(noise_variance(sub, *X.shape)) == pytest.approx(0.7, rel=0.02)


# --------------------------------------------------------------------------------------
# k-means restarts, and the parametric bootstrap of alpha (issue 15)


def test_interpolated_dirichlet_draws_match_exact():
    rng = np.random.default_rng(0)
    u1, u2 = rng.random((4000, 6)), rng.random((4000, 6))
    for alpha in (0.01, 0.3, 2.0, 100.0):
        exact = dirichlet_common_draws(alpha, u1, u2)
        fast = dirichlet_common_draws(alpha, u1, u2, interpolate=True)
        np.testing.assert_allclose(fast, exact, rtol=1e-7, atol=1e-300)


def test_kmeans_restarts_do_not_depend_on_workers():
    X, _ = make_simplex_nest(600, 8, 4, alpha=0.5, sigma=0.3, random_state=3)
    one = kmeans(X, 4, random_state=1, n_workers=1)
    three = kmeans(X, 4, random_state=1, n_workers=3)
    np.testing.assert_array_equal(one[0], three[0])
    np.testing.assert_array_equal(one[1], three[1])
    assert one[2] == three[2]
    # n_init=0: only the given start, its row order kept
    start = one[0][::-1] + 1e-3
    centers, _, inertia = kmeans(X, 4, n_init=0, init=start)
    np.testing.assert_allclose(centers, one[0][::-1], atol=1e-8)
    assert inertia == pytest.approx(one[2])
    with pytest.raises(ValueError, match=r"'n_init' parameter of kmeans.*Got 0"):
        kmeans(X, 4, n_init=0)


def _subspace_through(c0, W, m):
    # a Subspace whose top directions are W (only center and components are used)
    return Subspace(c0, np.zeros((m, W.shape[1])), np.ones(W.shape[1]), W, 0.0)


@pytest.mark.parametrize("kernel", ["poisson", "multinomial"])
def test_noise_simulators_match_the_kernels_own_sampling(kernel):
    # At a fixed theta, the simulated projected noise has the covariance of real
    # Poisson / multinomial draws projected on W (NumPy's samplers, the reference).
    rng = np.random.default_rng(1)
    D, K, m, words = 12, 3, 100_000, 40
    # W orthonormal and orthogonal to 1, so that c0 + v W^T stays on the simplex
    W = np.linalg.qr(np.column_stack([np.ones(D), rng.normal(size=(D, K - 1))]))[0][:, 1:]
    c0 = np.full(D, 1.0 / D) if kernel == "multinomial" else rng.uniform(2, 6, D)
    scale = 0.04 if kernel == "multinomial" else 1.5
    vertices = scale * rng.normal(size=(K, K - 1))
    B = c0 + vertices @ W.T
    assert np.all(B > 0)
    sub = _subspace_through(c0, W, m)
    ctx = {"lengths": np.full(m, words), "inv_length": 1.0 / words}
    draw = NOISE_SIMULATORS[kernel](sub, ctx, vertices)
    for theta0 in ([0.8, 0.1, 0.1], [0.1, 0.15, 0.75]):
        theta = np.tile(theta0, (m, 1))
        mu = np.asarray(theta0) @ B
        sim = draw(theta, rng)
        if kernel == "poisson":
            real = (rng.poisson(mu, size=(m, D)) - mu) @ W
        else:
            real = (rng.multinomial(words, mu / mu.sum(), size=m) / words - mu) @ W
        c_sim, c_real = np.cov(sim.T), np.cov(real.T)
        assert np.linalg.norm(c_sim - c_real) < 0.03 * np.linalg.norm(c_real)
        assert np.abs(sim.mean(0)).max() < 5 * np.sqrt(np.diag(c_real).max() / m)


def test_calibration_with_known_alpha_only_estimates_the_spread():
    X, _ = make_simplex_nest(1500, 60, 4, alpha=1.0, sigma=0.5, random_state=2)
    sub = top_subspace(X, 3)
    ctx = {"sigma2": noise_variance(sub, *X.shape)}
    cen, _, _ = vlad_centroids(sub, 4, random_state=0)
    g = (cen - sub.center) @ sub.components
    fn, rng_a = extension_gamma_fn(4)
    cal = calibrate_alpha(sub, g, "gaussian", ctx, fn, rng_a, alpha=1.0, random_state=0)
    assert cal.alpha == 1.0 and cal.n_evals == 1 and np.isnan(cal.objective)
    assert 1.0 < cal.inflation < 1.2  # noisy, finite-sample centroids spread outward
    free = calibrate_alpha(sub, g, "gaussian", ctx, fn, rng_a, random_state=0)
    lo, hi = free.interval
    assert lo < free.alpha < hi and 1 <= free.n_evals <= CALIBRATION_MAX_EVALS
