import numpy as np
import pytest

from bayespmf import DataValidationError
from bayespmf.fit.juror import RHO_GRID_PER_PROJECTION, juror
from bayespmf.kernels.juror import (
    DIRECT_SOLVE_MAX_CELLS,
    JurorProblem,
    g3_init,
    g3_scales,
    g3_step,
    projection_folds,
    row_folds,
)
from bayespmf.marginals import (
    PairwiseMarginals,
    ProjectionMarginals,
    pairwise_marginals,
    projection_marginals,
    random_projections,
)
from bayespmf.metrics import factor_mse, joint_pmf_relative_error
from bayespmf.pmf import stack_factors


def _separable(n_vars, n_cat, n_components, rng):
    out = []
    for _ in range(n_vars):
        a = rng.uniform(size=(n_cat, n_components))
        a[:n_components] = np.diag(rng.uniform(0.5, 1.5, size=n_components))
        out.append(a / a.sum(axis=0))
    return out


@pytest.fixture(scope="module")
def exact():
    rng = np.random.default_rng(3)
    w = np.array([0.2, 0.3, 0.5])
    a = _separable(5, 5, 3, rng)  # odd alphabet: the Radon transform is injective
    pop = PairwiseMarginals.from_params(w, a)
    proj = random_projections([5] * 5, 30, random_state=1)
    return w, a, pop, ProjectionMarginals.from_pairwise(pop, proj)


def test_radon_adjoint_dot_product(rng):
    proj = random_projections([4, 6], 7, random_state=0)
    r = proj.radon_operator(0, 1)
    x = rng.standard_normal(r.shape[1])
    y = rng.standard_normal(r.shape[0])
    assert np.isclose((r @ x) @ y, x @ (r.T @ y), rtol=1e-12)


def test_g1_inverts_exact_projections(exact):
    _, _, pop, stats = exact
    prob = JurorProblem(stats)
    assert np.abs(prob.solve(0.0) - prob.gather(pop.joint)).max() < 1e-10


def test_gradient_matches_finite_differences(exact, rng):
    w, a, _, stats = exact
    prob = JurorProblem(stats)
    stacked = np.concatenate(a) + 0.05 * rng.random((25, 3))
    lam = w + 0.02
    _, ga, gl = prob.value_and_grad(lam, stacked)
    eps = 1e-6
    for i, f in [(0, 0), (7, 2), (24, 1)]:
        d = np.zeros_like(stacked)
        d[i, f] = eps
        fd = (prob.value(lam, stacked + d) - prob.value(lam, stacked - d)) / (2 * eps)
        assert np.isclose(fd, ga[i, f], rtol=1e-6)
    d = np.array([0.0, eps, 0.0])
    fd = (prob.value(lam + d, stacked) - prob.value(lam - d, stacked)) / (2 * eps)
    assert np.isclose(fd, gl[1], rtol=1e-6)


@pytest.mark.parametrize("variant", ["a", "b", "c"])
def test_exact_statistics_recover_truth(exact, variant):
    w, a, _, stats = exact
    params, info = juror(stats, 3, variant=variant, random_state=0, g2_max_iter=3)
    assert factor_mse(params.weights, params.factors, w, a) < 1e-12
    assert info["variant"] == variant
    assert info["converged"]


def test_g3_recovers_from_rank_deficient_g1(rng):
    # even alphabets: G1 misses one direction per pair, G3 restores it
    w = np.array([0.2, 0.3, 0.5])
    a = _separable(5, 4, 3, np.random.default_rng(7))
    pop = PairwiseMarginals.from_params(w, a)
    stats = ProjectionMarginals.from_pairwise(
        pop, random_projections([4] * 5, 30, random_state=0)
    )
    params, info = juror(stats, 3, variant="b", random_state=0)
    assert factor_mse(params.weights, params.factors, w, a) < 1e-6
    assert np.all(np.diff(info["g3_objective"]) <= 1e-15)


