"""Coupled NMF of pairwise marginals: CNMF-SPA (Alg. 2) and CNMF-OPT (Alg. 1).

Under the latent-class model every pairwise marginal is a coupled nonnegative
factorization, ``X_jk = A_j diag(lambda) A_k^T`` (Ibrahim & Fu, eq. (5)).
:func:`cnmf_spa` recovers the factors in closed form from one "virtual NMF" matrix by
the successive projection algorithm. CNMF-OPT fits all observed pairs at once by
KL-divergence mirror descent, usually started from :func:`cnmf_spa`: here its
validated problem (:func:`cnmf_opt_init`) and one sweep (:func:`cnmf_opt_step`);
``bayespmf.fit.cnmf.cnmf_opt`` runs the sweeps under the one loop.

References
----------
.. [1] S. Ibrahim and X. Fu, "Recovering joint probability of discrete random variables
   from pairwise marginals," IEEE Trans. Signal Process. 69, 2021.
.. [2] N. Gillis and S. A. Vavasis, "Fast and robust recursive algorithms for
   separable nonnegative matrix factorization," IEEE TPAMI 36(4), 2014.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
from scipy.optimize import linear_sum_assignment, nnls
from scipy.special import xlogy

from bayespmf._validation import (
    DataValidationError,
    check_choice,
    check_int,
    check_random_state,
    check_rank_limit,
)
from bayespmf.kernels.simplex import project_simplex
from bayespmf.kernels.spa import spa
from bayespmf.marginals import PairwiseMarginals
from bayespmf.pmf import LatentClassParams, check_params, split_factors, stack_factors

__all__ = [
    "CNMFOptInfo",
    "CNMFOptProblem",
    "CNMFOptState",
    "check_init_params",
    "check_rank",
    "cnmf_opt_init",
    "cnmf_opt_step",
    "cnmf_spa",
    "max_cnmf_rank",
    "pairwise_misfit",
]

#: Floor on the model probabilities inside log(M): keeps the KL objective and its
#: gradient finite where a model entry underflows (a probability below 1e-300 is 0 to
#: any data set), far below any entry an empirical marginal can hold.
PROB_FLOOR = 1e-300

#: Share of the uniform PMF mixed into every column of a CNMF-OPT starting point.
#: Mirror descent is multiplicative: an exact zero (NNLS in CNMF-SPA makes many) could
#: never move again, and a tiny entry takes many sweeps to grow. From CNMF-SPA starts on
#: simulated data 1e-2 needed 1.5-3x fewer sweeps than 1e-6 to the same optimum; it moves
#: a PMF by at most 2e-2 in l1, well below CNMF-SPA's own error on sampled data.
INIT_SMOOTHING = 1e-2

#: Armijo sufficient-decrease constant (the usual 1e-4, Nocedal & Wright, Sec. 3.1).
ARMIJO_C = 1e-4
#: Step shrink factor per backtrack, and growth after an accepted step (so the step
#: size of every block tracks its local curvature across sweeps).
STEP_SHRINK = 0.5
STEP_GROW = 2.0
#: Backtracks before a block update is skipped: 0.5**60 ~ 1e-18 relative step, below
#: which no decrease is representable in float64.
MAX_BACKTRACK = 60
#: Starting (and largest) mirror-descent step size. The objective is an average of
#: KL divergences of PMFs, whose gradient entries are O(1) near a fit; larger steps
#: were always shrunk back by the line search in our runs.
INITIAL_STEP = 1.0
MAX_STEP = 1e6

#: An objective below this is an exact fit: KL ~ |M - X|^2 / 2 per entry, so 1e-24
#: means the modelled pairwise marginals agree with the data to ~1e-12.
OBJECTIVE_FLOOR = 1e-24

#: Default number of random variable orders CNMF-SPA cuts into candidate splits
#: besides the contiguous and interleaved ones (only above
#: ``MAX_ENUMERATED_VARIABLES`` variables; below, every split is tried).
DEFAULT_N_SPLITS = 4

#: Up to this many variables CNMF-SPA tries every split (2**N - 2 oriented splits: 62
#: at N = 6). Each costs one SPA and one NNLS, about 1-3 ms at N <= 6, I = 10.
MAX_ENUMERATED_VARIABLES = 6

#: Shares of sum(I) that the first part S1 of a cut variable order receives. With both
#: orientations this gives splits with S1 holding about 1/4, 1/2 and 3/4 of the
#: categories: a large S1 conditions W (the rows of the NNLS for H) better, a large S2
#: is more likely to hold separable anchor rows; the bootstrap weighs the two.
CUT_SHARES = (0.5, 0.25)

#: Bootstrap replicates of the pairwise marginals that score the candidate splits
#: (split selection "bootstrap"). Every candidate sees the same replicates, so the
#: comparison is paired. On the CNMF paper's Table 1 generator (8 seeds, S = 1e4)
#: the chosen split's factor MSE was 0.00438 with 4 replicates, 0.00421 with 8 and
#: 0.00417 with 16 (the fixed M = 3 split: 0.00461).
DEFAULT_N_BOOTSTRAP = 8

#: Candidates whose misfit exceeds this multiple of the smallest are not bootstrapped,
#: and at most MAX_BOOTSTRAPPED of the others (the lowest misfits). A split without
#: separable anchor rows in S2 is biased: on the Table 1 generator its misfit was
#: 2-12x the best at S >= 1e4 rows, while every split the bootstrap preferred (S =
#: 1e3-1e5, Tables 1 and 4) was within 1.15x; 1.5 and 2 chose the same splits there.
BOOTSTRAP_MISFIT_RATIO = 1.5
MAX_BOOTSTRAPPED = 16

#: Block entries per call of ``Generator.multinomial`` when the bootstrap of CNMF-SPA
#: resamples the pairwise marginals (bounds the padded array of one call: 32 MiB).
REPLICATE_BATCH_ENTRIES = 2**22

#: Split selection rules of :func:`cnmf_spa`.
SELECTIONS = ("bootstrap", "misfit")

#: ``cnmf_spa(batched=True)`` solves the NNLS problems of a split all at once by
#: enumerating the ``2**F - 1`` supports (:func:`_nnls_columns`) up to this rank (63
#: supports); above it, one active-set NNLS per column as without ``batched``.
MAX_ENUMERATED_NNLS_RANK = 6


# ---------------------------------------------------------------------------- checks
def _check_marginals(marginals, owner: str) -> PairwiseMarginals:
    if not isinstance(marginals, PairwiseMarginals):
        raise DataValidationError(
            f"The 'marginals' argument of {owner} must be a PairwiseMarginals (e.g. "
            "from bayespmf.marginals.pairwise_marginals(data)). Got "
            f"{type(marginals).__name__}."
        )
    if marginals.n_variables < 2:
        raise DataValidationError(
            f"{owner} needs at least 2 variables (it factors pairwise marginals); the "
            f"marginals have {marginals.n_variables}."
        )
    if not np.all(np.isfinite(marginals.joint)) or np.any(marginals.joint < 0):
        raise DataValidationError(
            f"The pairwise marginals passed to {owner} hold negative, NaN or infinite "
            "probabilities. Recompute them with pairwise_marginals(data)."
        )
    return marginals


def _observed(marginals: PairwiseMarginals, min_count: int, owner: str) -> np.ndarray:
    """Symmetric (N, N) mask of the pairs j != k used, with no diagonal."""
    min_count = check_int(min_count, "min_count", owner=owner, low=1)
    obs = marginals.counts >= min_count
    obs = obs & obs.T
    np.fill_diagonal(obs, False)
    if not obs.any():
        raise DataValidationError(
            f"No pair of variables is co-observed in at least min_count={min_count} "
            f"rows, so {owner} has nothing to fit. Lower 'min_count' or collect rows "
            "that observe several variables."
        )
    return obs


def max_cnmf_rank(n_categories) -> int:
    """Largest rank CNMF-SPA can identify: max over splits of ``min(I(S1), I(S2))``.

    A bound from splitting the variables, not the parameter count of
    :func:`bayespmf.fit.max_identifiable_rank` (which any method obeys).

    Parameters
    ----------
    n_categories : sequence of int
        Alphabet sizes ``I_n``.

    Returns
    -------
    int
        ``max_{S1 u S2 = [N]} min(sum_{n in S1} I_n, sum_{n in S2} I_n)``, the largest
        inner dimension ``F`` for which the virtual NMF matrix of eq. (3) can have a
        full-column-rank ``W`` and a separable ``H`` (Ibrahim & Fu, Sec. 3.3 and
        Theorem 3's ``M > F / I``). Computed exactly by a subset-sum recursion.

    Examples
    --------
    >>> max_cnmf_rank([10, 10, 10, 10, 10])
    20
    >>> max_cnmf_rank([2, 7])
    2
    """
    n_cat = [int(v) for v in n_categories]
    total = sum(n_cat)
    reachable = 1  # bit s set <=> some subset of the alphabets sums to s
    for size in n_cat:
        reachable |= reachable << size
    best = 0
    for s in range(1, total):
        if (reachable >> s) & 1 and min(s, total - s) > best:
            best = min(s, total - s)
    return best


def check_rank(rank, n_categories, owner: str) -> int:
    """``rank`` as an int in ``[1, max_cnmf_rank(n_categories)]``.

    Raises
    ------
    ValueError
        ``rank`` not an int >= 1.
    DataValidationError
        ``rank`` above what a split of the variables identifies (message names
        ``owner``).
    """
    limit = max_cnmf_rank(n_categories)
    why = (
        f"at most {limit} latent classes are identifiable from the pairwise marginals "
        f"of variables with n_categories={np.asarray(n_categories).tolist()}: CNMF "
        "needs a split of the variables into S1, S2 with rank <= sum of n_categories "
        "over each part (Ibrahim & Fu, eq. (3) and Theorem 3), else the factorization "
        "of the virtual NMF matrix is not unique."
    )
    return check_rank_limit(rank, limit, owner=owner, why=why)


def _check_split(split, n_vars: int, owner: str):
    msg = (
        f"The 'split' argument of {owner} must be a pair (S1, S2) of disjoint, "
        f"non-empty sequences of variable indices in [0, {n_vars})"
    )
    try:
        s1, s2 = split
        s1 = [int(v) for v in s1]
        s2 = [int(v) for v in s2]
    except (TypeError, ValueError) as err:
        raise DataValidationError(f"{msg}. Got {split!r}.") from err
    both = s1 + s2
    if (
        not s1
        or not s2
        or len(set(both)) != len(both)
        or any(not 0 <= v < n_vars for v in both)
    ):
        raise DataValidationError(f"{msg}. Got {split!r}.")
    return tuple(s1), tuple(s2)


# ---------------------------------------------------------------- shared arithmetic
def _normalize_columns(a: np.ndarray) -> np.ndarray:
    """Columns to unit sum (Alg. 2, lines 8 and 15); an all-zero column -> uniform."""
    a = np.maximum(a, 0.0)
    sums = a.sum(axis=0)
    out = np.full_like(a, 1.0 / a.shape[0])
    good = sums > 0
    out[:, good] = a[:, good] / sums[good]
    return out


def _normalize_blocks(a: np.ndarray, sizes) -> list:
    """:func:`_normalize_columns` of each block of ``sizes[i]`` rows of ``a``, in order.

    Number for number the same as one call per block (a per-block column sum equals
    the sum over axis 1 of the blocks of one size stacked), with one call per block
    size instead of one per variable (N = 2000 variables in CNMF-SPA's splits).
    """
    a = np.maximum(a, 0.0)
    sizes = np.asarray(sizes, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = [None] * sizes.size
    by_size = np.argsort(sizes, kind="stable")
    for group in np.split(by_size, np.flatnonzero(np.diff(sizes[by_size])) + 1):
        size = int(sizes[group[0]])
        blocks = a[starts[group][:, None] + np.arange(size)]  # (blocks, size, F)
        sums = blocks.sum(axis=1)
        norm = np.full_like(blocks, 1.0 / size)
        np.divide(blocks, sums[:, None, :], out=norm, where=(sums > 0)[:, None, :])
        for i, b in enumerate(group):
            out[b] = norm[i]
    return out


def _rows(offsets, variables) -> np.ndarray:
    return np.concatenate([np.arange(offsets[v], offsets[v + 1]) for v in variables])


def _nnls_rows(G: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``argmin_{B >= 0} ||Y - G B^T||_F``, column by column of ``Y``; (Y cols, F)."""
    out = np.empty((Y.shape[1], G.shape[1]))
    for q in range(Y.shape[1]):
        out[q] = nnls(G, Y[:, q])[0]
    return out


def _nnls_columns(G: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """:func:`_nnls_rows` for all columns of ``Y`` at once, by enumerating supports.

    An NNLS solution is the least-squares solution on its support (the KKT
    conditions), so among the supports whose least-squares solution is nonnegative the
    one with the smallest residual gives it (the empty support, ``0``, is always
    feasible). Every support is solved for all columns in one call on the normal
    equations, so the cost is ``2**F - 1`` small solves instead of one
    :func:`scipy.optimize.nnls` per column (CNMF-SPA on 2000 binary items: 64,000
    calls, about 3 s). The same solution up to rounding, not bit for bit: used by
    ``cnmf_spa(batched=True)`` only. Above ``MAX_ENUMERATED_NNLS_RANK`` columns of
    ``G`` it falls back to :func:`_nnls_rows`.
    """
    n_f = G.shape[1]
    if n_f > MAX_ENUMERATED_NNLS_RANK:
        return _nnls_rows(G, Y)
    gram = G.T @ G
    gy = G.T @ Y  # (F, Q)
    best = np.zeros((Y.shape[1], n_f))
    best_obj = np.zeros(Y.shape[1])  # ||y - G x||^2 - ||y||^2 of x = 0
    for mask in range(1, 2**n_f):
        s = [f for f in range(n_f) if mask >> f & 1]
        g_s = gram[np.ix_(s, s)]
        x = np.linalg.lstsq(g_s, gy[s], rcond=None)[0]  # (|s|, Q)
        obj = np.sum(x * (g_s @ x), axis=0) - 2.0 * np.sum(x * gy[s], axis=0)
        better = np.all(x >= 0, axis=0) & (obj < best_obj)
        if better.any():
            best[better] = 0.0
            best[np.ix_(better, s)] = x[:, better].T
            best_obj[better] = obj[better]
    return best


def _misfit_direct(joint, wt, lam, stacked, work) -> float:
    """``sum(wt * (joint - model) ** 2)``, in place in ``work`` (joint's shape)."""
    np.matmul(stacked * lam, stacked.T, out=work)  # _model_joint(lam, stacked)
    np.subtract(joint, work, out=work)
    np.square(work, out=work)
    np.multiply(wt, work, out=work)
    return float(np.sum(work))


def _misfit_factored(wj, c0, pair_w, offsets, lam, stacked) -> float:
    """``sum(wt * (joint - model) ** 2)`` from the rank-F form of the model.

    ``wj = wt * joint`` and ``c0 = sum(wj * joint)`` are computed once per data set;
    ``wt`` is ``_expand(pair_w) / 2``. The cross term is ``sum_f lambda_f a_f^T wj
    a_f`` and the model term ``sum_{f,g} lambda_f lambda_g s_fg^T pair_w s_fg / 2``
    with ``s_fg`` the per-variable sums of ``a_f * a_g``: one ``(sum I)^2 x F``
    product instead of five passes over the ``(sum I)^2`` model (0.15 s a candidate
    at 2000 binary items). Equal to the direct sum up to rounding (relative ~1e-14 of
    ``c0``): ``cnmf_spa(batched=True)`` only.
    """
    rank = lam.size
    cross = float(np.sum(stacked * (wj @ (stacked * lam))))
    prod = (stacked[:, :, None] * stacked[:, None, :]).reshape(stacked.shape[0], -1)
    sums = np.add.reduceat(prod, offsets[:-1], axis=0)  # (N, F * F)
    scale = np.outer(lam, lam).reshape(rank * rank)
    model_sq = float(np.sum((pair_w @ sums) * sums * scale)) / 2.0
    return max(c0 - 2.0 * cross + model_sq, 0.0)


def _pair_weight_matrix(marginals, observed, pair_weighting: str) -> np.ndarray:
    """(N, N) symmetric pair weights summing to 1 over pairs j < k; 0 off ``observed``."""
    if pair_weighting == "uniform":
        w = observed.astype(np.float64)
    elif pair_weighting == "counts":
        w = np.where(observed, marginals.counts.astype(np.float64), 0.0)
    else:
        raise ValueError(
            "The 'pair_weighting' argument must be 'uniform' (every observed pair "
            f"counts the same, as in Ibrahim & Fu eq. (5)) or 'counts'. Got "
            f"{pair_weighting!r}."
        )
    return w / np.triu(w, k=1).sum()


def _expand(pair_w: np.ndarray, n_categories) -> np.ndarray:
    """Expand (N, N) pair weights to the (sum I, sum I) block matrix."""
    reps = np.asarray(n_categories)
    return np.repeat(np.repeat(pair_w, reps, axis=0), reps, axis=1)


def _model_joint(weights, stacked) -> np.ndarray:
    return (stacked * weights) @ stacked.T


def pairwise_misfit(
    marginals,
    params,
    *,
    divergence: str = "kl",
    pair_weighting: str = "uniform",
    min_count: int = 1,
) -> float:
    """Weighted misfit of latent-class parameters to the observed pairwise marginals.

    Parameters
    ----------
    marginals : PairwiseMarginals
    params : LatentClassParams or (weights, factors)
    divergence : {"kl", "frobenius"}, default "kl"
        ``D_KL(X_jk, M_jk) = sum X log(X / M)`` (the objective of CNMF-OPT, eq. (6))
        or ``||X_jk - M_jk||_F^2``, with ``M_jk = A_j diag(lambda) A_k^T``.
    pair_weighting : {"uniform", "counts"}, default "uniform"
        Weight of pair ``(j, k)``: equal (the paper's eq. (5)), or proportional to the
        number of rows co-observing it (then the KL misfit is, up to a constant, minus
        the pairwise composite log-likelihood per row). Weights sum to one.
    min_count : int, default 1
        Pairs co-observed in fewer rows are left out.

    Returns
    -------
    float
        ``sum_{j < k observed} w_jk D(X_jk, M_jk)``.

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals
    >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])] * 3
    >>> m = PairwiseMarginals.from_params([0.5, 0.5], A)
    >>> abs(pairwise_misfit(m, ([0.5, 0.5], A))) < 1e-12
    True
    """
    m = _check_marginals(marginals, "pairwise_misfit")
    obs = _observed(m, min_count, "pairwise_misfit")
    weights, factors = params
    p = check_params(weights, factors, m.n_categories)
    wt = _expand(_pair_weight_matrix(m, obs, pair_weighting), m.n_categories) / 2
    model = _model_joint(p.weights, stack_factors(p.factors))
    x = m.joint
    if divergence == "kl":
        return float(np.sum(wt * (xlogy(x, x) - xlogy(x, np.maximum(model, PROB_FLOOR)))))
    if divergence == "frobenius":
        return float(np.sum(wt * (x - model) ** 2))
    raise ValueError(
        f"The 'divergence' argument must be 'kl' or 'frobenius'. Got {divergence!r}."
    )


# -------------------------------------------------------------------------- CNMF-SPA
def _cut(n_cat, order, share):
    """Split ``order`` where the running sum of I is closest to ``share`` of the total.

    Ties go to the longer S1 (so equal alphabets and ``share = 1/2`` give the paper's
    ``M = ceil(N / 2)``).
    """
    csum = np.cumsum(n_cat[order])[:-1]
    gap = np.abs(csum - share * n_cat.sum())
    cut = int(np.flatnonzero(gap <= gap.min() + 1e-9)[-1]) + 1
    return tuple(sorted(order[:cut].tolist())), tuple(sorted(order[cut:].tolist()))


def _candidate_splits(n_categories, n_splits: int, rng) -> list:
    """Every split up to MAX_ENUMERATED_VARIABLES variables; else cuts of some orders.

    Above that size: the contiguous order, the even/odd interleaving and ``n_splits``
    random orders, each cut at the ``CUT_SHARES`` of sum(I); every split is tried in
    both orientations. The contiguous half split (the paper's ``S1 = {1..M}``,
    ``M = ceil(N / 2)`` for equal alphabets) comes first.
    """
    n_cat = np.asarray(n_categories)
    n_vars = n_cat.size
    if n_vars <= MAX_ENUMERATED_VARIABLES:
        first = _cut(n_cat, np.arange(n_vars), 0.5)
        parts = [first]
        for size in range(n_vars - 1, 0, -1):
            for s1 in itertools.combinations(range(n_vars), size):
                parts.append((s1, tuple(v for v in range(n_vars) if v not in s1)))
    else:
        interleaved = np.concatenate([np.arange(0, n_vars, 2), np.arange(1, n_vars, 2)])
        orders = [np.arange(n_vars), interleaved]
        orders += [rng.permutation(n_vars) for _ in range(n_splits)]
        parts = [_cut(n_cat, order, share) for order in orders for share in CUT_SHARES]
    out, seen = [], set()
    for s1, s2 in parts:
        for cand in ((s1, s2), (s2, s1)):
            if cand not in seen:
                seen.add(cand)
                out.append(cand)
    return out


def _prune_split(s1, s2, observed):
    """Drop variables until every pair (j in S1, k in S2) is observed.

    Greedy: remove the variable with the most unobserved cross pairs (ties: the one on
    the larger side, then the larger index). The dropped variables are recovered from
    their observed pairs afterwards (Theorem 2, condition (iv)).
    """
    s1, s2, rest = list(s1), list(s2), []
    while s1 and s2:
        miss = ~observed[np.ix_(s1, s2)]
        if not miss.any():
            break
        score = [(miss[i].sum(), len(s1), v, 1, i) for i, v in enumerate(s1)]
        score += [(miss[:, i].sum(), len(s2), v, 2, i) for i, v in enumerate(s2)]
        *_, side, i = max(score)
        rest.append((s1 if side == 1 else s2).pop(i))
    return tuple(s1), tuple(s2), rest


def _spa_on_split(joint, offsets, n_cat, rank, s1, s2, observed, batched=False):
    """Alg. 2 for one split; returns (weights, stacked factors, detail) or a reason.

    ``batched``: the NNLS problems by :func:`_nnls_columns` (``cnmf_spa(batched=True)``).
    """
    solve = _nnls_columns if batched else _nnls_rows
    in_split = set(s1) | set(s2)
    outside = [v for v in range(n_cat.size) if v not in in_split]
    s1, s2, rest = _prune_split(s1, s2, observed)
    rest = outside + rest
    i1 = int(n_cat[list(s1)].sum()) if s1 else 0
    i2 = int(n_cat[list(s2)].sum()) if s2 else 0
    if rank > min(i1, i2):
        return (
            f"split {s1} | {s2}: rank {rank} > min(sum I over S1, sum I over S2) = "
            f"{min(i1, i2)} after dropping variables {rest} with unobserved cross pairs"
        )
    rows, cols = _rows(offsets, s1), _rows(offsets, s2)
    x = joint[np.ix_(rows, cols)]  # the virtual NMF matrix, eq. (3) / Alg. 2 line 3
    anchors = spa(x, rank)  # line 4
    factors = {}
    w_hat = x[:, anchors]
    factors.update(zip(s1, _normalize_blocks(w_hat, n_cat[list(s1)])))  # lines 6-10
    w = np.concatenate([factors[v] for v in s1])  # line 18
    h = solve(w, x)  # line 11: X ~ W H^T with H >= 0
    factors.update(zip(s2, _normalize_blocks(h, n_cat[list(s2)])))  # lines 13-17
    hn = np.concatenate([factors[v] for v in s2])  # line 19
    # Line 20, lambda = (H kr W)^+ vec(X), through the normal equations: the Gram
    # matrix of the Khatri-Rao product is (W^T W) * (H^T H) (Hadamard) and its product
    # with vec(X) is diag(W^T X H), so the (I(S1) I(S2), F) product is never formed.
    gram = (w.T @ w) * (hn.T @ hn)
    if batched:  # the same sums as two BLAS products (einsum: 0.03 s at 2000 items)
        rhs = np.sum((w.T @ x) * hn.T, axis=1)
    else:
        rhs = np.einsum("if,ij,jf->f", w, x, hn)
    lam = np.linalg.lstsq(gram, rhs, rcond=None)[0]
    lam = project_simplex(lam)
    unidentified = []
    for v in rest:  # Theorem 2 (iv): A_v from its pairs with identified variables
        known = [r for r in (*s1, *s2) if observed[r, v]]  # r identified above
        if not known:
            unidentified.append(v)
            pmf = joint[offsets[v] : offsets[v + 1], offsets[v] : offsets[v + 1]]
            factors[v] = _normalize_columns(np.repeat(np.diag(pmf)[:, None], rank, 1))
            continue
        g = np.concatenate([factors[r] * lam for r in known])
        y = joint[np.ix_(_rows(offsets, known), _rows(offsets, [v]))]
        factors[v] = _normalize_columns(solve(g, y))
    stacked = np.concatenate([factors[v] for v in range(n_cat.size)])
    detail = {
        "split": (s1, s2),
        "dropped": tuple(rest),
        "unidentified": tuple(unidentified),
        "anchors": anchors,
    }
    return lam, stacked, detail


def _replicate_plan(model, counts, offsets, observed) -> list:
    """What every bootstrap replicate of ``model`` draws (see :func:`_replicate`).

    The observed pairs ``j < k`` in row-major order, in batches of at most
    ``REPLICATE_BATCH_ENTRIES`` block entries (and at least one pair): per batch the
    counts ``n_jk``, the probabilities ``M_jk / sum M_jk`` of each pair right-aligned
    in a zero-padded row, which entries of the padded rows are the blocks' (``take``)
    and where they land in the flattened matrix (``upper``: block ``(j, k)``,
    ``lower``: its transpose ``(k, j)``). It depends on the model only, so the
    replicates of one model share it.
    """
    n_cat = np.diff(offsets)
    n_total = int(offsets[-1])
    jj, kk = np.nonzero(np.triu(observed, k=1))  # row-major: the order of the draws
    size = n_cat[jj] * n_cat[kk]
    n_all = counts[jj, kk].astype(np.int64)  # int(): truncation, as one count per pair
    ends = np.cumsum(size)
    batches, start = [], 0
    while start < jj.size:
        base = ends[start - 1] if start else 0
        stop = max(
            start + 1,
            int(np.searchsorted(ends, base + REPLICATE_BATCH_ENTRIES, side="right")),
        )
        j, k, sz = jj[start:stop], kk[start:stop], size[start:stop]
        first = np.concatenate([[0], np.cumsum(sz)[:-1]])
        pair = np.repeat(np.arange(sz.size), sz)
        local = np.arange(pair.size) - first[pair]  # a * I_k + b within the block
        width = n_cat[k][pair]
        rows = offsets[j][pair] + local // width
        cols = offsets[k][pair] + local % width
        p = np.maximum(model[rows, cols], 0.0)
        total = np.empty(sz.size)
        by_size = np.argsort(sz, kind="stable")
        cuts = np.flatnonzero(np.diff(sz[by_size])) + 1
        for same in np.split(by_size, cuts):  # blocks of one size: np.sum of each
            total[same] = p[first[same][:, None] + np.arange(sz[same[0]])].sum(axis=1)
        length = int(sz.max())
        take = pair * length + (length - sz[pair] + local)  # right-aligned
        pvals = np.zeros((sz.size, length))
        pvals.reshape(-1)[take] = p / total[pair]
        small = np.int32 if max(pvals.size, n_total * n_total) < 2**31 else np.int64
        upper = (rows * n_total + cols).astype(small)
        lower = (cols * n_total + rows).astype(small)
        batches.append((n_all[start:stop], pvals, take.astype(small), upper, lower))
        start = stop
    return batches


def _draw_replicate(out, plan, rng) -> None:
    """Write one draw of every pair of ``plan`` into both triangles of ``out``."""
    flat = out.reshape(-1)
    for n, pvals, take, upper, lower in plan:
        block = (rng.multinomial(n, pvals) / n[:, None]).reshape(-1)[take]
        flat[upper] = block
        flat[lower] = block


def _replicate_base(model, offsets) -> np.ndarray:
    """What every replicate holds besides the draws: zeros, the model's diagonal blocks."""
    out = np.zeros_like(model)
    for j in range(offsets.size - 1):
        rj = slice(int(offsets[j]), int(offsets[j + 1]))
        out[rj, rj] = model[rj, rj]
    return out


def _replicate(model, counts, offsets, observed, rng, plan=None) -> np.ndarray:
    """Pairwise marginals resampled from ``model``: ``Mult(n_jk, M_jk) / n_jk`` per pair.

    Observed pairs only (the others stay zero, as CNMF-SPA never reads them); the
    diagonal blocks are the model's (CNMF-SPA does not read them either).

    The pairs ``j < k`` are drawn in row-major order, a batch of pairs per call of
    ``Generator.multinomial`` (``plan``: :func:`_replicate_plan`, made here when not
    given). A leading zero probability draws nothing from the generator, so the
    right-aligned padded rows give the draws of one call per pair (the same stream),
    while the Python work is per batch, not per pair (N = 2000 variables: 2e6 pairs).
    """
    if plan is None:
        plan = _replicate_plan(model, counts, offsets, observed)
    out = _replicate_base(model, offsets)
    _draw_replicate(out, plan, rng)
    return out


def _param_error(weights, stacked, ref_weights, ref_stacked, n_vars: int) -> float:
    """The factor MSE of Ibrahim & Fu (Sec. 5.2) after Hungarian matching of classes.

    ``||lambda - lambda_ref||^2 + sum_n ||A_n - A_n_ref||_F^2 / (N F)``, the classes
    matched on the stacked factors as :func:`bayespmf.metrics.factor_mse` does.
    """
    _, perm = linear_sum_assignment(-(ref_stacked.T @ stacked))
    rank = weights.size
    err_a = np.sum((stacked[:, perm] - ref_stacked) ** 2) / (n_vars * rank)
    return float(err_a + np.sum((weights[perm] - ref_weights) ** 2))


def _bootstrap_select(fits, m, rank, observed, n_boot, rng, batched=False):
    """Parametric-bootstrap error of every split in ``fits`` (see cnmf_spa, Notes).

    ``fits`` maps split -> (misfit, weights, stacked); the lowest misfit is the
    reference model. Returns {split: mean error over the replicates}. ``batched``:
    as :func:`cnmf_spa`'s.
    """
    ref = min(fits, key=lambda c: fits[c][0])
    _, ref_w, ref_a = fits[ref]
    model = _model_joint(ref_w, ref_a)
    n_cat, offsets = m.n_categories, m.offsets
    err = dict.fromkeys(fits, 0.0)
    plan = _replicate_plan(model, m.counts, offsets, observed)
    x = _replicate_base(model, offsets)  # every replicate overwrites the same entries
    for _ in range(n_boot):
        _draw_replicate(x, plan, rng)
        for cand in fits:
            out = _spa_on_split(x, offsets, n_cat, rank, *cand, observed, batched)
            if isinstance(out, str):  # cannot happen: the split held on the data
                err[cand] = np.inf
                continue
            err[cand] += _param_error(out[0], out[1], ref_w, ref_a, n_cat.size) / n_boot
    return err


def cnmf_spa(
    marginals,
    rank: int,
    *,
    split=None,
    selection: str = "bootstrap",
    n_splits: int = DEFAULT_N_SPLITS,
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
    min_count: int = 1,
    random_state=None,
    batched: bool = False,
) -> tuple[LatentClassParams, dict]:
    """Latent-class parameters from pairwise marginals by CNMF-SPA (Alg. 2).

    Parameters
    ----------
    marginals : PairwiseMarginals
        Empirical or population pairwise marginals of N >= 2 variables.
    rank : int
        Number of latent classes F, in ``[1, max_cnmf_rank(n_categories)]``.
    split : (sequence of int, sequence of int), optional
        The split ``(S1, S2)`` of Alg. 2, line 2 (``S2`` holds the anchor categories,
        ``S1`` the rows of the virtual matrix). Variables in neither part are recovered
        from their observed pairs (Theorem 2, condition (iv)). By default the split is
        chosen from the data, see Notes.
    selection : {"bootstrap", "misfit"}, default "bootstrap"
        How the split is chosen when ``split`` is not given (see Notes):
        "bootstrap" by the estimated factor error of each candidate split under a
        parametric bootstrap of the marginals, "misfit" by the misfit to all observed
        pairs alone (faster; the rule before this option existed).
    n_splits : int, default 4
        Number of random variable orders cut into candidate splits besides the
        contiguous and interleaved ones (only above ``MAX_ENUMERATED_VARIABLES``
        variables; below, every split is a candidate).
    n_bootstrap : int, default 8
        Bootstrap replicates of the marginals for ``selection="bootstrap"``.
    min_count : int, default 1
        A pair co-observed in fewer rows counts as unobserved.
    random_state : None, int or numpy.random.Generator
        Seeds the random splits and the bootstrap replicates.
    batched : bool, default False
        For many variables: solve the NNLS problems of a split for all columns at once
        (exact NNLS by enumerating the supports, up to ``MAX_ENUMERATED_NNLS_RANK``
        classes) and compute the candidates' misfits from the factors' rank-F form
        instead of the full model matrix. The same estimate up to rounding (splits
        whose misfits tie to rounding may be ranked the other way); on 2000 binary
        items it cuts a candidate split from about 0.4 s to 0.2 s.
        ``fit_latent_class``'s default uses it on wide data.

    Returns
    -------
    params : LatentClassParams
        ``weights`` (F,) on the simplex and ``factors`` (I_n, F), column-stochastic.
    info : dict
        ``split`` (S1, S2) chosen, ``anchors`` (the SPA-selected columns of the
        virtual matrix), ``dropped`` (variables outside the split used: left out of a
        given ``split``, or moved out because a cross pair was unobserved; recovered by
        Theorem 2 (iv)), ``unidentified`` (variables with no observed pair: their
        columns are their one-way PMF), ``misfit`` (the chosen split's),
        ``candidates`` (list of ``(split, misfit or reason)`` for every split tried),
        ``selection`` (the rule that decided: "bootstrap", or "misfit" when it was
        asked for, only one candidate was left, or the fit was exact) and
        ``bootstrap_error`` (list of ``(split, estimated factor MSE)`` for the
        bootstrapped candidates; empty without a bootstrap).

    Raises
    ------
    DataValidationError
        ``marginals`` not a PairwiseMarginals, fewer than two variables, no observed
        pair, ``rank`` above what any split can identify, or no split usable.
    ValueError
        ``rank < 1`` or another malformed integer argument.

    Notes
    -----
    For a split ``(S1, S2)`` the blocks ``X_jk``, ``j in S1``, ``k in S2``, form the
    virtual NMF matrix ``X = W diag(lambda) H^T`` with ``W``, ``H`` the stacked factors
    of ``S1``, ``S2`` (eq. (3)). If ``H`` is separable (each class has a category of an
    ``S2`` variable that occurs only in that class) SPA on the l1-normalized columns of
    ``X`` finds one anchor column per class, ``X(:, Lambda) = W Sigma`` (line 4); each
    ``S1`` block of it, column-normalized, is ``A_j`` (lines 6-10). ``H`` follows by
    nonnegative least squares ``min_{H >= 0} ||X - W H^T||_F`` (line 11,
    :func:`scipy.optimize.nnls` per column) and each ``S2`` block, column-normalized,
    is ``A_k`` (lines 13-17). The prior is the Khatri--Rao least-squares solution
    ``lambda = (H kr W)^+ vec(X)`` (line 20), solved through its normal equations
    ``((W^T W) * (H^T H)) lambda = diag(W^T X H)`` and projected onto the simplex.
    Variables outside ``S1 u S2`` get ``A_j`` by NNLS on their observed pairs
    ``X_rj = A_r diag(lambda) A_j^T`` (Theorem 2 (iv)).

    **Choosing the split.** The paper fixes ``S1 = {1..M}`` (``M = 3`` in its
    experiments, where the generator puts the anchor rows in ``S2``). Here, unless
    ``split`` is given, the candidates are every split of up to
    ``MAX_ENUMERATED_VARIABLES`` variables, else cuts of the contiguous, the even/odd
    interleaved and ``n_splits`` random variable orders at 1/2 and 1/4 of ``sum I_n``,
    each in both orientations (the contiguous half split with ``M = ceil(N / 2)``
    first). Every candidate is fitted and scored by its count-weighted squared
    Frobenius misfit to *all* observed pairs, ``sum_{j<k} n_jk ||X_jk - A_j
    diag(lambda) A_k^T||_F^2 / sum n_jk`` (:func:`pairwise_misfit` with
    ``divergence="frobenius", pair_weighting="counts"``; Frobenius because NNLS
    factors have exact zeros, where KL is infinite).

    The misfit separates splits whose ``H`` is separable from the others (2-12x on the
    paper's Table 1 generator), but among the separable ones it is a poor guide to
    the factor error: it is an in-sample fit to the same noisy marginals, its
    differences there are a few percent and mostly noise, and it does not see how the
    error is made -- ``S1`` factors come from single anchor columns, ``S2`` factors
    and ``lambda`` from regressions on ``W`` whose conditioning grows with ``S1``. With
    ``selection="bootstrap"`` the candidates within ``BOOTSTRAP_MISFIT_RATIO`` of the
    best misfit (at most ``MAX_BOOTSTRAPPED``) are therefore compared by a parametric
    bootstrap: ``n_bootstrap`` replicates ``X*_jk ~ Mult(n_jk, M_jk) / n_jk`` are
    drawn from the model ``M`` of the lowest-misfit split, every candidate is refitted
    on each (the same replicates for all, a paired comparison), and the split with
    the smallest mean factor MSE (:func:`bayespmf.metrics.factor_mse`'s definition)
    against that model wins; this estimates each split's bias (a non-separable ``H``)
    and variance together. Exact marginals (misfit at most ``OBJECTIVE_FLOOR``) skip
    the bootstrap. On the Table 1 generator (N = 5, F = 5, I = 10) the bootstrap
    mostly picks ``S2`` = the one variable holding the anchor rows and has a lower
    mean factor MSE than the fixed ``M = 3`` split at S = 1e4 and 1e5 (12 seeds; at
    S = 1e3 the two are within noise); at N = 15 (Table 4) it is 1.5-1.7x better
    than ``M = 3`` (``benchmarks/cnmf_tables.py --tables splits``). Cost: one
    CNMF-SPA per candidate and replicate, 0.1-0.8 s at these sizes.

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals
    >>> A = [np.array([[0.8, 0.0], [0.2, 0.3], [0.0, 0.7]])] * 4
    >>> m = PairwiseMarginals.from_params([0.4, 0.6], A)
    >>> params, info = cnmf_spa(m, 2, random_state=0)
    >>> np.sort(params.weights).round(6)
    array([0.4, 0.6])
    """
    owner = "cnmf_spa"
    m = _check_marginals(marginals, owner)
    n_cat = m.n_categories
    rank = check_rank(rank, n_cat, owner)
    selection = check_choice(selection, "selection", SELECTIONS, owner)
    n_splits = check_int(n_splits, "n_splits", owner=owner, low=0)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", owner=owner, low=1)
    if not isinstance(batched, bool | np.bool_):
        raise ValueError(
            f"The 'batched' argument of {owner} must be True or False. Got {batched!r}."
        )
    observed = _observed(m, min_count, owner)
    rng = check_random_state(random_state)
    if split is None:
        candidates = _candidate_splits(n_cat, n_splits, rng)
    else:
        candidates = [_check_split(split, n_cat.size, owner)]
    pair_w = _pair_weight_matrix(m, observed, "counts")
    wt = _expand(pair_w, n_cat)
    wt /= 2
    joint, offsets = m.joint, m.offsets
    fits, details, tried = {}, {}, []
    work = None if batched else np.empty_like(joint)  # the misfit's buffer
    if batched:
        wj = wt * joint
        c0 = float(np.vdot(wj, joint))
    for cand in candidates:
        out = _spa_on_split(joint, offsets, n_cat, rank, *cand, observed, batched)
        if isinstance(out, str):
            tried.append((cand, out))
            continue
        lam, stacked, details[cand] = out
        if batched:
            misfit = _misfit_factored(wj, c0, pair_w, offsets, lam, stacked)
        else:
            misfit = _misfit_direct(joint, wt, lam, stacked, work)
        tried.append((cand, misfit))
        fits[cand] = (misfit, lam, stacked)
    if not fits:
        reasons = "; ".join(reason for _, reason in tried)
        raise DataValidationError(
            f"No split of the variables supports rank {rank} in {owner}: {reasons}. "
            "Lower 'rank', lower 'min_count', or pass a 'split' whose cross pairs are "
            "all observed."
        )
    best = min(fits, key=lambda c: fits[c][0])  # the first of ties
    if batched and selection == "bootstrap":  # summed directly for OBJECTIVE_FLOOR
        work = np.empty_like(joint)
        fits[best] = (_misfit_direct(joint, wt, *fits[best][1:], work), *fits[best][1:])
    boot = {}
    ranked = sorted(fits, key=lambda c: fits[c][0])[:MAX_BOOTSTRAPPED]
    limit = BOOTSTRAP_MISFIT_RATIO * fits[best][0]
    shortlist = {c: fits[c] for c in ranked if fits[c][0] <= limit}
    if selection == "bootstrap" and len(shortlist) > 1 and fits[best][0] > OBJECTIVE_FLOOR:
        boot = _bootstrap_select(
            shortlist, m, rank, observed, n_bootstrap, rng, batched=batched
        )
        best = min(boot, key=lambda c: (boot[c], fits[c][0]))
    misfit, lam, stacked = fits[best]
    params = LatentClassParams(lam, split_factors(stacked, n_cat))
    info = {
        **details[best],
        "misfit": misfit,
        "candidates": tried,
        "selection": selection if boot else "misfit",
        "bootstrap_error": list(boot.items()),
    }
    return params, info


# -------------------------------------------------------------------------- CNMF-OPT
@functools.cache
def _compiled_kl():
    """Compile the coupled KL objective and its gradients once per process.

    Inputs are the stacked factors ``A`` (sum I, F), ``lam`` (F,), the block weight
    matrix ``wt`` (sum I, sum I), the joint block matrix ``x`` and ``log_x`` (0 where
    ``x`` is 0). Shapes are free, so one compiled pair of functions serves every
    problem. The generalized KL ``x log(x / m) - x + m`` is summed term by term: each
    term is nonnegative and of second order in ``m - x``, so the objective keeps its
    precision down to ~1e-30 instead of the ~1e-15 left by ``sum x log x - sum x log
    m``. (The extra ``m - x`` adds a column-constant to the gradient of every block,
    which exponentiated-gradient steps with renormalization ignore.)
    """
    a = pt.dmatrix("A")
    lam = pt.dvector("lam")
    wt = pt.dmatrix("wt")
    x = pt.dmatrix("x")
    log_x = pt.dmatrix("log_x")
    model = pt.dot(a * lam[None, :], a.T)
    log_m = pt.log(pt.maximum(model, PROB_FLOOR))
    obj = pt.sum(wt * (x * (log_x - log_m) - x + model))
    g_a, g_lam = pytensor.grad(obj, [a, lam])
    inputs = [a, lam, wt, x, log_x]
    value = pytensor.function(inputs, obj, trust_input=True)
    value_grad = pytensor.function(inputs, [obj, g_a, g_lam], trust_input=True)
    return value, value_grad


def _interior(p: np.ndarray) -> np.ndarray:
    return (1.0 - INIT_SMOOTHING) * p + INIT_SMOOTHING / p.shape[0]


def check_init_params(init, n_categories, rank: int, owner: str) -> LatentClassParams:
    """A given starting point ``(weights, factors)`` checked against the data and rank.

    Raises
    ------
    DataValidationError
        ``init`` not a pair, factors of the wrong shapes, or not ``rank`` classes.

    Examples
    --------
    >>> check_init_params(([1.0], [np.ones((2, 1)) / 2]), [2], 1, "me").weights
    array([1.])
    """
    try:
        weights, factors = init
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"The 'init' argument of {owner} must be a (weights, factors) pair. "
            f"Got {type(init).__name__}."
        ) from err
    p = check_params(weights, factors, n_categories)
    if p.weights.size != rank:
        raise DataValidationError(
            f"The 'init' of {owner} has {p.weights.size} classes but rank={rank}."
        )
    return p


def _check_init(init, marginals, rank, rng, owner):
    n_cat = marginals.n_categories
    if init is None or (isinstance(init, str) and init == "random"):
        factors = [_normalize_columns(rng.uniform(size=(int(i), rank))) for i in n_cat]
        weights = _normalize_columns(rng.uniform(size=(rank, 1)))[:, 0]
        return weights, stack_factors(factors)
    if isinstance(init, str) and init == "cnmf-spa":
        init, _ = cnmf_spa(marginals, rank, random_state=rng)
    elif isinstance(init, str):
        raise ValueError(
            f"The 'init' argument of {owner} must be None, 'random', 'cnmf-spa' or a "
            f"LatentClassParams / (weights, factors) pair. Got {init!r}."
        )
    p = check_init_params(init, n_cat, rank, owner)
    stacked = np.concatenate([_interior(a) for a in p.factors])
    return _interior(p.weights[:, None])[:, 0], stacked


def _eg_block(x, grad, f0, evaluate, step):
    """One exponentiated-gradient step on the columns of ``x`` with Armijo backtracking.

    Returns ``(x_new, f_new, step_used)``; ``x`` itself when no step decreases ``f``.
    """
    shifted = grad - grad.min(axis=0, keepdims=True)  # exp(.) <= 1: no overflow
    for _ in range(MAX_BACKTRACK):
        cand = x * np.exp(-step * shifted)
        cand = np.maximum(cand / cand.sum(axis=0, keepdims=True), PROB_FLOOR)
        cand /= cand.sum(axis=0, keepdims=True)
        f_new = evaluate(cand)
        if f_new <= f0 + ARMIJO_C * np.sum(grad * (cand - x)):
            return cand, f_new, step
        step *= STEP_SHRINK
    return x, f0, step


class CNMFOptProblem(NamedTuple):
    """The data of CNMF-OPT's objective, built once by :func:`cnmf_opt_init`.

    Attributes
    ----------
    pair_weights : ndarray, shape (sum I, sum I)
        Block weights ``w_jk / 2`` (0 off the observed off-diagonal blocks).
    joint, log_joint : ndarray, shape (sum I, sum I)
        The pairwise marginals as one block matrix, and its log (0 where it is 0).
    blocks : tuple of slice
        The rows of every variable in the stacked factors.
    n_categories : ndarray of int
    """

    pair_weights: np.ndarray
    joint: np.ndarray
    log_joint: np.ndarray
    blocks: tuple
    n_categories: np.ndarray


class CNMFOptState(NamedTuple):
    """One CNMF-OPT iterate.

    Attributes
    ----------
    weights : ndarray, shape (F,)
        ``lambda``.
    factors_stacked : ndarray, shape (sum I, F)
        The factors ``A_n`` stacked row-wise.
    misfit : float
        The objective (to minimize) at this iterate.
    steps : ndarray, shape (N + 1,)
        The last accepted mirror-descent step of every block (``A_1..A_N``, lambda).
    """

    weights: np.ndarray
    factors_stacked: np.ndarray
    misfit: float
    steps: np.ndarray


class CNMFOptInfo(NamedTuple):
    """What one :func:`cnmf_opt_step` (a sweep) reports.

    Attributes
    ----------
    objective : float
        Minus the misfit of the state the sweep was given (an objective to maximize).
    n_evals : int
        Sweeps (1).
    misfit : float
        The misfit after the sweep.
    """

    objective: float
    n_evals: int
    misfit: float


def cnmf_opt_init(
    marginals,
    rank: int,
    *,
    init=None,
    pair_weighting: str = "uniform",
    min_count: int = 1,
    random_state=None,
    owner: str = "cnmf_opt",
) -> tuple[CNMFOptProblem, CNMFOptState]:
    """Validate CNMF-OPT's inputs; build its problem and starting state.

    Parameters are those of ``bayespmf.fit.cnmf.cnmf_opt`` (``owner`` names it in
    errors).

    Returns
    -------
    problem : CNMFOptProblem
    state : CNMFOptState

    Raises
    ------
    DataValidationError, ValueError
        As ``cnmf_opt``.

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals
    >>> A = [np.array([[0.7, 0.1], [0.2, 0.3], [0.1, 0.6]])] * 4
    >>> m = PairwiseMarginals.from_params([0.4, 0.6], A)
    >>> problem, state = cnmf_opt_init(m, 2, init="cnmf-spa", random_state=0)
    >>> state, info = cnmf_opt_step(state, problem)
    >>> bool(info.misfit <= -info.objective)
    True
    """
    m = _check_marginals(marginals, owner)
    n_cat = m.n_categories
    rank = check_rank(rank, n_cat, owner)
    observed = _observed(m, min_count, owner)
    wt = _expand(_pair_weight_matrix(m, observed, pair_weighting), n_cat) / 2
    rng = check_random_state(random_state)
    lam, a = _check_init(init, m, rank, rng, owner)
    x = np.ascontiguousarray(m.joint, dtype=np.float64)
    wt = np.ascontiguousarray(wt)
    log_x = np.log(x, out=np.zeros_like(x), where=x > 0)
    offsets = m.offsets
    blocks = tuple(slice(int(offsets[n]), int(offsets[n + 1])) for n in range(n_cat.size))
    problem = CNMFOptProblem(wt, x, log_x, blocks, n_cat)
    a = np.ascontiguousarray(a)
    lam = np.ascontiguousarray(lam)
    value, _ = _compiled_kl()
    f = float(value(a, lam, wt, x, log_x))
    return problem, CNMFOptState(lam, a, f, np.full(len(blocks) + 1, INITIAL_STEP))


def cnmf_opt_step(
    state: CNMFOptState, problem: CNMFOptProblem
) -> tuple[CNMFOptState, CNMFOptInfo]:
    """One sweep of CNMF-OPT (Alg. 1, lines 4-7): ``A_1, ..., A_N``, then ``lambda``.

    Every block takes one exponentiated-gradient step with Armijo backtracking from
    twice its last accepted step (see ``bayespmf.fit.cnmf.cnmf_opt``, Notes), so the
    misfit never rises. ``state`` is not modified.
    """
    value, value_grad = _compiled_kl()
    data = (problem.pair_weights, problem.joint, problem.log_joint)
    a = state.factors_stacked.copy()
    lam = state.weights
    steps = state.steps.copy()
    f = state.misfit
    for b, blk in enumerate(problem.blocks):  # Alg. 1, lines 4-6
        _, g_a, _ = value_grad(a, lam, *data)

        def eval_block(cand, blk=blk):
            trial = a.copy()
            trial[blk] = cand
            return float(value(trial, lam, *data))

        new, f, used = _eg_block(a[blk], g_a[blk], f, eval_block, steps[b])
        a[blk] = new
        steps[b] = min(used * STEP_GROW, MAX_STEP)
    _, _, g_lam = value_grad(a, lam, *data)  # line 7

    def eval_lam(cand):
        return float(value(a, np.ascontiguousarray(cand[:, 0]), *data))

    new, f, used = _eg_block(lam[:, None], g_lam[:, None], f, eval_lam, steps[-1])
    steps[-1] = min(used * STEP_GROW, MAX_STEP)
    new_state = CNMFOptState(np.ascontiguousarray(new[:, 0]), a, f, steps)
    return new_state, CNMFOptInfo(-state.misfit, 1, f)
