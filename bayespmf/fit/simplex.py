r"""The one fit function of the Dirichlet simplex nest: VLAD, GDM and SPA.

:func:`fit_simplex_nest` validates the data and options, runs one method's kernels
(:mod:`bayespmf.kernels.vlad_geometry`, :mod:`~bayespmf.kernels.vlad_moments`,
:mod:`~bayespmf.kernels.vlad_calibration`, :mod:`~bayespmf.kernels.vlad_asymmetric`,
:mod:`~bayespmf.kernels.spa`), raises the warnings the kernels only report, and returns
a :class:`SimplexNestFit`. :class:`~bayespmf.estimators.VLAD`,
:class:`~bayespmf.estimators.GDM` and :class:`~bayespmf.estimators.SimplexSPA` are thin
scikit-learn classes over it. The data checks shared with those classes and with
:func:`bayespmf.models.simplex_nest_model` live here too.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
from scipy import sparse

from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    check_choice,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.fit.source import float_array
from bayespmf.kernels.extension_table import extension_gamma_fn, extension_parameter
from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, DEFAULT_KMEANS_N_INIT, kmeans
from bayespmf.kernels.simplex import project_simplex
from bayespmf.kernels.spa import spa, spa_centered_rows
from bayespmf.kernels.vlad_asymmetric import (
    dirichlet_cvt,
    estimate_alpha_vector,
    mass_balance,
    match_cells,
    symmetry_test,
)
from bayespmf.kernels.vlad_calibration import calibrate_alpha
from bayespmf.kernels.vlad_geometry import (
    KERNELS,
    extend_centroids,
    preprocess,
    top_subspace,
    vlad_centroids,
)
from bayespmf.kernels.vlad_moments import (
    corrected_metric,
    estimate_alpha,
    noise_variance,
    phi_star,
    signal_margin,
    simex_phi_star,
)

__all__ = [
    "ASYMMETRY_MIN_TV",
    "ASYMMETRY_P_VALUE",
    "NOISE_BIAS_OPTIONS",
    "SIMPLEX_METHODS",
    "WHITEN_OPTIONS",
    "AsymmetricDirichletWarning",
    "SimplexNestFit",
    "UnresolvedSimplexWarning",
    "check_alpha",
    "check_counts",
    "check_kernel",
    "check_nest_data",
    "check_rows",
    "constrain_vertices",
    "csr_copy",
    "fit_simplex_nest",
    "rejects_symmetry",
]

#: The methods of :func:`fit_simplex_nest` and the estimator named in their messages.
SIMPLEX_METHODS = {"vlad": "VLAD", "gdm": "GDM", "spa": "SimplexSPA"}

#: The accepted values of VLAD's ``whiten`` (see :class:`~bayespmf.estimators.VLAD`).
WHITEN_OPTIONS = ("corrected", "data")

#: The accepted values of VLAD's ``noise_bias`` (see :class:`VLAD`).
NOISE_BIAS_OPTIONS = ("bootstrap", "simex", "none")

#: VLAD's test of a symmetric Dirichlet (:func:`~bayespmf.kernels.vlad_asymmetric.
#: symmetry_test`): VLAD falls back to a vector alpha when the k-means cells' masses
#: differ from those of the fitted symmetric nest (simulated with the kernel's noise at
#: the data's size, clustered as the data were) with a p-value below ASYMMETRY_P_VALUE
#: AND by a total variation above ASYMMETRY_MIN_TV (so that a tiny, significant
#: imbalance at very large n does not count) AND every direction of the top subspace
#: lies above the noise bulk (``signal_margin > 1``: its variance exceeds the top of
#: the spectrum the kernel's noise alone gives at this n and D, the generalised
#: Marchenko-Pastur edge). A direction inside the bulk cannot be told from noise (the
#: BBP transition), the fitted nest that the test simulates is not identified along
#: it, and noise alone unbalances the cells of a symmetric nest; the test is then
#: reported (``details["mass_balance"]``) but not acted on. The level is that of a
#: test whose false alarm replaces the paper's estimate by another model: rare by
#: design. ``python benchmarks/dsn_symmetry.py`` measures how often each rule fires on
#: the symmetric nests of the paper's Figs. 2-4 and on asymmetric ones.
ASYMMETRY_P_VALUE = 1e-4
ASYMMETRY_MIN_TV = 0.03


class UnresolvedSimplexWarning(UserWarning):
    """VLAD: a direction of the top subspace lies inside the noise bulk.

    Its variance is not above the top of the spectrum that the kernel's noise alone
    gives at the data's ``n`` and ``D`` (:func:`~bayespmf.kernels.vlad_moments.
    signal_margin` at most 1), so the simplex is not resolved along it: the vertices
    there are not identified from these data, and alpha (eq. (5)) may be far off
    (with one thin direction lost the others can still carry it; with several, as
    in a Poisson nest of few features, it is not).
    """


class AsymmetricDirichletWarning(UserWarning):
    """VLAD found the k-means cells of unequal mass: the Dirichlet is not symmetric."""


def check_alpha(alpha, n_components: int, owner: str) -> float | np.ndarray:
    """A Dirichlet concentration: one positive number, or ``n_components`` of them.

    A vector whose entries are all equal is returned as its scalar (symmetric).

    Examples
    --------
    >>> check_alpha([0.5, 1.5, 2.5], 3, "VLAD").tolist(), check_alpha([2, 2], 2, "VLAD")
    ([0.5, 1.5, 2.5], 2.0)
    """
    if np.ndim(alpha) == 0:
        return check_float(alpha, "alpha", owner=owner, low=0.0, low_open=True)
    need = f"a positive number or a vector of n_components={n_components} positive numbers"
    a = float_array(alpha, "alpha", owner, need)
    if a.ndim != 1 or a.size != n_components:
        raise DataValidationError(
            f"The 'alpha' parameter of {owner} must be a positive number or a vector of "
            f"n_components={n_components} positive numbers (one concentration per vertex); "
            f"got shape {a.shape}. Pass {n_components} values or one number."
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


def check_kernel(kernel, owner: str) -> str:
    """One of :data:`~bayespmf.kernels.vlad_geometry.KERNELS`, or a ``DataValidationError``.

    Examples
    --------
    >>> check_kernel("poisson", "VLAD")
    'poisson'
    """
    return check_choice(kernel, "kernel", KERNELS, owner=owner)


def check_rows(X, owner: str):
    """``X`` as a new finite 2-D float64 array with at least one row and one column.

    A SciPy sparse matrix (a document-term matrix) is returned as a new sparse CSR
    float64 matrix (duplicate entries summed), never densified.

    Examples
    --------
    >>> check_rows([[1, 2], [3, 4]], "VLAD").dtype
    dtype('float64')
    >>> check_rows(sparse.coo_matrix([[1, 0], [0, 2]]), "VLAD").format
    'csr'
    """
    if sparse.issparse(X):
        return _check_sparse_rows(X, owner)
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


def _check_sparse_rows(X, owner: str):
    if X.dtype.kind == "c":
        raise DataValidationError(
            f"'X' of {owner} is complex: Complex data not supported. Pass the real "
            "part (X.real) or the modulus (abs(X))."
        )
    if X.ndim != 2:
        raise DataValidationError(
            f"'X' of {owner} must be a 2-D sparse matrix (n_samples, n_features); got "
            f"shape {X.shape}."
        )
    arr = csr_copy(X, owner, "a numeric sparse matrix (n_samples, n_features)")
    for axis, what in enumerate(("sample", "feature")):
        if arr.shape[axis] == 0:
            raise DataValidationError(
                f"'X' of {owner} is empty: found array with 0 {what}(s) (shape="
                f"{arr.shape}) while a minimum of 1 is required."
            )
    if not np.all(np.isfinite(arr.data)):
        raise DataValidationError(
            f"'X' of {owner} contains NaN or infinite values "
            f"({int(np.sum(~np.isfinite(arr.data)))} entries). Drop or impute them first."
        )
    return arr


def csr_copy(X, owner: str, need: str) -> sparse.csr_matrix:
    """``X`` as a new float64 CSR matrix, duplicate entries summed, or an error.

    Parameters
    ----------
    X : scipy.sparse matrix or array_like
    owner : str
        The function or class ``X`` was passed to (named in the error).
    need : str
        What ``X`` must be (the error's wording).

    Returns
    -------
    scipy.sparse.csr_matrix
        A copy: the caller's matrix is never changed.

    Raises
    ------
    DataValidationError
        ``X`` cannot be converted to a float64 CSR matrix.

    Examples
    --------
    >>> M = csr_copy(sparse.coo_matrix(([1, 2], ([0, 0], [1, 1]))), "f", "counts")
    >>> M.format, M.toarray().tolist()
    ('csr', [[0.0, 3.0]])
    """
    try:
        M = sparse.csr_matrix(X, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as err:
        raise DataValidationError(
            f"'X' of {owner} must be {need}; could not convert it: {err}"
        ) from err
    M.sum_duplicates()
    return M


def _first_entry(arr, mask):
    """Row, column and value of the first entry of ``arr`` where ``mask`` holds."""
    if sparse.issparse(arr):
        rows = np.repeat(np.arange(arr.shape[0]), np.diff(arr.indptr))
        k = int(np.flatnonzero(mask)[0])
        return int(rows[k]), int(arr.indices[k]), arr.data[k]
    r, c = np.argwhere(mask)[0]
    return int(r), int(c), arr[r, c]


def check_counts(arr, kernel: str, owner: str) -> None:
    """Refuse values the kernel cannot have produced (negative or fractional counts).

    Examples
    --------
    >>> check_counts(np.array([[1.0, 2.0]]), "multinomial", "VLAD")  # passes silently
    """
    values = arr.data if sparse.issparse(arr) else arr
    if kernel in ("poisson", "multinomial") and np.any(values < 0):
        r, c, v = _first_entry(arr, values < 0)
        raise DataValidationError(
            f"'X' of {owner} has a negative count ({v:g} at row {r}, column "
            f"{c}); kernel={kernel!r} needs non-negative counts. Use kernel='gaussian' "
            "for real-valued data."
        )
    if kernel == "multinomial":
        frac = values != np.rint(values)
        if np.any(frac):
            r, c, v = _first_entry(arr, frac)
            raise DataValidationError(
                f"'X' of {owner} must hold integer word counts for kernel='multinomial' "
                f"(the document lengths, its row sums, set the noise of Lemma 3(c)); "
                f"got {v:g} at row {r}, column {c} ({int(frac.sum())} "
                "non-integer entries). Pass the raw counts, not frequencies or weights; "
                "use kernel='gaussian' for real-valued data."
            )
        empty = np.flatnonzero(np.asarray(arr.sum(axis=1)).ravel() == 0)
        if empty.size:
            raise DataValidationError(
                f"{empty.size} row(s) of 'X' of {owner} have no words (first: "
                f"{empty[:5].tolist()}); kernel='multinomial' needs at least one word "
                "per document. Drop those rows first, e.g. X[X.sum(axis=1) > 0]."
            )


def check_nest_data(X, n_components, kernel: str, owner: str) -> tuple[np.ndarray, int]:
    """Validate data and the number of vertices for a simplex-nest estimator.

    Parameters
    ----------
    X : array_like or scipy.sparse matrix (n, D)
    n_components : int
    kernel : {"gaussian", "poisson", "multinomial"}
    owner : str
        Name of the caller, for messages.

    Returns
    -------
    X : ndarray of float64 (n, D), or scipy.sparse.csr_matrix
        A new array (the input is never modified); sparse input stays sparse.
    n_components : int

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
    kernel = check_kernel(kernel, owner)
    arr = check_rows(X, owner)
    n, D = arr.shape
    K = check_int(n_components, "n_components", owner=owner)
    if K < 2:
        raise DataValidationError(
            f"The 'n_components' parameter of {owner} must be >= 2: a simplex needs at "
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
            f"The 'n_components' parameter of {owner} must be <= {max_k} for D={D} "
            f"features and kernel={kernel!r} ({why}). Got {K}. Lower 'n_components'."
        )
    if n < K:
        raise DataValidationError(
            f"'X' of {owner} has {n} sample(s) but n_components={K}; at least one row per "
            "vertex is needed. Pass more data or lower 'n_components'."
        )
    check_counts(arr, kernel, owner)
    return arr, K


def constrain_vertices(vertices: np.ndarray, kernel: str) -> np.ndarray:
    """Project vertices onto the kernel's parameter set (a convex set with the truth).

    Multinomial topics onto the probability simplex, Poisson rates onto the
    non-negative orthant; Gaussian vertices are unconstrained. The Euclidean projection
    onto a convex set that contains the true vertex never moves an estimate away from
    it, so this can only lower the vertex error.

    Examples
    --------
    >>> constrain_vertices(np.array([[-1.0, 2.0]]), "poisson").tolist()
    [[0.0, 2.0]]
    """
    if kernel == "multinomial":
        return project_simplex(vertices, axis=1)
    if kernel == "poisson":
        return np.maximum(vertices, 0.0)
    return vertices


class SimplexNestFit(NamedTuple):
    """Result of :func:`fit_simplex_nest`.

    Attributes
    ----------
    vertices : ndarray (K, D)
        The estimated vertices, projected onto the kernel's parameter set (frequencies
        for the multinomial kernel).
    method : {"vlad", "gdm", "spa"}
    kernel : {"gaussian", "poisson", "multinomial"}
    n_features : int
    details : dict
        The method's other results, keyed by the name of the estimator attribute without
        its trailing ``_``: ``centroids``, ``center``, ``labels`` (VLAD, GDM);
        ``alpha``, ``gamma``, ``mass_balance``, ``fallback``, ``symmetric_vertices``,
        ``inflation``, ``alpha_interval``, ``alpha_objective``, ``singular_values``,
        ``components``, ``sigma`` (VLAD); ``extension`` (GDM); ``indices`` (SPA). See
        :class:`~bayespmf.estimators.VLAD` for their meaning.
    """

    vertices: np.ndarray
    method: str
    kernel: str
    n_features: int
    details: dict[str, Any]


def fit_simplex_nest(
    X,
    n_components: int,
    method: str = "vlad",
    *,
    kernel: str = "gaussian",
    alpha=None,
    n_init: int = DEFAULT_KMEANS_N_INIT,
    max_iter: int = DEFAULT_KMEANS_MAX_ITER,
    whiten: str = "corrected",
    noise_bias: str = "bootstrap",
    random_state=None,
) -> SimplexNestFit:
    r"""Estimate the vertices of a Dirichlet simplex nest by VLAD, GDM or SPA.

    Parameters
    ----------
    X : array_like (n, D)
        Real vectors (``kernel="gaussian"``) or counts (``"poisson"``,
        ``"multinomial"``), dense or a SciPy sparse matrix (e.g. a CSR document-term
        matrix: never densified; the results equal the dense path's up to rounding).
    n_components : int
        ``K``, the number of vertices.
    method : {"vlad", "gdm", "spa"}, default "vlad"
        Voronoi Latent Admixture (Yurochkin et al. 2019), Geometric Dirichlet Means
        (Yurochkin & Nguyen 2016) or the successive projection algorithm on the
        augmented data (Gillis & Vavasis 2014); see :class:`~bayespmf.estimators.VLAD`,
        :class:`~bayespmf.estimators.GDM` and :class:`~bayespmf.estimators.SimplexSPA`.
    kernel : {"gaussian", "poisson", "multinomial"}, default "gaussian"
    alpha : float or array_like (K,), optional
        The Dirichlet concentration, if known (VLAD: a number or one per vertex; GDM:
        a number, "GDM-MC"). SPA takes none.
    n_init, max_iter : int
        k-means restarts and Lloyd iterations per restart (VLAD, GDM).
    whiten : {"corrected", "data"}, default "corrected"
        VLAD's metric for k-means (VLAD only).
    noise_bias : {"bootstrap", "simex", "none"}, default "bootstrap"
        VLAD's correction of the noise bias of alpha and the extension (VLAD only).
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    SimplexNestFit

    Raises
    ------
    DataValidationError
        Malformed data (see :func:`check_nest_data`) or an invalid option; the message
        names the estimator of the method (``VLAD``, ``GDM``, ``SimplexSPA``).

    Warns
    -----
    ConvergenceWarning
        VLAD: the noise-corrected covariance along the centroids is not positive, so
        alpha cannot be matched (set to the top of the extension table's range).
    AsymmetricDirichletWarning
        VLAD: the k-means cells' masses differ from those of the fitted symmetric nest
        (:func:`~bayespmf.kernels.vlad_asymmetric.symmetry_test`); the fit fell back to
        a vector alpha (``details["fallback"] == "vector_alpha"``).
    UnresolvedSimplexWarning
        VLAD: a direction of the top subspace lies inside the noise bulk
        (``details["signal_margin"] <= 1``); the vertices along it are not identified
        from the data and alpha may be far off.

    Examples
    --------
    >>> from bayespmf.datasets._simulate import make_simplex_nest
    >>> X, truth = make_simplex_nest(500, 4, 3, alpha=1.0, sigma=0.01, random_state=0)
    >>> fit = fit_simplex_nest(X, 3, "gdm", random_state=0)
    >>> fit.vertices.shape, sorted(fit.details)
    ((3, 4), ['center', 'centroids', 'extension', 'labels'])
    >>> fit_simplex_nest(X, 3, "spa").details["indices"].shape
    (3,)
    """
    method = check_choice(
        method, "method", tuple(SIMPLEX_METHODS), owner="fit_simplex_nest"
    )
    owner = SIMPLEX_METHODS[method]
    kernel = check_kernel(kernel, owner)
    arr, K = check_nest_data(X, n_components, kernel, owner)
    if method == "spa":
        if alpha is not None:
            raise DataValidationError(
                "method='spa' takes no 'alpha' (SPA picks data points as vertices); got "
                f"alpha={alpha!r}. Drop 'alpha' or use method='vlad' or 'gdm'."
            )
        vertices, details = _fit_spa(arr, K, kernel)
    else:
        n_init = check_int(n_init, "n_init", owner=owner, low=1)
        max_iter = check_int(max_iter, "max_iter", owner=owner, low=1)
        if method == "vlad":
            vertices, details = _fit_vlad(
                arr, K, kernel, alpha, n_init, max_iter, whiten, noise_bias, random_state
            )
        else:
            vertices, details = _fit_gdm(
                arr, K, kernel, alpha, n_init, max_iter, random_state
            )
    return SimplexNestFit(vertices, method, kernel, arr.shape[1], details)


#: Why a vector-alpha estimate stopped short, in the fallback warning's words.
_VECTOR_STATUS = {
    "stalled": "no Dir(alpha) tried gives the data's cell masses",
    "singular": "the Dirichlets it was driven to leave the cell weights singular",
    "max_iter": "the moment equations were still moving at the last iteration",
    "alpha0_bound": "the total concentration was pushed to the end of its range",
}


def _fit_vlad(arr, K, kernel, alpha_in, n_init, max_iter, whiten, noise_bias, random_state):
    owner = "VLAD"
    if whiten not in WHITEN_OPTIONS:
        raise DataValidationError(
            f"The 'whiten' parameter of VLAD must be 'corrected' or 'data'. Got {whiten!r}."
        )
    if noise_bias not in NOISE_BIAS_OPTIONS:
        raise DataValidationError(
            "The 'noise_bias' parameter of VLAD must be one of "
            f"{', '.join(repr(o) for o in NOISE_BIAS_OPTIONS)}. Got {noise_bias!r}."
        )
    alpha, alpha_vec = None, None
    if alpha_in is not None:
        alpha = check_alpha(alpha_in, K, owner)
        if np.ndim(alpha) == 1:
            alpha_vec, alpha = alpha, None
    rng = check_random_state(random_state)
    Y, lengths = preprocess(arr, kernel)
    n, D = Y.shape
    sub = top_subspace(Y, K - 1, random_state=rng)
    sigma2 = noise_variance(sub, n, D) if kernel == "gaussian" else None
    ctx = {"sigma2": sigma2}
    if lengths is not None:
        ctx["inv_length"] = float(np.mean(1.0 / lengths))
        ctx["lengths"] = lengths
    margin = signal_margin(sub, kernel, ctx)
    if margin <= 1.0:
        warnings.warn(
            f"VLAD: the top {K - 1} directions of the data do not all stand out of "
            f"the {kernel} noise: the smallest variance is {margin:.2f} times the top "
            f"of the noise spectrum at n = {n}, D = {D} (the Marchenko-Pastur edge), "
            "so the simplex is not resolved along that direction: the vertices along "
            "it are not identified from these data and alpha may be far off. More "
            "rows (or less noisy data) are needed; see details['signal_margin'].",
            UnresolvedSimplexWarning,
            stacklevel=4,
        )
    metric = corrected_metric(sub, kernel, ctx) if whiten == "corrected" else None
    centroids, g, labels = vlad_centroids(
        sub, K, metric=metric, n_init=n_init, max_iter=max_iter, random_state=rng
    )
    g_raw = (centroids - sub.center) @ sub.components  # not re-centred
    objective, rho, interval = float("nan"), 1.0, (float("nan"), float("nan"))
    balance = mass_balance(labels, K)
    fallback, symmetric_vertices, unmatched = None, None, None
    if alpha_vec is not None:
        V, masses = dirichlet_cvt(alpha_vec, max_iter=max_iter, random_state=rng)
        vertices = np.linalg.solve(V, centroids[match_cells(balance.masses, masses)])
        vertices = constrain_vertices(vertices, kernel)
        alpha, gamma = alpha_vec.copy(), float("nan")
    elif noise_bias == "bootstrap":
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
        if alpha is None and cal.n_evals == 0:  # eq. (5) had no solution
            unmatched = alpha_range[1]
        alpha, rho = cal.alpha, cal.inflation
        if alpha_in is None:
            objective, interval = cal.objective, cal.interval
        gamma = float(gamma_fn(alpha)) / rho
    elif alpha is None:
        gamma_fn, alpha_range = extension_gamma_fn(K, random_state=rng)
        if noise_bias == "simex":
            target = simex_phi_star(sub, g, metric, kernel, ctx, random_state=rng)
        else:
            target = phi_star(sub, g, kernel, ctx)
        alpha, objective = estimate_alpha(target, K, gamma_fn, alpha_range)
        if not np.isfinite(objective):
            unmatched = alpha_range[1]
        gamma = float(gamma_fn(alpha))
    else:
        gamma = float(extension_parameter(alpha, K, random_state=rng))
    if unmatched is not None:
        warnings.warn(
            "The noise-corrected covariance along the VLAD centroids is not positive; "
            f"alpha cannot be matched and is set to {unmatched:g}, the top of its "
            "range. Pass 'alpha' explicitly.",
            ConvergenceWarning,
            stacklevel=4,
        )
    if alpha_vec is None:
        vertices = constrain_vertices(
            extend_centroids(sub.center, centroids, gamma), kernel
        )
        balance = symmetry_test(
            sub,
            g_raw,
            labels,
            kernel,
            ctx,
            alpha,
            gamma,
            whiten="corrected" if metric is not None else "data",
            n_init=n_init,
            max_iter=max_iter,
            random_state=_child(rng),
        )
        if rejects_symmetry(balance):
            symmetric_vertices = vertices
            vec = estimate_alpha_vector(sub, g_raw, labels, kernel, ctx, random_state=rng)
            _warn_asymmetric(balance, K, alpha, gamma, vec, alpha_in is not None)
            vertices = vec.vertices @ sub.components.T + sub.center
            vertices = constrain_vertices(vertices, kernel)
            alpha, gamma, fallback = vec.alpha, float("nan"), "vector_alpha"
            objective, interval = float("nan"), (float("nan"), float("nan"))
    details = {
        "alpha": float(alpha) if np.ndim(alpha) == 0 else np.asarray(alpha),
        "gamma": gamma,
        "mass_balance": balance,
        "fallback": fallback,
        "alpha_vector_status": None if fallback is None else vec.status,
        "symmetric_vertices": symmetric_vertices,
        "inflation": float(rho),
        "alpha_interval": interval,
        "alpha_objective": objective,
        "centroids": centroids,
        "center": sub.center,
        "singular_values": sub.singular_values,
        "components": sub.components,
        "labels": labels,
        "sigma": None if sigma2 is None else float(np.sqrt(sigma2)),
        "signal_margin": margin,
    }
    return vertices, details


def rejects_symmetry(balance) -> bool:
    """VLAD's decision on its symmetry test: fall back to a vector alpha or not.

    ``balance`` is the :class:`~bayespmf.kernels.vlad_asymmetric.MassBalance` of
    :func:`~bayespmf.kernels.vlad_asymmetric.symmetry_test`; see
    ``ASYMMETRY_P_VALUE`` and ``ASYMMETRY_MIN_TV``; the test is acted on only where
    every top direction lies above the noise bulk (``balance.signal_margin > 1``).

    Examples
    --------
    >>> from bayespmf.kernels.vlad_asymmetric import MassBalance
    >>> mb = MassBalance(np.array([0.5, 0.3, 0.2]), 300.0, 1e-9, 0.13, signal_margin=4.0)
    >>> rejects_symmetry(mb), rejects_symmetry(mb._replace(signal_margin=0.9))
    (True, False)
    """
    return bool(
        balance.p_value < ASYMMETRY_P_VALUE
        and balance.total_variation > ASYMMETRY_MIN_TV
        and balance.signal_margin > 1.0
    )


def _child(rng: np.random.Generator) -> np.random.Generator:
    """An independent generator spawned from ``rng`` without advancing its stream.

    The symmetry test draws its simulations from it, so that the draws after it (the
    vector-alpha estimate) are those of a fit without the test.
    """
    try:
        return rng.spawn(1)[0]
    except (TypeError, ValueError):  # a bit generator without a SeedSequence
        return np.random.default_rng(rng.integers(2**63 - 1))


def _warn_asymmetric(balance, K, alpha, gamma, vec, given) -> None:
    """The warning of VLAD when its cells show an asymmetric Dirichlet."""
    order = np.argsort(balance.masses)
    fmt = np.array2string(balance.masses[order], precision=3, separator=", ")
    exp = np.array2string(balance.expected[order], precision=3, separator=", ")
    df2 = (balance.n_rep - 1) * (K - 1)
    what = "the given" if given else "the fitted symmetric"
    warnings.warn(
        f"VLAD: the k-means cells hold unequal shares of the data (sorted masses {fmt} "
        f"against {exp}, those of {what} nest simulated with the noise at this size; "
        f"chi2 = {balance.chi2:.1f}, dispersion {balance.dispersion:.2f}, F = "
        f"{balance.statistic:.1f} on ({K - 1}, {df2}) df, p = {balance.p_value:.1e}; "
        f"total variation {balance.total_variation:.3f}): the "
        "Dirichlet is not symmetric, which the extension gamma(alpha) and the moment "
        f"equation (5) assume ({what} alpha = {float(alpha):.3g}, gamma = "
        f"{gamma:.3g}, would misplace the vertices). Fell back to a vector alpha "
        "estimated from the cell masses and the covariance, alpha_ = "
        f"{np.array2string(vec.alpha, precision=3, separator=', ')} (mass misfit "
        f"{vec.mass_misfit:.3f}, log-trace misfit {vec.cov_misfit:+.3f}"
        + (
            ""
            if vec.converged
            else f"; NOT CONVERGED ({vec.status} after {vec.n_iter} evaluations: "
            f"{_VECTOR_STATUS.get(vec.status, vec.status)}), so these vertices are "
            "not a Dirichlet-nest estimate: the data may not be a Dirichlet nest, or "
            "K is wrong"
        )
        + "), and vertices "
        "V(alpha)^-1 C (fallback_='vector_alpha'; the symmetric fit is in "
        "symmetric_vertices_). Pass alpha=[...] (one value per vertex) if you know it, "
        "and compare with GDM.",
        AsymmetricDirichletWarning,
        stacklevel=5,
    )


def _fit_gdm(arr, K, kernel, alpha, n_init, max_iter, random_state):
    owner = "GDM"
    rng = check_random_state(random_state)
    if alpha is not None:
        alpha = check_alpha(alpha, K, owner)
        if np.ndim(alpha) == 1:
            raise DataValidationError(
                f"The 'alpha' parameter of GDM must be one number (GDM-MC extends "
                f"every centroid by the symmetric gamma(alpha)); got {alpha.tolist()}."
                " Drop 'alpha' (GDM's own extension needs none) or use "
                "VLAD(alpha=[...]) for a vector alpha."
            )
    Y, _ = preprocess(arr, kernel)
    center = np.asarray(Y.mean(axis=0)).ravel()
    # sparse rows stay sparse: kmeans runs scikit-learn's sparse k-means on them
    centroids, labels, _ = kmeans(Y, K, n_init=n_init, max_iter=max_iter, random_state=rng)
    if alpha is not None:
        ext = np.full(K, float(extension_parameter(alpha, K, random_state=rng)))
    else:
        if sparse.issparse(Y):
            sq = np.asarray(Y.multiply(Y).sum(axis=1)).ravel()
            dist = np.sqrt(np.maximum(sq - 2 * (Y @ center) + center @ center, 0.0))
        else:
            dist = np.linalg.norm(Y - center, axis=1)
        far = np.zeros(K)
        np.maximum.at(far, labels, dist)
        norm_c = np.linalg.norm(centroids - center, axis=1)
        ext = far / np.where(norm_c > 0, norm_c, 1.0)
    vertices = constrain_vertices(extend_centroids(center, centroids, ext), kernel)
    details = {"centroids": centroids, "center": center, "extension": ext, "labels": labels}
    return vertices, details


def _fit_spa(arr, K, kernel):
    Y, _ = preprocess(arr, kernel)
    if sparse.issparse(Y):
        idx = spa_centered_rows(Y, K)
        return Y[idx].toarray(), {"indices": idx}
    Yc = Y - Y.mean(axis=0)
    t = float(np.sqrt(np.max(np.einsum("ij,ij->i", Yc, Yc)))) or 1.0
    aug = np.vstack([Yc.T, np.full((1, Y.shape[0]), t)])
    idx = spa(aug, K, normalize=False)
    return Y[idx].copy(), {"indices": idx}
