import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode

from bayespmf import ConvergenceWarning, DataValidationError
from bayespmf.fit import EMInfo, fit_em
from bayespmf.kernels.em import (
    COUNT_FLOOR,
    EMState,
    EStepStats,
    NumbaEMKernel,
    build_em_kernel,
    em_step_numpy,
    init_random,
)
from bayespmf.pmf import (
    LatentClassParams,
    log_likelihood_rows,
    split_factors,
    stack_factors,
)

N_CAT = np.array([2, 3, 4, 2])
NO_CONVERGENCE = pytest.mark.filterwarnings(
    "ignore::bayespmf._validation.ConvergenceWarning"
)
RANK = 3


def simulate(rng, n_rows, n_cat, weights, factors, missing):
    """Draw latent-class data with numpy (independent of bayespmf's simulators)."""
    states = rng.choice(len(weights), size=n_rows, p=weights)
    codes = np.empty((n_rows, len(n_cat)), dtype=np.int64)
    for n, a in enumerate(factors):
        cdf = np.cumsum(a[:, states].T, axis=1)
        codes[:, n] = np.minimum((rng.random((n_rows, 1)) > cdf).sum(axis=1), n_cat[n] - 1)
    codes[rng.random(codes.shape) < missing] = -1
    return codes


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(7)
    truth = init_random(N_CAT, RANK, random_state=rng)
    codes = simulate(rng, 300, N_CAT, truth.weights, truth.factors, missing=0.3)
    codes[5] = -1  # one all-missing row
    codes.setflags(write=False)
    start = init_random(N_CAT, RANK, random_state=rng)
    return codes, start


@pytest.fixture(scope="module")
def kernel(small):
    return build_em_kernel(small[0], N_CAT, RANK, backend="pytensor")


@pytest.fixture(scope="module")
def separated():
    """Well-separated 2-class data: EM and SQUAREM-PMF share one basin."""
    rng = np.random.default_rng(11)
    n_cat = np.array([3, 3, 3, 3, 3])
    factors = [np.array([[0.8, 0.1], [0.15, 0.2], [0.05, 0.7]])] * 5
    weights = np.array([0.4, 0.6])
    codes = simulate(rng, 2000, n_cat, weights, factors, missing=0.4)
    return codes, n_cat, init_random(n_cat, 2, random_state=rng)


def test_compiled_step_matches_numpy_reference(small, kernel):
    codes, start = small
    w, a = start.weights, stack_factors(start.factors)
    w_c, a_c, ll_c = kernel.step(w, a)
    w_r, a_r, ll_r = em_step_numpy(codes, N_CAT, w, a)
    np.testing.assert_allclose(w_c, w_r, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a_c, a_r, rtol=0, atol=1e-10)
    ll_ref = log_likelihood_rows(codes, w, start.factors).sum()
    assert ll_c == pytest.approx(ll_r, rel=1e-10)
    assert ll_c == pytest.approx(ll_ref, rel=1e-10)
    assert kernel.loglik(w, a) == pytest.approx(ll_ref, rel=1e-10)
    # M-step output is on the simplex
    assert w_c.sum() == pytest.approx(1.0, abs=1e-12)
    for block in split_factors(a_c, N_CAT):
        np.testing.assert_allclose(block.sum(axis=0), 1.0, atol=1e-12)
    assert kernel.n_rows == int((codes >= 0).any(axis=1).sum()) < codes.shape[0]


@pytest.mark.parametrize("backend", ["numba", "scipy", "auto"])
def test_every_backend_matches_numpy_reference(small, backend):
    codes, start = small
    w, a = start.weights, stack_factors(start.factors)
    k = build_em_kernel(codes, N_CAT, RANK, backend=backend)
    w_c, a_c, ll_c = k.step(w, a)
    w_r, a_r, _ = em_step_numpy(codes, N_CAT, w, a)
    np.testing.assert_allclose(w_c, w_r, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a_c, a_r, rtol=0, atol=1e-10)
    ll_ref = log_likelihood_rows(codes, w, start.factors).sum()
    assert ll_c == pytest.approx(ll_ref, rel=1e-10)
    assert k.loglik(w, a) == pytest.approx(ll_ref, rel=1e-10)


