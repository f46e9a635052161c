r"""An asymmetric Dirichlet in a VLAD fit: the cell-mass test and a vector alpha.

The k-means cells of a symmetric Dirichlet nest hold equal shares of the data;
:func:`mass_balance` tests that, :func:`dirichlet_cvt` gives the centroidal Voronoi
tessellation of :math:`\mathrm{Dir}(\alpha)` for a vector alpha, :func:`match_cells`
pairs the data's cells with the model's, and :func:`estimate_alpha_vector` fits a
vector alpha and the vertices by the method of moments.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import chdtrc

from bayespmf._validation import check_random_state
from bayespmf.kernels._vlad_linalg import psd_sqrt
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, kmeans
from bayespmf.kernels.vlad_geometry import Subspace
from bayespmf.kernels.vlad_moments import NOISE_CORRECTIONS, corrected_metric

__all__ = [
    "AlphaVector",
    "CVT_DRAWS",
    "MassBalance",
    "VECTOR_ALPHA_RANGE",
    "VECTOR_DRAWS",
    "VECTOR_MASS_TOL",
    "VECTOR_MAX_ITER",
    "VECTOR_STALL",
    "VECTOR_TOL",
    "dirichlet_cvt",
    "estimate_alpha_vector",
    "mass_balance",
    "match_cells",
]

#: Monte Carlo draws of Dir(alpha) behind :func:`dirichlet_cvt` (k-means in K - 1
#: dimensions; the centroids' Monte Carlo sd is about 0.3 % of their spread at K = 3).
CVT_DRAWS = 50_000


class MassBalance(NamedTuple):
    r"""Result of :func:`mass_balance`: whether the k-means cells are of equal mass.

    Attributes
    ----------
    masses : ndarray (K,)
        Fraction of the points in each cell.
    chi2 : float
        :math:`\sum_k (n_k - n/K)^2 / (n/K)`.
    p_value : float
        Upper tail of :math:`\chi^2_{K-1}` at ``chi2``.
    total_variation : float
        :math:`\frac12 \sum_k |m_k - 1/K|`.
    """

    masses: np.ndarray
    chi2: float
    p_value: float
    total_variation: float


def mass_balance(labels, n_vertices: int) -> MassBalance:
    r"""Test that the k-means cells hold equal shares of the data.

    Under a symmetric Dirichlet the whitened k-means cells are images of each other
    under the simplex's symmetries (Lemma 2: in the :math:`\Sigma^\dagger` metric the
    simplex is regular), so each holds :math:`1/K` of the points; an asymmetric
    :math:`\mathrm{Dir}(\alpha)` gives the cell of a vertex with larger
    :math:`\alpha_k` more mass. The statistic is Pearson's chi-square of the cell
    counts against ``n / K``.

    Examples
    --------
    >>> mb = mass_balance(np.array([0, 0, 1, 2, 2, 2]), 3)
    >>> mb.masses.round(3).tolist(), mb.chi2
    ([0.333, 0.167, 0.5], 1.0)
    """
    labels = np.asarray(labels)
    n = labels.size
    counts = np.bincount(labels, minlength=n_vertices).astype(float)
    expected = n / n_vertices
    chi2 = float(np.sum((counts - expected) ** 2) / expected)
    masses = counts / n
    return MassBalance(
        masses,
        chi2,
        float(chdtrc(n_vertices - 1, chi2)),
        float(0.5 * np.sum(np.abs(masses - 1.0 / n_vertices))),
    )


def dirichlet_cvt(
    alpha,
    *,
    n_draws: int = CVT_DRAWS,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Barycentric coordinates and masses of the CVT centroids of a Dirichlet.

    The k-means of VLAD (Alg. 1) whitens the data by their covariance
    :math:`B^T S(\alpha) B` (+ noise), so in barycentric coordinates it is k-means of
    :math:`\theta \sim \mathrm{Dir}(\alpha)` in the metric :math:`S(\alpha)^\dagger`,
    whatever the vertices ``B`` (Lemma 2's argument does not need a symmetric alpha).
    Its centroids are :math:`c_k = B^T v_k`, i.e. :math:`C = V B`, so the vertices are
    :math:`B = V^{-1} C`: the extension of Alg. 1 for any alpha (for a symmetric alpha
    :math:`V^{-1}` is the scalar extension :math:`\gamma(\alpha)` about the centre).
    ``V`` is computed here by Monte Carlo: ``n_draws`` draws, whitened in the ``K - 1``
    coordinates of the sum-zero plane, one Lloyd run started near the vertices (row
    ``k`` of ``V`` is the cell of vertex ``k``).

    Parameters
    ----------
    alpha : array_like (K,)
        Positive concentrations.
    n_draws : int
    max_iter : int
    random_state : None, int or Generator

    Returns
    -------
    V : ndarray (K, K)
        Row ``k``: the barycentric coordinates of the centroid of vertex ``k``'s cell.
    masses : ndarray (K,)
        Probability of each cell.

    Examples
    --------
    >>> V, m = dirichlet_cvt([1.0, 1.0, 1.0], random_state=0)
    >>> bool(np.all(np.argmax(V, axis=1) == np.arange(3))), m.round(1).tolist()
    (True, [0.3, 0.3, 0.3])
    """
    a = np.asarray(alpha, dtype=float)
    K = a.size
    rng = check_random_state(random_state)
    theta = rng.dirichlet(a, size=n_draws)
    mean = a / a.sum()
    Q = np.linalg.qr(np.eye(K) - 1.0 / K)[0][:, : K - 1]  # orthonormal sum-zero basis
    z = (theta - mean) @ Q
    A = psd_sqrt(z.T @ z / n_draws)
    zw = np.linalg.solve(A, z.T).T
    start = (0.5 * (np.eye(K) - mean)) @ Q
    _, labels, _ = kmeans(
        zw,
        K,
        n_init=0,
        init=np.linalg.solve(A, start.T).T,
        max_iter=max_iter,
        random_state=rng,
    )
    counts = np.bincount(labels, minlength=K)
    V = np.stack([theta[labels == k].mean(axis=0) for k in range(K)])
    return V, counts / n_draws


