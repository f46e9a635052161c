r"""EM of the latent-class PMF over chunked data, and the estimator's passes with Dask.

:class:`DaskEMKernel` applies the compiled E-step Op
:class:`~bayespmf.kernels.em.EStepStats` to every chunk with the current parameters
broadcast, sums the expected counts ``K``, class totals ``C`` and log-likelihood in a
tree reduction and does the (tiny) M-step on the client; :func:`fit_em_dask` drives it
like :func:`~bayespmf.fit.fit_em`, optionally with SQUAREM-PMF, and
:func:`fit_latent_class` runs any method of
:class:`~bayespmf.estimators.LatentClassPMF` this way.

Notes
-----
The EM map is a sum over rows, so the statistics of disjoint row sets add:
:math:`K = \sum_b K_b`, :math:`C = \sum_b C_b`, :math:`L = \sum_b L_b` (Chege et al.,
eqs. (5)-(6)). Only these ``(sum I_n) x F`` arrays travel between workers and client;
the numbers agree with the in-memory :func:`~bayespmf.fit.fit_em` up to the
order of floating-point summation (relative differences ~1e-15 per step).

The compiled E-step is one PyTensor function with the data as *inputs* (no shared
variables, no baked-in constants), compiled once per worker thread and reused for every
chunk and every data set.

Requires the ``dask`` extra: ``pip install "bayespmf[dask]"``.
"""

from __future__ import annotations

import functools
import threading
from typing import NamedTuple

import numpy as np

from bayespmf._validation import DataValidationError, as_codes, check_int
from bayespmf.dask._data import (
    SPLIT_EVERY,
    DaskCategoricalData,
    check_ddata,
    check_split_every,
    compute_on,
    persist_on,
    tree_reduce,
)
from bayespmf.dask.marginals import pairwise_marginals, triple_marginals
from bayespmf.fit.em import em_runner, em_start
from bayespmf.fit.multistart import LatentClassFit
from bayespmf.fit.source import register_source
from bayespmf.kernels.em import (
    COUNT_FLOOR,
    EStepStats,
    check_step_args,
    normalize_blocks,
)
from bayespmf.pmf import LatentClassParams, observed_csr, offsets_of

__all__ = [
    "DaskEMKernel",
    "DaskLatentClassFit",
    "DaskSource",
    "fit_em_dask",
    "fit_latent_class",
]


class _ChunkCSR(NamedTuple):
    """A chunk's observed entries in the CSR layout of the E-step Op."""

    indptr: np.ndarray  # (rows with >= 1 observed entry + 1,)
    indices: np.ndarray  # flat indices offsets[n] + x_n
    n_samples: int  # rows of the chunk, all-missing ones included
    observed: np.ndarray  # (N,) observed entries per variable


def _prepare_chunk(block, n_cat) -> _ChunkCSR:
    block = np.asarray(block)
    if block.ndim == 2 and block.shape[0] == 0:
        empty = np.zeros(1, dtype=np.int64)
        return _ChunkCSR(empty, empty[:0], 0, np.zeros(n_cat.size, dtype=np.int64))
    codes, _ = as_codes(
        block, n_cat, name="codes", allow_empty_rows=True, allow_empty_columns=True
    )
    indptr, indices = observed_csr(codes, n_cat, drop_empty=True)
    return _ChunkCSR(indptr, indices, int(codes.shape[0]), (codes >= 0).sum(axis=0))


def _chunk_summary(csr: _ChunkCSR):
    return csr.n_samples, int(csr.indptr.size - 1), csr.observed


def _sum_tuples(*parts):
    return tuple(functools.reduce(lambda x, y: x + y, items) for items in zip(*parts))


_LOCAL = threading.local()


def _estep_function():
    """The compiled E-step, one per thread (PyTensor functions are not re-entrant)."""
    fn = getattr(_LOCAL, "estep", None)
    if fn is None:
        import pytensor
        import pytensor.tensor as pt

        lw, la = pt.dvector("log_weights"), pt.dmatrix("log_factors")
        indptr, indices = pt.lvector("indptr"), pt.lvector("indices")
        outs = EStepStats(with_counts=True)(lw, la, indptr, indices)
        fn = pytensor.function([lw, la, indptr, indices], outs)
        _LOCAL.estep = fn
    return fn