def test_batched_starts_equal_separate_steps(small):
    codes, _ = small
    k = build_em_kernel(codes, N_CAT, RANK, backend="numba")
    starts = [init_random(N_CAT, RANK, random_state=s) for s in range(4)]
    w = np.stack([p.weights for p in starts])
    a = np.stack([stack_factors(p.factors) for p in starts], axis=1)
    w_b, a_b, ll_b = k.step(w, a)
    for j, p in enumerate(starts):
        w_r, a_r, ll_r = em_step_numpy(codes, N_CAT, p.weights, stack_factors(p.factors))
        np.testing.assert_allclose(w_b[j], w_r, atol=1e-12)
        np.testing.assert_allclose(a_b[:, j], a_r, atol=1e-12)
        assert ll_b[j] == pytest.approx(ll_r, rel=1e-12)


def test_weighted_rows_equal_repeated_rows(small):
    codes, start = small
    w, a = start.weights, stack_factors(start.factors)
    reps = np.arange(codes.shape[0]) % 3 + 1
    expanded = np.repeat(codes, reps, axis=0)
    weighted = build_em_kernel(codes, N_CAT, RANK, backend="numba", row_weight=reps)
    got = weighted.step(w, a)
    ref = em_step_numpy(expanded, N_CAT, w, a)
    np.testing.assert_allclose(got[0], ref[0], atol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], atol=1e-12)
    assert got[2] == pytest.approx(ref[2], rel=1e-12)


def test_impossible_row_gives_minus_inf_not_nan():
    # a zero in the factor a row needs: probability 0, no division by zero
    k = build_em_kernel(np.array([[0, 1], [1, 0]]), [2, 2], 1, backend="numba")
    a = np.array([[1.0], [0.0], [0.5], [0.5]])
    w_new, a_new, ll = k.step(np.ones(1), a)
    assert ll == -np.inf
    assert np.all(np.isfinite(a_new)) and np.all(np.isfinite(w_new))


def test_unknown_backend_and_weights_without_numba():
    with pytest.raises(ValueError, match="'backend' parameter of build_em_kernel"):
        build_em_kernel([[0, 1]], [2, 2], 1, backend="gpu")
    with pytest.raises(ValueError, match="row weights need backend='numba'"):
        build_em_kernel([[0, 1]], [2, 2], 1, backend="scipy", row_weight=[2.0])


def test_python_perform_matches_c(small):
    codes, start = small
    w, a = start.weights, stack_factors(start.factors)
    py_kernel = build_em_kernel(
        codes, N_CAT, RANK, backend="pytensor", mode=Mode(linker="py")
    )
    ref = em_step_numpy(codes, N_CAT, w, a)
    got = py_kernel.step(w, a)
    np.testing.assert_allclose(got[1], ref[1], atol=1e-10)
    assert got[2] == pytest.approx(ref[2], rel=1e-10)
    assert py_kernel.loglik(w, a) == pytest.approx(ref[2], rel=1e-10)


def test_estep_stats_index_out_of_range():
    lw, la = pt.dvector(), pt.dmatrix()
    _, _, ll = EStepStats()(lw, la, np.array([0, 1]), np.array([5]))
    f = pytensor.function([lw, la], ll)
    with pytest.raises(IndexError, match="index out of range"):
        f(np.log([0.5, 0.5]), np.log(np.full((2, 2), 0.5)))


