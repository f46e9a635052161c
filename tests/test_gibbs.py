"""The Gibbs step of the latent-class model (issue 25, item 1)."""

import itertools

import numpy as np
import pymc as pm
import pytest

from bayespmf import DataValidationError
from bayespmf.datasets import make_latent_class
from bayespmf.kernels.gibbs_numba import (
    BLOCK_ROWS,
    draw_class_counts,
    draw_conjugate,
    draw_dirichlet,
    reflect_log_gamma,
)
from bayespmf.models import LatentClassGibbs, latent_class_model, sample
from bayespmf.pmf import observed_csr

N_CAT = [3, 2, 3]


def _toy(seed=0, n_rows=40):
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, k, size=n_rows) for k in N_CAT])
    codes[rng.random(codes.shape) < 0.25] = -1
    codes[0] = [0, 1, 2]  # a fully observed row
    log_w = np.log(rng.dirichlet(np.ones(3)))
    log_a = np.vstack([np.log(rng.dirichlet(np.ones(k), size=3)).T for k in N_CAT])
    return codes, log_w, log_a


def _responsibilities(codes, log_w, log_a):
    """Exact class probabilities of every row, by NumPy (missing entries skipped)."""
    offsets = np.concatenate([[0], np.cumsum(N_CAT)])
    out = np.tile(log_w, (len(codes), 1))
    for n in range(codes.shape[1]):
        seen = codes[:, n] >= 0
        out[seen] += log_a[offsets[n] + codes[seen, n]]
    out = np.exp(out - out.max(axis=1, keepdims=True))
    return out / out.sum(axis=1, keepdims=True), offsets


def _expected_counts(codes, weight, log_w, log_a):
    r, offsets = _responsibilities(codes, log_w, log_a)
    r = r * weight[:, None]
    counts = np.zeros_like(log_a)
    for n in range(codes.shape[1]):
        seen = codes[:, n] >= 0
        np.add.at(counts, offsets[n] + codes[seen, n], r[seen])
    return r.sum(axis=0), counts


def _mean_counts(codes, weight, log_w, log_a, n_draws, seed):
    indptr, indices = observed_csr(codes, N_CAT)
    rng = np.random.default_rng(seed)
    draws = [
        draw_class_counts(log_w, log_a, indptr, indices, weight, rng)
        for _ in range(n_draws)
    ]
    totals = np.array([t for t, _ in draws], dtype=float)
    counts = np.array([m for _, m in draws], dtype=float)
    return totals, counts


def test_kernel_counts_exact_for_a_certain_class():
    """Where every row's class is certain the counts are the NumPy tallies."""
    codes, _, _ = _toy()
    truth = np.arange(len(codes)) % 3
    codes[:, 0] = truth  # variable 0 says the class: A_0 is the identity
    log_a = np.full((sum(N_CAT), 3), np.log(0.5))
    log_a[:3] = np.where(np.eye(3) > 0, 0.0, -np.inf)
    weight = np.arange(len(codes)) % 4 + 1
    indptr, indices = observed_csr(codes, N_CAT)
    totals, counts = draw_class_counts(
        np.log(np.full(3, 1 / 3)),
        log_a,
        indptr,
        indices,
        weight,
        np.random.default_rng(1),
    )
    exp_totals, exp_counts = _expected_counts(codes, weight, np.zeros(3), log_a)
    np.testing.assert_array_equal(totals, exp_totals)
    np.testing.assert_array_equal(counts, exp_counts)