def test_raw_data_with_missing_entries_is_deterministic():
    rng = np.random.default_rng(0)
    w = np.array([0.5, 0.5])
    a = _separable(4, 3, 2, rng)
    z = rng.choice(2, size=3000, p=w)
    codes = np.column_stack(
        [(rng.random(3000)[:, None] > np.cumsum(f[:, z].T, axis=1)).sum(1) for f in a]
    )
    codes[rng.random(codes.shape) > 0.7] = -1
    before = codes.copy()
    p1, i1 = juror(codes, 2, n_projections=20, random_state=5)
    p2, _ = juror(codes, 2, n_projections=20, random_state=5)
    assert np.array_equal(codes, before)
    assert np.array_equal(p1.weights, p2.weights)
    assert i1["projections"].n_projections == 20
    assert factor_mse(p1.weights, p1.factors, w, a) < 0.01


def test_unobserved_pair_is_left_out():
    codes = np.array([[0, 1, 2, -1], [1, 0, -1, 2], [2, 2, 1, -1], [0, 1, -1, 0]])
    stats = ProjectionMarginals.from_pairwise(
        pairwise_marginals(codes, [3] * 4), random_projections([3] * 4, 5, random_state=0)
    )
    prob = JurorProblem(stats)
    assert (2, 3) not in prob.pairs and len(prob.pairs) == 5


def test_errors(exact):
    _, _, pop, stats = exact
    with pytest.raises(ValueError, match="'variant'"):
        juror(stats, 3, variant="d")
    with pytest.raises(DataValidationError, match="apply only when raw data"):
        juror(stats, 3, n_projections=5)
    with pytest.raises(DataValidationError, match="not PairwiseMarginals"):
        juror(pop, 3)
    with pytest.raises(DataValidationError, match="identifiable"):
        juror(stats, 20)
    with pytest.raises(ValueError, match="'rho'"):
        juror(stats, 3, rho=0.0)
    with pytest.raises(ValueError, match="'max_iter'"):
        juror(stats, 3, max_iter=0)
    with pytest.raises(DataValidationError, match="at least 2 variables"):
        juror([[0], [1]], 1)
    empty = ProjectionMarginals.from_pairwise(
        pairwise_marginals([[0, -1], [-1, 1]], [2, 2]),
        random_projections([2, 2], 3, random_state=0),
    )
    with pytest.raises(DataValidationError, match="co-observed"):
        JurorProblem(empty)


def test_projection_folds_partition_the_projections(exact):
    w, a, _, stats = exact
    folds = projection_folds(stats, 3, random_state=0)
    proj = stats.projections
    seen = []
    for train, held in folds:
        assert train.projections.n_projections + held.projections.n_projections == 30
        # every held-out direction is one of the originals, with its own PMFs
        for sub in (train, held):
            for m in range(sub.projections.n_projections):
                match = np.flatnonzero(
                    np.all(
                        proj.directions == sub.projections.directions[:, [m]], axis=(0, 2)
                    )
                )
                assert match.size == 1
                np.testing.assert_array_equal(sub.pmfs[:, m], stats.pmfs[:, match[0]])
        seen.extend(map(tuple, held.projections.directions[0]))
        np.testing.assert_array_equal(train.counts, stats.counts)
        # exact statistics: the truth fits the held-out directions exactly
        assert JurorProblem(held).value(w, np.concatenate(a)) < 1e-14
    assert sorted(seen) == sorted(map(tuple, proj.directions[0]))
    with pytest.raises(DataValidationError, match="at least 62 projections"):
        projection_folds(stats, 31)


def _sampled_stats(n_rows, seed):
    rng = np.random.default_rng(seed)
    w = np.array([0.2, 0.3, 0.5])
    a = [rng.dirichlet(np.full(5, 0.5), size=3).T for _ in range(5)]
    z = rng.choice(3, size=n_rows, p=w)
    codes = np.column_stack(
        [(rng.random(n_rows)[:, None] > np.cumsum(f[:, z].T, axis=1)).sum(1) for f in a]
    )
    proj = random_projections([5] * 5, 20, random_state=seed)
    return w, a, ProjectionMarginals.from_pairwise(pairwise_marginals(codes, [5] * 5), proj)


