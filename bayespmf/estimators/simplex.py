r"""Estimators of the vertices of a Dirichlet simplex nest: VLAD, GDM and SPA.

All three are scikit-learn transformers with one interface: ``fit(X)`` sets
``vertices_`` (K, D); ``transform(X)`` gives the barycentric weights of the projection
of each row onto the fitted simplex; ``score(X)`` is the negative mean squared
reconstruction error. ``get_params``, ``set_params``, ``clone``, ``Pipeline`` and
``GridSearchCV`` work as for any scikit-learn estimator.

Each is a thin class over :func:`bayespmf.fit.fit_simplex_nest`: ``__init__`` only
stores its arguments, ``fit`` passes them to the function (which validates them and
raises the warnings) and sets the attributes that end in ``_``;
``fit``/``fit_transform``/``score`` take and ignore ``y``, and ``transform`` or
``score`` before ``fit`` raise ``NotFittedError``. ``X`` may be a SciPy sparse
matrix (a document-term matrix for ``kernel="multinomial"``), which is never
densified (scikit-learn tag ``input_tags.sparse``). They pass
``sklearn.utils.estimator_checks`` (``tests/test_estimator_checks.py``) except
``check_dtype_object``, because non-numeric entries raise ``DataValidationError`` (a
ValueError, the package's error for malformed data), not the TypeError of
``np.asarray``; except the checks that set ``n_components = 1``
(``check_dont_overwrite_parameters``, ``check_fit2d_1feature``,
``check_fit2d_1sample``, ``check_fit2d_predict1d``,
``check_methods_sample_order_invariance``, ``check_methods_subset_invariance``), because
a simplex needs at least two vertices; VLAD and GDM also fail ``check_transformer_n_iter``:
``max_iter`` caps the Lloyd iterations of each k-means restart and
:func:`bayespmf.kernels.kmeans.kmeans` reports no iteration count, so there is no
``n_iter_``.

References
----------
M. Yurochkin, A. Guha, Y. Sun, X. Nguyen, "Dirichlet Simplex Nest and Geometric
Inference", ICML 2019.
M. Yurochkin and X. Nguyen, "Geometric Dirichlet Means algorithm for topic inference",
NeurIPS 2016.
N. Gillis and S. A. Vavasis, "Fast and robust recursive algorithms for separable
nonnegative matrix factorization", IEEE TPAMI 36(4), 2014.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin

from bayespmf._validation import DataValidationError
from bayespmf.estimators._base import check_fitted
from bayespmf.fit.simplex import check_counts, check_rows, fit_simplex_nest
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, DEFAULT_KMEANS_N_INIT
from bayespmf.kernels.vlad_geometry import barycentric_weights, preprocess

__all__ = [
    "GDM",
    "SMALL_CELL_FRACTION",
    "VLAD",
    "DegenerateVertexWarning",
    "SimplexSPA",
]

#: A k-means cell with fewer than ``SMALL_CELL_FRACTION * n / K`` rows makes VLAD warn
#: (:class:`DegenerateVertexWarning`): its vertex rests on a handful of rows, as on
#: the shipped Wikipedia corpus at K = 10 (:ref:`bench-vlad-asymmetric`).
SMALL_CELL_FRACTION = 0.1


class DegenerateVertexWarning(UserWarning):
    """Some vertices of a VLAD fit rest on nearly empty k-means cells."""


def _warn_small_cells(est, kernel: str) -> None:
    """Warn, with the numbers, when a k-means cell of a centroid fit is nearly empty."""
    counts = np.bincount(est.labels_, minlength=est.n_components)
    n, K = counts.sum(), counts.size
    limit = SMALL_CELL_FRACTION * n / K
    small = np.sort(counts[counts < limit])
    if small.size == 0:
        return
    msg = (
        f"{type(est).__name__}: {small.size} of the {K} k-means cells hold fewer than "
        f"{SMALL_CELL_FRACTION:g} n/K = {limit:.1f} rows ({', '.join(map(str, small))} "
        f"of {n}), so their vertices rest on a handful of rows (outliers, or K too "
        "large)."
    )
    alpha = np.atleast_1d(est.alpha_)
    if alpha.size == K:
        share = np.sort(alpha / alpha.sum())[: small.size]
        msg += (
            " The vector alpha gives the smallest vertices the weight shares "
            f"{', '.join(f'{v:.2g}' for v in share)} "
            f"(1/K = {1 / K:.3g})."
        )
    if kernel == "multinomial":
        support = np.sort(np.count_nonzero(est.vertices_ > 0, axis=1))[: small.size]
        msg += (
            " The topics with the fewest words have "
            f"{', '.join(map(str, support))} nonzero words."
        )
    warnings.warn(
        msg + " Check labels_ and alpha_, try a smaller n_components, or remove the "
        "outlying rows.",
        DegenerateVertexWarning,
        stacklevel=3,
    )


class _SimplexEstimator(TransformerMixin, BaseEstimator):
    """Shared ``transform`` / ``score`` and the checks of data given after ``fit``.

    A scikit-learn transformer: the constructor only stores its arguments, ``fit``
    validates them and sets the attributes that end in ``_``, and ``y`` is accepted
    and ignored by ``fit``, ``fit_transform`` and ``score`` (the models are
    unsupervised; accepting ``y`` lets them sit in a ``Pipeline`` before a supervised
    step, which passes ``y`` to every step).
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # SciPy sparse X is fitted without densifying
        return tags

    def _check_fitted(self) -> None:
        check_fitted(self, "vertices_", "fit(X)")

    def _check_X(self, X) -> np.ndarray:
        """Rows of new data, validated against the fit, preprocessed like in ``fit``."""
        self._check_fitted()
        owner = type(self).__name__
        arr = check_rows(X, owner)
        if arr.shape[1] != self.n_features_in_:
            raise DataValidationError(
                f"X has {arr.shape[1]} features, but {owner} is expecting "
                f"{self.n_features_in_} features as input (it was fitted on "
                f"{self.n_features_in_}). Pass data with the columns it was fitted on."
            )
        check_counts(arr, self._kernel, owner)
        return preprocess(arr, self._kernel)[0]

    def transform(self, X) -> np.ndarray:
        r"""Barycentric weights of the projection of each row onto the fitted simplex.

        Parameters
        ----------
        X : array_like (n, D)
            Same kind of data as in ``fit`` (counts for the multinomial kernel, which
            are turned into frequencies); any number of rows.

        Returns
        -------
        ndarray (n, K)
            :math:`\hat\theta_i = \arg\min_{\theta \in \Delta^{K-1}} \|y_i -
            \hat B^T\theta\|_2`; rows are non-negative and sum to one (see
            :func:`bayespmf.kernels.vlad_geometry.barycentric_weights`).

        Raises
        ------
        NotFittedError
            Before ``fit``.
        DataValidationError
            Malformed data, or another number of features than in ``fit``.
        """
        Y = self._check_X(X)
        return barycentric_weights(Y, self.vertices_)[0]

    def score(self, X, y=None) -> float:
        r"""Negative mean squared reconstruction error (higher is better).

        :math:`-\frac1n\sum_i \|y_i - \hat B^T\hat\theta_i\|_2^2`.

        ``y_i`` is the row (the word frequencies for the multinomial kernel) and
        :math:`\hat\theta_i` its weights from :meth:`transform`: the squared distance
        of each point to the fitted simplex, the Frobenius criterion of the paper's
        Sec. 5.3 (stock data) squared and averaged. It is the ``score`` that
        ``GridSearchCV`` and ``cross_val_score`` use. Points inside the fitted simplex
        count 0, so, like ``KMeans.score``, it measures how well held-out data are
        covered, not how close the vertices are: it never penalizes a simplex that is
        too large, and more vertices usually score higher. It suits rejecting too
        few vertices or under-extended fits, not choosing among larger ones.

        Parameters
        ----------
        X : array_like (n, D)
            Same kind of data as in ``fit``.
        y : None
            Ignored (scikit-learn convention: the model is unsupervised).

        Returns
        -------
        float
            At most 0.
        """
        Y = self._check_X(X)
        theta = barycentric_weights(Y, self.vertices_)[0]
        fitted = theta @ self.vertices_
        if sparse.issparse(Y):  # ||y||^2 - 2 y.f + ||f||^2, nothing densified
            sq = np.asarray(Y.multiply(Y).sum(axis=1)).ravel()
            cross = np.einsum("ij,ij->i", np.asarray(Y @ self.vertices_.T), theta)
            dist = np.maximum(sq - 2 * cross + np.einsum("ij,ij->i", fitted, fitted), 0)
            return -float(np.mean(dist))
        return -float(np.mean(np.sum((Y - fitted) ** 2, axis=1)))

    def fit(self, X, y=None):
        """Estimate the vertices from data ``X``.

        Parameters
        ----------
        X : array_like (n, D)
            Real vectors (``kernel="gaussian"``) or counts (``"poisson"``,
            ``"multinomial"``); dense or a SciPy sparse matrix (a document-term
            matrix stays sparse: see :func:`~bayespmf.fit.simplex.fit_simplex_nest`).
        y : None
            Ignored: the model is unsupervised. Accepted so that the estimator fits in
            a ``Pipeline`` (which passes ``y`` to every step) and in
            ``GridSearchCV``.

        Returns
        -------
        self
            The fitted estimator.

        Raises
        ------
        DataValidationError
            Malformed data, ``n_components`` or another parameter (see
            :func:`bayespmf.fit.simplex.check_nest_data`).
        """
        t0 = time.perf_counter()
        params = self.get_params()
        fit = fit_simplex_nest(X, params.pop("n_components"), self._method, **params)
        self._kernel = fit.kernel
        self.vertices_ = fit.vertices
        for name, value in fit.details.items():
            setattr(self, name + "_", value)
        self.n_features_in_ = fit.n_features
        self.fit_time_ = time.perf_counter() - t0
        return self