def match_cells(masses_data, masses_model) -> np.ndarray:
    r"""Order of the data's cells that matches the model's cells by mass.

    ``perm[k]`` is the data cell paired with model cell ``k`` (the assignment of least
    total squared mass difference); the vertex order of a known alpha vector is not
    tied to the arbitrary order of the k-means clusters, and the cell masses are what
    the data say about it.

    Examples
    --------
    >>> match_cells([0.5, 0.2, 0.3], [0.2, 0.3, 0.5]).tolist()
    [1, 2, 0]
    """
    d = np.asarray(masses_data, dtype=float)[:, None] - np.asarray(masses_model)[None]
    rows, cols = linear_sum_assignment(d**2)
    perm = np.empty_like(rows)
    perm[cols] = rows
    return perm


#: Draws per evaluation and iteration cap of :func:`estimate_alpha_vector`, and its
#: stopping rule: a step in log(alpha_0) below VECTOR_TOL and cell masses matched to
#: within VECTOR_MASS_TOL. On the triangle test (K = 3, n = 5000) it stops after 4-15
#: evaluations (0.1-0.4 s).
VECTOR_DRAWS = 20_000
VECTOR_MAX_ITER = 20
VECTOR_TOL = 0.005
VECTOR_MASS_TOL = 0.003

#: Largest log-trace misfit of a converged :func:`estimate_alpha_vector`: the secant
#: slope, fitted while ``p`` moves too, can be steep enough to make a small step of a
#: large misfit (Wikipedia, K = 40: "converged" at a misfit of -0.16). The triangle
#: test converges at |misfit| <= 0.013.
VECTOR_TRACE_TOL = 0.02

#: Iterations without a better mass misfit (by more than VECTOR_MASS_TOL), while the
#: best is above 3 VECTOR_MASS_TOL, after which :func:`estimate_alpha_vector` stops:
#: the data's cell masses are out of reach of
#: every Dir(alpha) it tried (on 3000 days of S&P 500 returns at K = 5 the model's cell
#: masses stayed within 0.14-0.27 against the data's 0.112-0.308, and the old
#: iteration ran its 20 steps up to alpha_0 = 4818).
VECTOR_STALL = 5

#: Range of :math:`\alpha_0 / K` in :func:`estimate_alpha_vector` (that of the
#: symmetric extension table, :func:`bayespmf.kernels.extension_table.extension_gamma_fn`).
VECTOR_ALPHA_RANGE = (0.01, 100.0)


