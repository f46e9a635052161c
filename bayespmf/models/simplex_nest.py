r"""The Dirichlet simplex nest as a PyMC model, sampled from a VLAD start and aligned.

:func:`simplex_nest_model` builds the DSN of Yurochkin et al. (ICML 2019, Sec. 2) with
Gaussian, Poisson or multinomial kernel. As a family of :func:`bayespmf.models.sample`
(:data:`SIMPLEX_NEST`) it runs NUTS or ADVI from the VLAD estimate (jittered per chain:
:func:`bayespmf.models.initvals`), and :func:`bayespmf.models.align_labels` undoes vertex
label switching draw by draw (Hungarian matching to a pivot).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import sparse
from scipy.special import gammaln

from bayespmf._validation import (
    DataValidationError,
    check_float,
)
from bayespmf.models._alignment import apply_permutations, hungarian_permutations
from bayespmf.models._families import Family
from bayespmf.models._start import INIT_CLIP, clip_simplex, jitter_simplex

__all__ = [
    "is_simplex_nest_model",
    "simplex_nest_model",
]

#: Prior sd of a Gaussian vertex coordinate, in units of that feature's data sd: VLAD
#: extends centroids by gamma(alpha) ~ 2-10 data sds for alpha in [0.5, 5] (Alg. 2),
#: so 5 sds leave the vertices free while keeping the prior proper.
VERTEX_PRIOR_SCALE = 5.0

#: Prior sd of log Poisson rates around the log of the feature means (a factor of
#: e^2 ~ 7 either way at two sds).
LOG_RATE_PRIOR_SD = 1.0

#: Concentration of the Dirichlet prior of a topic (multinomial kernel): 1 is uniform
#: on the vocabulary simplex; values below 1 put infinite density on the faces, which
#: NUTS handles badly.
TOPIC_CONCENTRATION = 1.0

#: Prior of alpha when it is not given: LogNormal(0, 1.5), median 1, 95% in
#: [0.05, 19] -- the range of the paper's experiments (alpha in [0.05, 10]).
ALPHA_PRIOR_SIGMA = 1.5


def is_simplex_nest_model(model) -> bool:
    """Whether ``model`` was built by :func:`simplex_nest_model`."""
    return hasattr(model, "_bayespmf_simplex_nest")


def _model_info(model) -> dict:
    try:
        return model._bayespmf_simplex_nest
    except AttributeError as err:
        raise DataValidationError(
            "'model' must be built by bayespmf.models.simplex_nest_model."
        ) from err


def simplex_nest_model(
    X,
    n_components: int,
    kernel: str = "gaussian",
    alpha=None,
    *,
    topic_concentration: float = TOPIC_CONCENTRATION,
    coords: dict | None = None,
) -> pm.Model:
    r"""PyMC model of a Dirichlet simplex nest.

    .. math::

        \theta_i \sim \mathrm{Dir}_K(\alpha 1_K), \quad
        \mu_i = B^T\theta_i, \quad
        x_i \mid \mu_i \sim N(\mu_i, \sigma^2 I_D),\ \mathrm{Poisson}(\mu_i)
        \ \text{or}\ \mathrm{Mult}(N_i, \mu_i).

    Parameters
    ----------
    X : array_like (n, D)
        Real data (Gaussian) or counts (Poisson, multinomial; row sums are the document
        lengths ``N_i``). With the multinomial kernel ``X`` may be a SciPy sparse
        document-term matrix: the likelihood is then summed over the nonzero counts
        only (the observed ``x`` has dims ``entry``, one per nonzero, whose coordinate
        is its row) and equals the dense model's.
    n_components : int
        ``K``.
    kernel : {"gaussian", "poisson", "multinomial"}, default "gaussian"
    alpha : float, array_like of shape (K,), "vector" or None, default None
        Fixed Dirichlet concentration: one number (symmetric,
        :math:`\mathrm{Dir}_K(\alpha 1_K)`) or one per vertex (asymmetric,
        :math:`\mathrm{Dir}_K(\alpha)`). When None, :math:`\alpha \sim
        \mathrm{LogNormal}(0, 1.5)` (symmetric, one free number); ``"vector"``
        gives every vertex its own :math:`\alpha_k \sim \mathrm{LogNormal}(0, 1.5)`
        (a hyperprior on a non-symmetric Dirichlet, Yurochkin et al. App. C; dims
        ``vertex``, started from VLAD's vector estimate).
    topic_concentration : float, default 1.0
        Dirichlet prior concentration of each topic (multinomial kernel only: another
        value with another kernel is refused).
    coords : dict, optional
        Extra or replacement coordinates (e.g. feature names for ``"feature"``).

    Returns
    -------
    pymc.Model
        Variables ``vertices`` (dims ``vertex, feature``), ``theta`` (``obs, vertex``),
        ``alpha`` (if not fixed), ``sigma`` (Gaussian) and the observed ``x``
        (``obs, feature``).

    Raises
    ------
    DataValidationError
        Malformed data or ``n_components`` (as for
        :class:`~bayespmf.estimators.simplex.VLAD`), or ``topic_concentration``
        with a kernel other than ``"multinomial"``.

    Notes
    -----
    Priors, data-scaled: Gaussian vertices :math:`\beta_{kd} \sim N(\bar x_d,
    (5 s_d)^2)` with :math:`s_d` the feature's sd, :math:`\sigma \sim
    \mathrm{HalfNormal}(\mathrm{sd}(X))`; Poisson rates :math:`\log\beta_{kd} \sim
    N(\log \bar x_d, 1)`; topics :math:`\beta_k \sim \mathrm{Dir}_D(1)`. The
    multinomial kernel is LDA with every word's topic label summed out:
    :math:`x_i \sim \mathrm{Mult}(N_i, \sum_k \theta_{ik}\beta_k)` (Sec. 2, "Relation
    to existing models"). All rows are one vectorized likelihood term,
    :math:`\mu = \Theta B`.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(20, 4))
    >>> model = simplex_nest_model(X, 3)
    >>> model.named_vars_to_dims["vertices"], model.named_vars_to_dims["theta"]
    (('vertex', 'feature'), ('obs', 'vertex'))
    """
    from bayespmf.fit.simplex import check_alpha, check_nest_data

    owner = "simplex_nest_model"
    arr, K = check_nest_data(X, n_components, kernel, owner)  # checks 'kernel' first
    kernel = kernel.lower()
    vector_prior = isinstance(alpha, str)
    if vector_prior and alpha.lower() != "vector":
        raise DataValidationError(
            f"'alpha' of {owner} must be a number, one number per vertex, 'vector' (a "
            f"free alpha per vertex) or None (one free symmetric alpha); got {alpha!r}."
        )
    if vector_prior:
        alpha = None
    elif alpha is not None:
        alpha = check_alpha(alpha, K, owner)
    topic_concentration = check_float(
        topic_concentration, "topic_concentration", owner=owner, low=0.0, low_open=True
    )
    if kernel != "multinomial" and topic_concentration != TOPIC_CONCENTRATION:
        raise DataValidationError(
            f"The 'topic_concentration' parameter of {owner} applies to "
            f"kernel='multinomial' only (the topics' prior); got "
            f"topic_concentration={topic_concentration} with kernel={kernel!r}. Drop it."
        )
    if sparse.issparse(arr) and kernel != "multinomial":
        raise DataValidationError(
            f"'X' of {owner} is a sparse {type(X).__name__}; sparse input is supported "
            f"with kernel='multinomial' (a document-term matrix), not {kernel!r}. Pass "
            "X.toarray()."
        )
    n, D = arr.shape
    model_coords = {"vertex": np.arange(K), "feature": np.arange(D), "obs": np.arange(n)}
    if sparse.issparse(arr):
        # one likelihood term per nonzero count; its coordinate is the row it is in
        model_coords["entry"] = np.repeat(np.arange(n), np.diff(arr.indptr))
    if coords:
        model_coords.update(coords)
    with pm.Model(coords=model_coords) as model:
        if vector_prior:
            a = pm.LogNormal("alpha", mu=0.0, sigma=ALPHA_PRIOR_SIGMA, dims="vertex")
        elif alpha is None:
            a = pm.LogNormal("alpha", mu=0.0, sigma=ALPHA_PRIOR_SIGMA)
        else:
            a = alpha
        theta = pm.Dirichlet("theta", a=a * pt.ones((n, K)), dims=("obs", "vertex"))
        if kernel == "gaussian":
            sd = arr.std(axis=0)
            sd = np.where(sd > 0, sd, 1.0)
            B = pm.Normal(
                "vertices",
                mu=np.broadcast_to(arr.mean(axis=0), (K, D)),
                sigma=np.broadcast_to(VERTEX_PRIOR_SCALE * sd, (K, D)),
                dims=("vertex", "feature"),
            )
            sigma = pm.HalfNormal("sigma", sigma=float(arr.std()) or 1.0)
            pm.Normal(
                "x", mu=pt.dot(theta, B), sigma=sigma, observed=arr, dims=("obs", "feature")
            )
        elif kernel == "poisson":
            mean = arr.mean(axis=0)
            floor = 1e-3 * max(float(mean.max()), 1e-3)
            B = pm.LogNormal(
                "vertices",
                mu=np.broadcast_to(np.log(np.maximum(mean, floor)), (K, D)),
                sigma=LOG_RATE_PRIOR_SD,
                dims=("vertex", "feature"),
            )
            pm.Poisson("x", mu=pt.dot(theta, B), observed=arr, dims=("obs", "feature"))
        else:
            B = pm.Dirichlet(
                "vertices",
                a=np.full((K, D), topic_concentration),
                dims=("vertex", "feature"),
            )
            if sparse.issparse(arr):
                _sparse_multinomial(arr, theta, B)
            else:
                lengths = arr.sum(axis=1).astype(np.int64)
                pm.Multinomial(
                    "x",
                    n=lengths,
                    p=pt.dot(theta, B),
                    observed=arr.astype(np.int64),
                    dims=("obs", "feature"),
                )
    model._bayespmf_simplex_nest = {
        "X": arr,
        "kernel": kernel,
        "n_components": K,
        "alpha": alpha,
        "alpha_prior": "vector" if vector_prior else "symmetric",
    }
    return model


def _sparse_multinomial_logp(value, p, const):
    """Log-probability of each nonzero count (see :func:`_sparse_multinomial`)."""
    return value * pt.log(p) - pt.gammaln(value + 1.0) + const


def _sparse_multinomial(arr, theta, B):
    r"""The multinomial likelihood of a sparse document-term matrix, nonzeros only.

    :math:`\log \mathrm{Mult}(x_i \mid N_i, p_i) = \log N_i! + \sum_{d: x_{id} > 0}
    (x_{id} \log p_{id} - \log x_{id}!)`: the zero counts add nothing, so the
    observed ``x`` is the vector of nonzero counts (dims ``entry``, whose coordinate
    is the row) and :math:`p_{id} = \theta_i \cdot \beta_{\cdot d}` is formed for
    them alone; :math:`\log N_i!` is added to each row's first entry, so the sum
    over the entries equals the dense model's log-likelihood.
    """
    rows = np.repeat(np.arange(arr.shape[0]), np.diff(arr.indptr))
    cols = arr.indices
    counts = arr.data.astype(np.int64)
    const = np.zeros(counts.size)
    const[arr.indptr[:-1]] = gammaln(np.asarray(arr.sum(axis=1)).ravel() + 1.0)
    p = pt.sum(theta[rows] * B.T[cols], axis=1)
    pm.CustomDist(
        "x",
        p,
        pt.as_tensor_variable(const),
        logp=_sparse_multinomial_logp,
        observed=counts,
        dims=("entry",),
    )


def _point_of(init, info: dict, random_seed) -> dict:
    """``vertices``, ``theta`` and (if known) ``alpha``/``sigma`` of a start."""
    from bayespmf.estimators.simplex import VLAD

    X, K, kernel = info["X"], info["n_components"], info["kernel"]
    if init is None:
        init = VLAD(K, kernel, alpha=info["alpha"], random_state=random_seed).fit(X)
    if hasattr(init, "vertices_"):
        point = {"vertices": init.vertices_, "theta": init.transform(X)}
        if getattr(init, "alpha_", None) is not None:
            if info.get("alpha_prior") == "vector":  # one start per vertex
                point["alpha"] = np.broadcast_to(
                    np.asarray(init.alpha_, dtype=float), (K,)
                ).copy()
            else:
                # a scalar start for the free (symmetric) alpha, also when VLAD fell
                # back to a vector alpha
                point["alpha"] = float(np.mean(init.alpha_))
        if getattr(init, "sigma_", None):
            point["sigma"] = init.sigma_
    elif isinstance(init, dict) and "vertices" in init:
        point = dict(init)
        if "theta" not in point:
            from bayespmf.kernels.vlad_geometry import barycentric_weights, preprocess

            point["theta"] = barycentric_weights(
                preprocess(X, kernel)[0], np.asarray(point["vertices"], dtype=float)
            )[0]
    else:
        raise DataValidationError(
            "'init' must be None (fit VLAD), a fitted VLAD/GDM/SimplexSPA or a dict with "
            f"'vertices' (K, D) and optionally 'theta' (n, K); got {type(init).__name__}."
        )
    V = np.asarray(point["vertices"], dtype=float)
    if V.shape != (K, X.shape[1]):
        raise DataValidationError(
            f"'init' vertices have shape {V.shape}; the model needs ({K}, {X.shape[1]})."
        )
    th = np.asarray(point["theta"], dtype=float)
    if th.shape != (X.shape[0], K):
        raise DataValidationError(
            f"'init' theta has shape {th.shape}; the model needs ({X.shape[0]}, {K})."
        )
    point["vertices"], point["theta"] = V, th
    return point


def _initvals(model, init, chains, jitter, rng) -> list[dict]:
    """The simplex nest's start builder (:func:`bayespmf.models.initvals`).

    ``init``: a fitted VLAD (or GDM/SimplexSPA) or a dict with ``vertices`` (K, D)
    and optionally ``theta`` (n, K), ``alpha``, ``sigma``. The jitter is
    multiplicative (log scale) for simplex and positive values, in units of the
    feature's data sd for Gaussian vertices. Simplex values are clipped away from 0
    (``INIT_CLIP``) and renormalized; Poisson rates are floored at ``INIT_CLIP`` times
    their mean. Keys ``vertices``, ``theta`` and, when free in the model,
    ``alpha``/``sigma``.
    """
    info = _model_info(model)
    point = _point_of(init, info, None)
    X, kernel, K = info["X"], info["kernel"], info["n_components"]
    V, theta = point["vertices"], clip_simplex(point["theta"], 1)
    if kernel == "multinomial":
        V = clip_simplex(V, 1)
    elif kernel == "poisson":
        V = np.maximum(V, INIT_CLIP * max(float(X.mean()), INIT_CLIP))
    free = {v.name for v in model.free_RVs}
    sd = X.std(axis=0) if kernel == "gaussian" else None
    out = []
    for _ in range(chains):

        def z(shape):
            return rng.standard_normal(shape) * jitter

        d = {"theta": jitter_simplex(theta, 1, jitter, rng)}
        if kernel == "gaussian":
            d["vertices"] = V + z(V.shape) * np.where(sd > 0, sd, 1.0)
        elif kernel == "poisson":
            d["vertices"] = V * np.exp(z(V.shape))
        else:
            d["vertices"] = jitter_simplex(V, 1, jitter, rng)
        if "alpha" in free:
            shape = (K,) if info.get("alpha_prior") == "vector" else ()
            a0 = np.broadcast_to(np.asarray(point.get("alpha", 1.0), dtype=float), shape)
            d["alpha"] = np.maximum(a0, INIT_CLIP) * np.exp(z(shape))
            if not shape:
                d["alpha"] = float(d["alpha"])
        if "sigma" in free:
            resid = float(point.get("sigma") or X.std())
            d["sigma"] = max(resid, 1e-6) * float(np.exp(z(())))
        out.append(d)
    return out


def _align(idata, reference, data, n_refine):
    """The simplex nest's label alignment (:func:`bayespmf.models.align_labels`).

    Each draw's vertices are matched to the reference's (an array (K, D) or a fitted
    estimator with ``vertices_``) and every posterior variable with a ``vertex``
    dimension is permuted; the permutations go to
    ``sample_stats["vertex_permutation"]``.
    """
    if data is not None:
        raise DataValidationError(
            "align_labels takes no 'data' for a simplex nest (its draws need none); "
            "drop it."
        )
    post = idata.posterior
    ref = getattr(reference, "vertices_", reference)
    ref = np.asarray(ref, dtype=float)
    draws = post["vertices"].transpose("chain", "draw", "vertex", ...).values
    c, d, K = draws.shape[:3]
    flat = draws.reshape(c * d, K, -1)
    if ref.shape != flat.shape[1:]:
        raise DataValidationError(
            f"'reference' has shape {ref.shape}; the posterior vertices have "
            f"shape {flat.shape[1:]} (K, D)."
        )
    perms = hungarian_permutations(flat, ref, n_refine=n_refine).reshape(c, d, K)
    return apply_permutations(idata, perms, "vertex", "vertex_permutation")


def _point(model, init, random_seed):
    return _point_of(init, _model_info(model), random_seed)


def _finish(idata, model, point, starts, align, random_seed):
    return _align(idata, point["vertices"], None, 2) if align else idata


def _loglik_rows(idata):
    """One log-likelihood per row (an observation is a row x_i, not one of its entries)."""
    group = idata["log_likelihood"].to_dataset()

    def per_row(v):
        if "entry" in v.dims:  # sparse counts: the entries of each row summed
            return v.groupby("entry").sum().rename(entry="obs")
        return v.sum([d for d in v.dims if d not in ("chain", "draw", "obs")])

    idata["log_likelihood"] = group.map(per_row)
    return idata


#: The Dirichlet simplex nest as a family of :func:`bayespmf.models.sample`.
SIMPLEX_NEST = Family(
    name="simplex_nest",
    detect=is_simplex_nest_model,
    methods=("nuts", "advi"),
    method_error="The 'method' parameter of {owner} must be 'nuts' or 'advi'",
    estimate=lambda model, random_seed: _point(model, None, random_seed),
    point=_point,
    initvals=_initvals,
    # the model is sampled as built (its data are not frozen)
    rewrite=lambda model, point, initvals, *_: (model, initvals, None),
    finish=_finish,
    drawn=lambda posterior: "vertices" in posterior,
    align=_align,
    loglik_rows=_loglik_rows,
)