class _CentroidNestEstimator(_SimplexEstimator):
    """The parameters that VLAD and GDM share (both extend k-means centroids)."""

    def __init__(
        self,
        n_components: int,
        kernel: str = "gaussian",
        alpha: float | None = None,
        *,
        n_init: int = DEFAULT_KMEANS_N_INIT,
        max_iter: int = DEFAULT_KMEANS_MAX_ITER,
        random_state=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.alpha = alpha
        self.n_init = n_init
        self.max_iter = max_iter
        self.random_state = random_state


class VLAD(_CentroidNestEstimator):
    r"""Voronoi Latent Admixture: vertices of a Dirichlet simplex nest (Alg. 1).

    Parameters
    ----------
    n_components : int
        ``K``, number of vertices (>= 2, <= D + 1; <= D for the multinomial kernel).
    kernel : {"gaussian", "poisson", "multinomial"}, default "gaussian"
        Probability kernel of the data: real vectors with Gaussian noise, Poisson
        counts, or word counts of documents (LDA; rows are turned into frequencies).
    alpha : float or array_like of shape (K,), optional
        Dirichlet concentration if known: one number (symmetric) or one per vertex
        (asymmetric; then ``vertices_[k]`` is the vertex of ``alpha[k]``, see Notes);
        estimated by the method of moments (Sec. 3.3) when None.
    n_init : int, default 8
        k-means++ restarts (the paper uses 8).
    max_iter : int, default 300
        Lloyd iterations per k-means run.
    whiten : {"corrected", "data"}, default "corrected"
        Metric of the k-means step. ``"data"`` is Alg. 1 as published: k-means on the
        rows of ``U``, i.e. whitening by the sample covariance
        :math:`\Sigma_n`. ``"corrected"`` whitens by the noise-corrected covariance
        :math:`W^T\tilde\Sigma W` of Lemma 3 (the covariance of the noise-free nest,
        :math:`BS(\alpha)B^T`, which Lemma 2 assumes), falling back to ``"data"`` when
        the noise is more than a quarter of the data variance along some direction
        (:func:`bayespmf.kernels.vlad_moments.corrected_metric`). Identical without noise.
    noise_bias : {"bootstrap", "simex", "none"}, default "bootstrap"
        How eq. (5) and the extension handle the outward spread of the empirical
        k-means centroids (noise moving points across cells, and k-means overfitting
        a finite sample). ``"none"`` is Sec. 3.3 as published. ``"bootstrap"``
        simulates the fitted nest at the data's size and noise, clusters it the same
        way, and solves eq. (5) for the alpha whose simulated moment target matches
        the data's; the centroids are then extended by
        :math:`\gamma(\hat\alpha) / \hat\rho`, :math:`\hat\rho` the simulated
        spread (:func:`bayespmf.kernels.vlad_calibration.calibrate_alpha`; with a
        known ``alpha`` only :math:`\hat\rho` is estimated). ``"simex"`` extrapolates
        the moment target to zero noise
        (:func:`bayespmf.kernels.vlad_moments.simex_phi_star`; alpha only). See
        Notes for the measured errors.
    random_state : None, int or numpy.random.Generator
        Seeds k-means (and ARPACK's start vector for ``D > 1000``).

    Attributes
    ----------
    vertices_ : ndarray (K, D)
        :math:`\hat\beta_k` (topics on the simplex for the multinomial kernel, rates
        clipped at 0 for Poisson).
    alpha_ : float or ndarray (K,)
        The given or estimated concentration; a vector (one entry per row of
        ``vertices_``) when a vector was given or VLAD fell back to one.
    gamma_ : float
        The factor that extended the centroids: :math:`\gamma(\hat\alpha)`, divided
        by ``inflation_`` (nan for a vector alpha).
    mass_balance_ : MassBalance
        Masses of the k-means cells, the masses the fitted symmetric nest gives them
        (simulated with the kernel's noise at the data's size) and the calibrated test
        of the difference (:func:`bayespmf.kernels.vlad_asymmetric.symmetry_test`); for
        a given vector alpha, Pearson's statistic against ``1 / K``
        (:func:`bayespmf.kernels.vlad_asymmetric.mass_balance`), which is not tested.
    fallback_ : None or "vector_alpha"
        ``"vector_alpha"`` when the cells showed an asymmetric Dirichlet and the
        vertices come from an estimated vector alpha (an
        :class:`~bayespmf.fit.simplex.AsymmetricDirichletWarning` says so, with the
        numbers).
    symmetric_vertices_ : ndarray (K, D) or None
        The vertices of the symmetric fit, kept when VLAD fell back.
    inflation_ : float
        :math:`\hat\rho`, the simulated outward spread of the k-means centroids
        (``noise_bias="bootstrap"``; 1.0 otherwise).
    alpha_interval_ : (float, float)
        Approximate 95 % interval for alpha from the parametric bootstrap (nan when
        alpha was given or ``noise_bias`` is not ``"bootstrap"``).
    centroids_ : ndarray (K, D)
        The k-means (CVT) centroids :math:`\hat c_k` before extension.
    center_ : ndarray (D,)
        :math:`\hat c_0`, the data mean.
    singular_values_ : ndarray (K-1,)
    components_ : ndarray (D, K-1)
    labels_ : ndarray (n,)
        Voronoi cell of each training row.
    sigma_ : float or None
        Estimated Gaussian noise standard deviation (Gaussian kernel only).
    alpha_objective_ : float
        Relative objective of eq. (5) at ``alpha_`` (nan when ``alpha`` was given).
    n_features_in_ : int
    fit_time_ : float
        Seconds spent in ``fit``.

    Raises
    ------
    DataValidationError
        From ``fit``, for malformed data or ``n_components`` (see
        :func:`bayespmf.fit.simplex.check_nest_data`).

    Notes
    -----
    Alg. 1 of Yurochkin et al. (2019): centre (:math:`\bar x_i = x_i - \hat c_0`), top
    ``K - 1`` singular factors :math:`\bar X \approx U\Lambda W^T`, k-means on the
    rows of ``U`` (equivalent to k-means in the :math:`\Sigma_n^\dagger`-norm, Lemma 2,
    whose centroids are the CVT centroids aligned with the vertices, Lemma 1), map back
    :math:`\hat c_k = W\Lambda\eta_k + \hat c_0` and extend
    :math:`\hat\beta_k = \hat c_0 + \gamma(\alpha)(\hat c_k - \hat c_0)` with the
    tabulated extension parameter of Alg. 2
    (:mod:`bayespmf.kernels.extension_table`). Unknown :math:`\alpha` solves eq. (5)
    with the covariance corrected as in Lemma 3 (Supplement A.3): Gaussian
    :math:`\tilde\Sigma = \hat\Sigma - \hat\sigma^2 I` (:math:`\hat\sigma^2` from the
    trailing singular values), Poisson :math:`\tilde\Sigma = \hat\Sigma -
    \mathrm{Diag}(\hat c_0)`, multinomial :math:`\tilde\Sigma = (\hat\Sigma - m
    (\mathrm{Diag}(\hat c_0) - \hat c_0\hat c_0^T)) / (1 - m)`, ``m`` the mean of
    ``1 / N_i``. The cost is that of the truncated SVD, O(nDK) (Supplement B.1).

    **Alpha at small n.** Eq. (5) is flat in alpha (:math:`d\log\varphi/d\log\alpha
    \approx 0.16` at K = 10, alpha = 2, eq. (19)), and its target
    :math:`\varphi^* = \langle M, \tilde\Sigma\rangle / \|M\|^2` is biased low
    because the empirical k-means centroids spread beyond the CVT centroids, for two
    reasons that Lemma 3 does not touch: noise moves points across cells, and k-means
    overfits a finite sample: even without noise the plain estimate is low at
    n = 1000 and the noise lowers it further; SIMEX (the previous default) corrects
    only the noise, with a quadratic extrapolation whose variance is large at small n.
    And the extension :math:`\gamma(\alpha)` assumes centroids at the
    population CVT, so even the true alpha over-extends inflated centroids. The
    default ``noise_bias="bootstrap"`` therefore calibrates both by simulation at the
    data's own n and noise level: alpha is the value whose simulated moment target
    matches the data's, and the centroids are extended by
    :math:`\gamma(\hat\alpha)/\hat\rho`, :math:`\hat\rho` their simulated spread
    (slightly above 1). Its variance is controlled by common random numbers and a fixed
    number of simulated points per evaluation; ``alpha_interval_`` says how well the
    data pin alpha down. On the small-n nests of ``python benchmarks/dsn_figures.py
    --small-n`` it gives the smallest vertex error or close to it, with alpha-hat
    close to the truth (:ref:`bench-vlad-alpha`). The cost is a few evaluations of a
    few k-means runs in ``K - 1`` dimensions, warm started.

    **Asymmetric Dirichlet** (Supplement C, the "triangle test"). Lemma 2 and the
    extension :math:`\gamma(\alpha)` assume a symmetric Dirichlet; with
    :math:`\theta \sim \mathrm{Dir}(\alpha_1, \dots, \alpha_K)` the centroids leave
    the rays to the vertices and the calibration of alpha diverges
    (:ref:`bench-vlad-asymmetric`). Whitened k-means is k-means of :math:`\theta`
    in the metric :math:`S(\alpha)^\dagger` for any alpha, so its centroids are
    :math:`C = V(\alpha) B`, ``V`` the barycentric CVT centroids of
    :math:`\mathrm{Dir}(\alpha)`
    (:func:`bayespmf.kernels.vlad_asymmetric.dirichlet_cvt`), and :math:`B = V^{-1} C`.
    A given vector alpha is used that way (cells paired with vertices by mass).
    Without one, VLAD tests that the k-means cells hold the masses of the fitted
    symmetric nest (:func:`bayespmf.kernels.vlad_asymmetric.symmetry_test`: Lemma 2
    gives equal masses without noise, but noise moves points across the cells
    unevenly and k-means fits the cells to the same points, so the counts are
    compared with those of the fitted nest simulated with the kernel's noise at the
    data's size and clustered the same way, by an over-dispersed Pearson statistic
    referred to an F distribution). When the p-value is below ``ASYMMETRY_P_VALUE``,
    the total variation from the simulated masses above ``ASYMMETRY_MIN_TV`` and the
    top subspace holds the simplex (the variance along each of its directions above
    the top of the noise spectrum at this size, ``mass_balance_.signal_margin > 1``;
    a direction inside the noise bulk cannot be told from noise, the cells of a
    symmetric nest are then unbalanced by the noise and the test is not acted on), it
    warns (:class:`~bayespmf.fit.simplex.AsymmetricDirichletWarning`), estimates a
    vector alpha from the cell masses and the covariance
    (:func:`bayespmf.kernels.vlad_asymmetric.estimate_alpha_vector`) and sets
    ``fallback_``; for the Gaussian kernel that estimate simulates the noise in the
    cells (``noise_aware``). ``python benchmarks/dsn_triangle.py`` compares
    VLAD, GDM and SPA on the triangle test over seeds, and ``python
    benchmarks/dsn_symmetry.py`` counts the fallbacks on the paper's symmetric nests.
    When no vector alpha matches the cell masses (data that are not a Dirichlet nest,
    such as daily stock returns) the estimate stops with ``converged=False`` and
    ``status="stalled"`` (:class:`bayespmf.kernels.vlad_asymmetric.AlphaVector`) and its
    vertices are not to be trusted; its mass misfit is in the warning.

    **Nearly empty cells.** A k-means cell with fewer than ``SMALL_CELL_FRACTION *
    n / K`` rows (outliers, or K too large) gives a vertex that rests on those rows:
    VLAD warns (:class:`DegenerateVertexWarning`) with the cell sizes, the vector
    alpha's smallest weight shares and, for the multinomial kernel, the topics'
    numbers of nonzero words (the Wikipedia corpus at K = 10: cells of 1, 8, 10 and
    18 of 3512 documents, alpha entries down to 1e-4, a topic with 1 word).

    The linear algebra runs as NumPy/SciPy except the centring + Gram product, which
    is a compiled PyTensor graph; see
    :func:`bayespmf.kernels.vlad_geometry.top_subspace` for the timings behind that choice.

    **scikit-learn conventions**: see :mod:`bayespmf.estimators.simplex`.

    Examples
    --------
    >>> from bayespmf.datasets._simulate import make_simplex_nest
    >>> X, truth = make_simplex_nest(2000, 5, 3, alpha=1.0, sigma=0.05, random_state=0)
    >>> est = VLAD(3, alpha=1.0, random_state=0).fit(X)
    >>> from bayespmf.metrics import min_matching_distance
    >>> min_matching_distance(est.vertices_, truth.vertices) < 0.5
    True
    >>> np.allclose(est.transform(X[:4]).sum(axis=1), 1.0)
    True
    """

    _method = "vlad"

    def fit(self, X, y=None):
        """Estimate the vertices from data ``X`` (see the class docstring).

        Parameters
        ----------
        X : array_like (n, D) or SciPy sparse matrix
        y : None
            Ignored.

        Returns
        -------
        self

        Warns
        -----
        bayespmf.fit.simplex.AsymmetricDirichletWarning
            The k-means cells' masses differ from those of the fitted symmetric nest;
            VLAD fell back to a vector alpha.
        DegenerateVertexWarning
            Some k-means cells hold fewer than ``SMALL_CELL_FRACTION * n / K`` rows.
        bayespmf.fit.simplex.UnresolvedSimplexWarning
            A direction of the top subspace lies inside the noise bulk: the vertices
            along it are not identified from these data and alpha may be far off.
        """
        super().fit(X, y)
        _warn_small_cells(self, self._kernel)
        return self

    def __init__(
        self,
        n_components: int,
        kernel: str = "gaussian",
        alpha: float | ArrayLike | None = None,
        *,
        whiten: str = "corrected",
        noise_bias: str = "bootstrap",
        n_init: int = DEFAULT_KMEANS_N_INIT,
        max_iter: int = DEFAULT_KMEANS_MAX_ITER,
        random_state=None,
    ):
        super().__init__(
            n_components,
            kernel,
            alpha,
            n_init=n_init,
            max_iter=max_iter,
            random_state=random_state,
        )
        self.whiten = whiten
        self.noise_bias = noise_bias


class GDM(_CentroidNestEstimator):
    r"""Geometric Dirichlet Means (Yurochkin & Nguyen 2016): extended k-means centroids.

    Parameters
    ----------
    n_components : int
    kernel : {"gaussian", "poisson", "multinomial"}, default "gaussian"
    alpha : float, optional
        If given, every centroid is extended by the VLAD extension parameter
        :math:`\gamma(\alpha)` of Alg. 2 ("GDM-MC" of the paper's Sec. 5.1, Fig. 3);
        otherwise by GDM's own per-cluster rule (see Notes).
    n_init : int, default 8
        k-means++ restarts (Supplement B: "8 K-means restarts and ++ initialization").
    max_iter : int, default 300
    random_state : None, int or numpy.random.Generator

    Attributes
    ----------
    vertices_ : ndarray (K, D)
    centroids_ : ndarray (K, D)
        k-means centroids in the data space.
    center_ : ndarray (D,)
    extension_ : ndarray (K,)
        The factor by which each centroid was pushed away from ``center_``.
    labels_ : ndarray (n,)
    n_features_in_ : int
    fit_time_ : float

    Notes
    -----
    GDM (Yurochkin & Nguyen 2016, Alg. 1): k-means with ``K`` clusters on the data
    (frequencies for documents) in the full space, centroids :math:`\mu_k`, data mean
    :math:`C`; each vertex is :math:`\beta_k = C + m_k (\mu_k - C) / \|\mu_k - C\|`
    with :math:`m_k = \max_{x_i \in S_k} \|x_i - C\|`, the distance to the farthest
    point of cluster ``k``, then projected onto the parameter set (topics onto the
    vocabulary simplex, as in GDM; Poisson rates clipped at 0). Unlike VLAD it clusters
    in the Euclidean metric of the data space, so for a non-equilateral simplex the
    centroids are not on the rays to the vertices (Sec. 2, Fig. 1(a)), and the
    farthest-point extension follows the noise outward.

    The k-means step dominates the cost (O(n D K) per Lloyd iteration, 8 restarts).
    With ``D >= 32`` :func:`bayespmf.kernels.kmeans.kmeans` runs the restarts in
    lockstep: every Lloyd iteration is one matrix product of the data with the centres
    of all unfinished restarts, in blocks of rows shared by the threads, instead of
    one thin product per restart. Each restart is still scikit-learn's
    ``KMeans(n_init=1)`` with its seed (the same k-means++ start, labels and centres),
    and the result does not depend on the number of cores. It is faster than the
    reference code's k-means (scikit-learn's ``KMeans(n_init=8)`` with its own OpenMP
    threads) and than one scikit-learn run per restart, with the same vertices
    (``gdm_times`` of ``benchmarks/dsn_figures.py``; :ref:`bench-kmeans`). The
    reference is slowest when the machine is busy, where every OpenMP join waits for
    the slowest thread.

    **scikit-learn conventions**: see :mod:`bayespmf.estimators.simplex`.

    Examples
    --------
    >>> from bayespmf.datasets._simulate import make_simplex_nest
    >>> X, truth = make_simplex_nest(500, 4, 3, alpha=0.1, sigma=0.01, random_state=0)
    >>> GDM(3, random_state=0).fit(X).vertices_.shape
    (3, 4)
    """

    _method = "gdm"


class SimplexSPA(_SimplexEstimator):
    r"""Vertices as ``K`` data points picked by the successive projection algorithm.

    Parameters
    ----------
    n_components : int
    kernel : {"gaussian", "poisson", "multinomial"}, default "gaussian"
        Only used for validation and for turning counts into frequencies.

    Attributes
    ----------
    vertices_ : ndarray (K, D)
        The selected rows (frequencies for the multinomial kernel).
    indices_ : ndarray of int (K,)
        Their row indices, in the order SPA picked them.
    n_features_in_ : int
    fit_time_ : float

    Notes
    -----
    SPA (Gillis & Vavasis 2014) finds the ``K`` generators of a separable
    ``M = W H`` whose columns of ``H`` lie on the simplex and ``W`` has full column
    rank. DSN data are affine, not conic, combinations of the vertices, and after
    centring the vertex matrix has rank ``K - 1`` only; so SPA runs, without column
    normalization, on the augmented columns :math:`(x_i - \hat c_0,\ t)` of a
    (D + 1) x n matrix, where :math:`t = \max_i \|x_i - \hat c_0\|` puts the extra
    coordinate on the data's scale. The augmented vertices
    :math:`(\beta_k - \hat c_0, t)` are linearly independent whenever the
    :math:`\beta_k` are affinely independent, and each augmented point is the same
    convex combination of them, which is SPA's model. The estimate is exact only under
    separability (points at the vertices, :math:`\alpha \to 0`); for larger
    :math:`\alpha` the picked points lie inside the true simplex and, with noise, the
    picks are the noisiest points (the paper's Sec. 5 "SPA" baseline).

    **scikit-learn conventions**: see :mod:`bayespmf.estimators.simplex`.

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.2, 0.3]])
    >>> SimplexSPA(3).fit(X).indices_.tolist()
    [1, 2, 0]
    """

    _method = "spa"

    def __init__(self, n_components: int, kernel: str = "gaussian"):
        self.n_components = n_components
        self.kernel = kernel
