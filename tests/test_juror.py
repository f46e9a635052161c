import numpy as np
import pytest

from bayespmf import DataValidationError
from bayespmf.fit.juror import RHO_GRID_PER_PROJECTION, juror
from bayespmf.kernels.juror import JurorProblem, projection_folds
from bayespmf.marginals import (
    PairwiseMarginals,
    ProjectionMarginals,
    pairwise_marginals,
    random_projections,
)
from bayespmf.metrics import factor_mse


def _separable(n_vars, n_cat, rank, rng):
    out = []
    for _ in range(n_vars):
        a = rng.uniform(size=(n_cat, rank))
        a[:rank] = np.diag(rng.uniform(0.5, 1.5, size=rank))
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
