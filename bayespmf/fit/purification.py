"""NMF by purification (Li, Liang, Risteski, Alg. 1) under the one loop."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from bayespmf._validation import (
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
    purification_step,
)

__all__ = ["DEFAULT_MAX_ITER", "purification"]

#: Iterations T of Alg. 1 when ``max_iter`` is None.
DEFAULT_MAX_ITER = 100

#: Frames in this package are skipped when a warning names the caller's line.
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep


def _all_iterations(trace, info, tol) -> bool:
    """Alg. 1 has no stopping rule: it runs its T iterations."""
    return False


def _resolve_max_iter(max_iter, n_iter, owner: str) -> int:
    """``max_iter``, or the deprecated ``n_iter`` (with a FutureWarning naming the fix)."""
    if isinstance(n_iter, str) and n_iter == "deprecated":
        value = DEFAULT_MAX_ITER if max_iter is None else max_iter
        return check_int(value, "max_iter", owner=owner, low=1)
    if max_iter is not None:
        raise ValueError(
            f"{owner} got both 'max_iter' ({max_iter!r}) and 'n_iter' ({n_iter!r}); "
            "'n_iter' is the deprecated name of 'max_iter'. Pass max_iter only."
        )
    warnings.warn(
        f"The 'n_iter' parameter of {owner} is deprecated: it was renamed 'max_iter' "
        f"and will be removed in the next release. Pass max_iter={n_iter!r} instead.",
        FutureWarning,
        skip_file_prefixes=(_PACKAGE_DIR,),
    )
    return check_int(n_iter, "n_iter", owner=owner, low=1)


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
    random_state=None,
    progressbar: bool = False,
    n_iter="deprecated",
    owner: str = "purification",
) -> tuple[np.ndarray, dict]:
    r"""Feature matrix of :math:`Y \approx A X` by the purification algorithm (Alg. 1).

    Parameters
    ----------
    y : array_like, shape (S, m)
        Data points :math:`y = A^* x^* + \nu`, one per row.
    init : array_like, shape (m, n)
        Warm start :math:`A^{(0)}` (Assumption (A3): each column mostly its own
        ground-truth feature), e.g. SPA on the data points. Not modified.
    max_iter : int, optional
        Iterations T (Alg. 1 has no stopping rule: it runs all of them);
        ``DEFAULT_MAX_ITER`` (100) when None.
    eta : float, default 0.1
        Step size :math:`\eta \in (0, 1]`.
    alpha : float, default 0.1
        ReLU offset :math:`\alpha \ge 0`.
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
    random_state : None, int or numpy.random.Generator
        Seeds the batches.
    progressbar : bool, default False
    n_iter : int, optional
        Deprecated name of ``max_iter``, accepted with a ``FutureWarning`` for one
        release; giving both is an error.
    owner : str, default "purification"
        Who is calling, for the messages (``PurificationNMF`` passes its name).

    Returns
    -------
    a : ndarray, shape (m, n)
        :math:`A^{(T)}` (balancing undone).
    info : dict
        ``r`` (the scaling used), ``scale`` (the balancing diagonal D, ones when
        ``balance=False``), ``change`` (``||A^{(t+1)} - A^{(t)}||_1`` per iteration,
        max column :math:`\ell_1` norm).

    Raises
    ------
    DataValidationError
        Malformed ``y`` or ``init``, mismatched shapes, dependent columns.
    ValueError
        A parameter outside its range, or both ``max_iter`` and ``n_iter``.

    Warns
    -----
    FutureWarning
        ``n_iter`` given (use ``max_iter``).

    Notes
    -----
    Line 3 decodes with :func:`~bayespmf.kernels.purification.min_inf_pinv` and
    :func:`~bayespmf.kernels.purification.relu_decode`; line 4's expectation over
    independent uniform pairs is computed exactly
    (:func:`~bayespmf.kernels.purification.pair_moment`). With exact decoding and no noise,
    :math:`\hat E[(y - y')(x - x')^\top] = 2 A^* \mathrm{Cov}(x^*)` (Sec. 4), so ``r``
    converts it back to feature scale; Theorem 1 leaves ``r`` (and :math:`\alpha,
    \eta`) as constants "that exist", hence the data-driven default. The balancing
    step follows the idea of Sec. 6 (solve :math:`Y \approx [A^* D][D^{-1} X]` with
    :math:`E[(x^*_i)^2] / D_{ii}^2` within a factor 2 of each other); its procedure
    is in the paper's appendix, not in our copy: we estimate the second moments from
    the warm start's decodings and scale so that the smallest stays put (the
    rescaled weights stay in :math:`[0, 1]` as (A2) requires), then return
    :math:`A D^{-1}`. The T iterations
    (:func:`~bayespmf.kernels.purification.purification_step`) run under
    :func:`bayespmf.fit.loop.iterate`, with no stopping rule: Alg. 1 runs all T.

    Examples
    --------
    >>> from bayespmf.datasets._simulate_nmf import make_purification_data
    >>> Y, truth = make_purification_data(20000, 20, 10, random_state=0)
    >>> a, info = purification(Y, truth.init, max_iter=40, eta=0.3, alpha=0.2,
    ...                        pinv_method="moore-penrose")
    >>> def err(a):  # max column l1 error after l1 normalization (Theorem 1 remark)
    ...     return np.abs(a / a.sum(axis=0) - truth.components).sum(axis=0).max()
    >>> round(float(err(truth.init)), 3), round(float(err(a)), 3)
    (0.063, 0.023)
    """
    max_iter = _resolve_max_iter(max_iter, n_iter, owner)
    y = check_matrix(y, "y", owner)
    a = check_matrix(init, "init", owner).copy()
    if a.shape[0] != y.shape[1]:
        raise DataValidationError(
            f"The 'init' of {owner} must have one row per feature of 'y' "
            f"({y.shape[1]}). Got shape {a.shape}."
        )
    eta = check_float(eta, "eta", owner=owner, low=0.0, high=1.0, low_open=True)
    alpha = check_float(alpha, "alpha", owner=owner, low=0.0)
    if r is not None:
        r = check_float(r, "r", owner=owner, low=0.0, low_open=True)
    if batch_size is not None:
        batch_size = check_int(
            batch_size, "batch_size", owner=owner, low=2, high=y.shape[0]
        )
    rng = check_random_state(random_state)
    scale = (
        balance_columns(y, a, alpha, method=pinv_method) if balance else np.ones(a.shape[1])
    )
    a = a * scale
    if r is None:
        spread = decoding_spread(y, a, alpha, method=pinv_method)
        if spread <= 0:
            raise DataValidationError(
                f"Every decoding of the warm start is constant (alpha={alpha} too large "
                f"or 'init' unrelated to 'y'), so {owner} cannot set 'r'. Lower 'alpha' "
                "or pass 'r'."
            )
        r = 1.0 / spread
    problem = PurificationProblem(y, eta, alpha, r, batch_size, pinv_method)
    loop = {"max_iter": max_iter, "progressbar": progressbar, "owner": owner, "warn": False}
    state, it = iterate(
        lambda s: purification_step(s, problem),
        PurificationState(a, rng),
        tol=0.0,
        desc="Purification",
        rule=_all_iterations,
        **loop,
    )
    return state.components / scale, {"r": r, "scale": scale, "change": -it.trace}
