import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from bayespmf import ConvergenceWarning
from bayespmf.fit.squarem import squarem
from bayespmf.kernels.em import build_em_kernel, init_random
from bayespmf.kernels.squarem import legal_step_length, squarem_pmf_step
from bayespmf.pmf import log_likelihood_rows, split_factors, stack_factors

# Hasselblad (1969): deaths per day of women over 80 (London Times, 1910-1912), the
# Poisson-mixture example of Varadhan & Roland (2008), Sec. 7.
DEATHS = np.arange(10)
FREQ = np.array([162, 267, 271, 185, 111, 61, 27, 8, 3, 1], dtype=float)
#: Published MLE (pi, mu1, mu2), Varadhan & Roland (2008), Table 1.
POISSON_MLE = np.array([0.3599, 1.256, 2.663])


def _log_comp(p):
    pi, mu1, mu2 = p
    base = DEATHS * 0.0 - gammaln(DEATHS + 1)
    return np.stack(
        [
            np.log(pi) - mu1 + DEATHS * np.log(mu1) + base,
            np.log1p(-pi) - mu2 + DEATHS * np.log(mu2) + base,
        ]
    )


def poisson_em(p):
    lc = _log_comp(p)
    z = np.exp(lc[0] - logsumexp(lc, axis=0))
    return np.array(
        [
            (FREQ * z).sum() / FREQ.sum(),
            (FREQ * DEATHS * z).sum() / (FREQ * z).sum(),
            (FREQ * DEATHS * (1 - z)).sum() / (FREQ * (1 - z)).sum(),
        ]
    )


def poisson_nll(p):
    return -float((FREQ * logsumexp(_log_comp(p), axis=0)).sum())


def plain_iteration(fmap, x, tol, max_evals=100_000):
    for n in range(1, max_evals + 1):
        x_new = fmap(x)
        if np.linalg.norm(x_new - x) < tol:
            return x_new, n
        x = x_new
    raise AssertionError("plain iteration did not converge")


@pytest.fixture(scope="module")
def contraction():
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.standard_normal((20, 20)))
    m = q @ np.diag(np.linspace(0.0, 0.95, 20)) @ q.T
    c = rng.standard_normal(20)
    return (lambda x: m @ x + c), np.linalg.solve(np.eye(20) - m, c)


@pytest.mark.parametrize("scheme", ["SqS1", "SqS2", "SqS3"])
def test_squarem_contraction(contraction, scheme):
    fmap, x_star = contraction
    x0 = np.zeros(20)
    x, info = squarem(fmap, x0, scheme=scheme, tol=1e-10)
    assert info.converged
    np.testing.assert_allclose(x, x_star, atol=1e-8)
    _, n_plain = plain_iteration(fmap, x0, 1e-10)
    assert info.n_evals < n_plain / 2
    np.testing.assert_array_equal(x0, 0.0)  # not mutated


def test_squarem_poisson_mixture_em():
    p0 = np.array([0.3, 1.0, 2.5])
    x, info = squarem(poisson_em, p0, poisson_nll, tol=1e-8, objective_increase=0.0)
    assert info.converged
    np.testing.assert_allclose(x, POISSON_MLE, atol=2e-3)
    assert np.linalg.norm(poisson_em(x) - x) < 1e-7
    x_plain, n_plain = plain_iteration(poisson_em, p0, 1e-8)
    np.testing.assert_allclose(x, x_plain, atol=1e-5)
    assert info.n_evals < n_plain / 5
    assert np.all(np.diff(info.objective_trace) <= 1e-12)  # monotone with increase 0
    assert info.n_objective_evals >= info.n_iter


def test_squarem_warns_and_validates(contraction):
    fmap, _ = contraction
    with pytest.warns(ConvergenceWarning, match="max_evals=4"):
        _, info = squarem(fmap, np.zeros(20), max_evals=4)
    assert not info.converged and info.n_evals <= 4
    with pytest.raises(ValueError, match="'scheme' parameter of squarem must be one of"):
        squarem(fmap, np.zeros(20), scheme="SqS4")
    with pytest.raises(ValueError, match="'max_evals' parameter of squarem"):
        squarem(fmap, np.zeros(20), max_evals=1)
    with pytest.raises(ValueError, match="'x0' parameter of squarem"):
        squarem(fmap, np.array([np.nan]))


