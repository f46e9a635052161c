import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from bayespmf import ConvergenceWarning, DataValidationError
from bayespmf.fit.cnmf import cnmf_opt
from bayespmf.kernels.cnmf_common import max_cnmf_rank, pairwise_misfit
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.marginals import PairwiseMarginals, pairwise_marginals
from bayespmf.pmf import joint_pmf, offsets_of


# --------------------------------------------------------------------------- helpers
def _norm(a):
    return a / a.sum(axis=0)


def _separable_factors(n_vars, n_cat, n_components, rng):
    """Factors whose first ``n_components`` rows are scaled unit vectors (each variable)."""
    factors = []
    for _ in range(n_vars):
        a = rng.uniform(size=(n_cat, n_components))
        a[:n_components] = np.diag(rng.uniform(0.5, 1.5, size=n_components))
        factors.append(_norm(a))
    return factors


def _match(truth_w, truth_a, est):
    """Max abs errors of weights and factors after Hungarian matching of classes."""
    s, s_hat = np.concatenate(truth_a), np.concatenate(est.factors)
    cost = ((s[:, :, None] - s_hat[:, None, :]) ** 2).sum(axis=0)
    r, c = linear_sum_assignment(cost)
    return (
        np.abs(np.asarray(truth_w)[r] - est.weights[c]).max(),
        np.abs(s[:, r] - s_hat[:, c]).max(),
    )


def _mre(weights, factors, est):
    truth = joint_pmf(weights, factors)
    return np.abs(truth - joint_pmf(est.weights, est.factors)).sum() / truth.sum()


def _sample(weights, factors, n_rows, p_obs, rng):
    z = rng.choice(len(weights), size=n_rows, p=weights)
    cols = []
    for a in factors:
        cdf = np.cumsum(a[:, z].T, axis=1)
        cols.append((rng.random(n_rows)[:, None] > cdf).sum(axis=1))
    codes = np.column_stack(cols)
    codes[rng.random(codes.shape) > p_obs] = -1
    return codes


def _drop_pair(marginals, j, k):
    """The same marginals with pair (j, k) never co-observed."""
    off = marginals.offsets
    joint = np.array(marginals.joint)
    counts = np.array(marginals.counts)
    joint[off[j] : off[j + 1], off[k] : off[k + 1]] = 0.0
    joint[off[k] : off[k + 1], off[j] : off[j + 1]] = 0.0
    counts[j, k] = counts[k, j] = 0
    return PairwiseMarginals(
        marginals.n_categories, off, joint, counts, marginals.n_samples
    )


@pytest.fixture(scope="module")
def separable_case():
    rng = np.random.default_rng(7)
    weights = np.array([0.2, 0.3, 0.5])
    factors = _separable_factors(6, 4, 3, rng)
    return weights, factors, PairwiseMarginals.from_params(weights, factors)


@pytest.fixture(scope="module")
def sampled_case():
    rng = np.random.default_rng(11)
    weights = np.array([0.3, 0.3, 0.4])
    factors = [_norm(rng.uniform(size=(5, 3))) for _ in range(5)]
    codes = _sample(weights, factors, 5000, 0.7, rng)
    return weights, factors, pairwise_marginals(codes, n_categories=[5] * 5)


# -------------------------------------------------------------------------- CNMF-SPA
def test_spa_recovers_separable_truth_exactly(separable_case):
    weights, factors, m = separable_case
    est, info = cnmf_spa(m, 3, random_state=0)
    err_w, err_a = _match(weights, factors, est)
    assert err_w < 1e-8
    assert err_a < 1e-8
    assert info["misfit"] < 1e-20
    assert info["dropped"] == () and info["unidentified"] == ()
    assert info["misfit"] == min(v for _, v in info["candidates"] if isinstance(v, float))
    assert np.isclose(est.weights.sum(), 1.0)
    for a in est.factors:
        np.testing.assert_allclose(a.sum(axis=0), 1.0)
        assert np.all(a >= 0)


def test_spa_given_split_recovers_left_out_variables(separable_case):
    # Variables 2 and 3 are in neither part: Theorem 2 (iv) recovers them by NNLS.
    weights, factors, m = separable_case
    est, info = cnmf_spa(m, 3, split=([0, 1], [4, 5]))
    assert info["split"] == ((0, 1), (4, 5))
    assert info["dropped"] == (2, 3)
    err_w, err_a = _match(weights, factors, est)
    assert max(err_w, err_a) < 1e-8


