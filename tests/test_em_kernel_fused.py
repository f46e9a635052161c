"""The fused linear-space E-step (:func:`bayespmf.kernels.em_numba.estep_starts`).

Checked against independent computations: a log-space E-step in NumPy (a log-sum-exp
per row, every row's log joint summed exactly with :func:`math.fsum` where the rows
are long) and SciPy's EM step (:func:`bayespmf.kernels.em.sparse_em_step`).
"""

import math

import numpy as np
import pytest

from bayespmf.kernels import em_numba
from bayespmf.kernels.em import NumbaEMKernel, sparse_em_step
from bayespmf.kernels.em_numba import estep_blocks_reference, estep_starts
from bayespmf.pmf import index_dtype, observed_csr, offsets_of, one_hot_design


def random_codes(rng, n_rows, n_cat, missing):
    codes = np.stack([rng.integers(0, k, size=n_rows) for k in n_cat], axis=1)
    codes[rng.random(codes.shape) < missing] = -1
    return codes


def random_params(rng, n_cat, n_components, n_starts):
    """Weights (K, F) and stacked factors (P, K, F) of ``n_starts`` random starts."""
    weights = rng.dirichlet(np.ones(n_components), size=n_starts)
    factors = np.concatenate(
        [
            rng.dirichlet(np.ones(k), size=(n_starts, n_components)).transpose(2, 0, 1)
            for k in n_cat
        ]
    )
    return weights, factors


def csr(codes, n_cat):
    return observed_csr(codes, n_cat, drop_empty=True, index_dtype=index_dtype(n_cat))


def numpy_estep(codes, n_cat, weights, factors, row_weight=None, exact_sum=False):
    """Counts (P, F), totals (F,) and log-likelihood of one start, in log space.

    A row whose every class has probability 0 adds ``-inf`` and no counts. With
    ``exact_sum`` every row's log joint is summed by :func:`math.fsum`.
    """
    codes = np.asarray(codes)
    codes = codes[(codes >= 0).any(axis=1)]
    offsets = offsets_of(n_cat)
    n_rows = codes.shape[0]
    rw = np.ones(n_rows) if row_weight is None else np.asarray(row_weight, dtype=float)
    with np.errstate(divide="ignore"):
        log_a, log_w = np.log(factors), np.log(weights)
    obs = codes >= 0
    flat = np.where(obs, codes + offsets[:-1], 0)
    terms = np.where(obs[:, :, None], log_a[flat], 0.0)  # (S, N, F)
    if exact_sum:
        lj = np.array(
            [
                [math.fsum(terms[s, :, f]) for f in range(terms.shape[2])]
                for s in range(n_rows)
            ]
        )
    else:
        lj = terms.sum(axis=1)
    lj = lj + log_w
    m = lj.max(axis=1, keepdims=True)
    possible = np.isfinite(m[:, 0])
    m[~possible] = 0.0
    e = np.exp(lj - m)
    z = e.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = float(np.sum(rw * (np.log(z[:, 0]) + m[:, 0])))
        resp = np.where(possible[:, None], e / z, 0.0) * rw[:, None]
    counts = np.zeros((int(offsets[-1]), len(weights)))
    for n in range(codes.shape[1]):
        np.add.at(counts, flat[obs[:, n], n], resp[obs[:, n]])
    return counts, resp.sum(axis=0), loglik


