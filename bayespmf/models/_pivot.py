r"""The pivot-coordinate latent-class model as two fused numba Ops (compiled once).

:func:`bayespmf.models.sample` samples every simplex of a latent-class model as
log-ratios to a pivot entry (:class:`bayespmf.models.latent_class.PivotLogRatio`).
Written as PyMC value transforms, each variable brings its own transform, Jacobian,
Dirichlet density and their gradients into the compiled graph: on UCI Car at rank 4
that graph has 160 nodes, and PyTensor's numba backend compiles it as one function,
again for every new model (another rank, other data). :func:`fused_pivot_model`
builds the same density in the same coordinates with every simplex in one flat free
vector ``simplex_logratios`` and one Op (:class:`PivotLogSimplexes`, kernels in
:mod:`bayespmf.kernels.pivot_numba`) for all their log-probabilities and the prior,
followed by the class-summed likelihood Op: 17 nodes. The model's ``weights`` and
``A_<name>`` are deterministics of the same names and dims, so draws look as before.
"""

from __future__ import annotations

import numba
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from scipy.special import gammaln

from bayespmf.data import CategoricalData
from bayespmf.kernels.pivot_numba import pivot_log_simplexes, pivot_log_simplexes_grad
from bayespmf.models._binding import params_of
from bayespmf.models._names import OBSERVED_NAME, category_dim, factor_var_name
from bayespmf.models._rows import ClassSummedLoglik
from bayespmf.models.latent_class import PivotLogRatio
from bayespmf.pmf import offsets_of

__all__ = [
    "LOGRATIOS_NAME",
    "PivotLayout",
    "PivotLogSimplexes",
    "PivotLogSimplexesGrad",
    "drop_logratios",
    "fused_pivot_model",
    "logratio_initvals",
    "change_value_transforms",
    "pivot_model",
    "pivot_transforms",
    "pivots",
]

#: The free variable of :func:`fused_pivot_model` (dropped from the draws returned).
LOGRATIOS_NAME = "simplex_logratios"
_DENSITY_NAME = "simplex_log_density"

#: Salt of PyTensor's on-disk cache key for the numba kernels below (PyTensor keys them
#: by the Op's class and props only): bump it whenever their code changes.
NUMBA_CACHE_VERSION = 1

_LAYOUT_INPUTS = 6  # start, size, pivot, base, stride, alpha


class PivotLogSimplexes(Op):
    """Every simplex row's ``log x`` and the summed Dirichlet log-density (+ Jacobian).

    Inputs: ``theta`` (P,) the log-ratios, then the layout ``start``, ``size``,
    ``pivot``, ``base``, ``stride`` (int64, one entry per row) and ``alpha`` (float,
    one per output entry); see :mod:`bayespmf.kernels.pivot_numba`. Outputs: ``lp``
    (scalar, without the normalizing constants) and ``out`` (``alpha.size``,).
    """

    __props__ = ()

    def make_node(self, theta, start, size, pivot, base, stride, alpha):
        theta = pt.as_tensor_variable(theta, dtype="float64")
        layout = [pt.as_tensor_variable(a, dtype="int64") for a in (start, size, pivot)]
        layout += [pt.as_tensor_variable(a, dtype="int64") for a in (base, stride)]
        alpha = pt.as_tensor_variable(alpha, dtype="float64")
        if theta.ndim != 1 or alpha.ndim != 1 or any(a.ndim != 1 for a in layout):
            raise TypeError("PivotLogSimplexes takes vectors only.")
        out = pt.tensor(dtype="float64", shape=alpha.type.shape)
        return Apply(self, [theta, *layout, alpha], [pt.dscalar(), out])

    def perform(self, node, inputs, output_storage):
        lp, out = pivot_log_simplexes(*inputs)
        output_storage[0][0] = np.asarray(lp)
        output_storage[1][0] = out

    def infer_shape(self, node, shapes):
        return [(), shapes[-1]]

    def connection_pattern(self, node):
        return [[True, True]] + [[False, False]] * _LAYOUT_INPUTS

    def pullback(self, inputs, outputs, cotangents):
        g_lp, g_out = cotangents
        if isinstance(g_lp.type, DisconnectedType):
            g_lp = pt.constant(0.0, dtype="float64")
        if isinstance(g_out.type, DisconnectedType):
            g_out = outputs[1].zeros_like()
        grad = PivotLogSimplexesGrad()(*inputs, g_lp, g_out)
        return [grad] + [disconnected_type() for _ in range(_LAYOUT_INPUTS)]


