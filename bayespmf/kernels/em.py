r"""EM for the latent-class PMF with missing entries: the EM map as a kernel.

The EM map of Yeredor & Haardt (Chege et al., App. C.1, eqs. (33a)-(33b); Chege,
Haardt & Yeredor, eqs. (5)-(6)) for

.. math:: \Pr(x) = \sum_{f=1}^F \lambda_f \prod_{n \text{ observed}} A_n(x_n, f)

is built once per problem (data and rank); the loop lives in :mod:`bayespmf.fit`
(BlackJAX style): :func:`build_em_kernel` returns a kernel whose ``step`` maps
``(weights, factors_stacked)`` to the next iterate and the log-likelihood of its input.
Its default backend, ``"auto"`` (the same as ``"numba"``), is :class:`NumbaEMKernel`,
a numba loop over the rows cached on disk (:mod:`bayespmf.kernels.em_numba`) that also
takes K starts at once and row weights; ``"pytensor"`` is :class:`EMKernel`, a PyTensor
graph compiled once around the fused E-step Op :class:`EStepStats`; ``"scipy"`` is
:class:`SparseEMKernel`, SciPy sparse products. :func:`em_step_numpy` is the
independent SciPy reference; :func:`bayespmf.fit.fit_em` is the public driver,
optionally accelerated by SQUAREM-PMF
(:func:`bayespmf.kernels.squarem.squarem_pmf_step`).

Notes
-----
**The E-step in one pass over the rows** (the numba and PyTensor backends): for each
row it gathers ``log lambda + sum_n log A_n(x_n, .)`` over the observed entries (flat
indices ``offsets[n] + x_n`` in CSR layout, precomputed once), takes the max-shifted
log-sum-exp, normalizes the responsibilities and scatter-adds them into the expected
counts ``K`` (eq. (5)) and class totals ``C``; nothing of size ``S x F`` is stored.
That fused pass was faster than the one-hot sparse products of the SciPy reference and
than PyTensor's own sparse products, whose inner loop is strided
(:ref:`bench-em-kernel` has the comparison made when :class:`EMKernel` was designed).
In :class:`EMKernel` the M-step stays in the PyTensor graph and :class:`EStepStats`
runs as a numba loop under PyTensor's default (numba) linker and as C code under its C
linker. Its data enter as shared variables, not constants, so the compiled code depends
on their types only: a new data set of any shape reuses it and only the graph rewriting
is repeated.

**Rows with every entry missing** carry no information (their log-likelihood is 0) and
are dropped: ``lambda`` is the mean responsibility over the remaining rows. Including
them would give the same maximizers but a slower EM map.

**Guard against empty classes and unobserved categories.** A pseudo-count of
``COUNT_FLOOR`` rows is added to every expected count before normalizing (eq. (6)):
an empty class gets uniform columns instead of ``0/0``, and every entry stays positive
so ``log A`` is finite. The shift of the fixed point is of order ``COUNT_FLOOR / S``.

References
----------
.. [1] A. Yeredor and M. Haardt, "Maximum likelihood estimation of a low-rank
   probability mass tensor from partial observations," IEEE SPL 26(10), 2019.
.. [2] J. K. Chege, M. J. Grasis, A. Yeredor and M. Haardt, "Efficient probability mass
   function estimation from partially observed data" (SQUAREM-PMF), Asilomar 2022.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.link.c.op import COp

from bayespmf._validation import as_codes, check_int, check_random_state
from bayespmf.pmf import (
    LatentClassParams,
    index_dtype,
    observed_csr,
    offsets_of,
    one_hot_design,
    split_factors,
)

__all__ = [
    "BACKENDS",
    "NumbaEMKernel",
    "COUNT_FLOOR",
    "EMKernel",
    "EMState",
    "EStepStats",
    "SparseEMKernel",
    "build_em_kernel",
    "check_step_args",
    "em_step_numpy",
    "init_random",
    "normalize_blocks",
    "sparse_em_step",
]

#: Pseudo-count (in rows) added to every expected count in the M-step: keeps an empty
#: class or a never-observed category from giving 0/0 and every parameter positive
#: (finite logs). 1e-12 rows moves the ML fixed point by O(1e-12 / S), far below any
#: tolerance a user would set.
COUNT_FLOOR = 1e-12

#: Backends of :func:`build_em_kernel`; "auto" is "numba" (see its Notes).
BACKENDS = ("auto", "numba", "pytensor", "scipy")


class EMState(NamedTuple):
    r"""One EM iterate.

    Attributes
    ----------
    weights : ndarray, shape (F,)
        :math:`\lambda`.
    factors_stacked : ndarray, shape (sum I_n, F)
        The factors :math:`A_n` stacked row-wise (:func:`bayespmf.pmf.stack_factors`).
    loglik : float
        Log-likelihood of the iterate this state was *computed from* (the EM map returns
        it for free); by monotonicity of EM the state's own log-likelihood is at least
        this large.
    """

    weights: np.ndarray
    factors_stacked: np.ndarray
    loglik: float


# --------------------------------------------------------------------------- the Op


class EStepStats(COp):
    r"""E-step sufficient statistics of the latent-class model, in one pass over rows.

    ``EStepStats()(log_weights, log_factors, indptr, indices)`` returns

    * ``counts`` (P, F): :math:`K(j, f) = \sum_{s: j \in s} \gamma_{s,f}`,
    * ``class_totals`` (F,): :math:`C_f = \sum_s \gamma_{s,f}`,
    * ``loglik`` (): :math:`\sum_s \log \sum_f \exp \ell_{s,f}`,

    where row ``s`` holds the flat indices ``indices[indptr[s]:indptr[s+1]]`` (CSR
    layout, ``offsets[n] + x_n`` of its observed entries), :math:`\ell_{s,f} = \log
    \lambda_f + \sum_{j \in s} \log A(j, f)` and :math:`\gamma_{s,f} =
    \exp(\ell_{s,f} - \operatorname{logsumexp}_f \ell_{s,\cdot})` (max-shifted).
    With ``with_counts=False`` only ``loglik`` is computed and returned.

    A row whose every class has probability 0 contributes ``-inf`` to ``loglik`` and NaN
    responsibilities, as in :func:`em_step_numpy`. The C code checks shapes and index
    bounds. Under PyTensor's numba linker (its default) the same loop runs as numba
    code (:func:`bayespmf.kernels.em_numba.estep_stats`); :meth:`perform` is a NumPy
    fallback for other linkers.

    Examples
    --------
    >>> import pytensor
    >>> lw, la = pt.dvector(), pt.dmatrix()
    >>> k, c, ll = EStepStats()(lw, la, np.array([0, 1, 2]), np.array([0, 1]))
    >>> f = pytensor.function([lw, la], [c, ll])
    >>> c_, ll_ = f(np.log([0.5, 0.5]), np.log([[0.9, 0.2], [0.1, 0.8]]))
    >>> c_.round(3), round(float(ll_), 4)
    (array([0.929, 1.071]), -1.3963)
    """

    __props__ = ("with_counts",)

    def __init__(self, with_counts: bool = True):
        self.with_counts = bool(with_counts)

    def make_node(self, log_weights, log_factors, indptr, indices):
        """Check types and build the Apply node."""
        register_numba_dispatch()
        log_weights = pt.as_tensor_variable(log_weights)
        log_factors = pt.as_tensor_variable(log_factors)
        indptr = pt.as_tensor_variable(indptr)
        indices = pt.as_tensor_variable(indices)
        for var, ndim, dtype, label in [
            (log_weights, 1, "float64", "log_weights"),
            (log_factors, 2, "float64", "log_factors"),
            (indptr, 1, "int64", "indptr"),
            (indices, 1, "int64", "indices"),
        ]:
            if var.type.ndim != ndim or var.type.dtype != dtype:
                raise TypeError(
                    f"EStepStats: '{label}' must be a {ndim}-d {dtype} tensor; got "
                    f"{var.type}."
                )
        outs = [pt.dscalar()]
        if self.with_counts:
            outs = [pt.dmatrix(), pt.dvector(), *outs]
        return Apply(self, [log_weights, log_factors, indptr, indices], outs)

    def infer_shape(self, node, shapes):
        """Output shapes from the shape of ``log_factors``."""
        p_f = shapes[1]
        if self.with_counts:
            return [p_f, (p_f[1],), ()]
        return [()]

    def perform(self, node, inputs, output_storage):
        """NumPy fallback (``bincount``), for linkers without C."""
        log_w, log_a, indptr, indices = inputs
        n_rows = indptr.size - 1
        rows = np.repeat(np.arange(n_rows), np.diff(indptr))
        lj = np.array(np.broadcast_to(log_w, (n_rows, log_w.size)))
        for f in range(log_w.size):
            lj[:, f] += np.bincount(rows, weights=log_a[indices, f], minlength=n_rows)
        m = lj.max(axis=1, keepdims=True)
        m[~np.isfinite(m)] = 0.0
        e = np.exp(lj - m)
        z = e.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = np.asarray(np.sum(np.log(z) + m))
            resp = e / z
        if not self.with_counts:
            output_storage[0][0] = ll
            return
        counts = np.empty_like(log_a)
        for f in range(log_w.size):
            counts[:, f] = np.bincount(
                indices, weights=resp[rows, f], minlength=log_a.shape[0]
            )
        output_storage[0][0] = counts
        output_storage[1][0] = resp.sum(axis=0)
        output_storage[2][0] = ll

    def c_code(self, node, name, inp, out, sub):
        """One C pass over the rows: gather, log-sum-exp, scatter-add."""
        log_w, log_a, indptr, indices = inp
        fail = sub["fail"]
        if self.with_counts:
            counts, totals, ll = out
            alloc = f"""
            Py_XDECREF({counts}); Py_XDECREF({totals});
            {counts} = (PyArrayObject*) PyArray_ZEROS(2, dk, NPY_FLOAT64, 0);
            {totals} = (PyArrayObject*) PyArray_ZEROS(1, dt, NPY_FLOAT64, 0);
            if (!{counts} || !{totals}) {{ ok = 0; }}
            else {{
                K = (double*) PyArray_DATA({counts});
                C = (double*) PyArray_DATA({totals});
            }}
            """
        else:
            (ll,) = out
            alloc = ""
        return f"""
        {{
        int ok = 1;
        double* K = NULL;
        double* C = NULL;
        PyArrayObject* lw = PyArray_GETCONTIGUOUS({log_w});
        PyArrayObject* la = PyArray_GETCONTIGUOUS({log_a});
        PyArrayObject* ptr = PyArray_GETCONTIGUOUS({indptr});
        PyArrayObject* ind = PyArray_GETCONTIGUOUS({indices});
        npy_intp P = PyArray_DIMS(la)[0], F = PyArray_DIMS(la)[1];
        npy_intp S = PyArray_DIMS(ptr)[0] - 1;
        npy_intp nnz = PyArray_DIMS(ind)[0];
        npy_intp dk[2] = {{P, F}};
        npy_intp dt[1] = {{F}};
        const npy_int64* Dp = (const npy_int64*) PyArray_DATA(ptr);
        double* buf = NULL;
        if (PyArray_DIMS(lw)[0] != F) {{
            PyErr_SetString(PyExc_ValueError,
                "EStepStats: log_weights and log_factors disagree on the rank F.");
            ok = 0;
        }} else if (S < 0 || Dp[0] != 0 || Dp[S] > nnz) {{
            PyErr_SetString(PyExc_ValueError, "EStepStats: indptr is inconsistent.");
            ok = 0;
        }}
        if (ok) {{
            {alloc}
            Py_XDECREF({ll});
            {ll} = (PyArrayObject*) PyArray_ZEROS(0, NULL, NPY_FLOAT64, 0);
            buf = (double*) malloc((F > 0 ? F : 1) * sizeof(double));
            if (!{ll} || !buf) {{ PyErr_NoMemory(); ok = 0; }}
        }}
        if (ok) {{
            const double* W = (const double*) PyArray_DATA(lw);
            const double* T = (const double*) PyArray_DATA(la);
            const npy_int64* Di = (const npy_int64*) PyArray_DATA(ind);
            double total = 0.0;
            for (npy_intp s = 0; s < S && ok; ++s) {{
                for (npy_intp f = 0; f < F; ++f) buf[f] = W[f];
                for (npy_int64 k = Dp[s]; k < Dp[s + 1]; ++k) {{
                    const npy_int64 j = Di[k];
                    if (j < 0 || j >= P) {{ ok = 0; break; }}
                    const double* row = T + j * F;
                    for (npy_intp f = 0; f < F; ++f) buf[f] += row[f];
                }}
                if (!ok) {{
                    PyErr_SetString(PyExc_IndexError, "EStepStats: index out of range.");
                    break;
                }}
                double m = buf[0];
                for (npy_intp f = 1; f < F; ++f) m = buf[f] > m ? buf[f] : m;
                if (!isfinite(m)) m = 0.0;
                double z = 0.0;
                for (npy_intp f = 0; f < F; ++f) {{
                    buf[f] = exp(buf[f] - m);
                    z += buf[f];
                }}
                total += log(z) + m;
                if (K) {{
                    for (npy_intp f = 0; f < F; ++f) {{ buf[f] /= z; C[f] += buf[f]; }}
                    for (npy_int64 k = Dp[s]; k < Dp[s + 1]; ++k) {{
                        double* krow = K + Di[k] * F;
                        for (npy_intp f = 0; f < F; ++f) krow[f] += buf[f];
                    }}
                }}
            }}
            if (ok) *(double*)PyArray_DATA({ll}) = total;
        }}
        free(buf);
        Py_DECREF(lw); Py_DECREF(la); Py_DECREF(ptr); Py_DECREF(ind);
        if (!ok) {{ {fail} }}
        }}
        """

    def c_code_cache_version(self):
        """Version of the C code (bump on every change)."""
        return (2,)


_NUMBA_DISPATCH = []


def register_numba_dispatch() -> None:
    """Teach PyTensor's numba backend (its default linker) to run :class:`EStepStats`.

    Done on the first :meth:`EStepStats.make_node`, not at import: importing PyTensor's
    numba dispatch imports numba (slow), which ``import bayespmf`` and the NumPy and
    SciPy backends do not need. The integer returned with the function salts
    PyTensor's on-disk cache key (the Op's class and props): bump it whenever the numba
    code (:func:`bayespmf.kernels.em_numba.estep_stats`) changes.
    """
    if _NUMBA_DISPATCH:
        return
    from pytensor.link.numba.dispatch.basic import register_funcify_default_op_cache_key

    from bayespmf.kernels.em_numba import numba_estep_stats

    @register_funcify_default_op_cache_key(EStepStats)
    def _numba_estep_stats(op, node=None, **kwargs):
        return numba_estep_stats(op.with_counts), 1

    _NUMBA_DISPATCH.append(_numba_estep_stats)


# ---------------------------------------------------------------- data preparation


def normalize_blocks(stacked: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Divide every column of every variable block by its sum."""
    sums = np.add.reduceat(stacked, offsets[:-1], axis=0)
    return stacked / np.repeat(sums, np.diff(offsets), axis=0)