def test_rho_cv_picks_smallest_held_out_misfit_and_refits_with_it():
    _, _, stats = _sampled_stats(2000, 1)
    params, info = juror(stats, 3, variant="c", random_state=0)
    grid = np.asarray(RHO_GRID_PER_PROJECTION) * 20
    np.testing.assert_allclose(sorted(info["rho_cv"]), grid)
    best = min(info["rho_cv"], key=info["rho_cv"].get)
    assert info["rho"] == best
    # the final fit is the fit with that rho given (CV does not touch its inputs)
    again, info2 = juror(stats, 3, variant="c", rho=best, random_state=0)
    np.testing.assert_array_equal(params.weights, again.weights)
    assert info2["rho_cv"] == {} and info2["rho"] == best
    # rho=None is the former fixed default, 0.1 * M
    assert juror(stats, 3, variant="c", rho=None, random_state=0)[1]["rho"] == 2.0
    # variant b has no G2: no rho, no cross-validation
    _, info_b = juror(stats, 3, variant="b", random_state=0)
    assert info_b["rho"] is None and info_b["rho_cv"] == {}
    # statistics only: the folds are of the projections
    assert info["rho_cv_folds"] == "projections" and info2["rho_cv_folds"] is None


def test_rho_cv_errors(exact):
    _, _, pop, _ = exact
    few = ProjectionMarginals.from_pairwise(
        pop, random_projections([5] * 5, 3, random_state=0)
    )
    with pytest.raises(DataValidationError, match="pass a numeric 'rho'"):
        juror(few, 3, variant="c")
    juror(few, 3, variant="b")  # no G2, no CV needed
    with pytest.raises(DataValidationError, match="'rho' parameter of juror must be 'cv'"):
        juror(few, 3, rho="loo")


# ------------------------------------------------ the metrics of benchmarks/paper_juror.py
def test_table_metrics_on_a_hand_computed_example():
    # Vora et al.'s MSE (Tables 1, 3-6) as Ibrahim & Fu's code computes it, which the
    # published numbers follow: ||l_hat - l||^2 + sum_n ||A_n_hat - A_n||_F^2 / (F N)
    # after one Hungarian matching of the stacked factors.
    w = np.array([0.3, 0.7])
    a = [np.array([[0.9, 0.2], [0.1, 0.8]]), np.array([[0.6, 0.3], [0.4, 0.7]])]
    # the estimate lists the classes the other way round
    w_hat = np.array([0.6, 0.4])
    a_hat = [np.array([[0.3, 0.9], [0.7, 0.1]]), np.array([[0.7, 0.5], [0.3, 0.5]])]
    # matched: est column 1 <-> class 0 (stacked cost 0.02), est 0 <-> class 1 (0.34);
    # lambda: (0.4 - 0.3)^2 + (0.6 - 0.7)^2 = 0.02; A_1: 0 + 0.02; A_2: 0.02 + 0.32
    assert factor_mse(w_hat, a_hat, w, a) == pytest.approx(0.02 + (0.02 + 0.34) / 4)
    # the formula as printed (no 1/F) would give 0.02 + 0.36 / 2 = 0.2 here
    # Table 2's MAE = ||Z_hat - Z||_F^2 / ||Z||_F^2 of the joint tensor: Z = 0.25
    # everywhere, Z_hat = [[0.35, 0.35], [0.15, 0.15]]: 4 * 0.01 / (4 * 0.0625)
    half = np.array([[0.5], [0.5]])
    z_true = ([1.0], [half, half])
    z_hat = ([1.0], [np.array([[0.7], [0.3]]), half])
    assert joint_pmf_relative_error(z_hat, z_true) ** 2 == pytest.approx(0.16)
    # the readings that Table 2 rules out differ on the same example: unsquared
    # sqrt(0.16) = 0.4; relative to the estimate's norm (Ibrahim & Fu's code),
    # ||Z_hat||_F^2 = 2 * 0.35^2 + 2 * 0.15^2 = 0.29, so sqrt(0.04 / 0.29)
    assert joint_pmf_relative_error(z_hat, z_true) == pytest.approx(0.4)
    assert joint_pmf_relative_error(z_hat, z_true, relative_to="estimate") == pytest.approx(
        np.sqrt(0.04 / 0.29)
    )
    # Table 2's scale: all mass on one cell (a fit concentrated on the rows seen)
    # against the uniform truth: (0.75^2 + 3 * 0.25^2) / (4 * 0.25^2) = 3, while the
    # flat estimate scores 0 here; the MAE is not bounded by 1
    one_cell = ([1.0], [np.array([[1.0], [0.0]])] * 2)
    assert joint_pmf_relative_error(one_cell, z_true) ** 2 == pytest.approx(3.0)