def test_spa_unobserved_cross_pair(separable_case):
    weights, factors, m = separable_case
    m2 = _drop_pair(m, 0, 5)
    est, info = cnmf_spa(m2, 3, random_state=0)
    err_w, err_a = _match(weights, factors, est)
    assert max(err_w, err_a) < 1e-8
    s1, s2 = info["split"]
    assert not ((0 in s1 and 5 in s2) or (5 in s1 and 0 in s2))  # never across


def test_spa_variable_with_no_pairs_gets_one_way_pmf(separable_case):
    weights, factors, m = separable_case
    m2 = m
    for k in range(1, 6):
        m2 = _drop_pair(m2, 0, k)
    est, info = cnmf_spa(m2, 3, random_state=0)
    assert info["unidentified"] == (0,)
    np.testing.assert_allclose(est.factors[0], np.repeat(m.one_way(0)[:, None], 3, 1))
    err_w, err_a = _match(weights, factors[1:], est._replace(factors=est.factors[1:]))
    assert max(err_w, err_a) < 1e-8


@pytest.mark.parametrize("seed", range(4))
def test_spa_reasonable_on_random_factors(seed):
    # Ordinary (non-separable) factors: no exact recovery, but the joint PMF must be
    # far closer than the independence model's.
    rng = np.random.default_rng(seed)
    weights = np.array([0.5, 0.5])
    factors = [_norm(rng.uniform(size=(6, 2))) for _ in range(6)]
    m = PairwiseMarginals.from_params(weights, factors)
    est, _ = cnmf_spa(m, 2, random_state=0)
    independent = joint_pmf([1.0], [m.one_way(n)[:, None] for n in range(6)])
    truth = joint_pmf(weights, factors)
    mre_indep = np.abs(truth - independent).sum() / truth.sum()
    mre = _mre(weights, factors, est)
    assert mre < 0.1
    assert mre < 0.5 * mre_indep


def test_spa_beats_independence_on_empirical_marginals():
    # Marginals counted from 5000 sampled rows (30 % missing). The bound is relative to
    # the rank-1 independence model fitted to the same marginals: an absolute bound
    # (the former "< 0.6") is met by that baseline too. Distinct classes (Dirichlet
    # 0.3 factors) make the comparison meaningful; with uniform factors, as in
    # `sampled_case`, the classes nearly coincide and independence is almost as good.
    rng = np.random.default_rng(0)
    weights = np.array([0.3, 0.3, 0.4])
    factors = [rng.dirichlet(np.full(5, 0.3), size=3).T for _ in range(5)]
    m = pairwise_marginals(_sample(weights, factors, 5000, 0.7, rng), n_categories=[5] * 5)
    est, info = cnmf_spa(m, 3, random_state=0)
    assert np.isfinite(info["misfit"])
    truth = joint_pmf(weights, factors)
    independent = joint_pmf([1.0], [m.one_way(n)[:, None] for n in range(5)])
    mre_indep = np.abs(truth - independent).sum() / truth.sum()
    mre = _mre(weights, factors, est)
    assert mre < 0.5 * mre_indep, (mre, mre_indep)


def test_spa_deterministic_and_inputs_untouched(separable_case):
    _, _, m = separable_case
    joint = m.joint.copy()
    a, ia = cnmf_spa(m, 2, random_state=3)
    b, ib = cnmf_spa(m, 2, random_state=3)
    np.testing.assert_array_equal(a.weights, b.weights)
    for fa, fb in zip(a.factors, b.factors, strict=True):
        np.testing.assert_array_equal(fa, fb)
    assert ia["candidates"] == ib["candidates"]
    np.testing.assert_array_equal(m.joint, joint)