class PivotLogSimplexesGrad(Op):
    """Gradient of ``g_lp * lp + g_out . out`` (:class:`PivotLogSimplexes`) in ``theta``."""

    __props__ = ()

    def make_node(self, theta, start, size, pivot, base, stride, alpha, g_lp, g_out):
        ins = [pt.as_tensor_variable(theta, dtype="float64")]
        ins += [pt.as_tensor_variable(a, dtype="int64") for a in (start, size, pivot)]
        ins += [pt.as_tensor_variable(a, dtype="int64") for a in (base, stride)]
        ins += [pt.as_tensor_variable(a, dtype="float64") for a in (alpha, g_lp, g_out)]
        return Apply(self, ins, [pt.tensor(dtype="float64", shape=theta.type.shape)])

    def perform(self, node, inputs, output_storage):
        *head, g_lp, g_out = inputs
        output_storage[0][0] = pivot_log_simplexes_grad(*head, float(g_lp), g_out)

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def connection_pattern(self, node):
        return [[True]] + [[False]] * _LAYOUT_INPUTS + [[True], [True]]

    def pullback(self, inputs, outputs, cotangents):
        raise NotImplementedError(
            "Second derivatives of PivotLogSimplexes are not implemented."
        )


def _numba_forward(op, node=None, **kwargs):
    def forward(theta, start, size, pivot, base, stride, alpha):  # pragma: no cover
        lp, out = pivot_log_simplexes(theta, start, size, pivot, base, stride, alpha)
        total = np.empty(())
        total[()] = lp
        return total, out

    return numba.njit(forward), NUMBA_CACHE_VERSION


def _numba_backward(op, node=None, **kwargs):
    def backward(
        theta, start, size, pivot, base, stride, alpha, g_lp, g_out
    ):  # pragma: no cover
        return pivot_log_simplexes_grad(
            theta, start, size, pivot, base, stride, alpha, g_lp[()], g_out
        )

    return numba.njit(backward), NUMBA_CACHE_VERSION


register_funcify_default_op_cache_key(PivotLogSimplexes)(_numba_forward)
register_funcify_default_op_cache_key(PivotLogSimplexesGrad)(_numba_backward)


class PivotLayout:
    """Where each simplex row of a rank-F latent-class model lives in ``theta``/``out``.

    Row 0 is the class weights (``out[:F]``); then, for variable ``n`` and class
    ``f``, the row ``A_n[f, :]``, whose entry ``i`` goes to the stacked
    ``log A`` matrix ``(sum I_n, F)`` at ``(offsets[n] + i, f)``, i.e.
    ``out[F + (offsets[n] + i) * F + f]``.

    Parameters
    ----------
    n_components : int
    n_categories : sequence of int
    weights_pivot : int
        Pivot entry of the weights.
    factor_pivots : sequence of array_like of int, each (F,)
        Pivot entry of each class's row of each ``A_n``.
    weights_alpha : array_like (F,)
    factor_alphas : sequence of array_like, each (F, I_n)
        The Dirichlet concentrations.
    """

    def __init__(
        self,
        n_components,
        n_categories,
        weights_pivot,
        factor_pivots,
        weights_alpha,
        factor_alphas,
    ):
        n_components = int(n_components)
        n_cat = [int(k) for k in n_categories]
        offsets = offsets_of(n_cat)
        start, size, pivot, base, stride = (
            [0],
            [n_components],
            [int(weights_pivot)],
            [0],
            [1],
        )
        n_out = n_components + int(offsets[-1]) * n_components
        alpha = np.empty(n_out)
        alpha[:n_components] = np.asarray(weights_alpha, dtype=float)
        const = gammaln(alpha[:n_components].sum()) - gammaln(alpha[:n_components]).sum()
        pos = n_components - 1
        for n, k in enumerate(n_cat):
            piv = np.asarray(factor_pivots[n], dtype=np.int64).reshape(n_components)
            a_n = np.broadcast_to(
                np.asarray(factor_alphas[n], dtype=float), (n_components, k)
            )
            for f in range(n_components):
                start.append(pos)
                size.append(k)
                pivot.append(int(piv[f]))
                base.append(n_components + int(offsets[n]) * n_components + f)
                stride.append(n_components)
                alpha[base[-1] + np.arange(k) * n_components] = a_n[f]
                const += gammaln(a_n[f].sum()) - gammaln(a_n[f]).sum()
                pos += k - 1
        self.n_components, self.n_categories, self.offsets = n_components, n_cat, offsets
        self.start, self.size, self.pivot = (
            np.asarray(v, dtype=np.int64) for v in (start, size, pivot)
        )
        self.base, self.stride = (np.asarray(v, dtype=np.int64) for v in (base, stride))
        self.alpha = alpha
        self.constant = float(const)
        self.n_free = pos

    def arrays(self):
        """The layout inputs of :class:`PivotLogSimplexes`, in order."""
        return self.start, self.size, self.pivot, self.base, self.stride, self.alpha

    def to_theta(self, weights, factors) -> np.ndarray:
        """Log-ratios of constrained values: ``weights`` (F,), ``factors`` (F, I_n) each.

        The inverse of the map :class:`PivotLogSimplexes` computes (entries must be
        positive).
        """
        theta = np.empty(self.n_free)
        rows = [np.asarray(weights, dtype=float)]
        for a in factors:
            rows.extend(np.asarray(a, dtype=float).reshape(self.n_components, -1))
        for r, x in enumerate(rows):
            log_x = np.log(x)
            free = np.delete(log_x - log_x[self.pivot[r]], self.pivot[r])
            theta[self.start[r] : self.start[r] + free.size] = free
        return theta


