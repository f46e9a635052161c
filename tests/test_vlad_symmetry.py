"""VLAD's test of a symmetric Dirichlet (issue 35): calibrated, gated, still powerful.

Pearson's chi-square of the k-means cell counts against ``n / K``
(:func:`~bayespmf.kernels.vlad_asymmetric.mass_balance`) treats the cells as fixed and
of equal mass; k-means fits them to the same points, and noise moves points across them
unevenly, so on symmetric nests it rejects far more often than its level (it made VLAD
fall back to a vector alpha on the paper's symmetric Poisson setting, and
``dsn_figures.py`` crash on the vector).
:func:`~bayespmf.kernels.vlad_asymmetric.symmetry_test` compares the counts with those
of the fitted symmetric nest simulated at the data's size and noise, and VLAD does not
act on it where a direction of the top subspace lies inside the noise bulk
(``signal_margin <= 1``: the generalised Marchenko-Pastur edge of the kernel's noise at
the data's n and D). Its p-values on symmetric nests must not pile up near 0, and it
must still find asymmetric Dirichlets. ``benchmarks/dsn_symmetry.py`` measures the
rates on the paper's settings.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.special import fdtrc
from scipy.stats import kstest

from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.estimators.simplex import VLAD
from bayespmf.fit.simplex import (
    ASYMMETRY_MIN_TV,
    ASYMMETRY_P_VALUE,
    AsymmetricDirichletWarning,
    UnresolvedSimplexWarning,
    fit_simplex_nest,
    rejects_symmetry,
)
from bayespmf.kernels.vlad_asymmetric import (
    SYMMETRY_REPS,
    MassBalance,
    mass_balance,
    symmetry_test,
)
from bayespmf.kernels.vlad_calibration import frame_kmeans
from bayespmf.kernels.vlad_geometry import top_subspace, vlad_centroids
from bayespmf.kernels.vlad_moments import noise_bulk_edge, noise_fraction, signal_margin

ROOT = Path(__file__).resolve().parents[1]


def p_values(kernel, n, D, K, alpha, c_min, seeds, **fit_kw):
    """Pearson's and the calibrated p-values, and the fallbacks, over ``seeds``."""
    kw = {"sigma": 0.1} if kernel == "gaussian" else {}
    old, new, fallbacks = [], [], 0
    for seed in seeds:
        X, _ = make_simplex_nest(
            n, D, K, alpha=alpha, kernel=kernel, c_min=c_min, random_state=seed, **kw
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = fit_simplex_nest(X, K, kernel=kernel, random_state=seed, **fit_kw)
        fallbacks += any(w.category is AsymmetricDirichletWarning for w in caught)
        old.append(mass_balance(fit.details["labels"], K).p_value)
        new.append(fit.details["mass_balance"].p_value)
    return np.array(old), np.array(new), fallbacks


@pytest.mark.slow
def test_skewed_poisson_nest_noise_unbalances_the_cells_and_the_test_allows_for_it():
    # the rates differ between vertices, so does the noise: Pearson's p-values pile up
    # near 0 (measured 4 of 20 below 0.01, KS p 4e-5); the calibrated ones do not
    old, new, fallbacks = p_values("poisson", 3000, 200, 3, 1.5, 0.1, range(20), n_init=2)
    assert kstest(old, "uniform").pvalue < 0.01
    assert np.sum(old < 0.01) >= 3
    assert kstest(new, "uniform").pvalue > 0.01
    assert np.sum(new < 0.01) <= 1
    assert fallbacks == 0


def test_the_poisson_nest_that_fell_back_no_longer_does():
    # dsn_figures.py --scale 0.2 --kernels poisson crashed here: D = 100, n = 200, a
    # symmetric alpha = 2, and Pearson's test made VLAD fall back to a vector alpha
    X, _ = make_simplex_nest(200, 100, 10, alpha=2.0, kernel="poisson", random_state=0)
    est = VLAD(10, "poisson", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # DegenerateVertexWarning
        warnings.simplefilter("error", category=AsymmetricDirichletWarning)
        est.fit(X)
    old = mass_balance(est.labels_, 10)
    assert old.p_value < ASYMMETRY_P_VALUE and old.total_variation > ASYMMETRY_MIN_TV
    assert est.fallback_ is None and isinstance(est.alpha_, float)
    assert est.mass_balance_.p_value > 100 * ASYMMETRY_P_VALUE
    assert est.mass_balance_.n_rep == SYMMETRY_REPS


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_supplement_c_triangle_is_still_detected(seed):
    # Supplement C: n = 5000, D = K = 3, alpha = (0.5, 1.5, 2.5), sigma = 0.1
    X, _ = make_simplex_nest(
        5000, 3, 3, alpha=(0.5, 1.5, 2.5), sigma=0.1, random_state=seed
    )
    with pytest.warns(AsymmetricDirichletWarning):
        est = VLAD(3, random_state=seed).fit(X)
    assert est.fallback_ == "vector_alpha"
    assert est.mass_balance_.p_value < ASYMMETRY_P_VALUE
    assert est.mass_balance_.total_variation > ASYMMETRY_MIN_TV
    assert est.mass_balance_.signal_margin > 1.0


@pytest.mark.parametrize("kernel", ["poisson", "multinomial"])
def test_asymmetric_count_nests_are_detected(kernel):
    # the count kernels' noise is simulated too; a clear asymmetry still shows
    kw = {"words_per_doc": 1000} if kernel == "multinomial" else {}
    D = 500 if kernel == "multinomial" else 200
    X, _ = make_simplex_nest(
        3000, D, 3, alpha=(0.5, 1.5, 2.5), kernel=kernel, random_state=1, **kw
    )
    with pytest.warns(AsymmetricDirichletWarning):
        est = VLAD(3, kernel, random_state=1).fit(X)
    assert est.fallback_ == "vector_alpha"
    assert est.mass_balance_.p_value < 1e-8  # measured 1e-13 and 2e-15
    assert est.alpha_.max() > 2 * est.alpha_.min()  # truth: 5 times


@pytest.mark.slow
def test_a_lost_direction_of_the_simplex_is_not_read_as_asymmetry():
    # Fig. 3's most skewed LDA nest (c_min = 0.1), symmetric alpha = 2, n = 3000: the
    # thin direction of the simplex lies inside the noise bulk (signal margin <= 1),
    # the cells come out unequal and the calibrated p-value is small, but VLAD keeps
    # the symmetric fit and says the simplex is not resolved
    X, _ = make_simplex_nest(
        3000, 2000, 10, alpha=2.0, kernel="multinomial", c_min=0.1,
        words_per_doc=3000, random_state=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=AsymmetricDirichletWarning)
        with pytest.warns(UnresolvedSimplexWarning):
            est = VLAD(10, "multinomial", random_state=0).fit(X)
    mb = est.mass_balance_
    assert mb.p_value < ASYMMETRY_P_VALUE and mb.total_variation > ASYMMETRY_MIN_TV
    assert mb.signal_margin <= 1.0
    assert est.fallback_ is None and isinstance(est.alpha_, float)


def test_rejects_symmetry_needs_all_three_conditions():
    base = MassBalance(np.array([0.5, 0.3, 0.2]), 300.0, 1e-9, 0.13, signal_margin=3.0)
    assert rejects_symmetry(base)
    assert not rejects_symmetry(base._replace(p_value=10 * ASYMMETRY_P_VALUE))
    assert not rejects_symmetry(base._replace(total_variation=ASYMMETRY_MIN_TV))
    assert rejects_symmetry(base._replace(signal_margin=1.001))
    assert not rejects_symmetry(base._replace(signal_margin=1.0))
    # Pearson's mass_balance has no signal margin: never acted on
    assert not rejects_symmetry(mass_balance(np.repeat([0, 1, 2], [50, 30, 20]), 3))


def test_symmetry_test_statistic_follows_its_definition():
    X, _ = make_simplex_nest(1000, 3, 3, alpha=1.0, sigma=0.05, random_state=3)
    sub = top_subspace(X, 2)
    centroids, _, labels = vlad_centroids(sub, 3, random_state=0)
    g = (centroids - sub.center) @ sub.components
    ctx = {"sigma2": 0.0025}
    mb = symmetry_test(sub, g, labels, "gaussian", ctx, 1.0, 2.0, n_rep=5, random_state=1)
    counts = np.bincount(labels, minlength=3)
    np.testing.assert_allclose(mb.masses, counts / 1000)
    np.testing.assert_allclose(mb.expected.sum(), 1.0)
    chi2 = np.sum((counts - 1000 * mb.expected) ** 2 / (1000 * mb.expected))
    assert mb.chi2 == pytest.approx(chi2)
    assert mb.statistic == pytest.approx(chi2 / (2 * mb.dispersion * (1 + 1 / 5)))
    assert mb.p_value == pytest.approx(fdtrc(2, 4 * 2, mb.statistic))
    assert mb.total_variation == pytest.approx(0.5 * np.abs(mb.masses - mb.expected).sum())
    assert mb.noise_fraction == noise_fraction(sub, "gaussian", ctx)
    assert 0 < mb.noise_fraction < 0.5  # sigma = 0.05 against a simplex of size ~3
    assert mb.signal_margin == signal_margin(sub, "gaussian", ctx) > 1
    # the same random_state gives the same test
    again = symmetry_test(
        sub, g, labels, "gaussian", ctx, 1.0, 2.0, n_rep=5, random_state=1
    )
    assert again.p_value == mb.p_value


@pytest.mark.parametrize("n, D", [(2000, 50), (500, 400), (3000, 3)])
def test_noise_bulk_edge_is_marchenko_pastur_for_gaussian_noise(n, D):
    # isotropic noise: the edge is sigma^2 (1 + sqrt(D / n))^2 ...
    X = np.random.default_rng(0).normal(size=(n, D))
    sub = top_subspace(X, 2)
    edge = noise_bulk_edge(sub, "gaussian", {"sigma2": 4.0})
    assert edge == pytest.approx(4.0 * (1 + np.sqrt(D / n)) ** 2, rel=1e-6)
    # ... and pure noise's top eigenvalue sits at it (up to Tracy-Widom fluctuations)
    top = sub.singular_values[0] ** 2 / n
    assert top == pytest.approx(noise_bulk_edge(sub, "gaussian", {"sigma2": 1.0}), rel=0.1)


def test_noise_bulk_edge_for_unequal_variances_matches_simulation():
    # Poisson-like noise, variances d_i on the diagonal: the edge of the generalised
    # Marchenko-Pastur law against the top eigenvalue of simulated pure noise
    rng = np.random.default_rng(1)
    n, D = 4000, 300
    d = rng.gamma(1.0, 10.0, size=D)
    noise = rng.normal(size=(n, D)) * np.sqrt(d)
    sub = top_subspace(noise, 1)
    edge = noise_bulk_edge(sub._replace(center=d), "poisson", {})
    assert sub.singular_values[0] ** 2 / n == pytest.approx(edge, rel=0.05)
    assert edge > d.mean() * (1 + np.sqrt(D / n)) ** 2  # above the isotropic edge


@pytest.mark.parametrize("D", [25, 500])
def test_poisson_nest_below_the_noise_bulk_warns(D):
    # issue 35: at D = 25 (dsn_figures' old --quick) the Poisson nest's thinnest
    # directions sit inside the noise bulk and alpha-hat came out 0.01-0.03 (truth 2)
    # without a word; at the paper's D = 500 the same n resolves the simplex
    X, _ = make_simplex_nest(1500, D, 10, alpha=2.0, kernel="poisson", random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_simplex_nest(X, 10, kernel="poisson", random_state=0)
    warned = any(w.category is UnresolvedSimplexWarning for w in caught)
    assert warned == (D == 25)
    assert (fit.details["signal_margin"] <= 1.0) == (D == 25)
    if D == 500:
        assert fit.details["alpha"] == pytest.approx(2.0, rel=0.3)


def test_frame_kmeans_with_restarts_keeps_the_cells_of_init():
    rng = np.random.default_rng(0)
    pts = np.vstack([rng.normal(0, 0.1, (30, 2)), rng.normal(5, 0.1, (70, 2))])
    init = np.array([[5.0, 5.0], [0.0, 0.0]])
    for n_init in (0, 3):
        fit = frame_kmeans(
            pts, init, np.zeros((2, 2)), 1.0, whiten="data", n_init=n_init, rng=0
        )
        assert fit.counts.tolist() == [70, 30]
        np.testing.assert_allclose(fit.centroids, [[5, 5], [0, 0]], atol=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_poisson_alpha_hat_near_the_truth_at_a_fig2_size(seed):
    # Supplement B's Poisson nest: D = 500, K = 10, alpha = 2, n = 10000 (Fig. 2)
    X, _ = make_simplex_nest(
        10_000, 500, 10, alpha=2.0, kernel="poisson", random_state=seed
    )
    est = VLAD(10, "poisson", random_state=seed).fit(X)
    assert est.fallback_ is None
    assert est.alpha_ == pytest.approx(2.0, rel=0.15)
    lo, hi = est.alpha_interval_
    assert lo <= 2.0 <= hi


def test_dsn_figures_prints_a_vector_alpha():
    # the safety net of issue 35: the table's alpha_hat column takes a vector
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from dsn_figures import alpha_text
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert alpha_text(2.0) == "2.000"
    text = alpha_text(np.array([1.0, 2.0, 6.0]))
    assert text.startswith("3.000") and "asymmetric" in text
