r"""An asymmetric Dirichlet in a VLAD fit: the cell-mass test and a vector alpha.

The k-means cells of a noise-free symmetric Dirichlet nest hold equal shares of the
data (Lemma 2). :func:`mass_balance` is Pearson's chi-square of the cell counts against
``n / K``; :func:`symmetry_test` is the calibrated test VLAD uses, which compares the
counts with those of the fitted symmetric nest simulated with the kernel's noise at the
data's size. :func:`dirichlet_cvt` gives the centroidal Voronoi tessellation of
:math:`\mathrm{Dir}(\alpha)` for a vector alpha, :func:`match_cells` pairs the data's
cells with the model's, and :func:`estimate_alpha_vector` fits a vector alpha and the
vertices by the method of moments.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import chdtrc, fdtrc

from bayespmf._validation import check_random_state
from bayespmf.kernels._vlad_linalg import psd_sqrt
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, kmeans
from bayespmf.kernels.vlad_calibration import NOISE_SIMULATORS, frame_kmeans
from bayespmf.kernels.vlad_geometry import Subspace
from bayespmf.kernels.vlad_moments import (
    NOISE_CORRECTIONS,
    corrected_metric,
    noise_fraction,
    signal_margin,
)

__all__ = [
    "AlphaVector",
    "CVT_DRAWS",
    "MassBalance",
    "SYMMETRY_REPS",
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
    "symmetry_test",
]

#: Monte Carlo draws of Dir(alpha) behind :func:`dirichlet_cvt` (k-means in K - 1
#: dimensions; the centroids' Monte Carlo sd is small next to their spread,
#: :ref:`bench-vlad-asymmetric`).
CVT_DRAWS = 50_000


class MassBalance(NamedTuple):
    r"""Result of :func:`mass_balance` and :func:`symmetry_test`.

    Attributes
    ----------
    masses : ndarray (K,)
        Fraction of the points in each cell.
    chi2 : float
        Pearson's statistic :math:`\sum_k (n_k - n e_k)^2 / (n e_k)` of the counts
        against the expected masses ``expected``.
    p_value : float
        :func:`mass_balance`: upper tail of :math:`\chi^2_{K-1}` at ``chi2``.
        :func:`symmetry_test`: upper tail of :math:`F(K - 1, (R - 1)(K - 1))` at
        ``statistic``.
    total_variation : float
        :math:`\frac12 \sum_k |m_k - e_k|`.
    expected : ndarray (K,) or None
        The masses :math:`e_k` of the null: ``1 / K`` (:func:`mass_balance`), or the
        mean masses of the simulated symmetric nest (:func:`symmetry_test`).
    dispersion : float
        :math:`\hat\phi`, the variance of the simulated counts relative to
        multinomial counts of the same masses (1 for :func:`mass_balance`).
    statistic : float
        The test statistic: ``chi2`` (:func:`mass_balance`), or
        :math:`\chi^2 / ((K - 1)\hat\phi (1 + 1/R))` (:func:`symmetry_test`).
    n_rep : int
        ``R``, simulated data sets behind ``expected`` and ``dispersion`` (0 for
        :func:`mass_balance`).
    noise_fraction : float
        :func:`symmetry_test`: the largest share of the data variance that is noise
        along a direction of the top subspace
        (:func:`~bayespmf.kernels.vlad_moments.noise_fraction`); near 1, the
        projection has lost a direction of the simplex and the test is not
        conclusive (see its Notes). nan for :func:`mass_balance`.
    signal_margin : float
        :func:`symmetry_test`: the smallest data variance along a direction of the top
        subspace over the top of the noise spectrum at the data's size
        (:func:`~bayespmf.kernels.vlad_moments.noise_bulk_edge`); at most 1, some
        direction of the subspace cannot be told from noise, the fitted nest is not
        identified along it and the test is not conclusive (see its Notes). nan for
        :func:`mass_balance`.
    """

    masses: np.ndarray
    chi2: float
    p_value: float
    total_variation: float
    expected: np.ndarray | None = None
    dispersion: float = 1.0
    statistic: float = float("nan")
    n_rep: int = 0
    noise_fraction: float = float("nan")
    signal_margin: float = float("nan")


def mass_balance(labels, n_components: int) -> MassBalance:
    r"""Pearson's chi-square of the k-means cell counts against equal masses.

    Under a noise-free symmetric Dirichlet the whitened k-means cells are images of
    each other under the simplex's symmetries (Lemma 2: in the
    :math:`\Sigma^\dagger` metric the simplex is regular), so each holds :math:`1/K`
    of the points; an asymmetric :math:`\mathrm{Dir}(\alpha)` gives the cell of a
    vertex with larger :math:`\alpha_k` more mass. The statistic is Pearson's
    chi-square of the cell counts against ``n / K``, with the :math:`\chi^2_{K-1}`
    tail of multinomial counts in fixed cells. The cells of k-means are neither fixed
    (they are fitted to the same points) nor of equal mass once noise moves points
    across them, so this p-value is not the test VLAD applies: see
    :func:`symmetry_test`.

    Parameters
    ----------
    labels : array_like of int (n,)
        The cell of each point, in ``0 .. n_components - 1``.
    n_components : int

    Returns
    -------
    MassBalance

    Examples
    --------
    >>> mb = mass_balance(np.array([0, 0, 1, 2, 2, 2]), 3)
    >>> mb.masses.round(3).tolist(), mb.chi2
    ([0.333, 0.167, 0.5], 1.0)
    """
    labels = np.asarray(labels)
    n = labels.size
    counts = np.bincount(labels, minlength=n_components).astype(float)
    expected = n / n_components
    chi2 = float(np.sum((counts - expected) ** 2) / expected)
    masses = counts / n
    return MassBalance(
        masses,
        chi2,
        float(chdtrc(n_components - 1, chi2)),
        float(0.5 * np.sum(np.abs(masses - 1.0 / n_components))),
        np.full(n_components, 1.0 / n_components),
        1.0,
        chi2,
        0,
    )


#: Simulated data sets of the fitted symmetric nest behind :func:`symmetry_test`.
#: Each costs one k-means run (with the data's restarts) on ``n`` points in ``K - 1``
#: dimensions; the reference distribution is F(K - 1, (R - 1)(K - 1)), so R sets how
#: much the estimated dispersion costs in power (R = 16: 15 (K - 1) denominator
#: degrees of freedom, 30 at K = 3).
SYMMETRY_REPS = 16


def symmetry_test(
    sub: Subspace,
    g,
    labels,
    kernel: str,
    ctx: dict,
    alpha: float,
    gamma: float,
    *,
    whiten: str = "data",
    n_rep: int = SYMMETRY_REPS,
    n_init: int = 0,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    random_state=None,
) -> MassBalance:
    r"""Test that the k-means cells are those of a symmetric Dirichlet nest.

    A parametric bootstrap of the cell counts under the fitted symmetric nest, with
    the kernel's noise, at the data's size, clustered as the data were.

    Parameters
    ----------
    sub : Subspace
        The top ``K - 1`` singular factors of the data (:func:`top_subspace`).
    g : ndarray (K, r)
        The data's k-means centroids in the coordinates of ``W``, relative to the
        data centre (``(centroids - center) @ W``; not re-centred).
    labels : ndarray of int (n,)
        The data's k-means cell of each row (cell ``k`` is centroid ``g[k]``).
    kernel : {"gaussian", "poisson", "multinomial"}
    ctx : dict
        The kernel's noise parameters (as for
        :func:`~bayespmf.kernels.vlad_calibration.calibrate_alpha`).
    alpha : float
        The symmetric concentration of the fit (estimated or given).
    gamma : float
        The extension of the fit: the fitted vertices are ``gamma * g`` in the same
        coordinates (Alg. 1, step 6).
    whiten : {"data", "corrected"}
        The metric the data were clustered in (repeated on each simulated set).
    n_rep : int
        ``R``, simulated data sets (at least 2).
    n_init : int, default 0
        k-means++ restarts of each simulated clustering; pass the data's (VLAD's
        ``n_init``) so that the simulated cells vary as the data's do. 0 runs one
        Lloyd iteration from the model's centroids (cheaper; its cells vary less
        than those of restarted k-means, so the test is then anti-conservative).
    max_iter : int
    random_state : None, int or Generator

    Returns
    -------
    MassBalance
        ``expected`` are the simulated masses, ``p_value`` the calibrated p-value.

    Notes
    -----
    Lemma 2 makes the cells of a *noise-free* symmetric nest of equal mass in the
    population. Two things make Pearson's :math:`\chi^2_{K-1}` test of equal masses
    (:func:`mass_balance`) reject symmetric data too often:

    * noise moves points across the cells, and not evenly: Poisson and multinomial
      noise grows with the rates (points near a vertex of large rates are noisier),
      and whitening by the noisy covariance distorts the regular simplex of Lemma 2,
      so the population cells of a symmetric nest with noise have masses
      :math:`e_k \neq 1/K`, and the statistic grows like ``n`` whatever the sample;
    * the cells are fitted to the same points (k-means moves the boundaries toward
      the sample's fluctuations, and the counts of neighbouring cells are dependent),
      so the counts are not multinomial in fixed cells: their variance is
      :math:`\phi` times the multinomial one, with :math:`\phi \neq 1`.

    Both are properties of the fitted symmetric nest at the data's size and noise,
    so they are simulated: ``R`` data sets of ``n`` points, weights
    :math:`\theta_i \sim \mathrm{Dir}_K(\alpha)`, means :math:`\theta_i^T (\gamma g)`
    and the kernel's noise projected on ``W`` (``NOISE_SIMULATORS``, as in the
    calibration of alpha), each clustered by VLAD's k-means in the data's metric
    (:func:`~bayespmf.kernels.vlad_calibration.frame_kmeans`: with ``n_init``
    restarts as VLAD clusters the data, the cells paired with the model's centroids),
    so that simulated cell ``k`` is the data's cell ``k``. With :math:`c_{rk}` the
    simulated counts, :math:`e_k = \bar c_k / n` and

    .. math::
        \hat\phi = \frac{1}{(R-1)(K-1)} \sum_{r,k} \frac{(c_{rk} - n e_k)^2}{n e_k},
        \qquad
        T = \frac{\sum_k (n_k - n e_k)^2 / (n e_k)}{(K-1)\,\hat\phi\,(1 + 1/R)},

    the quasi-likelihood (over-dispersed Pearson) test: ``T`` is referred to
    :math:`F(K-1, (R-1)(K-1))`, which pays for the estimated :math:`\hat\phi`; the
    factor :math:`1 + 1/R` pays for the estimated :math:`e_k`. Under an asymmetric
    :math:`\mathrm{Dir}(\alpha)` the data's cells carry the unequal masses of the
    vertices' :math:`\alpha_k` (Supplement C) that the symmetric model does not
    reproduce, and ``T`` grows like ``n``.

    The null is the *fitted* nest, so the test is only as good as the fit. It fails
    where the top subspace has lost a direction of the simplex: a strongly skewed
    simplex (some vertices shrunk close to the centre) under heavy noise, whose thin
    direction drowns in the noise of the ``D - K + 1`` others. The projected data
    then hold a flattened simplex plus a direction of (almost) pure noise, k-means
    cuts the noise, and the cells of the true *symmetric* nest come out unequal by
    as much as a real asymmetry gives; the fitted nest, whose vertices are poor
    along that direction, does not reproduce that and the p-values come out small.
    ``signal_margin`` flags it without a tuned threshold: the smallest variance along
    a top direction over the top :math:`b_+` of the spectrum that the kernel's noise
    alone gives at this ``n`` and ``D`` (the generalised Marchenko--Pastur edge,
    :func:`~bayespmf.kernels.vlad_moments.noise_bulk_edge`). At most 1, that
    direction lies in the noise bulk: by the BBP phase transition the sample
    direction then carries no trace of a direction of the simplex, so neither the
    fit nor the null it simulates is identified along it.
    :func:`~bayespmf.fit.simplex.fit_simplex_nest` does not act on the test then.
    ``noise_fraction`` (the largest share of noise in the variance along a top
    direction) is reported beside it.

    Examples
    --------
    >>> from bayespmf.datasets._simulate import make_simplex_nest
    >>> from bayespmf.kernels.vlad_geometry import top_subspace, vlad_centroids
    >>> X, _ = make_simplex_nest(2000, 3, 3, alpha=1.5, sigma=0.1, random_state=0)
    >>> sub = top_subspace(X, 2)
    >>> centroids, _, labels = vlad_centroids(sub, 3, random_state=0)
    >>> g = (centroids - sub.center) @ sub.components
    >>> from bayespmf.kernels.extension_table import extension_parameter
    >>> gamma = float(extension_parameter(1.5, 3))  # VLAD's extension, alpha known
    >>> mb = symmetry_test(sub, g, labels, "gaussian", {"sigma2": 0.01}, 1.5, gamma,
    ...                    n_init=8, random_state=0)
    >>> mb.n_rep, bool(mb.p_value > 0.01), bool(np.allclose(mb.expected.sum(), 1.0))
    (16, True, True)
    """
    rng = check_random_state(random_state)
    g = np.asarray(g, dtype=float)
    labels = np.asarray(labels)
    K = g.shape[0]
    n = labels.size
    n_rep = max(int(n_rep), 2)
    vertices = float(gamma) * g
    # the model's centroids: the data's, moved with the centre of the model simplex
    init = g + (float(gamma) - 1.0) * g.mean(axis=0)
    draw = NOISE_SIMULATORS[kernel](sub, ctx, vertices)
    noise, scale = NOISE_CORRECTIONS[kernel](sub, ctx)
    a = np.full(K, float(alpha))
    sims = np.empty((n_rep, K))
    for r in range(n_rep):
        theta = rng.dirichlet(a, size=n)
        points = theta @ vertices + draw(theta, rng)
        sims[r] = frame_kmeans(
            points,
            init,
            noise,
            scale,
            whiten=whiten,
            max_iter=max_iter,
            n_init=n_init,
            rng=rng,
        ).counts
    counts = np.bincount(labels, minlength=K).astype(float)
    expected = np.maximum(sims.mean(axis=0), 0.5) / n
    expected = expected / expected.sum()
    chi2 = float(np.sum((counts - n * expected) ** 2 / (n * expected)))
    spread = float(np.sum((sims - n * expected) ** 2 / (n * expected)))
    df1, df2 = K - 1, (n_rep - 1) * (K - 1)
    dispersion = max(spread / df2, 1e-12)
    statistic = chi2 / (df1 * dispersion * (1.0 + 1.0 / n_rep))
    masses = counts / n
    return MassBalance(
        masses,
        chi2,
        float(fdtrc(df1, df2, statistic)),
        float(0.5 * np.sum(np.abs(masses - expected))),
        expected,
        dispersion,
        float(statistic),
        n_rep,
        noise_fraction(sub, kernel, ctx),
        signal_margin(sub, kernel, ctx),
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
#: within VECTOR_MASS_TOL. On the triangle test it stops after a few evaluations
#: (:ref:`bench-vlad-asymmetric`).
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