def init_random(n_categories, n_components: int, random_state=None) -> LatentClassParams:
    """RAND-EM start: Uniform(0, 1) entries normalized onto the simplex.

    Chege et al. (SQUAREM-PMF, Sec. IV-A) start EM this way and show it suffices.

    Parameters
    ----------
    n_categories : sequence of int
    n_components : int
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    LatentClassParams

    Examples
    --------
    >>> p = init_random([2, 3], 2, random_state=0)
    >>> [a.sum(axis=0).round(12).tolist() for a in p.factors], p.weights.shape
    ([[1.0, 1.0], [1.0, 1.0]], (2,))
    """
    rng = check_random_state(random_state)
    n_cat = np.asarray(n_categories, dtype=np.int64)
    n_components = check_int(n_components, "n_components", owner="init_random", low=1)
    offsets = offsets_of(n_cat)
    w = rng.random(n_components)
    a = rng.random((int(offsets[-1]), n_components))
    return LatentClassParams(
        w / w.sum(), split_factors(normalize_blocks(a, offsets), n_cat)
    )


# ----------------------------------------------------------------- NumPy reference


def em_step_numpy(codes, n_categories, weights, factors_stacked):
    """One EM step with SciPy sparse one-hot products (the reference implementation).

    Parameters
    ----------
    codes : array_like of int, shape (S, N)
        ``-1`` marks missing entries; all-missing rows are skipped.
    n_categories : sequence of int, shape (N,)
    weights : array_like, shape (F,)
    factors_stacked : array_like, shape (sum I_n, F)

    Returns
    -------
    weights : ndarray, shape (F,)
    factors_stacked : ndarray, shape (sum I_n, F)
    loglik : float
        Log-likelihood of the *input* parameters.

    Notes
    -----
    With the one-hot design ``O`` (rows: samples with >= 1 observed entry, columns: the
    stacked categories), the E-step is ``L = O @ log A + log lambda``, ``gamma =
    softmax(L)`` (max-shifted) and the M-step (eq. (6) of Chege et al.; (33a)-(33b) of
    Ibrahim & Fu, App. C.1) ``K = O.T @ gamma``, ``A = (K + c) / colsum_n(K + c)``,
    ``lambda = (sum_s gamma_s + c) / (S + F c)`` with ``c = COUNT_FLOOR``.

    Examples
    --------
    >>> w, A, ll = em_step_numpy([[0, 1], [1, -1]], [2, 2], [0.5, 0.5],
    ...                          np.array([[0.9, 0.2], [0.1, 0.8], [0.5, 0.5], [0.5, 0.5]]))
    >>> round(ll, 4), w.round(3)
    (-2.0895, array([0.465, 0.535]))
    """
    codes, n_cat = as_codes(codes, n_categories, allow_empty_columns=True)
    offsets = offsets_of(n_cat)
    onehot = one_hot_design(codes, n_cat, drop_empty=True)
    return sparse_em_step(onehot, offsets, weights, factors_stacked)


