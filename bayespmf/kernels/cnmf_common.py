"""The problem both CNMF algorithms solve: pairwise marginals, their checks and misfit.

Shared by :mod:`bayespmf.kernels.cnmf_spa` and :mod:`bayespmf.kernels.cnmf_opt`: the
checks of the marginals and of the rank (the identifiability bound of a split,
:func:`max_cnmf_rank`), the pair weights, the model's joint block matrix
``sum_f lambda_f a_f a_f^T``, column normalization and :func:`pairwise_misfit`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from bayespmf._validation import DataValidationError, check_int, check_rank_limit
from bayespmf.marginals import PairwiseMarginals
from bayespmf.pmf import check_params, stack_factors

__all__ = [
    "OBJECTIVE_FLOOR",
    "PROB_FLOOR",
    "check_marginals",
    "check_n_components",
    "expand_pair_weights",
    "max_cnmf_rank",
    "model_joint",
    "normalize_blocks",
    "normalize_columns",
    "observed_pairs",
    "pair_weight_matrix",
    "pairwise_misfit",
]

#: Floor on the model probabilities inside log(M): keeps the KL objective and its
#: gradient finite where a model entry underflows (a probability below 1e-300 is 0 to
#: any data set), far below any entry an empirical marginal can hold.
PROB_FLOOR = 1e-300

#: An objective below this is an exact fit: KL ~ |M - X|^2 / 2 per entry, so 1e-24
#: means the modelled pairwise marginals agree with the data to ~1e-12.
OBJECTIVE_FLOOR = 1e-24


# ---------------------------------------------------------------------------- checks
def check_marginals(marginals, owner: str) -> PairwiseMarginals:
    """``marginals``, checked: a PairwiseMarginals of at least two variables."""
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


def observed_pairs(marginals: PairwiseMarginals, min_count: int, owner: str) -> np.ndarray:
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


def check_n_components(n_components, n_categories, owner: str) -> int:
    """``n_components`` as an int in ``[1, max_cnmf_rank(n_categories)]``.

    Raises
    ------
    ValueError
        ``n_components`` not an int >= 1.
    DataValidationError
        ``n_components`` above what a split of the variables identifies (message names
        ``owner``).
    """
    limit = max_cnmf_rank(n_categories)
    why = (
        f"at most {limit} latent classes are identifiable from the pairwise marginals "
        f"of variables with n_categories={np.asarray(n_categories).tolist()}: CNMF "
        "needs a split of the variables into S1, S2 with n_components <= sum of "
        "n_categories "
        "over each part (Ibrahim & Fu, eq. (3) and Theorem 3), else the factorization "
        "of the virtual NMF matrix is not unique."
    )
    return check_rank_limit(n_components, limit, owner=owner, why=why)


# ---------------------------------------------------------------- shared arithmetic
def normalize_columns(a: np.ndarray) -> np.ndarray:
    """Columns to unit sum (Alg. 2, lines 8 and 15); an all-zero column -> uniform."""
    a = np.maximum(a, 0.0)
    sums = a.sum(axis=0)
    out = np.full_like(a, 1.0 / a.shape[0])
    good = sums > 0
    out[:, good] = a[:, good] / sums[good]
    return out


def normalize_blocks(a: np.ndarray, sizes) -> list:
    """:func:`normalize_columns` of each block of ``sizes[i]`` rows of ``a``, in order.

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


def pair_weight_matrix(marginals, observed, pair_weighting: str) -> np.ndarray:
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


def expand_pair_weights(pair_w: np.ndarray, n_categories) -> np.ndarray:
    """Expand (N, N) pair weights to the (sum I, sum I) block matrix."""
    reps = np.asarray(n_categories)
    return np.repeat(np.repeat(pair_w, reps, axis=0), reps, axis=1)


def model_joint(weights, stacked) -> np.ndarray:
    """The model's joint block matrix ``sum_f lambda_f a_f a_f^T`` (stacked factors)."""
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
    m = check_marginals(marginals, "pairwise_misfit")
    obs = observed_pairs(m, min_count, "pairwise_misfit")
    weights, factors = params
    p = check_params(weights, factors, m.n_categories)
    wt = expand_pair_weights(pair_weight_matrix(m, obs, pair_weighting), m.n_categories) / 2
    model = model_joint(p.weights, stack_factors(p.factors))
    x = m.joint
    if divergence == "kl":
        return float(np.sum(wt * (xlogy(x, x) - xlogy(x, np.maximum(model, PROB_FLOOR)))))
    if divergence == "frobenius":
        return float(np.sum(wt * (x - model) ** 2))
    raise ValueError(
        f"The 'divergence' argument must be 'kl' or 'frobenius'. Got {divergence!r}."
    )
