"""Simulators: moments against their definitions, the separable construction, errors."""

import numpy as np
import pytest

from bayespmf import DataValidationError
from bayespmf.data import CategoricalData
from bayespmf.datasets._simulate import (
    ANCHOR_MASS,
    LatentClassTruth,
    SimplexNestTruth,
    make_latent_class,
    make_simplex_nest,
)

# A z-score bound for moment checks: with a fixed seed and a few dozen comparisons,
# 4.5 standard errors keeps the tests robust to the seed while still catching a
# wrong definition (which is off by many standard errors at these sample sizes).
Z_MAX = 4.5


def _normalized_distance(rows):
    """l2 distance of each l1-normalized row to its nearest unit vector e_f, and f."""
    r = rows / rows.sum(axis=1, keepdims=True)
    eye = np.eye(rows.shape[1])
    d = np.linalg.norm(r[:, None, :] - eye[None, :, :], axis=2)  # (rows, F)
    return d


# --------------------------------------------------------------------------------------
# make_latent_class: shapes and moments


def test_latent_class_returns_data_and_truth():
    data, truth = make_latent_class(50, [2, 3, 4], n_components=3, random_state=0)
    assert isinstance(data, CategoricalData)
    assert isinstance(truth, LatentClassTruth)
    assert data.shape == (50, 3)
    assert data.n_categories.tolist() == [2, 3, 4]
    assert truth.classes.shape == (50,) and truth.classes.dtype == np.int64
    assert [a.shape for a in truth.factors] == [(2, 3), (3, 3), (4, 3)]
    assert truth.params.weights is truth.weights
    assert (data.codes >= 0).all()  # observed_prob = 1 by default


def test_int_n_categories_with_n_variables():
    data, truth = make_latent_class(10, 5, n_components=2, n_variables=4, random_state=0)
    assert data.n_categories.tolist() == [5, 5, 5, 5]
    assert len(truth.factors) == 4


@pytest.mark.parametrize("prior", ["uniform", "dirichlet", "row-dirichlet", "separable"])
def test_parameters_are_stochastic(prior):
    _, truth = make_latent_class(
        10, [6, 6, 7, 6], n_components=3, factor_prior=prior, random_state=1
    )
    assert np.isclose(truth.weights.sum(), 1.0) and (truth.weights >= 0).all()
    for a in truth.factors:
        np.testing.assert_allclose(a.sum(axis=0), 1.0, atol=1e-12)
        assert (a >= 0).all()


def test_row_dirichlet_is_the_cnmf_code_generator():
    """Rows ~ Dirichlet(1_F), columns rescaled, equal weights (gen_PMF_factors_dirich.m)."""
    n_cat, n_components = [4, 7, 5], 3
    _, truth = make_latent_class(
        20, n_cat, n_components=n_components, factor_prior="row-dirichlet", random_state=9
    )
    np.testing.assert_array_equal(truth.weights, np.full(n_components, 1 / n_components))
    rng = np.random.default_rng(9)  # equal weights draw nothing; then one factor each
    for a, i in zip(truth.factors, n_cat, strict=True):
        rows = rng.dirichlet(np.ones(n_components), size=i)
        np.testing.assert_allclose(a, rows / rows.sum(axis=0), rtol=1e-12)


def test_row_dirichlet_rows_are_uniform_on_the_simplex():
    """Before rescaling every row is Dirichlet(1_F): row-normalized entries have mean
    1/F and variance (F - 1) / (F^2 (F + 1)) (the column rescaling multiplies the
    columns by nearly equal constants at this size, so rows keep those moments)."""
    n_components, n = 4, 4000
    _, truth = make_latent_class(
        5, [n], n_components=n_components, factor_prior="row-dirichlet", random_state=2
    )
    rows = truth.factors[0] / truth.factors[0].sum(axis=1, keepdims=True)
    var = (n_components - 1) / (n_components**2 * (n_components + 1))
    z_mean = (rows.mean(axis=0) - 1 / n_components) / np.sqrt(var / n)
    assert np.abs(z_mean).max() < Z_MAX
    assert np.allclose(rows.var(axis=0), var, rtol=0.1)