def test_spa_errors(separable_case):
    _, _, m = separable_case
    with pytest.raises(
        ValueError, match=r"'n_components' parameter of cnmf_spa must be an int"
    ):
        cnmf_spa(m, 0)
    with pytest.raises(DataValidationError, match=r"at most 12 latent classes"):
        cnmf_spa(m, 13)
    with pytest.raises(DataValidationError, match="must be a PairwiseMarginals"):
        cnmf_spa(np.eye(4), 2)
    with pytest.raises(DataValidationError, match="'split' argument of cnmf_spa"):
        cnmf_spa(m, 2, split=([0, 1], [1, 2]))
    with pytest.raises(DataValidationError, match="'split' argument of cnmf_spa"):
        cnmf_spa(m, 2, split=[0, 1, 2])
    with pytest.raises(DataValidationError, match="No split of the variables supports"):
        cnmf_spa(m, 5, split=([0], [1, 2, 3]))
    one = PairwiseMarginals.from_params([1.0], [np.full((3, 1), 1 / 3)])
    with pytest.raises(DataValidationError, match="at least 2 variables"):
        cnmf_spa(one, 1)
    lonely = m
    for j, k in itertools.combinations(range(6), 2):
        lonely = _drop_pair(lonely, j, k)
    with pytest.raises(DataValidationError, match="No pair of variables is co-observed"):
        cnmf_spa(lonely, 2)
    with pytest.raises(DataValidationError, match="'selection' parameter of cnmf_spa"):
        cnmf_spa(m, 2, selection="cv")
    with pytest.raises(ValueError, match="'n_bootstrap' parameter of cnmf_spa"):
        cnmf_spa(m, 2, n_bootstrap=0)


@pytest.mark.parametrize("n_vars", [2, 3, 5, 6])
def test_spa_candidates_are_every_split_of_few_variables(n_vars):
    m = PairwiseMarginals.from_params(
        [0.5, 0.5], [np.array([[0.9, 0.1], [0.1, 0.9]])] * n_vars
    )
    _, info = cnmf_spa(m, 1, random_state=0)
    splits = [split for split, _ in info["candidates"]]
    everything = {
        (s1, tuple(v for v in range(n_vars) if v not in s1))
        for size in range(1, n_vars)
        for s1 in itertools.combinations(range(n_vars), size)
    }
    assert len(splits) == len(everything) == 2**n_vars - 2
    assert set(splits) == everything
    # the paper's contiguous split S1 = {1..ceil(N/2)} comes first
    half = (n_vars + 1) // 2
    assert splits[0] == (tuple(range(half)), tuple(range(half, n_vars)))


def test_spa_candidates_of_many_variables_cut_orders():
    n_cat = [3] * 9
    m = PairwiseMarginals.from_params([1.0], [np.full((3, 1), 1 / 3)] * 9)
    _, info = cnmf_spa(m, 1, n_splits=2, random_state=0)
    splits = [split for split, _ in info["candidates"]]
    assert splits[0] == ((0, 1, 2, 3, 4), (5, 6, 7, 8))  # M = ceil(9 / 2)
    assert ((0, 1), (2, 3, 4, 5, 6, 7, 8)) in splits  # a quarter of sum(I) in S1
    assert ((2, 3, 4, 5, 6, 7, 8), (0, 1)) in splits  # and its orientation
    assert ((0, 2, 4, 6, 8), (1, 3, 5, 7)) in splits  # interleaved
    for s1, s2 in splits:
        assert sorted(s1 + s2) == list(range(len(n_cat)))
    assert len(splits) == len(set(splits)) <= 2 * 2 * (2 + 2)


def _table1_marginals(n_rows, seed):
    """The CNMF paper's Table 1 generator: N=5, F=5, I=10, p=0.5, anchors in S2."""
    from bayespmf.datasets import make_latent_class

    data, truth = make_latent_class(
        n_rows,
        10,
        5,
        0.5,
        n_variables=5,
        factor_prior="separable",
        epsilon=0.1,
        split=3,
        random_state=seed,
    )
    return pairwise_marginals(data), truth


def test_spa_bootstrap_selection_picks_smallest_bootstrap_error():
    m, _ = _table1_marginals(5000, 0)
    _, info = cnmf_spa(m, 5, random_state=1)
    assert info["selection"] == "bootstrap"
    boot = dict(info["bootstrap_error"])
    assert len(boot) > 1
    assert info["split"] in boot
    assert boot[info["split"]] == min(boot.values())
    misfits = {split: v for split, v in info["candidates"] if isinstance(v, float)}
    assert info["misfit"] == misfits[info["split"]]
    # every bootstrapped split is within the ratio of the best misfit
    assert max(misfits[s] for s in boot) <= 1.5 * min(misfits.values())
    # "misfit" keeps the rule without a bootstrap
    _, info_m = cnmf_spa(m, 5, selection="misfit", random_state=1)
    assert info_m["selection"] == "misfit" and info_m["bootstrap_error"] == []
    assert info_m["misfit"] == min(misfits.values())