def assert_estep_close(got, want, rtol=1e-12):
    counts, totals, loglik = got
    w_counts, w_totals, w_loglik = want
    scale = max(np.abs(w_counts).max(), 1.0)
    np.testing.assert_allclose(counts, w_counts, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(totals, w_totals, rtol=rtol, atol=rtol * scale)
    if np.isfinite(w_loglik):
        np.testing.assert_allclose(loglik, w_loglik, rtol=rtol)
    else:
        assert loglik == w_loglik


@pytest.mark.parametrize("n_components", [1, 2, 3, 4, 5, 10])
@pytest.mark.parametrize("n_cat", [[3, 4, 2, 5, 3], [300, 2, 4]])
def test_single_start_matches_numpy_and_scipy(rng, n_cat, n_components):
    """At most four classes run in registers, more in padded vector lanes; 300
    categories need uint16 indices."""
    codes = random_codes(rng, 500, n_cat, missing=0.3)
    w, a = random_params(rng, n_cat, n_components, 1)
    indptr, indices = csr(codes, n_cat)
    got = estep_starts(w, a, indptr, indices, np.ones(indptr.size - 1))
    assert got[0].shape == a.shape and got[1].shape == w.shape and got[2].shape == (1,)
    want = numpy_estep(codes, n_cat, w[0], a[:, 0])
    assert_estep_close((got[0][:, 0], got[1][0], got[2][0]), want)
    # and the EM map against SciPy's step
    kernel = NumbaEMKernel(codes, n_cat, n_components)
    w_new, a_new, ll = kernel.step(w[0], a[:, 0])
    onehot = one_hot_design(codes, n_cat, drop_empty=True)
    ref = sparse_em_step(onehot, offsets_of(n_cat), w[0], a[:, 0])
    np.testing.assert_allclose(w_new, ref[0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a_new, ref[1], rtol=1e-12, atol=1e-15)
    assert ll == pytest.approx(ref[2], rel=1e-12)


@pytest.mark.parametrize(("n_starts", "n_components"), [(2, 3), (7, 4), (40, 5)])
def test_many_starts_match_each_start_alone(rng, n_starts, n_components):
    n_cat = [3, 4, 2, 5]
    codes = random_codes(rng, 400, n_cat, missing=0.2)
    w, a = random_params(rng, n_cat, n_components, n_starts)
    indptr, indices = csr(codes, n_cat)
    counts, totals, loglik = estep_starts(w, a, indptr, indices, np.ones(indptr.size - 1))
    for k in range(n_starts):
        want = numpy_estep(codes, n_cat, w[k], a[:, k])
        assert_estep_close((counts[:, k], totals[k], loglik[k]), want)


def test_row_weights_are_expanded_rows(rng):
    n_cat = [3, 4, 2, 5]
    codes = random_codes(rng, 300, n_cat, missing=0.3)
    codes = codes[(codes >= 0).any(axis=1)]
    reps = rng.integers(0, 4, size=codes.shape[0])
    w, a = random_params(rng, n_cat, 3, 5)
    indptr, indices = csr(codes, n_cat)
    weighted = estep_starts(w, a, indptr, indices, reps.astype(float))
    expanded = np.repeat(codes, reps, axis=0)
    e_indptr, e_indices = csr(expanded, n_cat)
    plain = estep_starts(w, a, e_indptr, e_indices, np.ones(e_indptr.size - 1))
    for x, y in zip(weighted, plain, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    # fractional weights against the NumPy E-step, one start and several
    rw = rng.random(codes.shape[0]) * 3
    for n_starts in (1, 5):
        got = estep_starts(w[:n_starts], a[:, :n_starts], indptr, indices, rw)
        for k in range(n_starts):
            want = numpy_estep(codes, n_cat, w[k], a[:, k], row_weight=rw)
            assert_estep_close((got[0][:, k], got[1][k], got[2][k]), want)


@pytest.mark.parametrize("n_components", [2, 3, 6])
def test_impossible_row_gives_minus_inf_and_no_counts(rng, n_components):
    n_cat = [3, 4, 2]
    codes = random_codes(rng, 200, n_cat, missing=0.0)
    codes[0] = [2, 1, 0]
    w, a = random_params(rng, n_cat, n_components, 3)
    a[2, 1, :] = 0.0  # start 1: category 2 of variable 0 impossible in every class
    indptr, indices = csr(codes, n_cat)
    counts, totals, loglik = estep_starts(w, a, indptr, indices, np.ones(indptr.size - 1))
    assert loglik[1] == -np.inf
    assert np.isfinite(loglik[[0, 2]]).all()
    for k in range(3):
        want = numpy_estep(codes, n_cat, w[k], a[:, k])
        assert_estep_close((counts[:, k], totals[k], loglik[k]), want)
    # the impossible rows add nothing: the same counts as without them
    keep = codes[:, 0] != 2
    want = numpy_estep(codes[keep], n_cat, w[1], a[:, 1])
    np.testing.assert_allclose(counts[:, 1], want[0], rtol=1e-12, atol=1e-12)
    # one start alone, in registers and in vector lanes
    single = estep_starts(w[1:2], a[:, 1:2], indptr, indices, np.ones(indptr.size - 1))
    assert single[2][0] == -np.inf
    np.testing.assert_allclose(single[0][:, 0], want[0], rtol=1e-12, atol=1e-12)


def long_rows(rng, n_rows, n_items, n_components):
    """Binary items with entries in [0.05, 0.95]: every log joint far below -2000."""
    n_cat = [2] * n_items
    p = 0.05 + 0.9 * rng.random((n_items, n_components))
    a = np.stack([p, 1 - p], axis=1).reshape(-1, n_components)
    codes = (rng.random((n_rows, n_items)) < 0.5).astype(np.int64)
    codes[rng.random(codes.shape) < 0.05] = -1
    return codes, n_cat, a


@pytest.mark.parametrize(("n_components", "n_starts"), [(2, 1), (3, 1), (5, 1), (3, 3)])
def test_extreme_underflow(rng, n_components, n_starts):
    """3000 binary items: every log joint is below -2000 (exp of it is 0 in float64),
    so rows run the long path, every class with its own exponent."""
    codes, n_cat, a = long_rows(rng, 60, 3000, n_components)
    w = rng.dirichlet(np.ones(n_components), size=n_starts)
    a3 = np.repeat(a[:, None], n_starts, axis=1)
    a3[:, 1:] = a3[:, 1:] ** 1.01  # other starts: other (unnormalized) factors
    indptr, indices = csr(codes, n_cat)
    got = estep_starts(w, a3, indptr, indices, np.ones(indptr.size - 1))
    for k in range(n_starts):
        want = numpy_estep(codes, n_cat, w[k], a3[:, k], exact_sum=True)
        assert want[2] / codes.shape[0] < -2000.0
        assert_estep_close((got[0][:, k], got[1][k], got[2][k]), want)


def test_class_that_falls_far_behind_and_recovers():
    """A class 1e-4000 behind after half a row and ahead at its end: a product that
    underflowed on the way would lose it."""
    n_items = 3000
    half = n_items // 2
    n_cat = [2] * n_items
    p1 = np.empty((n_items, 2))  # P(x = 1 | class)
    p1[:half] = [0.9, 1e-3]
    p1[half:] = [1e-3, 0.99]
    a = np.stack([1 - p1, p1], axis=1).reshape(-1, 2)
    codes = np.ones((2, n_items), dtype=np.int64)
    codes[1, ::2] = 0
    w = np.array([[0.5, 0.5]])
    indptr, indices = csr(codes, n_cat)
    six = np.hstack([a, np.full((a.shape[0], 4), 0.5)])  # vector lanes, not registers
    for factors, weights in [(a, w), (six, np.array([[0.5, 0.5, 0, 0, 0, 0]]))]:
        got = estep_starts(weights, factors[:, None], indptr, indices, np.ones(2))
        want = numpy_estep(codes, n_cat, weights[0], factors, exact_sum=True)
        assert want[1][1] > 0.9  # the first row belongs to class 1
        assert_estep_close((got[0][:, 0], got[1][0], got[2][0]), want)


def test_threads_equal_one_thread_to_rounding(rng, monkeypatch):
    n_cat = [3, 4, 2, 5, 6]
    codes = random_codes(rng, 3000, n_cat, missing=0.3)
    indptr, indices = csr(codes, n_cat)
    rw = np.ones(indptr.size - 1)
    cases = [random_params(rng, n_cat, f, k) for f, k in [(3, 1), (7, 1), (4, 5)]]
    monkeypatch.setattr(em_numba, "MIN_WORK_PER_THREAD", 1)
    for w, a in cases:
        monkeypatch.setattr(em_numba, "n_cpus", lambda: 1)
        one = estep_starts(w, a, indptr, indices, rw)
        monkeypatch.setattr(em_numba, "n_cpus", lambda: 3)
        three = estep_starts(w, a, indptr, indices, rw)
        again = estep_starts(w, a, indptr, indices, rw)
        for x, y, z in zip(one, three, again, strict=True):
            np.testing.assert_allclose(y, x, rtol=1e-13, atol=1e-13)
            np.testing.assert_array_equal(y, z)  # deterministic for a thread count


def test_groups_of_starts_do_not_change_the_numbers(rng, monkeypatch):
    """Small groups (``GROUP_BYTES``) and groups shared out between threads give every
    start the numbers of one group: the same operations in the same order."""
    n_cat = [3, 4, 2, 5]
    codes = random_codes(rng, 300, n_cat, missing=0.2)
    indptr, indices = csr(codes, n_cat)
    rw = rng.random(indptr.size - 1)
    w, a = random_params(rng, n_cat, 3, 37)
    monkeypatch.setattr(em_numba, "n_cpus", lambda: 1)
    one_group = estep_starts(w, a, indptr, indices, rw)
    monkeypatch.setattr(em_numba, "GROUP_BYTES", 1)
    small = estep_starts(w, a, indptr, indices, rw)
    monkeypatch.setattr(em_numba, "n_cpus", lambda: 2)
    monkeypatch.setattr(em_numba, "MIN_BLOCKS_PER_THREAD", 4)
    threaded = estep_starts(w, a, indptr, indices, rw)
    for x, y, z in zip(one_group, small, threaded, strict=True):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda w, a: a.__setitem__((0, 0, 0), 1e-310),  # subnormal
        lambda w, a: a.__setitem__((0, 0, 0), 1e305),
        lambda w, a: a.__setitem__((1, 0, 1), np.nan),
        lambda w, a: w.__setitem__((0, 0), -0.1),
    ],
)
def test_outside_the_linear_scheme_falls_back_to_the_reference(rng, spoil):
    n_cat = [3, 4, 2]
    codes = random_codes(rng, 100, n_cat, missing=0.2)
    indptr, indices = csr(codes, n_cat)
    rw = np.ones(indptr.size - 1)
    w, a = random_params(rng, n_cat, 3, 2)
    spoil(w, a)
    got = estep_starts(w, a, indptr, indices, rw)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = estep_blocks_reference(
            np.log(w).ravel(), np.log(a).reshape(a.shape[0], -1), indptr, indices, rw, 2
        )
    np.testing.assert_array_equal(got[0], want[0].reshape(a.shape))
    np.testing.assert_array_equal(got[1], want[1].reshape(w.shape))
    np.testing.assert_array_equal(got[2], want[2])


def test_run_lengths_keep_products_in_range():
    log2 = math.log2
    w_lo, a_lo = 0.01, 1e-15
    r_plain, r_long = em_numba.run_lengths(w_lo, 1.0, a_lo, 1.0)
    assert (
        log2(w_lo) + r_plain * log2(a_lo) >= -1020 > log2(w_lo) + (r_plain + 1) * log2(a_lo)
    )
    assert r_long * log2(a_lo) >= -1022 > (r_long + 1) * log2(a_lo)
    # factors above 1 (unnormalized) bound the products from above too
    r_plain, r_long = em_numba.run_lengths(0.5, 0.5, 0.5, 3.0)
    assert -1 + r_plain * log2(3.0) <= 1000 < -1 + (r_plain + 1) * log2(3.0)
    assert 1 + r_long * log2(3.0) <= 1023
    # every weight or every factor 0: no bound
    assert em_numba.run_lengths(math.inf, 0.0, 0.5, 0.5)[0] >= 2**40