def test_weights_prior_defaults():
    _, t = make_latent_class(
        10, [6] * 4, n_components=4, factor_prior="separable", random_state=0
    )
    np.testing.assert_array_equal(t.weights, np.full(4, 0.25))
    _, t = make_latent_class(
        10, [6] * 4, n_components=4, weights_prior="equal", random_state=0
    )
    np.testing.assert_array_equal(t.weights, np.full(4, 0.25))


def test_class_and_category_frequencies_match_parameters():
    n = 20_000
    data, truth = make_latent_class(n, [2, 3, 5], n_components=3, random_state=11)
    # classes ~ Categorical(weights)
    freq = np.bincount(truth.classes, minlength=3) / n
    se = np.sqrt(truth.weights * (1 - truth.weights) / n)
    assert np.all(np.abs(freq - truth.weights) < Z_MAX * se)
    # per class, categories of variable n ~ Categorical(A_n[:, f])
    for var, a in enumerate(truth.factors):
        for f in range(3):
            rows = truth.classes == f
            counts = np.bincount(data.codes[rows, var], minlength=a.shape[0])
            p_hat = counts / rows.sum()
            se = np.sqrt(a[:, f] * (1 - a[:, f]) / rows.sum())
            assert np.all(np.abs(p_hat - a[:, f]) < Z_MAX * se + 1e-12), (var, f)


def test_observed_fraction_matches_observed_prob():
    n, p = 20_000, 0.3
    data, _ = make_latent_class(
        n, 4, n_components=2, n_variables=3, observed_prob=p, random_state=2
    )
    frac = (data.codes >= 0).mean()
    assert abs(frac - p) < Z_MAX * np.sqrt(p * (1 - p) / (3 * n))
    # entries are hidden independently: the per-row number observed is Binomial(3, p)
    per_row = (data.codes >= 0).sum(axis=1)
    assert abs(per_row.var() - 3 * p * (1 - p)) < 0.05


def test_observed_prob_per_variable():
    p = np.array([1.0, 0.5, 0.2])
    p_before = p.copy()
    data, _ = make_latent_class(
        20_000, 3, n_components=2, n_variables=3, observed_prob=p, random_state=3
    )
    frac = (data.codes >= 0).mean(axis=0)
    assert frac[0] == 1.0
    assert np.all(np.abs(frac - p) < Z_MAX * np.sqrt(p * (1 - p) / 20_000) + 1e-12)
    np.testing.assert_array_equal(p, p_before)


def test_zero_weight_class_never_drawn():
    _, truth = make_latent_class(
        2000, [3, 3], n_components=3, weights_prior=[0.0, 1.0, 0.0], random_state=0
    )
    assert (truth.classes == 1).all()


def test_given_weights_are_copied_not_mutated():
    w = np.array([0.2, 0.8])
    n_cat = [3, 4]
    _, truth = make_latent_class(
        100, n_cat, n_components=2, weights_prior=w, random_state=0
    )
    np.testing.assert_array_equal(truth.weights, w)
    truth.weights[0] = 9.0
    assert w[0] == 0.2 and n_cat == [3, 4]


def test_empty_rows_kept_by_default_and_dropped_on_request():
    kw = dict(n_variables=2, observed_prob=0.2, random_state=4)
    data, truth = make_latent_class(1000, 3, 2, **kw)
    n_empty = int((~data.mask.any(axis=1)).sum())
    assert data.n_samples == 1000 and n_empty > 0  # about 0.8**2 = 64% of the rows
    dropped, t2 = make_latent_class(1000, 3, 2, drop_empty_rows=True, **kw)
    assert dropped.n_samples == 1000 - n_empty
    assert dropped.mask.any(axis=1).all()
    keep = data.mask.any(axis=1)
    np.testing.assert_array_equal(dropped.codes, data.codes[keep])
    np.testing.assert_array_equal(t2.classes, truth.classes[keep])