@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_mean_counts_match_responsibilities(weighted):
    """(a) Mean counts over many draws equal the exact expected counts (5 MC s.e.)."""
    codes, log_w, log_a = _toy()
    weight = (np.arange(len(codes)) % 5 + 1) if weighted else np.ones(len(codes), int)
    totals, counts = _mean_counts(codes, weight, log_w, log_a, 3000, seed=2)
    exp_totals, exp_counts = _expected_counts(codes, weight, log_w, log_a)
    se_t = totals.std(axis=0) / np.sqrt(len(totals))
    se_m = counts.std(axis=0) / np.sqrt(len(counts))
    assert np.all(np.abs(totals.mean(axis=0) - exp_totals) <= 5 * se_t + 1e-9)
    assert np.all(np.abs(counts.mean(axis=0) - exp_counts) <= 5 * se_m + 1e-9)
    # missing entries are skipped: each variable's counts add up to its observed rows
    offsets = np.concatenate([[0], np.cumsum(N_CAT)])
    for n in range(len(N_CAT)):
        seen = codes[:, n] >= 0
        assert counts[:, offsets[n] : offsets[n + 1]].sum(axis=(1, 2)).tolist() == [
            weight[seen].sum()
        ] * len(counts)


def test_weighted_patterns_sample_as_expanded_rows():
    """(c) A pattern of count c draws as its c rows: same mean and variance of n_f."""
    codes, log_w, log_a = _toy(n_rows=12)
    weight = np.array([7, 1, 3, 9, 2, 5, 1, 4, 6, 2, 8, 3])
    expanded = np.repeat(codes, weight, axis=0)
    t_pat, _ = _mean_counts(codes, weight, log_w, log_a, 4000, seed=3)
    t_exp, _ = _mean_counts(expanded, np.ones(len(expanded), int), log_w, log_a, 4000, 4)
    se = np.sqrt(t_pat.var(axis=0) / len(t_pat) + t_exp.var(axis=0) / len(t_exp))
    assert np.all(np.abs(t_pat.mean(axis=0) - t_exp.mean(axis=0)) <= 5 * se)
    # the variances (multinomial, not c copies of one draw) agree within 15 %
    ratio = t_pat.var(axis=0) / t_exp.var(axis=0)
    assert np.all(np.abs(ratio - 1) < 0.15), ratio


def test_kernel_reproducible_and_thread_independent():
    codes = np.random.default_rng(5).integers(0, 2, size=(3 * BLOCK_ROWS + 7, 3))
    indptr, indices = observed_csr(codes, [2, 2, 2])
    log_w, log_a = np.log([0.3, 0.7]), np.log(np.full((6, 2), 0.5))
    ones = np.ones(len(codes), dtype=np.int64)
    args = (log_w, log_a, indptr, indices, ones)
    one = draw_class_counts(*args, np.random.default_rng(9), threads=1)
    two = draw_class_counts(*args, np.random.default_rng(9), threads=2)
    other = draw_class_counts(*args, np.random.default_rng(10), threads=2)
    np.testing.assert_array_equal(one[1], two[1])
    assert not np.array_equal(one[1], other[1])


def test_draw_dirichlet_mean_and_tiny_concentrations():
    rng = np.random.default_rng(0)
    alpha = np.array([0.5, 2.0, 7.5])
    x = np.exp(draw_dirichlet(np.tile(alpha, (20000, 1)), rng))
    np.testing.assert_allclose(x.mean(axis=0), alpha / alpha.sum(), atol=0.01)
    tiny = draw_dirichlet(np.array([1e-3, 1e-3, 50.0]), rng)
    assert np.all(np.isfinite(tiny)) and np.isclose(np.logaddexp.reduce(tiny), 0.0)


