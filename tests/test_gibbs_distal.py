"""The Gibbs step of the latent-class model with a distal outcome (issue 38, item 1).

The kernels (labels given x and y, the generalized inverse Gaussian, the outcome's
conditionals) are checked against exact laws; the step against exact posteriors where
the labels are known (one class); ``sample(method="gibbs")`` against NUTS on the same
data for every family, with covariates, and on its refusals.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from bayespmf import DataValidationError
from bayespmf.kernels.gibbs_distal_numba import (
    draw_gig,
    draw_outcome_params,
    draw_row_labels,
)
from bayespmf.kernels.gibbs_numba import BLOCK_ROWS
from bayespmf.models import latent_class_model, sample
from bayespmf.models.gibbs_distal import (
    DEFAULT_COVARIATE_SWEEPS,
    OutcomeGibbs,
    outcome_gibbs_steps,
)
from bayespmf.models.gibbs_regression import DEFAULT_FACTOR_SWEEPS, gibbs_steps
from bayespmf.pmf import observed_csr

N_CAT = [3, 2, 3]
FAMILIES = ("gaussian", "poisson", "bernoulli", "categorical")
OUTCOME_VARS = {
    "gaussian": ("outcome_mean", "outcome_sigma"),
    "poisson": ("outcome_mean",),
    "bernoulli": ("outcome_mean",),
    "categorical": ("outcome_probs",),
}


# ------------------------------------------------------------------------ kernels


def _rows(seed=0, n_rows=40):
    """Random codes (25 % missing, one empty row), row log-priors, log factors."""
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, k, size=n_rows) for k in N_CAT])
    codes[rng.random(codes.shape) < 0.25] = -1
    codes[1] = -1  # nothing observed: drawn from its prior alone
    log_prior = rng.normal(scale=1.5, size=(n_rows, 3))
    log_a = np.vstack([np.log(rng.dirichlet(np.ones(k), size=3)).T for k in N_CAT])
    return codes, log_prior, log_a


def _row_posteriors(codes, log_prior, log_a):
    """Every row's exact class posterior, by NumPy."""
    offsets = np.concatenate([[0], np.cumsum(N_CAT)])
    post = log_prior.copy()
    for n in range(codes.shape[1]):
        seen = codes[:, n] >= 0
        post[seen] += log_a[offsets[n] + codes[seen, n]]
    post = np.exp(post - post.max(axis=1, keepdims=True))
    return post / post.sum(axis=1, keepdims=True), offsets


def test_label_draw_matches_each_rows_posterior():
    """Label frequencies over many draws within 5 binomial s.e. of every row's exact
    posterior (the empty row's from its prior alone); the counts are the labels'."""
    codes, log_prior, log_a = _rows()
    indptr, indices = observed_csr(codes, N_CAT)
    post, offsets = _row_posteriors(codes, log_prior, log_a)
    rng = np.random.default_rng(1)
    n_draws = 3000
    freq = np.zeros_like(post)
    for _ in range(n_draws):
        labels, counts = draw_row_labels(log_prior, log_a, indptr, indices, rng)
        freq[np.arange(len(codes)), labels] += 1
    expected = np.zeros_like(log_a)
    for n in range(codes.shape[1]):  # the counts of the last draw, from its labels
        seen = codes[:, n] >= 0
        np.add.at(expected, (offsets[n] + codes[seen, n], labels[seen]), 1)
    np.testing.assert_array_equal(counts, expected)
    freq /= n_draws
    se = np.sqrt(post * (1 - post) / n_draws) + 1e-3
    assert np.all(np.abs(freq - post) <= 5 * se)
    assert np.abs(freq[1] - post[1]).max() < 0.05  # the empty row: its prior


