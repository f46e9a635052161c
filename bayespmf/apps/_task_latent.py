"""The latent-class point estimates of the tasks, selected on the validation part.

:func:`select_latent` fits one method of :mod:`bayespmf.fit` at every rank of the
grid, scores its iterates at :data:`ITER_CHECKPOINTS` on the validation part of a split
(:mod:`bayespmf.apps._splits`), and keeps the best (rank, iterate), and the best
iterate at every rank (the starts of the posteriors). The methods that start from
CNMF-SPA (:data:`SPA_METHODS`) are fitted from every CNMF-SPA start of
:data:`SPA_STARTS` asked for, and the start is selected with the rank and the iterate.
:func:`params_proba` turns a point estimate into the ``proba(codes, j)`` the splits
score.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np

from bayespmf._validation import ConvergenceWarning, DataValidationError
from bayespmf.fit.cnmf import cnmf_opt
from bayespmf.fit.defaults import DEFAULT_MAX_ITER, DEFAULT_TOL
from bayespmf.fit.em import fit_em
from bayespmf.fit.latent_class import EM_METHODS, max_identifiable_rank
from bayespmf.fit.multistart import floor_params
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.marginals import pairwise_marginals
from bayespmf.pmf import LatentClassParams, conditional_pmf, split_factors

#: Iterations at which an EM-based fit is scored on the validation part, besides its
#: last iterate: "the number of iterations is chosen on the validation set" (Sec. 5.3).
#: Roughly geometric so the cost stays a few evaluations per fit.
ITER_CHECKPOINTS = (5, 10, 20, 50, 100, 200, 500)

#: Methods whose last stage is one EM run (their iteration count is selected on
#: validation): the EM-based methods of bayespmf.fit but the multi-start "auto".
ONE_RUN_EM_METHODS = tuple(m for m in EM_METHODS if m != "auto")

#: Methods started from a CNMF-SPA estimate (or, for "cnmf-spa", that estimate
#: itself): their start is chosen on validation among :data:`SPA_STARTS`.
SPA_METHODS = ("cnmf-spa", "cnmf-spa-em", "cnmf-spa-squarem", "cnmf-opt")

#: ``M`` of the paper's fixed CNMF-SPA split: "We set M = 5 for all datasets"
#: (Ibrahim & Fu, Sec. 5.3).
PAPER_SPLIT_M = 5

#: ``ridge`` of the regularized CNMF-SPA starts (:func:`bayespmf.kernels.cnmf_spa.cnmf_spa`,
#: Notes, "Regularized H"). On UCI Car CNMF-SPA-EM classified better from a
#: regularized start than from the exact one, about equally for any ridge from 0.003 to
#: 0.1; 0.01 is within that flat range, not tuned to its best point
#: (:ref:`bench-cnmf`).
START_RIDGE = 0.01

#: The CNMF-SPA starts, by name: the split rule and the ``ridge`` of
#: :func:`~bayespmf.kernels.cnmf_spa.cnmf_spa`.
#:
#: * ``"bootstrap"``: the package's default, the split chosen among candidates by a
#:   parametric bootstrap, exact NNLS (what :class:`LatentClassPMF` fits);
#: * ``"paper"``: the paper's fixed split, ``S1`` the first :data:`PAPER_SPLIT_M`
#:   variables of the authors' layout (the classified variable first, then the others
#:   in order; for ratings the movies in order), ``S2`` the rest;
#: * ``"bootstrap-ridge"``, ``"paper-ridge"``: the same splits with the H step
#:   regularized (``ridge=START_RIDGE``), the deterministic form of the authors'
#:   early-stopped projected gradient (``SingleSPA.m``).
#:
#: "The rank F ... and the number of iterations ... are chosen using the validation
#: set" (Sec. 5.3): the start is one more setting of the same kind, chosen the same way.
SPA_STARTS = {
    "bootstrap": ("bootstrap", 0.0),
    "paper": ("paper", 0.0),
    "bootstrap-ridge": ("bootstrap", START_RIDGE),
    "paper-ridge": ("paper", START_RIDGE),
}

#: The starts :func:`select_latent` considers by default (the tasks' ``spa_starts``).
DEFAULT_SPA_STARTS = tuple(SPA_STARTS)


def params_proba(params: LatentClassParams) -> Callable:
    """``proba(codes, j)`` of a point estimate.

    A row that has probability zero under every class gets the model's marginal PMF of
    the target (``bayespmf.pmf.posterior_classes`` falls back to the prior).
    """

    def proba(codes, j):
        with np.errstate(divide="ignore"):
            return conditional_pmf(codes, params.weights, params.factors, j)

    return proba


def fit_latent(method, train, n_components, seed, max_iter, tol, on_checkpoint):
    """Fit one method, calling ``on_checkpoint(n_iter, params)`` along the way.

    It is called at the iterations of :data:`ITER_CHECKPOINTS` (EM-based methods) and
    at the end.

    The EM-based methods run exactly the stages of :class:`LatentClassPMF` (same random
    stream, same start, same EM), with a callback to score intermediate iterates.

    Returns ``(n_iter, converged)``.
    """
    from bayespmf.estimators import LatentClassPMF

    checkpoints = set(ITER_CHECKPOINTS) if method in ONE_RUN_EM_METHODS else set()
    callback = _checkpoint_callback(checkpoints, train.n_categories, on_checkpoint)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = LatentClassPMF(
            n_components, method, max_iter=max_iter, tol=tol, random_state=seed
        )
        est.fit(train, callback=callback)
    reraise_others(caught)
    if est.n_iter_ not in checkpoints:
        on_checkpoint(est.n_iter_, est.params_)
    return est.n_iter_, est.converged_


def _checkpoint_callback(checkpoints, n_cat, on_checkpoint):
    """An EM ``callback(it, state)`` that scores the iterates in ``checkpoints``."""

    def callback(it, state):
        if it in checkpoints:
            params = LatentClassParams(
                state.weights, split_factors(state.factors_stacked, n_cat)
            )
            on_checkpoint(it, params)

    return callback


def reraise_others(caught):
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def check_spa_starts(spa_starts) -> tuple[str, ...]:
    """The names of ``spa_starts`` (a sequence of :data:`SPA_STARTS` keys), checked.

    Examples
    --------
    >>> check_spa_starts(["paper", "bootstrap"])
    ('paper', 'bootstrap')
    >>> check_spa_starts(["papr"])
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: Unknown CNMF-SPA start 'papr'; ...
    """
    if isinstance(spa_starts, str) or not hasattr(spa_starts, "__iter__"):
        raise DataValidationError(
            f"'spa_starts' must be a sequence of names from {list(SPA_STARTS)}; got "
            f"{spa_starts!r}."
        )
    names = tuple(spa_starts)
    for name in names:
        if name not in SPA_STARTS:
            raise DataValidationError(
                f"Unknown CNMF-SPA start {name!r}; choose from {list(SPA_STARTS)}."
            )
    if not names or len(set(names)) != len(names):
        raise DataValidationError(
            f"'spa_starts' must name at least one start, each once; got {names!r}."
        )
    return names


def paper_split(n_vars: int, first=None, m: int = PAPER_SPLIT_M):
    """The paper's fixed CNMF-SPA split: ``S1`` the first ``m`` variables, ``S2`` the rest.

    The variables in the authors' layout: ``first`` (the classified variable) first,
    then the others in order. None when there are at most ``m`` variables.

    Examples
    --------
    >>> paper_split(7, first=0)
    ((0, 1, 2, 3, 4), (5, 6))
    >>> paper_split(8, first=6)
    ((6, 0, 1, 2, 3), (4, 5, 7))
    >>> paper_split(5) is None
    True
    """
    order = list(range(n_vars))
    if first is not None:
        order.remove(first)
        order.insert(0, first)
    if n_vars <= m:
        return None
    return tuple(order[:m]), tuple(order[m:])


def spa_start(name, split, n_components, seed, marginals):
    """The CNMF-SPA estimate of the start ``name`` (:data:`SPA_STARTS`) on ``split.train``.

    Raises DataValidationError when the start's split cannot identify ``n_components`` (or
    data have too few variables for the paper's split).
    """
    rule, ridge = SPA_STARTS[name]
    fixed = None
    if rule == "paper":
        fixed = paper_split(len(split.n_cat), getattr(split, "j", None))
        if fixed is None:
            raise DataValidationError(
                f"the paper's split needs more than {PAPER_SPLIT_M} variables"
            )
    params, _ = cnmf_spa(
        marginals, n_components, split=fixed, ridge=ridge, random_state=seed
    )
    return params


def fit_from_start(
    method, train, marginals, n_components, start, seed, max_iter, tol, on_checkpoint
):
    """The stage of ``method`` after CNMF-SPA, from the CNMF-SPA estimate ``start``.

    As :func:`fit_latent` (the same stages and defaults as :class:`LatentClassPMF`,
    whose CNMF-SPA start is the ``"bootstrap"`` one): ``"cnmf-spa"`` is the start
    (floored), the EM methods run EM (or SQUAREM-PMF) from it on the rows of
    ``train`` (entirely missing rows dropped, as the estimator does), scored at
    :data:`ITER_CHECKPOINTS`, ``"cnmf-opt"`` runs CNMF-OPT from it on ``marginals``
    (``train``'s pairwise marginals). Returns ``(n_iter, converged)``.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        out = _stage_from_start(
            method,
            train,
            marginals,
            n_components,
            start,
            seed,
            max_iter,
            tol,
            on_checkpoint,
        )
    reraise_others(caught)
    return out