def test_latent_class_deterministic_and_seed_dependent():
    kw = dict(n_variables=4, observed_prob=0.7, factor_prior="dirichlet")
    d1, t1 = make_latent_class(300, 3, 2, random_state=5, **kw)
    d2, t2 = make_latent_class(300, 3, 2, random_state=5, **kw)
    d3, t3 = make_latent_class(300, 3, 2, random_state=6, **kw)
    assert d1 == d2
    np.testing.assert_array_equal(t1.weights, t2.weights)
    for a, b in zip(t1.factors, t2.factors, strict=True):
        np.testing.assert_array_equal(a, b)
    assert d1 != d3
    assert not np.array_equal(t1.weights, t3.weights)


def test_generator_is_used_in_place():
    rng = np.random.default_rng(0)
    d1, _ = make_latent_class(50, 3, 2, n_variables=2, random_state=rng)
    d2, _ = make_latent_class(50, 3, 2, n_variables=2, random_state=rng)
    assert d1 != d2  # the generator advanced


# --------------------------------------------------------------------------------------
# the epsilon-separable construction


def _anchor_variables(truth, n_components):
    """Variables whose first F rows have the anchor pattern mu*I + delta*(11^T - I)."""
    found = []
    for n, a in enumerate(truth.factors):
        if a.shape[0] <= n_components:
            continue
        block = a[:n_components]
        off = block[~np.eye(n_components, dtype=bool)]
        if np.allclose(np.diag(block), ANCHOR_MASS) and np.allclose(off, off[0]):
            found.append(n)
    return found


@pytest.mark.parametrize(
    ("n_components", "epsilon"), [(2, 0.2), (3, 0.1), (5, 0.3), (5, 0.0)]
)
def test_separable_is_exactly_epsilon_separable(n_components, epsilon):
    n_var, split = 5, 3
    _, truth = make_latent_class(
        10,
        [8] * n_var,
        n_components,
        factor_prior="separable",
        epsilon=epsilon,
        split=split,
        random_state=n_components,
    )
    (u,) = _anchor_variables(truth, n_components)
    assert u >= split  # the anchors live in S2
    # the F anchor rows, l1-normalized, lie at l2 distance exactly epsilon from e_f
    d = _normalized_distance(truth.factors[u][:n_components])
    np.testing.assert_allclose(np.diag(d), epsilon, atol=1e-12)
    # hence H = [A_M; ...; A_N] (the S2 block) is epsilon-separable (Definition 1)
    h = np.vstack(truth.factors[split:])
    assert np.all(_normalized_distance(h).min(axis=0) <= epsilon + 1e-12)


def test_separable_reproduces_the_cnmf_code_block():
    # gen_PMF_factors_dirich_with_sep.m with F = 5 and delta = 0.03 ("eps = 0.3"):
    # top block 0.4 on the diagonal, 0.03 elsewhere; the rest of each column 1 - 0.52.
    eps = 0.03 / 0.52 * np.sqrt(20)  # the separability that delta = 0.03 gives
    _, truth = make_latent_class(
        10, [10] * 5, 5, factor_prior="separable", epsilon=eps, split=3, random_state=0
    )
    (u,) = _anchor_variables(truth, 5)
    a = truth.factors[u]
    np.testing.assert_allclose(a[:5], 0.4 * np.eye(5) + 0.03 * (1 - np.eye(5)), atol=1e-12)
    np.testing.assert_allclose(a[5:].sum(axis=0), 1 - 0.52, atol=1e-12)


def test_separable_anchor_variable_is_drawn_from_s2():
    seen = set()
    for seed in range(20):
        _, truth = make_latent_class(
            5, [6, 6, 6, 6, 6], 3, factor_prior="separable", split=2, random_state=seed
        )
        (u,) = _anchor_variables(truth, 3)
        seen.add(u)
    assert seen == {2, 3, 4}