def _chunk_stats(csr: _ChunkCSR, log_params):
    """E-step statistics ``(K, C, loglik)`` of one chunk."""
    log_w, log_a = log_params
    if csr.indptr.size == 1:  # no observed entry in this chunk
        return np.zeros_like(log_a), np.zeros_like(log_w), 0.0
    # arrays deserialized by dask.distributed may be unaligned views of a message
    # buffer, which PyTensor's C code refuses: copy those (they are small or, for the
    # chunk, copied once per step at most)
    args = [np.require(x, requirements=("C", "A")) for x in (log_w, log_a, *csr[:2])]
    counts, totals, ll = _estep_function()(*args)
    return np.array(counts), np.array(totals), float(ll)


class DaskEMKernel:
    """The EM map of the latent-class PMF over chunked data.

    The counterpart of :class:`bayespmf.kernels.em.EMKernel`, with the same ``step``
    and ``loglik`` interface (so :func:`~bayespmf.kernels.squarem.squarem_pmf_step`
    accelerates it unchanged). Building it reads every chunk once: the chunks are
    validated, turned into the E-step's CSR layout and (with ``persist=True``) kept in
    the scheduler's memory.

    Parameters
    ----------
    ddata : DaskCategoricalData
    n_components : int
    client : dask.distributed.Client, optional
        Scheduler; Dask's current default when omitted.
    split_every : int, default SPLIT_EVERY
        Fan-in of the tree reduction of the statistics.
    persist : bool, default True
        Keep the prepared chunks in memory (about 8 bytes per observed entry). With
        ``False`` every EM step recomputes the chunks from ``ddata``'s graph (e.g.
        re-reads files or re-generates them), so memory stays at a few chunks.

    Attributes
    ----------
    n_categories, offsets, rank
    n_samples : int
        All rows.
    n_rows : int
        Rows with at least one observed entry (the others carry no information).

    Raises
    ------
    DataValidationError
        Invalid codes in a chunk, a variable that is never observed, or no observed
        entry at all.
    """

    def __init__(
        self,
        ddata: DaskCategoricalData,
        n_components: int,
        *,
        client=None,
        split_every: int = SPLIT_EVERY,
        persist: bool = True,
    ):
        from dask import delayed

        owner = "DaskEMKernel"
        ddata = check_ddata(ddata, owner)
        self.n_components = check_int(n_components, "n_components", owner=owner, low=1)
        self.split_every = check_split_every(split_every, owner)
        self.n_categories = ddata.n_categories
        self.offsets = offsets_of(self.n_categories)
        self.client = client
        n_cat = self.n_categories
        chunks = [delayed(_prepare_chunk, pure=True)(b, n_cat) for b in ddata.blocks()]
        if persist:
            chunks = persist_on(chunks, client)
        self._chunks = chunks
        summary = tree_reduce(
            [delayed(_chunk_summary, pure=True)(c) for c in chunks],
            _sum_tuples,
            self.split_every,
        )
        n_samples, n_rows, observed = compute_on(summary, client)
        never = np.flatnonzero(np.asarray(observed) == 0)
        if never.size:
            raise DataValidationError(
                f"Variable(s) {never.tolist()} of 'ddata' are never observed (every "
                "entry is missing). Drop those columns first."
            )
        self.n_samples = int(n_samples)
        self.n_rows = int(n_rows)

    def _check(self, weights, factors_stacked):
        return check_step_args(
            weights, factors_stacked, self.offsets, self.n_components, "DaskEMKernel"
        )

    def statistics(self, weights, factors_stacked):
        """E-step statistics summed over the chunks.

        Returns
        -------
        counts : ndarray, shape (sum I_n, F)
            Expected counts ``K``.
        class_totals : ndarray, shape (F,)
            ``C``.
        loglik : float
            Log-likelihood of the input parameters.
        """
        from dask import delayed

        w, a = self._check(weights, factors_stacked)
        with np.errstate(divide="ignore"):
            log_params = delayed((np.log(w), np.log(a)), pure=True)
        parts = [delayed(_chunk_stats, pure=True)(c, log_params) for c in self._chunks]
        counts, totals, ll = compute_on(
            tree_reduce(parts, _sum_tuples, self.split_every), self.client
        )
        return counts, totals, float(ll)

    def step(self, weights, factors_stacked):
        """Apply the EM map once: ``(weights, factors_stacked, loglik_of_input)``."""
        counts, totals, ll = self.statistics(weights, factors_stacked)
        w_new = (totals + COUNT_FLOOR) / (self.n_rows + self.n_components * COUNT_FLOOR)
        return w_new, normalize_blocks(counts + COUNT_FLOOR, self.offsets), ll

    def loglik(self, weights, factors_stacked) -> float:
        """Log-likelihood of the parameters (sum over all rows)."""
        return self.statistics(weights, factors_stacked)[2]