class AlphaVector(NamedTuple):
    r"""Result of :func:`estimate_alpha_vector`.

    Attributes
    ----------
    alpha : ndarray (K,)
        :math:`\hat\alpha`, in the order of the model cells (rows of ``V``).
    V : ndarray (K, K)
        Barycentric CVT centroids of :math:`\mathrm{Dir}(\hat\alpha)`
        (:func:`dirichlet_cvt`).
    perm : ndarray of int (K,)
        ``perm[k]``: the data cell (k-means cluster) paired with model cell ``k``.
    vertices : ndarray (K, r)
        :math:`V^{-1}\hat C`, the vertices in the coordinates of ``W`` relative to the
        data centre.
    mass_misfit : float
        Largest difference between a data cell's mass and its model cell's.
    cov_misfit : float
        :math:`\log\mathrm{tr}\tilde\Sigma - \log\mathrm{tr}(\hat B^T S(\hat\alpha)
        \hat B)` on the top subspace.
    n_iter : int
        Evaluations of :func:`dirichlet_cvt`.
    converged : bool
        Whether both moment conditions were met (step in :math:`\log\alpha_0` below
        ``VECTOR_TOL``, log-trace misfit below ``VECTOR_TRACE_TOL``, mass misfit below
        ``VECTOR_MASS_TOL``). When False the result
        is the iterate of least mass misfit (ties: least ``|cov_misfit|``), not the
        last one, and ``status`` says why.
    status : str
        ``"converged"``; ``"stalled"`` (no iterate matched the cell masses better
        for ``VECTOR_STALL`` iterations: no :math:`\mathrm{Dir}(\alpha)` gives the
        data's masses, e.g. data that are not a Dirichlet nest or a wrong ``K``);
        ``"max_iter"``; ``"singular"`` (the next Dirichlet tried gave a singular
        cell-weight matrix, so the iteration stopped at the best iterate so far); or
        ``"alpha0_bound"`` (the returned :math:`\alpha_0 / K` is at
        an end of ``VECTOR_ALPHA_RANGE``, where the trace equation pushed it).
    """

    alpha: np.ndarray
    V: np.ndarray
    perm: np.ndarray
    vertices: np.ndarray
    mass_misfit: float
    cov_misfit: float
    n_iter: int
    converged: bool = True
    status: str = "converged"