def _stage_from_start(
    method, train, marginals, n_components, start, seed, max_iter, tol, on_checkpoint
):
    if method == "cnmf-spa":
        on_checkpoint(0, floor_params(start))
        return 0, True
    if method == "cnmf-opt":
        params, info = cnmf_opt(
            marginals,
            n_components,
            init=start,
            max_iter=DEFAULT_MAX_ITER["cnmf-opt"] if max_iter is None else max_iter,
            tol=DEFAULT_TOL["cnmf-opt"] if tol is None else tol,
            random_state=seed,
        )
        on_checkpoint(int(info["n_iter"]), floor_params(params))
        return int(info["n_iter"]), bool(info["converged"])
    stage = "squarem" if method == "cnmf-spa-squarem" else "em"
    checkpoints = set(ITER_CHECKPOINTS)
    callback = _checkpoint_callback(checkpoints, train.n_categories, on_checkpoint)

    params, info = fit_em(
        train.drop_empty_rows(),
        n_components,
        init=floor_params(start),
        accelerate="squarem" if stage == "squarem" else None,
        max_iter=DEFAULT_MAX_ITER[stage] if max_iter is None else max_iter,
        tol=DEFAULT_TOL[stage] if tol is None else tol,
        random_state=seed,
        callback=callback,
    )
    if info.n_iter not in checkpoints:
        on_checkpoint(info.n_iter, params)
    return info.n_iter, bool(info.converged)


