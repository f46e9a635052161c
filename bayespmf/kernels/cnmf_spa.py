"""CNMF-SPA (Ibrahim & Fu, Alg. 2): latent-class parameters from pairwise marginals.

:func:`cnmf_spa` recovers the factors in closed form from one "virtual NMF" matrix
of a split of the variables by the successive projection algorithm [2]_, with the
split chosen among candidates by misfit and a parametric bootstrap
(:mod:`bayespmf.kernels._cnmf_bootstrap`); what it shares with CNMF-OPT is
:mod:`bayespmf.kernels.cnmf_common`.

References
----------
.. [1] S. Ibrahim and X. Fu, "Recovering joint probability of discrete random variables
   from pairwise marginals," IEEE Trans. Signal Process. 69, 2021.
.. [2] N. Gillis and S. A. Vavasis, "Fast and robust recursive algorithms for
   separable nonnegative matrix factorization," IEEE TPAMI 36(4), 2014.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linear_sum_assignment, lsq_linear, nnls

from bayespmf._validation import (
    DataValidationError,
    check_choice,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.kernels._cnmf_bootstrap import draw_replicate, replicate_base, replicate_plan
from bayespmf.kernels.cnmf_common import (
    OBJECTIVE_FLOOR,
    check_marginals,
    check_n_components,
    expand_pair_weights,
    model_joint,
    normalize_blocks,
    normalize_columns,
    observed_pairs,
    pair_weight_matrix,
)
from bayespmf.kernels.simplex import project_simplex
from bayespmf.kernels.spa import spa
from bayespmf.pmf import LatentClassParams, split_factors

__all__ = [
    "BOOTSTRAP_MISFIT_RATIO",
    "CUT_SHARES",
    "DEFAULT_CNMF_N_BOOTSTRAP",
    "DEFAULT_N_SPLITS",
    "MAX_BOOTSTRAPPED",
    "MAX_ENUMERATED_NNLS_RANK",
    "MAX_ENUMERATED_VARIABLES",
    "SELECTIONS",
    "cnmf_spa",
]

#: Default number of random variable orders CNMF-SPA cuts into candidate splits
#: besides the contiguous and interleaved ones (only above
#: ``MAX_ENUMERATED_VARIABLES`` variables; below, every split is tried).
DEFAULT_N_SPLITS = 4

#: Up to this many variables CNMF-SPA tries every split (2**N - 2 oriented splits: 62
#: at N = 6). Each costs one SPA and one NNLS, a few milliseconds at N <= 6, I = 10
#: (:ref:`bench-cnmf`).
MAX_ENUMERATED_VARIABLES = 6

#: Shares of sum(I) that the first part S1 of a cut variable order receives. With both
#: orientations this gives splits with S1 holding about 1/4, 1/2 and 3/4 of the
#: categories: a large S1 conditions W (the rows of the NNLS for H) better, a large S2
#: is more likely to hold separable anchor rows; the bootstrap weighs the two.
CUT_SHARES = (0.5, 0.25)

#: Bootstrap replicates of the pairwise marginals that score the candidate splits
#: (split selection "bootstrap"). Every candidate sees the same replicates, so the
#: comparison is paired. On the CNMF paper's Table 1 generator the chosen split's
#: factor MSE improved little beyond 8 replicates, and every count beat the fixed
#: M = 3 split (:ref:`bench-cnmf`).
DEFAULT_CNMF_N_BOOTSTRAP = 8

#: Candidates whose misfit exceeds this multiple of the smallest are not bootstrapped,
#: and at most MAX_BOOTSTRAPPED of the others (the lowest misfits). A split without
#: separable anchor rows in S2 is biased: on the Table 1 generator its misfit was
#: several times the best at large S, while every split the bootstrap preferred was
#: within this ratio; 1.5 and 2 chose the same splits there (:ref:`bench-cnmf`).
BOOTSTRAP_MISFIT_RATIO = 1.5
MAX_BOOTSTRAPPED = 16

#: Split selection rules of :func:`cnmf_spa`.
SELECTIONS = ("bootstrap", "misfit")
#: How ``cnmf_spa`` estimates the class weights (its ``prior``).
PRIORS = ("ls", "anchors")

#: ``cnmf_spa(batched=True)`` solves the NNLS problems of a split all at once by
#: enumerating the ``2**F - 1`` supports (:func:`_nnls_columns`) up to this rank (63
#: supports); above it, one active-set NNLS per column as without ``batched``.
MAX_ENUMERATED_NNLS_RANK = 6


# ------------------------------------------------------------------------- splits
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


# ------------------------------------------------------------- one split (Alg. 2)
def _rows(offsets, variables) -> np.ndarray:
    return np.concatenate([np.arange(offsets[v], offsets[v + 1]) for v in variables])


def _nnls(G: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``argmin_{b >= 0} ||y - G b||``: :func:`scipy.optimize.nnls`, or BVLS where it fails.

    SciPy's active-set NNLS stops with a ``RuntimeError`` after ``3 n`` iterations
    when it cycles on a nearly singular ``G``; the same problem is then solved by
    bounded-variable least squares (:func:`scipy.optimize.lsq_linear`, ``"bvls"``).
    """
    try:
        return nnls(G, y)[0]
    except RuntimeError:
        return lsq_linear(G, y, bounds=(0.0, np.inf), method="bvls").x