def _dirichlet_alpha(rv) -> np.ndarray | None:
    """The constant concentration of a Dirichlet variable, or None if it is not one."""
    if not isinstance(rv.owner.op, pm.Dirichlet.rv_type):
        return None
    try:
        return np.asarray(rv.owner.op.dist_params(rv.owner)[0].eval(), dtype=float)
    except Exception:  # a concentration that is not a constant (a hyperprior)
        return None


def fused_pivot_model(model, codes, weights_pivot, factor_pivots):
    """``model`` (from :func:`latent_class_model`) in fused pivot coordinates, or None.

    The returned model has one free vector :data:`LOGRATIOS_NAME`, one potential (the
    Dirichlet priors with their Jacobian, and the class-summed log-likelihood of
    ``codes``: the same log-density, constants included, as the model with
    :class:`~bayespmf.models.latent_class.PivotLogRatio` transforms at the same
    pivots), and deterministics ``weights`` and ``A_<name>`` with the model's names,
    dims and coordinates. Returns None when ``model`` is not a plain latent-class
    model (another variable, a potential, a prior that is not a constant Dirichlet):
    the caller then uses the transforms.
    """
    names = [str(v) for v in model.coords.get("variable", ())]
    wanted = ["weights"] + [factor_var_name(n) for n in names]
    free = [v.name for v in model.free_RVs]
    if (
        sorted(free) != sorted(wanted)
        or [v.name for v in model.observed_RVs] != [OBSERVED_NAME]
        or model.potentials
        or model.deterministics
    ):
        return None
    alphas = [_dirichlet_alpha(model[name]) for name in wanted]
    if any(a is None for a in alphas):
        return None
    n_components = len(model.coords["class"])
    n_cat = [len(model.coords[category_dim(n)]) for n in names]
    layout = PivotLayout(
        n_components, n_cat, weights_pivot, factor_pivots, alphas[0], alphas[1:]
    )
    coords = {k: v for k, v in model.coords.items()}
    stacked = int(layout.offsets[-1])
    with pm.Model(coords=coords) as fused:
        theta = pm.Flat(LOGRATIOS_NAME, shape=(layout.n_free,))
        lp, out = PivotLogSimplexes()(theta, *layout.arrays())
        log_w = out[:n_components]
        log_a = out[n_components:].reshape((stacked, n_components))
        loglik, _ = ClassSummedLoglik(n_cat)(
            pt.constant(np.asarray(codes, dtype=np.int64)), log_w, log_a
        )
        pm.Potential(_DENSITY_NAME, lp + layout.constant + loglik.sum())
        pm.Deterministic("weights", pt.exp(log_w), dims="class")
        for n, name in enumerate(names):
            block = log_a[layout.offsets[n] : layout.offsets[n + 1]]
            pm.Deterministic(
                factor_var_name(name), pt.exp(block.T), dims=("class", category_dim(name))
            )
    fused.bayespmf_pivot_layout = layout
    return fused


def logratio_initvals(fused, initvals):
    """Constrained starts (dicts of ``weights``/``A_<name>``) as :data:`LOGRATIOS_NAME`."""
    if initvals is None:
        return None
    layout = fused.bayespmf_pivot_layout
    names = [str(v) for v in fused.coords["variable"]]
    return [
        {
            LOGRATIOS_NAME: layout.to_theta(
                start["weights"], [start[factor_var_name(n)] for n in names]
            )
        }
        for start in initvals
    ]


