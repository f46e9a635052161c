"""The baselines of the tasks, run on the same splits as the latent-class methods.

:func:`classifier_trial` (scikit-learn classifiers, hyperparameter chosen on the
validation part) and :func:`rating_baseline_trial` (averages, biased matrix
factorization on the :data:`BMF_GRID`, scikit-surprise's SVD); both return
``(test metrics, selected hyperparameter, fit seconds, total seconds[, fits that did
not converge])``. The models themselves are in :mod:`bayespmf.apps.baselines`.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from bayespmf._validation import DataValidationError
from bayespmf.apps.baselines import (
    CLASSIFIER_GRIDS,
    BiasedMF,
    classifier_features,
    fit_classifier,
    rating_average,
)

#: Hyperparameter grid of the biased-MF baseline, searched on the validation part.
BMF_GRID = {"n_components": [2, 5, 10], "reg": [1.0, 3.0, 10.0, 30.0]}

#: ALS sweeps of the biased-MF baseline (the validation RMSE was flat well before,
#: :ref:`bench-apps`).
BMF_EPOCHS = 30


def classifier_trial(name, split, seed):
    train_codes = split.train.codes
    grid = CLASSIFIER_GRIDS[name]
    ((key, values),) = grid.items()
    best = {"score": -np.inf}
    t_all = time.perf_counter()
    n_not_converged = 0
    xs = {
        p: classifier_features(name, split.parts[p][0], split.n_cat, split.j)
        for p in ("val", "test")
    }
    for value in values:
        t0 = time.perf_counter()
        model, converged = fit_classifier(
            name, {key: value}, train_codes, split.n_cat, split.j, random_state=seed
        )
        fit_s = time.perf_counter() - t0
        n_not_converged += not converged
        s = split.score(split.evaluate_pred(model.predict(xs["val"]), "val"))
        if s > best["score"]:
            best.update(score=s, param=f"{key}={value:g}", model=model, fit_s=fit_s)
    metrics = split.evaluate_pred(best["model"].predict(xs["test"]), "test")
    return (
        metrics,
        best["param"],
        best["fit_s"],
        time.perf_counter() - t_all,
        n_not_converged,
    )


def rating_baseline_trial(name, split, seed):
    t_all = time.perf_counter()
    h_val, h_test = split.parts["val"][0], split.parts["test"][0]
    if name in ("global-average", "user-average", "movie-average"):
        pred = rating_average(name, split.ratings, h_test[:, 0], h_test[:, 1])
        dt = time.perf_counter() - t_all
        return split.evaluate_pred(pred, "test"), "", dt, dt
    if name == "surprise-svd":
        return surprise_trial(split, seed)
    best = {"score": -np.inf}
    for n_components in BMF_GRID["n_components"]:
        for reg in BMF_GRID["reg"]:
            t0 = time.perf_counter()
            m = BiasedMF(n_components, reg, n_epochs=BMF_EPOCHS, random_state=seed).fit(
                split.ratings
            )
            fit_s = time.perf_counter() - t0
            pred = np.clip(m.predict(h_val[:, 0], h_val[:, 1]), split.lo, split.hi)
            s = split.score(split.evaluate_pred(pred, "val"))
            if s > best["score"]:
                best.update(
                    score=s,
                    model=m,
                    param=f"n_components={n_components}, reg={reg:g}",
                    fit_s=fit_s,
                )
    pred = np.clip(best["model"].predict(h_test[:, 0], h_test[:, 1]), split.lo, split.hi)
    return (
        split.evaluate_pred(pred, "test"),
        best["param"],
        best["fit_s"],
        time.perf_counter() - t_all,
    )


def surprise_trial(split, seed):
    try:
        from surprise import SVD, Dataset, Reader
    except ImportError as err:
        raise DataValidationError(
            "The 'surprise-svd' baseline needs scikit-surprise (pip install "
            "scikit-surprise)."
        ) from err
    t0 = time.perf_counter()
    rows, cols = np.nonzero(~np.isnan(split.ratings))
    df = pd.DataFrame({"u": rows, "i": cols, "r": split.ratings[rows, cols]})
    trainset = Dataset.load_from_df(
        df, Reader(rating_scale=(split.lo, split.hi))
    ).build_full_trainset()
    algo = SVD(random_state=seed).fit(trainset)
    fit_s = time.perf_counter() - t0
    h = split.parts["test"][0]
    pred = np.array([algo.predict(int(u), int(i)).est for u, i in h[:, :2]])
    return split.evaluate_pred(pred, "test"), "defaults", fit_s, time.perf_counter() - t0