# ------------------------------------------------------------------ G3's scaled steps
def test_g3_scales_are_the_gauss_newton_diagonal_with_q_diagonal(exact, rng):
    # with Q_p replaced by its diagonal M I, J is M sum_p w_p ||Z_p(lambda, A) - c||^2;
    # that is quadratic in any one entry of (lambda, A) (no pair couples a variable
    # with itself), so a central second difference gives its curvature exactly
    _, a, _, stats = exact
    prob = JurorProblem(stats)
    assert np.allclose(prob.apply_q(np.eye(prob.starts[-1])[0])[0], 30)  # M on the diag
    stacked = np.concatenate(a) * rng.uniform(0.5, 1.5, size=(25, 3))
    lam = np.array([0.05, 0.25, 0.7])
    d_a, d_l = g3_scales(prob, lam, stacked)
    target = rng.random(prob.starts[-1])

    def iso(lam, stacked):
        z = prob.gather((stacked * lam) @ stacked.T)
        return 30 * float(prob.entry_weight @ (z - target) ** 2)

    eps = 1e-2  # exact for a quadratic; large enough to keep rounding small
    f0 = iso(lam, stacked)
    for i, f in [(0, 0), (7, 2), (24, 1), (12, 0)]:
        e = np.zeros_like(stacked)
        e[i, f] = eps
        second = (iso(lam, stacked + e) - 2 * f0 + iso(lam, stacked - e)) / eps**2
        assert second == pytest.approx(d_a[i, f], rel=1e-6)
    second_l = []
    for f in range(3):
        e = np.zeros(3)
        e[f] = eps
        second_l.append((iso(lam + e, stacked) - 2 * f0 + iso(lam - e, stacked)) / eps**2)
    assert d_l == pytest.approx(np.mean(second_l), rel=1e-6)


def test_g3_converges_when_the_class_weights_differ_widely():
    # one class 45x heavier than another: the curvature of the small class's columns
    # is ~2000x smaller than the large one's, so one common step crawls
    rng = np.random.default_rng(11)
    w = np.array([0.02, 0.08, 0.9])
    a = _separable(5, 5, 3, rng)
    pop = PairwiseMarginals.from_params(w, a)
    stats = ProjectionMarginals.from_pairwise(
        pop, random_projections([5] * 5, 30, random_state=2)
    )
    prob = JurorProblem(stats)
    start = [0.2, 0.3, 0.5], stack_factors(_separable(5, 5, 3, np.random.default_rng(4)))
    state = g3_init(prob, np.asarray(start[0]), start[1])
    for _ in range(3000):
        state, info = g3_step(state, prob, 0.0)
        if info.stalled or info.misfit <= prob.floor:
            break
    assert state.misfit <= 1e-9 * prob.value(*start)
    # every accepted step lowers J (momentum restarts instead of rising)
    assert factor_mse(state.weights, np.split(state.factors_stacked, 5), w, a) < 1e-6


