r"""JUROR: latent-class PMF from one-way PMFs of random projections (Vora et al., Alg. 1).

For every pair of variables :math:`(j, k)` the statistics are the PMFs of M random
two-sparse projections :math:`\phi_m^\top [x_j, x_k]`, stacked into
:math:`Y_{jk} = \mathfrak{R}(Z_{jk})`, the discrete Radon transform of the pairwise
marginal :math:`Z_{jk} = A_j D(\lambda) A_k^\top` (eq. (6)). JUROR
(``bayespmf.fit.juror.juror``) recovers :math:`\lambda, A_1, \dots, A_N` in three
blocks, each here as a pure function (:func:`juror_g1`, :func:`g2_step`,
:func:`g3_step`):

* **G1** (Alg. 1, lines 2-4): least-squares inversion of the Radon transform, pair by
  pair, then CNMF-SPA (:func:`bayespmf.kernels.cnmf_spa.cnmf_spa`) on the estimated
  pairwise marginals;
* **G2** (lines 6-13): alternate the penalized update
  :math:`Z_{jk} = (\mathfrak{R}^\top\mathfrak{R} + \rho I)^{-1}(\mathfrak{R}^\top Y_{jk}
  + \rho A_j D(\lambda) A_k^\top)` with a CNMF-SPA refit (objective :math:`J_1`,
  eq. (8));
* **G3** (lines 15-20): projected gradient on the factors against the projection
  statistics themselves (objective :math:`J`, eq. (7)).

References
----------
.. [1] J. Vora, K. S. Gurumoorthy, A. Rajwade, "Recovery of joint probability
   distribution from one-way marginals: low rank tensors and random projections".
.. [2] S. Ibrahim and X. Fu, "Recovering joint probability of discrete random variables
   from pairwise marginals," IEEE Trans. Signal Process. 69, 2021.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsqr

from bayespmf._validation import DataValidationError, check_int, check_random_state
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.kernels.simplex import project_simplex
from bayespmf.marginals import (
    PairwiseMarginals,
    ProjectionMarginals,
    RandomProjections,
    projection_marginals,
    random_projections,
)
from bayespmf.pmf import offsets_of, stack_factors

__all__ = [
    "G2Info",
    "G2State",
    "G3Info",
    "G3State",
    "JurorProblem",
    "check_stats",
    "g2_step",
    "g3_init",
    "g3_scales",
    "g3_step",
    "juror_g1",
    "projection_folds",
    "row_folds",
]

#: Variants of Alg. 1 by their blocks (Vora et al., Sec. 4: "A: G1 + G2 + G3,
#: B: G1 + G3, C: G1 + G2").
VARIANTS = {"a": ("G1", "G2", "G3"), "b": ("G1", "G3"), "c": ("G1", "G2")}

#: Number of projections per pair when JUROR draws them itself: every experiment of
#: Vora et al. uses M = 200 (Sec. 4).
DEFAULT_N_PROJECTIONS = 200

#: Default penalty of G2, relative to M. Every column of the Radon matrix holds M ones,
#: so the eigenvalues of R^T R scale with M; rho = M / 10 weights the coupling term
#: ``||Z - A D A^T||^2`` like a tenth of one projection set. Not tuned: it is what
#: ``juror(rho=None)`` uses; the default ``rho="cv"`` cross-validates rho as the paper
#: does (Sec. 3).
DEFAULT_RHO_PER_PROJECTION = 0.1

#: Eigenvalues of R^T R below this fraction of the largest are treated as zero by the
#: least-squares inversion of G1 (the minimum-norm solution): the Radon matrices are
#: 0/1 with M ones per column, so a genuine eigenvalue is O(1) or larger.
RCOND = 1e-10

#: Pairs with at most this many cells (I_j * I_k) are inverted (G1, G2 line 8) through
#: one dense eigendecomposition of R^T R, computed on first use and reused by every G2
#: iteration; larger pairs (the CIM case of Sec. 4: I = 50, 2500 cells, a dense
#: 2500 x 2500 eigendecomposition per pair, O(cells^3) time and 50 MB of float64) are
#: solved by LSQR on the sparse Radon matrix instead
#: (:func:`scipy.sparse.linalg.lsqr`, the damped problem for line 8).
DIRECT_SOLVE_MAX_CELLS = 1024
#: LSQR's tolerances and iteration cap for the large pairs: its estimate of the
#: relative residual of the normal equations falls below ``LSQR_TOL`` (the least-squares
#: solution to about that relative accuracy), or ``LSQR_MAX_ITER`` iterations.
LSQR_TOL = 1e-10
LSQR_MAX_ITER = 2000

#: Backtracking of G3's accelerated projected gradient: the curvature multiplier L
#: doubles until the quadratic upper bound holds, and shrinks by 0.5**(1/8) after
#: every accepted step so that the step size can grow back (Beck & Teboulle's FISTA
#: with backtracking, made adaptive). 60 doublings exceed any float64 curvature.
STEP_SHRINK = 0.5
STEP_GROW = 2.0
MAX_BACKTRACK = 60
#: Starting multiplier of the diagonal curvature estimates (see :func:`g3_scales`):
#: they are the Gauss-Newton diagonal of J with every R^T R replaced by its diagonal,
#: so the multiplier that makes the bound hold is of order one (the cells sharing bins
#: and the coupling between entries raise it; backtracking finds it).
INITIAL_LIPSCHITZ = 1.0
#: Diagonal curvature estimates below this fraction of their largest (a class of
#: weight ~0, whose columns do not change J) are raised to it, so every step is finite.
SCALE_FLOOR = 1e-8
#: G3 stops after this many consecutive accepted steps with relative decrease <= tol
#: (one small step of an accelerated method can precede more progress).
PATIENCE = 3
#: J below this fraction of sum_p w_p ||y_p||^2 is an exact fit: J is evaluated as the
#: quadratic form z^T Q z - 2 b^T z + ||y||^2, whose float64 cancellation error is
#: ~1e-16 ||y||^2, so smaller values are rounding noise.
OBJECTIVE_FLOOR = 1e-13


# ------------------------------------------------------------------- the problem data
class JurorProblem:
    r"""The quadratic data of JUROR for one set of projection PMFs, built once.

    For every projected pair ``p = (j, k)`` co-observed in at least one row, with
    ``R_p`` its Radon matrix (:meth:`RandomProjections.radon_operator`) and ``y_p`` its
    stacked PMFs, ``||y_p - R_p z||^2 = z^T Q_p z - 2 b_p^T z + c_p`` with
    ``Q_p = R_p^T R_p``, ``b_p = R_p^T y_p``, ``c_p = y_p^T y_p``. The products
    :math:`Q z` of all pairs at once, which :math:`J` (eq. (7)) and its gradient need,
    are one sparse product: with the ``Q_p`` stored as one block-diagonal matrix when
    they are smaller than the Radon matrices (``(I_j I_k)^2`` entries against
    ``M I_j I_k``), else as :math:`R^\top (R z)` with the block-diagonal Radon matrix.

    Parameters
    ----------
    stats : ProjectionMarginals

    Attributes
    ----------
    pairs : list of (int, int)
        Pairs used (co-observed at least once), ``j < k``.
    weights : ndarray, shape (P,)
        Weight of each pair in the objectives (uniform, summing to one: eq. (7) sums
        the pairs with equal weight).
    n_samples : int
        Rows behind the statistics.
    floor : float
        :math:`J` at or below this is an exact fit (``OBJECTIVE_FLOOR`` times
        :math:`\sum_p w_p \|y_p\|^2`).

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals, random_projections
    >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])] * 3
    >>> pop = PairwiseMarginals.from_params([0.5, 0.5], A)
    >>> proj = random_projections([2, 2, 2], 8, random_state=0)
    >>> prob = JurorProblem(ProjectionMarginals.from_pairwise(pop, proj))
    >>> prob.pairs
    [(0, 1), (0, 2), (1, 2)]
    >>> bool(prob.objective(pop.joint) < 1e-14)
    True
    """

    def __init__(self, stats: ProjectionMarginals) -> None:
        proj = stats.projections
        self.n_categories = np.asarray(proj.n_categories)
        self.offsets = offsets_of(self.n_categories)
        self.n_projections = proj.n_projections
        keep = np.flatnonzero(np.asarray(stats.counts) > 0)
        if keep.size == 0:
            raise DataValidationError(
                "No projected pair of variables is co-observed in any row, so JUROR has "
                "nothing to fit. Collect rows that observe at least two variables."
            )
        self.pairs = [tuple(int(v) for v in proj.pairs[p]) for p in keep]
        self.counts = np.asarray(stats.counts)[keep]
        self.n_samples = stats.n_samples
        self.weights = np.full(len(self.pairs), 1.0 / len(self.pairs))
        radon, ys, rows, cols, sizes = [], [], [], [], []
        self.c = np.empty(len(self.pairs))
        for i, (j, k) in enumerate(self.pairs):
            r = proj.radon_operator(j, k)
            y = stats.pmf(j, k).ravel()
            radon.append(r)
            ys.append(y)
            self.c[i] = y @ y
            rj = np.arange(self.offsets[j], self.offsets[j + 1])
            rk = np.arange(self.offsets[k], self.offsets[k + 1])
            rows.append(np.repeat(rj, rk.size))  # row-major ravel of the (I_j, I_k) block
            cols.append(np.tile(rk, rj.size))
            sizes.append(rj.size * rk.size)
        self.radon = radon
        self.y = ys
        self.sizes = np.asarray(sizes)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)])
        self.rows = np.concatenate(rows)
        self.cols = np.concatenate(cols)
        self.entry_weight = np.repeat(self.weights, self.sizes)
        self.b = np.concatenate([r.T @ y for r, y in zip(radon, ys, strict=True)])
        self.floor = OBJECTIVE_FLOOR * float(self.weights @ self.c)
        # Q z for all pairs: dense Q blocks when smaller than the Radon matrices
        if int(np.sum(self.sizes**2)) <= sum(r.nnz for r in radon):
            self._q = sp.block_diag(
                [sp.csr_array((r.T @ r).toarray()) for r in radon], format="csr"
            )
            self._r = None
        else:
            self._q = None
            self._r = sp.block_diag(radon, format="csr")
        self._eig: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    # -- helpers -----------------------------------------------------------------
    def gather(self, joint: np.ndarray) -> np.ndarray:
        """Concatenated row-major pair blocks ``(j, k)`` of a (sum I, sum I) matrix."""
        return joint[self.rows, self.cols]

    def scatter(self, z: np.ndarray) -> np.ndarray:
        """Symmetric (sum I, sum I) matrix holding the pair blocks ``z`` (undoes gather)."""
        n = int(self.offsets[-1])
        out = np.zeros((n, n))
        out[self.rows, self.cols] = z
        return out + out.T

    def blocks(self, z: np.ndarray):
        """Split concatenated pair vectors into the per-pair pieces."""
        return np.split(z, self.starts[1:-1])

    def apply_q(self, z: np.ndarray) -> np.ndarray:
        r""":math:`Q z` for concatenated pair vectors ``z`` (:math:`Q = R^\top R`)."""
        if self._q is not None:
            return self._q @ z
        return self._r.T @ (self._r @ z)

    # -- objectives ---------------------------------------------------------------
    def _per_pair(self, z: np.ndarray, qz: np.ndarray) -> np.ndarray:
        return np.add.reduceat(z * qz - 2.0 * self.b * z, self.starts[:-1]) + self.c

    def data_misfit(self, z: np.ndarray) -> float:
        r""":math:`\sum_p w_p \|y_p - R_p z_p\|^2` for concatenated pair vectors ``z``."""
        return float(self.weights @ self._per_pair(z, self.apply_q(z)))

    def objective(self, joint: np.ndarray) -> float:
        """:math:`J` (eq. (7)) of the pair blocks of a model joint matrix."""
        return self.data_misfit(self.gather(joint))

    def value_and_grad(self, weights: np.ndarray, stacked: np.ndarray):
        r""":math:`J(\lambda, A)` and its gradients with respect to ``A`` and ``lambda``.

        With :math:`G_{jk} = 2 w_{jk} (Q_{jk} z_{jk} - b_{jk})` the gradient with respect
        to the pair block :math:`Z_{jk} = A_j D(\lambda) A_k^\top` and
        :math:`G_{\mathrm{sym}}` the symmetric block matrix holding :math:`G_{jk}` in
        block :math:`(j, k)` and :math:`G_{jk}^\top` in block :math:`(k, j)`:
        :math:`\partial J / \partial A = G_{\mathrm{sym}} A D(\lambda)` and
        :math:`\partial J / \partial \lambda = \tfrac12 \operatorname{diag}(A^\top
        G_{\mathrm{sym}} A)`.
        """
        scaled = stacked * weights
        z = self.gather(scaled @ stacked.T)
        qz = self.apply_q(z)
        value = float(self.weights @ self._per_pair(z, qz))
        g_sym = self.scatter(2.0 * self.entry_weight * (qz - self.b))
        ga = g_sym @ scaled
        glam = 0.5 * np.einsum("if,if->f", stacked, g_sym @ stacked)
        return value, ga, glam

    def value(self, weights: np.ndarray, stacked: np.ndarray) -> float:
        r""":math:`J(\lambda, A)` only."""
        return self.objective((stacked * weights) @ stacked.T)

    # -- G1 and G2 pair solves ---------------------------------------------------
    def _eigh(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        if p not in self._eig:
            r = self.radon[p]
            self._eig[p] = np.linalg.eigh((r.T @ r).toarray())
        return self._eig[p]

    def _solve_pair(self, p: int, rho: float, prior: np.ndarray | None) -> np.ndarray:
        if self.sizes[p] <= DIRECT_SOLVE_MAX_CELLS:
            evals, evecs = self._eigh(p)
            b = self.b[self.starts[p] : self.starts[p + 1]]
            rhs = b if prior is None else b + rho * prior
            denom = evals + rho
            inv = np.where(denom > RCOND * max(evals[-1], 1.0), 1.0 / denom, 0.0)
            return evecs @ (inv * (evecs.T @ rhs))
        # min ||R z - y||^2 + rho ||z - m||^2: LSQR on x = z - m with damp sqrt(rho)
        r, y = self.radon[p], self.y[p]
        shift = np.zeros(r.shape[1]) if prior is None else prior
        x = lsqr(
            r,
            y - r @ shift,
            damp=float(np.sqrt(rho)),
            atol=LSQR_TOL,
            btol=LSQR_TOL,
            iter_lim=LSQR_MAX_ITER,
        )[0]
        return x + shift

    def solve(self, rho: float, prior: np.ndarray | None = None) -> np.ndarray:
        r"""Pair blocks :math:`(Q + \rho I)^{-1}(b + \rho m)`, projected on the simplex.

        ``rho = 0`` (G1, line 2) gives the minimum-norm least-squares inversion of every
        Radon transform; ``rho > 0`` with the model blocks ``prior = m`` is line 8.
        Pairs of at most ``DIRECT_SOLVE_MAX_CELLS`` cells are solved through the
        eigendecomposition of :math:`Q_p`, larger ones by LSQR.
        """
        priors = self.blocks(prior) if prior is not None else [None] * len(self.pairs)
        out = [project_simplex(self._solve_pair(p, rho, m)) for p, m in enumerate(priors)]
        return np.concatenate(out)


# ------------------------------------------------------------------------- assembly
def _as_pairwise(prob: JurorProblem, z: np.ndarray) -> PairwiseMarginals:
    """PairwiseMarginals holding the pair blocks ``z`` (the virtual matrix of line 3)."""
    n_cat = prob.n_categories
    n_vars = n_cat.size
    joint = prob.scatter(z)
    counts = np.zeros((n_vars, n_vars), dtype=np.int64)
    one_way = [np.zeros(int(i)) for i in n_cat]
    seen = np.zeros(n_vars)
    for (j, k), c, blk in zip(prob.pairs, prob.counts, prob.blocks(z), strict=True):
        counts[j, k] = counts[k, j] = c
        blk = blk.reshape(int(n_cat[j]), int(n_cat[k]))
        one_way[j] += blk.sum(axis=1)
        one_way[k] += blk.sum(axis=0)
        seen[[j, k]] += 1
    for n in range(n_vars):
        # The diagonal blocks diag(Pr(x_n)) are not used by CNMF-SPA; fill them with the
        # mean of the one-way PMFs implied by the variable's pairs (uniform if none).
        pmf = one_way[n] / seen[n] if seen[n] else np.full(int(n_cat[n]), 1 / n_cat[n])
        blk = slice(int(prob.offsets[n]), int(prob.offsets[n + 1]))
        joint[blk, blk] = np.diag(pmf)
        counts[n, n] = counts[n].max()
    return PairwiseMarginals(n_cat, prob.offsets, joint, counts, prob.n_samples)


def check_stats(data_or_stats, n_projections, n_bins, rng, owner):
    """JUROR's statistics: ``data_or_stats`` itself, or drawn from raw data.

    With raw codes, ``n_projections`` random directions per pair (default
    ``DEFAULT_N_PROJECTIONS``) and ``n_bins`` bins are drawn from ``rng`` and the
    projection PMFs computed; with ProjectionMarginals both must be None.

    Returns
    -------
    stats : ProjectionMarginals
    codes : ndarray of int64 (S, N) or None
        The validated raw codes (read-only), None when statistics were given.

    Raises
    ------
    DataValidationError
        PairwiseMarginals, malformed data, fewer than two variables, or
        ``n_projections`` / ``n_bins`` given with ProjectionMarginals.
    """
    if isinstance(data_or_stats, ProjectionMarginals):
        if n_projections is not None or n_bins is not None:
            raise DataValidationError(
                f"The 'n_projections' and 'n_bins' arguments of {owner} apply only when "
                "raw data are passed; the ProjectionMarginals given already hold "
                f"{data_or_stats.projections.n_projections} projections per pair. Leave "
                "them out."
            )
        return data_or_stats, None
    if isinstance(data_or_stats, PairwiseMarginals):
        raise DataValidationError(
            f"{owner} takes data or ProjectionMarginals, not PairwiseMarginals. Use "
            "ProjectionMarginals.from_pairwise(marginals, random_projections(...))."
        )
    from bayespmf._validation import as_codes

    codes, n_cat = as_codes(data_or_stats, name="data_or_stats", allow_empty_columns=True)
    if n_cat.size < 2:
        raise DataValidationError(
            f"{owner} needs at least 2 variables (it projects pairs); the data have "
            f"{n_cat.size}."
        )
    n_projections = check_int(
        DEFAULT_N_PROJECTIONS if n_projections is None else n_projections,
        "n_projections",
        owner=owner,
        low=1,
    )
    proj = random_projections(n_cat, n_projections, n_bins=n_bins, random_state=rng)
    return projection_marginals(codes, proj), codes


def row_folds(codes, projections: RandomProjections, n_folds: int, random_state=None):
    """Split the rows into ``n_folds`` folds; the projection PMFs of each side.

    Every row goes to one fold at random (a permutation cut into ``n_folds`` nearly
    equal parts). Returns a list of ``(training, held_out)`` ProjectionMarginals, one
    per fold, over the same ``projections``: the PMFs of the other folds' rows and of
    the fold's own rows. Unlike :func:`projection_folds`, the held-out statistics carry
    sampling noise independent of the training ones.

    Raises
    ------
    DataValidationError
        Fewer than 2 rows per fold.

    Examples
    --------
    >>> codes = np.array([[0, 1], [1, 1], [1, 0], [0, 0], [1, 1], [0, 1]])
    >>> proj = random_projections([2, 2], 3, random_state=0)
    >>> [(a.n_samples, b.n_samples) for a, b in row_folds(codes, proj, 2, 0)]
    [(3, 3), (3, 3)]
    """
    codes = np.asarray(codes)
    n_folds = check_int(n_folds, "n_folds", owner="row_folds", low=2)
    n_rows = codes.shape[0]
    if n_rows < 2 * n_folds:
        raise DataValidationError(
            f"Cross-validating over {n_folds} folds of the rows needs at least "
            f"{2 * n_folds} rows; the data have {n_rows}. Pass a numeric 'rho'."
        )
    order = check_random_state(random_state).permutation(n_rows)
    folds = np.array_split(order, n_folds)
    out = []
    for f, held in enumerate(folds):
        train = np.sort(np.concatenate([g for i, g in enumerate(folds) if i != f]))
        out.append(
            (
                projection_marginals(codes[train], projections),
                projection_marginals(codes[np.sort(held)], projections),
            )
        )
    return out


def _project_factors(stacked: np.ndarray, weights: np.ndarray, offsets) -> tuple:
    """Every column of every variable block, and the weights, onto the simplex."""
    out = np.empty_like(stacked)
    for n in range(offsets.size - 1):
        blk = slice(int(offsets[n]), int(offsets[n + 1]))
        out[blk] = project_simplex(stacked[blk], axis=0)
    return out, project_simplex(weights)


# ------------------------------------------------------------------ G1, G2 and G3
def juror_g1(prob: JurorProblem, n_components: int, random_state=None, split=None):
    """G1 (Alg. 1, lines 2-4): least-squares Radon inversion, then CNMF-SPA.

    ``split`` fixes CNMF-SPA's split (by default CNMF-SPA chooses it).

    Returns
    -------
    weights, factors_stacked : ndarray
        The CNMF-SPA estimate.
    pairwise : PairwiseMarginals
        The estimated pairwise marginals (the virtual matrix of line 3).
    spa_info : dict
        CNMF-SPA's info (its ``"split"`` is kept fixed by G2).
    """
    z = prob.solve(0.0)
    pairwise = _as_pairwise(prob, z)
    params, spa_info = cnmf_spa(
        pairwise, n_components, split=split, random_state=random_state
    )
    return params.weights, stack_factors(params.factors), pairwise, spa_info


def projection_folds(stats: ProjectionMarginals, n_folds: int, random_state=None):
    """Split the M projections of every pair into ``n_folds`` folds.

    Projection ``m`` of every pair goes to the same fold (the directions of different
    pairs are drawn independently, so nothing links them). Returns a list of
    ``(training, held_out)`` ProjectionMarginals, one per fold, that share the rows,
    counts and binning of ``stats``.

    Raises
    ------
    DataValidationError
        Fewer than 2 projections per fold.

    Examples
    --------
    >>> from bayespmf.marginals import PairwiseMarginals, random_projections
    >>> A = [np.array([[0.9, 0.2], [0.1, 0.8]])] * 3
    >>> pop = PairwiseMarginals.from_params([0.5, 0.5], A)
    >>> stats = ProjectionMarginals.from_pairwise(pop, random_projections([2] * 3, 10))
    >>> [(a.projections.n_projections, b.projections.n_projections)
    ...  for a, b in projection_folds(stats, 2, random_state=0)]
    [(5, 5), (5, 5)]
    """
    proj = stats.projections
    n_proj = proj.n_projections
    n_folds = check_int(n_folds, "n_folds", owner="projection_folds", low=2)
    if n_proj < 2 * n_folds:
        raise DataValidationError(
            f"Cross-validating over {n_folds} folds of the projections needs at least "
            f"{2 * n_folds} projections per pair; the statistics hold {n_proj}. Draw "
            "more projections or pass a numeric 'rho'."
        )
    order = check_random_state(random_state).permutation(n_proj)

    def subset(idx):
        idx = np.sort(idx)
        sub = RandomProjections(
            proj.n_categories, proj.pairs, proj.directions[:, idx], proj.n_bins
        )
        return ProjectionMarginals(sub, stats.pmfs[:, idx], stats.counts, stats.n_samples)

    folds = np.array_split(order, n_folds)
    out = []
    for f, held in enumerate(folds):
        train = np.concatenate([g for i, g in enumerate(folds) if i != f])
        out.append((subset(train), subset(held)))
    return out


class G2State(NamedTuple):
    """One G2 iterate: the CNMF-SPA refit and its :math:`J_1` (``nan`` before any)."""

    weights: np.ndarray
    factors_stacked: np.ndarray
    misfit: float


class G2Info(NamedTuple):
    """What one :func:`g2_step` reports.

    Attributes
    ----------
    objective : float
        Minus :math:`J_1` of the state the step was given (``nan`` for G1's output).
    n_evals : int
        Refits (1).
    misfit : float
        :math:`J_1` after the step (``nan`` when it failed).
    failed : bool
        The fixed split no longer supports the rank (the state is unchanged).
    """

    objective: float
    n_evals: int
    misfit: float
    failed: bool


def g2_step(state: G2State, prob: JurorProblem, rho: float, split, random_state=None):
    r"""One G2 iteration (Alg. 1, lines 6-13): penalized Z update, CNMF-SPA refit.

    :math:`Z_{jk} = (Q_{jk} + \rho I)^{-1}(b_{jk} + \rho\, A_j D(\lambda) A_k^\top)`,
    projected onto the simplex, then CNMF-SPA with ``split`` fixed; :math:`J_1`
    (eq. (8)) of the result. Returns ``(G2State, G2Info)``.
    """
    lam, a = state.weights, state.factors_stacked
    m = prob.gather((a * lam) @ a.T)
    z = prob.solve(rho, m)
    pw = _as_pairwise(prob, z)
    try:
        p_new, _ = cnmf_spa(pw, lam.size, split=split, random_state=random_state)
    except DataValidationError:  # the fixed split no longer supports the rank
        return state, G2Info(-state.misfit, 1, np.nan, True)
    lam, a = p_new.weights, stack_factors(p_new.factors)
    m = prob.gather((a * lam) @ a.T)
    f = prob.data_misfit(z) + rho * float(
        prob.weights @ np.add.reduceat((z - m) ** 2, prob.starts[:-1])
    )
    return G2State(lam, a, f), G2Info(-state.misfit, 1, f, False)


class G3State(NamedTuple):
    r"""One iterate of G3's accelerated projected gradient (FISTA with restart).

    Attributes
    ----------
    factors_stacked, weights : ndarray
        The iterate ``x`` (stacked factors, :math:`\lambda`).
    momentum_factors, momentum_weights : ndarray
        The extrapolated point ``y`` the next gradient step starts from.
    misfit : float
        :math:`J` at ``x``.
    t : float
        FISTA's momentum parameter (1 after a restart).
    lipschitz : float
        The current backtracked multiplier of the diagonal curvature estimates
        (:func:`g3_scales`).
    n_small : int
        Consecutive accepted steps that lowered :math:`J` by at most ``tol`` relative.
    """

    factors_stacked: np.ndarray
    weights: np.ndarray
    momentum_factors: np.ndarray
    momentum_weights: np.ndarray
    misfit: float
    t: float
    lipschitz: float
    n_small: int


class G3Info(NamedTuple):
    """What one :func:`g3_step` reports.

    Attributes
    ----------
    objective : float
        Minus :math:`J` of the state the step was given.
    n_evals : int
        Gradient steps (1).
    misfit : float
        :math:`J` after the step.
    accepted : bool
        Whether the step moved ``x`` (else the momentum was restarted, or stalled).
    stalled : bool
        A plain gradient step from ``x`` would raise :math:`J`: no descent is left.
    n_small : int
        As :attr:`G3State.n_small` after the step.
    """

    objective: float
    n_evals: int
    misfit: float
    accepted: bool
    stalled: bool
    n_small: int


def g3_scales(prob: JurorProblem, weights, factors_stacked) -> tuple:
    r"""Diagonal curvature estimates of :math:`J` for G3's scaled steps.

    Every cell of a pair falls in exactly one bin of each of the M projections, so the
    diagonal of :math:`Q_p = R_p^\top R_p` is :math:`M I`. With each :math:`Q_p`
    replaced by that diagonal, :math:`J` becomes the plain least-squares misfit
    :math:`M \sum_p w_p \|Z_p - \hat Z_p\|_F^2`, whose Gauss-Newton diagonal at
    :math:`(\lambda, A)` is, for entry ``(i, f)`` of :math:`A_n`,
    :math:`2 M \lambda_f^2 \sum_{k} w_{nk} \|A_k(:, f)\|^2` (the same for every
    ``i``) and, for :math:`\lambda_f`,
    :math:`2 M \sum_{(j, k)} w_{jk} \|A_j(:, f)\|^2 \|A_k(:, f)\|^2`. The
    off-diagonal entries of :math:`Q_p` (cells sharing a bin) make the true curvature
    larger by a factor of order one, which G3's backtracked multiplier absorbs; what
    the scaling removes is the spread between blocks: columns of classes of small
    weight have curvature :math:`\propto \lambda_f^2`, and :math:`\lambda` a much
    larger one than any column.

    Returns
    -------
    scale_factors : ndarray, shape (sum I_n, F)
        The first, per column of every :math:`A_n` (repeated down the rows).
    scale_weights : float
        The mean of the second over the classes: one number, so that the step of
        :math:`\lambda` stays a Euclidean projection onto the simplex.

    The first is floored at ``SCALE_FLOOR`` times its largest value (a class of zero
    weight leaves its columns' curvature at zero), so every step is finite.
    """
    offs = prob.offsets
    n_vars = offs.size - 1
    sq = np.add.reduceat(factors_stacked**2, offs[:-1], axis=0)  # (N, F) column norms^2
    pairs = np.asarray(prob.pairs)
    coupling = np.zeros((n_vars, n_vars))
    coupling[pairs[:, 0], pairs[:, 1]] = prob.weights
    coupling += coupling.T
    m2 = 2.0 * prob.n_projections
    per_column = m2 * (coupling @ sq) * weights**2  # (N, F)
    per_column = np.maximum(per_column, SCALE_FLOOR * max(float(per_column.max()), 1e-300))
    per_class = m2 * (prob.weights @ (sq[pairs[:, 0]] * sq[pairs[:, 1]]))  # (F,)
    scale_weights = max(float(per_class.mean()), 1e-300)
    return np.repeat(per_column, np.diff(offs), axis=0), scale_weights


def g3_init(prob: JurorProblem, weights, factors_stacked) -> G3State:
    """G3's starting state at ``(weights, factors_stacked)`` (copied)."""
    x_a, x_l = factors_stacked.copy(), weights.copy()
    return G3State(x_a, x_l, x_a, x_l, prob.value(x_l, x_a), 1.0, INITIAL_LIPSCHITZ, 0)


def g3_step(state: G3State, prob: JurorProblem, tol: float):
    r"""One G3 step (Alg. 1, lines 15-20): accelerated projected gradient on ``J``.

    A gradient step from the momentum point ``y``, every block scaled by its diagonal
    curvature (:func:`g3_scales`) times a backtracked multiplier ``L``: column ``f`` of
    :math:`A_n` moves by ``-grad / (L d_nf)`` and :math:`\lambda` by
    ``-grad / (L d_lambda)``, each then projected onto the simplex. If the step raises
    :math:`J` above ``x``'s, the momentum restarts from ``x`` (and if ``x`` was the
    start point already, no descent is left: ``stalled``). ``tol`` counts the accepted
    steps that lower :math:`J` by at most ``tol`` relative (``n_small``).
    Returns ``(G3State, G3Info)``.
    """
    x_a, x_l, y_a, y_l, f_x, t, lipschitz, small = state
    f_y, g_a, g_l = prob.value_and_grad(y_l, y_a)
    d_a, d_l = g3_scales(prob, y_l, y_a)
    for _ in range(MAX_BACKTRACK):
        c_a, c_l = _project_factors(
            y_a - g_a / (lipschitz * d_a), y_l - g_l / (lipschitz * d_l), prob.offsets
        )
        f_c = prob.value(c_l, c_a)
        s_a, s_l = c_a - y_a, c_l - y_l
        bound = (
            f_y
            + np.sum(g_a * s_a)
            + np.sum(g_l * s_l)
            + 0.5 * lipschitz * (np.sum(d_a * s_a * s_a) + d_l * np.sum(s_l * s_l))
        )
        if f_c <= bound:
            break
        lipschitz *= STEP_GROW
    if f_c > f_x:
        # t = 1: a plain gradient step from x fails, no descent left; else the
        # momentum overshot: restart from the last iterate
        stalled = t == 1.0
        new = state._replace(momentum_factors=x_a, momentum_weights=x_l, t=1.0)
        new = new._replace(lipschitz=lipschitz)
        return new, G3Info(-f_x, 1, f_x, False, stalled, small)
    t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
    beta = (t - 1.0) / t_new
    y_a, y_l = c_a + beta * (c_a - x_a), c_l + beta * (c_l - x_l)
    small = small + 1 if f_x - f_c <= tol * f_x else 0
    lipschitz *= STEP_SHRINK ** (1 / 8)  # let the step grow back slowly
    new = G3State(c_a, c_l, y_a, y_l, f_c, t_new, lipschitz, small)
    return new, G3Info(-f_x, 1, f_c, True, False, small)
