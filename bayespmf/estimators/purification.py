"""scikit-learn-style estimator for NMF by purification (Li, Liang, Risteski)."""

from __future__ import annotations

import numpy as np

from bayespmf._validation import DataValidationError, check_int
from bayespmf.fit.purification import purification
from bayespmf.kernels.purification import min_inf_pinv, relu_decode
from bayespmf.kernels.spa import spa

__all__ = ["PurificationNMF"]


class PurificationNMF:
    r"""Non-negative weights, free features: :math:`Y \approx X A^\top` by purification.

    Parameters
    ----------
    n_components : int
        Number of features n.
    n_iter : int, default 100
        Iterations T of Alg. 1.
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
    random_state : None, int or numpy.random.Generator

    Attributes
    ----------
    components_ : ndarray, shape (n_features, n_components)
        The learned features :math:`A` (columns).
    r_ : float
        The scaling factor used.
    scale_ : ndarray, shape (n_components,)
        The balancing diagonal :math:`D`.
    change_ : ndarray, shape (n_iter,)
        :math:`\|A^{(t+1)} - A^{(t)}\|_1` per iteration.
    n_iter_ : int

    Notes
    -----
    A thin wrapper: :meth:`fit` validates and calls
    :func:`~bayespmf.fit.purification.purification`; :meth:`transform` decodes
    with the learned features, :math:`x = \phi_\alpha(A^\dagger y)`. Without ``init``
    the warm start is SPA (:func:`~bayespmf.kernels.spa.spa`) on the data points: the
    ``n_components`` "purest" points, as the paper suggests for (A3) (Sec. 3,
    remarks).

    Examples
    --------
    >>> from bayespmf.datasets._simulate_nmf import make_purification_data
    >>> Y, truth = make_purification_data(2000, 12, 4, random_state=0)
    >>> model = PurificationNMF(4, n_iter=30, eta=0.3, alpha=0.2).fit(Y, init=truth.init)
    >>> model.components_.shape, model.transform(Y[:3]).shape
    ((12, 4), (3, 4))
    """

    def __init__(
        self,
        n_components: int,
        *,
        n_iter: int = 100,
        eta: float = 0.1,
        alpha: float = 0.1,
        r: float | None = None,
        balance: bool = True,
        batch_size: int | None = None,
        pinv_method: str = "min-inf",
        random_state=None,
    ) -> None:
        self.n_components = n_components
        self.n_iter = n_iter
        self.eta = eta
        self.alpha = alpha
        self.r = r
        self.balance = balance
        self.batch_size = batch_size
        self.pinv_method = pinv_method
        self.random_state = random_state

    def __repr__(self) -> str:
        return (
            f"PurificationNMF(n_components={self.n_components}, n_iter={self.n_iter}, "
            f"eta={self.eta}, alpha={self.alpha})"
        )

    def fit(self, Y, init=None) -> PurificationNMF:
        """Learn the features from data points ``Y`` (n_samples, n_features).

        Parameters
        ----------
        Y : array_like, shape (n_samples, n_features)
        init : array_like, shape (n_features, n_components), optional
            Warm start :math:`A^{(0)}`; SPA on the rows of ``Y`` by default.

        Returns
        -------
        self

        Raises
        ------
        DataValidationError
            Malformed ``Y`` or ``init``, ``n_components`` above the number of
            features or rows.
        ValueError
            A hyper-parameter outside its range.
        """
        owner = "PurificationNMF"
        n_comp = check_int(self.n_components, "n_components", owner=owner, low=1)
        y = np.asarray(Y, dtype=np.float64)
        if y.ndim != 2 or y.size == 0:
            raise DataValidationError(
                f"'Y' passed to {owner}.fit must be a non-empty 2-D array (n_samples, "
                f"n_features). Got shape {y.shape}."
            )
        if n_comp > min(y.shape):
            raise DataValidationError(
                f"The 'n_components' of {owner} ({n_comp}) must not exceed the number of "
                f"features or samples of 'Y' (shape {y.shape})."
            )
        if init is None:
            if not np.all(np.isfinite(y)):
                raise DataValidationError(f"'Y' passed to {owner}.fit holds NaN or inf.")
            init = y[spa(y.T, n_comp)].T
        a0 = np.asarray(init, dtype=np.float64)
        if a0.shape != (y.shape[1], n_comp):
            raise DataValidationError(
                f"The 'init' of {owner}.fit must have shape (n_features, n_components) = "
                f"({y.shape[1]}, {n_comp}). Got {a0.shape}."
            )
        a, info = purification(
            y,
            a0,
            n_iter=self.n_iter,
            eta=self.eta,
            alpha=self.alpha,
            r=self.r,
            balance=self.balance,
            batch_size=self.batch_size,
            pinv_method=self.pinv_method,
            random_state=self.random_state,
        )
        self.components_ = a
        self.r_ = info["r"]
        self.scale_ = info["scale"]
        self.change_ = info["change"]
        self.n_iter_ = int(info["change"].size)
        return self

    def transform(self, Y) -> np.ndarray:
        r"""Decoded weights :math:`\phi_\alpha(A^\dagger y)` of every row, (n_samples, n).

        Raises
        ------
        DataValidationError
            Before :meth:`fit`, or ``Y`` with another number of features.
        """
        if not hasattr(self, "components_"):
            raise DataValidationError(
                "This PurificationNMF is not fitted yet; call fit(Y) before transform."
            )
        y = np.asarray(Y, dtype=np.float64)
        if y.ndim != 2 or y.shape[1] != self.components_.shape[0]:
            raise DataValidationError(
                f"'Y' passed to PurificationNMF.transform must have shape (n_samples, "
                f"{self.components_.shape[0]}). Got {y.shape}."
            )
        pinv = min_inf_pinv(self.components_, method=self.pinv_method)
        return relu_decode(y, pinv, self.alpha)

    def fit_transform(self, Y, init=None) -> np.ndarray:
        """:meth:`fit`, then :meth:`transform` of the same rows."""
        return self.fit(Y, init=init).transform(Y)
