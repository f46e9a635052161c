"""Bias and coverage of the distal-outcome estimators by class separation.

A simulation in the spirit of Bakk & Kuha (2018, Sec. 5) and of StepMix's replication
of it (Morin et al., StepMix, Sec. 6), not a copy of their design: F = 3 equally likely
classes, N = 6 binary items with ``P(x = 1 | class)`` = p for class 0 on every item,
1 - p for class 1, and p on the first three items and 1 - p on the others for class 2,
where p = 0.9, 0.8 or 0.7 (high, medium, low separation; the entropy R^2 of each is
printed); a gaussian distal outcome with class means (-1, 1, 0) and unit variance.
Per replication: the measurement model is fitted by ``LatentClassPMF(3)`` (labels
matched to the truth by the Hungarian method), then
``bayespmf.fit.distal_outcome(..., correction=c)`` for c in none, bch, ml, two-step,
one-step. The table gives, per separation and estimator, the mean bias and RMSE of the
class means (averaged over the classes) and the coverage of the nominal 95 % Wald
intervals (averaged over the classes), with the Monte Carlo standard error of the
coverage, the coverage with the standard errors that treat the measurement model as
known (``cond.``: the step-3 covariance alone, before the first step's uncertainty is
added by Bakk, Oberski & Vermunt's 2014 correction for none / BCH / ML and by Bakk &
Kuha's for two-step; one-step has none to add) and the ratio of the estimates'
empirical standard deviation to their median standard error (``SD/SE``, near 1 when the
standard errors are right). ``--plot PATH`` saves bias and coverage against separation.

Run ``python benchmarks/distal_simulation.py [--reps 100] [--n-rows 1000] --plot
distal_simulation.png``; ``--quick`` is 6 replications of 500 rows.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import parse_args_quick

from bayespmf.estimators import LatentClassPMF
from bayespmf.fit import distal_outcome
from bayespmf.metrics import match_components

ESTIMATORS = ("none", "bch", "ml", "two-step", "one-step")
SEPARATIONS = {"high": 0.9, "medium": 0.8, "low": 0.7}
MEANS = np.array([-1.0, 1.0, 0.0])
#: Starts of the measurement fit per replication (the model is small and simple).
N_INIT = 5


def item_probs(p):
    return np.array([[p] * 6, [1 - p] * 6, [p] * 3 + [1 - p] * 3])  # (F, N)


def simulate(n_rows, p, rng):
    h = rng.integers(0, 3, n_rows)
    x = (rng.random((n_rows, 6)) < item_probs(p)[h]).astype(int)
    return x, rng.normal(MEANS[h], 1.0)


def entropy_r2(post):
    ent = -np.sum(post * np.log(np.clip(post, 1e-300, None)))
    return 1.0 - ent / (post.shape[0] * np.log(post.shape[1]))


def replicate(n_rows, p, rng):
    x, y = simulate(n_rows, p, rng)
    model = LatentClassPMF(3, n_init=N_INIT, random_state=rng).fit(x)
    truth = [np.vstack([1 - item_probs(p)[:, n], item_probs(p)[:, n]]) for n in range(6)]
    perm = match_components(model.factors_, truth)
    params = (model.weights_[perm], [a[:, perm] for a in model.factors_])
    r2 = entropy_r2(np.asarray(model.predict_class_proba(x))[:, perm])
    out = {}
    for c in ESTIMATORS:
        fit = distal_outcome(params, x, y, "gaussian", correction=c)
        cond = fit.info.get("stderr_conditional")
        se_cond = fit.stderr if cond is None else cond  # None: no first-step term
        out[c] = (
            fit.estimates["mean"].to_numpy(),
            fit.stderr["mean"].to_numpy(),
            se_cond["mean"].to_numpy(),
        )
    return out, r2


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--n-rows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default=None, help="save the figure to this path")
    args = parse_args_quick(parser, argv, reps=3, n_rows=500)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = []
    for level, p in SEPARATIONS.items():
        est = {c: [] for c in ESTIMATORS}
        r2s = []
        for _ in range(args.reps):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # local-optimum notes of small fits
                out, r2 = replicate(args.n_rows, p, rng)
            r2s.append(r2)
            for c in ESTIMATORS:
                est[c].append(out[c])
        for c in ESTIMATORS:
            m = np.array([e[0] for e in est[c]])
            se = np.array([e[1] for e in est[c]])
            se_cond = np.array([e[2] for e in est[c]])
            err = m - MEANS
            cover = np.abs(err) <= 1.959964 * se
            cov_rate = float(np.mean(cover))
            cov_cond = float(np.mean(np.abs(err) <= 1.959964 * se_cond))
            rows.append(
                {
                    "separation": level,
                    "p": p,
                    "entropy_r2": float(np.mean(r2s)),
                    "estimator": c,
                    "bias": float(np.mean(err)),
                    "abs_bias": float(np.mean(np.abs(err.mean(axis=0)))),
                    "rmse": float(np.sqrt(np.mean(err**2))),
                    "coverage": cov_rate,
                    "coverage_mcse": float(np.sqrt(cov_rate * (1 - cov_rate) / cover.size)),
                    "coverage_conditional": cov_cond,
                    "sd_over_se": float(
                        np.mean(err.std(axis=0) / np.nanmedian(se, axis=0))
                    ),
                }
            )
    seconds = time.perf_counter() - start
    print(
        f"S = {args.n_rows}, {args.reps} replications per separation, seed {args.seed} "
        f"({seconds:.0f} s)"
    )
    header = (
        f"{'separation':<12}{'R2':>6} {'estimator':<10}{'|bias|':>9}{'rmse':>9}"
        f"{'coverage':>10}{'(mcse)':>9}{'cond.':>8}{'SD/SE':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['separation'] + ' ' + str(r['p']):<12}{r['entropy_r2']:>6.2f} "
            f"{r['estimator']:<10}{r['abs_bias']:>9.4f}{r['rmse']:>9.4f}"
            f"{r['coverage']:>10.3f}{r['coverage_mcse']:>9.3f}"
            f"{r['coverage_conditional']:>8.3f}{r['sd_over_se']:>7.2f}"
        )
    if args.plot:
        plot(rows, args.plot)
        print(f"figure: {args.plot}")


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    levels = list(SEPARATIONS)
    for c in ESTIMATORS:
        sub = [
            next(r for r in rows if r["estimator"] == c and r["separation"] == lv)
            for lv in levels
        ]
        axes[0].plot(levels, [r["abs_bias"] for r in sub], marker="o", label=c)
        axes[1].plot(levels, [r["coverage"] for r in sub], marker="o", label=c)
    axes[0].set_ylabel("mean |bias| of the class means")
    axes[1].set_ylabel("coverage of 95 % intervals")
    axes[1].axhline(0.95, color="grey", lw=0.8, ls="--")
    for ax in axes:
        ax.set_xlabel("class separation")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