def fit_em_dask(
    ddata: DaskCategoricalData,
    n_components: int,
    *,
    init=None,
    accelerate=None,
    max_iter: int = 500,
    tol: float = 1e-8,
    random_state=None,
    client=None,
    split_every: int = SPLIT_EVERY,
    persist: bool = True,
    progressbar: bool = False,
    callback=None,
):
    """Maximum-likelihood latent-class PMF of chunked data by EM or SQUAREM-PMF.

    The distributed counterpart of :func:`bayespmf.kernels.em.fit_em`: the same
    arguments, start, stopping rule and return values, and the same iterates up to
    floating-point summation order.

    Parameters
    ----------
    ddata : DaskCategoricalData
    n_components : int
    init : LatentClassParams, optional
        Default a RAND-EM start from ``random_state`` (as ``fit_em``).
    accelerate : {None, "squarem"}
    max_iter : int, default 500
    tol : float, default 1e-8
    random_state : None, int or numpy.random.Generator
    client : dask.distributed.Client, optional
    split_every : int, default SPLIT_EVERY
    persist : bool, default True
        See :class:`DaskEMKernel`.
    progressbar : bool, default False
    callback : callable, optional
        ``callback(iteration, EMState)``; returning ``True`` stops the fit.

    Returns
    -------
    params : LatentClassParams
    info : EMInfo
        As from :func:`bayespmf.fit.fit_em` on the computed rows.

    Raises
    ------
    ValueError
        Bad arguments, or invalid data (``DataValidationError``).

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` is reached before the tolerance.
    """
    owner = "fit_em_dask"
    n_components, run = em_runner(
        accelerate, n_components, max_iter, tol, callback, progressbar, owner
    )
    ddata = check_ddata(ddata, owner)
    n_cat = ddata.n_categories
    w, a = em_start(init, n_cat, n_components, random_state)
    kernel = DaskEMKernel(
        ddata, n_components, client=client, split_every=split_every, persist=persist
    )
    return run(kernel, w, a, n_cat)


class DaskLatentClassFit(LatentClassFit):
    """What :func:`fit_latent_class` returns: a LatentClassFit and the fitted estimator.

    A :class:`~bayespmf.fit.LatentClassFit` (``params``, ``loglik``, ``n_iter``,
    ``loglik_trace``, ``converged``, ``info``, ``optima``, ...), as
    :func:`bayespmf.fit.fit_latent_class` returns on rows in memory, that also answers
    as the fitted :class:`~bayespmf.estimators.LatentClassPMF` it was read from
    (``estimator``): its attributes and methods (``weights_``, ``factors_``,
    ``variable_names_``, ``predict_proba``, ``score``, ...) are the estimator's, so the
    result is a start bound by name for :func:`bayespmf.models.sample` and usable on
    in-memory rows.

    Examples
    --------
    >>> import dask
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(400, 3, n_components=2, n_variables=4, random_state=0)
    >>> ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=200)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     fit = fit_latent_class(ddata, 2, random_state=0)
    >>> isinstance(fit, LatentClassFit), fit.n_iter == fit.n_iter_
    (True, True)
    """

    @classmethod
    def from_estimator(cls, est) -> DaskLatentClassFit:
        """The fit of a fitted ``LatentClassPMF``, its fields read from its attributes."""
        params = LatentClassParams(est.weights_, est.factors_)
        fit = cls(
            params,
            est.loglik_,
            est.n_iter_,
            est.loglik_trace_,
            est.converged_,
            est.info_,
            est.optima_,
            est.n_init_best_,
            est.optima_params_,
        )
        fit.estimator = est
        return fit

    def __getattr__(self, name):
        est = self.__dict__.get("estimator")
        if est is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(est, name)