def test_label_draw_reproducible_thread_independent_and_checked():
    codes, log_prior, log_a = _rows(n_rows=2 * BLOCK_ROWS + 17)
    indptr, indices = observed_csr(codes, N_CAT)
    one = draw_row_labels(
        log_prior, log_a, indptr, indices, np.random.default_rng(3), threads=1
    )
    two = draw_row_labels(
        log_prior, log_a, indptr, indices, np.random.default_rng(3), threads=2
    )
    other = draw_row_labels(log_prior, log_a, indptr, indices, np.random.default_rng(4))
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    assert not np.array_equal(one[0], other[0])
    with pytest.raises(ValueError, match="'log_prior' must have shape"):
        draw_row_labels(log_prior[:-1], log_a, indptr, indices, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("p", "omega"),
    [
        (1.5, 5.0),  # ratio of uniforms with the mode shift
        (-40.0, 30.0),  # the same, inverted (p < 0), as for a class of 81 rows
        (0.3, 0.6),  # ratio of uniforms without the mode shift
        (0.5, 0.01),  # the three-piece hat, p > 0
        (0.0, 0.05),  # the hat, p = 0 (a class of one row)
        (-0.5, 0.002),  # the hat, inverted
        (2.0, 5e-5),  # rejection from a Gamma (p >= 1, omega tiny)
    ],
)
def test_gig_draw_matches_scipy(p, omega):
    """Two-sample KS against SciPy's own GIG sampler, on every branch of the
    algorithm; GIG(p, a, b) is sqrt(b / a) times a standard GIG(p, sqrt(a b))."""
    rng = np.random.default_rng(7)
    a, b = 2.0, omega**2 / 2.0
    x = draw_gig(np.full(20000, p), a, b, rng) / np.sqrt(b / a)
    ref = stats.geninvgauss.rvs(p, omega, size=20000, random_state=rng)
    assert stats.ks_2samp(np.log(x), np.log(ref)).pvalue > 1e-3


def test_gig_draw_finite_at_extreme_omega():
    """Where omega underflows towards 0 (a class of tied outcomes, sigma tiny): p >= 1
    is the Gamma(p, rate omega / 2) limit, p = 0 is symmetric in log x, and every
    draw is finite and positive."""
    rng = np.random.default_rng(2)
    omega = 1e-150
    x = draw_gig(np.full(4000, 5.0), 1.0, omega**2, rng) / omega  # scale sqrt(b/a)
    assert stats.kstest(x * omega / 2, stats.gamma(5.0).cdf).pvalue > 1e-3
    for b in (1e-300, 1e-320):
        x = draw_gig(np.zeros(4000), 1.0, b, rng)
        assert np.all(np.isfinite(x) & (x > 0))
        log_x = np.log(x / np.sqrt(b))  # standard: symmetric about 0
        assert abs(log_x.mean()) < 5 * log_x.std() / np.sqrt(x.size)