def _nnls_rows(G: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``argmin_{B >= 0} ||Y - G B^T||_F``, column by column of ``Y``; (Y cols, F)."""
    out = np.empty((Y.shape[1], G.shape[1]))
    for q in range(Y.shape[1]):
        out[q] = _nnls(G, Y[:, q])
    return out


def _nnls_columns(G: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """:func:`_nnls_rows` for all columns of ``Y`` at once, by enumerating supports.

    An NNLS solution is the least-squares solution on its support (the KKT
    conditions), so among the supports whose least-squares solution is nonnegative the
    one with the smallest residual gives it (the empty support, ``0``, is always
    feasible). Every support is solved for all columns in one call on the normal
    equations, so the cost is ``2**F - 1`` small solves instead of one
    :func:`scipy.optimize.nnls` per column (CNMF-SPA on 2000 binary items: 64,000
    calls; :ref:`bench-wide-data`). The same solution up to rounding, not bit for
    bit: used by ``cnmf_spa(batched=True)`` only. Above ``MAX_ENUMERATED_NNLS_RANK``
    columns of ``G`` it falls back to :func:`_nnls_rows`.
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


def _ridge_solver(solve, ridge: float):
    """``solve(G, Y)`` of Tikhonov-regularized NNLS: ``cnmf_spa(ridge=...)``, Notes.

    ``argmin_{B >= 0} ||Y - G B^T||_F^2 + c ||B||_F^2`` with ``c = ridge * ||G||_F^2 /
    F`` (``ridge`` times the mean squared column norm of ``G``, so the weight does not
    depend on the scale of the marginals), solved as the NNLS of the augmented system
    ``[G; sqrt(c) I] B^T = [Y; 0]``. ``ridge = 0``: ``solve`` itself.
    """
    if ridge == 0.0:
        return solve

    def solve_ridge(G, Y):
        n_f = G.shape[1]
        c = ridge * float(np.sum(G * G)) / n_f
        if c <= 0.0:
            return solve(G, Y)
        g = np.vstack([G, np.sqrt(c) * np.eye(n_f)])
        return solve(g, np.vstack([Y, np.zeros((n_f, Y.shape[1]))]))

    return solve_ridge


def _spa_on_split(
    joint,
    offsets,
    n_cat,
    n_components,
    s1,
    s2,
    observed,
    batched=False,
    ridge=0.0,
    prior="ls",
):
    """Alg. 2 for one split; returns (weights, stacked factors, detail) or a reason.

    ``batched``: the NNLS problems by :func:`_nnls_columns` (``cnmf_spa(batched=True)``);
    ``ridge``: their Tikhonov weight (:func:`_ridge_solver`); ``prior``: how lambda is
    estimated (``cnmf_spa(prior=...)``).
    """
    solve = _ridge_solver(_nnls_columns if batched else _nnls_rows, ridge)
    in_split = set(s1) | set(s2)
    outside = [v for v in range(n_cat.size) if v not in in_split]
    s1, s2, rest = _prune_split(s1, s2, observed)
    rest = outside + rest
    i1 = int(n_cat[list(s1)].sum()) if s1 else 0
    i2 = int(n_cat[list(s2)].sum()) if s2 else 0
    if n_components > min(i1, i2):
        return (
            f"split {s1} | {s2}: rank {n_components} > min(sum I over S1, sum I over S2) = "
            f"{min(i1, i2)} after dropping variables {rest} with unobserved cross pairs"
        )
    rows, cols = _rows(offsets, s1), _rows(offsets, s2)
    x = joint[np.ix_(rows, cols)]  # the virtual NMF matrix, eq. (3) / Alg. 2 line 3
    anchors = spa(x, n_components)  # line 4
    factors = {}
    w_hat = x[:, anchors]
    factors.update(zip(s1, normalize_blocks(w_hat, n_cat[list(s1)])))  # lines 6-10
    w = np.concatenate([factors[v] for v in s1])  # line 18
    h = solve(w, x)  # line 11: X ~ W H^T with H >= 0
    factors.update(zip(s2, normalize_blocks(h, n_cat[list(s2)])))  # lines 13-17
    hn = np.concatenate([factors[v] for v in s2])  # line 19
    # Line 20, lambda = (H kr W)^+ vec(X), through the normal equations: the Gram
    # matrix of the Khatri-Rao product is (W^T W) * (H^T H) (Hadamard) and its product
    # with vec(X) is diag(W^T X H), so the (I(S1) I(S2), F) product is never formed.
    gram = (w.T @ w) * (hn.T @ hn)
    if batched:  # the same sums as two BLAS products (faster than einsum on wide data)
        rhs = np.sum((w.T @ x) * hn.T, axis=1)
    else:
        rhs = np.einsum("if,ij,jf->f", w, x, hn)
    lam = np.linalg.lstsq(gram, rhs, rcond=None)[0]
    lam = project_simplex(lam)
    if prior == "anchors":
        lam = _anchor_prior(w_hat, solve(w_hat, x), n_cat[list(s1)], n_cat[list(s2)], lam)
    unidentified = []
    for v in rest:  # Theorem 2 (iv): A_v from its pairs with identified variables
        known = [r for r in (*s1, *s2) if observed[r, v]]  # r identified above
        if not known:
            unidentified.append(v)
            pmf = joint[offsets[v] : offsets[v + 1], offsets[v] : offsets[v + 1]]
            factors[v] = normalize_columns(
                np.repeat(np.diag(pmf)[:, None], n_components, 1)
            )
            continue
        g = np.concatenate([factors[r] * lam for r in known])
        y = joint[np.ix_(_rows(offsets, known), _rows(offsets, [v]))]
        factors[v] = normalize_columns(solve(g, y))
    stacked = np.concatenate([factors[v] for v in range(n_cat.size)])
    detail = {
        "split": (s1, s2),
        "dropped": tuple(rest),
        "unidentified": tuple(unidentified),
        "anchors": anchors,
    }
    return lam, stacked, detail


def _anchor_prior(w_hat, h_hat, n1, n2, fallback) -> np.ndarray:
    """The class weights from the scales of X ~ X(:, Lambda) H^T (``SingleSPA.m``).

    ``X ~ W_hat H_hat^T`` with ``W_hat = X(:, Lambda)``: for every class, the largest
    column sum over the ``S1`` blocks of ``W_hat`` times the largest over the ``S2``
    blocks of ``H_hat``, normalized; ``fallback`` where every product is 0.
    """

    def block_max(m, sizes):
        ends = np.cumsum(sizes)
        return np.max([m[e - k : e].sum(axis=0) for e, k in zip(ends, sizes)], axis=0)

    lam = block_max(w_hat, n1) * block_max(h_hat, n2)
    total = float(np.sum(lam))
    return lam / total if total > 0 else fallback


def _misfit_direct(joint, wt, lam, stacked, work) -> float:
    """``sum(wt * (joint - model) ** 2)``, in place in ``work`` (joint's shape)."""
    np.matmul(stacked * lam, stacked.T, out=work)  # model_joint(lam, stacked)
    np.subtract(joint, work, out=work)
    np.square(work, out=work)
    np.multiply(wt, work, out=work)
    return float(np.sum(work))


def _misfit_factored(wj, c0, pair_w, offsets, lam, stacked) -> float:
    """``sum(wt * (joint - model) ** 2)`` from the rank-F form of the model.

    ``wj = wt * joint`` and ``c0 = sum(wj * joint)`` are computed once per data set;
    ``wt`` is ``expand_pair_weights(pair_w) / 2``. The cross term is
    ``sum_f lambda_f a_f^T wj a_f`` and the model term
    ``sum_{f,g} lambda_f lambda_g s_fg^T pair_w s_fg / 2`` with ``s_fg`` the
    per-variable sums of ``a_f * a_g``: one ``(sum I)^2 x F`` product instead of five
    passes over the ``(sum I)^2`` model (:ref:`bench-wide-data`).
    Equal to the direct sum up to rounding (relative ~1e-14 of ``c0``):
    ``cnmf_spa(batched=True)`` only.
    """
    n_components = lam.size
    cross = float(np.sum(stacked * (wj @ (stacked * lam))))
    prod = (stacked[:, :, None] * stacked[:, None, :]).reshape(stacked.shape[0], -1)
    sums = np.add.reduceat(prod, offsets[:-1], axis=0)  # (N, F * F)
    scale = np.outer(lam, lam).reshape(n_components * n_components)
    model_sq = float(np.sum((pair_w @ sums) * sums * scale)) / 2.0
    return max(c0 - 2.0 * cross + model_sq, 0.0)


# -------------------------------------------------------------- choosing the split
def _param_error(weights, stacked, ref_weights, ref_stacked, n_vars: int) -> float:
    """The factor MSE of Ibrahim & Fu (Sec. 5.2) after Hungarian matching of classes.

    ``||lambda - lambda_ref||^2 + sum_n ||A_n - A_n_ref||_F^2 / (N F)``, the classes
    matched on the stacked factors as :func:`bayespmf.metrics.factor_mse` does.
    """
    _, perm = linear_sum_assignment(-(ref_stacked.T @ stacked))
    n_components = weights.size
    err_a = np.sum((stacked[:, perm] - ref_stacked) ** 2) / (n_vars * n_components)
    return float(err_a + np.sum((weights[perm] - ref_weights) ** 2))


def _bootstrap_select(
    fits, m, n_components, observed, n_boot, rng, batched=False, ridge=0.0, prior="ls"
):
    """Parametric-bootstrap error of every split in ``fits`` (see cnmf_spa, Notes).

    ``fits`` maps split -> (misfit, weights, stacked); the lowest misfit is the
    reference model. Returns {split: mean error over the replicates}. ``batched``,
    ``ridge``, ``prior``: as :func:`cnmf_spa`'s.
    """
    ref = min(fits, key=lambda c: fits[c][0])
    _, ref_w, ref_a = fits[ref]
    model = model_joint(ref_w, ref_a)
    n_cat, offsets = m.n_categories, m.offsets
    err = dict.fromkeys(fits, 0.0)
    plan = replicate_plan(model, m.counts, offsets, observed)
    x = replicate_base(model, offsets)  # every replicate overwrites the same entries
    for _ in range(n_boot):
        draw_replicate(x, plan, rng)
        for cand in fits:
            out = _spa_on_split(
                x, offsets, n_cat, n_components, *cand, observed, batched, ridge, prior
            )
            if isinstance(out, str):  # cannot happen: the split held on the data
                err[cand] = np.inf
                continue
            err[cand] += _param_error(out[0], out[1], ref_w, ref_a, n_cat.size) / n_boot
    return err


def cnmf_spa(
    marginals,
    n_components: int,
    *,
    split=None,
    selection: str = "bootstrap",
    n_splits: int = DEFAULT_N_SPLITS,
    n_bootstrap: int = DEFAULT_CNMF_N_BOOTSTRAP,
    min_count: int = 1,
    random_state=None,
    batched: bool = False,
    ridge: float = 0.0,
    prior: str = "ls",
) -> tuple[LatentClassParams, dict]:
    """Latent-class parameters from pairwise marginals by CNMF-SPA (Alg. 2).

    Parameters
    ----------
    marginals : PairwiseMarginals
        Empirical or population pairwise marginals of N >= 2 variables.
    n_components : int
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
        whose misfits tie to rounding may be ranked the other way); on wide binary
        data it halves the cost of a candidate split (:ref:`bench-wide-data`).
        ``fit_latent_class``'s default uses it on wide data.
    ridge : float, default 0.0
        Tikhonov weight of the nonnegative least-squares steps (line 11 and Theorem 2
        (iv)), relative to the mean squared column norm of their design matrix; 0 is
        Alg. 2's exact NNLS. See Notes, "Regularized H".
    prior : {"ls", "anchors"}, default "ls"
        How the class weights lambda are estimated: "ls" by Alg. 2, line 20 (the
        Khatri-Rao least-squares solution, projected onto the simplex); "anchors" as
        the authors' released ``SingleSPA.m`` does, from the scales of the
        unnormalized factorization ``X ~ X(:, Lambda) H^T`` (see Notes, "The prior").

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
        bootstrapped candidates; empty without a bootstrap), ``ridge``, ``prior``.

    Raises
    ------
    DataValidationError
        ``marginals`` not a PairwiseMarginals, fewer than two variables, no observed
        pair, ``n_components`` above what any split can identify, or no split usable.
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

    The misfit separates splits whose ``H`` is separable from the others (by a factor
    of several on the paper's Table 1 generator, :ref:`bench-cnmf`), but among the
    separable ones it is a poor guide to the factor error: it is an in-sample fit to
    the same noisy marginals, its differences there are a few percent and mostly
    noise, and it does not see how the
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
    the bootstrap. On the Table 1 generator the bootstrap mostly picks ``S2`` = the
    one variable holding the anchor rows; ``benchmarks/cnmf_spa_splits.py`` compares
    the rules with the paper's fixed ``M = 3``. Cost: one CNMF-SPA per candidate and
    replicate.

    **Regularized H.** Line 11 is a least-squares problem in ``W``, the
    column-normalized anchor columns; when the anchor columns are nearly collinear
    (few categories in ``S1``, classes that differ in few variables) it is
    ill-conditioned and its exact NNLS solution fits sampling noise, putting exact
    zeros in ``H`` where the population factor is small but positive. With
    ``ridge = r > 0`` every NNLS step solves instead the Tikhonov-regularized problem
    ``min_{H >= 0} ||X - W H^T||_F^2 + c ||H||_F^2``, ``c = r ||W||_F^2 / F``
    (Tikhonov and Arsenin, *Solutions of Ill-posed Problems*, 1977), which damps the
    directions ``W`` barely determines. The authors' released ``SingleSPA.m`` does
    not solve line 11 exactly either: it runs a fixed 300 projected-gradient steps
    from a random start, an early-stopped Landweber iteration, which regularizes much
    as Tikhonov's penalty does (Engl, Hanke and Neubauer, *Regularization of Inverse
    Problems*, 1996, Ch. 6); ``ridge`` is the deterministic form. As a start for EM
    (CNMF-SPA-EM) on the UCI Car data the regularized start and ``SingleSPA``'s
    classified better than the exact NNLS start (:ref:`bench-cnmf`): EM cannot leave
    a (floored) zero of its start, so zeros fitted to noise
    stay. ``bayespmf.apps.tasks`` chooses between the exact and the regularized start
    on validation data.

    **The prior.** Line 20 estimates lambda by least squares over the whole virtual
    matrix. The authors' ``SingleSPA.m`` (github.com/shahanaibrahimosu/joint-
    probability-estimation) reads it off the scales instead: with ``H_hat >= 0`` the
    NNLS solution of ``X ~ W_hat H_hat^T`` for the *unnormalized* anchor columns
    ``W_hat = X(:, Lambda)``, ``lambda_f`` is proportional to the largest column sum of
    class ``f`` over the ``S1`` blocks of ``W_hat`` times the largest over the ``S2``
    blocks of ``H_hat`` (``prior="anchors"``). Both are exact on exact marginals of a
    separable model; on sampled marginals they differ (``benchmarks/paper_cnmf.py``
    reports both on Ibrahim & Fu's Tables 1-5).

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
    m = check_marginals(marginals, owner)
    n_cat = m.n_categories
    n_components = check_n_components(n_components, n_cat, owner)
    selection = check_choice(selection, "selection", SELECTIONS, owner)
    n_splits = check_int(n_splits, "n_splits", owner=owner, low=0)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", owner=owner, low=1)
    if not isinstance(batched, bool | np.bool_):
        raise ValueError(
            f"The 'batched' argument of {owner} must be True or False. Got {batched!r}."
        )
    ridge = check_float(ridge, "ridge", owner=owner, low=0.0)
    prior = check_choice(prior, "prior", PRIORS, owner)
    observed = observed_pairs(m, min_count, owner)
    rng = check_random_state(random_state)
    if split is None:
        candidates = _candidate_splits(n_cat, n_splits, rng)
    else:
        candidates = [_check_split(split, n_cat.size, owner)]
    pair_w = pair_weight_matrix(m, observed, "counts")
    wt = expand_pair_weights(pair_w, n_cat)
    wt /= 2
    joint, offsets = m.joint, m.offsets
    fits, details, tried = {}, {}, []
    work = None if batched else np.empty_like(joint)  # the misfit's buffer
    if batched:
        wj = wt * joint
        c0 = float(np.vdot(wj, joint))
    for cand in candidates:
        out = _spa_on_split(
            joint, offsets, n_cat, n_components, *cand, observed, batched, ridge, prior
        )
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
            f"No split of the variables supports n_components={n_components} in {owner}: "
            f"{reasons}. "
            "Lower 'n_components', lower 'min_count', or pass a 'split' whose cross pairs "
            "are "
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
            shortlist,
            m,
            n_components,
            observed,
            n_bootstrap,
            rng,
            batched=batched,
            ridge=ridge,
            prior=prior,
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
        "ridge": ridge,
        "prior": prior,
    }
    return params, info