def test_draw_conjugate_segments_are_dirichlets():
    """Every variable's column of every class is Dir(its segment of a_alpha); the
    weights Dir(w_alpha); tiny concentrations stay finite."""
    rng = np.random.default_rng(1)
    offsets = np.array([0, 2, 5])
    a_alpha = np.array([[1.0, 4.0], [3.0, 0.5], [2.0, 1.0], [1.0, 1.0], [7.0, 2.0]])
    w_alpha = np.array([2.0, 6.0])
    draws = [draw_conjugate(w_alpha, a_alpha, offsets, rng) for _ in range(20000)]
    w = np.exp([d[0] for d in draws])
    a = np.exp([d[1] for d in draws])
    np.testing.assert_allclose(w.mean(axis=0), w_alpha / w_alpha.sum(), atol=0.01)
    for lo, hi in itertools.pairwise(offsets):
        seg = a_alpha[lo:hi]
        np.testing.assert_allclose(a[:, lo:hi].sum(axis=1), 1.0)
        np.testing.assert_allclose(a[:, lo:hi].mean(axis=0), seg / seg.sum(0), atol=0.01)
    tiny = np.full((5, 2), 1e-3)
    lw, la = draw_conjugate(np.array([1e-3, 50.0]), tiny, offsets, rng)
    assert np.all(np.isfinite(la)) and np.isclose(np.logaddexp.reduce(lw), 0.0)


@pytest.mark.parametrize("strength", [1.0, 0.9])
@pytest.mark.parametrize("shape", [0.4, 1.0, 3.5, 60.0, 1e5])
def test_reflected_gamma_keeps_the_gamma_law(shape, strength):
    """Gamma(a) draws moved by reflect_log_gamma are Gamma(a) draws (Kolmogorov-
    Smirnov against scipy's CDF); from a = 1 the move is nearly always accepted and
    anti-correlated with the old value (about -strength for a large shape); below it
    a fresh draw. The caller's array is not changed."""
    from scipy import stats

    rng = np.random.default_rng(3)
    alpha = np.full(50_000, shape)
    old = np.log(rng.gamma(alpha))
    kept = old.copy()
    new, accepted = reflect_log_gamma(old, alpha, rng, strength)
    np.testing.assert_array_equal(old, kept)
    assert stats.kstest(np.exp(new), stats.gamma(shape).cdf).pvalue > 1e-3
    corr = np.corrcoef(old, new)[0, 1]
    if shape < 1.0:
        assert not accepted.any() and abs(corr) < 0.03
    else:
        assert accepted.mean() > 0.95 and corr < -0.6
    if shape > 1e3:
        assert corr == pytest.approx(-strength, abs=0.01)


def test_overrelaxed_conjugate_keeps_each_dirichlet():
    """draw_conjugate(..., previous=x) with x ~ the Dirichlets gives draws of the same
    Dirichlets (means and variances of every coordinate, each segment sums to 1),
    anti-correlated with x where the concentrations are large; the caller's arrays
    are left as they were."""
    rng = np.random.default_rng(4)
    offsets = np.array([0, 2, 5])
    a_alpha = np.array([[1.0, 40.0], [3.0, 0.5], [2.0, 100.0], [1.0, 80.0], [7.0, 2.0]])
    w_alpha = np.array([2.0, 600.0])
    n = 20_000
    old = [draw_conjugate(w_alpha, a_alpha, offsets, rng) for _ in range(n)]
    before = [(w.copy(), a.copy()) for w, a in old[:3]]
    new = [
        draw_conjugate(w_alpha, a_alpha, offsets, rng, previous=p, strength=0.9)
        for p in old
    ]
    for (w0, a0), (w1, a1) in zip(before, old[:3], strict=True):
        np.testing.assert_array_equal(w0, w1)
        np.testing.assert_array_equal(a0, a1)
    w_old, w_new = np.exp([d[0] for d in old]), np.exp([d[0] for d in new])
    a_old, a_new = np.exp([d[1] for d in old]), np.exp([d[1] for d in new])
    np.testing.assert_allclose(w_new.mean(0), w_alpha / w_alpha.sum(), atol=0.002)
    for lo, hi in itertools.pairwise(offsets):
        seg = a_alpha[lo:hi]
        total = seg.sum(0)
        mean = seg / total
        var = mean * (1 - mean) / (total + 1)
        np.testing.assert_allclose(a_new[:, lo:hi].sum(axis=1), 1.0)
        assert np.all(np.abs(a_new[:, lo:hi].mean(0) - mean) <= 4 * np.sqrt(var / n))
        np.testing.assert_allclose(a_new[:, lo:hi].var(0), var, rtol=0.06)
    # class 1 of variable 1 (concentrations 100, 80, 2): the move mirrors the old value
    assert np.corrcoef(a_old[:, 2, 1], a_new[:, 2, 1])[0, 1] < -0.8
    assert np.corrcoef(w_old[:, 0], w_new[:, 0])[0, 1] < -0.5


