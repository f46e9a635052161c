r"""Estimators of the vertices of a Dirichlet simplex nest: VLAD, GDM and SPA.

All three are scikit-learn transformers with one interface: ``fit(X)`` sets
``vertices_`` (K, D); ``transform(X)`` gives the barycentric weights of the projection
of each row onto the fitted simplex; ``score(X)`` is the negative mean squared
reconstruction error. ``get_params``, ``set_params``, ``clone``, ``Pipeline`` and
``GridSearchCV`` work as for any scikit-learn estimator.

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
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin

from bayespmf._validation import (
    DataValidationError,
    check_choice,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.estimators.latent_class import NotFittedError
from bayespmf.kernels.extension_table import extension_gamma_fn, extension_parameter
from bayespmf.kernels.simplex import project_simplex
from bayespmf.kernels.spa import spa
from bayespmf.kernels.vlad import (
    DEFAULT_KMEANS_MAX_ITER,
    DEFAULT_N_INIT,
    KERNELS,
    barycentric_weights,
    calibrate_alpha,
    corrected_metric,
    dirichlet_cvt,
    estimate_alpha,
    estimate_alpha_vector,
    extend_centroids,
    kmeans,
    mass_balance,
    match_cells,
    noise_variance,
    phi_star,
    preprocess,
    simex_phi_star,
    top_subspace,
    vlad_centroids,
)

__all__ = [
    "GDM",
    "VLAD",
    "AsymmetricDirichletWarning",
    "SimplexSPA",
    "check_alpha",
    "check_nest_data",
]

#: The accepted values of VLAD's ``noise_bias`` (see :class:`VLAD`).
NOISE_BIAS_OPTIONS = ("bootstrap", "simex", "none")

#: VLAD's test of a symmetric Dirichlet (:func:`bayespmf.kernels.vlad.mass_balance`):
#: the k-means cells' masses differ from 1/K with a chi-square p-value below
#: ASYMMETRY_P_VALUE AND by a total variation above ASYMMETRY_MIN_TV (so that a tiny,
#: significant imbalance at very large n does not count). Measured on the triangle
#: test (K = 3, n = 5000, sigma = 0.1, seeds 0-4): alpha = (0.5, 1.5, 2.5) gives
#: chi2 = 86-732 (total variation 0.058-0.16); symmetric alpha = 1.5 and 0.3 give
#: 1.6-8.1; K = 10, D = 500, n = 1000, alpha = 2 (Gaussian and Poisson) 9.8-14.3 (the
#: 1e-4 quantile of chi2 is 18.4 for K = 3 and 33.7 for K = 10).
ASYMMETRY_P_VALUE = 1e-4
ASYMMETRY_MIN_TV = 0.03


class AsymmetricDirichletWarning(UserWarning):
    """VLAD found the k-means cells of unequal mass: the Dirichlet is not symmetric."""


def check_alpha(alpha, n_vertices: int, owner: str) -> float | np.ndarray:
    """A Dirichlet concentration: one positive number, or ``n_vertices`` of them.

    A vector whose entries are all equal is returned as its scalar (symmetric).

    Examples
    --------
    >>> check_alpha([0.5, 1.5, 2.5], 3, "VLAD").tolist(), check_alpha([2, 2], 2, "VLAD")
    ([0.5, 1.5, 2.5], 2.0)
    """
    if np.ndim(alpha) == 0:
        return check_float(alpha, "alpha", owner=owner, low=0.0, low_open=True)
    try:
        a = np.asarray(alpha, dtype=float)
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"The 'alpha' parameter of {owner} must be a positive number or a vector of "
            f"n_vertices={n_vertices} positive numbers; could not convert it: {err}"
        ) from err
    if a.ndim != 1 or a.size != n_vertices:
        raise DataValidationError(
            f"The 'alpha' parameter of {owner} must be a positive number or a vector of "
            f"n_vertices={n_vertices} positive numbers (one concentration per vertex); "
            f"got shape {a.shape}. Pass {n_vertices} values or one number."
        )
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise DataValidationError(
            f"Every entry of the 'alpha' parameter of {owner} must be a finite number "
            f"> 0 (a Dirichlet concentration); got {a.tolist()}. Replace the "
            "non-positive entries."
        )
    if np.all(a == a[0]):
        return float(a[0])
    return a


def _check_kernel(kernel, owner: str) -> str:
    return check_choice(kernel, "kernel", KERNELS, owner=owner)


def _check_rows(X, owner: str) -> np.ndarray:
    """``X`` as a new finite 2-D float64 array with at least one row and one column."""
    if sparse.issparse(X):
        raise DataValidationError(
            f"'X' of {owner} is a sparse {type(X).__name__}; sparse input is not "
            "supported (the estimators centre the data, which makes it dense). Pass "
            "X.toarray()."
        )
    try:
        arr = np.asarray(X)
        if np.iscomplexobj(arr):
            raise DataValidationError(
                f"'X' of {owner} is complex: Complex data not supported. Pass the real "
                "part (X.real) or the modulus (np.abs(X))."
            )
        arr = np.array(arr, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as err:
        if isinstance(err, DataValidationError):
            raise
        raise DataValidationError(
            f"'X' of {owner} must be a 2-D numeric array (n_samples, n_features); "
            f"could not convert it: {err}"
        ) from err
    if arr.ndim != 2:
        raise DataValidationError(
            f"'X' of {owner} must be a 2-D array (n_samples, n_features); got ndim="
            f"{arr.ndim} and shape {arr.shape}. Reshape your data, e.g. "
            "x.reshape(-1, 1) for one feature or x.reshape(1, -1) for one sample."
        )
    for axis, what in enumerate(("sample", "feature")):
        if arr.shape[axis] == 0:
            raise DataValidationError(
                f"'X' of {owner} is empty: found array with 0 {what}(s) (shape="
                f"{arr.shape}) while a minimum of 1 is required."
            )
    if not np.all(np.isfinite(arr)):
        raise DataValidationError(
            f"'X' of {owner} contains NaN or infinite values "
            f"({int(np.sum(~np.isfinite(arr)))} entries). Drop or impute them first."
        )
    return arr


def _check_counts(arr: np.ndarray, kernel: str, owner: str) -> None:
    """Refuse values the kernel cannot have produced (negative or fractional counts)."""
    if kernel in ("poisson", "multinomial") and np.any(arr < 0):
        r, c = np.argwhere(arr < 0)[0]
        raise DataValidationError(
            f"'X' of {owner} has a negative count ({arr[r, c]:g} at row {r}, column "
            f"{c}); kernel={kernel!r} needs non-negative counts. Use kernel='gaussian' "
            "for real-valued data."
        )
    if kernel == "multinomial":
        frac = arr != np.rint(arr)
        if np.any(frac):
            r, c = np.argwhere(frac)[0]
            raise DataValidationError(
                f"'X' of {owner} must hold integer word counts for kernel='multinomial' "
                f"(the document lengths, its row sums, set the noise of Lemma 3(c)); "
                f"got {arr[r, c]:g} at row {r}, column {c} ({int(frac.sum())} "
                "non-integer entries). Pass the raw counts, not frequencies or weights; "
                "use kernel='gaussian' for real-valued data."
            )
        empty = np.flatnonzero(arr.sum(axis=1) == 0)
        if empty.size:
            raise DataValidationError(
                f"{empty.size} row(s) of 'X' of {owner} have no words (first: "
                f"{empty[:5].tolist()}); kernel='multinomial' needs at least one word "
                "per document. Drop those rows first, e.g. X[X.sum(axis=1) > 0]."
            )


def check_nest_data(X, n_vertices, kernel: str, owner: str) -> tuple[np.ndarray, int]:
    """Validate data and the number of vertices for a simplex-nest estimator.

    Parameters
    ----------
    X : array_like (n, D)
    n_vertices : int
    kernel : {"gaussian", "poisson", "multinomial"}
    owner : str
        Name of the caller, for messages.

    Returns
    -------
    X : ndarray of float64 (n, D)
        A new array (the input is never modified).
    n_vertices : int

    Raises
    ------
    DataValidationError
        Complex, not 2-D, empty, NaN/inf, ``K < 2``, ``K > D + 1`` (``K > D`` for the
        multinomial kernel), fewer rows than vertices, negative counts (Poisson,
        multinomial), non-integer counts or documents without words (multinomial).

    Examples
    --------
    >>> X, K = check_nest_data([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], 3, "gaussian", "VLAD")
    >>> X.shape, K
    ((3, 2), 3)
    """
    kernel = _check_kernel(kernel, owner)
    arr = _check_rows(X, owner)
    n, D = arr.shape
    K = check_int(n_vertices, "n_vertices", owner=owner)
    if K < 2:
        raise DataValidationError(
            f"The 'n_vertices' parameter of {owner} must be >= 2: a simplex needs at "
            f"least two vertices. Got {K}."
        )
    max_k = D if kernel == "multinomial" else D + 1
    if K > max_k:
        why = (
            "frequencies lie on the (D-1)-simplex, which holds at most D affinely "
            "independent points"
            if kernel == "multinomial"
            else "K points span a (K-1)-simplex only in dimension D >= K - 1"
        )
        raise DataValidationError(
            f"The 'n_vertices' parameter of {owner} must be <= {max_k} for D={D} "
            f"features and kernel={kernel!r} ({why}). Got {K}. Lower 'n_vertices'."
        )
    if n < K:
        raise DataValidationError(
            f"'X' of {owner} has {n} sample(s) but n_vertices={K}; at least one row per "
            "vertex is needed. Pass more data or lower 'n_vertices'."
        )
    _check_counts(arr, kernel, owner)
    return arr, K


def _constrain(vertices: np.ndarray, kernel: str) -> np.ndarray:
    """Project vertices onto the kernel's parameter set (a convex set with the truth).

    Multinomial topics onto the probability simplex, Poisson rates onto the
    non-negative orthant; Gaussian vertices are unconstrained. The Euclidean projection
    onto a convex set that contains the true vertex never moves an estimate away from
    it, so this can only lower the vertex error.
    """
    if kernel == "multinomial":
        return project_simplex(vertices, axis=1)
    if kernel == "poisson":
        return np.maximum(vertices, 0.0)
    return vertices


class _SimplexEstimator(TransformerMixin, BaseEstimator):
    """Shared ``transform`` / ``score`` and the checks of data given after ``fit``.

    A scikit-learn transformer: the constructor only stores its arguments, ``fit``
    validates them and sets the attributes that end in ``_``, and ``y`` is accepted
    and ignored by ``fit``, ``fit_transform`` and ``score`` (the models are
    unsupervised; accepting ``y`` lets them sit in a ``Pipeline`` before a supervised
    step, which passes ``y`` to every step).
    """

    def _check_fitted(self) -> None:
        if not hasattr(self, "vertices_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call 'fit(X)' "
                "first."
            )

    def _check_X(self, X) -> np.ndarray:
        """Rows of new data, validated against the fit, preprocessed like in ``fit``."""
        self._check_fitted()
        owner = type(self).__name__
        arr = _check_rows(X, owner)
        if arr.shape[1] != self.n_features_in_:
            raise DataValidationError(
                f"X has {arr.shape[1]} features, but {owner} is expecting "
                f"{self.n_features_in_} features as input (it was fitted on "
                f"{self.n_features_in_}). Pass data with the columns it was fitted on."
            )
        _check_counts(arr, self._kernel, owner)
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
            :func:`bayespmf.kernels.vlad.barycentric_weights`).

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
        return -float(np.mean(np.sum((Y - theta @ self.vertices_) ** 2, axis=1)))


class VLAD(_SimplexEstimator):
    r"""Voronoi Latent Admixture: vertices of a Dirichlet simplex nest (Alg. 1).

    Parameters
    ----------
    n_vertices : int
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
        (:func:`bayespmf.kernels.vlad.corrected_metric`). Identical without noise.
    noise_bias : {"bootstrap", "simex", "none"}, default "bootstrap"
        How eq. (5) and the extension handle the outward spread of the empirical
        k-means centroids (noise moving points across cells, and k-means overfitting
        a finite sample). ``"none"`` is Sec. 3.3 as published. ``"bootstrap"``
        simulates the fitted nest at the data's size and noise, clusters it the same
        way, and solves eq. (5) for the alpha whose simulated moment target matches
        the data's; the centroids are then extended by
        :math:`\gamma(\hat\alpha) / \hat\rho`, :math:`\hat\rho` the simulated
        spread (:func:`bayespmf.kernels.vlad.calibrate_alpha`; with a known ``alpha``
        only :math:`\hat\rho` is estimated). ``"simex"`` extrapolates the moment target
        to zero noise (:func:`bayespmf.kernels.vlad.simex_phi_star`; alpha only). See
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
        Masses of the k-means cells and the chi-square test of equal masses
        (:func:`bayespmf.kernels.vlad.mass_balance`).
    fallback_ : None or "vector_alpha"
        ``"vector_alpha"`` when the cells showed an asymmetric Dirichlet and the
        vertices come from an estimated vector alpha (an
        :class:`AsymmetricDirichletWarning` says so, with the numbers).
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
        From ``fit``, for malformed data or ``n_vertices`` (see :func:`check_nest_data`).

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
    overfits a finite sample. Measured on K = 10, D = 500, alpha = 2 nests (Gaussian
    sigma = 1, 5 seeds): k-means on the noise-free projected signal gives alpha-hat
    1.52 +- 0.12 at n = 1000 and 1.98 at n = 20,000; with the noise, Alg. 1 gives
    1.27 +- 0.16 and 1.62; SIMEX (the previous default) corrects only the noise, with
    a quadratic extrapolation whose variance is large at small n (1.50 +- 0.41 at
    n = 1000). And the extension :math:`\gamma(\alpha)` assumes centroids at the
    population CVT, so even the true alpha over-extends inflated centroids. The
    default ``noise_bias="bootstrap"`` therefore calibrates both by simulation at the
    data's own n and noise level: alpha is the value whose simulated moment target
    matches the data's, and the centroids are extended by
    :math:`\gamma(\hat\alpha)/\hat\rho`, :math:`\hat\rho` their simulated spread
    (1.01-1.1). Its variance is controlled by common random numbers and a fixed
    number of simulated points per evaluation; ``alpha_interval_`` says how well the
    data pin alpha down. ``python benchmarks/dsn_figures.py --small-n`` (seeds 0-2,
    minimum-matching distance and alpha-hat, default / previous default / Alg. 1 /
    the authors' code as re-implemented there): n = 1000 Gaussian 16.2, 1.99 +- 0.35 /
    18.9, 1.36 / 18.5, 1.32 / 16.6, 1.93; Poisson 55.8, 1.76 +- 0.46 / 60.4, 1.47 /
    67.2, 1.18 / 70.8, 2.63; n = 5000 Gaussian 6.95, 2.09 / 6.87, 1.91 / 8.95, 1.60 /
    7.63, 2.34; Poisson 26.5, 2.20 / 32.5, 2.00 / 34.9, 1.57 / 100.9, 4.25; Poisson
    K = 4, D = 40, n = 6000, alpha = 1: 2.72, 0.98 +- 0.11 / 3.42, 0.88 / 7.27, 0.29 /
    29.1, 5.33. The cost is 3-4 evaluations of 4-8 k-means runs in ``K - 1``
    dimensions, warm started (about 1 s at n = 20,000 here).

    **Asymmetric Dirichlet** (Supplement C, the "triangle test"). Lemma 2 and the
    extension :math:`\gamma(\alpha)` assume a symmetric Dirichlet; with
    :math:`\theta \sim \mathrm{Dir}(\alpha_1, \dots, \alpha_K)` the centroids leave
    the rays to the vertices and the calibration of alpha diverges (n = 5000,
    alpha = (0.5, 1.5, 2.5), sigma = 0.1, seed 0: alpha-hat 92, vertices at
    minimum-matching distance 42.6). Whitened k-means is k-means of :math:`\theta`
    in the metric :math:`S(\alpha)^\dagger` for any alpha, so its centroids are
    :math:`C = V(\alpha) B`, ``V`` the barycentric CVT centroids of
    :math:`\mathrm{Dir}(\alpha)` (:func:`bayespmf.kernels.vlad.dirichlet_cvt`), and
    :math:`B = V^{-1} C`. A given vector alpha is used that way (cells paired with
    vertices by mass). Without one, VLAD tests that the k-means cells are of equal
    mass (chi-square p-value below ``ASYMMETRY_P_VALUE`` and total variation above
    ``ASYMMETRY_MIN_TV``); when they are not, it warns
    (:class:`AsymmetricDirichletWarning`), estimates a vector alpha from the cell
    masses and the covariance (:func:`bayespmf.kernels.vlad.estimate_alpha_vector`)
    and sets ``fallback_``. ``python benchmarks/dsn_triangle.py`` (seeds 0-9, mean /
    median distance): VLAD 0.35 / 0.32 (before 5.70 / 1.39), GDM 0.97 / 0.75, SPA
    0.54 / 0.51, VLAD given the true vector alpha 0.14 / 0.11; VLAD warns on all ten
    seeds and is worse than GDM on one (seed 9: 0.75 against 0.26). Symmetric
    triangles (alpha = 1.5 and 0.3) never fall back and give the same vertices as
    before.

    The linear algebra runs as NumPy/SciPy except the centring + Gram product, which
    is a compiled PyTensor graph; see :func:`bayespmf.kernels.vlad.top_subspace` for
    the timings behind that choice.

    **scikit-learn conventions.** A transformer (``TransformerMixin``,
    ``BaseEstimator``): ``__init__`` only stores its arguments, ``fit`` validates them,
    ``fit``/``fit_transform``/``score`` take and ignore ``y``, and ``transform`` or
    ``score`` before ``fit`` raise ``NotFittedError``. It passes
    ``sklearn.utils.estimator_checks`` (``tests/test_estimator_checks.py``) except:
    ``check_dtype_object``, because non-numeric entries raise
    ``DataValidationError`` (a ValueError, the package's error for malformed data),
    not the TypeError of ``np.asarray``;
    and ``check_transformer_n_iter``, because ``max_iter`` caps the Lloyd iterations
    of each k-means restart and :func:`bayespmf.kernels.kmeans.kmeans` reports no
    iteration count, so there is no ``n_iter_``.

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

    def __init__(
        self,
        n_vertices: int,
        kernel: str = "gaussian",
        alpha: float | None = None,
        *,
        n_init: int = DEFAULT_N_INIT,
        max_iter: int = DEFAULT_KMEANS_MAX_ITER,
        whiten: str = "corrected",
        noise_bias: str = "bootstrap",
        random_state=None,
    ):
        self.n_vertices = n_vertices
        self.kernel = kernel
        self.alpha = alpha
        self.n_init = n_init
        self.max_iter = max_iter
        self.whiten = whiten
        self.noise_bias = noise_bias
        self.random_state = random_state

    def fit(self, X, y=None) -> VLAD:
        """Estimate the vertices (and alpha) from data ``X``.

        Parameters
        ----------
        X : array_like (n, D)
            Real vectors (``kernel="gaussian"``) or counts (``"poisson"``,
            ``"multinomial"``); dense (a sparse matrix is refused: pass
            ``X.toarray()``).
        y : None
            Ignored: the model is unsupervised. Accepted so that the estimator fits in
            a ``Pipeline`` (which passes ``y`` to every step) and in
            ``GridSearchCV``.

        Returns
        -------
        self

        Raises
        ------
        DataValidationError
            Malformed data, ``n_vertices`` or another parameter (see
            :func:`check_nest_data`).
        """
        owner = "VLAD"
        t0 = time.perf_counter()
        kernel = _check_kernel(self.kernel, owner)
        arr, K = check_nest_data(X, self.n_vertices, kernel, owner)
        n_init = check_int(self.n_init, "n_init", owner=owner, low=1)
        max_iter = check_int(self.max_iter, "max_iter", owner=owner, low=1)
        if self.whiten not in ("corrected", "data"):
            raise DataValidationError(
                f"The 'whiten' parameter of VLAD must be 'corrected' or 'data'. Got "
                f"{self.whiten!r}."
            )
        if self.noise_bias not in NOISE_BIAS_OPTIONS:
            raise DataValidationError(
                "The 'noise_bias' parameter of VLAD must be one of "
                f"{', '.join(repr(o) for o in NOISE_BIAS_OPTIONS)}. Got "
                f"{self.noise_bias!r}."
            )
        alpha, alpha_vec = None, None
        if self.alpha is not None:
            alpha = check_alpha(self.alpha, K, owner)
            if np.ndim(alpha) == 1:
                alpha_vec, alpha = alpha, None
        rng = check_random_state(self.random_state)
        Y, lengths = preprocess(arr, kernel)
        n, D = Y.shape
        sub = top_subspace(Y, K - 1, random_state=rng)
        sigma2 = noise_variance(sub, n, D) if kernel == "gaussian" else None
        ctx = {"sigma2": sigma2}
        if lengths is not None:
            ctx["inv_length"] = float(np.mean(1.0 / lengths))
            ctx["lengths"] = lengths
        metric = None
        if self.whiten == "corrected":
            metric = corrected_metric(sub, kernel, ctx)
        centroids, g, labels = vlad_centroids(
            sub, K, metric=metric, n_init=n_init, max_iter=max_iter, random_state=rng
        )
        g_raw = (centroids - sub.center) @ sub.components  # not re-centred
        objective, rho, interval = float("nan"), 1.0, (float("nan"), float("nan"))
        balance = mass_balance(labels, K)
        fallback, symmetric_vertices = None, None
        if alpha_vec is not None:
            V, masses = dirichlet_cvt(alpha_vec, max_iter=max_iter, random_state=rng)
            vertices = np.linalg.solve(V, centroids[match_cells(balance.masses, masses)])
            self.vertices_ = _constrain(vertices, kernel)
            alpha, gamma = alpha_vec.copy(), float("nan")
        elif self.noise_bias == "bootstrap":
            if alpha is None:
                gamma_fn, alpha_range = extension_gamma_fn(K, random_state=rng)
            else:
                known = float(extension_parameter(alpha, K, random_state=rng))
                alpha_range = (alpha, alpha)

                def gamma_fn(a, known=known):
                    return np.full(np.shape(a), known)

            # the simulation repeats the data's whitening: "corrected" falls back to
            # "data" per simulated data set, as it did for the data
            cal = calibrate_alpha(
                sub,
                g_raw,
                kernel,
                ctx,
                gamma_fn,
                alpha_range,
                alpha=alpha,
                whiten="corrected" if metric is not None else "data",
                max_iter=max_iter,
                random_state=rng,
            )
            alpha, rho = cal.alpha, cal.inflation
            if self.alpha is None:
                objective, interval = cal.objective, cal.interval
            gamma = float(gamma_fn(alpha)) / rho
        elif alpha is None:
            gamma_fn, alpha_range = extension_gamma_fn(K, random_state=rng)
            if self.noise_bias == "simex":
                target = simex_phi_star(sub, g, metric, kernel, ctx, random_state=rng)
            else:
                target = phi_star(sub, g, kernel, ctx)
            alpha, objective = estimate_alpha(target, K, gamma_fn, alpha_range)
            gamma = float(gamma_fn(alpha))
        else:
            gamma = float(extension_parameter(alpha, K, random_state=rng))
        if alpha_vec is None:
            vertices = extend_centroids(sub.center, centroids, gamma)
            self.vertices_ = _constrain(vertices, kernel)
            if (
                balance.p_value < ASYMMETRY_P_VALUE
                and balance.total_variation > ASYMMETRY_MIN_TV
            ):
                symmetric_vertices = self.vertices_
                vec = estimate_alpha_vector(
                    sub, g_raw, labels, kernel, ctx, random_state=rng
                )
                _warn_asymmetric(balance, K, alpha, gamma, vec, self.alpha is not None)
                vertices = vec.vertices @ sub.components.T + sub.center
                self.vertices_ = _constrain(vertices, kernel)
                alpha, gamma, fallback = vec.alpha, float("nan"), "vector_alpha"
                objective, interval = float("nan"), (float("nan"), float("nan"))
        self._kernel = kernel
        self.alpha_ = float(alpha) if np.ndim(alpha) == 0 else np.asarray(alpha)
        self.gamma_ = gamma
        self.mass_balance_ = balance
        self.fallback_, self.symmetric_vertices_ = fallback, symmetric_vertices
        self.inflation_, self.alpha_interval_ = float(rho), interval
        self.alpha_objective_ = objective
        self.centroids_, self.center_ = centroids, sub.center
        self.singular_values_, self.components_ = sub.singular_values, sub.components
        self.labels_ = labels
        self.sigma_ = None if sigma2 is None else float(np.sqrt(sigma2))
        self.n_features_in_ = D
        self.fit_time_ = time.perf_counter() - t0
        return self


def _warn_asymmetric(balance, K, alpha, gamma, vec, given) -> None:
    """The warning of VLAD when its cells show an asymmetric Dirichlet."""
    fmt = np.array2string(np.sort(balance.masses), precision=3, separator=", ")
    what = "the given" if given else "the fitted symmetric"
    warnings.warn(
        f"VLAD: the k-means cells hold unequal shares of the data (sorted masses {fmt} "
        f"against 1/K = {1 / K:.3f}; chi2 = {balance.chi2:.1f} on {K - 1} df, p = "
        f"{balance.p_value:.1e}; total variation {balance.total_variation:.3f}): the "
        "Dirichlet is not symmetric, which the extension gamma(alpha) and the moment "
        f"equation (5) assume ({what} alpha = {float(alpha):.3g}, gamma = "
        f"{gamma:.3g}, would misplace the vertices). Fell back to a vector alpha "
        "estimated from the cell masses and the covariance, alpha_ = "
        f"{np.array2string(vec.alpha, precision=3, separator=', ')} (mass misfit "
        f"{vec.mass_misfit:.3f}, log-trace misfit {vec.cov_misfit:+.3f}), and vertices "
        "V(alpha)^-1 C (fallback_='vector_alpha'; the symmetric fit is in "
        "symmetric_vertices_). Pass alpha=[...] (one value per vertex) if you know it, "
        "and compare with GDM.",
        AsymmetricDirichletWarning,
        stacklevel=3,
    )


class GDM(_SimplexEstimator):
    r"""Geometric Dirichlet Means (Yurochkin & Nguyen 2016): extended k-means centroids.

    Parameters
    ----------
    n_vertices : int
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
    and the result does not depend on the number of cores. On the project's 2-core
    machine, shared (load average 2.0 at the start, 3.4 at the end;
    ``gdm_times`` of ``benchmarks/dsn_figures.py``, seeds 0 / 1 / 2), against the
    reference code's k-means (scikit-learn's ``KMeans(n_init=8)`` with its own OpenMP
    threads) on the same data in the same run: Gaussian n = 20,000, D = 500: GDM.fit
    2.5 / 3.7 / 4.9 s, reference 4.5 / 4.6 / 12.8 s (ratio 0.56 / 0.79 / 0.38, mean
    0.58); multinomial n = 5000, D = 2000: 4.4 / 3.2 / 5.8 s against 12.7 / 5.6 /
    16.6 s (0.34 / 0.58 / 0.35, mean 0.42). GDM.fit with one scikit-learn run per
    restart (the restarts in parallel threads, as before) took 4.1 / 6.5 / 8.2 s and
    8.1 / 7.3 / 11.8 s there, and gave the same vertices (minimum-matching distance
    0). The reference is slowest when the machine is busy, where every OpenMP join
    waits for the slowest thread.

    **scikit-learn conventions.** A transformer (``TransformerMixin``,
    ``BaseEstimator``): ``__init__`` only stores its arguments, ``fit`` validates them,
    ``fit``/``fit_transform``/``score`` take and ignore ``y``, and ``transform`` or
    ``score`` before ``fit`` raise ``NotFittedError``. It passes
    ``sklearn.utils.estimator_checks`` (``tests/test_estimator_checks.py``) except:
    ``check_dtype_object``, because non-numeric entries raise
    ``DataValidationError`` (a ValueError, the package's error for malformed data),
    not the TypeError of ``np.asarray``;
    and ``check_transformer_n_iter``, because ``max_iter`` caps the Lloyd iterations
    of each k-means restart and :func:`bayespmf.kernels.kmeans.kmeans` reports no
    iteration count, so there is no ``n_iter_``.

    Examples
    --------
    >>> from bayespmf.datasets._simulate import make_simplex_nest
    >>> X, truth = make_simplex_nest(500, 4, 3, alpha=0.1, sigma=0.01, random_state=0)
    >>> GDM(3, random_state=0).fit(X).vertices_.shape
    (3, 4)
    """

    def __init__(
        self,
        n_vertices: int,
        kernel: str = "gaussian",
        alpha: float | None = None,
        *,
        n_init: int = DEFAULT_N_INIT,
        max_iter: int = DEFAULT_KMEANS_MAX_ITER,
        random_state=None,
    ):
        self.n_vertices = n_vertices
        self.kernel = kernel
        self.alpha = alpha
        self.n_init = n_init
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, X, y=None) -> GDM:
        """Estimate the vertices from data ``X``.

        Parameters
        ----------
        X : array_like (n, D)
            Real vectors (``kernel="gaussian"``) or counts (``"poisson"``,
            ``"multinomial"``); dense (a sparse matrix is refused: pass
            ``X.toarray()``).
        y : None
            Ignored: the model is unsupervised. Accepted so that the estimator fits in
            a ``Pipeline`` (which passes ``y`` to every step) and in
            ``GridSearchCV``.

        Returns
        -------
        self

        Raises
        ------
        DataValidationError
            Malformed data, ``n_vertices`` or another parameter (see
            :func:`check_nest_data`).
        """
        owner = "GDM"
        t0 = time.perf_counter()
        kernel = _check_kernel(self.kernel, owner)
        arr, K = check_nest_data(X, self.n_vertices, kernel, owner)
        n_init = check_int(self.n_init, "n_init", owner=owner, low=1)
        max_iter = check_int(self.max_iter, "max_iter", owner=owner, low=1)
        rng = check_random_state(self.random_state)
        Y, _ = preprocess(arr, kernel)
        center = Y.mean(axis=0)
        centroids, labels, _ = kmeans(
            Y, K, n_init=n_init, max_iter=max_iter, random_state=rng
        )
        if self.alpha is not None:
            alpha = check_alpha(self.alpha, K, owner)
            if np.ndim(alpha) == 1:
                raise DataValidationError(
                    f"The 'alpha' parameter of GDM must be one number (GDM-MC extends "
                    f"every centroid by the symmetric gamma(alpha)); got {alpha.tolist()}."
                    " Drop 'alpha' (GDM's own extension needs none) or use "
                    "VLAD(alpha=[...]) for a vector alpha."
                )
            ext = np.full(K, float(extension_parameter(alpha, K, random_state=rng)))
        else:
            dist = np.linalg.norm(Y - center, axis=1)
            far = np.zeros(K)
            np.maximum.at(far, labels, dist)
            norm_c = np.linalg.norm(centroids - center, axis=1)
            ext = far / np.where(norm_c > 0, norm_c, 1.0)
        self.vertices_ = _constrain(extend_centroids(center, centroids, ext), kernel)
        self._kernel = kernel
        self.centroids_, self.center_, self.extension_ = centroids, center, ext
        self.labels_ = labels
        self.n_features_in_ = Y.shape[1]
        self.fit_time_ = time.perf_counter() - t0
        return self


class SimplexSPA(_SimplexEstimator):
    r"""Vertices as ``K`` data points picked by the successive projection algorithm.

    Parameters
    ----------
    n_vertices : int
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

    **scikit-learn conventions.** A transformer (``TransformerMixin``,
    ``BaseEstimator``): ``__init__`` only stores its arguments, ``fit`` validates them,
    ``fit``/``fit_transform``/``score`` take and ignore ``y``, and ``transform`` or
    ``score`` before ``fit`` raise ``NotFittedError``. It passes
    ``sklearn.utils.estimator_checks`` (``tests/test_estimator_checks.py``) except:
    ``check_dtype_object``, because non-numeric entries raise
    ``DataValidationError`` (a ValueError, the package's error for malformed data),
    not the TypeError of ``np.asarray``.

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.2, 0.3]])
    >>> SimplexSPA(3).fit(X).indices_.tolist()
    [1, 2, 0]
    """

    def __init__(self, n_vertices: int, kernel: str = "gaussian"):
        self.n_vertices = n_vertices
        self.kernel = kernel

    def fit(self, X, y=None) -> SimplexSPA:
        """Pick ``K`` rows of ``X`` as vertices.

        Parameters
        ----------
        X : array_like (n, D)
            Real vectors (``kernel="gaussian"``) or counts (``"poisson"``,
            ``"multinomial"``); dense (a sparse matrix is refused: pass
            ``X.toarray()``).
        y : None
            Ignored: the model is unsupervised. Accepted so that the estimator fits in
            a ``Pipeline`` (which passes ``y`` to every step) and in
            ``GridSearchCV``.

        Returns
        -------
        self

        Raises
        ------
        DataValidationError
            Malformed data, ``n_vertices`` or another parameter (see
            :func:`check_nest_data`).
        """
        owner = "SimplexSPA"
        t0 = time.perf_counter()
        kernel = _check_kernel(self.kernel, owner)
        arr, K = check_nest_data(X, self.n_vertices, kernel, owner)
        Y, _ = preprocess(arr, kernel)
        Yc = Y - Y.mean(axis=0)
        t = float(np.sqrt(np.max(np.einsum("ij,ij->i", Yc, Yc)))) or 1.0
        aug = np.vstack([Yc.T, np.full((1, Y.shape[0]), t)])
        idx = spa(aug, K, normalize=False)
        self._kernel = kernel
        self.indices_ = idx
        self.vertices_ = Y[idx].copy()
        self.n_features_in_ = Y.shape[1]
        self.fit_time_ = time.perf_counter() - t0
        return self
