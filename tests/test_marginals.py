"""Tests of bayespmf.marginals against slow loop-based references and exact maths."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from bayespmf._validation import DataValidationError
from bayespmf.data import CategoricalData
from bayespmf.marginals import (
    POPULATION_COUNT,
    PairwiseAccumulator,
    PairwiseMarginals,
    ProjectionMarginals,
    RandomProjections,
    TripleAccumulator,
    TripleMarginals,
    pairwise_marginals,
    projection_marginals,
    random_projections,
    triple_marginals,
)
from bayespmf.marginals import pairwise as pairwise_module
from bayespmf.pmf import joint_pmf, offsets_of

N_CAT = np.array([2, 3, 4, 2, 3])


def random_codes(seed, n_rows=80, n_cat=N_CAT, missing=0.4):
    """Random codes with missing entries, one all-missing row and one all-missing column."""
    rng = np.random.default_rng(seed)
    codes = (rng.random((n_rows, len(n_cat))) * n_cat).astype(np.int64)
    codes[rng.random(codes.shape) < missing] = -1
    codes[3] = -1  # an all-missing row
    return codes


def random_params(seed, n_cat=N_CAT, n_components=3):
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.ones(n_components))
    factors = [rng.dirichlet(np.ones(i), size=n_components).T for i in n_cat]
    return weights, factors


# ----------------------------------------------------------------- loop references
def ref_pairwise(codes, n_cat):
    """Pairwise marginals by looping over rows and pairs (independent reference)."""
    n_vars = len(n_cat)
    raw = {
        (j, k): np.zeros((n_cat[j], n_cat[k])) for j in range(n_vars) for k in range(n_vars)
    }
    counts = np.zeros((n_vars, n_vars), dtype=np.int64)
    for row in codes.tolist():
        for j, k in itertools.product(range(n_vars), repeat=2):
            if row[j] >= 0 and row[k] >= 0:
                raw[j, k][row[j], row[k]] += 1
                counts[j, k] += 1
    joint = {key: (val / counts[key] if counts[key] else val) for key, val in raw.items()}
    return joint, counts


def ref_triples(codes, n_cat, triples):
    out, counts = {}, {}
    for j, k, l in triples:  # noqa: E741
        t = np.zeros((n_cat[j], n_cat[k], n_cat[l]))
        for row in codes.tolist():
            if min(row[j], row[k], row[l]) >= 0:
                t[row[j], row[k], row[l]] += 1
        counts[j, k, l] = int(t.sum())
        out[j, k, l] = t / t.sum() if t.sum() else t
    return out, counts


def ref_projection_pmfs(codes, proj):
    """Histogram of the projected value of every co-observed row, with np.histogram."""
    out, counts = [], []
    for p, (j, k) in enumerate(proj.pairs.tolist()):
        i_j, i_k, n_bins = N_CAT[j], N_CAT[k], int(proj.n_bins[p])
        rows = [r for r in codes.tolist() if r[j] >= 0 and r[k] >= 0]
        counts.append(len(rows))
        hists = []
        for phi0, phi1 in proj.directions[p].tolist():
            corners = [phi0 * a + phi1 * c for a in (0, i_j - 1) for c in (0, i_k - 1)]
            values = [phi0 * r[j] + phi1 * r[k] for r in rows]
            hist, _ = np.histogram(values, bins=n_bins, range=(min(corners), max(corners)))
            hists.append(hist / len(rows) if rows else hist.astype(float))
        out.append(np.array(hists))
    return out, np.array(counts)


# ------------------------------------------------------------------- pairwise
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairwise_matches_loop_reference(seed):
    codes = random_codes(seed)
    codes[:, 2] = -1 if seed == 2 else codes[:, 2]  # a never-observed variable
    m = pairwise_marginals(codes, N_CAT)
    joint, counts = ref_pairwise(codes, N_CAT)
    np.testing.assert_array_equal(m.counts, counts)
    assert m.n_samples == codes.shape[0]
    np.testing.assert_array_equal(m.offsets, offsets_of(N_CAT))
    off = m.offsets
    for (j, k), ref in joint.items():
        np.testing.assert_allclose(m.joint[off[j] : off[j + 1], off[k] : off[k + 1]], ref)
        np.testing.assert_allclose(m.pair(j, k), ref)


def test_pairwise_symmetric_normalized_and_diagonal():
    m = pairwise_marginals(random_codes(5), N_CAT)
    np.testing.assert_array_equal(m.joint, m.joint.T)
    np.testing.assert_array_equal(m.counts, m.counts.T)
    for j, k in itertools.product(range(len(N_CAT)), repeat=2):
        total = m.pair(j, k).sum()
        assert total == pytest.approx(1.0 if m.counts[j, k] > 0 else 0.0)
    for j in range(len(N_CAT)):
        block = m.pair(j, j)
        np.testing.assert_array_equal(block, np.diag(m.one_way(j)))


def test_pairwise_never_co_observed_block_is_zero():
    codes = np.array([[0, -1, 1], [1, -1, 0], [-1, 1, -1], [-1, 0, 1]])
    m = pairwise_marginals(codes, [2, 2, 2])
    assert m.counts[0, 1] == 0
    np.testing.assert_array_equal(m.pair(0, 1), np.zeros((2, 2)))
    assert m.observed_pairs() == [(0, 2), (1, 2)]
    assert m.observed_pairs(min_count=2) == [(0, 2)]
    assert m.observed_pairs(min_count=0) == [(0, 1), (0, 2), (1, 2)]


def test_pairwise_accepts_categorical_data():
    codes = random_codes(3)
    data = CategoricalData.from_codes(codes, N_CAT)
    a = pairwise_marginals(data)
    b = pairwise_marginals(codes, N_CAT)
    np.testing.assert_array_equal(a.joint, b.joint)
    np.testing.assert_array_equal(a.counts, b.counts)


@pytest.mark.parametrize("chunk_size", [1, 7, 80, 1000])
def test_pairwise_chunked_equals_unchunked(chunk_size):
    codes = random_codes(4)
    whole = pairwise_marginals(codes, N_CAT)
    chunked = pairwise_marginals(codes, N_CAT, chunk_size=chunk_size)
    np.testing.assert_array_equal(chunked.joint, whole.joint)
    np.testing.assert_array_equal(chunked.counts, whole.counts)
    assert chunked.n_samples == whole.n_samples


def test_internal_row_blocks_do_not_change_result(monkeypatch):
    codes = random_codes(6, n_rows=101)
    whole = pairwise_marginals(codes, N_CAT)
    monkeypatch.setattr(pairwise_module, "BLOCK_ROWS", 10)  # where the product reads it
    blocked = pairwise_marginals(codes, N_CAT)
    np.testing.assert_array_equal(blocked.joint, whole.joint)


def test_accumulator_merge_equals_whole_and_leaves_parts_unchanged():
    codes = random_codes(7)
    a = PairwiseAccumulator(N_CAT).update(codes[:30])
    b = PairwiseAccumulator(N_CAT).update(CategoricalData.from_codes(codes[30:], N_CAT))
    a_before, b_before = a.cooccurrence, b.cooccurrence
    merged = a.merge(b)
    assert merged is not a and merged is not b
    np.testing.assert_array_equal(a.cooccurrence, a_before)
    np.testing.assert_array_equal(b.cooccurrence, b_before)
    whole = pairwise_marginals(codes, N_CAT)
    result = merged.finalize()
    np.testing.assert_array_equal(result.joint, whole.joint)
    np.testing.assert_array_equal(result.counts, whole.counts)
    assert merged.n_samples == result.n_samples == codes.shape[0]


def test_accumulator_empty_block_is_noop_and_empty_accumulator_finalizes():
    acc = PairwiseAccumulator(N_CAT)
    acc.update(np.empty((0, len(N_CAT)), dtype=np.int64))
    assert acc.n_samples == 0
    m = acc.finalize()
    assert not m.joint.any() and not m.counts.any()
    assert m.observed_pairs() == []


def test_pairwise_accessors_return_copies_and_arrays_are_read_only():
    m = pairwise_marginals(random_codes(8), N_CAT)
    block = m.pair(1, 2)
    block[:] = 7.0
    assert not np.any(m.pair(1, 2) == 7.0)
    np.testing.assert_array_equal(m.pair(2, 1), m.pair(1, 2).T)
    for arr in (m.joint, m.counts, m.offsets, m.n_categories):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.n_samples = 3
    assert "PairwiseMarginals(n_variables=5" in repr(m)


def test_from_params_matches_enumerated_joint_pmf():
    weights, factors = random_params(0)
    pop = PairwiseMarginals.from_params(weights, factors)
    tensor = joint_pmf(weights, factors)
    n_vars = len(N_CAT)
    for j, k in itertools.combinations(range(n_vars), 2):
        others = tuple(v for v in range(n_vars) if v not in (j, k))
        np.testing.assert_allclose(pop.pair(j, k), tensor.sum(axis=others), atol=1e-14)
    for j in range(n_vars):
        others = tuple(v for v in range(n_vars) if v != j)
        np.testing.assert_allclose(pop.one_way(j), tensor.sum(axis=others), atol=1e-14)
        np.testing.assert_allclose(pop.pair(j, j), np.diag(pop.one_way(j)))
    np.testing.assert_array_equal(pop.joint, pop.joint.T)
    assert np.all(pop.counts == POPULATION_COUNT)
    assert pop.n_samples == POPULATION_COUNT
    assert np.all(
        PairwiseMarginals.from_params(weights, factors, n_samples=50).counts == 50
    )


def test_empirical_pairwise_of_enumerated_sample_equals_population():
    # A "sample" holding every cell of the joint PMF in exact proportion.
    weights, factors = np.array([0.5, 0.5]), [np.array([[0.75, 0.25], [0.25, 0.75]])] * 3
    tensor = joint_pmf(weights, factors)
    reps = np.round(tensor * 64).astype(int)
    assert np.allclose(reps / 64, tensor)
    cells = np.array(list(itertools.product(range(2), repeat=3)))
    codes = np.repeat(cells, reps.ravel(), axis=0)
    emp = pairwise_marginals(codes, [2, 2, 2])
    pop = PairwiseMarginals.from_params(weights, factors)
    np.testing.assert_allclose(emp.joint, pop.joint, atol=1e-15)


# -------------------------------------------------------------------- triples
@pytest.mark.parametrize("seed", [0, 1])
def test_triples_match_loop_reference(seed):
    codes = random_codes(seed)
    t = triple_marginals(codes, N_CAT)
    all_triples = list(itertools.combinations(range(len(N_CAT)), 3))
    assert list(t.triples) == all_triples
    ref, counts = ref_triples(codes, N_CAT, all_triples)
    for key in all_triples:
        np.testing.assert_allclose(t.tensor(*key), ref[key])
        assert t.counts[key] == counts[key]
        assert t.tensor(*key).sum() == pytest.approx(1.0 if counts[key] else 0.0)
    assert t.n_samples == codes.shape[0]


def test_triples_given_list_is_sorted_and_deduplicated():
    codes = random_codes(2)
    t = triple_marginals(codes, N_CAT, triples=[(4, 0, 2), (1, 0, 2), (0, 2, 4)])
    assert t.triples == ((0, 1, 2), (0, 2, 4))
    ref, _ = ref_triples(codes, N_CAT, t.triples)
    np.testing.assert_allclose(t.tensor(0, 2, 4), ref[0, 2, 4])
    np.testing.assert_allclose(t.tensor(4, 0, 2), ref[0, 2, 4].transpose(2, 0, 1))
    np.testing.assert_allclose(t.tensor(2, 1, 0), ref[0, 1, 2].transpose(2, 1, 0))


def test_triples_chunked_and_merged_equal_whole():
    codes = random_codes(9)
    whole = triple_marginals(codes, N_CAT)
    chunked = triple_marginals(codes, N_CAT, chunk_size=9)
    a = TripleAccumulator(N_CAT).update(codes[:50])
    b = TripleAccumulator(N_CAT).update(codes[50:])
    merged = a.merge(b).finalize()
    assert a.n_samples == 50
    for res in (chunked, merged):
        assert res.counts == whole.counts
        for key in whole.triples:
            np.testing.assert_array_equal(res.joint[key], whole.joint[key])


def test_triples_pairwise_consistency():
    # Summing a triple tensor over l gives the pair PMF on rows where l is also observed;
    # with no missing entries it must equal the pairwise marginal.
    codes = random_codes(10, missing=0.0)
    codes = codes[(codes >= 0).all(axis=1)]
    t = triple_marginals(codes, N_CAT, triples=[(0, 1, 3)])
    m = pairwise_marginals(codes, N_CAT)
    np.testing.assert_allclose(t.tensor(0, 1, 3).sum(axis=2), m.pair(0, 1))


def test_triple_from_params_matches_enumerated_joint_pmf():
    weights, factors = random_params(1)
    pop = TripleMarginals.from_params(weights, factors)
    tensor = joint_pmf(weights, factors)
    for key in pop.triples:
        others = tuple(v for v in range(len(N_CAT)) if v not in key)
        np.testing.assert_allclose(pop.tensor(*key), tensor.sum(axis=others), atol=1e-14)
        assert pop.counts[key] == POPULATION_COUNT


# -------------------------------------------------------- random projections (JUROR)
def test_random_projections_shapes_norms_and_seed():
    proj = random_projections(N_CAT, 6, random_state=0)
    n_pairs = len(N_CAT) * (len(N_CAT) - 1) // 2
    assert proj.directions.shape == (n_pairs, 6, 2)
    assert (proj.n_pairs, proj.n_projections) == (n_pairs, 6)
    np.testing.assert_allclose(np.linalg.norm(proj.directions, axis=2), 1.0)
    assert proj.pairs.tolist() == [list(p) for p in itertools.combinations(range(5), 2)]
    np.testing.assert_array_equal(proj.n_bins, N_CAT[proj.pairs].max(axis=1))
    again = random_projections(N_CAT, 6, random_state=0)
    np.testing.assert_array_equal(again.directions, proj.directions)
    rng = np.random.default_rng(0)
    g = rng.standard_normal((n_pairs, 6, 2))
    np.testing.assert_allclose(
        proj.directions, g / np.linalg.norm(g, axis=2, keepdims=True)
    )


def test_random_projections_pairs_and_bins_arguments():
    rng = np.random.default_rng(1)
    proj = random_projections(
        N_CAT, 3, pairs=[(4, 1), (0, 2), (1, 4)], n_bins=5, random_state=rng
    )
    assert proj.pairs.tolist() == [[0, 2], [1, 4]]
    assert proj.n_bins.tolist() == [5, 5]
    assert proj.pair_index(4, 1) == 1
    lower, width = proj.lower, proj.width
    assert lower.shape == width.shape == (2, 3)
    assert np.all(width > 0)


def test_bin_index_radon_operator_and_apply_agree():
    proj = random_projections(N_CAT, 5, random_state=2)
    rng = np.random.default_rng(3)
    for j, k in [(0, 1), (1, 2), (2, 4)]:
        z = rng.random((N_CAT[j], N_CAT[k]))
        bins = proj.bin_index(j, k)
        n_bins = int(proj.n_bins[proj.pair_index(j, k)])
        assert bins.shape == (5, N_CAT[j], N_CAT[k])
        assert bins.min() >= 0 and bins.max() < n_bins
        # each projection's extreme grid corners land in the first and last bin
        assert np.all(bins.min(axis=(1, 2)) == 0)
        assert np.all(bins.max(axis=(1, 2)) == n_bins - 1)
        y = proj.apply(j, k, z)
        loop = np.zeros((5, n_bins))
        for m, a, c in itertools.product(range(5), range(N_CAT[j]), range(N_CAT[k])):
            loop[m, bins[m, a, c]] += z[a, c]
        np.testing.assert_allclose(y, loop)
        r = proj.radon_operator(j, k)
        np.testing.assert_allclose((r @ z.ravel()).reshape(5, n_bins), y)
        np.testing.assert_array_equal(proj.bin_index(k, j), bins.transpose(0, 2, 1))
        np.testing.assert_allclose(proj.apply(k, j, z.T), y)


@pytest.mark.parametrize("seed", [0, 1])
def test_projection_marginals_match_row_loop_with_np_histogram(seed):
    codes = random_codes(seed)
    proj = random_projections(N_CAT, 7, random_state=seed)
    pm = projection_marginals(codes, proj)
    ref, counts = ref_projection_pmfs(codes, proj)
    np.testing.assert_array_equal(pm.counts, counts)
    for p, (j, k) in enumerate(proj.pairs.tolist()):
        np.testing.assert_allclose(pm.pmf(j, k), ref[p], atol=1e-15)
        np.testing.assert_array_equal(pm.pmfs[p, :, proj.n_bins[p] :], 0.0)
        np.testing.assert_allclose(pm.pmf(j, k).sum(axis=1), 1.0 if counts[p] else 0.0)
    assert pm.n_samples == codes.shape[0]


def test_projection_marginals_never_co_observed_pair_and_custom_bins():
    codes = np.array([[0, -1, 1], [1, -1, 0], [-1, 1, 1]])
    proj = random_projections([2, 2, 2], 4, n_bins=3, random_state=0)
    pm = projection_marginals(CategoricalData.from_codes(codes, [2, 2, 2]), proj)
    assert pm.counts.tolist() == [0, 2, 1]
    np.testing.assert_array_equal(pm.pmf(0, 1), np.zeros((4, 3)))
    np.testing.assert_allclose(pm.pmf(1, 2).sum(axis=1), 1.0)


def test_projection_marginals_equal_radon_of_pairwise():
    codes = random_codes(11)
    proj = random_projections(N_CAT, 8, random_state=4)
    direct = projection_marginals(codes, proj, n_categories=N_CAT)
    via = ProjectionMarginals.from_pairwise(pairwise_marginals(codes, N_CAT), proj)
    np.testing.assert_allclose(via.pmfs, direct.pmfs, atol=1e-14)
    np.testing.assert_array_equal(via.counts, direct.counts)


def test_population_projection_marginals_match_enumeration():
    weights, factors = random_params(2)
    proj = random_projections(N_CAT, 4, random_state=5)
    pop = ProjectionMarginals.from_pairwise(
        PairwiseMarginals.from_params(weights, factors), proj
    )
    tensor = joint_pmf(weights, factors)
    for p, (j, k) in enumerate(proj.pairs.tolist()):
        bins = proj.bin_index(j, k)
        y = np.zeros((4, int(proj.n_bins[p])))
        for cell in itertools.product(*[range(i) for i in N_CAT]):
            y[np.arange(4), bins[:, cell[j], cell[k]]] += tensor[cell]
        np.testing.assert_allclose(pop.pmf(j, k), y, atol=1e-14)


# ----------------------------------------------------------------- inputs untouched
def test_inputs_are_not_modified():
    codes = random_codes(12)
    before = codes.copy()
    n_cat = N_CAT.copy()
    weights, factors = random_params(3)
    w0, f0 = weights.copy(), [f.copy() for f in factors]
    pairwise_marginals(codes, n_cat, chunk_size=13)
    triple_marginals(codes, n_cat, triples=[(0, 1, 2)])
    proj = random_projections(n_cat, 3, random_state=0)
    projection_marginals(codes, proj)
    PairwiseAccumulator(n_cat).update(codes)
    TripleAccumulator(n_cat).update(codes)
    PairwiseMarginals.from_params(weights, factors)
    TripleMarginals.from_params(weights, factors)
    np.testing.assert_array_equal(codes, before)
    np.testing.assert_array_equal(n_cat, N_CAT)
    assert codes.flags.writeable
    np.testing.assert_array_equal(weights, w0)
    for f, g in zip(factors, f0, strict=True):
        np.testing.assert_array_equal(f, g)


# ----------------------------------------------------------------------- errors
def test_errors_pairwise():
    with pytest.raises(DataValidationError, match="2-D array"):
        pairwise_marginals([0, 1, 1])
    with pytest.raises(
        DataValidationError, match=r"has code 3 .*Pass a larger 'n_categories'"
    ):
        pairwise_marginals([[0, 3], [1, 1]], n_categories=[2, 3])
    with pytest.raises(DataValidationError, match="sequence of 2 ints"):
        pairwise_marginals([[0, 1], [1, 1]], n_categories=[2, 2, 2])
    data = CategoricalData.from_codes([[0, 1], [1, 0]], n_categories=[2, 2])
    with pytest.raises(DataValidationError, match="disagrees with the CategoricalData"):
        pairwise_marginals(data, n_categories=[2, 3])
    with pytest.raises(DataValidationError, match=r"'chunk_size' parameter .* >= 1. Got 0"):
        pairwise_marginals([[0, 1], [1, 0]], chunk_size=0)
    with pytest.raises(DataValidationError, match="'n_categories' argument of Pairwise"):
        PairwiseAccumulator([2, 1])
    with pytest.raises(DataValidationError, match="non-empty 1-D sequence of ints"):
        PairwiseAccumulator(3)
    m = pairwise_marginals([[0, 1], [1, 0]])
    with pytest.raises(DataValidationError, match=r"'k' must be an int in \[0, 2\)"):
        m.pair(0, 2)
    with pytest.raises(DataValidationError, match="'j' must be an int"):
        m.one_way(True)
    with pytest.raises(DataValidationError, match="'min_count' parameter"):
        m.observed_pairs(min_count=-1)


def test_errors_accumulators():
    acc = PairwiseAccumulator([2, 2])
    with pytest.raises(DataValidationError, match=r"3 column.*built for 2 variables"):
        acc.update([[0, 1, 1]])
    with pytest.raises(DataValidationError, match="has code 2 at row 0, variable 1"):
        acc.update([[0, 2]])
    with pytest.raises(
        DataValidationError, match="'other' argument of PairwiseAccumulator"
    ):
        acc.merge(PairwiseAccumulator([2, 3]))
    with pytest.raises(
        DataValidationError, match="'other' argument of PairwiseAccumulator"
    ):
        acc.merge(TripleAccumulator([2, 2, 2]))
    tacc = TripleAccumulator([2, 2, 2, 2], triples=[(0, 1, 2)])
    with pytest.raises(DataValidationError, match="same n_categories and triples"):
        tacc.merge(TripleAccumulator([2, 2, 2, 2]))
    with pytest.raises(DataValidationError, match=r"5 column.*built for 4 variables"):
        tacc.update(np.zeros((2, 5), dtype=int))
    assert acc.n_samples == 0 and tacc.n_samples == 0


def test_errors_triples():
    codes = [[0, 1, 1, 0], [1, 0, 1, 1]]
    with pytest.raises(DataValidationError, match="at least 3 variables"):
        triple_marginals([[0, 1], [1, 0]])
    with pytest.raises(DataValidationError, match=r"out of range for 4 variables"):
        triple_marginals(codes, triples=[(0, 1, 4)])
    with pytest.raises(DataValidationError, match="repeats a variable"):
        triple_marginals(codes, triples=[(0, 1, 1)])
    with pytest.raises(DataValidationError, match=r"index triples \(j, k, l\)"):
        triple_marginals(codes, triples=[(0, 1)])
    with pytest.raises(DataValidationError, match=r"index triples \(j, k, l\)"):
        triple_marginals(codes, triples=[])
    with pytest.raises(DataValidationError, match=r"index triples \(j, k, l\)"):
        triple_marginals(codes, triples=[(0.0, 1.0, 2.0)])
    with pytest.raises(DataValidationError, match="'chunk_size'"):
        triple_marginals(codes, chunk_size=-2)
    t = triple_marginals(codes, triples=[(0, 1, 2)])
    with pytest.raises(DataValidationError, match=r"triple \(0, 1, 3\) was not computed"):
        t.tensor(0, 1, 3)
    with pytest.raises(DataValidationError, match="'l' must be an int"):
        t.tensor(0, 1, 7)


def test_errors_projections():
    with pytest.raises(DataValidationError, match=r"'n_projections' parameter .* >= 1"):
        random_projections([2, 2], 0)
    with pytest.raises(DataValidationError, match="'n_projections' parameter"):
        random_projections([2, 2], 2.5)
    with pytest.raises(DataValidationError, match="at least 2 variables"):
        random_projections([3], 2)
    with pytest.raises(DataValidationError, match="'n_bins' parameter"):
        random_projections([2, 2], 2, n_bins=0)
    with pytest.raises(DataValidationError, match="repeats a variable"):
        random_projections([2, 2, 2], 2, pairs=[(1, 1)])
    with pytest.raises(DataValidationError, match=r"index pairs \(j, k\)"):
        random_projections([2, 2, 2], 2, pairs=[(0, 1, 2)])
    with pytest.raises(ValueError, match="'random_state'"):
        random_projections([2, 2], 2, random_state="seed")
    proj = random_projections([2, 2, 3], 2, pairs=[(0, 1)], random_state=0)
    with pytest.raises(DataValidationError, match="must be a RandomProjections"):
        projection_marginals([[0, 1, 2]], "projections")
    with pytest.raises(DataValidationError, match="disagree with those of 'projections'"):
        projection_marginals([[0, 1, 2]], proj, n_categories=[2, 2, 4])
    data = CategoricalData.from_codes([[0, 1, 2], [1, 0, 0]], [2, 2, 4])
    with pytest.raises(DataValidationError, match="n_categories of 'data'"):
        projection_marginals(data, proj)
    with pytest.raises(DataValidationError, match="has code 3"):
        projection_marginals([[0, 1, 3]], proj)
    with pytest.raises(DataValidationError, match=r"pair \(0, 2\) has no projections"):
        proj.bin_index(0, 2)
    with pytest.raises(DataValidationError, match=r"shape \(2, 2\)"):
        proj.apply(0, 1, np.ones((2, 3)))
    with pytest.raises(DataValidationError, match="must be sorted"):
        RandomProjections([2, 2, 2], [[1, 2], [0, 1]], np.ones((2, 1, 2)), [2, 2])
    with pytest.raises(DataValidationError, match="finite and non-zero"):
        RandomProjections([2, 2], [[0, 1]], np.zeros((1, 1, 2)), [2])
    with pytest.raises(DataValidationError, match=r"shape \(P, M, 2\)"):
        RandomProjections([2, 2], [[0, 1]], np.ones((1, 3)), [2])
    with pytest.raises(DataValidationError, match="'n_bins' of RandomProjections"):
        RandomProjections([2, 2], [[0, 1]], np.ones((1, 1, 2)), [0])
    with pytest.raises(DataValidationError, match="takes a PairwiseMarginals"):
        ProjectionMarginals.from_pairwise(proj, proj)


def test_errors_from_params():
    weights, factors = random_params(4)
    with pytest.raises(DataValidationError, match="'weights' must sum to one"):
        PairwiseMarginals.from_params(weights * 2, factors)
    with pytest.raises(DataValidationError, match="'n_samples' parameter"):
        PairwiseMarginals.from_params(weights, factors, n_samples=-1)
    with pytest.raises(DataValidationError, match="'offsets' of PairwiseMarginals"):
        PairwiseMarginals([2, 2], [0, 2, 3], np.zeros((4, 4)), np.zeros((2, 2), int), 0)
    with pytest.raises(DataValidationError, match=r"shape \(4, 4\)"):
        PairwiseMarginals([2, 2], [0, 2, 4], np.zeros((3, 4)), np.zeros((2, 2), int), 0)
