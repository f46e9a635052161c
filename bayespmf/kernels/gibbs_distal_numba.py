r"""The Gibbs sweep of the distal-outcome model: every row's label, then the outcome.

With a distal outcome :math:`y` the class of row :math:`s` is drawn from

.. math:: \Pr(h_s = f \mid x_s, y_s) \propto \pi_f(s)\, f(y_s \mid \theta_f)
   \prod_{n\ \mathrm{observed}} A_n(x_{sn}, f)

(no :math:`y` term where the outcome is missing). :func:`draw_row_labels` draws them
in one numba loop over the observed entries (the per-row gather of
:func:`bayespmf.kernels.em_numba.row_log_joint`, every row with its own log prior, as
:func:`bayespmf.kernels.gibbs_regression_numba.draw_row_class_counts`) and returns
the labels themselves with the category-by-class counts: the outcome's per-class
sufficient statistics need each row's label, so rows are never collapsed into
patterns here. :func:`draw_outcome_params` draws the outcome's parameters given the
labels from their conditionals under the priors of
:func:`bayespmf.models.distal.latent_class_outcome_model`:

* bernoulli, :math:`p_f \sim \mathrm{Beta}(a + \sum y, b + n_f - \sum y)`;
* poisson, :math:`\mu_f \sim \mathrm{Gamma}(\alpha + \sum y, \beta + n_f)`;
* categorical, :math:`p_f \sim \mathrm{Dir}(\alpha + c_{f,:})`;
* gaussian, the class mean given its standard deviation (Normal-Normal conjugate),
  then the standard deviation given the mean. With the prior
  :math:`\sigma_f \sim \mathrm{HalfNormal}(\tau)` the conditional of the variance is
  a generalized inverse Gaussian,
  :math:`\sigma_f^2 \mid \mu_f, h, y \sim \mathrm{GIG}(p = (1 - n_f)/2,\ a =
  \tau^{-2},\ b = \sum_{s: h_s = f} (y_s - \mu_f)^2)`, drawn exactly by
  :func:`draw_gig`.

Sums run over the rows of class :math:`f` with an observed outcome; :math:`n_f`
counts them.

Reproducibility: the label draw cuts the rows into blocks of
:data:`bayespmf.kernels.gibbs_numba.BLOCK_ROWS` rows seeded from the caller's NumPy
generator (the same labels whatever the number of threads), and :func:`draw_gig`
seeds numba's generator from it too.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from bayespmf.kernels.em_numba import row_log_joint
from bayespmf.kernels.gibbs_numba import (
    BLOCK_ROWS,
    draw_dirichlet,
    exp_shifted,
    inverse_cdf,
    run_blocks,
)
from bayespmf.kernels.gibbs_regression_numba import row_prior_inputs

__all__ = [
    "OUTCOME_FAMILIES",
    "draw_gig",
    "draw_outcome_params",
    "draw_row_labels",
]

#: The outcome families :func:`draw_outcome_params` draws.
OUTCOME_FAMILIES = ("gaussian", "poisson", "bernoulli", "categorical")

_LOG_TINY = float(np.log(np.finfo(np.float64).tiny))

#: Below this ``omega`` a standard GIG of index ``p >= 1`` is drawn by rejection from
#: a Gamma (:func:`_gig_standard`).
_GAMMA_HAT_OMEGA = 1e-4


@numba.njit(cache=True, nogil=True)
def _draw_labels(
    log_prior, log_a, indptr, indices, lo, hi, seed, labels, counts
):  # pragma: no cover - numba
    np.random.seed(seed)  # noqa: NPY002 - numba's generator, this block only
    n_components = log_prior.shape[1]
    buf = np.empty(n_components)
    for s in range(lo, hi):
        row_log_joint(log_prior[s], log_a, indptr, indices, s, buf)
        f = inverse_cdf(buf, exp_shifted(buf, n_components), n_components)
        labels[s] = f
        for k in range(indptr[s], indptr[s + 1]):
            counts[indices[k], f] += 1


def draw_row_labels(log_prior, log_a, indptr, indices, rng, *, threads=None):
    """Draw the class of every row, each from its own prior; return labels and counts.

    Parameters
    ----------
    log_prior : ndarray, shape (S, F)
        Unnormalized log class weights of every row before the indicators: the log
        class prior plus, where the outcome is observed, its log-density given each
        class.
    log_a : ndarray, shape (P, F)
        Log stacked factors: row ``offsets[n] + i`` is ``log A_n(i, .)``.
    indptr, indices : ndarray of int64
        CSR layout of the rows' observed entries (:func:`bayespmf.pmf.observed_csr`),
        ``S + 1`` pointers. A row with nothing observed is drawn from ``log_prior``.
    rng : numpy.random.Generator
        Draws one seed per block of ``BLOCK_ROWS`` rows.
    threads : int, optional
        Threads over the blocks (default: the CPUs this process may use). The draws
        do not depend on it.

    Returns
    -------
    labels : ndarray of int64, shape (S,)
    counts : ndarray of int64, shape (P, F)
        :math:`m_{j,f}`, the observed entries with flat index ``j`` in rows drawn in
        class ``f``.

    Raises
    ------
    ValueError
        ``log_prior`` does not have one row per CSR row and one column per class.

    Examples
    --------
    >>> from bayespmf.pmf import observed_csr
    >>> indptr, indices = observed_csr(np.array([[0, 1], [1, -1], [-1, -1]]), [2, 2])
    >>> log_prior = np.log([[1.0, 1e-300], [1e-300, 1.0], [1e-300, 1.0]])
    >>> labels, m = draw_row_labels(log_prior, np.log(np.full((4, 2), 0.5)), indptr,
    ...                             indices, np.random.default_rng(0))
    >>> labels.tolist(), m.tolist()
    ([0, 1, 1], [[1, 0], [0, 1], [0, 0], [1, 0]])
    """
    log_prior, log_a, indptr, indices = row_prior_inputs(log_prior, log_a, indptr, indices)
    n_rows = indptr.size - 1
    n_blocks = max(1, -(-n_rows // BLOCK_ROWS))
    seeds = rng.integers(2**31 - 1, size=n_blocks)
    labels = np.empty(n_rows, dtype=np.int64)
    counts = np.zeros((n_blocks, *log_a.shape), dtype=np.int64)

    def run(b):
        lo, hi = b * BLOCK_ROWS, min(n_rows, (b + 1) * BLOCK_ROWS)
        _draw_labels(log_prior, log_a, indptr, indices, lo, hi, seeds[b], labels, counts[b])

    run_blocks(run, n_blocks, threads)
    return labels, counts.sum(axis=0)


# ------------------------------------------------ generalized inverse Gaussian draws


@numba.njit(cache=True, nogil=True, inline="always")
def _log_quasi(x, p, b):  # pragma: no cover - numba
    """Log of the standard GIG's quasi-density ``x^(p-1) exp(-b (x + 1/x) / 2)``."""
    if x <= 0.0:
        return -math.inf
    return (p - 1.0) * math.log(x) - 0.5 * b * (x + 1.0 / x)