def sparse_em_step(onehot, offsets, weights, factors_stacked, *, onehot_t=None):
    """The EM step of :func:`em_step_numpy` on a prebuilt one-hot design.

    ``onehot`` is :func:`bayespmf.pmf.one_hot_design`'s matrix and ``offsets`` the
    block offsets (:func:`bayespmf.pmf.offsets_of`); used to time the SciPy step
    without its setup.
    ``onehot_t`` is an optional prebuilt ``onehot.T`` in CSR layout (faster products).

    Examples
    --------
    >>> o = one_hot_design(np.array([[0, 1], [1, -1]]), [2, 2])
    >>> a = np.array([[0.9, 0.2], [0.1, 0.8], [0.5, 0.5], [0.5, 0.5]])
    >>> round(sparse_em_step(o, np.array([0, 2, 4]), [0.5, 0.5], a)[2], 4)
    -2.0895
    """
    w = np.asarray(weights, dtype=float)
    a = np.asarray(factors_stacked, dtype=float)
    n_rows = onehot.shape[0]
    with np.errstate(divide="ignore"):
        lj = onehot @ np.log(a) + np.log(w)
    m = lj.max(axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(lj - m)
    z = e.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = float(np.sum(np.log(z) + m))
        resp = e / z
    counts = (onehot.T if onehot_t is None else onehot_t) @ resp + COUNT_FLOOR
    w_new = (resp.sum(axis=0) + COUNT_FLOOR) / (n_rows + w.size * COUNT_FLOOR)
    return w_new, normalize_blocks(counts, offsets), loglik


# ------------------------------------------------------------------ compiled kernel


class EMKernel:
    """The EM map of one problem, compiled once; built by :func:`build_em_kernel`.

    Attributes
    ----------
    n_categories : ndarray of int, shape (N,)
    n_components : int
    offsets : ndarray of int, shape (N + 1,)
        Row offsets of each variable's block in the stacked factors.
    n_rows : int
        Rows with at least one observed entry (the others are dropped).
    """

    def __init__(self, codes, n_categories, n_components, mode=None):
        self.n_categories = np.asarray(n_categories, dtype=np.int64)
        self.n_components = int(n_components)
        self.offsets = offsets_of(self.n_categories)
        indptr, indices = observed_csr(codes, self.n_categories, drop_empty=True)
        self.n_rows = int(indptr.size - 1)
        self._mode = mode
        self._indptr = pytensor.shared(indptr, name="indptr")
        self._indices = pytensor.shared(indices, name="indices")
        n_stack = int(self.offsets[-1])
        block = np.repeat(np.arange(self.n_categories.size), self.n_categories)
        indicator = np.zeros((self.n_categories.size, n_stack))
        indicator[block, np.arange(n_stack)] = 1.0
        self._block = pytensor.shared(block.astype(np.int64), name="block")
        self._indicator = pytensor.shared(indicator, name="block_indicator")
        self._weight_denominator = pytensor.shared(
            np.float64(self.n_rows + self.n_components * COUNT_FLOOR),
            name="weight_denominator",
        )
        self._step_fn = self._compile_step()
        self._loglik_fn = None

    def _inputs(self):
        return pt.dvector("weights"), pt.dmatrix("factors_stacked")

    def _compile_step(self):
        w, a = self._inputs()
        counts, totals, ll = EStepStats(with_counts=True)(
            pt.log(w), pt.log(a), self._indptr, self._indices
        )
        counts = counts + COUNT_FLOOR
        colsum = pt.dot(self._indicator, counts)[self._block]
        # a shared scalar, not a constant: a constant would be compiled into the fused
        # C loop, so every new row count would compile again and cache a new module
        w_new = (totals + COUNT_FLOOR) / self._weight_denominator
        return pytensor.function([w, a], [w_new, counts / colsum, ll], mode=self._mode)

    def _check(self, weights, factors_stacked):
        return check_step_args(
            weights, factors_stacked, self.offsets, self.n_components, "EMKernel"
        )

    def step(self, weights, factors_stacked):
        """Apply the EM map once.

        Returns
        -------
        weights : ndarray, shape (F,)
        factors_stacked : ndarray, shape (sum I_n, F)
        loglik : float
            Log-likelihood of the *input* parameters (sum over rows).
        """
        w_new, a_new, ll = self._step_fn(*self._check(weights, factors_stacked))
        return w_new, a_new, float(ll)

    def loglik(self, weights, factors_stacked) -> float:
        """Log-likelihood of ``(weights, factors_stacked)`` (E-step only; compiled once)."""
        if self._loglik_fn is None:
            w, a = self._inputs()
            (ll,) = [
                EStepStats(with_counts=False)(
                    pt.log(w), pt.log(a), self._indptr, self._indices
                )
            ]
            self._loglik_fn = pytensor.function([w, a], ll, mode=self._mode)
        return float(self._loglik_fn(*self._check(weights, factors_stacked)))


class SparseEMKernel:
    """The EM map of one problem with SciPy sparse products: no compilation.

    The same interface and iterates as :class:`EMKernel` (up to summation order): the
    reference backend (``build_em_kernel``'s ``backend="scipy"``), with nothing to
    compile. The one-hot design is built once.
    """

    def __init__(self, codes, n_categories, n_components):
        self.n_categories = np.asarray(n_categories, dtype=np.int64)
        self.n_components = int(n_components)
        self.offsets = offsets_of(self.n_categories)
        self._onehot = one_hot_design(codes, self.n_categories, drop_empty=True)
        self._onehot_t = self._onehot.T.tocsr()
        self.n_rows = int(self._onehot.shape[0])

    def step(self, weights, factors_stacked):
        """Apply the EM map once: ``(weights, factors_stacked, loglik_of_input)``."""
        w, a = check_step_args(
            weights, factors_stacked, self.offsets, self.n_components, "SparseEMKernel"
        )
        return sparse_em_step(self._onehot, self.offsets, w, a, onehot_t=self._onehot_t)

    def loglik(self, weights, factors_stacked) -> float:
        """Log-likelihood of ``(weights, factors_stacked)``."""
        w, a = check_step_args(
            weights, factors_stacked, self.offsets, self.n_components, "SparseEMKernel"
        )
        with np.errstate(divide="ignore"):
            lj = self._onehot @ np.log(a) + np.log(w)
        m = lj.max(axis=1, keepdims=True)
        m[~np.isfinite(m)] = 0.0
        with np.errstate(divide="ignore"):
            return float(np.sum(np.log(np.exp(lj - m).sum(axis=1)) + m[:, 0]))


class NumbaEMKernel:
    """The EM map of one problem for one or K starts, as a cached numba loop.

    ``step(weights, factors)`` takes one start (``(F,)`` and ``(P, F)``) or K starts
    at once (``(K, F)`` and ``(P, K, F)``: one fused pass over the observed entries for
    all of them, :func:`bayespmf.kernels.em_numba.estep_starts`). Rows may carry weights
    (frequencies of response patterns, survey weights): the weighted EM map.

    Examples
    --------
    >>> k = NumbaEMKernel(np.array([[0, 1], [1, -1]]), [2, 2], n_components=2)
    >>> a = np.array([[0.9, 0.2], [0.1, 0.8], [0.5, 0.5], [0.5, 0.5]])
    >>> w, A, ll = k.step([0.5, 0.5], a)
    >>> round(ll, 4), w.round(3)
    (-2.0895, array([0.465, 0.535]))
    >>> w3, A3, ll3 = k.step(np.full((3, 2), 0.5), np.repeat(a[:, None], 3, axis=1))
    >>> ll3.round(4).tolist(), A3.shape
    ([-2.0895, -2.0895, -2.0895], (4, 3, 2))
    """

    def __init__(self, codes, n_categories, n_components, row_weight=None):
        self.n_categories = np.asarray(n_categories, dtype=np.int64)
        self.n_components = int(n_components)
        self.offsets = offsets_of(self.n_categories)
        codes = np.asarray(codes)
        keep = (codes >= 0).any(axis=1)
        self._indptr, self._indices = observed_csr(
            codes,
            self.n_categories,
            drop_empty=True,
            index_dtype=index_dtype(self.n_categories),
        )
        self.n_rows = int(self._indptr.size - 1)
        if row_weight is None:
            self._row_weight = np.ones(self.n_rows)
        else:
            self._row_weight = np.asarray(row_weight, dtype=np.float64)[keep]
        self._total_weight = float(self._row_weight.sum())
        self._block_sizes = np.diff(self.offsets)

    def _run(self, w, a):
        from bayespmf.kernels.em_numba import estep_starts

        counts, totals, loglik = estep_starts(
            w, a, self._indptr, self._indices, self._row_weight
        )
        counts = counts + COUNT_FLOOR
        sums = np.add.reduceat(counts, self.offsets[:-1], axis=0)
        a_new = counts / np.repeat(sums, self._block_sizes, axis=0)
        w_new = (totals + COUNT_FLOOR) / (
            self._total_weight + self.n_components * COUNT_FLOOR
        )
        return w_new, a_new, loglik

    def step(self, weights, factors):
        """Apply the EM map: ``(weights, factors, loglik_of_input)``.

        ``loglik`` is a float for one start, an ndarray (K,) for K starts.
        """
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim == 1:
            w, a = check_step_args(weights, factors, self.offsets, self.n_components, "EM")
            w_new, a_new, ll = self._run(w[None, :], a[:, None, :])
            return w_new[0], a_new[:, 0], float(ll[0])
        a = np.asarray(factors, dtype=np.float64)
        want = (int(self.offsets[-1]), w.shape[0], self.n_components)
        if w.shape[1] != self.n_components or a.shape != want:
            raise ValueError(
                f"NumbaEMKernel.step expects weights (K, {self.n_components}) and factors "
                f"{want}; got {w.shape} and {a.shape}."
            )
        return self._run(w, a)

    def loglik(self, weights, factors):
        """Log-likelihood of the parameters (one start: float; K starts: (K,))."""
        return self.step(weights, factors)[2]


def build_em_kernel(
    data,
    n_categories=None,
    n_components: int = 1,
    *,
    backend: str = "auto",
    row_weight=None,
    mode=None,
):
    """The EM map of the latent-class PMF for ``data`` and ``n_components``, built once.

    Parameters
    ----------
    data : CategoricalData or array_like of int, shape (S, N)
        ``-1`` marks missing entries.
    n_categories : sequence of int, optional
        Inferred from ``data`` when omitted.
    n_components : int
        Number of latent classes F (>= 1).
    backend : {"auto", "numba", "pytensor", "scipy"}, default "auto"
        ``"numba"`` (and ``"auto"``): one cached numba loop over the rows
        (:class:`NumbaEMKernel`; also takes K starts at once and row weights);
        ``"pytensor"``: the PyTensor graph with the fused E-step Op
        (:class:`EMKernel`; :class:`EStepStats` runs as a numba loop under PyTensor's
        default numba linker and as C code under its C linker);
        ``"scipy"``: SciPy sparse products (:class:`SparseEMKernel`), the reference.
    row_weight : array_like, shape (S,), optional
        Weight of each row (numba backend only): the weighted EM map.
    mode : str or pytensor Mode, optional
        Compilation mode of the PyTensor backend (default: PyTensor's default mode,
        whose linker is numba in PyTensor 3; ``"FAST_RUN"`` with ``linker="cvm"``
        runs the C E-step).

    Returns
    -------
    NumbaEMKernel, EMKernel or SparseEMKernel
        ``.step(weights, factors_stacked) -> (weights, factors_stacked, loglik)`` and
        ``.loglik(weights, factors_stacked)``.

    Raises
    ------
    ValueError
        If ``n_components`` < 1, ``backend`` is unknown or the data are invalid
        (``DataValidationError``), including a variable that is never observed.

    Notes
    -----
    ``"auto"`` is numba because it compiles far faster in an empty cache than
    PyTensor's C modules and matches the fused C E-step per iteration
    (``benchmarks/bench_em_step.py`` prints the backends side by side;
    :ref:`bench-em-kernel`).

    Examples
    --------
    >>> kernel = build_em_kernel([[0, 1], [1, -1]], [2, 2], n_components=2,
    ...                          backend="pytensor")
    >>> w, A, ll = kernel.step([0.5, 0.5],
    ...                        np.array([[0.9, 0.2], [0.1, 0.8], [0.5, 0.5], [0.5, 0.5]]))
    >>> round(ll, 4), w.round(3)
    (-2.0895, array([0.465, 0.535]))
    """
    n_components = check_int(n_components, "n_components", owner="build_em_kernel", low=1)
    if backend not in BACKENDS:
        raise ValueError(
            f"The 'backend' parameter of build_em_kernel must be one of {list(BACKENDS)}."
            f" Got {backend!r}."
        )
    codes, n_cat = as_codes(data, n_categories)
    if backend in ("auto", "numba"):
        return NumbaEMKernel(codes, n_cat, n_components, row_weight=row_weight)
    if row_weight is not None:
        raise ValueError(
            f"build_em_kernel: row weights need backend='numba' (or 'auto'); got "
            f"backend={backend!r}."
        )
    if backend == "scipy":
        return SparseEMKernel(codes, n_cat, n_components)
    return EMKernel(codes, n_cat, n_components, mode=mode)


def check_step_args(weights, factors_stacked, offsets, n_components: int, owner: str):
    """Contiguous float64 copies of a kernel's inputs, with their shapes checked."""
    w = np.ascontiguousarray(weights, dtype=np.float64)
    a = np.ascontiguousarray(factors_stacked, dtype=np.float64)
    want = (int(offsets[-1]), n_components)
    if w.shape != (n_components,) or a.shape != want:
        raise ValueError(
            f"{owner} expects weights of shape ({n_components},) and factors_stacked of "
            f"shape "
            f"{want}; got {w.shape} and {a.shape}."
        )
    return w, a
