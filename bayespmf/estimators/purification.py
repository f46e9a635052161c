"""scikit-learn-style estimator for NMF by purification (Li, Liang, Risteski)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from bayespmf._validation import DataValidationError, check_int
from bayespmf.estimators._base import check_fitted, check_ignored_y
from bayespmf.fit.purification import purification
from bayespmf.kernels.purification import min_inf_pinv, relu_decode
from bayespmf.kernels.spa import spa

__all__ = ["PurificationNMF"]


class PurificationNMF(TransformerMixin, BaseEstimator):
    r"""Non-negative weights, free features: :math:`Y \approx X A^\top` by purification.

    Parameters
    ----------
    n_components : int
        Number of features n.
    max_iter : int, optional
        Iterations T of Alg. 1, which has no stopping rule and runs them all (100
        when None).
    eta : float, default 0.1
        Step size :math:`\eta`.
    alpha : float, default 0.1
        ReLU offset :math:`\alpha` of the decoding.
    r : float, optional
        Scaling factor; data-driven by default (see
        :func:`bayespmf.fit.purification.purification`).
    balance : bool, default True
        Balancing preprocessing of Sec. 6.
    batch_size : int, optional
        Rows drawn per iteration; all by default.
    pinv_method : {"min-inf", "moore-penrose"}, default "min-inf"
        Left inverse used to decode (Alg. 1 uses the minimum-:math:`\infty`-norm one).
    guard : bool, default True
        Data-only checks that the result is not worse than the warm start: stop and
        keep the best iterate when the features leave the data's subspace, and warn
        (:class:`~bayespmf.fit.purification.PurificationWarning`) when the noise is
        above the theorems' allowance or the sampling error is as large as the
        distance moved (see :func:`bayespmf.fit.purification.purification`). False
        runs Alg. 1 alone.
    random_state : None, int or numpy.random.Generator
        Seeds the batches and the guard's split of the rows (the random parts).
    progressbar : bool, default False
        Show a progress bar over the iterations.

    Attributes
    ----------
    components_ : ndarray, shape (n_features, n_components)
        The learned features :math:`A` (columns).
    r_ : float
        The scaling factor used.
    scale_ : ndarray, shape (n_components,)
        The balancing diagonal :math:`D`.
    change_ : ndarray, shape ``(n_iter_,)``
        :math:`\|A^{(t+1)} - A^{(t)}\|_1` per iteration.
    n_iter_ : int
        Iterations run (``max_iter`` unless the guard stopped the run).
    best_iter_ : int
        The iteration whose features are returned (``n_iter_`` unless the guard
        stopped the run).
    guard_ : dict
        The guard's diagnostics (``criterion``, ``stopped``, ``noise_level``,
        ``noise_allowance``, ``sampling_error``, ``distance_from_start``,
        ``reasons``); empty with ``guard=False``.

    Notes
    -----
    A thin wrapper: :meth:`fit` validates and passes every parameter to
    :func:`~bayespmf.fit.purification.purification`; :meth:`transform` decodes
    with the learned features, :math:`x = \phi_\alpha(A^\dagger y)`. Without ``init``
    the warm start is SPA (:func:`~bayespmf.kernels.spa.spa`) on the data points: the
    ``n_components`` "purest" points, as the paper suggests for (A3) (Sec. 3,
    remarks).

    **scikit-learn conventions.** A ``BaseEstimator`` and ``TransformerMixin``:
    ``get_params``/``set_params``/``clone`` work, ``fit_transform`` is :meth:`fit` then
    :meth:`transform`, and ``fit`` accepts and ignores a ``y`` of one entry per row (a
    ``Pipeline`` passes it along). The warm start is keyword-only (``init=``): an
    ``init`` passed where ``y`` stands is refused, not ignored.

    Examples
    --------
    >>> from bayespmf.datasets._simulate_nmf import make_purification_data
    >>> Y, truth = make_purification_data(20000, 12, 4, random_state=0)
    >>> model = PurificationNMF(4, max_iter=30, eta=0.3, alpha=0.2, random_state=0)
    >>> model = model.fit(Y, init=truth.init)
    >>> model.components_.shape, model.transform(Y[:3]).shape, model.guard_["reasons"]
    ((12, 4), (3, 4), [])
    """

    def __init__(
        self,
        n_components: int,
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
    ) -> None:
        self.n_components = n_components
        self.max_iter = max_iter
        self.eta = eta
        self.alpha = alpha
        self.r = r
        self.balance = balance
        self.batch_size = batch_size
        self.pinv_method = pinv_method
        self.guard = guard
        self.random_state = random_state
        self.progressbar = progressbar

    def fit(self, Y, y=None, *, init=None) -> PurificationNMF:
        """Learn the features from data points ``Y`` (n_samples, n_features).

        Parameters
        ----------
        Y : array_like, shape (n_samples, n_features)
        y : None or array_like, shape (n_samples,)
            Ignored (scikit-learn convention: the model is unsupervised). One entry
            per row is accepted; anything else is an error, so that a warm start
            passed positionally is not silently ignored.
        init : array_like, shape (n_features, n_components), optional
            Warm start :math:`A^{(0)}`; SPA on the rows of ``Y`` by default.

        Returns
        -------
        self : PurificationNMF
            The fitted estimator.

        Raises
        ------
        ValueError
            A hyper-parameter outside its range, or a ``y`` that is not one entry per
            row.
        DataValidationError
            Malformed ``Y`` or ``init``, ``n_components`` above the number of
            features or rows.

        Warns
        -----
        PurificationWarning
            With ``guard``, when the result may be worse than the warm start.
        """
        owner = "PurificationNMF"
        check_ignored_y(
            y,
            Y,
            owner=f"{owner}.fit",
            why="the model is unsupervised",
            fix="To give a warm start, pass init=... by keyword.",
        )
        n_comp = check_int(self.n_components, "n_components", owner=owner, low=1)
        rows = np.asarray(Y, dtype=np.float64)
        if rows.ndim != 2 or rows.size == 0:
            raise DataValidationError(
                f"'Y' passed to {owner}.fit must be a non-empty 2-D array (n_samples, "
                f"n_features). Got shape {rows.shape}."
            )
        if n_comp > min(rows.shape):
            raise DataValidationError(
                f"The 'n_components' of {owner} ({n_comp}) must not exceed the number of "
                f"features or samples of 'Y' (shape {rows.shape})."
            )
        if init is None:
            if not np.all(np.isfinite(rows)):
                raise DataValidationError(f"'Y' passed to {owner}.fit holds NaN or inf.")
            init = rows[spa(rows.T, n_comp)].T
        a0 = np.asarray(init, dtype=np.float64)
        if a0.shape != (rows.shape[1], n_comp):
            raise DataValidationError(
                f"The 'init' of {owner}.fit must have shape (n_features, n_components) = "
                f"({rows.shape[1]}, {n_comp}). Got {a0.shape}."
            )
        params = self.get_params()
        del params["n_components"]  # carried by the shape of init
        a, info = purification(rows, a0, **params, owner=owner)
        self.components_ = a
        self.r_ = info["r"]
        self.scale_ = info["scale"]
        self.change_ = info["change"]
        self.n_iter_ = int(info["change"].size)
        self.best_iter_ = int(info["best_iter"])
        kept = ("r", "scale", "change", "best_iter")
        self.guard_ = {k: v for k, v in info.items() if k not in kept}
        return self

    def transform(self, Y) -> np.ndarray:
        r"""Decoded weights :math:`\phi_\alpha(A^\dagger y)` of every row, (n_samples, n).

        Raises
        ------
        NotFittedError
            Before :meth:`fit` (scikit-learn's, a ``ValueError``).
        DataValidationError
            ``Y`` with another number of features, or NaN or inf in ``Y``.
        """
        check_fitted(self, "components_", "fit(Y)")
        y = np.asarray(Y, dtype=np.float64)
        if y.ndim != 2 or y.shape[1] != self.components_.shape[0]:
            raise DataValidationError(
                f"'Y' passed to PurificationNMF.transform must have shape (n_samples, "
                f"{self.components_.shape[0]}). Got {y.shape}."
            )
        if not np.all(np.isfinite(y)):
            raise DataValidationError(
                "'Y' passed to PurificationNMF.transform holds NaN or inf; drop or impute "
                "those rows first."
            )
        pinv = min_inf_pinv(self.components_, method=self.pinv_method)
        return relu_decode(y, pinv, self.alpha)