def test_spa_bootstrap_split_beats_paper_split_on_table1():
    # Issue 15: on the paper's Table 1 generator the split chosen from the data must be
    # at least as good as the paper's fixed M = 3 split (mean over seeds).
    from bayespmf.metrics import factor_mse

    ours, fixed = [], []
    for seed in range(3):
        m, truth = _table1_marginals(10_000, seed)
        for out, split in ((ours, None), (fixed, ([0, 1, 2], [3, 4]))):
            est, _ = cnmf_spa(m, 5, split=split, random_state=seed)
            out.append(factor_mse(est.weights, est.factors, truth.weights, truth.factors))
    assert np.mean(ours) <= np.mean(fixed)


def test_bootstrap_replicates_are_multinomial_around_the_model():
    # reference: the mean of many replicates is the model, and the per-cell variance
    # is p (1 - p) / n, the multinomial's
    from bayespmf.kernels._cnmf_bootstrap import replicate

    weights = np.array([0.3, 0.7])
    factors = [_norm(np.random.default_rng(n).uniform(size=(3, 2))) for n in range(3)]
    m = PairwiseMarginals.from_params(weights, factors, n_samples=50)
    observed = ~np.eye(3, dtype=bool)
    rng = np.random.default_rng(0)
    reps = np.stack(
        [replicate(m.joint, m.counts, m.offsets, observed, rng) for _ in range(4000)]
    )
    np.testing.assert_allclose(reps.mean(axis=0), m.joint, atol=4e-3)
    p = m.joint[0:3, 3:6]
    np.testing.assert_allclose(reps[:, 0:3, 3:6].var(axis=0), p * (1 - p) / 50, rtol=0.15)
    np.testing.assert_array_equal(reps[:, 3:6, 0:3], reps[:, 0:3, 3:6].transpose(0, 2, 1))


def test_max_cnmf_rank_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(10):
        n_cat = rng.integers(2, 9, size=rng.integers(2, 7)).tolist()
        total = sum(n_cat)
        best = max(
            min(s, total - s)
            for r in range(1, len(n_cat))
            for sub in itertools.combinations(n_cat, r)
            for s in [sum(sub)]
        )
        assert max_cnmf_rank(n_cat) == best


def test_pairwise_misfit_matches_loop(sampled_case):
    _, _, m = sampled_case
    rng = np.random.default_rng(2)
    w = _norm(rng.uniform(size=(3, 1)))[:, 0]
    fs = [_norm(rng.uniform(size=(5, 3))) for _ in range(5)]
    kl, fro, cnt = [], [], []
    for j, k in m.observed_pairs():
        x = m.pair(j, k)
        model = fs[j] @ np.diag(w) @ fs[k].T
        kl.append(np.sum(x * np.log(x / model)))
        fro.append(np.sum((x - model) ** 2))
        cnt.append(m.counts[j, k])
    assert np.isclose(pairwise_misfit(m, (w, fs)), np.mean(kl))
    assert np.isclose(
        pairwise_misfit(m, (w, fs), divergence="frobenius", pair_weighting="counts"),
        np.average(fro, weights=cnt),
    )
    with pytest.raises(ValueError, match="'divergence' argument must be"):
        pairwise_misfit(m, (w, fs), divergence="l1")
    with pytest.raises(ValueError, match="'pair_weighting' argument must be"):
        pairwise_misfit(m, (w, fs), pair_weighting="rows")


# -------------------------------------------------------------------------- CNMF-OPT
def test_opt_monotone_and_objective_matches_numpy(sampled_case):
    _, _, m = sampled_case
    est, info = cnmf_opt(m, 3, random_state=0, tol=1e-5)
    obj = info["objective"]
    assert info["converged"]
    assert len(obj) == info["n_iter"] + 1
    assert np.all(np.diff(obj) <= 1e-15)
    assert obj[-1] < 0.5 * obj[0]
    assert np.isclose(obj[-1], pairwise_misfit(m, est), rtol=1e-8, atol=1e-14)
    assert np.isclose(est.weights.sum(), 1.0)
    for a in est.factors:
        np.testing.assert_allclose(a.sum(axis=0), 1.0)


def test_opt_recovers_truth_from_nearby_start(separable_case):
    weights, factors, m = separable_case
    rng = np.random.default_rng(5)
    start_a = [_norm(0.9 * a + 0.1 * rng.uniform(size=a.shape)) for a in factors]
    start_w = _norm(weights[:, None] + 0.05 * rng.uniform(size=(3, 1)))[:, 0]
    init = (start_w, start_a)
    saved = [start_w.copy()] + [a.copy() for a in start_a]
    est, info = cnmf_opt(m, 3, init=init, max_iter=2000)
    assert info["converged"]
    err_w, err_a = _match(weights, factors, est)
    assert max(err_w, err_a) < 1e-6
    for before, after in zip(saved, [start_w, *start_a], strict=True):
        np.testing.assert_array_equal(before, after)  # init not mutated