def estimate_alpha_vector(
    sub: Subspace,
    g,
    labels,
    kernel: str,
    ctx: dict,
    *,
    n_draws: int = VECTOR_DRAWS,
    max_iter: int = VECTOR_MAX_ITER,
    noise_aware: bool = True,
    random_state=None,
) -> AlphaVector:
    r"""A vector alpha and the vertices of an asymmetric nest, by the method of moments.

    Parameters
    ----------
    sub : Subspace
    g : ndarray (K, r)
        The k-means centroids in the coordinates of ``W`` relative to the data centre.
    labels : ndarray (n,)
        The k-means cell of each row.
    kernel : {"gaussian", "poisson", "multinomial"}
    ctx : dict
        The kernel's noise parameters (as for :func:`calibrate_alpha`).
    n_draws, max_iter : int
    noise_aware : bool, default True
        For the Gaussian kernel, simulate the noise in the cells (see Notes).
    random_state : None, int or Generator

    Returns
    -------
    AlphaVector

    Notes
    -----
    Two sets of moments fix :math:`\alpha = \alpha_0 p`: the masses of the k-means
    cells (``K - 1`` numbers, which depend mostly on the shares ``p``) and the
    noise-corrected covariance of Lemma 3 on the top subspace, whose trace must equal
    that of :math:`\hat B^T S(\alpha) \hat B` with :math:`\hat B = V(\alpha)^{-1}
    \hat C` (one number, which fixes :math:`\alpha_0`). A fixed-point iteration
    from :math:`\alpha = K \hat m` (``m`` the data's cell masses): ``p`` is multiplied
    by the ratio of the data's masses to the model's, and :math:`\log\alpha_0` takes a
    secant step on the log-trace misfit (at most 1 per iteration); each evaluation is
    one :func:`dirichlet_cvt` with the same seed (common random numbers).

    With ``noise_aware`` and the Gaussian kernel, each evaluation also simulates the
    nest with noise, :math:`y = \theta\hat B + \varepsilon`,
    :math:`\varepsilon \sim N(0, \hat\sigma^2 I)` on the top subspace, and clusters
    it as VLAD's default clusters the data (whitened by the noise-corrected
    covariance, or by :math:`\Lambda` where that is not positive definite; one Lloyd
    run started at the data's centroids, so simulated cell ``j`` is data cell ``j``).
    What the noise does to the cells then replaces the noise-free CVT: the cell
    masses are the simulated ones, and the vertices solve :math:`\hat C -
    \bar\varepsilon = \bar\Theta\hat B`, with :math:`\bar\Theta` the mean weights
    and :math:`\bar\varepsilon` the mean noise of each simulated cell (the noise
    moves points across cells, which pushes the data's centroids outward and,
    uncorrected, biases :math:`\alpha_0` low). ``python benchmarks/dsn_triangle.py
    --noise-check`` compares both on seeds 0-9.
    The finite-sample spread of the k-means centroids is not corrected.
    """
    rng = check_random_state(random_state)
    seed = int(rng.integers(2**63 - 1))
    g = np.asarray(g, dtype=float)
    K = g.shape[0]
    n = sub.scores.shape[0]
    N, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    log_tr = float(np.log(max(np.trace(np.diag(sub.singular_values**2 / n) - N), 1e-300)))
    log_tr -= float(np.log(scale))
    observed = mass_balance(labels, K).masses
    p = np.maximum(observed, 1.0 / (10 * K))
    p = p / p.sum()
    t = float(np.log(K))
    t_lo, t_hi = (float(np.log(K * b)) for b in VECTOR_ALPHA_RANGE)
    noisy = None
    if noise_aware and kernel == "gaussian" and ctx.get("sigma2"):
        A = corrected_metric(sub, kernel, ctx)
        if A is None:
            A = np.diag(sub.singular_values / np.sqrt(n))
        noisy = (A, np.sqrt(ctx["sigma2"]), seed + 1)
    verts_prev = None
    hist: list[tuple[float, float]] = []
    best, best_key, since_best, status = None, None, 0, "max_iter"
    for it in range(1, max_iter + 1):
        a = np.exp(t) * p
        V, masses = dirichlet_cvt(a, n_draws=n_draws, random_state=seed)
        perm = match_cells(observed, masses)
        try:
            verts = np.linalg.solve(V, g[perm])
            if noisy is not None:
                theta_bar, eps_bar, cell_m = _noisy_cells(
                    a, verts if verts_prev is None else verts_prev, g, *noisy, n_draws, K
                )
                if np.all(cell_m > 0):
                    verts = np.linalg.solve(theta_bar, g - eps_bar)
                    masses = cell_m[perm]
        except np.linalg.LinAlgError:
            # a Dir(alpha) this extreme leaves cells with (numerically) one vertex's
            # weight only: the moment equations have no unique solution here
            if best is None:
                raise
            status = "singular"
            break
        verts_prev = verts
        ab = a / a.sum()
        S = (np.diag(ab) - np.outer(ab, ab)) / (a.sum() + 1.0)
        h = log_tr - float(np.log(max(np.trace(verts.T @ S @ verts), 1e-300)))
        hist.append((t, h))
        slope = -0.3  # d h / d log(alpha_0): the model trace grows slowly with alpha_0
        if len(hist) >= 2 and hist[-1][0] != hist[-2][0]:
            fit = (hist[-1][1] - hist[-2][1]) / (hist[-1][0] - hist[-2][0])
            if fit < 0:
                slope = -max(-fit, 0.05)
        step = float(np.clip(-h / slope, -1.0, 1.0))
        mass_misfit = float(np.max(np.abs(observed[perm] - masses)))
        current = AlphaVector(a, V, perm, verts, mass_misfit, h, it)
        if (
            abs(step) < VECTOR_TOL
            and abs(h) < VECTOR_TRACE_TOL
            and mass_misfit < VECTOR_MASS_TOL
        ):
            return current
        key = (round(mass_misfit / VECTOR_MASS_TOL), abs(h))
        if best is None or key < best_key:
            improved = best is None or mass_misfit < best.mass_misfit - VECTOR_MASS_TOL
            best, best_key = current, key
            since_best = 0 if improved else since_best + 1
        else:
            since_best += 1
        if since_best >= VECTOR_STALL and best.mass_misfit > 3 * VECTOR_MASS_TOL:
            status = "stalled"
            break
        p = p * np.maximum(observed[perm], 1e-12) / np.maximum(masses, 1e-12)
        p = p / p.sum()
        t_new = float(np.clip(t + step, t_lo, t_hi))
        if t_new == t and t + step != t:  # pinned at the bound, pushed further out
            status = "alpha0_bound"
            break
        t = t_new
    if status == "max_iter" and np.isclose(np.log(best.alpha.sum()), (t_lo, t_hi)).any():
        status = "alpha0_bound"
    return best._replace(n_iter=it, converged=False, status=status)


def _noisy_cells(a, verts, g, A, sigma, seed, n_draws, K):
    """Mean weights, mean noise and mass of the cells of a simulated noisy nest."""
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(a, size=n_draws)
    eps = sigma * rng.standard_normal((n_draws, verts.shape[1]))
    z = np.linalg.solve(A, (theta @ verts + eps).T).T
    _, labels, _ = kmeans(z, K, n_init=0, init=np.linalg.solve(A, g.T).T, random_state=rng)
    counts = np.bincount(labels, minlength=K).astype(float)
    sums = np.zeros((K, K + eps.shape[1]))
    np.add.at(sums, labels, np.hstack([theta, eps]))
    sums /= np.maximum(counts, 1.0)[:, None]
    return sums[:, :K], sums[:, K:], counts / n_draws