@numba.njit(cache=True, nogil=True)
def _gig_standard(p, b):  # pragma: no cover - numba
    """One draw of the standard GIG(p, b), ``p >= 0``, ``b > 0`` (Hoermann & Leydold).

    Density proportional to ``x^(p-1) exp(-b (x + 1/x) / 2)``; the three cases of
    Hoermann and Leydold (2014, Statistics and Computing 24, 547-557), as SciPy's
    ``geninvgauss`` draws them: ratio of uniforms with the mode shifted out where
    ``p >= 1`` or ``b > 1``, without it where ``b >= min(1/2, 2 sqrt(1 - p) / 3)``,
    their rejection from a three-piece hat otherwise. Each has a rejection constant
    bounded over all (p, b). Where ``p >= 1`` and ``b`` is below
    :data:`_GAMMA_HAT_OMEGA` (where the first one's bounding box loses precision) it
    is drawn by rejection from a Gamma, exactly too.
    """
    if p >= 1.0 and b < _GAMMA_HAT_OMEGA:
        # b tiny: the mode shift's cubic loses its precision; the quasi-density is a
        # Gamma(p, rate b/2) density times exp(-b / (2x)) <= 1, so draw that Gamma
        # and accept with that probability (exact; it rejects with probability of
        # order b^2)
        while True:
            x = 2.0 * np.random.gamma(p, 1.0) / b  # noqa: NPY002
            if 1.0 - np.random.random() <= math.exp(-0.5 * b / x):  # noqa: NPY002
                return x
    if p < 1.0:  # the mode, without cancellation
        m = b / (math.sqrt((p - 1.0) ** 2 + b * b) + 1.0 - p)
    else:
        m = (math.sqrt((1.0 - p) ** 2 + b * b) - (1.0 - p)) / b
    if p >= 1.0 or b > 1.0:
        # ratio of uniforms, mode shift: the bounding box from the roots of a cubic
        a2 = -2.0 * (p + 1.0) / b - m
        a1 = 2.0 * m * (p - 1.0) / b - 1.0
        p1 = a1 - a2 * a2 / 3.0
        q1 = 2.0 * a2**3 / 27.0 - a2 * a1 / 3.0 + m
        arg = -q1 * math.sqrt(-27.0 / p1**3) / 2.0
        phi = math.acos(min(1.0, max(-1.0, arg)))
        s1 = -math.sqrt(-4.0 * p1 / 3.0)
        root1 = s1 * math.cos(phi / 3.0 + math.pi / 3.0) - a2 / 3.0
        root2 = -s1 * math.cos(phi / 3.0) - a2 / 3.0
        lm = _log_quasi(m, p, b)
        vmin = (root1 - m) * math.exp(0.5 * (_log_quasi(root1, p, b) - lm))
        vmax = (root2 - m) * math.exp(0.5 * (_log_quasi(root2, p, b) - lm))
        while True:
            u = 1.0 - np.random.random()  # noqa: NPY002 - in (0, 1]
            v = vmin + (vmax - vmin) * np.random.random()  # noqa: NPY002
            x = v / u + m
            if x > 0.0 and 2.0 * math.log(u) <= _log_quasi(x, p, b) - lm:
                return x
    if b >= min(0.5, 2.0 * math.sqrt(1.0 - p) / 3.0):
        # ratio of uniforms without the mode shift
        half_lm = 0.5 * _log_quasi(m, p, b)
        xplus = ((1.0 + p) + math.sqrt((1.0 + p) ** 2 + b * b)) / b
        vmax = xplus * math.exp(0.5 * _log_quasi(xplus, p, b) - half_lm)
        while True:
            u = 1.0 - np.random.random()  # noqa: NPY002 - in (0, 1], times umax
            x = vmax * np.random.random() / u  # noqa: NPY002
            if x > 0.0 and 2.0 * math.log(u) <= _log_quasi(x, p, b) - 2.0 * half_lm:
                return x
    # small b, p < 1: rejection from a hat of three pieces
    x0 = b / (1.0 - p)
    xs = max(x0, 2.0 / b)
    k1 = math.exp(_log_quasi(m, p, b))
    a_1 = k1 * x0
    k2 = 0.0
    a_2 = 0.0
    if x0 < 2.0 / b:
        k2 = math.exp(-b)
        if p > 0.0:
            a_2 = k2 * ((2.0 / b) ** p - x0**p) / p
        else:
            a_2 = k2 * (math.log(2.0) - 2.0 * math.log(b))  # no overflow at tiny b
    k3 = xs ** (p - 1.0)
    a_3 = 2.0 * k3 * math.exp(-xs * b / 2.0) / b
    total = a_1 + a_2 + a_3
    while True:
        u = 1.0 - np.random.random()  # noqa: NPY002
        v = total * np.random.random()  # noqa: NPY002
        if v <= a_1:
            x = x0 * v / a_1
            h = k1
        elif v <= a_1 + a_2:
            if p > 0.0:
                x = (x0**p + (v - a_1) * p / k2) ** (1.0 / p)
            else:
                x = math.exp(math.log(b) + (v - a_1) * math.exp(b))  # log: b tiny
            h = k2 * x ** (p - 1.0)
        else:
            z = math.exp(-xs * b / 2.0) - b * (v - a_1 - a_2) / (2.0 * k3)
            x = -2.0 / b * math.log(z)
            h = k3 * math.exp(-x * b / 2.0)
        if x > 0.0 and math.log(u * h) <= _log_quasi(x, p, b):
            return x