def test_overrelax_switch():
    """overrelax=0 is the plain sampler (fresh draws; a different chain from the
    same seed); a strength outside [0, 1) is refused."""
    codes, _, _ = _toy()
    model = latent_class_model(codes, 2, n_categories=N_CAT)
    point = model.initial_point()
    on = LatentClassGibbs(model=model, rng=5, n_sweeps=2).step(point)[0]
    off = LatentClassGibbs(model=model, rng=5, n_sweeps=2, overrelax=0).step(point)[0]
    assert not np.allclose(on["weights_simplex__"], off["weights_simplex__"])
    for bad in ("yes", 1.0, -0.5, True):
        with pytest.raises(DataValidationError, match="overrelax"):
            LatentClassGibbs(model=model, overrelax=bad)


def test_burn_in_starts_with_fresh_draws():
    """After reset_tuning in a burn-in, the first PLAIN_TUNE_SWEEPS sweeps are the
    plain sampler's (the same draws as overrelax=0), the next overrelaxed; outside a
    burn-in, or after stop_tuning, every sweep is overrelaxed."""
    from bayespmf.models.gibbs import PLAIN_TUNE_SWEEPS

    codes, _, _ = _toy()
    model = latent_class_model(codes, 2, n_categories=N_CAT)
    point = model.initial_point()

    def run(n_sweeps, tune, stop=False, **kw):
        step = LatentClassGibbs(model=model, rng=7, n_sweeps=n_sweeps, **kw)
        step.tune = tune
        step.reset_tuning()
        if stop:
            step.stop_tuning()
        return step.step(point)[0]["weights_simplex__"]

    plain = run(PLAIN_TUNE_SWEEPS, False, overrelax=0)
    np.testing.assert_array_equal(run(PLAIN_TUNE_SWEEPS, True), plain)
    assert not np.allclose(run(PLAIN_TUNE_SWEEPS, False), plain)
    assert not np.allclose(run(PLAIN_TUNE_SWEEPS, True, stop=True), plain)
    more = PLAIN_TUNE_SWEEPS + 1
    assert not np.allclose(run(more, True), run(more, False, overrelax=0))


def test_front_door_passes_overrelax():
    """sample(..., method="gibbs", overrelax=s) reaches the step: 0 and the default
    give other chains from the same seed; a covariate model refuses it."""
    codes, _, _ = _toy()
    model = latent_class_model(codes, 2, n_categories=N_CAT)
    kw = dict(draws=5, tune=0, chains=1, random_seed=3, progressbar=False)
    kw |= dict(init=None, log_likelihood=False, align=False)
    on = sample(model, method="gibbs", **kw).posterior["weights"].values
    off = sample(model, method="gibbs", overrelax=0, **kw).posterior["weights"].values
    again = sample(model, method="gibbs", overrelax=0.9, **kw).posterior["weights"].values
    np.testing.assert_array_equal(on, again)
    assert not np.allclose(on, off)
    z = np.linspace(-1, 1, len(codes))[:, None]
    reg = latent_class_model(codes, 2, n_categories=N_CAT, covariates=z)
    with pytest.raises(DataValidationError, match="overrelax"):
        sample(reg, method="gibbs", overrelax=0.5, **kw)


