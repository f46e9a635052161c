"""The default fit against StepMix ``n_init=20``, and the EM work of the default fit.

The default maximum-likelihood fit (``LatentClassPMF(F, random_state=s).fit(data)``,
``method="auto"``) is what every user runs first and what starts every posterior. For
each case this prints, in one run: the default fit's wall time, its log-likelihood, the
starts that reached it and the EM maps it spent (``info["work"]``: one start mapped once
is one map; exploration, refinement and polish), then StepMix's
``StepMix(n_components=F, measurement="categorical_nan", n_init=20)`` on the same rows
(the ``peers`` extra), its log-likelihood, and the time ratio ours / StepMix.

Cases: UCI Car (all 1728 rows, F=4), Congressional Votes (F=3), the poLCA-style survey
and binary cases of ``_lca_suite.py``, and (``--large``) 1e5 rows of a simulated survey.
Every fit is preceded by one small warm-up fit on the same data (compilation is cached
on disk; the first call of a session still loads it).

    python benchmarks/default_fit_speed.py [--seeds 5 6] [--large] [--no-stepmix]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import fit_stepmix, parse_args_quick, stepmix_input
from _lca_suite import made_case

from bayespmf.datasets import load_car, load_votes, make_latent_class
from bayespmf.fit.latent_class import fit_latent_class
from bayespmf.pmf import LatentClassParams, log_likelihood_rows

STEPMIX_N_INIT = 20

WORK_STAGES = ("explore", "refine", "polish")


def cases(quick: bool, large: bool):
    car, _ = load_car()
    if quick:
        return [("car F=4", car, 4)]
    votes, _ = load_votes()
    survey = made_case("sim-survey", 0)
    binary = made_case("sim-binary", 4)
    out = [
        ("car F=4", car, 4),
        ("votes F=3", votes, 3),
        ("poLCA-style survey F=3", survey.data, survey.n_components),
        ("poLCA-style binary F=4", binary.data, binary.n_components),
    ]
    if large:
        big, _ = make_latent_class(
            100_000, [2, 3, 3, 4, 2, 3, 4, 5], n_components=4, random_state=0
        )
        out.append(("survey 1e5 rows F=4", big, 4))
    return out


def stepmix_loglik(data, n_components, seed):
    """StepMix n_init=20: (total log-likelihood on the rows, wall seconds)."""
    model, seconds = fit_stepmix(
        stepmix_input(data.codes), n_components, n_init=STEPMIX_N_INIT, random_state=seed
    )
    par = model.get_parameters()
    n_cat = data.n_categories
    pis = np.asarray(par["measurement"]["pis"]).reshape(n_components, len(n_cat), -1)
    factors = [pis[:, n, :k].T / pis[:, n, :k].T.sum(axis=0) for n, k in enumerate(n_cat)]
    w = np.asarray(par["weights"], dtype=float)
    params = LatentClassParams(w / w.sum(), factors)
    return float(log_likelihood_rows(data, *params).sum()), seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[5, 6])
    ap.add_argument("--large", action="store_true", help="add the 1e5-row case")
    ap.add_argument("--no-stepmix", action="store_true", help="ours only")
    args = parse_args_quick(ap, argv, seeds=[5], no_stepmix=True)
    try:
        import stepmix  # noqa: F401
    except ImportError:
        args.no_stepmix = True
    print(
        "| case | seed | ours s | ours loglik | at best | EM maps explore/refine/polish "
        "| StepMix s | StepMix loglik | ours / StepMix time | ours - StepMix loglik |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, data, n_components in cases(args.quick, args.large):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_latent_class(data, n_components, random_state=0, n_init=8)  # warm-up
        for seed in args.seeds:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = fit_latent_class(data, n_components, random_state=seed)
            ours = time.perf_counter() - t0
            work = fit.info.get("work")  # absent before the fit counted its maps
            maps = "-" if work is None else "/".join(str(work[k]) for k in WORK_STAGES)
            row = (
                f"| {name} | {seed} | {ours:.2f} | {fit.loglik:.4f} | {fit.n_init_best} "
                f"| {maps} |"
            )
            if args.no_stepmix:
                print(row + " - | - | - | - |", flush=True)
                continue
            ll_sm, t_sm = stepmix_loglik(data, n_components, seed)
            print(
                row + f" {t_sm:.2f} | {ll_sm:.4f} | {ours / t_sm:.3f} | "
                f"{fit.loglik - ll_sm:+.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