@numba.njit(cache=True, nogil=True)
def _draw_gig(p, a, b, seed, out):  # pragma: no cover - numba
    np.random.seed(seed)  # noqa: NPY002 - numba's generator, this call only
    for i in range(p.size):
        if b[i] <= 0.0:  # GIG(p, a, 0) is Gamma(p, rate a / 2)
            out[i] = np.random.gamma(p[i], 2.0 / a[i])  # noqa: NPY002
            continue
        omega = math.sqrt(a[i] * b[i])
        scale = math.sqrt(b[i] / a[i])
        if p[i] < 0.0:  # 1/X of a standard GIG(-p, omega) is one of GIG(p, omega)
            out[i] = scale / _gig_standard(-p[i], omega)
        else:
            out[i] = scale * _gig_standard(p[i], omega)


def draw_gig(p, a, b, rng) -> np.ndarray:
    r"""Draw generalized inverse Gaussians, elementwise, exactly.

    The density of :math:`\mathrm{GIG}(p, a, b)` is proportional to :math:`x^{p-1}
    \exp(-(a x + b / x) / 2)` on :math:`x > 0`. It is drawn as
    :math:`\sqrt{b/a}` times a standard GIG of index :math:`p` and
    :math:`\omega = \sqrt{ab}` (Hoermann and Leydold's algorithm, in numba), a
    ``Gamma(p, rate a/2)`` where ``b == 0``.

    Parameters
    ----------
    p, a, b : array_like (broadcast together)
        ``a > 0``, ``b >= 0``, and ``p > 0`` where ``b == 0``.
    rng : numpy.random.Generator
        Seeds numba's generator for this call.

    Returns
    -------
    ndarray of float64, the broadcast shape

    Raises
    ------
    ValueError
        A value that is not finite, ``a <= 0``, ``b < 0``, or ``b == 0`` with
        ``p <= 0`` (no proper law).

    Examples
    --------
    >>> x = draw_gig(np.full(20000, -1.5), 2.0, 3.0, np.random.default_rng(0))
    >>> from scipy.stats import geninvgauss
    >>> exact = geninvgauss.mean(-1.5, np.sqrt(6.0), scale=np.sqrt(1.5))
    >>> bool(abs(x.mean() - exact) < 4 * x.std() / np.sqrt(x.size))
    True
    """
    p, a, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (p, a, b)))
    bad = (a <= 0) | (b < 0) | ((b == 0) & (p <= 0)) | ~np.isfinite(p + a + b)
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        raise ValueError(
            "draw_gig needs finite a > 0, b >= 0 and p > 0 where b == 0 (otherwise the "
            f"GIG law is improper); got p={p.flat[i]}, a={a.flat[i]}, b={b.flat[i]} "
            f"(and {int(bad.sum()) - 1} more such entries)."
        )
    out = np.empty(p.shape)
    _draw_gig(
        np.ascontiguousarray(p).ravel(),
        np.ascontiguousarray(a).ravel(),
        np.ascontiguousarray(b).ravel(),
        int(rng.integers(2**31 - 1)),
        out.reshape(-1),
    )
    return out


