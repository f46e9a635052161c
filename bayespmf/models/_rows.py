"""The class-summed log-likelihood of rows, shared by the PyMC latent-class models."""

from __future__ import annotations

import contextlib

import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import dfs_rewriter, node_rewriter
from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key
from pytensor.tensor.type import integer_dtypes

from bayespmf._validation import DataValidationError
from bayespmf.kernels.rows_numba import rows_loglik, rows_loglik_grad
from bayespmf.pmf import offsets_of

__all__ = [
    "ClassSummedLoglik",
    "ClassSummedLoglikGrad",
    "class_summed_loglik",
    "rows_signature",
    "static_categories",
]


def static_categories(factors, *, require_matrix: bool = True) -> list[int]:
    """The static number of categories ``I_n`` of each ``(rank, I_n)`` factor tensor."""
    sizes = []
    for n, a in enumerate(factors):
        ok = a.type.ndim == 2 or not require_matrix
        k = a.type.shape[-1] if ok else None
        if k is None:
            raise DataValidationError(
                f"factors[{n}] must be a (rank, I_n) tensor with a static number of "
                f"categories I_n; got type {a.type}."
            )
        sizes.append(int(k))
    return sizes


#: Build the likelihood with :class:`ClassSummedLoglik` (True) or, as before it, as
#: the one-hot design product (False; kept for ``benchmarks/bench_latent_class_logp.py``
#: and for batched values). Read when a model is built.
FUSED = True