def fit_latent_class(
    ddata: DaskCategoricalData,
    n_components: int,
    method: str = "cnmf-spa-em",
    *,
    max_iter: int | None = None,
    tol: float | None = None,
    random_state=None,
    client=None,
    split_every: int = SPLIT_EVERY,
    persist: bool = True,
    progressbar: bool = False,
) -> DaskLatentClassFit:
    """:func:`bayespmf.fit.fit_latent_class` on chunked data, every pass distributed.

    Runs the stages of ``LatentClassPMF(rank, method, ...).fit`` with every pass over
    the data distributed: CNMF-SPA / CNMF-OPT on the map-reduced pairwise marginals,
    EM / SQUAREM-PMF with :class:`DaskEMKernel`. With the same ``random_state`` the
    fit equals the in-memory one up to floating-point summation order.

    Parameters
    ----------
    ddata : DaskCategoricalData
    n_components : int
    method : str, default "cnmf-spa-em"
        One of :data:`bayespmf.estimators.latent_class.METHODS`. The default is not
        the in-memory ``"auto"`` (many starts): it runs here too, but every EM
        iteration of every start is a pass over the chunks, which makes it far slower
        than in memory; ``"cnmf-spa-em"`` runs one CNMF-SPA start, then EM
        (:ref:`bench-dask-fit`).
    max_iter, tol, random_state, progressbar
        As for ``LatentClassPMF``.
    client, split_every, persist
        As for :func:`fit_em_dask`.

    Returns
    -------
    DaskLatentClassFit
        A :class:`~bayespmf.fit.LatentClassFit`, as the in-memory
        :func:`bayespmf.fit.fit_latent_class` returns, that also answers as the fitted
        ``LatentClassPMF`` (``n_iter_``, ``loglik_trace_``, ``converged_``,
        ``info_``, ``fit_time_``, ``predict_proba``, ``score``, ...; usable on
        in-memory data).

    Raises
    ------
    DataValidationError
        Invalid data, a never observed variable, or a rank that cannot be identified.
    ValueError
        Bad ``method``, ``max_iter`` or ``tol``.

    Warns
    -----
    ConvergenceWarning
        When the iterative stage stops at ``max_iter``.

    Examples
    --------
    >>> import dask
    >>> from bayespmf.datasets import make_latent_class
    >>> data, _ = make_latent_class(600, 3, n_components=2, n_variables=4, random_state=0)
    >>> ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=250)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     fit = fit_latent_class(ddata, 2, "cnmf-spa-em", random_state=0)
    >>> fit.params.weights.shape, fit.predict_proba(data[:3], target=0).shape
    ((2,), (3, 3))
    """
    from bayespmf.estimators import LatentClassPMF

    ddata = check_ddata(ddata, "fit_latent_class")
    est = LatentClassPMF(
        n_components,
        method=method,
        max_iter=max_iter,
        tol=tol,
        random_state=random_state,
        progressbar=progressbar,
    )
    source = DaskSource(ddata, client=client, split_every=split_every, persist=persist)
    return DaskLatentClassFit.from_estimator(est.fit(source))


class DaskSource:
    """The data passes of ``LatentClassPMF`` over chunked data (map-reduce per pass).

    A data source of :func:`bayespmf.fit.fit_latent_class` (see
    :mod:`bayespmf.fit.source`). Registered there for :class:`DaskCategoricalData`
    (with the default scheduler options), so that ``LatentClassPMF().fit(ddata)`` and
    ``bayespmf.fit.fit_latent_class(ddata, ...)`` fit chunk by chunk, as
    :func:`fit_latent_class` here does.
    """

    def __init__(self, ddata, *, client, split_every, persist):
        self.ddata = ddata
        self.n_categories = ddata.n_categories
        self.names, self.categories = list(ddata.names), list(ddata.categories)
        self._kw = {"client": client, "split_every": split_every}
        self._persist = persist
        self.weight_scale = 1.0  # unweighted rows (as an in-memory source)

    def pairwise_marginals(self):
        """Pairwise marginals of the chunks (:func:`bayespmf.dask.pairwise_marginals`)."""
        return pairwise_marginals(self.ddata, **self._kw)

    def triple_marginals(self):
        """Triple marginals of the chunks (:func:`bayespmf.dask.triple_marginals`)."""
        return triple_marginals(self.ddata, **self._kw)

    def categorical(self):
        """Refused: the methods that need the rows in memory do not run on chunks."""
        raise DataValidationError(
            "This method needs the rows in memory (JUROR and AD-EM draw on the rows "
            "themselves); use an EM, CNMF or CTD method with Dask data, or "
            "LatentClassPMF.fit(ddata.compute())."
        )

    def em_kernel(self, n_components, backend="auto"):
        """The distributed EM map (:class:`DaskEMKernel`; ``backend`` is not used)."""
        return DaskEMKernel(self.ddata, n_components, persist=self._persist, **self._kw)


# the fit layer turns a DaskCategoricalData into this source (it cannot import Dask)
register_source(
    DaskCategoricalData,
    lambda ddata: DaskSource(ddata, client=None, split_every=SPLIT_EVERY, persist=True),
)