# ---------------------------------------------------- the outcome's conditionals


def _clip_open(p):
    """Probabilities kept inside (0, 1), so that a log-odds value is finite."""
    return np.clip(p, np.finfo(np.float64).tiny, 1.0 - np.finfo(np.float64).epsneg)


def draw_outcome_params(family, y, labels, n_components, prior, current, rng) -> dict:
    r"""The outcome's parameters drawn from their conditionals given the labels.

    Parameters
    ----------
    family : {"gaussian", "poisson", "bernoulli", "categorical"}
    y : ndarray, shape (S_obs,)
        The observed outcomes (float for gaussian; counts, 0/1 or category codes).
    labels : ndarray of int, shape (S_obs,)
        The class of each row with an observed outcome.
    n_components : int
    prior : dict of ndarray
        gaussian: ``mean_mu``, ``mean_sd`` (the Normal prior of the class means),
        ``sigma_scale`` (the HalfNormal's); poisson: ``alpha``, ``rate`` (Gamma);
        bernoulli: ``alpha``, ``beta`` (Beta); categorical: ``alpha`` (F, K)
        (Dirichlet). Each broadcast over the classes.
    current : dict of ndarray
        The current parameters; gaussian reads ``outcome_sigma`` (the mean is drawn
        given it, then the standard deviation given the new mean).
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``outcome_mean`` (and ``outcome_sigma``) of shape (F,), or ``outcome_probs``
        (F, K), on the constrained scale; probabilities are kept inside (0, 1).

    Raises
    ------
    ValueError
        An unknown family.

    Examples
    --------
    >>> y, labels = np.array([1, 0, 1, 1]), np.array([0, 0, 1, 1])
    >>> out = draw_outcome_params("bernoulli", y, labels, 2,
    ...                           {"alpha": np.ones(2), "beta": np.ones(2)}, {},
    ...                           np.random.default_rng(0))
    >>> out["outcome_mean"].shape
    (2,)
    """
    n_f = np.bincount(labels, minlength=n_components).astype(np.float64)
    if family == "categorical":
        alpha = np.asarray(prior["alpha"], dtype=np.float64)
        k = alpha.shape[-1]
        counts = np.bincount(labels * k + y, minlength=n_components * k)
        log_p = draw_dirichlet(alpha + counts.reshape(n_components, k), rng)
        return {"outcome_probs": np.exp(np.maximum(log_p, _LOG_TINY))}
    if family not in OUTCOME_FAMILIES:
        raise ValueError(
            f"'family' must be one of {list(OUTCOME_FAMILIES)}; got {family!r}."
        )
    sum_y = np.bincount(labels, weights=y, minlength=n_components)
    if family == "bernoulli":
        p = rng.beta(prior["alpha"] + sum_y, prior["beta"] + n_f - sum_y)
        return {"outcome_mean": _clip_open(p)}
    if family == "poisson":
        mu = rng.gamma(prior["alpha"] + sum_y, 1.0 / (prior["rate"] + n_f))
        return {"outcome_mean": np.maximum(mu, np.finfo(np.float64).tiny)}
    # gaussian: the means given the standard deviations (Normal-Normal), ...
    sigma2 = np.asarray(current["outcome_sigma"], dtype=np.float64) ** 2
    prec = 1.0 / prior["mean_sd"] ** 2 + n_f / sigma2
    centre = (prior["mean_mu"] / prior["mean_sd"] ** 2 + sum_y / sigma2) / prec
    mu = centre + rng.standard_normal(n_components) / np.sqrt(prec)
    # ... then the variances given the new means: GIG((1 - n) / 2, 1 / tau^2, SS)
    ss = np.bincount(labels, weights=(y - mu[labels]) ** 2, minlength=n_components)
    # a class with one row has SS > 0 but for a null set; keep it off 0 exactly
    ss = np.where(n_f > 0, np.maximum(ss, np.finfo(np.float64).tiny), 0.0)
    var = draw_gig((1.0 - n_f) / 2.0, 1.0 / prior["sigma_scale"] ** 2, ss, rng)
    sigma = np.sqrt(np.maximum(var, np.finfo(np.float64).tiny))
    return {"outcome_mean": mu, "outcome_sigma": sigma}