def test_legal_step_length_is_nearest_legal_edge():
    rng = np.random.default_rng(5)
    for _ in range(20):
        t0 = rng.dirichlet(np.ones(8))
        r = rng.standard_normal(8) * 0.1
        r -= r.mean()
        v = rng.standard_normal(8) * 0.05
        v -= v.mean()
        alpha = -30.0

        def theta(a):
            return t0 - 2 * a * r + a**2 * v

        if np.all(theta(alpha) >= 0):
            continue
        edge = legal_step_length(t0, r, v, alpha)
        assert np.isfinite(edge)
        assert theta(edge).min() >= -1e-12
        assert abs(theta(edge)).min() < 1e-9  # an entry just reaches zero
        between = np.linspace(edge, alpha, 52)[1:-1]
        assert all(theta(a).min() < 0 for a in between)
    assert legal_step_length([0.5, 0.5], [0.1, -0.1], [0.0, 0.0], -4.0) == -2.5


def test_squarem_pmf_steps_stay_on_simplex_and_monotone():
    rng = np.random.default_rng(9)
    n_cat = np.array([3, 4, 2, 3])
    truth = init_random(n_cat, 3, random_state=rng)
    states = rng.choice(3, size=400, p=truth.weights)
    codes = np.stack(
        [
            np.array([rng.choice(k, p=a[:, s]) for s in states])
            for k, a in zip(n_cat, truth.factors, strict=True)
        ],
        axis=1,
    )
    codes[rng.random(codes.shape) < 0.5] = -1
    kernel = build_em_kernel(codes, n_cat, 3)
    start = init_random(n_cat, 3, random_state=rng)
    w, a = start.weights, stack_factors(start.factors)
    lls, alphas = [], []
    for _ in range(30):
        w, a, ll, info = squarem_pmf_step(kernel.step, w, a, n_cat)
        lls.append(ll)
        alphas.append(info.alpha)
        assert info.n_evals == 3 + info.n_backtracks + (
            info.alpha == -1.0 and info.n_backtracks > 0
        )
        assert np.all(w >= 0) and w.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(a >= 0)
        for block in split_factors(a, n_cat):
            np.testing.assert_allclose(block.sum(axis=0), 1.0, atol=1e-12)
    lls = np.array(lls)
    assert np.all(np.diff(lls) >= -1e-10 * np.abs(lls[1:]))
    assert min(alphas) < -1.0  # extrapolation actually happened
    ref = log_likelihood_rows(codes, w, split_factors(a, n_cat)).sum()
    assert ref >= lls[-1] - 1e-9 * abs(lls[-1])


def test_project_blocks_equals_projecting_each_block():
    import itertools

    from bayespmf.kernels.simplex import project_blocks, project_simplex

    rng = np.random.default_rng(0)
    offsets = np.array([0, 5, 10, 13, 18, 20, 27])  # sizes 5, 5, 3, 5, 2, 7
    x = rng.normal(size=(27, 30, 4))
    each = np.concatenate(
        [project_simplex(x[lo:hi], axis=0) for lo, hi in itertools.pairwise(offsets)]
    )
    np.testing.assert_array_equal(project_blocks(x, offsets), each)
    assert np.all(project_blocks(x, offsets) >= 0)


@pytest.mark.parametrize("kind", ["extrapolated", "normal", "one_by_one"])
def test_long_blocks_by_michelot_equal_the_sort(kind):
    import itertools

    from bayespmf.kernels.simplex import MICHELOT_MIN_SIZE, project_blocks, project_simplex

    rng = np.random.default_rng(1)
    size = MICHELOT_MIN_SIZE + 37
    offsets = np.array([0, size, size + 3, 2 * size + 3])  # two long blocks, one short
    if kind == "extrapolated":  # a simplex point pushed past its face, as SQUAREM does
        p = rng.dirichlet(np.full(size, 0.05), size=(2, 6)).transpose(2, 0, 1)
        step = rng.normal(scale=1e-3, size=p.shape)
        long = p + 3.0 * (step - step.mean(axis=0))
    elif kind == "normal":
        long = rng.normal(size=(size, 2, 6))
    else:  # geometric entries: Michelot drops them a few at a time
        long = np.broadcast_to((0.5 ** np.arange(size))[:, None, None], (size, 2, 6))
    x = np.concatenate([long[:, 0], rng.normal(size=(3, 6)), long[:, 1]])
    x_before = x.copy()
    got = project_blocks(x, offsets)
    want = np.concatenate(
        [project_simplex(x[lo:hi], axis=0) for lo, hi in itertools.pairwise(offsets)]
    )
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.add.reduceat(got, offsets[:-1]), 1.0, atol=1e-12)
    assert np.all(got >= 0)
    np.testing.assert_array_equal(x, x_before)
