"""The latent-class point estimates of the tasks, selected on the validation part.

:func:`select_latent` fits one method of :mod:`bayespmf.fit` at every rank of the
grid, scores its iterates at :data:`ITER_CHECKPOINTS` on the validation part of a split
(:mod:`bayespmf.apps._splits`), and keeps the best (rank, iterate), and the best
iterate at every rank (the starts of the posteriors). :func:`params_proba` turns a
point estimate into the ``proba(codes, j)`` the splits score.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np

from bayespmf._validation import ConvergenceWarning, DataValidationError
from bayespmf.fit.latent_class import EM_METHODS, max_identifiable_rank
from bayespmf.pmf import LatentClassParams, conditional_pmf, split_factors

#: Iterations at which an EM-based fit is scored on the validation part, besides its
#: last iterate: "the number of iterations is chosen on the validation set" (Sec. 5.3).
#: Roughly geometric so the cost stays a few evaluations per fit.
ITER_CHECKPOINTS = (5, 10, 20, 50, 100, 200, 500)

#: Methods whose last stage is one EM run (their iteration count is selected on
#: validation): the EM-based methods of bayespmf.fit but the multi-start "auto".
ONE_RUN_EM_METHODS = tuple(m for m in EM_METHODS if m != "auto")


def params_proba(params: LatentClassParams) -> Callable:
    """``proba(codes, j)`` of a point estimate.

    A row that has probability zero under every class gets the model's marginal PMF of
    the target (``bayespmf.pmf.posterior_classes`` falls back to the prior).
    """

    def proba(codes, j):
        with np.errstate(divide="ignore"):
            return conditional_pmf(codes, params.weights, params.factors, j)

    return proba


def fit_latent(method, train, rank, seed, max_iter, tol, on_checkpoint):
    """Fit one method, calling ``on_checkpoint(n_iter, params)`` along the way.

    It is called at the iterations of :data:`ITER_CHECKPOINTS` (EM-based methods) and
    at the end.

    The EM-based methods run exactly the stages of :class:`LatentClassPMF` (same random
    stream, same start, same EM), with a callback to score intermediate iterates.

    Returns ``(n_iter, converged)``.
    """
    from bayespmf.estimators import LatentClassPMF

    checkpoints = set(ITER_CHECKPOINTS) if method in ONE_RUN_EM_METHODS else set()
    n_cat = train.n_categories

    def callback(it, state):
        if it in checkpoints:
            on_checkpoint(
                it,
                LatentClassParams(
                    state.weights, split_factors(state.factors_stacked, n_cat)
                ),
            )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = LatentClassPMF(rank, method, max_iter=max_iter, tol=tol, random_state=seed)
        est.fit(train, callback=callback)
    reraise_others(caught)
    if est.n_iter_ not in checkpoints:
        on_checkpoint(est.n_iter_, est.params_)
    return est.n_iter_, est.converged_


def reraise_others(caught):
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def select_latent(method, split, ranks, seed, max_iter, tol):
    """Fit ``method`` at every rank; keep the (rank, iterate) best on validation."""
    best = {"score": -np.inf}
    limit = max_identifiable_rank(split.n_cat)
    notes = []
    n_not_converged = 0
    per_rank = {}
    by_rank = {}
    t_all = time.perf_counter()
    for rank in ranks:
        if rank > limit:
            notes.append(f"rank {rank} > identifiable {limit}, skipped")
            continue
        t0 = time.perf_counter()

        def on_checkpoint(it, params, rank=rank, t0=t0):
            m = split.evaluate_proba(params_proba(params), "val")
            s = split.score(m)
            if s > best["score"]:
                best.update(score=s, rank=rank, n_iter=it, params=params, t0=t0)
            # the best iterate of every rank: starts of posteriors at several ranks
            if s > by_rank.get(rank, {"score": -np.inf})["score"]:
                by_rank[rank] = {"score": s, "n_iter": it, "params": params}

        try:
            _, converged = fit_latent(
                method, split.train, rank, seed, max_iter, tol, on_checkpoint
            )
        except DataValidationError as err:
            notes.append(f"rank {rank}: {err}")
            continue
        n_not_converged += not converged
        per_rank[rank] = time.perf_counter() - t0
    if "params" not in best:
        raise DataValidationError(
            f"No rank in {ranks} could be fitted by {method!r}: {'; '.join(notes)}"
        )
    best["fit_s"] = per_rank[best["rank"]]
    best["total_s"] = time.perf_counter() - t_all
    best["not_converged"] = n_not_converged
    best["notes"] = notes
    best["by_rank"] = by_rank
    return best