def test_opt_from_spa_improves_fit(sampled_case):
    weights, factors, m = sampled_case
    spa_est, _ = cnmf_spa(m, 3, random_state=0)
    est, info = cnmf_opt(m, 3, init=spa_est, max_iter=3000)
    assert info["converged"]
    assert pairwise_misfit(m, est) < 0.5 * pairwise_misfit(m, spa_est)
    assert info["objective"][-1] <= info["objective"][0]
    assert _mre(weights, factors, est) < _mre(weights, factors, spa_est)
    # init="cnmf-spa" runs the same CNMF-SPA inside.
    _, info2 = cnmf_opt(m, 3, init="cnmf-spa", max_iter=3000, random_state=0)
    np.testing.assert_allclose(info2["objective"], info["objective"], rtol=1e-6)


def test_compiled_gradient_matches_finite_differences(sampled_case):
    from bayespmf.kernels.cnmf_common import expand_pair_weights, pair_weight_matrix
    from bayespmf.kernels.cnmf_opt import _compiled_kl

    _, _, m = sampled_case
    rng = np.random.default_rng(0)
    a = np.concatenate([_norm(rng.uniform(size=(5, 3))) for _ in range(5)])
    lam = _norm(rng.uniform(size=(3, 1)))[:, 0]
    obs = m.counts > 0
    np.fill_diagonal(obs, False)
    wt = expand_pair_weights(pair_weight_matrix(m, obs, "uniform"), m.n_categories) / 2
    x = np.array(m.joint)
    log_x = np.log(x, out=np.zeros_like(x), where=x > 0)
    value, value_grad = _compiled_kl()
    f, g_a, g_lam = value_grad(a, lam, wt, x, log_x)
    assert np.isclose(f, value(a, lam, wt, x, log_x))
    eps = 1e-6
    for i, f_ in [(0, 0), (7, 2), (24, 1)]:
        d = np.zeros_like(a)
        d[i, f_] = eps
        fd = (value(a + d, lam, wt, x, log_x) - value(a - d, lam, wt, x, log_x)) / 2 / eps
        assert np.isclose(g_a[i, f_], fd, rtol=1e-5)
    for f_ in range(3):
        d = np.zeros(3)
        d[f_] = eps
        fd = (value(a, lam + d, wt, x, log_x) - value(a, lam - d, wt, x, log_x)) / 2 / eps
        assert np.isclose(g_lam[f_], fd, rtol=1e-5)


def test_opt_progressbar_runs(separable_case):
    _, _, m = separable_case
    _, info = cnmf_opt(m, 3, init="cnmf-spa", progressbar=True, random_state=0)
    assert info["converged"]


def test_opt_counts_weighting(sampled_case):
    _, _, m = sampled_case
    est, info = cnmf_opt(m, 3, pair_weighting="counts", tol=1e-4, random_state=0)
    assert np.isclose(
        info["objective"][-1], pairwise_misfit(m, est, pair_weighting="counts")
    )


def test_opt_deterministic(sampled_case):
    _, _, m = sampled_case
    a, ia = cnmf_opt(m, 2, random_state=4, max_iter=30, tol=1e-2)
    b, ib = cnmf_opt(m, 2, random_state=4, max_iter=30, tol=1e-2)
    np.testing.assert_array_equal(ia["objective"], ib["objective"])
    np.testing.assert_array_equal(a.weights, b.weights)
    c, _ = cnmf_opt(m, 2, random_state=5, max_iter=30, tol=1e-2)
    assert not np.array_equal(a.weights, c.weights)


def test_opt_warns_without_convergence(sampled_case):
    _, _, m = sampled_case
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=2"):
        _, info = cnmf_opt(m, 3, max_iter=2, tol=0.0, random_state=0)
    assert not info["converged"]
    assert info["n_iter"] == 2