def test_n_sweeps_is_repeated_single_sweeps():
    """A step of n_sweeps=3 is three steps of n_sweeps=1 for the same generator;
    n_sweeps must be a positive integer."""
    codes, _, _ = _toy()
    model = latent_class_model(codes, 2, n_categories=N_CAT)
    one = LatentClassGibbs(model=model, rng=5, n_sweeps=1)
    three = LatentClassGibbs(model=model, rng=5, n_sweeps=3)
    a = b = model.initial_point()
    for _ in range(3):
        a, _ = one.step(a)
    b, _ = three.step(b)
    for name in one._names:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-12, atol=1e-12)
    c, _ = one.step(model.initial_point())
    assert not np.allclose(c[one._names[0]], b[one._names[0]])
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(DataValidationError, match="n_sweeps"):
            LatentClassGibbs(model=model, n_sweeps=bad)


def _gibbs(model, seed, draws=100, chains=2, tune=20):
    with model:
        return pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=1,
            random_seed=seed,
            step=LatentClassGibbs(),
            progressbar=False,
            compute_convergence_checks=False,
        )


def test_front_door_passes_n_sweeps():
    """``sample(..., method="gibbs", n_sweeps=k)`` reaches the step (a bad value is
    refused by the step, by name), and other steps' options are still refused."""
    data, _ = make_latent_class(40, [2, 3, 2, 2], n_components=2, random_state=0)
    model = latent_class_model(data, 2)
    kw = dict(method="gibbs", draws=5, tune=5, chains=1, progressbar=False, align=False)
    with pytest.raises(DataValidationError, match="n_sweeps"):
        sample(model, init=None, n_sweeps=0, **kw)
    with pytest.raises(DataValidationError, match="target_accept"):
        sample(model, init=None, target_accept=0.9, **kw)
    one = sample(model, init=None, n_sweeps=1, random_seed=3, **kw)
    two = sample(model, init=None, n_sweeps=2, random_seed=3, **kw)
    assert not np.allclose(one.posterior["weights"].values, two.posterior["weights"].values)