def test_import_leaves_numba_for_first_use():
    """``import bayespmf`` and the estimators do not import numba (0.2 s); the first
    EStepStats graph registers its numba dispatch, so the numba linker runs it as numba
    code, not in object mode (which warns, an error here)."""
    import subprocess
    import sys

    code = (
        "import sys, warnings; warnings.simplefilter('error')\n"
        "import bayespmf, bayespmf.estimators, bayespmf.fit, bayespmf.datasets\n"
        "assert 'numba' not in sys.modules, 'numba imported'\n"
        "import numpy as np, pytensor, pytensor.tensor as pt\n"
        "from bayespmf.kernels.em import EStepStats\n"
        "lw, la = pt.dvector(), pt.dmatrix()\n"
        "out = EStepStats()(lw, la, np.array([0, 1, 2]), np.array([0, 3]))\n"
        "f = pytensor.function([lw, la], out, mode='NUMBA')\n"
        "c, t, ll = f(np.log([0.25, 0.75]), np.log(np.full((4, 2), 0.5)))\n"
        "assert abs(ll - 2 * np.log(0.5)) < 1e-12, ll\n"
        "assert np.allclose(t, [0.5, 1.5]), t\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


@NO_CONVERGENCE
def test_kernel_compiles_once(small, kernel, monkeypatch):
    codes, start = small
    w, a = start.weights, stack_factors(start.factors)
    calls = []
    real = pytensor.function
    monkeypatch.setattr(
        pytensor, "function", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    fn = kernel._step_fn
    for _ in range(3):
        w, a, _ = kernel.step(w, a)
    assert calls == []
    assert kernel._step_fn is fn
    # fit_em compiles exactly one function (the step), whatever the iteration count
    fit_em(
        codes,
        RANK,
        init=start,
        max_iter=5,
        tol=0.0,
        accelerate="squarem",
        backend="pytensor",
    )
    assert len(calls) == 1


def test_empty_class_is_guarded(small, kernel):
    _, start = small
    w = np.array([0.5, 0.5, 0.0])
    a = stack_factors(start.factors)
    w_new, a_new, ll = kernel.step(w, a)
    assert np.isfinite(ll)
    assert np.all(np.isfinite(a_new)) and np.all(a_new > 0)
    assert 0 < w_new[2] < 10 * COUNT_FLOOR
    for block, k in zip(split_factors(a_new, N_CAT), N_CAT, strict=True):
        np.testing.assert_allclose(block[:, 2], 1.0 / k, rtol=1e-6)


@NO_CONVERGENCE
@pytest.mark.parametrize("accelerate", [None, "squarem"])
def test_loglik_never_decreases(small, accelerate):
    codes, start = small
    params, info = fit_em(
        codes, RANK, init=start, accelerate=accelerate, max_iter=200, tol=1e-12
    )
    assert isinstance(info, EMInfo)
    trace = info.loglik_trace
    assert trace.shape == (info.n_iter,)
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))
    final = log_likelihood_rows(codes, params.weights, params.factors).sum()
    assert final >= trace[-1] - 1e-9 * abs(trace[-1])
    if accelerate is None:
        assert info.n_evals == info.n_iter
    else:
        assert info.n_evals >= 3 * info.n_iter


def test_em_and_squarem_reach_same_fixed_point(separated):
    codes, n_cat, start = separated
    _, em = fit_em(codes, 2, init=start, n_categories=n_cat, max_iter=5000, tol=1e-13)
    _, sq = fit_em(
        codes,
        2,
        init=start,
        n_categories=n_cat,
        max_iter=2000,
        tol=1e-13,
        accelerate="squarem",
    )
    assert em.converged and sq.converged
    assert sq.loglik_trace[-1] == pytest.approx(em.loglik_trace[-1], rel=1e-6)
    assert sq.n_evals < em.n_evals


@NO_CONVERGENCE
def test_same_random_state_same_result(small):
    codes, _ = small
    p1, i1 = fit_em(codes, RANK, random_state=3, max_iter=20, tol=1e-6)
    p2, i2 = fit_em(codes, RANK, random_state=3, max_iter=20, tol=1e-6)
    np.testing.assert_array_equal(p1.weights, p2.weights)
    for a1, a2 in zip(p1.factors, p2.factors, strict=True):
        np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(i1.loglik_trace, i2.loglik_trace)


@NO_CONVERGENCE
def test_inputs_not_mutated(small, kernel):
    codes, start = small
    codes_w = np.array(codes)  # writeable copy
    before = codes_w.copy()
    init = LatentClassParams(start.weights.copy(), [f.copy() for f in start.factors])
    fit_em(codes_w, RANK, init=init, max_iter=3, tol=0.0, accelerate="squarem")
    np.testing.assert_array_equal(codes_w, before)
    np.testing.assert_array_equal(init.weights, start.weights)
    for f, g in zip(init.factors, start.factors, strict=True):
        np.testing.assert_array_equal(f, g)
    w, a = start.weights.copy(), stack_factors(start.factors)
    a0 = a.copy()
    kernel.step(w, a)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(w, start.weights)


def test_convergence_warning_and_callback(small):
    codes, start = small
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=2"):
        _, info = fit_em(codes, RANK, init=start, max_iter=2, tol=0.0)
    assert not info.converged and info.n_iter == 2
    seen = []

    def stop_at_three(it, state):
        assert isinstance(state, EMState)
        seen.append(it)
        return it == 3

    _, info = fit_em(codes, RANK, init=start, max_iter=50, tol=0.0, callback=stop_at_three)
    assert seen == [1, 2, 3] and info.n_iter == 3 and not info.converged