def test_separable_default_split_and_epsilon():
    _, truth = make_latent_class(5, [8] * 5, 4, factor_prior="separable", random_state=0)
    (u,) = _anchor_variables(truth, 4)
    assert u >= 3  # default split ceil(5 / 2) = 3
    np.testing.assert_allclose(np.diag(_normalized_distance(truth.factors[u][:4])), 0.1)


def test_separable_skips_variables_too_small_for_anchors():
    # only variable 3 of S2 = {2, 3} has more than F = 3 categories
    for seed in range(5):
        _, truth = make_latent_class(
            5, [4, 4, 3, 5], 3, factor_prior="separable", split=2, random_state=seed
        )
        assert _anchor_variables(truth, 3) == [3]


# --------------------------------------------------------------------------------------
# make_latent_class: errors


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(n_categories=3), DataValidationError, "needs 'n_variables'"),
        (dict(n_categories=[3, 3], n_variables=3), DataValidationError, "disagrees"),
        (dict(n_categories=[3, 1]), DataValidationError, r"\[2, 100000\]; got \[1\]"),
        (dict(n_categories=[[3, 3]]), DataValidationError, "1-D sequence of ints"),
        (dict(n_categories=1, n_variables=2), ValueError, "'n_categories'.*>= 2|in \\[2"),
        (dict(n_samples=0), ValueError, "'n_samples' parameter of make_latent_class"),
        (dict(n_components=0), ValueError, "'n_components' parameter"),
        (dict(observed_prob=0.0), ValueError, "'observed_prob'"),
        (dict(observed_prob=[0.5]), DataValidationError, "one probability per variable"),
        (dict(observed_prob=[0.5, 1.5]), DataValidationError, r"in \(0, 1\]"),
        (dict(factor_prior="unifrom"), DataValidationError, "Did you mean 'uniform'"),
        (dict(weights_prior="dirichlt"), DataValidationError, "Did you mean 'dirichlet'"),
        (dict(weights_prior=[0.5, 0.6]), DataValidationError, "must sum to one"),
        (dict(weights_prior=[1.0]), DataValidationError, "non-negative weights"),
        (
            dict(epsilon=0.1),
            DataValidationError,
            "only applies to factor_prior='separable'",
        ),
        (dict(split=1), DataValidationError, "'split' only applies"),
        (dict(drop_empty_rows="yes"), DataValidationError, "'drop_empty_rows'"),
    ],
)
def test_latent_class_errors(kwargs, exc, match):
    args = dict(n_samples=10, n_categories=[3, 3], n_components=2) | kwargs
    with pytest.raises(exc, match=match):
        make_latent_class(**args)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(n_components=1), DataValidationError, "needs n_components >= 2"),
        (dict(n_categories=[6]), DataValidationError, "at least 2 variables"),
        (dict(epsilon=0.75), DataValidationError, "'epsilon' must be below 0.7348"),
        (dict(epsilon=-0.1), ValueError, "'epsilon'"),
        (dict(split=4), ValueError, r"'split'.*\[1, 3\]"),
        (dict(split=0), ValueError, "'split'"),
        (dict(n_categories=[6, 6, 3, 2]), DataValidationError, "more than n_components=3"),
    ],
)
def test_separable_errors(kwargs, exc, match):
    args = dict(
        n_samples=10, n_categories=[6, 6, 6, 6], n_components=3, factor_prior="separable"
    )
    with pytest.raises(exc, match=match):
        make_latent_class(**(args | kwargs))


def test_drop_empty_rows_error_when_nothing_left():
    with pytest.raises(DataValidationError, match="Every row is empty"):
        make_latent_class(
            1, [3], 2, observed_prob=1e-9, drop_empty_rows=True, random_state=0
        )


# --------------------------------------------------------------------------------------
# make_simplex_nest