# --------------------------------------------------------------------- large alphabets
def test_large_pairs_use_the_radon_matrix_and_lsqr(rng):
    # 35 x 35 cells > DIRECT_SOLVE_MAX_CELLS and M = 20 < 1225: R^T (R z) and LSQR
    n_cat = [35, 35]
    assert 35 * 35 > DIRECT_SOLVE_MAX_CELLS
    proj = random_projections(n_cat, 20, random_state=3)
    codes = rng.integers(0, 35, size=(400, 2))
    stats = projection_marginals(codes, proj)
    prob = JurorProblem(stats)
    r = proj.radon_operator(0, 1).toarray()
    y = stats.pmf(0, 1).ravel()
    # J and its gradient against the dense Radon matrix
    lam = np.array([0.4, 0.6])
    stacked = rng.dirichlet(np.ones(35), size=(2, 2)).transpose(0, 2, 1).reshape(70, 2)
    value, ga, _ = prob.value_and_grad(lam, stacked)
    z = ((stacked[:35] * lam) @ stacked[35:].T).ravel()
    assert value == pytest.approx(np.sum((r @ z - y) ** 2), rel=1e-10)
    g_z = 2 * r.T @ (r @ z - y)  # dJ/dZ, then the chain rule to A_0
    assert np.allclose(ga[:35], g_z.reshape(35, 35) @ (stacked[35:] * lam), atol=1e-10)
    # line 8's damped solve against the normal equations (before the simplex
    # projection, which solve() applies: compare after projecting both)
    from bayespmf.kernels.simplex import project_simplex

    m = np.full(35 * 35, 1 / 35**2)
    rho = 3.0
    want = np.linalg.solve(r.T @ r + rho * np.eye(35 * 35), r.T @ y + rho * m)
    assert np.allclose(prob.solve(rho, m), project_simplex(want), atol=1e-7)
    # G1's minimum-norm least-squares solution (R has fewer rows than columns)
    want0 = np.linalg.lstsq(r, y, rcond=None)[0]
    assert np.allclose(prob.solve(0.0), project_simplex(want0), atol=1e-7)


# ------------------------------------------------------------------- rho over the rows
def test_row_folds_partition_the_rows(rng):
    codes = rng.integers(0, 3, size=(101, 4))
    codes[rng.random(codes.shape) < 0.2] = -1
    proj = random_projections([3] * 4, 6, random_state=0)
    full = projection_marginals(codes, proj)
    folds = row_folds(codes, proj, 3, random_state=1)
    held_hist = sum(h.pmfs * h.counts[:, None, None] for _, h in folds)
    # the held-out parts are disjoint and cover every row: their histograms add up
    np.testing.assert_allclose(held_hist, full.pmfs * full.counts[:, None, None])
    for train, held in folds:
        assert train.n_samples + held.n_samples == 101
        np.testing.assert_array_equal(train.counts + held.counts, full.counts)
    with pytest.raises(DataValidationError, match="at least 8 rows"):
        row_folds(codes[:7], proj, 4)


def test_rho_cv_over_rows_with_raw_data():
    rng = np.random.default_rng(0)
    w = np.array([0.5, 0.5])
    a = _separable(4, 3, 2, rng)
    z = rng.choice(2, size=600, p=w)
    codes = np.column_stack(
        [(rng.random(600)[:, None] > np.cumsum(f[:, z].T, axis=1)).sum(1) for f in a]
    )
    params, info = juror(codes, 2, variant="c", n_projections=10, random_state=1)
    assert info["rho_cv_folds"] == "rows"
    assert info["rho"] == min(info["rho_cv"], key=info["rho_cv"].get)
    again, _ = juror(codes, 2, variant="c", n_projections=10, random_state=1)
    np.testing.assert_array_equal(params.weights, again.weights)
    # variant a runs the same G1 and G2 first: its stages are b's start and c's result
    _, info_a = juror(codes, 2, variant="a", n_projections=10, random_state=1)
    np.testing.assert_array_equal(info_a["stages"]["G2"].weights, params.weights)
    for x, y in zip(info_a["stages"]["G2"].factors, params.factors, strict=True):
        np.testing.assert_array_equal(x, y)
    assert info["stages"]["G2"] is not None
    _, info_b = juror(codes, 2, variant="b", n_projections=10, random_state=1)
    np.testing.assert_array_equal(
        info_b["stages"]["G1"].weights, info_a["stages"]["G1"].weights
    )
    assert info_b["stages"]["G2"] is None
