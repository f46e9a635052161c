r"""Choosing the number of vertices K of a Dirichlet simplex nest by held-out completion.

The squared distance of held-out rows to a fitted simplex (``score`` of the
estimators, the paper's Frobenius error) never rises with K: a larger simplex covers
more. :func:`select_simplex_n_components` scores *completion* instead, the device of the
paper's
held-out perplexity (document completion, Wallach et al. 2009): K-fold over the rows;
for each held-out row, the weights :math:`\hat\theta_i` are estimated from a random half
of its coordinates (the projection onto the fitted simplex restricted to those
coordinates) and the other half is predicted, :math:`\hat y_{i,B} = \hat B_B^T
\hat\theta_i`. Too few vertices cannot predict the other half; too many fit the noise of
the observed half into spurious weights, which then mispredict the other half, so the
error has a minimum.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse

from bayespmf._validation import DataValidationError, check_int, check_random_state
from bayespmf.fit.recorded import call_recording_warnings
from bayespmf.fit.simplex import check_kernel, check_rows, fit_simplex_nest
from bayespmf.kernels.vlad_geometry import barycentric_weights, preprocess

__all__ = ["SCORE_CHUNK_ROWS", "completion_error", "select_simplex_n_components"]

#: Held-out rows scored at a time: a sparse document-term matrix is made dense this
#: many rows at a time (never a whole fold).
SCORE_CHUNK_ROWS = 512


def completion_error(Y, vertices, observed) -> np.ndarray:
    r"""Squared error of predicting the unobserved coordinates of each row from the rest.

    Parameters
    ----------
    Y : array_like (n, D)
        Rows in the space of the vertices (frequencies for a topic model).
    vertices : array_like (K, D)
    observed : array_like of bool (D,)
        The coordinates used to estimate each row's weights; the others are predicted.

    Returns
    -------
    ndarray (n,)
        :math:`\frac{1}{|B|}\|y_{i,B} - \hat B_B^T\hat\theta_i\|_2^2` with
        :math:`\hat\theta_i = \arg\min_{\theta\in\Delta^{K-1}} \|y_{i,A} - \hat B_A^T
        \theta\|_2` (``A`` the observed coordinates, ``B`` the others).

    Raises
    ------
    DataValidationError
        ``observed`` not a boolean mask of length ``D`` with at least one coordinate on
        each side.

    Examples
    --------
    >>> V = np.array([[0.0, 0.0], [1.0, 1.0]])
    >>> completion_error([[0.5, 0.5], [1.0, 0.0]], V, [True, False]).tolist()
    [0.0, 1.0]
    """
    Y = np.asarray(Y, dtype=float)
    V = np.asarray(vertices, dtype=float)
    mask = np.asarray(observed)
    if mask.dtype != bool or mask.shape != (V.shape[1],) or mask.all() or not mask.any():
        raise DataValidationError(
            f"'observed' of completion_error must be a boolean mask of length D = "
            f"{V.shape[1]} with at least one True and one False entry; got "
            f"{mask.dtype} of shape {mask.shape}."
        )
    theta = barycentric_weights(Y[:, mask], V[:, mask])[0]
    resid = Y[:, ~mask] - theta @ V[:, ~mask]
    return np.mean(resid**2, axis=1)


def select_simplex_n_components(
    X,
    candidates,
    method: str = "vlad",
    *,
    kernel: str = "gaussian",
    n_splits: int = 5,
    random_state=None,
    **fit_options,
) -> tuple[pd.DataFrame, int]:
    r"""Choose the number of vertices K by cross-validated held-out completion error.

    For each of ``n_splits`` folds of the rows (shuffled) and each K in ``candidates``:
    fit :func:`~bayespmf.fit.fit_simplex_nest` on the other rows, then score the
    fold's rows by :func:`completion_error` with a random half of the coordinates
    observed (the same half for every K within a fold). The chosen K has the smallest
    mean error.

    Parameters
    ----------
    X : array_like or scipy.sparse matrix (n, D)
        As for :func:`~bayespmf.fit.fit_simplex_nest` (counts for the Poisson and
        multinomial kernels; the multinomial rows are scored as frequencies). A sparse
        matrix stays sparse; held-out rows are made dense ``SCORE_CHUNK_ROWS`` at a
        time.
    candidates : sequence of int
        The values of K to compare (each ``>= 2``; distinct).
    method : {"vlad", "gdm", "spa"}, default "vlad"
    kernel : {"gaussian", "poisson", "multinomial"}, default "gaussian"
    n_splits : int, default 5
        Folds of the rows (``>= 2``).
    random_state : None, int or numpy.random.Generator
        Seeds the folds, the coordinate halves and every fit.
    **fit_options
        Passed to :func:`~bayespmf.fit.fit_simplex_nest` (e.g. ``n_init``,
        ``noise_bias``).

    Returns
    -------
    table : pandas.DataFrame
        Indexed by ``n_components``: ``completion_mse`` (mean over folds of the mean
        per-coordinate squared error), ``completion_se`` (its standard error over
        folds), ``heldout_distance2`` (mean squared distance of the held-out rows to
        the fitted simplex: it only falls with K and is shown for contrast),
        ``n_warnings`` (warnings the fits raised, e.g. VLAD's asymmetric-Dirichlet
        warning; they are counted here, not re-raised) and ``chosen`` (bool).
    n_components : int
        The K with the smallest ``completion_mse``.

    Raises
    ------
    DataValidationError
        Malformed data or options, a candidate the data cannot support (see
        :func:`~bayespmf.fit.simplex.check_nest_data`), fewer than 2 features (no
        half to predict) or fewer rows than ``n_splits``.

    Examples
    --------
    >>> from bayespmf.datasets import make_simplex_nest
    >>> X, _ = make_simplex_nest(600, 20, 3, alpha=0.5, sigma=0.05, random_state=0)
    >>> table, K = select_simplex_n_components(X, [2, 3, 5], "gdm", n_splits=3,
    ...                                        random_state=0)
    >>> K, list(table.columns)[:2]
    (3, ['completion_mse', 'completion_se'])
    """
    owner = "select_simplex_n_components"
    kernel = check_kernel(kernel, owner)
    arr = check_rows(X, owner)
    try:
        ks = [check_int(k, "candidates", owner=owner, low=2) for k in candidates]
    except TypeError as err:
        raise DataValidationError(
            f"'candidates' of {owner} must be a sequence of integers >= 2, e.g. "
            f"[2, 3, 4, 5]; got {candidates!r}."
        ) from err
    if not ks or len(set(ks)) != len(ks):
        raise DataValidationError(
            f"'candidates' of {owner} must be a non-empty list of distinct integers "
            f">= 2; got {list(candidates)}."
        )
    n, D = arr.shape
    n_splits = check_int(n_splits, "n_splits", owner=owner, low=2)
    if n < n_splits:
        raise DataValidationError(
            f"'X' of {owner} has {n} rows, fewer than n_splits={n_splits}; lower "
            "'n_splits' or pass more rows."
        )
    if D < 2:
        raise DataValidationError(
            f"'X' of {owner} has {D} feature(s); completion needs >= 2 (one half to "
            "estimate the weights, one to predict)."
        )
    rng = check_random_state(random_state)
    folds = np.array_split(rng.permutation(n), n_splits)
    Y = preprocess(arr, kernel)[0]
    err = np.full((len(ks), n_splits), np.nan)
    dist2 = np.full((len(ks), n_splits), np.nan)
    n_warn = np.zeros(len(ks), dtype=int)
    for f, test in enumerate(folds):
        train = np.setdiff1d(np.arange(n), test)
        observed = np.zeros(D, dtype=bool)
        observed[rng.permutation(D)[: D // 2]] = True
        seed = int(rng.integers(2**31))
        for j, K in enumerate(ks):
            fit, caught = call_recording_warnings(
                fit_simplex_nest,
                arr[train],
                K,
                method,
                kernel=kernel,
                random_state=seed,
                **fit_options,
            )
            n_warn[j] += len(caught)
            err[j, f], dist2[j, f] = _score_rows(Y, test, fit.vertices, observed)
    mean = err.mean(axis=1)
    best = int(np.argmin(mean))
    table = pd.DataFrame(
        {
            "completion_mse": mean,
            "completion_se": err.std(axis=1, ddof=1) / np.sqrt(n_splits),
            "heldout_distance2": dist2.mean(axis=1),
            "n_warnings": n_warn,
            "chosen": np.arange(len(ks)) == best,
        },
        index=pd.Index(ks, name="n_components"),
    )
    return table, ks[best]


def _score_rows(Y, rows, vertices, observed) -> tuple[float, float]:
    """Mean completion error and mean squared distance to the simplex of ``Y[rows]``."""
    err, dist2 = 0.0, 0.0
    for chunk in np.array_split(rows, -(-rows.size // SCORE_CHUNK_ROWS)):
        Z = Y[chunk].toarray() if sparse.issparse(Y) else Y[chunk]
        err += float(completion_error(Z, vertices, observed).sum())
        theta = barycentric_weights(Z, vertices)[0]
        dist2 += float(np.sum((Z - theta @ vertices) ** 2))
    return err / rows.size, dist2 / rows.size