def _stacking(n_cat) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, n_cat)``, int64: variable n owns rows offsets[n] to offsets[n+1] - 1."""
    return offsets_of(n_cat)[:-1], np.asarray(n_cat, dtype=np.int64)


class ClassSummedLoglik(Op):
    r"""Per-row class-summed log-likelihood of integer rows, and the responsibilities.

    Inputs: ``codes`` (S, N) integers (``-1`` missing), ``log_prior`` (F,) or (S, F),
    ``log_a`` (sum I_n, F) the stacked ``log A_n``. Outputs: ``loglik`` (S,) and the
    responsibilities ``resp`` (S, F), the gradient of each row's log-likelihood with
    respect to its class log-sums. One fused loop over the observed entries
    (:func:`bayespmf.kernels.rows_numba.rows_loglik`) in the C and numba backends;
    compiled to JAX, the node is rewritten into the equivalent gather graph
    (:func:`_gather_loglik`). Only ``loglik`` may enter a cost that is
    differentiated; ``resp`` is for the gradient.
    """

    __props__ = ("n_cat",)

    def __init__(self, n_cat):
        self.n_cat = tuple(int(k) for k in n_cat)
        self._offsets, self._n_cat = _stacking(self.n_cat)

    def make_node(self, codes, log_prior, log_a):
        codes = pt.as_tensor_variable(codes)
        log_prior = pt.as_tensor_variable(log_prior, dtype="float64")
        log_a = pt.as_tensor_variable(log_a, dtype="float64")
        if codes.ndim != 2 or codes.dtype not in integer_dtypes:
            raise TypeError(f"codes must be an integer matrix; got {codes.type}.")
        if log_prior.ndim not in (1, 2) or log_a.ndim != 2:
            raise TypeError(
                f"log_prior must be (F,) or (S, F) and log_a (P, F); got "
                f"{log_prior.type} and {log_a.type}."
            )
        rows, n_components = codes.type.shape[0], log_a.type.shape[1]
        outputs = [
            pt.tensor(dtype="float64", shape=(rows,)),
            pt.tensor(dtype="float64", shape=(rows, n_components)),
        ]
        return Apply(self, [codes, log_prior, log_a], outputs)

    def perform(self, node, inputs, output_storage):
        codes, log_prior, log_a = inputs
        shared = node.inputs[1].type.ndim == 1 or node.inputs[1].type.shape[0] == 1
        if not shared and log_prior.shape[0] != codes.shape[0]:
            raise ValueError(
                f"ClassSummedLoglik: log_prior has {log_prior.shape[0]} rows for "
                f"{codes.shape[0]} rows of codes; give one row per row of codes, or "
                "a (F,) or statically (1, F) prior shared by all."
            )
        log_prior = np.atleast_2d(np.asarray(log_prior, dtype=np.float64))
        loglik, resp = rows_loglik(
            np.ascontiguousarray(codes, dtype=np.int64),
            self._offsets,
            self._n_cat,
            np.ascontiguousarray(log_prior),
            np.ascontiguousarray(log_a, dtype=np.float64),
        )
        output_storage[0][0] = loglik
        output_storage[1][0] = resp

    def infer_shape(self, node, shapes):
        rows = shapes[0][0]
        return [(rows,), (rows, shapes[2][1])]

    def connection_pattern(self, node):
        return [[False, False], [True, True], [True, True]]

    def pullback(self, inputs, outputs, cotangents):
        codes, log_prior, log_a = inputs
        _, resp = outputs
        g_ll, g_resp = cotangents
        if not isinstance(g_resp.type, DisconnectedType):
            raise NotImplementedError(
                "ClassSummedLoglik: the responsibilities output is not differentiable."
            )
        if isinstance(g_ll.type, DisconnectedType):
            return [disconnected_type(), log_prior.zeros_like(), log_a.zeros_like()]
        weighted = resp * g_ll[:, None]
        if log_prior.ndim == 1:
            g_prior = weighted.sum(axis=0)
        elif log_prior.type.shape[0] == 1:  # one row shared by every row
            g_prior = weighted.sum(axis=0, keepdims=True)
        else:
            g_prior = weighted
        g_a = ClassSummedLoglikGrad(self.n_cat)(codes, resp, g_ll)
        return [disconnected_type(), g_prior, g_a]


class ClassSummedLoglikGrad(Op):
    """Gradient of ``sum_s g_s loglik_s`` with respect to the stacked ``log A_n``.

    Inputs: ``codes`` (S, N), ``resp`` (S, F) from :class:`ClassSummedLoglik`, ``g``
    (S,). Output: (sum I_n, F), one scatter-add of ``g_s resp_sf`` per observed entry
    (:func:`bayespmf.kernels.rows_numba.rows_loglik_grad`).
    """

    __props__ = ("n_cat",)

    def __init__(self, n_cat):
        self.n_cat = tuple(int(k) for k in n_cat)
        self._offsets, self._n_cat = _stacking(self.n_cat)

    def make_node(self, codes, resp, g):
        codes = pt.as_tensor_variable(codes)
        resp = pt.as_tensor_variable(resp, dtype="float64")
        g = pt.as_tensor_variable(g, dtype="float64")
        out = pt.tensor(dtype="float64", shape=(sum(self.n_cat), resp.type.shape[1]))
        return Apply(self, [codes, resp, g], [out])

    def perform(self, node, inputs, output_storage):
        codes, resp, g = inputs
        output_storage[0][0] = rows_loglik_grad(
            np.ascontiguousarray(codes, dtype=np.int64),
            self._offsets,
            self._n_cat,
            np.ascontiguousarray(resp, dtype=np.float64),
            np.ascontiguousarray(g, dtype=np.float64),
            sum(self.n_cat),
        )

    def infer_shape(self, node, shapes):
        return [(int(sum(self.n_cat)), shapes[1][1])]

    def connection_pattern(self, node):
        return [[False], [True], [True]]

    def pullback(self, inputs, outputs, cotangents):
        raise NotImplementedError(
            "Second derivatives of ClassSummedLoglik are not implemented."
        )


#: Salt of PyTensor's on-disk cache key for the numba kernels below (PyTensor keys them
#: by the Op's class and props only): bump it whenever their code changes, or a cache
#: filled by an older bayespmf would keep running the old code.
NUMBA_CACHE_VERSION = 2


def _numba_kernels(op):
    """The numba backend's implementation of either Op (PyTensor 3's default linker)."""
    offsets, n_cat = _stacking(op.n_cat)
    n_stacked = int(n_cat.sum())
    if isinstance(op, ClassSummedLoglik):

        def loglik(codes, log_prior, log_a):  # pragma: no cover - numba
            n_components = log_a.shape[1]
            prior = np.ascontiguousarray(log_prior).reshape((-1, n_components))
            # one prior row shared by every row, or one per row (as in perform)
            if prior.shape[0] != 1 and prior.shape[0] != codes.shape[0]:
                raise ValueError(
                    "ClassSummedLoglik: log_prior and codes have different row counts; "
                    "give one row per row of codes, or a (F,) or statically (1, F) "
                    "prior shared by all."
                )
            return rows_loglik(
                codes,
                offsets,
                n_cat,
                prior,
                np.ascontiguousarray(log_a),
            )

        return numba.njit(loglik), NUMBA_CACHE_VERSION

    def loglik_grad(codes, resp, g):  # pragma: no cover - numba
        return rows_loglik_grad(
            codes,
            offsets,
            n_cat,
            np.ascontiguousarray(resp),
            np.ascontiguousarray(g),
            n_stacked,
        )

    return numba.njit(loglik_grad), NUMBA_CACHE_VERSION


for _op_type in (ClassSummedLoglik, ClassSummedLoglikGrad):
    register_funcify_default_op_cache_key(_op_type)(
        lambda op, node=None, **kwargs: _numba_kernels(op)
    )


def _gather_index(codes, n_cat):
    """Row of the padded stacked factors each entry reads (the padding row if missing)."""
    offsets, n_cat = _stacking(n_cat)
    in_range = (codes >= 0) & (codes < n_cat)
    return pt.switch(in_range, codes + offsets, int(n_cat.sum())), in_range


#: How :class:`ClassSummedLoglik` is written for JAX (:func:`jax_formulation`):
#: ``"gather"`` reads the factors' rows by index (its gradient a scatter-add);
#: ``"matmul"`` multiplies the rows' one-hot design by the stacked log-factors.
_JAX_FORMULATION = ["gather"]


@contextlib.contextmanager
def jax_formulation(name: str):
    """Within the block, JAX rewrites of :class:`ClassSummedLoglik` use ``name``.

    ``"gather"`` (the default) indexes the stacked log-factors with the codes; its
    gradient is a scatter-add of S x N x F terms into a table of sum(I_n) x F entries,
    which a GPU runs as contended atomic additions. ``"matmul"`` builds the rows'
    one-hot design (S x sum(I_n), 0/1) from the codes in the compiled program and
    multiplies it by the log-factors: value and gradient are then matrix products
    (the same numbers). The one-hot design of constant rows would be folded into the
    program by XLA, so ``"matmul"`` is for rows passed as arguments
    (:mod:`bayespmf.models._jax_data`).
    """
    if name not in ("gather", "matmul"):
        raise ValueError(f"jax_formulation: 'gather' or 'matmul', got {name!r}")
    previous = _JAX_FORMULATION[0]
    _JAX_FORMULATION[0] = name
    try:
        yield
    finally:
        _JAX_FORMULATION[0] = previous


def _gather_loglik(codes, log_prior, log_a, n_cat):
    """:class:`ClassSummedLoglik` as a gather graph (what the JAX backend runs)."""
    if _JAX_FORMULATION[0] == "matmul":
        n_cat = np.asarray(n_cat)
        var_of_col = np.repeat(np.arange(len(n_cat)), n_cat)
        code_of_col = np.concatenate([np.arange(k) for k in n_cat]).astype(codes.dtype)
        one_hot = pt.cast(pt.eq(codes[:, var_of_col], code_of_col), log_a.dtype)
        joint = pt.dot(one_hot, log_a) + log_prior  # (S, F)
    else:
        index, _ = _gather_index(codes, n_cat)
        padded = pt.concatenate([log_a, pt.zeros_like(log_a[:1])], axis=0)
        joint = padded[index].sum(axis=1) + log_prior  # (S, F)
    valid = pt.all((codes >= -1) & (codes < np.asarray(n_cat)), axis=-1)
    top = pt.max(joint, axis=-1, keepdims=True)
    possible = valid & pt.gt(top[:, 0], -np.inf)
    top = pt.switch(pt.gt(top, -np.inf), top, 0.0)
    shifted = pt.exp(joint - top)
    total = shifted.sum(axis=-1)
    loglik = pt.switch(possible, pt.log(total) + top[:, 0], -np.inf)
    resp = pt.switch(
        possible[:, None], shifted / pt.switch(possible, total, 1.0)[:, None], 0.0
    )
    return loglik, resp


def _gather_loglik_grad(codes, resp, g, n_cat):
    """:class:`ClassSummedLoglikGrad` as a scatter-add graph (JAX backend)."""
    index, in_range = _gather_index(codes, n_cat)
    weighted = (resp * g[:, None])[:, None, :] * in_range[:, :, None]  # (S, N, F)
    n_components = resp.type.shape[1] if resp.type.shape[1] is not None else resp.shape[1]
    padded = pt.zeros((int(sum(n_cat)) + 1, n_components))
    return pt.inc_subtensor(padded[index], weighted)[:-1]


@node_rewriter([ClassSummedLoglik, ClassSummedLoglikGrad])
def _expand_for_jax(fgraph, node):
    op = node.op
    if isinstance(op, ClassSummedLoglik):
        return list(_gather_loglik(*node.inputs, op.n_cat))
    return [_gather_loglik_grad(*node.inputs, op.n_cat)]


# JAX has no numba: before the JAX mode's other rewrites, the nodes become gathers
optdb.register(
    "bayespmf_class_summed_loglik_jax", dfs_rewriter(_expand_for_jax), "jax", position=0.5
)


def class_summed_loglik(value, log_prior, factors, n_cat) -> pt.TensorVariable:
    r"""``log sum_f exp(log_prior_f + sum_{n observed} log A_n(x_n, f))`` per row.

    ``value`` are integer codes (``-1`` missing) ``(S, N)``; ``log_prior`` is ``(F,)``
    or per row ``(S, F)``; ``factors`` are ``(F, I_n)`` tensors. Rows with a code
    outside ``[-1, I_n)`` have log-probability ``-inf``.

    Computed by :class:`ClassSummedLoglik`, one fused loop over the observed entries
    with a hand-written gradient (a scatter-add of the responsibilities): the data
    stay integer codes and nothing of size S x sum(I_n) is built. A gradient costs
    what the one-hot design product's did, and on large data compiling the frozen
    model takes several times less memory and time (:ref:`bench-frozen-data`).
    Batched values or priors (more leading dimensions, as in some PyMC
    vectorizations) fall back to that one-hot product.
    """
    log_a = pt.concatenate([pt.log(a).T for a in factors], axis=0)  # (sum I_n, F)
    fused = value.ndim == 2 and log_prior.ndim in (1, 2) and value.dtype in integer_dtypes
    if fused and FUSED:
        loglik, _ = ClassSummedLoglik(n_cat)(value, log_prior, log_a)
        return loglik
    var_of_col = np.repeat(np.arange(len(n_cat)), n_cat)
    code_of_col = np.concatenate([np.arange(k) for k in n_cat]).astype(value.dtype)
    one_hot = pt.cast(pt.eq(value[..., var_of_col], code_of_col), pytensor.config.floatX)
    loglik = pt.logsumexp(pt.dot(one_hot, log_a) + log_prior, axis=-1)
    valid = pt.all((value >= -1) & (value < np.asarray(n_cat)), axis=-1)
    return pt.switch(valid, loglik, -np.inf)


def rows_signature(n_variables: int) -> str:
    """The ``pm.CustomDist`` signature: a prior ``(f)``, N factors, rows of N codes."""
    return "(f)," + ",".join(f"(f,i{n})" for n in range(n_variables)) + "->(n)"