def test_gig_draw_gamma_limit_reproducible_and_checked():
    rng = np.random.default_rng(0)
    x = draw_gig(np.full(20000, 0.5), 0.5, 0.0, rng)  # Gamma(1/2, rate 1/4)
    ref = stats.gamma(0.5, scale=4.0)
    assert abs(x.mean() - ref.mean()) < 4 * ref.std() / np.sqrt(x.size)
    a = draw_gig([-1.0, 2.0], 1.0, [2.0, 3.0], np.random.default_rng(5))
    b = draw_gig([-1.0, 2.0], 1.0, [2.0, 3.0], np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    for bad in (dict(p=1.0, a=0.0, b=1.0), dict(p=-1.0, a=1.0, b=0.0)):
        with pytest.raises(ValueError, match="improper"):
            draw_gig(rng=rng, **bad)


def _moments(draws):
    draws = np.asarray(draws)
    return draws.mean(axis=0), draws.var(axis=0), draws.std(axis=0) / np.sqrt(len(draws))


def _grid_moments(log_density, lo, hi, n=200_001):
    """Mean and variance of a 1-d density known up to a constant, by quadrature."""
    grid = np.linspace(lo, hi, n)
    w = np.exp(log_density(grid) - log_density(grid).max())
    w /= w.sum()
    mean = (w * grid).sum()
    return mean, (w * (grid - mean) ** 2).sum()


def test_outcome_conditionals_are_the_exact_laws():
    """With the labels given, many draws of each family's conditional have the mean
    and variance of the exact law: Beta, Gamma, Dirichlet, the Normal of the gaussian
    means given sigma, and sigma given the means by quadrature of
    sigma^-n exp(-SS / (2 sigma^2)) x HalfNormal(tau) (the GIG draw)."""
    rng = np.random.default_rng(11)
    labels = np.array([0] * 7 + [1] * 3 + [2])  # class 2: one row; class 3: none
    n_f = np.bincount(labels, minlength=4)
    n_draws = 20000

    def check(draws, mean, var):
        m, v, se = _moments(draws)
        assert np.all(np.abs(m - mean) <= 5 * se), (m, mean, se)
        assert np.allclose(v, var, rtol=0.06), (v, var)

    y = np.array([1, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1])
    prior = {"alpha": np.full(4, 1.5), "beta": np.full(4, 2.0)}
    s = np.bincount(labels, weights=y, minlength=4)
    draws = [
        draw_outcome_params("bernoulli", y, labels, 4, prior, {}, rng)["outcome_mean"]
        for _ in range(n_draws)
    ]
    check(draws, *stats.beta(1.5 + s, 2.0 + n_f - s).stats())

    y = np.array([0, 3, 1, 2, 5, 2, 1, 7, 4, 6, 0])
    prior = {"alpha": np.full(4, 2.0), "rate": np.full(4, 0.8)}
    s = np.bincount(labels, weights=y, minlength=4)
    draws = [
        draw_outcome_params("poisson", y, labels, 4, prior, {}, rng)["outcome_mean"]
        for _ in range(n_draws)
    ]
    check(draws, *stats.gamma(2.0 + s, scale=1.0 / (0.8 + n_f)).stats())

    y = np.array([0, 2, 1, 2, 2, 0, 1, 1, 1, 0, 2])
    alpha = np.full((4, 3), 0.7)
    counts = alpha + np.array(
        [[np.sum((labels == f) & (y == k)) for k in range(3)] for f in range(4)]
    )
    draws = [
        draw_outcome_params("categorical", y, labels, 4, {"alpha": alpha}, {}, rng)[
            "outcome_probs"
        ]
        for _ in range(n_draws)
    ]
    total = counts.sum(axis=1, keepdims=True)
    mean = counts / total
    check(draws, mean, mean * (1 - mean) / (total + 1))

    y = np.array([0.3, -1.2, 0.8, 2.1, 0.0, 1.4, -0.5, 3.0, 2.2, 2.9, -4.0])
    sigma = np.array([1.3, 0.6, 2.0, 1.0])
    prior = {
        "mean_mu": np.full(4, 0.5),
        "mean_sd": np.full(4, 3.0),
        "sigma_scale": np.full(4, 2.0),
    }
    out = [
        draw_outcome_params("gaussian", y, labels, 4, prior, {"outcome_sigma": sigma}, rng)
        for _ in range(n_draws)
    ]
    s = np.bincount(labels, weights=y, minlength=4)
    prec = 1 / 9 + n_f / sigma**2
    check([o["outcome_mean"] for o in out], (0.5 / 9 + s / sigma**2) / prec, 1 / prec)
    # sigma given a fixed mean: the conditional drawn after the mean, with the mean
    # held fixed by a prior of (numerically) zero spread
    mu = np.array([0.4, 2.5, -4.5, 1.0])
    fixed = dict(prior, mean_mu=mu, mean_sd=np.full(4, 1e-12))
    draws = [
        draw_outcome_params("gaussian", y, labels, 4, fixed, {"outcome_sigma": sigma}, rng)[
            "outcome_sigma"
        ]
        for _ in range(n_draws)
    ]
    exact = []
    for f in range(4):
        ss = np.sum((y[labels == f] - mu[f]) ** 2)
        exact.append(
            _grid_moments(
                lambda t, n=n_f[f], ss=ss: -n * np.log(t) - ss / (2 * t**2) - t**2 / 8,
                1e-4,
                12.0,
            )
        )
    exact = np.array(exact).T
    check(draws, exact[0], exact[1])
    with pytest.raises(ValueError, match="'family' must be one of"):
        draw_outcome_params("normal", y, labels, 4, prior, {}, rng)


# ---------------------------------------------------------------- the step, exact


def _simulate(family, n=150, seed=0, n_items=4):
    """Two well separated classes, binary items, an outcome with a few missing."""
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2, n)
    x = (rng.random((n, n_items)) < np.array([0.15, 0.85])[h][:, None]).astype(int)
    if family == "gaussian":
        y = rng.normal(np.array([-1.0, 1.0])[h], 0.7)
    elif family == "poisson":
        y = rng.poisson(np.array([1.0, 4.0])[h]).astype(float)
    elif family == "bernoulli":
        y = (rng.random(n) < np.array([0.2, 0.75])[h]).astype(float)
    else:
        p = np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])[h]
        y = (rng.random(n)[:, None] > p.cumsum(axis=1)).sum(axis=1).astype(float)
    y[rng.choice(n, size=n // 15, replace=False)] = np.nan
    return x, y


def _step_draws(model, n_draws, seed, **kwargs):
    """Constrained draws of every free variable by repeated OutcomeGibbs steps."""
    step = OutcomeGibbs(model=model, rng=seed, **kwargs)
    names = [v.name for v in model.free_RVs]
    to_constrained = model.compile_fn(
        model.replace_rvs_by_values([model[n] for n in names]),
        inputs=model.value_vars,
        on_unused_input="ignore",
    )
    point = model.initial_point()
    out = []
    for _ in range(n_draws):
        point, _ = step.step(point)
        out.append(to_constrained(point))
    return {n: np.array([o[i] for o in out]) for i, n in enumerate(names)}


@pytest.mark.slow
def test_one_class_gives_the_exact_outcome_posterior():
    """One class: every label is known, so the outcome's posterior is exact: Beta for
    bernoulli, and for gaussian the joint of (mu, sigma) on a grid, whose marginal
    means and variances the Gibbs chain (mean given sigma, then sigma given mean) must
    reproduce within Monte Carlo error."""
    x, y = _simulate("bernoulli", n=40, seed=2)
    model = latent_class_model(x, 1, outcome=y, outcome_family="bernoulli")
    draws = _step_draws(model, 4000, seed=0, n_sweeps=1)["outcome_mean"][:, 0]
    obs = y[~np.isnan(y)]
    exact = stats.beta(1 + obs.sum(), 1 + obs.size - obs.sum())
    m, v, se = _moments(draws)
    assert abs(m - exact.mean()) <= 5 * se and np.isclose(v, exact.var(), rtol=0.08)

    x, y = _simulate("gaussian", n=12, seed=3)
    model = latent_class_model(x, 1, outcome=y)
    draws = _step_draws(model, 6000, seed=1, n_sweeps=1)
    obs = y[~np.isnan(y)]
    m0, s0 = obs.mean(), 10 * obs.std()
    tau = 2.5 * obs.std()
    mu, sig = np.meshgrid(
        np.linspace(m0 - 3, m0 + 3, 801), np.linspace(0.05, 4.0, 800), indexing="ij"
    )
    log_post = (
        stats.norm.logpdf(obs[:, None, None], mu, sig).sum(axis=0)
        + stats.norm.logpdf(mu, m0, s0)
        + stats.halfnorm.logpdf(sig, scale=tau)
    )
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    for name, grid in (("outcome_mean", mu), ("outcome_sigma", sig)):
        mean = (w * grid).sum()
        var = (w * (grid - mean) ** 2).sum()
        d = draws[name][:, 0]
        # the chain is near-independent here (sd of a mean: 1 / sqrt(ESS) ~ 1 / sqrt(n / 2))
        se = d.std() / np.sqrt(d.size / 2)
        assert abs(d.mean() - mean) <= 5 * se, (name, d.mean(), mean, se)
        assert np.isclose(d.var(), var, rtol=0.1), (name, d.var(), var)


def test_n_sweeps_is_repeated_single_sweeps():
    x, y = _simulate("gaussian", n=60, seed=4)
    model = latent_class_model(x, 2, outcome=y)
    one = OutcomeGibbs(model=model, rng=5, n_sweeps=1)
    three = OutcomeGibbs(model=model, rng=5, n_sweeps=3)
    a = b = model.initial_point()
    for _ in range(3):
        a, _ = one.step(a)
    b, _ = three.step(b)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-9, atol=1e-9)
    assert DEFAULT_COVARIATE_SWEEPS == DEFAULT_FACTOR_SWEEPS


@pytest.mark.slow
def test_value_transforms_do_not_change_the_draws():
    """The step draws on the constrained scale and writes the model's value
    coordinates, whatever transform they have (NumPy for PyMC's defaults, compiled
    otherwise, none at all): the same seed, the same constrained draws."""
    from pymc.distributions.transforms import log_exp_m1
    from pymc.model.transform.conditioning import change_value_transforms

    x, y = _simulate("gaussian", n=40, seed=8)
    model = latent_class_model(x, 2, outcome=y)
    other = change_value_transforms(model, {"outcome_sigma": log_exp_m1})
    a = _step_draws(model, 5, seed=3)
    b = _step_draws(other, 5, seed=3)
    for name in ("weights", "A_x0", "outcome_mean", "outcome_sigma"):
        np.testing.assert_allclose(a[name], b[name], rtol=1e-8)
    x, y = _simulate("bernoulli", n=40, seed=8)
    model = latent_class_model(x, 2, outcome=y, outcome_family="bernoulli")
    other = change_value_transforms(model, {"outcome_mean": None})
    a, b = _step_draws(model, 5, seed=4), _step_draws(other, 5, seed=4)
    np.testing.assert_allclose(a["outcome_mean"], b["outcome_mean"], rtol=1e-8)


# ------------------------------------------------------- sample(), against NUTS


@pytest.fixture(scope="module", params=FAMILIES)
def family_posteriors(request):
    family = request.param
    x, y = _simulate(family)
    model = latent_class_model(x, 2, outcome=y, outcome_family=family)
    opts = dict(chains=2, cores=1, random_seed=11, progressbar=False)
    gibbs = sample(model, method="gibbs", draws=600, tune=100, **opts)
    nuts = sample(model, method="nuts", draws=400, tune=300, **opts)
    return family, gibbs, nuts


@pytest.mark.slow
def test_agrees_with_nuts(family_posteriors, mc_summary):
    """Means of the weights and every outcome parameter within 4 combined MC
    standard errors (sd / sqrt(ESS) of each sampler, plus 0.005 for the label
    alignment); the same groups as NUTS."""
    family, gibbs, nuts = family_posteriors
    for name in ("weights", *OUTCOME_VARS[family]):
        mg, sg, eg = mc_summary(gibbs, name)
        mn, sn, en = mc_summary(nuts, name)
        assert eg.min() > 100 and en.min() > 100, (name, eg, en)
        se = np.sqrt(sg**2 / eg + sn**2 / en)
        assert np.all(np.abs(mg - mn) <= 4 * se + 0.005), (name, mg, mn, se)
    assert gibbs.posterior.attrs["sampling_method"] == "gibbs"
    groups = {"posterior", "log_likelihood", "sample_stats", "unaligned_posterior"}
    assert groups <= set(gibbs.children) and groups <= set(nuts.children)
    for group in ("log_likelihood", "observed_data"):
        assert set(gibbs[group].data_vars) == set(nuts[group].data_vars)
    np.testing.assert_array_equal(
        gibbs.log_likelihood["y"].shape[2:], nuts.log_likelihood["y"].shape[2:]
    )


def test_same_seed_same_draws():
    x, y = _simulate("poisson", n=80, seed=5)
    model = latent_class_model(x, 2, outcome=y, outcome_family="poisson")
    kw = dict(method="gibbs", draws=15, tune=5, chains=2, cores=1, progressbar=False)
    a, b, c = (
        sample(model, random_seed=s, log_likelihood=False, **kw).posterior
        for s in (3, 3, 4)
    )
    for name in ("weights", "A_x0", "outcome_mean"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
        assert not np.allclose(a[name].values, c[name].values)
    assert not np.allclose(a["outcome_mean"].values[0], a["outcome_mean"].values[1])


# ------------------------------------------------------------ covariates, alignment


def _permuted_as_recorded(idata, name):
    """The unaligned draws of ``name`` put in the order ``class_permutation`` records."""
    raw = idata["unaligned_posterior"][name].transpose("chain", "draw", "class", ...)
    perm = idata.sample_stats["class_permutation"].values
    return np.take_along_axis(
        raw.values, perm.reshape(perm.shape + (1,) * (raw.ndim - 3)), axis=2
    )


@pytest.mark.slow
def test_covariates_and_outcome_together():
    """Covariates and a gaussian outcome: the compound (Gibbs on the factors and
    the outcome, NUTS on the coefficients) runs through sample(), every chain's
    classes agree with the truth after alignment, and the outcome's parameters were
    permuted with the factors."""
    rng = np.random.default_rng(6)
    n = 200
    z = rng.normal(size=(n, 1))
    h = (rng.random(n) < 1 / (1 + np.exp(-1.5 * z[:, 0]))).astype(int)
    x = (rng.random((n, 4)) < np.array([0.15, 0.85])[h][:, None]).astype(int)
    y = rng.normal(np.array([-1.0, 1.0])[h], 0.6)
    model = latent_class_model(x, 2, outcome=y, covariates=z)
    with model:
        steps = gibbs_steps()
    assert [type(s).__name__ for s in steps] == ["OutcomeGibbs", "NUTS"]
    assert {v.name for v in steps[1].vars} == {"coef"}
    idata = sample(
        model,
        method="gibbs",
        draws=300,
        tune=200,
        chains=2,
        cores=1,
        random_seed=2,
        progressbar=False,
    )
    post = idata.posterior
    a1 = post["A_x0"].transpose("chain", "draw", "class", ...).values[..., 1]
    order = np.argmax(a1, -1) == np.argmax(post["outcome_mean"].values, -1)
    assert order.mean() > 0.99  # the class with more x = 1 has the larger mean
    np.testing.assert_allclose(
        np.sort(post["outcome_mean"].mean(("chain", "draw")).values), [-1.0, 1.0], atol=0.25
    )
    for name in ("outcome_mean", "outcome_sigma", "A_x1"):
        aligned = post[name].transpose("chain", "draw", "class", ...).values
        np.testing.assert_array_equal(aligned, _permuted_as_recorded(idata, name))
    assert {"x", "y"} <= set(idata.log_likelihood.data_vars)
    assert np.isfinite(idata.log_likelihood["y"].values).all()
    # the coefficients are re-referenced to the aligned class 0: z raises the odds of
    # the class with the larger mean, so the slope has the sign of class 1's lead
    mean = post["outcome_mean"].values
    slope = post["coef"].sel(covariate="z0").values
    assert np.sign(slope.mean()) == np.sign(np.mean(mean[..., 1] - mean[..., 0]))


# ------------------------------------------------------------------- refusals


def test_refusals_name_the_fix(monkeypatch):
    x, y = _simulate("bernoulli", n=30, seed=7)
    plain = latent_class_model(x, 2)
    with pytest.raises(DataValidationError, match="observed variables are"):
        OutcomeGibbs(model=plain)
    model = latent_class_model(x, 2, outcome=y, outcome_family="bernoulli")
    with pytest.raises(DataValidationError, match="n_sweeps"):
        sample(model, method="gibbs", n_sweeps=0, draws=5, tune=0, chains=1)
    with pytest.raises(DataValidationError, match="must update every parameter"):
        OutcomeGibbs(vars=[model["outcome_mean"]], model=model)
    extra = latent_class_model(x, 2, outcome=y, outcome_family="bernoulli")
    with extra:
        pm.Normal("mu")
    with pytest.raises(DataValidationError, match=r"other free variables \['mu'\]"):
        OutcomeGibbs(model=extra)
    with model:
        pm.Potential("penalty", -model["outcome_mean"][0])
    with pytest.raises(DataValidationError, match=r"potentials.*method='nuts'"):
        sample(model, method="gibbs", draws=5, tune=0, chains=1, progressbar=False)

    # an outcome prior the step has no conditional for
    import bayespmf.models.distal as distal

    def uniform_prior(family, values, observed, n_components, labels):
        return {"outcome_mean": pm.Uniform("outcome_mean", 0.0, 1.0, dims="class")}

    monkeypatch.setattr(distal, "_outcome_priors", uniform_prior)
    model = latent_class_model(x, 2, outcome=y, outcome_family="bernoulli")
    with pytest.raises(ValueError, match=r"UniformRV prior.*Beta.*method='nuts'"):
        sample(model, method="gibbs", draws=5, tune=0, chains=1, progressbar=False)
    with model, pytest.raises(ValueError, match="UniformRV prior"):
        outcome_gibbs_steps()