def test_opt_handles_unobserved_pair(separable_case):
    weights, factors, m = separable_case
    m2 = _drop_pair(m, 1, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est, info = cnmf_opt(m2, 3, init="cnmf-spa", random_state=0, max_iter=500)
    assert info["objective"][-1] < 1e-12
    assert max(_match(weights, factors, est)) < 1e-5


def test_opt_errors(separable_case):
    weights, factors, m = separable_case
    with pytest.raises(
        ValueError, match=r"'n_components' parameter of cnmf_opt must be an int"
    ):
        cnmf_opt(m, 0)
    with pytest.raises(DataValidationError, match=r"at most 12 latent classes"):
        cnmf_opt(m, 13)
    with pytest.raises(DataValidationError, match="must be a PairwiseMarginals"):
        cnmf_opt({"joint": m.joint}, 2)
    with pytest.raises(DataValidationError, match="has 3 classes but n_components=2"):
        cnmf_opt(m, 2, init=(weights, factors))
    with pytest.raises(DataValidationError, match=r"'factors\[0\]' must have shape"):
        cnmf_opt(m, 3, init=(weights, [f[:2] for f in factors]))
    with pytest.raises(DataValidationError, match="must be a \\(weights, factors\\) pair"):
        cnmf_opt(m, 3, init=3.0)
    with pytest.raises(ValueError, match="'init' argument of cnmf_opt must be None"):
        cnmf_opt(m, 3, init="kmeans")
    with pytest.raises(ValueError, match="'max_iter' parameter of cnmf_opt"):
        cnmf_opt(m, 3, max_iter=0)
    with pytest.raises(ValueError, match="'tol' parameter of cnmf_opt"):
        cnmf_opt(m, 3, tol=-1.0)
    with pytest.raises(ValueError, match="'pair_weighting' argument must be"):
        cnmf_opt(m, 3, pair_weighting="none")


def test_offsets_consistent(separable_case):
    _, _, m = separable_case
    np.testing.assert_array_equal(m.offsets, offsets_of(m.n_categories))


# ------------------------------------------------ CNMF-OPT's EM and SQUAREM solvers
def test_opt_mm_map_is_the_em_update_of_the_pair_likelihood():
    """The closed-form map equals EM written out cell by cell on the pair data."""
    from bayespmf.kernels.cnmf_opt import cnmf_opt_init, cnmf_opt_mm_map

    rng = np.random.default_rng(3)
    n_cat, n_components = [2, 3, 2, 3], 2
    weights = np.array([0.35, 0.65])
    factors = [_norm(rng.uniform(size=(i, n_components))) for i in n_cat]
    m = PairwiseMarginals.from_params(weights, factors)
    start_w = np.array([0.5, 0.5])
    start_a = [_norm(rng.uniform(size=(i, n_components))) for i in n_cat]
    problem, _ = cnmf_opt_init(m, n_components, init=(start_w, start_a))
    off = offsets_of(n_cat)
    # the start as the solver holds it (mixed with a little of the uniform PMF)
    _, state = cnmf_opt_init(m, n_components, init=(start_w, start_a))
    lam0, a0 = state.weights, state.factors_stacked
    blocks = [a0[off[n] : off[n + 1]] for n in range(len(n_cat))]
    pairs = list(itertools.combinations(range(len(n_cat)), 2))
    count_a = [np.zeros_like(b) for b in blocks]
    count_w = np.zeros(n_components)
    for j, k in pairs:
        x = m.joint[off[j] : off[j + 1], off[k] : off[k + 1]]
        for a in range(n_cat[j]):
            for b in range(n_cat[k]):
                joint = lam0 * blocks[j][a] * blocks[k][b]
                resp = joint / joint.sum()
                mass = x[a, b] / len(pairs) * resp
                count_a[j][a] += mass
                count_a[k][b] += mass
                count_w += mass
    lam1, a1, objective = cnmf_opt_mm_map(lam0, a0, problem)
    np.testing.assert_allclose(lam1, count_w / count_w.sum(), rtol=1e-12)
    for n, c in enumerate(count_a):
        np.testing.assert_allclose(a1[off[n] : off[n + 1]], _norm(c), rtol=1e-12)
    assert np.isclose(-objective, pairwise_misfit(m, (lam0, blocks)), rtol=1e-10)


@pytest.mark.parametrize("solver", ["squarem", "em", "mirror-descent"])
def test_opt_solvers_are_monotone_and_keep_the_constraints(sampled_case, solver):
    _, _, m = sampled_case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tol=0: runs max_iter
        est, info = cnmf_opt(m, 3, solver=solver, random_state=1, max_iter=200, tol=0.0)
    assert np.all(np.diff(info["objective"]) <= 1e-15)
    assert np.isclose(info["objective"][-1], pairwise_misfit(m, est), rtol=1e-8)
    assert np.isclose(est.weights.sum(), 1.0)
    for a in est.factors:
        np.testing.assert_allclose(a.sum(axis=0), 1.0)
        assert np.all(a >= 0)


def test_opt_solvers_reach_the_same_minimum_squarem_fastest(sampled_case):
    """Three solvers of one objective end at one minimum; SQUAREM needs the fewest steps.

    (The parameters themselves may differ by ~1e-3 at the same objective: the pairwise
    marginals barely identify some directions of the factors.)
    """
    _, _, m = sampled_case
    out = {}
    for solver in ("squarem", "em", "mirror-descent"):
        est, info = cnmf_opt(
            m,
            3,
            solver=solver,
            init="cnmf-spa",
            random_state=0,
            max_iter=50_000,
            tol=1e-12,
        )
        assert info["converged"], solver
        out[solver] = (info["objective"][-1], info["n_iter"], est)
    best = min(v[0] for v in out.values())
    for solver, (obj, _, _) in out.items():
        assert obj <= best * (1 + 1e-6) + 1e-12, (solver, obj, best)
    assert out["squarem"][1] < out["em"][1]
    assert out["squarem"][1] < out["mirror-descent"][1]


def test_opt_solver_refused_by_name(sampled_case):
    _, _, m = sampled_case
    with pytest.raises(DataValidationError, match=r"'solver'.*squarem"):
        cnmf_opt(m, 3, solver="newton")


# ------------------------------------------------------- CNMF-SPA's regularized H step
def test_ridge_solver_meets_the_kkt_conditions_and_shrinks():
    """ridge > 0 solves min_{B>=0} ||Y - G B^T||^2 + c ||B||^2, c = ridge ||G||^2 / F."""
    from bayespmf.kernels.cnmf_spa import _nnls_columns, _nnls_rows, _ridge_solver

    rng = np.random.default_rng(3)
    g = rng.uniform(size=(12, 4))
    g[:, 3] = g[:, 2] + 0.01 * rng.normal(size=12)  # nearly collinear columns
    y = g @ rng.uniform(size=(4, 9)) + 0.05 * rng.normal(size=(12, 9))
    assert _ridge_solver(_nnls_rows, 0.0) is _nnls_rows
    norms = []
    for ridge in (0.0, 1e-3, 1e-2, 1e-1):
        b = _ridge_solver(_nnls_rows, ridge)(g, y)
        c = ridge * np.sum(g * g) / g.shape[1]
        grad = 2 * (b @ g.T @ g - y.T @ g + c * b)  # of the objective in B
        assert np.all(b >= 0)
        np.testing.assert_allclose(grad[b > 0], 0.0, atol=1e-8)
        assert np.all(grad[b == 0] >= -1e-8)
        np.testing.assert_allclose(_ridge_solver(_nnls_columns, ridge)(g, y), b, atol=1e-9)
        norms.append(np.linalg.norm(b))
    assert np.all(np.diff(norms) < 0)  # the Tikhonov path shrinks


def test_cnmf_spa_ridge_zero_is_alg2_and_small_ridge_stays_close(sampled_case):
    _, _, m = sampled_case
    base, info = cnmf_spa(m, 3, random_state=0)
    same, info0 = cnmf_spa(m, 3, random_state=0, ridge=0.0)
    np.testing.assert_array_equal(base.weights, same.weights)
    assert info["ridge"] == info0["ridge"] == 0.0
    split = info["split"]
    exact, _ = cnmf_spa(m, 3, split=split)
    tiny, _ = cnmf_spa(m, 3, split=split, ridge=1e-10)
    reg, info_r = cnmf_spa(m, 3, split=split, ridge=0.05)
    assert info_r["ridge"] == 0.05
    for a, b, c in zip(exact.factors, tiny.factors, reg.factors, strict=True):
        np.testing.assert_allclose(b, a, atol=1e-6)
        np.testing.assert_allclose(c.sum(axis=0), 1.0)
    s2 = split[1]
    assert any(not np.allclose(exact.factors[v], reg.factors[v]) for v in s2)
    for v in split[0]:  # S1 factors come from the anchor columns, not from H
        np.testing.assert_array_equal(exact.factors[v], reg.factors[v])
    with pytest.raises(ValueError, match="'ridge'"):
        cnmf_spa(m, 3, ridge=-1.0)


def test_opt_keeps_a_variable_with_no_observed_pair_finite():
    """A variable none of whose pairs is observed (Table 3 at p = 0.005) has no EM
    update: its factor stays where it started instead of 0/0 = NaN."""
    from bayespmf import CategoricalData
    from bayespmf.datasets import make_latent_class

    d, _ = make_latent_class(500, [3, 3, 4, 3, 2], n_components=2, random_state=0)
    codes = np.array(d.codes)
    codes[:, 0] = -1
    m = pairwise_marginals(CategoricalData.from_codes(codes, n_categories=d.n_categories))
    unobserved = []
    for solver in ("squarem", "em"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            params, _ = cnmf_opt(m, 2, solver=solver, init="random", random_state=0)
        assert all(np.isfinite(f).all() for f in params.factors)
        assert np.isfinite(params.weights).all()
        np.testing.assert_allclose(params.factors[0].sum(axis=0), 1.0)
        unobserved.append(sorted(map(tuple, params.factors[0].T.round(12))))
    # both keep the same random start's columns there (up to the class order)
    assert unobserved[0] == unobserved[1]


def test_cnmf_spa_anchor_prior_is_exact_and_follows_singlespa(separable_case, sampled_case):
    """prior="anchors": exact on exact marginals; on sampled ones, SingleSPA.m's rule."""
    from scipy.optimize import nnls

    weights, factors, m = separable_case
    est, info = cnmf_spa(m, 3, random_state=0, prior="anchors")
    assert info["prior"] == "anchors"
    err_w, err_a = _match(weights, factors, est)
    assert err_w < 1e-8 and err_a < 1e-8
    _, _, m = sampled_case
    ls, info = cnmf_spa(m, 3, split=([0, 1], [2, 3, 4]))
    anchors, ls_info = cnmf_spa(m, 3, split=([0, 1], [2, 3, 4]), prior="anchors")
    assert ls_info["anchors"].tolist() == info["anchors"].tolist()
    for a, b in zip(ls.factors, anchors.factors, strict=True):  # only lambda differs
        np.testing.assert_array_equal(a, b)
    # the rule by hand: the unnormalized anchor columns and their NNLS coefficients
    x = m.joint[:10, 10:]  # rows of S1 = {0, 1}, columns of S2 = {2, 3, 4}
    w_hat = x[:, info["anchors"]]
    h_hat = np.array([nnls(w_hat, col)[0] for col in x.T])
    l1 = np.max([w_hat[k : k + 5].sum(axis=0) for k in (0, 5)], axis=0)
    l2 = np.max([h_hat[k : k + 5].sum(axis=0) for k in (0, 5, 10)], axis=0)
    np.testing.assert_allclose(anchors.weights, l1 * l2 / np.sum(l1 * l2), rtol=1e-10)
    assert not np.allclose(anchors.weights, ls.weights)
    with pytest.raises(ValueError, match="prior"):
        cnmf_spa(m, 3, prior="max")


def test_nnls_where_scipys_active_set_cycles():
    """A CNMF-SPA H-step met in a distal-outcome simulation (S = 500 binary items): y is
    exactly 0.46 times G's last column, and SciPy's NNLS stops with "Maximum number of
    iterations reached"; the kernel then solves it by BVLS."""
    from scipy.optimize import nnls

    from bayespmf.kernels.cnmf_spa import _nnls_rows

    G = np.array(
        [
            [0.3533568904593639, 0.5483870967741935, 0.4434782608695652],
            [0.646643109540636, 0.4516129032258065, 0.5565217391304348],
            [0.36042402826855124, 0.511520737327189, 0.4391304347826087],
            [0.6395759717314488, 0.48847926267281105, 0.5608695652173913],
            [0.47703180212014135, 0.6405529953917051, 0.4739130434782609],
            [0.5229681978798586, 0.3594470046082949, 0.5260869565217392],
        ]
    )
    y = np.array([0.204, 0.256, 0.202, 0.258, 0.218, 0.242])
    try:
        nnls(G, y)
        cycles = False
    except RuntimeError:
        cycles = True
    h = _nnls_rows(G, y[:, None])[0]
    np.testing.assert_allclose(h, [0.0, 0.0, 0.46], atol=1e-12)
    assert np.all(h >= 0)
    # KKT: the gradient vanishes on the support and is >= 0 off it
    grad = G.T @ (G @ h - y)
    assert abs(grad[2]) < 1e-12 and np.all(grad[:2] > -1e-12)
    if not cycles:  # a SciPy that no longer cycles here still gets the same answer
        np.testing.assert_allclose(nnls(G, y)[0], h, atol=1e-12)