def drop_logratios(idata):
    """``idata`` without the free vector :data:`LOGRATIOS_NAME` in any group."""
    for group in ("posterior", "warmup_posterior"):
        if group in idata.children and LOGRATIOS_NAME in idata[group].data_vars:
            ds = idata[group].to_dataset().drop_vars(LOGRATIOS_NAME)
            unused = [
                d
                for d in ds.dims
                if d not in ("chain", "draw")
                and not any(d in v.dims for v in ds.data_vars.values())
            ]
            idata[group] = ds.drop_dims(unused) if unused else ds
    return idata


def pivot_model(model, point):
    """The model with every simplex sampled as log-ratios to its largest entry.

    The pivot of each simplex row (the weights, and each class's row of every
    ``A_<name>``) is the entry largest in ``point``. Only the value transforms
    change (``pymc.model.transform.conditioning.change_value_transforms``): the
    model's density on the simplex, its variables and their names are the same, so
    draws, ``initvals`` and the log-likelihood are unaffected. See
    :class:`~bayespmf.models.latent_class.PivotLogRatio` for why it helps NUTS.

    Parameters
    ----------
    model : pymc.Model
        From :func:`latent_class_model` (frozen or not).
    point : LatentClassPMF, (weights, factors) or dict
        A point estimate (e.g. the start of the chains).

    Returns
    -------
    pymc.Model
        A new model; ``model`` is unchanged.

    Examples
    --------
    >>> from bayespmf.models import latent_class_model
    >>> data = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    >>> model = latent_class_model(data, n_components=2)
    >>> point = ([0.3, 0.7], [np.array([[0.9, 0.2], [0.1, 0.8]])] * 2)
    >>> new = pivot_model(model, point)
    >>> new.rvs_to_transforms[new["A_a"]].pivot.tolist()
    [0, 1]
    """
    return pivot_transforms(model, *pivots(model, point))


def pivots(model, point) -> tuple[int, list[np.ndarray]]:
    """The pivot of the weights and of each class's row of each ``A_n``: the largest."""
    # names and sizes from the coordinates: a frozen model has no data container
    names = [str(v) for v in model.coords["variable"]]
    labels = [[str(c) for c in model.coords[category_dim(n)]] for n in names]
    n_components = len(model.coords["class"])
    fake = CategoricalData(
        np.zeros((1, len(names)), dtype=np.int64), [len(c) for c in labels], names, labels
    )
    params = params_of(point, fake, n_components)
    # factors are (I_n, F): the pivot of class f's row is argmax_i a[i, f]
    factor_pivots = [np.argmax(np.asarray(a), axis=0) for a in params.factors]
    return int(np.argmax(params.weights)), factor_pivots


def pivot_transforms(model, weights_pivot, factor_pivots):
    """``model`` with :class:`PivotLogRatio` value transforms at these pivots."""
    names = [str(v) for v in model.coords["variable"]]
    n_components = len(model.coords["class"])
    transforms = {"weights": PivotLogRatio(weights_pivot, n_components)}
    for name, piv in zip(names, factor_pivots, strict=True):
        k = len(model.coords[category_dim(name)])
        transforms[factor_var_name(name)] = PivotLogRatio(piv, k)
    return change_value_transforms(model, transforms)


def change_value_transforms(model, transforms: dict):
    """``pymc.model.transform.conditioning.change_value_transforms`` for simplexes.

    PyMC's version gives the new value variable the static shape of the variable
    itself, which is wrong for a transform that drops an entry (a K-simplex has K - 1
    free coordinates); here the value variable has the type of the transformed
    value, as ``pm.Model`` creates it.
    """
    from pymc.model.fgraph import (
        ModelFreeRV,
        fgraph_from_model,
        model_free_rv,
        model_from_fgraph,
    )
    from pymc.pytensorf import toposort_replace
    from pymc.util import get_transformed_name

    fgraph, _ = fgraph_from_model(model)
    replacements = []
    for node in fgraph.apply_nodes:
        if not isinstance(node.op, ModelFreeRV):
            continue
        [dummy_rv] = node.outputs
        rv, _value = node.inputs
        transform = transforms.get(node.op.name)
        if transform is None:
            continue
        new_value = transform.forward(rv, *rv.owner.inputs).type()
        new_value.name = get_transformed_name(node.op.name, transform)
        replacements.append(
            (dummy_rv, model_free_rv(rv, new_value, transform, node.op.name, *node.op.dims))
        )
    toposort_replace(fgraph, tuple(replacements))
    return model_from_fgraph(fgraph, mutate_fgraph=True)