def test_simplex_nest_shapes_and_truth():
    X, truth = make_simplex_nest(100, 6, 3, alpha=2.5, sigma=0.1, random_state=0)
    assert isinstance(truth, SimplexNestTruth)
    assert X.shape == (100, 6) and X.dtype == np.float64
    assert truth.vertices.shape == (3, 6) and truth.theta.shape == (100, 3)
    assert truth.alpha == 2.5 and truth.kernel == "gaussian"
    assert truth.sigma == 0.1 and truth.words_per_doc is None


@pytest.mark.parametrize("kernel", ["gaussian", "poisson", "multinomial"])
def test_theta_on_simplex_with_mean_one_over_k(kernel):
    n, k, alpha = 20_000, 4, 0.7
    _, truth = make_simplex_nest(n, 10, k, alpha, kernel, random_state=7)
    th = truth.theta
    assert (th >= 0).all()
    np.testing.assert_allclose(th.sum(axis=1), 1.0, atol=1e-12)
    var = (1 / k) * (1 - 1 / k) / (k * alpha + 1)  # Var of a Dir_K(alpha) coordinate
    assert np.all(np.abs(th.mean(axis=0) - 1 / k) < Z_MAX * np.sqrt(var / n))


def test_asymmetric_alpha():
    alpha = np.array([0.5, 1.0, 2.5])
    alpha_before = alpha.copy()
    _, truth = make_simplex_nest(20_000, 4, 3, alpha, random_state=8)
    a0 = alpha.sum()
    mean = alpha / a0
    var = mean * (1 - mean) / (a0 + 1)
    assert np.all(np.abs(truth.theta.mean(axis=0) - mean) < Z_MAX * np.sqrt(var / 20_000))
    np.testing.assert_array_equal(truth.alpha, alpha)
    np.testing.assert_array_equal(alpha, alpha_before)


def test_gaussian_residual_std_is_sigma():
    n, d, sigma = 5000, 8, 0.3
    X, truth = make_simplex_nest(n, d, 3, sigma=sigma, random_state=9)
    resid = X - truth.theta @ truth.vertices
    assert abs(resid.mean()) < Z_MAX * sigma / np.sqrt(n * d)
    assert abs(resid.std() - sigma) < Z_MAX * sigma / np.sqrt(2 * n * d)


def test_gaussian_noiseless():
    X, truth = make_simplex_nest(50, 5, 3, sigma=0.0, random_state=0)
    np.testing.assert_allclose(X, truth.theta @ truth.vertices)


def test_poisson_mean_is_b_theta():
    n = 5000
    X, truth = make_simplex_nest(n, 6, 3, kernel="poisson", random_state=10)
    assert X.dtype == np.int64 and (X >= 0).all()
    assert (truth.vertices > 0).all()
    mu = truth.theta @ truth.vertices
    z = (X - mu).sum(axis=0) / np.sqrt(mu.sum(axis=0))  # sum of Poisson residuals
    assert np.all(np.abs(z) < Z_MAX)
    assert truth.sigma is None and truth.words_per_doc is None


def test_multinomial_counts_and_topics():
    X, truth = make_simplex_nest(
        200, 30, 5, kernel="multinomial", words_per_doc=50, random_state=11
    )
    assert X.dtype == np.int64 and (X >= 0).all()
    np.testing.assert_array_equal(X.sum(axis=1), 50)
    assert (truth.vertices >= 0).all()
    np.testing.assert_allclose(truth.vertices.sum(axis=1), 1.0, atol=1e-12)
    assert truth.words_per_doc == 50 and truth.sigma is None


def test_multinomial_word_frequencies_follow_mu():
    n, words = 2000, 400
    X, truth = make_simplex_nest(
        n, 5, 3, kernel="multinomial", words_per_doc=words, eta=1.0, random_state=12
    )
    mu = truth.theta @ truth.vertices
    z = (X - words * mu).sum(axis=0) / np.sqrt((words * mu * (1 - mu)).sum(axis=0))
    assert np.all(np.abs(z) < Z_MAX)


