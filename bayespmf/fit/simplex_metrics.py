r"""The paper's finance metrics for a fitted simplex: distance of data to it, its volume.

Yurochkin et al. (2019, Sec. 5.2, Table 2 right) score a factor model of stock returns
by the *Frobenius norm* of the residual of held-out days projected onto the fitted
simplex, and, because stretching a simplex always lowers that residual, by the
*volume* of the simplex. The authors' code (``evaluate.py``, ``nmf_obj``) computes
the first as :math:`\|X - \hat\Theta \hat B\|_F / n` with :math:`\hat\theta_i` the
Euclidean projection of row :math:`x_i` onto the simplex; :func:`simplex_frobenius_error`
is that number, and :func:`simplex_distances` gives the per-row distances behind it.
"""

from __future__ import annotations

import math

import numpy as np

from bayespmf._validation import DataValidationError
from bayespmf.fit.source import float_array
from bayespmf.kernels.vlad_geometry import barycentric_weights

__all__ = ["simplex_distances", "simplex_frobenius_error", "simplex_volume"]


def _as_matrix(x, name: str, owner: str, need: str, shape_ok) -> np.ndarray:
    """``x`` as a new finite 2-D float array whose shape passes ``shape_ok``."""
    A = float_array(x, name, owner, need)
    if A.ndim != 2 or not shape_ok(A.shape):
        raise DataValidationError(
            f"The '{name}' parameter of {owner} must be {need}; got shape {A.shape}."
        )
    if not np.all(np.isfinite(A)):
        raise DataValidationError(
            f"'{name}' of {owner} contains NaN or infinite values; drop or impute them."
        )
    return A


def _check_vertices(vertices, owner: str) -> np.ndarray:
    need = "a 2-D array (K, D) of real numbers with K >= 2 vertices (one per row)"
    return _as_matrix(vertices, "vertices", owner, need, lambda s: s[0] >= 2 and s[1] >= 1)


def _check_data(X, n_features: int, owner: str) -> np.ndarray:
    need = (
        f"a non-empty 2-D array of real numbers with one column per vertex coordinate "
        f"({n_features}), in the space of the vertices (frequencies for a topic model)"
    )
    return _as_matrix(X, "X", owner, need, lambda s: s[0] >= 1 and s[1] == n_features)


def simplex_distances(X, vertices) -> np.ndarray:
    r"""Euclidean distance of each row of ``X`` to the simplex spanned by ``vertices``.

    Parameters
    ----------
    X : array_like (n, D)
        Data in the space of the vertices.
    vertices : array_like (K, D)
        One vertex per row.

    Returns
    -------
    ndarray (n,)
        :math:`\min_{\theta \in \Delta^{K-1}} \|x_i - B^T\theta\|_2`; 0 for a point
        inside the simplex.

    Raises
    ------
    DataValidationError
        Malformed ``X`` or ``vertices``, or another number of columns.

    Examples
    --------
    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> simplex_distances([[0.2, 0.2], [2.0, 0.0], [-1.0, 0.0]], V).round(6).tolist()
    [0.0, 1.0, 1.0]
    """
    V = _check_vertices(vertices, "simplex_distances")
    Y = _check_data(X, V.shape[1], "simplex_distances")
    theta = barycentric_weights(Y, V)[0]
    return np.sqrt(np.sum((Y - theta @ V) ** 2, axis=1))


def simplex_frobenius_error(X, vertices) -> float:
    r"""The paper's Frobenius error: :math:`\|X - \hat\Theta B\|_F / n`.

    :math:`\hat\Theta` holds the weights of the Euclidean projection of each row onto
    the simplex (:func:`simplex_distances`), so the value is
    :math:`\sqrt{\sum_i d_i^2} / n` with :math:`d_i` the distances: the number of
    Table 2 (right) of Yurochkin et al. (2019), as the authors' ``evaluate.py``
    (``nmf_obj``) computes it. It depends on ``n`` (like :math:`1/\sqrt n` for a
    fixed fit), so compare methods on the same rows; it never penalizes a simplex that
    is too large (see :func:`simplex_volume`).

    Parameters
    ----------
    X : array_like (n, D)
    vertices : array_like (K, D)

    Returns
    -------
    float

    Examples
    --------
    >>> V = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> simplex_frobenius_error([[2.0, 0.0], [-1.0, 0.0]], V)  # sqrt(1 + 1) / 2
    0.7071067811865476
    """
    d = simplex_distances(X, vertices)
    return float(np.sqrt(np.sum(d**2)) / d.size)


def simplex_volume(vertices, *, log: bool = False) -> float:
    r"""The :math:`(K-1)`-dimensional volume of the simplex with the given vertices.

    .. math::

        \mathrm{vol} = \frac{\sqrt{\det(E E^T)}}{(K-1)!}, \qquad
        E = (\beta_2 - \beta_1, \ldots, \beta_K - \beta_1)^T,

    computed from ``slogdet`` (the log volume does not overflow for large ``K``).
    Degenerate vertices (affinely dependent) give 0 (``-inf`` on the log scale).

    Parameters
    ----------
    vertices : array_like (K, D)
        ``K >= 2`` vertices, ``K - 1 <= D``.
    log : bool, default False
        Return the natural log of the volume.

    Returns
    -------
    float

    Raises
    ------
    DataValidationError
        Malformed vertices, or ``K - 1 > D`` (then the simplex has no
        :math:`(K-1)`-volume in :math:`\mathbb R^D`).

    Examples
    --------
    >>> simplex_volume([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # a right triangle
    0.5
    >>> round(simplex_volume(np.eye(3)), 6)  # equilateral, side sqrt(2): sqrt(3)/2
    0.866025
    """
    V = _check_vertices(vertices, "simplex_volume")
    K, D = V.shape
    if K - 1 > D:
        raise DataValidationError(
            f"simplex_volume needs K - 1 <= D (K={K} vertices in D={D} dimensions span "
            "at most a D-simplex); pass at most D + 1 vertices."
        )
    E = V[1:] - V[0]
    sign, logdet = np.linalg.slogdet(E @ E.T)
    log_vol = 0.5 * logdet - math.lgamma(K) if sign > 0 else -np.inf
    return float(log_vol) if log else float(np.exp(log_vol))