def test_error_paths(small, kernel):
    codes, start = small
    with pytest.raises(
        ValueError, match="'n_components' parameter of fit_em must be an int"
    ):
        fit_em(codes, 0)
    with pytest.raises(ValueError, match="'n_components' parameter of build_em_kernel"):
        build_em_kernel(codes, N_CAT, 0)
    with pytest.raises(ValueError, match="'accelerate' parameter of fit_em must be None"):
        fit_em(codes, RANK, accelerate="anderson")
    bad = LatentClassParams(start.weights, start.factors[:-1])
    with pytest.raises(ValueError, match="'init' parameter of fit_em is invalid"):
        fit_em(codes, RANK, init=bad)
    wrong_shape = LatentClassParams(
        start.weights, [start.factors[0][:1], *start.factors[1:]]
    )
    with pytest.raises(ValueError, match="'init' parameter of fit_em is invalid"):
        fit_em(codes, RANK, init=wrong_shape)
    with pytest.raises(ValueError, match="'init' parameter of fit_em has rank 3"):
        fit_em(codes, RANK + 1, init=start)
    with pytest.raises(ValueError, match="'init' parameter of fit_em must be None"):
        fit_em(codes, RANK, init="kmeans")
    with pytest.raises(DataValidationError, match="never observed"):
        fit_em(np.full((4, 3), -1), 2, n_categories=[2, 2, 2])
    with pytest.raises(ValueError, match="EMKernel expects weights of shape"):
        kernel.step(np.ones(2) / 2, stack_factors(start.factors))
    with pytest.raises(ValueError, match="'tol' parameter of fit_em"):
        fit_em(codes, RANK, tol=-1.0)


def test_estep_blocks_threaded_split_equals_one_pass(monkeypatch):
    # many starts are cut into one group per thread; every number must be the one of
    # a single pass (same operations in the same order for each start)
    from bayespmf.kernels import em_numba

    rng = np.random.default_rng(3)
    n_cat, n_components, n_start = [3, 4, 2, 5], 3, 40
    codes = np.stack([rng.integers(-1, k, size=200) for k in n_cat], axis=1)
    kernel = NumbaEMKernel(codes, n_cat, n_components)
    w = rng.dirichlet(np.ones(n_components), size=n_start)
    a = np.concatenate(
        [
            rng.dirichlet(np.ones(k), size=(n_start, n_components)).transpose(2, 0, 1)
            for k in n_cat
        ]
    )
    monkeypatch.setattr(em_numba, "n_cpus", lambda: 1)
    one = kernel.step(w, a)
    monkeypatch.setattr(em_numba, "n_cpus", lambda: 3)
    monkeypatch.setattr(em_numba, "MIN_BLOCKS_PER_THREAD", 4)
    split = kernel.step(w, a)
    for x, y in zip(one, split, strict=True):
        np.testing.assert_array_equal(x, y)
    # and each start alone gives its own numbers
    w5, a5, ll5 = kernel.step(w[5], a[:, 5])
    np.testing.assert_allclose(split[0][5], w5, rtol=1e-13)
    np.testing.assert_allclose(split[1][:, 5], a5, rtol=1e-13)
    np.testing.assert_allclose(split[2][5], ll5, rtol=1e-13)


@pytest.mark.parametrize(
    ("n_rows", "n_cat"),
    [(2000, [3, 2, 4, 5]), (500, [2] * 70), (300, [1, 6]), (0, [3, 3])],
)
def test_unique_rows_is_numpy_unique_over_rows(n_rows, n_cat):
    """The packed-key path (and the fallback beyond 62 bits: 70 binary items give
    3**70) give np.unique's rows, order and inverse."""
    from bayespmf.fit.source import unique_rows

    rng = np.random.default_rng(len(n_cat))
    codes = rng.integers(-1, np.array(n_cat), size=(n_rows, len(n_cat)))
    uniq, inverse = unique_rows(codes, n_cat)
    ref, ref_inverse = np.unique(codes, axis=0, return_inverse=True)
    np.testing.assert_array_equal(uniq, ref)
    np.testing.assert_array_equal(inverse, ref_inverse.ravel())
    if n_rows:
        np.testing.assert_array_equal(uniq[inverse], codes)
