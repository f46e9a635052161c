"""Distal outcomes and class predictors: bayespmf.fit.distal vs StepMix, side by side.

Simulates (seeded) S rows: F = 3 classes whose prior is a multinomial logit of one
covariate z, N = 6 binary items, and three distal outcomes that depend on the class
only (a gaussian with class-specific mean and variance, a 0/1 outcome and a
3-category outcome). The measurement model is fitted once, by
``LatentClassPMF(3).fit(x)``, and given to both packages: StepMix's categorical
measurement model is set to bayespmf's estimate (``set_parameters``), so that the two
structural steps start from the same classes. Then, per outcome:

* naive 3-step (``n_steps=3, correction=None``) vs ``correction="none"``;
* BCH 3-step (``correction="BCH"``) vs ``correction="bch"``;
* ML 3-step (``correction="ML"``) vs ``correction="ml"``;
* 2-step (``n_steps=2``) vs ``correction="two-step"``;

StepMix runs its steps by hand from the shared measurement model
(``predict_proba_class``, its ``compute_bch_matrix`` / ``compute_log_emission_pm``,
``m_step_structural`` or ``em(..., freeze_measurement=True)``, exactly the calls its
``fit`` makes after refitting the measurement model), and holds the class weights at
the measurement model's in the ML and 2-step fits, so ours runs with
``fix_weights=True`` there. StepMix's structural models: ``gaussian_diag`` (a mean and
variance per class; its ``reg_covar`` = 1e-6 is added to the variances),
``bernoulli``, ``categorical``, and ``covariate`` (one coefficient row per class, made
comparable by subtracting class 0's row; its Newton M-step is given
``max_iter=100``, since the default single step is not a converged 3-step fit).
The 1-step (``n_steps=1``) fits are each package's own multi-start fit, labels
matched on the measurement parameters.

Both timings cover the structural step from the fitted measurement model (the
posterior, the correction and the structural fit; StepMix's input checks and ours
included, the conversion of the indicators to StepMix's float input not), ours with
``stderr=False`` (StepMix computes no standard errors; ours still builds its tables,
the Wald table with NaN entries), and in the last column with the standard errors
and Wald tests. The two packages run in turn, one call each per round, after a
round that is not timed; every time is the median over ``--repeat`` rounds
(``--repeat-slow`` rounds for the standard errors and the 1-step fits). Run
``python benchmarks/distal_vs_stepmix.py [--seed 0] [--n-rows 3000]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import parse_args_quick

from bayespmf.estimators import LatentClassPMF
from bayespmf.fit import class_predictors, distal_outcome
from bayespmf.metrics import match_components

RANK, N_ITEMS = 3, 6
#: P(x_n = 1 | class): class 0 high on all items, class 1 low, class 2 high on the
#: first half only (the pattern of Bakk & Kuha 2018's simulations).
P_ITEM = np.array([[0.85] * 6, [0.15] * 6, [0.85] * 3 + [0.15] * 3])
BETA = np.array([[0.0, 0.3, 0.2], [0.0, 1.0, -0.8]])  # (intercept, z) x class
MEANS, SDS = np.array([-1.0, 1.0, 0.0]), np.array([1.0, 1.5, 0.7])
P_BIN = np.array([0.2, 0.7, 0.5])
P_CAT = np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6], [0.3, 0.4, 0.3]])


def simulate(n_rows, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n_rows)
    eta = np.c_[np.ones(n_rows), z] @ BETA
    p = np.exp(eta - eta.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    h = (p.cumsum(axis=1) > rng.random((n_rows, 1))).argmax(axis=1)
    x = (rng.random((n_rows, N_ITEMS)) < P_ITEM[h]).astype(int)
    outcomes = {
        "gaussian": rng.normal(MEANS[h], SDS[h]),
        "bernoulli": (rng.random(n_rows) < P_BIN[h]).astype(float),
        "categorical": (P_CAT[h].cumsum(axis=1) > rng.random((n_rows, 1))).argmax(axis=1),
    }
    return x, z, outcomes


STRUCTURAL = {
    "gaussian": "gaussian_diag",
    "bernoulli": "bernoulli",
    "categorical": "categorical",
    "covariate": "covariate",
}


def stepmix_with(model, x, structural, seed, **options):
    """A StepMix whose measurement model is ``model``'s estimate."""
    from stepmix.stepmix import StepMix

    sm = StepMix(
        n_components=RANK,
        measurement="categorical",
        structural=structural,
        random_state=seed,
        verbose=0,
        progress_bar=0,
        abs_tol=1e-10,
        max_iter=5000,
        structural_params={"max_iter": 100} if structural == "covariate" else None,
        **options,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm.set_params(max_iter=1)
        sm.fit(x.astype(float))  # builds the measurement model, then overwritten
        sm.set_params(max_iter=5000)
    params = sm.get_parameters()
    params["weights"] = np.asarray(model.weights_, dtype=float).copy()
    pis = params["measurement"]["pis"]
    width = int(params["measurement"]["max_n_outcomes"])
    pis = np.zeros_like(pis)
    for n, a in enumerate(model.factors_):
        pis[:, n * width : n * width + a.shape[0]] = a.T
    params["measurement"]["pis"] = pis
    sm.set_parameters(params)
    return sm


def stepmix_structural(sm, xf, y, kind):
    """StepMix's structural step from its fixed measurement model (as in its fit).

    ``xf`` holds the indicators as floats, StepMix's input.
    """
    from stepmix import utils
    from stepmix.corrections import compute_bch_matrix, compute_log_emission_pm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        soft = sm.predict_proba_class(xf)
        if kind == "none":
            sm.m_step_structural(utils.modal(soft, clip=True), y)
        elif kind == "bch":
            _, d_inv = compute_bch_matrix(soft, "modal")
            sm.m_step_structural(utils.modal(soft, clip=True) @ d_inv, y)
        elif kind == "ml":
            log_eps = compute_log_emission_pm(soft, "modal")
            sm.em(xf, y, freeze_measurement=True, log_emission_pm=log_eps)
        else:  # two-step
            sm.em(xf, y, freeze_measurement=True)
    return sm.get_parameters()["structural"]


def stepmix_estimate(params, outcome):
    """StepMix's structural parameters in the layout of our ``estimates``."""
    if outcome == "gaussian":
        return np.c_[params["means"][:, 0], params["covariances"][:, 0]]
    if outcome == "bernoulli":
        return params["pis"][:, :1]
    if outcome == "categorical":
        return params["pis"][:, :3]
    beta = params["beta"].T  # (D, F), no reference class
    return beta - beta[:, :1]


def ours(model, x, y, outcome, kind, stderr):
    fix = kind in ("ml", "two-step")
    if outcome == "covariate":
        fit = class_predictors(model, x, y, correction=kind, stderr=stderr)
    else:
        fit = distal_outcome(
            model, x, y, outcome, correction=kind, fix_weights=fix, stderr=stderr
        )
    return fit.estimates.to_numpy()


def alternating(fns, repeat, *, warm_up=True):
    """Outputs and median wall times of ``fns``, called in turn for ``repeat`` rounds.

    Every round calls each function once, in order, so that the functions share the
    machine's state; with ``warm_up`` one round that is not timed goes first
    (imports, caches).
    """
    outs = [fn() for fn in fns] if warm_up else [None] * len(fns)
    times = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            outs[i] = fn()
            times[i].append(time.perf_counter() - start)
    return outs, [float(np.median(t)) for t in times]


def one_step(x, y, outcome, model, seed, repeat):
    """Each package's own 1-step fit of the gaussian outcome, labels matched."""

    def stepmix_fit():  # fit starts afresh (its n_init starts) on every call
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return sm_model.fit(xf, y[:, None])

    def ours_fit():
        return distal_outcome(model, x, y, "gaussian", correction="one-step")

    xf, sm_model = x.astype(float), stepmix_one_step(seed)
    (sm, fit), (t_sm, t_ours) = alternating([stepmix_fit, ours_fit], repeat, warm_up=False)
    params = sm.get_parameters()
    pis = params["measurement"]["pis"]
    width = int(params["measurement"]["max_n_outcomes"])
    sm_factors = [pis[:, n * width : n * width + 2].T for n in range(N_ITEMS)]
    theirs = stepmix_estimate(params["structural"], "gaussian")
    perm = match_components(sm_factors, fit.info["factors"])
    return fit.estimates.to_numpy(), theirs[perm], t_ours, t_sm


def stepmix_one_step(seed):
    """StepMix's 1-step estimator of the gaussian outcome (its own 5 starts)."""
    from stepmix.stepmix import StepMix

    return StepMix(
        n_components=RANK,
        measurement="categorical",
        structural="gaussian_diag",
        n_steps=1,
        n_init=5,
        abs_tol=1e-10,
        max_iter=5000,
        random_state=seed,
        verbose=0,
        progress_bar=0,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-rows", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=15, help="timed rounds")
    parser.add_argument(
        "--repeat-slow",
        type=int,
        default=3,
        help="timed rounds of the standard errors and of the 1-step fits",
    )
    args = parse_args_quick(parser, argv, n_rows=600, repeat=3, repeat_slow=1)
    x, z, outcomes = simulate(args.n_rows, args.seed)
    outcomes["covariate"] = z[:, None]
    fitted = LatentClassPMF(RANK, random_state=args.seed).fit(x)
    truth = [np.vstack([1 - P_ITEM[:, n], P_ITEM[:, n]]) for n in range(N_ITEMS)]
    perm = match_components(fitted.factors_, truth)  # class labels as in the truth
    model = LatentClassPMF.from_params(
        fitted.weights_[perm], [a[:, perm] for a in fitted.factors_]
    )
    print(f"S = {args.n_rows}, F = {RANK}, {N_ITEMS} binary items, seed {args.seed}")
    print(f"measurement model: class weights {np.round(model.weights_, 3).tolist()}")
    header = (
        f"{'outcome':<12}{'estimator':<10}{'max |ours - StepMix|':>22}"
        f"{'ours s':>10}{'StepMix s':>11}{'StepMix/ours':>14}{'ours+SE s':>11}"
    )
    print(
        f"times: medians of {args.repeat} alternating rounds after an untimed one "
        f"({args.repeat_slow} rounds for ours+SE and the 1-step fits)"
    )
    print(header)
    print("-" * len(header))
    xf = x.astype(float)  # StepMix's input
    shown = {}
    for outcome, y in outcomes.items():
        y_sm = y if y.ndim == 2 else y[:, None]
        for kind in ("none", "bch", "ml", "two-step"):
            sm = stepmix_with(model, x, STRUCTURAL[outcome], args.seed)
            (mine, params), (t_ours, t_sm) = alternating(
                [
                    lambda y=y, o=outcome, k=kind: ours(model, x, y, o, k, False),
                    lambda sm=sm, y=y_sm, k=kind: stepmix_structural(sm, xf, y, k),
                ],
                args.repeat,
            )
            _, (t_se,) = alternating(
                [lambda y=y, o=outcome, k=kind: ours(model, x, y, o, k, True)],
                args.repeat_slow,
                warm_up=False,  # the call above ran the same code
            )
            theirs = stepmix_estimate(params, outcome)
            diff = float(np.max(np.abs(mine - theirs)))
            shown[(outcome, kind)] = (mine, theirs)
            print(
                f"{outcome:<12}{kind:<10}{diff:>22.2e}{t_ours:>10.4f}{t_sm:>11.4f}"
                f"{t_sm / t_ours:>13.2f}x{t_se:>11.4f}"
            )
    mine, theirs, t_ours, t_sm = one_step(
        x, outcomes["gaussian"], "gaussian", model, args.seed, args.repeat_slow
    )
    diff = float(np.max(np.abs(mine - theirs)))
    print(
        f"{'gaussian':<12}{'one-step':<10}{diff:>22.2e}{t_ours:>10.4f}{t_sm:>11.4f}"
        f"{t_sm / t_ours:>13.2f}x   (StepMix: own 5 starts; ours: from the 2-step)"
    )
    print(f"\ngaussian class means, side by side (truth {MEANS.tolist()}):")
    print(
        f"{'estimator':<10}"
        + "".join(f"{'ours ' + str(t):>10}{'StepMix':>9}" for t in range(3))
    )
    for kind in ("none", "bch", "ml", "two-step"):
        mine, theirs = shown[("gaussian", kind)]
        cells = "".join(f"{mine[t, 0]:>10.4f}{theirs[t, 0]:>9.4f}" for t in range(3))
        print(f"{kind:<10}{cells}")


if __name__ == "__main__":
    main()