def test_same_seed_same_draws():
    """(d) pm.sample(random_seed=...) makes the Gibbs draws reproducible."""
    codes, _, _ = _toy()
    model = latent_class_model(codes, 2, n_categories=N_CAT)
    a, b, c = (_gibbs(model, s, draws=30, tune=0)["posterior"] for s in (3, 3, 4))
    for name in ("weights", "A_x0", "A_x2"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
        assert not np.allclose(a[name].values, c[name].values)
    assert not np.allclose(a["weights"].values[0], a["weights"].values[1])  # chains


def test_priors_are_the_model_priors():
    """(e) factor_prior: rank 1 has the exact posterior Dir(prior + category counts);
    weights_prior: one step from a fixed point has E[lambda] = (a + E[n]) / (F a + S).
    """
    codes, log_w, log_a = _toy(n_rows=20)
    model = latent_class_model(codes, 1, n_categories=N_CAT, factor_prior=6.0)
    step = LatentClassGibbs(model=model, rng=0)
    point = model.initial_point()
    draws = []
    for _ in range(1500):
        point, _ = step.step(point)
        draws.append(np.exp(step._to_log(*(point[n] for n in step._names))[1])[0])
    seen = codes[:, 0][codes[:, 0] >= 0]
    exact = (6.0 + np.bincount(seen, minlength=3)) / (18.0 + len(seen))
    se = np.std(draws, axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(np.mean(draws, axis=0) - exact) <= 5 * se)

    alpha = 40.0
    model = latent_class_model(codes, 3, n_categories=N_CAT, weights_prior=alpha)
    # plain draws: one overrelaxed step from a fixed point is not a conditional draw
    step = LatentClassGibbs(model=model, rng=1, n_sweeps=1, overrelax=0)
    start = model.initial_point()
    # the start at (log_w, log_a), where the exact responsibilities are known
    offsets = np.concatenate([[0], np.cumsum(N_CAT)])
    parts = [log_a[offsets[n] : offsets[n + 1]].T for n in range(len(N_CAT))]
    start.update(zip(step._names, step._to_value(log_w, *parts), strict=True))
    w = []
    for _ in range(1500):
        new = step.step(start)[0]
        w.append(np.exp(step._to_log(*(new[n] for n in step._names))[0]))
    w = np.array(w)
    exp_totals, _ = _expected_counts(codes, np.ones(len(codes)), log_w, log_a)
    exact = (alpha + exp_totals) / (3 * alpha + len(codes))
    se = w.std(axis=0) / np.sqrt(len(w))
    assert np.all(np.abs(w.mean(axis=0) - exact) <= 5 * se)
    flat = (1.0 + exp_totals) / (3 + len(codes))  # the default prior's mean differs
    assert np.any(np.abs(exact - flat) > 20 * se)


def test_refuses_models_that_are_not_plain_latent_class():
    """(f) Covariates, potentials, extra variables: a clear error, nothing sampled."""
    data, _ = make_latent_class(40, [2, 3], n_components=2, random_state=0)
    z = np.random.default_rng(0).normal(size=(data.n_samples, 1))
    regression = latent_class_model(data, n_components=2, covariates=z)
    with pytest.raises(DataValidationError, match="plain latent-class"):
        LatentClassGibbs(model=regression)
    potential = latent_class_model(data, n_components=2)
    with potential:
        pm.Potential("penalty", -potential["weights"][0])
    with pytest.raises(DataValidationError, match="potentials"):
        LatentClassGibbs(model=potential)
    extra = latent_class_model(data, n_components=2)
    with extra:
        pm.Normal("mu")
    with pytest.raises(DataValidationError, match="other free variables"):
        LatentClassGibbs(model=extra)
    with pytest.raises(DataValidationError, match="method='gibbs'"):
        sample(latent_class_model(data, n_components=2), method="gibbs", target_accept=0.9)


@pytest.fixture(scope="module")
def small_posteriors():
    data, _ = make_latent_class(
        150, [3, 3, 2, 3], n_components=2, observed_prob=0.85, random_state=3
    )
    model = latent_class_model(data, n_components=2)
    opts = dict(chains=2, random_seed=11, progressbar=False, log_likelihood=False)
    gibbs = sample(model, method="gibbs", draws=1500, tune=200, cores=1, **opts)
    nuts = sample(model, method="nuts", draws=600, tune=400, cores=1, **opts)
    return gibbs, nuts


def test_front_door_groups(small_posteriors):
    gibbs, _ = small_posteriors
    assert gibbs.posterior.attrs["sampling_method"] == "gibbs"
    assert {"posterior", "observed_data", "constant_data"} <= set(gibbs.children)
    assert gibbs.posterior["weights"].shape == (2, 1500, 2)


def test_agrees_with_nuts(small_posteriors, mc_summary):
    """(b) Means within 4 combined MC standard errors (sd / sqrt(ESS) of each sampler,
    plus 0.005 for the label alignment); sds within 4 s.e. of an sd (~ sd/sqrt(2 ESS))
    plus 10 %."""
    gibbs, nuts = small_posteriors
    for name in ("weights", "A_x0", "A_x1", "A_x2", "A_x3"):
        mg, sg, eg = mc_summary(gibbs, name)
        mn, sn, en = mc_summary(nuts, name)
        se = np.sqrt(sg**2 / eg + sn**2 / en)
        assert np.all(np.abs(mg - mn) <= 4 * se + 0.005), (name, mg, mn, se)
        se_sd = np.sqrt(sg**2 / (2 * eg) + sn**2 / (2 * en))
        assert np.all(np.abs(sg - sn) <= 4 * se_sd + 0.1 * sn), (name, sg, sn)


def _benchmark(name):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_simulation_based_calibration():
    """(c) SBC, reduced (benchmarks/bayes_gibbs_sbc.py, 24 replications): the ranks
    of the marginal cell probabilities and the largest weight are not far from
    uniform (each quantity Bonferroni p > 0.001, pooled p > 0.001), while the same
    check of a step given the wrong factor prior (10 instead of 1) fails pooled."""
    sbc = _benchmark("bayes_gibbs_sbc")
    args = sbc.parse_args(["--reps", "24"])
    names, candidates = sbc.sbc(args)
    assert candidates.shape == (24, len(names)) and candidates.min() >= 0
    assert candidates.max() <= args.draws
    p = [
        sbc.uniformity(candidates[:, q], args.draws, args.bins)[2]
        for q in range(len(names))
    ]
    assert min(p) * len(p) > 0.001, p
    assert sbc.pooled(candidates, args.draws, args.bins)[2] > 0.001

    wrong = sbc.parse_args(["--reps", "24", "--factor-prior-fit", "10", "--seed", "1000"])
    _, bad_ranks = sbc.sbc(wrong)
    assert sbc.pooled(bad_ranks, wrong.draws, wrong.bins)[2] < 0.001


def test_default_sweeps_follow_the_observed_entries():
    """Without ``n_sweeps`` the step makes ``default_sweeps`` of its patterns' observed
    entries: 8 on small data, 1 where one sweep covers SWEEP_ENTRIES entries."""
    from bayespmf.models.gibbs import DEFAULT_SWEEPS, SWEEP_ENTRIES, default_sweeps

    assert default_sweeps(1) == DEFAULT_SWEEPS
    assert default_sweeps(SWEEP_ENTRIES) == default_sweeps(10 * SWEEP_ENTRIES) == 1
    assert default_sweeps(SWEEP_ENTRIES // 4) == 4  # ceil(SWEEP_ENTRIES / entries)
    assert default_sweeps(SWEEP_ENTRIES // 3 + 1) == 3
    codes, _, _ = _toy()
    step = LatentClassGibbs(model=latent_class_model(codes, 2, n_categories=N_CAT))
    assert step.n_sweeps == DEFAULT_SWEEPS  # 40 rows: far below SWEEP_ENTRIES
    rng = np.random.default_rng(0)
    big = np.column_stack([rng.integers(0, 3, size=SWEEP_ENTRIES) for _ in range(2)])
    step = LatentClassGibbs(model=latent_class_model(big, 2, n_categories=[3, 3]))
    # 9 unique patterns of 2 entries: the patterns' entries count, not the rows'
    assert step._indices.size == 18 and step.n_sweeps == DEFAULT_SWEEPS


def test_simplex_maps_match_the_value_transforms():
    """The NumPy maps of PyMC's simplex transform agree with the transform's graph
    (and the compiled fallback runs for another transform)."""
    from bayespmf.models.gibbs import simplex_maps

    codes, _, _ = _toy()
    model = latent_class_model(codes, 3, n_categories=N_CAT)
    rvs = [model["weights"], *[model[f"A_x{n}"] for n in range(3)]]
    values = [model.rvs_to_values[rv] for rv in rvs]
    to_log, to_value = simplex_maps(model, rvs, values)
    rng = np.random.default_rng(1)
    point = {v.name: rng.normal(size=model.initial_point()[v.name].shape) for v in values}
    logs = to_log(*[point[v.name] for v in values])
    for rv, value, log_x in zip(rvs, values, logs, strict=True):
        transform = model.rvs_to_transforms[rv]
        x = transform.backward(point[value.name]).eval()  # PyMC's own graph
        np.testing.assert_allclose(np.exp(log_x), x, rtol=1e-12, atol=1e-15)
        back = transform.forward(x).eval()
        np.testing.assert_allclose(to_value(log_x)[0], back, rtol=1e-9, atol=1e-12)
    # without value transforms the compiled fallback: log of the simplex and back
    from pymc.model.transform.conditioning import remove_value_transforms

    plain = remove_value_transforms(model)
    plain_rvs = [plain[rv.name] for rv in rvs]
    plain_values = [plain.rvs_to_values[rv] for rv in plain_rvs]
    f_log, f_value = simplex_maps(plain, plain_rvs, plain_values)
    xs = [np.exp(v) for v in logs]
    for got, want in zip(f_log(*xs), logs, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for got, x in zip(f_value(*logs), xs, strict=True):
        np.testing.assert_allclose(got, x, rtol=1e-12)


def test_convergence_summary_names_chains_apart_without_log_likelihood():
    """Without a log_likelihood group (large data: sample(log_likelihood=False)) the
    summary still says which chains disagree, on the entry with the worst r-hat, and
    that chains which only drift are not apart."""
    import arviz as az

    from bayespmf.models import convergence_summary

    rng = np.random.default_rng(0)
    w = rng.normal(0.3, 0.01, size=(4, 200, 3))
    w[2:, :, 1] += 0.2  # chains 2 and 3 sit apart on weights[1]
    idata = az.from_dict({"posterior": {"weights": w}})
    problems = " ".join(convergence_summary(idata)["problems"])
    assert "On weights[1] (worst r-hat)" in problems
    assert "chains [2, 3] around 0.5" in problems and "chains [0, 1] around 0.3" in problems
    # means 0.5 sd apart in turn: r-hat high, but no gap of 3 sds between chains
    near = rng.normal(size=(4, 500, 3)) + 0.5 * np.arange(4)[:, None, None]
    problems = " ".join(
        convergence_summary(az.from_dict({"posterior": {"weights": near}}))["problems"]
    )
    assert "r-hat above" in problems and "drift slowly" in problems


def test_rows_collapse_only_where_many_repeat():
    """Rows nearly all distinct are kept as rows (counts 1, same order); rows with
    many repeats become unique patterns whose counts add up to the rows."""
    from bayespmf.models.gibbs import _few_repeats

    rng = np.random.default_rng(0)
    distinct = rng.integers(0, 10, size=(500, 12))
    assert _few_repeats(distinct)
    repeated = np.vstack([distinct[:100]] * 3)
    assert not _few_repeats(repeated)
    step = LatentClassGibbs(model=latent_class_model(distinct, 2, n_categories=[10] * 12))
    indptr, indices = observed_csr(distinct, [10] * 12)
    assert np.array_equal(step._indptr, indptr)
    assert np.array_equal(step._indices, indices) and np.all(step._row_count == 1)
    step = LatentClassGibbs(model=latent_class_model(repeated, 2, n_categories=[10] * 12))
    assert step._row_count.size == 100 and step._row_count.sum() == 300


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("drop_empty", [False, True])
def test_observed_csr_matches_the_one_hot_design(dtype, drop_empty):
    """observed_csr (two compiled passes, the codes in their own type) lists the
    nonzero columns of the one-hot design row by row, as NumPy finds them; the codes
    are not changed."""
    rng = np.random.default_rng(8)
    n_cat = [3, 5, 2, 4]
    codes = np.column_stack([rng.integers(0, k, size=300) for k in n_cat])
    codes[rng.random(codes.shape) < 0.4] = -1
    codes[:7] = -1  # empty rows
    codes = codes.astype(dtype)
    kept = codes.copy()
    indptr, indices = observed_csr(codes, n_cat, drop_empty=drop_empty)
    np.testing.assert_array_equal(codes, kept)
    offsets = np.concatenate([[0], np.cumsum(n_cat)])
    rows = [r for r in codes.astype(np.int64) if not drop_empty or (r >= 0).any()]
    assert indptr.dtype == indices.dtype == np.int64
    assert indptr.size == len(rows) + 1
    for s, r in enumerate(rows):
        expect = [offsets[n] + r[n] for n in range(len(n_cat)) if r[n] >= 0]
        np.testing.assert_array_equal(indices[indptr[s] : indptr[s + 1]], expect)