def test_multinomial_words_per_document_array():
    words = np.arange(1, 11)
    words_before = words.copy()
    X, truth = make_simplex_nest(
        10, 6, 2, kernel="multinomial", words_per_doc=words, random_state=0
    )
    np.testing.assert_array_equal(X.sum(axis=1), words)
    np.testing.assert_array_equal(truth.words_per_doc, words)
    np.testing.assert_array_equal(words, words_before)


@pytest.mark.parametrize("kernel", ["gaussian", "poisson", "multinomial"])
def test_vertices_shrunk_toward_their_mean(kernel):
    # c_min = 1 draws c_k = 1 from the same stream: the unshrunk vertices.
    kw = dict(n_samples=5, n_features=7, n_components=4, kernel=kernel, random_state=13)
    _, raw = make_simplex_nest(c_min=1.0, **kw)
    _, shrunk = make_simplex_nest(c_min=0.6, **kw)
    b0, b = raw.vertices, shrunk.vertices
    center = b0.mean(axis=0)
    diff0, diff = b0 - center, b - center
    c = (diff * diff0).sum(axis=1) / (diff0**2).sum(axis=1)
    np.testing.assert_allclose(diff, c[:, None] * diff0, atol=1e-10)  # on the segment
    assert np.all((c >= 0.6) & (c <= 1.0))
    assert not np.allclose(c, 1.0)


def test_simplex_nest_deterministic_and_seed_dependent():
    X1, t1 = make_simplex_nest(30, 5, 3, kernel="poisson", random_state=1)
    X2, t2 = make_simplex_nest(30, 5, 3, kernel="poisson", random_state=1)
    _, t3 = make_simplex_nest(30, 5, 3, kernel="poisson", random_state=2)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(t1.vertices, t2.vertices)
    np.testing.assert_array_equal(t1.theta, t2.theta)
    assert not np.array_equal(t1.vertices, t3.vertices)


def test_max_vertices_is_d_plus_one():
    _, truth = make_simplex_nest(5, 2, 3, random_state=0)  # a triangle in the plane
    assert truth.vertices.shape == (3, 2)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (
            dict(n_components=1),
            DataValidationError,
            "must be >= 2: a simplex nest needs at least two vertices",
        ),
        (
            dict(n_features=2, n_components=4),
            DataValidationError,
            r"<= n_features \+ 1 \(3\)",
        ),
        (
            dict(n_features=3, n_components=4, kernel="multinomial"),
            DataValidationError,
            "probability simplex",
        ),
        (dict(kernel="gausian"), DataValidationError, "Did you mean 'gaussian'"),
        (
            dict(kernel="lda"),
            DataValidationError,
            "'kernel' parameter of make_simplex_nest",
        ),
        (dict(kernel=3), DataValidationError, "Got 3"),
        (dict(alpha=0.0), ValueError, "'alpha'"),
        (dict(alpha=[1.0, 2.0]), DataValidationError, "one positive value per vertex"),
        (dict(alpha=[1.0, -2.0, 1.0]), DataValidationError, "must be > 0"),
        (dict(c_min=1.5), ValueError, "'c_min'"),
        (dict(sigma=-1.0), ValueError, "'sigma'"),
        (
            dict(sigma=1.0, kernel="poisson"),
            DataValidationError,
            "'sigma' only applies to kernel='gaussian'",
        ),
        (
            dict(words_per_doc=10),
            DataValidationError,
            "'words_per_doc' only applies to kernel='multinomial'",
        ),
        (dict(words_per_doc=0, kernel="multinomial"), ValueError, "'words_per_doc'"),
        (
            dict(words_per_doc=[5, 5], kernel="multinomial"),
            DataValidationError,
            "one positive int per document",
        ),
        (dict(eta=0.0, kernel="multinomial"), ValueError, "'eta'"),
        (dict(n_samples=0), ValueError, "'n_samples'"),
        (dict(n_features=0), ValueError, "'n_features'"),
    ],
)
def test_simplex_nest_errors(kwargs, exc, match):
    args = dict(n_samples=10, n_features=5, n_components=3) | kwargs
    with pytest.raises(exc, match=match):
        make_simplex_nest(**args)
