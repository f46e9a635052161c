r"""NMF by purification (Li, Liang, Risteski, Alg. 1) under the one loop, with a guard.

Alg. 1 has no objective and no stopping rule, and Theorems 1-2 hold only in a regime
that the data may not meet: fresh examples at every iteration (``N = poly(n, m,
1/epsilon, 1/delta)`` of them) and noise below :math:`G c / \max\{m, n\|(A^*)^\dagger
\|_\infty\}` (adversarial, (N1)) or :math:`\sqrt n` times that (unbiased, (N2)). On a
fixed data set outside that regime the iterates can end farther from the ground truth
than the warm start. :func:`purification` therefore runs Alg. 1 as the paper states it
and, with ``guard=True`` (the default), watches it with data-only checks and warns
(:class:`PurificationWarning`) when it cannot vouch for the result; see its Notes.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from bayespmf._validation import (
    ConvergenceWarning,
    DataValidationError,
    check_float,
    check_int,
    check_random_state,
)
from bayespmf.fit.loop import iterate
from bayespmf.kernels.purification import (
    PurificationProblem,
    PurificationState,
    balance_columns,
    check_matrix,
    decoding_spread,
    feature_distance,
    min_inf_pinv,
    purification_step,
    span_residual,
)

__all__ = [
    "DEFAULT_PURIFICATION_MAX_ITER",
    "PurificationWarning",
    "noise_allowance",
    "purification",
]

#: Iterations T of Alg. 1 when ``max_iter`` is None.
DEFAULT_PURIFICATION_MAX_ITER = 100

#: The guard stops when the share of the data outside the span of the features
#: (``span_residual``) exceeds its smallest value so far by this fraction: a converging
#: run moves it by less, a run whose features turn away from the data's subspace (the
#: failure of Alg. 1 under heavy noise) raises it steadily past it.
RISE_TOL = 0.01

#: Rises of the span residual below this (a share of the data's energy) are rounding:
#: in the noiseless model the residual is 0 and its computed value ~1e-16.
RESIDUAL_FLOOR = 1e-10

#: The sampling check confirms an improvement on the warm start only when the distance
#: moved exceeds this multiple of the split-half estimate of the result's error: 2 for
#: the triangle inequality (d >= 2 e_T rules out e_T > e_0), times 2 because the result's
#: error is one draw of a random norm whose typical size the estimate gives, and a draw
#: of twice its typical size is rare but not negligible.
SAMPLING_FACTOR = 4.0

#: Frames in this package are skipped when a warning names the caller's line.
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep


class PurificationWarning(ConvergenceWarning):
    """Purification's result may be farther from the ground truth than its warm start.

    Raised by :func:`purification` (and ``PurificationNMF.fit``) with the numbers of
    the data-only check that failed: the data's subspace left, noise above what
    Theorems 1-2 allow, or a sampling error as large as the distance moved.
    """


def _all_iterations(trace, info, tol) -> bool:
    """Alg. 1 has no stopping rule: it runs its T iterations."""
    return False


def noise_allowance(components) -> tuple[float, float]:
    r"""The largest noise levels :math:`C_\nu` Theorems 1 and 2 allow, with G = c = 1.

    Theorem 1 (adversarial noise (N1)) needs :math:`C_\nu \le G c / \max\{m,
    n\|(A^*)^\dagger\|_\infty\}` and Theorem 2 (unbiased noise (N2)) :math:`C_\nu \le
    G c \sqrt n / \max\{m, n\|(A^*)^\dagger\|_\infty\}`, for some :math:`0 \le c \le 1`
    and an absolute constant :math:`G` the paper does not give; both end with
    :math:`\|\hat A - A^*\|_1 \le \epsilon + 2c` after normalizing the columns.

    Parameters
    ----------
    components : array_like, shape (m, n)
        :math:`A^*` (or a warm start standing for it, in the same units: (A3) with
        :math:`\Sigma \approx I`).

    Returns
    -------
    (float, float)
        :math:`1/\max\{m, n\|(A^*)^\dagger\|_\infty\}` and :math:`\sqrt n` times it,
        with :math:`(A^*)^\dagger` the left inverse of minimum
        :math:`\|\cdot\|_\infty` norm.

    Examples
    --------
    >>> noise_allowance(np.eye(4)[:, :2])   # ||A^+||_inf = 1, max{m, n} = 4
    (0.25, 0.3535533905932738)
    """
    a = check_matrix(components, "components", "noise_allowance")
    m, n = a.shape
    kappa = max(m, n * float(np.abs(min_inf_pinv(a)).sum(axis=1).max()))
    return 1.0 / kappa, float(np.sqrt(n)) / kappa


def _noise_level(y: np.ndarray, a: np.ndarray) -> float:
    r"""RMS per coordinate of the rows' residual outside the span of ``a`` (nan if m = n).

    Under (A3) with :math:`N^{(0)} = 0` the warm start spans the signal, so this is
    the noise's RMS outside that span: :math:`C_\nu` for the :math:`\pm C_\nu`
    noise of (N2), a lower bound of :math:`C_\nu = \max |\nu_i|` in general.
    """
    m, n = a.shape
    if m == n:
        return float("nan")
    energy = span_residual(y, a) * float(np.einsum("ij,ij->", y, y))
    return float(np.sqrt(energy / (y.shape[0] * (m - n))))


def _run(problem, a, rng, max_iter, progressbar, owner, callback=None):
    """Alg. 1 for ``max_iter`` iterations: ``(last state, IterInfo)``."""
    return iterate(
        lambda s: purification_step(s, problem),
        PurificationState(a, rng),
        max_iter=max_iter,
        tol=0.0,
        desc="Purification",
        rule=_all_iterations,
        owner=owner,
        warn=False,
        progressbar=progressbar,
        callback=callback,
    )


def purification(
    y,
    init,
    *,
    max_iter: int | None = None,
    eta: float = 0.1,
    alpha: float = 0.1,
    r: float | None = None,
    balance: bool = True,
    batch_size: int | None = None,
    pinv_method: str = "min-inf",
    guard: bool = True,
    random_state=None,
    progressbar: bool = False,
    owner: str = "purification",
) -> tuple[np.ndarray, dict]:
    r"""Feature matrix of :math:`Y \approx A X` by the purification algorithm (Alg. 1).

    Parameters
    ----------
    y : array_like, shape (S, m)
        Data points :math:`y = A^* x^* + \nu`, one per row. Not modified.
    init : array_like, shape (m, n)
        Warm start :math:`A^{(0)}` (Assumption (A3): each column mostly its own
        ground-truth feature), e.g. SPA on the data points. Not modified.
    max_iter : int, optional
        Iterations T; ``DEFAULT_PURIFICATION_MAX_ITER`` (100) when None. Alg. 1 runs
        all of them; the guard may stop earlier (see Notes).
    eta : float, default 0.1
        Step size :math:`\eta \in (0, 1]`. The analysis takes :math:`\eta = \ell/6`
        (Sec. 5.2), :math:`\ell` the warm start's quality in (A3).
    alpha : float, default 0.1
        ReLU offset :math:`\alpha \ge 0` of the decoding (eq. (2)).
    r : float, optional
        Scaling factor; default :math:`n / \mathrm{tr}(A^\dagger \hat E[(y - y')
        (x - x')^\top])` at the (balanced) warm start: the update term
        :math:`r \hat E[\cdot]` then has, on average over columns, the scale of
        :math:`A` (its coefficient on each column of :math:`A` is 1 when :math:`A` is
        the truth), so the iterates keep their scale.
    balance : bool, default True
        Rescale the columns first so that the decoded weights have equal second
        moments (:func:`~bayespmf.kernels.purification.balance_columns`), and undo
        the scaling at the end.
    batch_size : int, optional
        Rows drawn (without replacement) per iteration (line 2); all rows by default.
    pinv_method : {"min-inf", "moore-penrose"}, default "min-inf"
        The left inverse of the decoding; Alg. 1 uses "min-inf".
    guard : bool, default True
        Watch the run with the data-only checks of the Notes: stop when the features
        leave the data's subspace and return the best iterate, and warn
        (:class:`PurificationWarning`) when the result may be worse than the warm
        start. False runs Alg. 1 alone: T iterations, the last iterate, no checks.
    random_state : None, int or numpy.random.Generator
        Seeds the batches and the guard's split of the rows.
    progressbar : bool, default False
    owner : str, default "purification"
        Who is calling, for the messages (``PurificationNMF`` passes its name).

    Returns
    -------
    a : ndarray, shape (m, n)
        The returned iterate :math:`A^{(t)}` (balancing undone): the last one, or
        with the guard stopping, the one with the smallest span residual.
    info : dict
        ``r`` (the scaling used), ``scale`` (the balancing diagonal D, ones when
        ``balance=False``), ``change`` (``||A^{(t+1)} - A^{(t)}||_1`` per iteration
        run, max column :math:`\ell_1` norm), ``best_iter`` (the ``t`` returned),
        and with ``guard``: ``criterion`` (the span residual of :math:`A^{(t)}` for
        ``t = 0, 1, ...``), ``stopped`` (the span residual rose), ``noise_level``,
        ``noise_allowance`` (Theorem 1's and 2's, :func:`noise_allowance` of the warm
        start), ``sampling_error``, ``distance_from_start`` and ``reasons`` (the
        checks that failed, as text; empty when none).

    Raises
    ------
    DataValidationError
        Malformed ``y`` or ``init``, mismatched shapes, dependent columns.
    ValueError
        A parameter outside its range.

    Warns
    -----
    PurificationWarning
        With ``guard``, when a check of the Notes fails (at most one warning, listing
        every failed check with its numbers).

    Notes
    -----
    **Alg. 1.** Line 3 decodes with :func:`~bayespmf.kernels.purification.min_inf_pinv`
    and :func:`~bayespmf.kernels.purification.relu_decode`; line 4's expectation over
    independent uniform pairs is computed exactly
    (:func:`~bayespmf.kernels.purification.pair_moment`). With exact decoding and no
    noise, :math:`\hat E[(y - y')(x - x')^\top] = 2 A^* \mathrm{Cov}(x^*)` (Sec. 4),
    so ``r`` converts it back to feature scale; Theorem 1 leaves ``r`` (and
    :math:`\alpha, \eta`) as constants "that exist", hence the data-driven default.
    The balancing step follows the idea of Sec. 6 (solve :math:`Y \approx [A^* D]
    [D^{-1} X]` with :math:`E[(x^*_i)^2] / D_{ii}^2` within a factor 2 of each
    other); its procedure is in the paper's appendix, not in our copy: we estimate
    the second moments from the warm start's decodings and scale so that the smallest
    stays put (the rescaled weights stay in :math:`[0, 1]` as (A2) requires), then
    return :math:`A D^{-1}`.

    **Which regime this runs in.** Line 2 draws *fresh* examples at every iteration
    and the theorems take ``N = poly(n, m, 1/epsilon, 1/delta)`` of them. A fixed
    data set cannot do that: by default every iteration uses all S rows, which is
    Alg. 1 on the empirical distribution of the rows. Its fixed point is not
    :math:`A^*`: the update relies on :math:`\mathrm{Cov}(x^*)` being diagonal
    ((A2), independent weights), while the sample covariance of S weight vectors has
    off-diagonal entries of order :math:`S^{-1/2}`. The error therefore falls
    geometrically only down to a floor of order :math:`S^{-1/2}` (lower with more
    rows), and may rise again on the way to it; a warm start better than that floor
    ends worse than it started. ``batch_size`` subsamples the same rows, which adds
    noise without lowering the floor.

    **The guard** (``guard=True``) uses the data only:

    1. *The data's subspace.* After every iteration it computes the share of the
       data's energy outside the span of the features
       (:func:`~bayespmf.kernels.purification.span_residual`): 0 in the noiseless
       model, and rising when the component :math:`N` of :math:`A = A^*(\Sigma + E) +
       N` outside the span of :math:`A^*` grows, which is how Alg. 1 fails under
       noise beyond the theorems' bounds. When it exceeds its smallest value so far
       by ``RISE_TOL`` (plus ``RESIDUAL_FLOOR``), the run stops and returns the
       iterate with the smallest value (the warm start included), with a warning.
    2. *The noise level.* The RMS per coordinate of the rows' residual outside the
       span of the warm start estimates :math:`C_\nu` (exactly for the
       :math:`\pm C_\nu` noise of (N2); a lower bound in general); above
       :func:`noise_allowance` of the warm start for adversarial noise (Theorem 1,
       G = c = 1) neither theorem's guarantee is known to apply to these data, and
       it warns (naming Theorem 2's larger allowance for unbiased noise).
    3. *The sampling error.* It reruns Alg. 1, from the same warm start and with the
       same ``r`` and balancing, on each half of a random split of the rows, for as
       many iterations as the returned iterate took. The fixed-point error scales
       as :math:`S^{-1/2}`, so half the distance between the two results, :math:`s`,
       is (to first order) a draw from the distribution of the result's error. With
       :math:`d` the distance from the warm start to the result (both by
       :func:`~bayespmf.kernels.purification.feature_distance`), the triangle
       inequality gives: when the result's error is at most :math:`d/2`, the warm
       start's is at least as large. It allows the result's error up to twice
       :math:`s` (one draw of a random norm can exceed its typical size) and so
       confirms an improvement only when :math:`d \ge` ``SAMPLING_FACTOR`` (4)
       :math:`\cdot s`, and warns otherwise. A warm start already within a few
       sampling errors of the truth therefore draws this warning: the data cannot
       tell whether the run improved on it.

    The checks cost about two more runs on half the rows (check 3) and one
    projection per iteration (check 1). None of them can see an error that the
    data cannot: adversarial noise that is a function of :math:`x^*` (N1) can move
    the data's natural features away from :math:`A^*` while every data-only
    criterion improves; check 2 flags the noise levels where that is not excluded.

    Examples
    --------
    >>> from bayespmf.datasets._simulate_nmf import make_purification_data
    >>> Y, truth = make_purification_data(20000, 20, 10, random_state=0)
    >>> a, info = purification(Y, truth.init, max_iter=40, eta=0.3, alpha=0.2,
    ...                        pinv_method="moore-penrose", random_state=0)
    >>> from bayespmf.kernels.purification import feature_distance
    >>> err = lambda a: feature_distance(a, truth.components)   # Theorem 1's remark
    >>> round(err(truth.init), 3), round(err(a), 3), info["reasons"]
    (0.063, 0.023, [])
    """
    max_iter = check_int(
        DEFAULT_PURIFICATION_MAX_ITER if max_iter is None else max_iter,
        "max_iter",
        owner=owner,
        low=1,
    )
    y = check_matrix(y, "y", owner)
    init = check_matrix(init, "init", owner)
    if init.shape[0] != y.shape[1]:
        raise DataValidationError(
            f"The 'init' of {owner} must have one row per feature of 'y' "
            f"({y.shape[1]}). Got shape {init.shape}."
        )
    eta = check_float(eta, "eta", owner=owner, low=0.0, high=1.0, low_open=True)
    alpha = check_float(alpha, "alpha", owner=owner, low=0.0)
    if r is not None:
        r = check_float(r, "r", owner=owner, low=0.0, low_open=True)
    if batch_size is not None:
        batch_size = check_int(
            batch_size, "batch_size", owner=owner, low=2, high=y.shape[0]
        )
    if not isinstance(guard, bool | np.bool_):
        raise ValueError(f"The 'guard' parameter of {owner} must be a bool. Got {guard!r}.")
    rng = check_random_state(random_state)
    scale = (
        balance_columns(y, init, alpha, method=pinv_method)
        if balance
        else np.ones(init.shape[1])
    )
    a0 = init * scale
    if r is None:
        spread = decoding_spread(y, a0, alpha, method=pinv_method)
        if spread <= 0:
            raise DataValidationError(
                f"Every decoding of the warm start is constant (alpha={alpha} too large "
                f"or 'init' unrelated to 'y'), so {owner} cannot set 'r'. Lower 'alpha' "
                "or pass 'r'."
            )
        r = 1.0 / spread
    problem = PurificationProblem(y, eta, alpha, r, batch_size, pinv_method)
    if not guard:
        state, it = _run(problem, a0, rng, max_iter, progressbar, owner)
        info = {"r": r, "scale": scale, "change": -it.trace, "best_iter": it.n_iter}
        return state.components / scale, info

    criterion = [span_residual(y, a0)]
    best = {"value": criterion[0], "iter": 0, "a": a0}

    def watch(t, state):
        value = span_residual(y, state.components)
        criterion.append(value)
        if value < best["value"]:
            best.update(value=value, iter=t, a=state.components)
        return value > best["value"] * (1.0 + RISE_TOL) + RESIDUAL_FLOOR

    state, it = _run(problem, a0, rng, max_iter, progressbar, owner, callback=watch)
    if it.stopped:
        a, t_out = best["a"], best["iter"]
    else:
        a, t_out = state.components, it.n_iter
    result = a / scale
    reasons = []
    if it.stopped:
        reasons.append(
            f"the share of the data outside the span of the features rose from "
            f"{best['value']:.4g} (iteration {t_out}) to {criterion[-1]:.4g} (iteration "
            f"{it.n_iter}), so the run stopped and returned iteration {t_out}"
        )
    level = _noise_level(y, init)
    allow = noise_allowance(init)
    if level > allow[0]:
        beyond = (
            f"and Theorem 2's for unbiased noise, {allow[1]:.3g}"
            if level > allow[1]
            else f"(Theorem 2's for unbiased noise is {allow[1]:.3g})"
        )
        reasons.append(
            f"the noise level estimated from the residual outside the warm start's span, "
            f"{level:.3g}, is above Theorem 1's allowance for adversarial noise, "
            f"1/max(m, n ||A+||_inf) = {allow[0]:.3g} {beyond}"
        )
    sampling = distance = float("nan")
    half = y.shape[0] // 2
    if t_out > 0 and half >= 2:
        order = rng.permutation(y.shape[0])
        runs = []
        for rows in (order[:half], order[half : 2 * half]):
            sub = problem._replace(
                y=y[rows],
                batch_size=None if batch_size is None else min(batch_size, half),
            )
            runs.append(_run(sub, a0, rng, t_out, False, owner)[0].components)
        sampling = 0.5 * feature_distance(runs[0], runs[1])
        distance = feature_distance(result, init)
        if SAMPLING_FACTOR * sampling > distance:
            reasons.append(
                f"its sampling error, estimated from runs on two halves of the rows, "
                f"{sampling:.3g}, is more than 1/{SAMPLING_FACTOR:g} of its distance from "
                f"the warm start, {distance:.3g}, so the data do not confirm an "
                "improvement"
            )
    if reasons:
        warnings.warn(
            f"{owner} may have returned features farther from the ground truth than "
            f"its warm start: {'; '.join(reasons)}. Use more rows (or less noisy ones), "
            "or keep the warm start; guard=False runs Alg. 1 without these checks.",
            PurificationWarning,
            skip_file_prefixes=(_PACKAGE_DIR,),
        )
    info = {
        "r": r,
        "scale": scale,
        "change": -it.trace,
        "best_iter": t_out,
        "criterion": np.asarray(criterion),
        "stopped": bool(it.stopped),
        "noise_level": level,
        "noise_allowance": allow,
        "sampling_error": sampling,
        "distance_from_start": distance,
        "reasons": reasons,
    }
    return result, info
