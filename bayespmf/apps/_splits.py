"""The random splits of the tasks: what is trained on, validated and tested.

* :class:`ClassifySplit`: rows split 50 : 20 : 30 into training, validation and test
  parts, the target variable predicted from the others;
* :class:`RatingSplit`: 20 % and 30 % of the observed ratings hidden for validation
  and test, learnt from the remaining 50 %;
* :func:`rating_values` (the rating scale) and :func:`trial_seeds` (one seed per
  trial).

A split scores a ``proba(codes, j)`` (the predictive PMF of variable ``j`` given rows
of codes) or plain predictions on its ``"val"`` or ``"test"`` part.
"""

from __future__ import annotations

import numpy as np

from bayespmf._validation import DataValidationError, check_random_state
from bayespmf.data import CategoricalData


def rating_values(data: CategoricalData) -> list[np.ndarray]:
    """Numeric value of every category of every variable (the rating scale).

    Categories that all parse as numbers give those numbers; otherwise the codes
    ``1..I_n``.

    Examples
    --------
    >>> d = CategoricalData.from_codes([[0, 2]], 3, categories=[["1", "2", "3"]] * 2)
    >>> [v.tolist() for v in rating_values(d)]
    [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    """
    out = []
    for cats, k in zip(data.categories, data.n_categories, strict=True):
        try:
            out.append(np.array([float(c) for c in cats]))
        except (TypeError, ValueError):
            out.append(np.arange(1.0, int(k) + 1.0))
    return out


def trial_seeds(random_state, n_trials):
    """One int seed per trial, drawn from ``random_state`` (the splits and every fit)."""
    rng = check_random_state(random_state)
    return [int(s) for s in rng.integers(0, 2**31 - 1, size=n_trials)]


# --------------------------------------------------------------------- splits


class ClassifySplit:
    """One random train/validation/test split for classification of variable ``j``."""

    metric = "accuracy"

    def __init__(self, data, j, fractions, seed):
        self.train, val, test = data.train_test_split(*fractions, random_state=seed)
        self.j = j
        self.n_cat = data.n_categories
        self.parts = {}
        for name, part in (("val", val), ("test", test)):
            obs = part.mask[:, j]
            if not obs.any():
                raise DataValidationError(
                    f"The {name} part of a split has no row with the target observed."
                )
            self.parts[name] = (part.codes[obs], part.codes[obs, j])

    def evaluate_proba(self, proba_fn, part):
        x, _ = self.parts[part]
        return self.evaluate_pred(np.argmax(proba_fn(x, self.j), axis=1), part)

    def evaluate_pred(self, pred, part):
        return {"accuracy": float(np.mean(pred == self.parts[part][1]))}

    def log_score(self, proba_fn, part):
        """Log predictive probability of each row's target, (n,)."""
        x, y = self.parts[part]
        p = proba_fn(x, self.j)
        with np.errstate(divide="ignore"):
            return np.log(p[np.arange(y.size), y])

    @staticmethod
    def score(metrics):
        return metrics["accuracy"]


class RatingSplit:
    """One random hiding of 20 % (validation) and 30 % (test) of the observed entries."""

    metric = "rmse"

    def __init__(self, data, fractions, seed):
        train_f, val_f, _ = fractions
        rng = np.random.default_rng(seed)
        masked, hidden = data.hide_entries(1.0 - train_f, min_observed=1, random_state=rng)
        perm = rng.permutation(hidden.shape[0])
        n_val = round(val_f / (1.0 - train_f) * hidden.shape[0])
        self.train = masked
        self.n_cat = data.n_categories
        self.values = rating_values(data)
        self.parts = {
            "val": hidden[np.sort(perm[:n_val])],
            "test": hidden[np.sort(perm[n_val:])],
        }
        v = self.values
        for name, h in self.parts.items():
            if h.shape[0] == 0:
                raise DataValidationError(f"The {name} part hides no rating.")
            self.parts[name] = (h, np.array([v[c][k] for _, c, k in h]))
        vmax = max(len(x) for x in v)
        table = np.full((len(v), vmax), np.nan)
        for n, x in enumerate(v):
            table[n, : len(x)] = x
        codes = masked.codes
        cols = np.broadcast_to(np.arange(codes.shape[1]), codes.shape)
        self.ratings = np.where(codes >= 0, table[cols, np.maximum(codes, 0)], np.nan)
        self.lo = min(float(x.min()) for x in v)
        self.hi = max(float(x.max()) for x in v)

    def evaluate_proba(self, proba_fn, part):
        h, _ = self.parts[part]
        mmse = np.empty(h.shape[0])
        mode = np.empty(h.shape[0])
        codes = self.train.codes
        for j in np.unique(h[:, 1]):
            sel = np.flatnonzero(h[:, 1] == j)
            p = proba_fn(codes[h[sel, 0]], int(j))
            mmse[sel] = p @ self.values[j]
            mode[sel] = self.values[j][np.argmax(p, axis=1)]
        out = self.evaluate_pred(mmse, part)
        out_map = self.evaluate_pred(mode, part)
        out["rmse_map"], out["mae_map"] = out_map["rmse"], out_map["mae"]
        return out

    def log_score(self, proba_fn, part):
        """Log predictive probability of each hidden rating, (n,)."""
        h, _ = self.parts[part]
        out = np.empty(h.shape[0])
        codes = self.train.codes
        for j in np.unique(h[:, 1]):
            sel = np.flatnonzero(h[:, 1] == j)
            p = proba_fn(codes[h[sel, 0]], int(j))
            with np.errstate(divide="ignore"):
                out[sel] = np.log(p[np.arange(sel.size), h[sel, 2]])
        return out

    def evaluate_pred(self, pred, part):
        err = np.asarray(pred, dtype=float) - self.parts[part][1]
        return {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err)))}

    @staticmethod
    def score(metrics):
        return -metrics["rmse"]