def select_latent(method, split, candidates, seed, max_iter, tol, spa_starts=None):
    """Fit ``method`` at every rank; keep the (rank, iterate) best on validation.

    A method of :data:`SPA_METHODS` is fitted from every CNMF-SPA start named in
    ``spa_starts`` (default :data:`DEFAULT_SPA_STARTS`) at every rank, and the
    (start, rank, iterate) best on validation is kept; a tie goes to the start named
    first, then to the lower rank and the earlier iterate. The result's ``start`` names
    the start; ``by_start`` holds the best (rank, iterate) of every start.
    """
    starts = (None,)
    if method in SPA_METHODS:
        starts = check_spa_starts(DEFAULT_SPA_STARTS if spa_starts is None else spa_starts)
    best = {"score": -np.inf}
    limit = max_identifiable_rank(split.n_cat)
    notes = []
    n_not_converged = 0
    per_fit = {}
    by_rank = {}
    by_start = {}
    marginals = []  # train's pairwise marginals, computed once when a start needs them
    t_all = time.perf_counter()
    for start in starts:
        for n_components in candidates:
            if n_components > limit:
                if start == starts[0]:
                    notes.append(f"rank {n_components} > identifiable {limit}, skipped")
                continue
            t0 = time.perf_counter()

            def on_checkpoint(it, params, n_components=n_components, start=start):
                m = split.evaluate_proba(params_proba(params), "val")
                s = split.score(m)
                rec = {
                    "score": s,
                    "n_components": n_components,
                    "n_iter": it,
                    "params": params,
                }
                if s > best["score"]:
                    best.update(rec, start=start)
                # the best iterate of every rank: starts of posteriors at several ranks
                if s > by_rank.get(n_components, {"score": -np.inf})["score"]:
                    by_rank[n_components] = {"score": s, "n_iter": it, "params": params}
                if s > by_start.get(start, {"score": -np.inf})["score"]:
                    by_start[start] = rec

            try:
                if start in (None, "bootstrap"):  # the estimator's own stages
                    _, converged = fit_latent(
                        method,
                        split.train,
                        n_components,
                        seed,
                        max_iter,
                        tol,
                        on_checkpoint,
                    )
                else:
                    if not marginals:
                        marginals.append(pairwise_marginals(split.train))
                    spa = spa_start(start, split, n_components, seed, marginals[0])
                    _, converged = fit_from_start(
                        method,
                        split.train,
                        marginals[0],
                        n_components,
                        spa,
                        seed,
                        max_iter,
                        tol,
                        on_checkpoint,
                    )
            except DataValidationError as err:
                where = (
                    f"rank {n_components}"
                    if start is None
                    else f"start {start}, rank {n_components}"
                )
                notes.append(f"{where}: {err}")
                continue
            n_not_converged += not converged
            per_fit[start, n_components] = time.perf_counter() - t0
    if "params" not in best:
        raise DataValidationError(
            f"No rank in {candidates} could be fitted by {method!r}: {'; '.join(notes)}"
        )
    best["fit_s"] = per_fit[best["start"], best["n_components"]]
    best["total_s"] = time.perf_counter() - t_all
    best["not_converged"] = n_not_converged
    best["notes"] = notes
    best["by_rank"] = by_rank
    best["by_start"] = by_start
    return best
