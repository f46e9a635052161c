"""Simulators for the two model families of bayespmf, with their true parameters.

:func:`make_latent_class` draws partially observed categorical data from a latent-class
(naive Bayes / low-rank CPD) PMF, with the factor generators used in the synthetic
experiments of Ibrahim & Fu (Sec. 5.2) and Chege et al. (Sec. V-A).
:func:`make_simplex_nest` draws data from a Dirichlet Simplex Nest (Yurochkin et al.,
Sec. 2) with the vertex construction of their Supplement B.

Every draw comes from one :class:`numpy.random.Generator` built by
:func:`~bayespmf._validation.check_random_state`, so a fixed ``random_state`` gives the
same data and parameters on every call; no global random state is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bayespmf._validation import (
    DataValidationError,
    check_choice,
    check_float,
    check_int,
    check_n_categories,
    check_random_state,
)
from bayespmf.data import MISSING, CategoricalData
from bayespmf.fit.source import float_array
from bayespmf.pmf import LatentClassParams

__all__ = [
    "LatentClassTruth",
    "SimplexNestTruth",
    "make_latent_class",
    "make_simplex_nest",
]

#: Mass on the diagonal of the anchor block of the epsilon-separable construction. The
#: CNMF code (``gen_PMF_factors_dirich_with_sep.m``, ``mu = 0.4``) uses this value; it
#: leaves 1 - 0.4 - (F-1)*delta of each column to the non-anchor rows.
ANCHOR_MASS = 0.4

#: Default epsilon of the separable generator: Table 1 of Ibrahim & Fu uses 0.1.
DEFAULT_EPSILON = 0.1

#: Defaults of the DSN simulations of Yurochkin et al., Supplement B.
DEFAULT_SIGMA = 1.0  # "For Gaussian data ... sigma = 1"
DEFAULT_WORDS_PER_DOC = 3000  # "for LDA ... with 3000 words per document"
DEFAULT_C_MIN = 0.5  # "Except for the DSN geometry experiment, we set c_min = 0.5"
DEFAULT_ETA = 0.1  # topics ~ Dir_D(eta) "with eta = 0.1"

_FACTOR_PRIORS = ("uniform", "dirichlet", "row-dirichlet", "separable")
_WEIGHTS_PRIORS = ("uniform", "dirichlet", "equal")
_KERNELS = ("gaussian", "poisson", "multinomial")


class LatentClassTruth(NamedTuple):
    r"""The parameters that generated a :func:`make_latent_class` data set.

    Attributes
    ----------
    weights : ndarray, shape (F,)
        Class prior :math:`\lambda`.
    factors : list of ndarray, each (I_n, F)
        Column-stochastic conditional PMFs :math:`A_n(i, f) = \Pr(x_n = i \mid f)`.
    classes : ndarray of int64, shape (n_samples,)
        The latent class of each row of the returned data.
    """

    weights: np.ndarray
    factors: list
    classes: np.ndarray

    @property
    def params(self) -> LatentClassParams:
        """The ``(weights, factors)`` pair as :class:`~bayespmf.pmf.LatentClassParams`."""
        return LatentClassParams(self.weights, self.factors)


class SimplexNestTruth(NamedTuple):
    r"""The parameters that generated a :func:`make_simplex_nest` data set.

    Attributes
    ----------
    vertices : ndarray, shape (K, D)
        Extreme points :math:`\beta_1, \dots, \beta_K` of the simplex.
    theta : ndarray, shape (n_samples, K)
        Barycentric weights of each sample, :math:`\mu_i = \theta_i^T B`.
    alpha : float or ndarray of shape (K,)
        Dirichlet concentration (a float when symmetric).
    kernel : str
        ``"gaussian"``, ``"poisson"`` or ``"multinomial"``.
    sigma : float or None
        Noise standard deviation (Gaussian kernel only).
    words_per_doc : int, ndarray of shape (n_samples,) or None
        Number of words of each document (multinomial kernel only).
    """

    vertices: np.ndarray
    theta: np.ndarray
    alpha: float | np.ndarray
    kernel: str
    sigma: float | None = None
    words_per_doc: int | np.ndarray | None = None


# --------------------------------------------------------------------------------------
# shared checks


def _check_n_categories(n_categories, n_variables) -> np.ndarray:
    owner = "make_latent_class"
    if n_variables is not None:
        n_variables = check_int(n_variables, "n_variables", owner=owner, low=1)
    elif np.ndim(n_categories) == 0:
        raise DataValidationError(
            "make_latent_class needs 'n_variables' when 'n_categories' is a single "
            f"int ({n_categories!r}); pass n_variables=N, or pass one alphabet size "
            "per variable as a sequence."
        )
    return check_n_categories(n_categories, n_variables, owner=owner)


def _check_observed_prob(observed_prob, n_variables: int) -> np.ndarray:
    if np.ndim(observed_prob) == 0:
        p = check_float(
            observed_prob,
            "observed_prob",
            owner="make_latent_class",
            low=0.0,
            high=1.0,
            low_open=True,
        )
        return np.full(n_variables, p)
    p = np.asarray(observed_prob, dtype=float)
    if p.shape != (n_variables,):
        raise DataValidationError(
            "'observed_prob' must be a float or one probability per variable "
            f"({n_variables}); got shape {p.shape}."
        )
    if not np.all(np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        raise DataValidationError(
            f"Every entry of 'observed_prob' must be in (0, 1]; got {p.tolist()}."
        )
    return p


# --------------------------------------------------------------------------------------
# latent-class factors


def _normalize_columns(a: np.ndarray) -> np.ndarray:
    return a / a.sum(axis=0, keepdims=True)


def _uniform_factor(rng, n_rows: int, n_components: int) -> np.ndarray:
    # Entries Uniform(0, 1), columns rescaled to unit l1 norm (Ibrahim & Fu Sec. 5.2;
    # Chege et al. Sec. V-A; gen_PMF_factors.m).
    return _normalize_columns(rng.random((n_rows, n_components)))


def _dirichlet_factor(rng, n_rows: int, n_components: int) -> np.ndarray:
    # Each column ~ Dirichlet(1, ..., 1): uniform on the probability simplex.
    return rng.dirichlet(np.ones(n_rows), size=n_components).T


def _assumption1_factor(rng, n_rows: int, n_components: int) -> np.ndarray:
    # Ibrahim & Fu, Assumption 1: every row drawn uniformly from the (F-1)-simplex
    # (Dirichlet(1_F)), then columns rescaled so that 1^T A_n = 1^T
    # (gen_PMF_factors_dirich_with_sep.m draws the rows the same way).
    return _normalize_columns(rng.dirichlet(np.ones(n_components), size=n_rows))


def _separable_factors(rng, n_cat, n_components, epsilon, eligible) -> list:
    """Factors whose S2 block H is exactly epsilon-separable (see make_latent_class).

    ``eligible`` are the variables of S2 with more than ``n_components`` categories, one of
    which receives the anchor rows.
    """
    factors = [_assumption1_factor(rng, int(k), n_components) for k in n_cat]
    u = int(rng.choice(eligible))
    # Row-normalized anchor row f is (1 - (F-1) t) e_f + t (1 - e_f), whose l2 distance
    # to e_f is t * sqrt(F (F-1)); solve for t, then for the off-diagonal mass delta.
    t = epsilon / np.sqrt(n_components * (n_components - 1))
    delta = t * ANCHOR_MASS / (1.0 - (n_components - 1) * t)
    anchor_total = ANCHOR_MASS + (n_components - 1) * delta
    a = factors[u]
    rest = _normalize_columns(a[n_components:]) * (1.0 - anchor_total)
    block = np.full((n_components, n_components), delta)
    np.fill_diagonal(block, ANCHOR_MASS)
    factors[u] = _normalize_columns(np.vstack([block, rest]))
    return factors


def _check_weights_prior(weights_prior, n_components: int):
    """Return the prior's name, or the weights themselves as a float array."""
    if isinstance(weights_prior, str):
        return check_choice(
            weights_prior, "weights_prior", _WEIGHTS_PRIORS, "make_latent_class"
        )
    need = f"a prior's name or {n_components} weights"
    w = float_array(weights_prior, "weights_prior", "make_latent_class", need)
    if w.shape != (n_components,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise DataValidationError(
            "'weights_prior' must be one of "
            f"{', '.join(repr(c) for c in _WEIGHTS_PRIORS)} or {n_components} non-negative "
            f"weights (one per class, n_components={n_components}); got {weights_prior!r}."
        )
    if abs(w.sum() - 1.0) > 1e-8:
        raise DataValidationError(
            "The weights given as 'weights_prior' must sum to one; they sum to "
            f"{w.sum():.6g}."
        )
    return w


def _draw_weights(rng, prior, n_components: int) -> np.ndarray:
    if not isinstance(prior, str):
        return prior.copy()
    if prior == "uniform":  # Uniform(0, 1) entries, normalized (gen_PMF_factors.m)
        w = rng.random(n_components)
        return w / w.sum()
    if prior == "dirichlet":
        return rng.dirichlet(np.ones(n_components))
    return np.full(n_components, 1.0 / n_components)


def _sample_categorical_columns(rng, cdfs, classes, n_samples) -> np.ndarray:
    """Inverse-CDF sampling of every variable given the class of every row.

    ``cdfs[n]`` is the (I_n, F) cumulative factor. Rows are grouped by class once, then
    each (variable, class) pair is one vectorized ``searchsorted``: no loop over rows.
    """
    u = rng.random((n_samples, len(cdfs)))
    codes = np.empty((n_samples, len(cdfs)), dtype=np.int64)
    order = np.argsort(classes, kind="stable")
    bounds = np.concatenate(
        [[0], np.cumsum(np.bincount(classes, minlength=cdfs[0].shape[1]))]
    )
    for n, cdf in enumerate(cdfs):
        for f in range(cdf.shape[1]):
            rows = order[bounds[f] : bounds[f + 1]]
            # side="right": category i is drawn when cdf[i-1] <= u < cdf[i], so an entry
            # of probability 0 is never drawn; cdf[-1] == 1 > u keeps codes < I_n.
            codes[rows, n] = np.searchsorted(cdf[:, f], u[rows, n], side="right")
    return codes


def _cumulative(a: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(a, axis=0)
    cdf[-1] = 1.0  # exact, whatever the rounding of the column sum
    return cdf


def make_latent_class(
    n_samples: int,
    n_categories: int | Sequence[int],
    n_components: int,
    observed_prob: float | Sequence[float] = 1.0,
    *,
    n_variables: int | None = None,
    factor_prior: str = "uniform",
    weights_prior: str | Sequence[float] | None = None,
    epsilon: float | None = None,
    split: int | None = None,
    drop_empty_rows: bool = False,
    random_state=None,
) -> tuple[CategoricalData, LatentClassTruth]:
    r"""Draw partially observed categorical data from a random latent-class PMF.

    Parameters
    ----------
    n_samples : int
        Number of rows ``S`` drawn.
    n_categories : int or sequence of int
        Alphabet size ``I_n`` of each variable: one int shared by ``n_variables``
        variables, or one int per variable.
    n_components : int
        Number of latent classes ``F``.
    observed_prob : float or sequence of float, default 1.0
        Probability that an entry is observed, in (0, 1]; one value for all variables
        or one per variable. Each entry is hidden independently (code ``-1``).
    n_variables : int, optional
        Number of variables ``N``; required when ``n_categories`` is an int.
    factor_prior : {"uniform", "dirichlet", "row-dirichlet", "separable"}, default "uniform"
        How the factors :math:`A_n` are drawn (see Notes).
    weights_prior : {"uniform", "dirichlet", "equal"} or array_like of shape (F,), optional
        How :math:`\lambda` is drawn, or the weights themselves. Defaults to
        ``factor_prior`` ("uniform" or "dirichlet"), and to ``"equal"``
        (:math:`\lambda_f = 1/F`) for ``"row-dirichlet"`` and ``"separable"``, as the
        CNMF experiments do.
    epsilon : float, optional
        Separability level of the ``"separable"`` generator, in
        ``[0, (1 - 0.4) * sqrt(F / (F - 1)))``; default 0.1. Only for that generator.
    split : int, optional
        ``M``: the split ``S1 = {0, ..., M-1}``, ``S2 = {M, ..., N-1}`` of the variables
        for the ``"separable"`` generator, in ``[1, N-1]``; default ``ceil(N / 2)``
        (``M = 3`` for ``N = 5``, as in Sec. 5.2). Only for that generator.
    drop_empty_rows : bool, default False
        Rows whose entries all end up missing are kept by default: they carry no
        information but are legal data (their likelihood is 1, and EM ignores them),
        and keeping them keeps ``n_samples`` rows. With ``True`` they are removed from
        the data and from ``truth.classes`` (useful before ``az.loo``, which returns
        nan for such rows).
    random_state : None, int or numpy.random.Generator
        Seed of all draws.

    Returns
    -------
    data : CategoricalData
        Integer codes, ``-1`` for missing, with ``n_categories`` set from the input.
    truth : LatentClassTruth
        ``weights`` (F,), ``factors`` (list of (I_n, F)), ``classes`` (S,).

    Raises
    ------
    DataValidationError
        Inconsistent ``n_categories`` / ``n_variables``, an unknown prior (with a
        "did you mean" hint), ``epsilon`` or ``split`` given for a generator other than
        ``"separable"``, or a separable construction that cannot be built.
    ValueError
        A count or probability outside its range.

    Notes
    -----
    The model is Ibrahim & Fu, eq. (3): :math:`\Pr(x_1..x_N) = \sum_f \lambda_f
    \prod_n A_n(x_n, f)`. Draws happen in this order: weights, factors, classes
    (inverse CDF of :math:`\lambda`), categories (inverse CDF of the per-class
    cumulative column of each :math:`A_n`, vectorized over rows), observation mask.

    Factor generators:

    ``"uniform"``
        Entries Uniform(0, 1), columns rescaled to sum to one (Ibrahim & Fu, Sec. 5.2;
        Chege et al., Sec. V-A; ``gen_PMF_factors.m`` of the CNMF code).
    ``"dirichlet"``
        Each column ~ Dirichlet(1, ..., 1), i.e. uniform on the simplex.
    ``"row-dirichlet"``
        Every *row* of :math:`A_n` drawn uniformly from the (F-1)-simplex
        (Dirichlet(1, ..., 1) over the classes), then the columns rescaled to sum to one
        (Assumption 1, Sec. 4.3). Although Sec. 5.2 describes uniform entries, this is
        the generator of the authors' code for the experiments of Tables 4-5
        (``gen_PMF_factors_dirich.m``, called by ``main_synthetic1.m``), with
        :math:`\lambda_f = 1/F`. Its columns are less alike than those of
        ``"uniform"``, which the pairwise marginals tell apart much better.
    ``"separable"``
        The epsilon-separable construction of the CNMF experiments of Tables 1-3
        (Sec. 5.2: "we fix M = 3 and manually ensure the epsilon-separability
        condition on H in (3) by fixing epsilon"). The paper gives no formula; we
        follow its code (``gen_PMF_factors_dirich_with_sep.m``): every row of every
        :math:`A_n` is drawn uniformly from the simplex and the columns are rescaled
        (Assumption 1, Sec. 4.3); then one variable ``u`` of S2 is drawn at random and
        its first F rows are replaced by the anchor block
        :math:`\mu I_F + \delta (11^T - I_F)` with :math:`\mu = 0.4`, the other rows
        rescaled so each column keeps total mass :math:`1 - \mu - (F-1)\delta`.
        :math:`H = [A_{M+1}^T, \dots, A_N^T]^T` of the virtual NMF model (3) is then
        epsilon-separable in the sense of Definition 1 (Sec. 3.2), with the rows
        rescaled to unit :math:`\ell_1` norm as in Fig. 1:
        :math:`\|H(l_f,:)/\|H(l_f,:)\|_1 - e_f^T\|_2 = \varepsilon` exactly for the
        F anchor rows :math:`l_f`. Two deliberate differences from the code: ``delta``
        is computed from ``epsilon`` by
        :math:`t = \varepsilon / \sqrt{F(F-1)}`, :math:`\delta = t\mu / (1-(F-1)t)`
        (the code maps epsilon 0.1 / 0.2 / 0.3 to delta 0.0005 / 0.015 / 0.030 by a
        lookup table, which gives an actual separability of 0.0056 / 0.146 / 0.258),
        and the mass of the other rows uses ``F - 1`` where the code hard-codes 4
        (it only ran F = 5).

    References
    ----------
    S. Ibrahim, X. Fu, "Recovering joint probability of discrete random variables from
    pairwise marginals", Sec. 3.2 (Definition 1), Sec. 4.3 (Assumption 1), Sec. 5.2.
    J. K. Chege et al., "Efficient probability mass function estimation from partially
    observed data", Sec. V-A.

    Examples
    --------
    >>> data, truth = make_latent_class(
    ...     500, 4, n_components=3, n_variables=5, observed_prob=0.5, random_state=0
    ... )
    >>> data.shape, truth.weights.shape, [a.shape for a in truth.factors][:2]
    ((500, 5), (3,), [(4, 3), (4, 3)])
    >>> data, truth = make_latent_class(
    ...     100, [10] * 5, n_components=5, factor_prior="separable", epsilon=0.1,
    ...     random_state=0
    ... )
    >>> truth.weights
    array([0.2, 0.2, 0.2, 0.2, 0.2])
    """
    owner = "make_latent_class"
    n_samples = check_int(n_samples, "n_samples", owner=owner, low=1)
    n_cat = _check_n_categories(n_categories, n_variables)
    n_var = n_cat.size
    n_components = check_int(n_components, "n_components", owner=owner, low=1)
    p_obs = _check_observed_prob(observed_prob, n_var)
    factor_prior = check_choice(factor_prior, "factor_prior", _FACTOR_PRIORS, owner)
    if not isinstance(drop_empty_rows, bool | np.bool_):
        raise DataValidationError(
            f"'drop_empty_rows' must be True or False. Got {drop_empty_rows!r}."
        )
    if factor_prior == "separable":
        if n_components < 2:
            raise DataValidationError(
                "factor_prior='separable' needs n_components >= 2 (with one class every "
                "factor is trivially separable). Got n_components=1."
            )
        if n_var < 2:
            raise DataValidationError(
                "factor_prior='separable' splits the variables into S1 and S2 and needs "
                f"at least 2 variables. Got {n_var}."
            )
        eps_max = (1.0 - ANCHOR_MASS) * np.sqrt(n_components / (n_components - 1))
        epsilon = DEFAULT_EPSILON if epsilon is None else epsilon
        epsilon = check_float(epsilon, "epsilon", owner=owner, low=0.0)
        if epsilon >= eps_max:
            raise DataValidationError(
                f"'epsilon' must be below {eps_max:.4g} for n_components={n_components} "
                f"(the anchor "
                f"block would leave no mass for the other rows). Got {epsilon}."
            )
        split = (n_var + 1) // 2 if split is None else split
        split = check_int(split, "split", owner=owner, low=1, high=n_var - 1)
        s2 = np.arange(split, n_var)
        eligible = s2[n_cat[s2] > n_components]
        if eligible.size == 0:
            raise DataValidationError(
                "factor_prior='separable' puts the F anchor rows in one variable of "
                f"S2 = variables {s2.tolist()} (after split={split}), which needs more "
                f"than n_components={n_components} categories; their alphabet sizes are "
                f"{n_cat[s2].tolist()}. Lower 'split', lower 'n_components' or use larger "
                "alphabets."
            )
    else:
        for name, value in (("epsilon", epsilon), ("split", split)):
            if value is not None:
                raise DataValidationError(
                    f"'{name}' only applies to factor_prior='separable'; got "
                    f"{name}={value!r} with factor_prior={factor_prior!r}."
                )
    if weights_prior is None:
        equal = factor_prior in ("separable", "row-dirichlet")
        weights_prior = "equal" if equal else factor_prior
    weights_prior = _check_weights_prior(weights_prior, n_components)

    rng = check_random_state(random_state)
    weights = _draw_weights(rng, weights_prior, n_components)
    if factor_prior == "separable":
        factors = _separable_factors(rng, n_cat, n_components, epsilon, eligible)
    else:
        draw = {
            "uniform": _uniform_factor,
            "dirichlet": _dirichlet_factor,
            "row-dirichlet": _assumption1_factor,
        }[factor_prior]
        factors = [draw(rng, int(k), n_components) for k in n_cat]

    class_cdf = np.cumsum(weights)
    class_cdf[-1] = 1.0
    classes = np.searchsorted(class_cdf, rng.random(n_samples), side="right")
    classes = classes.astype(np.int64)
    codes = _sample_categorical_columns(
        rng, [_cumulative(a) for a in factors], classes, n_samples
    )
    if np.any(p_obs < 1.0):
        codes[rng.random(codes.shape) >= p_obs[None, :]] = MISSING
    if drop_empty_rows:
        keep = (codes != MISSING).any(axis=1)
        codes, classes = codes[keep], classes[keep]
        if codes.shape[0] == 0:
            raise DataValidationError(
                "Every row is empty after drop_empty_rows=True; raise 'observed_prob' "
                "or 'n_samples'."
            )
    data = CategoricalData.from_codes(codes, n_categories=n_cat)
    return data, LatentClassTruth(weights, factors, classes)


# --------------------------------------------------------------------------------------
# Dirichlet simplex nest


def _vertices_gaussian(rng, n_components: int, n_features: int, eta: float) -> np.ndarray:
    # beta_k ~ N(0, K I_D) (Supplement B; the VLAD code draws sd = sqrt(K)).
    return rng.normal(0.0, np.sqrt(n_components), size=(n_components, n_features))


def _vertices_poisson(rng, n_components: int, n_features: int, eta: float) -> np.ndarray:
    # beta_k ~ Gamma(shape 1, scale K) entrywise (Supplement B "Gamma(1, K 1)"), so
    # every vertex is positive and a Poisson mean; mean entry K.
    return rng.gamma(1.0, float(n_components), size=(n_components, n_features))


def _vertices_multinomial(
    rng, n_components: int, n_features: int, eta: float
) -> np.ndarray:
    # Topics beta_k ~ Dir_D(eta) on the probability simplex (Supplement B, LDA).
    return rng.dirichlet(np.full(n_features, eta), size=n_components)


def _sample_gaussian(rng, mean, sigma, words):
    return mean + sigma * rng.standard_normal(mean.shape)


def _sample_poisson(rng, mean, sigma, words):
    return rng.poisson(mean).astype(np.int64)


def _sample_multinomial(rng, mean, sigma, words):
    p = mean / mean.sum(axis=1, keepdims=True)  # guard against rounding above 1
    return rng.multinomial(words, p).astype(np.int64)


#: kernel -> (vertex generator, data sampler); one entry per DSN probability kernel.
_DSN_KERNELS = {
    "gaussian": (_vertices_gaussian, _sample_gaussian),
    "poisson": (_vertices_poisson, _sample_poisson),
    "multinomial": (_vertices_multinomial, _sample_multinomial),
}


def _check_alpha(alpha, n_components: int):
    owner = "make_simplex_nest"
    if np.ndim(alpha) == 0:
        a = check_float(alpha, "alpha", owner=owner, low=0.0, low_open=True)
        return a, np.full(n_components, a)
    a = np.array(alpha, dtype=float)
    if a.shape != (n_components,):
        raise DataValidationError(
            f"'alpha' must be a positive float or one positive value per vertex "
            f"(n_components={n_components}); got shape {a.shape}."
        )
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise DataValidationError(f"Every entry of 'alpha' must be > 0; got {a.tolist()}.")
    return a, a


def _check_words(words_per_doc, n_samples: int):
    if np.ndim(words_per_doc) == 0:
        return check_int(words_per_doc, "words_per_doc", owner="make_simplex_nest", low=1)
    w = np.asarray(words_per_doc)
    if w.shape != (n_samples,) or w.dtype.kind not in "iu" or np.any(w < 1):
        raise DataValidationError(
            "'words_per_doc' must be a positive int or one positive int per document "
            f"(n_samples={n_samples}); got {words_per_doc!r}."
        )
    return w.astype(np.int64)


def make_simplex_nest(
    n_samples: int,
    n_features: int,
    n_components: int,
    alpha: float | Sequence[float] = 1.0,
    kernel: str = "gaussian",
    *,
    sigma: float | None = None,
    words_per_doc: int | Sequence[int] | None = None,
    c_min: float = DEFAULT_C_MIN,
    eta: float = DEFAULT_ETA,
    random_state=None,
) -> tuple[np.ndarray, SimplexNestTruth]:
    r"""Draw data from a Dirichlet Simplex Nest with random, skewed vertices.

    Parameters
    ----------
    n_samples : int
        Number of data points ``n``.
    n_features : int
        Ambient dimension ``D`` (vocabulary size for the multinomial kernel).
    n_components : int
        Number of vertices ``K``, with ``2 <= K <= D + 1`` (``K <= D`` for the
        multinomial kernel, whose vertices lie on the ``(D-1)``-simplex).
    alpha : float or array_like of shape (K,), default 1.0
        Dirichlet concentration of :math:`\theta_i \sim \mathrm{Dir}_K(\alpha)`.
    kernel : {"gaussian", "poisson", "multinomial"}, default "gaussian"
        Probability kernel :math:`F(\cdot \mid \mu_i)`.
    sigma : float, optional
        Noise standard deviation of the Gaussian kernel (>= 0, 0 is noiseless);
        default 1.0 as in Supplement B. Only for ``kernel="gaussian"``.
    words_per_doc : int or array_like of int, optional
        Words per document ``n_i`` of the multinomial kernel (one int, or one per
        document); default 3000 as in Supplement B. Only for ``kernel="multinomial"``.
    c_min : float in [0, 1], default 0.5
        Lower end of the shrinkage factors :math:`c_k \sim U(c_{min}, 1)`.
    eta : float, default 0.1
        Dirichlet parameter of the topics (multinomial kernel only; ignored otherwise).
    random_state : None, int or numpy.random.Generator
        Seed of all draws.

    Returns
    -------
    X : ndarray, shape (n_samples, n_features)
        float64 for the Gaussian kernel, int64 counts for Poisson and multinomial.
    truth : SimplexNestTruth
        ``vertices`` (K, D), ``theta`` (n, K), ``alpha``, ``kernel``, and ``sigma``
        (Gaussian) or ``words_per_doc`` (multinomial).

    Raises
    ------
    DataValidationError
        ``K < 2``, ``K > D + 1`` (or ``K > D`` for multinomial), an unknown kernel
        (with a "did you mean" hint), a bad ``alpha`` vector, or ``sigma`` /
        ``words_per_doc`` given for a kernel that does not use it.
    ValueError
        A count or scalar outside its range.

    Notes
    -----
    The DSN (Yurochkin et al., Sec. 2): :math:`\theta_i \sim \mathrm{Dir}_K(\alpha)`,
    :math:`\mu_i = \sum_k \theta_{ik} \beta_k`, :math:`x_i \mid \mu_i \sim
    F(\cdot \mid \mu_i)` with :math:`E[x_i \mid \theta_i] = \mu_i`.

    Vertices follow Supplement B ("Data generation for simulation studies"):
    Gaussian :math:`\beta_k \sim N(0, K I_D)`; Poisson :math:`\beta_{kd} \sim
    \mathrm{Gamma}(1, K)` (shape 1, scale K: the paper writes Gamma(1, K1), we read
    the second argument as a scale), so vertices are positive; multinomial (LDA)
    :math:`\beta_k \sim \mathrm{Dir}_D(\eta)`. They are then shrunk toward their
    mean :math:`C = \frac1K \sum_k \beta_k` by :math:`\beta_k \leftarrow C + c_k
    (\beta_k - C)`, :math:`c_k \sim U(c_{min}, 1)`. Each shrunk vertex is a convex
    combination of the originals, so Poisson vertices stay positive and topics stay
    on the simplex. (The public VLAD code instead multiplies each vertex by
    :math:`c_k`, i.e. shrinks toward the origin; we follow the paper.)

    Kernels: Gaussian :math:`x_i = \mu_i + N(0, \sigma^2 I_D)`; Poisson
    :math:`x_{id} \sim \mathrm{Poisson}(\mu_{id})`; multinomial
    :math:`x_i \sim \mathrm{Mult}(n_i, \mu_i)` (word counts of document i).

    Draw order: vertices, shrinkage factors, theta, data.

    References
    ----------
    M. Yurochkin, A. Guha, Y. Sun, X. Nguyen, "Dirichlet Simplex Nest and Geometric
    Inference", ICML 2019, Sec. 2 and Supplement B.

    Examples
    --------
    >>> X, truth = make_simplex_nest(200, 10, 3, alpha=2.5, sigma=0.1, random_state=0)
    >>> X.shape, truth.vertices.shape, truth.theta.shape
    ((200, 10), (3, 10), (200, 3))
    >>> X, truth = make_simplex_nest(
    ...     5, 50, 4, kernel="multinomial", words_per_doc=100, random_state=0
    ... )
    >>> X.sum(axis=1)
    array([100, 100, 100, 100, 100])
    """
    owner = "make_simplex_nest"
    kernel = check_choice(kernel, "kernel", _KERNELS, owner)
    n_samples = check_int(n_samples, "n_samples", owner=owner, low=1)
    n_features = check_int(n_features, "n_features", owner=owner, low=1)
    n_components = check_int(n_components, "n_components", owner=owner)
    if n_components < 2:
        raise DataValidationError(
            f"'n_components' of {owner} must be >= 2: a simplex nest needs at least two "
            f"vertices. Got {n_components}."
        )
    if kernel == "multinomial" and n_components > n_features:
        raise DataValidationError(
            f"'n_components' ({n_components}) must be <= 'n_features' ({n_features}) for "
            "kernel='multinomial': the topics lie on the (D-1)-dimensional probability "
            "simplex, which holds at most D affinely independent points."
        )
    if n_components > n_features + 1:
        raise DataValidationError(
            f"'n_components' ({n_components}) must be <= n_features + 1 "
            f"({n_features + 1}): K points span a (K-1)-simplex only in dimension "
            "D >= K - 1. Lower 'n_components' or raise 'n_features'."
        )
    alpha_out, alpha_vec = _check_alpha(alpha, n_components)
    c_min = check_float(c_min, "c_min", owner=owner, low=0.0, high=1.0)
    for name, value, used_by in (
        ("sigma", sigma, "gaussian"),
        ("words_per_doc", words_per_doc, "multinomial"),
    ):
        if value is not None and kernel != used_by:
            raise DataValidationError(
                f"'{name}' only applies to kernel={used_by!r}; got {name}={value!r} "
                f"with kernel={kernel!r}."
            )
    if kernel == "gaussian":
        sigma = check_float(
            DEFAULT_SIGMA if sigma is None else sigma, "sigma", owner=owner, low=0.0
        )
    if kernel == "multinomial":
        words_per_doc = _check_words(
            DEFAULT_WORDS_PER_DOC if words_per_doc is None else words_per_doc, n_samples
        )
        eta = check_float(eta, "eta", owner=owner, low=0.0, low_open=True)

    rng = check_random_state(random_state)
    draw_vertices, sample = _DSN_KERNELS[kernel]
    vertices = draw_vertices(rng, n_components, n_features, eta)
    shrink = rng.uniform(c_min, 1.0, size=n_components)
    center = vertices.mean(axis=0)
    vertices = center + shrink[:, None] * (vertices - center)
    theta = rng.dirichlet(alpha_vec, size=n_samples)
    X = sample(rng, theta @ vertices, sigma, words_per_doc)
    truth = SimplexNestTruth(vertices, theta, alpha_out, kernel, sigma, words_per_doc)
    return X, truth
