"""Wide data: the default fit (``method="auto"``) next to single-start EM.

Simulates S rows of N binary items from a rank-F latent-class model
(:func:`bayespmf.datasets.make_latent_class`, seed 0) and fits it by
``fit_latent_class(data, F)`` (the default: CNMF-SPA start plus ``DEFAULT_N_INIT``
random and row-seeded starts, explored together by batched SQUAREM-PMF, the best
refined) and by ``method="em"`` (one random start), for every N asked, in one run.
Besides the totals it reports the default's stages (pairwise marginals, the CNMF-SPA
start, the exploration cycles run) so that a super-linear stage shows as one.

On wide data (``WIDE_BLOCK_ENTRIES``: ``(sum I)^2 >= 2**19``, here N >= 363) the
default takes a cheaper spectral start and lets each start leave the exploration once
stationary (``info["wide_data"]``). Unless ``--no-old``, the same fit with that gate
switched off (``WIDE_BLOCK_ENTRIES = inf``: the path before it) runs too, and the
table compares the two.

Issue 24 measured, at S = 200, N = 2000, F = 2: EM 0.3 s, the default 252 s (one
multinomial call per variable pair and bootstrap replicate in CNMF-SPA's split
selection, per-variable Python loops, and exploration cycles after every start had
converged).

Usage::

    python benchmarks/bench_wide.py --n-variables 500 2000
"""

from __future__ import annotations

import argparse
import math
import warnings

from _common import parse_args_quick, timed

from bayespmf.datasets import make_latent_class
from bayespmf.fit import defaults
from bayespmf.fit import latent_class as lc
from bayespmf.fit import multistart as ms
from bayespmf.fit import source as fit_source
from bayespmf.kernels.cnmf_spa import cnmf_spa


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=200)
    parser.add_argument("--n-variables", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--n-components", type=int, default=2)
    parser.add_argument(
        "--no-old", action="store_true", help="skip the fit without the wide-data gate"
    )
    args = parse_args_quick(parser, argv, n_samples=100, n_variables=[400], no_old=True)
    # compile the EM kernels once, outside the timings
    warm, _ = make_latent_class(
        50, [2] * 10, n_components=args.n_components, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ms.LocalOptimumWarning)
        lc.fit_latent_class(warm, args.n_components, method="em", random_state=0)
        lc.fit_latent_class(warm, args.n_components, n_init=10, random_state=0)
    print(
        f"S={args.n_samples} rows, binary items, rank {args.n_components}, "
        f"n_init={defaults.DEFAULT_N_INIT} (default)"
    )
    header = (
        f"{'N':>6} {'em s':>8} {'auto s':>8} {'ratio':>7} {'pairwise s':>11} "
        f"{'cnmf-spa s':>11} {'cycles':>7} {'em loglik':>14} {'auto loglik':>14}"
        + ("" if args.no_old else f" {'old s':>8} {'old ratio':>9} {'old loglik':>14}")
    )
    print(header)
    for n_vars in args.n_variables:
        data, _ = make_latent_class(
            args.n_samples, [2] * n_vars, n_components=args.n_components, random_state=0
        )
        em, t_em = timed(
            lambda data=data: lc.fit_latent_class(
                data, args.n_components, method="em", random_state=0
            )
        )
        source = fit_source.as_source(data, None)
        marginals, t_pair = timed(source.pairwise_marginals)
        wide = ms._wide_data(source.n_categories)
        fast = ms.WIDE_CNMF_SPA if wide else {}
        _, t_spa = timed(
            lambda m=marginals: cnmf_spa(m, args.n_components, random_state=0, **fast)
        )
        cycles = []
        step = ms.batched_squarem_pmf_step

        def counted(*a, step=step):
            cycles.append(a[1].shape[0] / defaults.DEFAULT_N_INIT)  # starts in the batch
            return step(*a)

        ms.batched_squarem_pmf_step = counted
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ms.LocalOptimumWarning)
                auto, t_auto = timed(
                    lambda data=data: lc.fit_latent_class(
                        data, args.n_components, random_state=0
                    )
                )
        finally:
            ms.batched_squarem_pmf_step = step
        old = ""
        if not args.no_old:
            gate = ms.WIDE_BLOCK_ENTRIES
            ms.WIDE_BLOCK_ENTRIES = math.inf
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ms.LocalOptimumWarning)
                    ungated, t_old = timed(
                        lambda data=data: lc.fit_latent_class(
                            data, args.n_components, random_state=0
                        )
                    )
            finally:
                ms.WIDE_BLOCK_ENTRIES = gate
            old = f" {t_old:>8.2f} {t_old / t_em:>9.0f} {ungated.loglik:>14.4f}"
        n_rounds = auto.info["rounds"]
        print(
            f"{n_vars:>6} {t_em:>8.3f} {t_auto:>8.2f} {t_auto / t_em:>7.0f} "
            f"{t_pair:>11.2f} {t_spa:>11.2f} {sum(cycles):>7.1f} "
            f"{em.loglik:>14.4f} {auto.loglik:>14.4f}"
            + old
            + (f"  ({n_rounds} rounds)" if n_rounds > 1 else "")
            + ("  (wide-data gate)" if "wide_data" in auto.info else "")
        )
    print(
        "pairwise s and cnmf-spa s: the default's CNMF-SPA start timed alone; cycles: "
        "batched SQUAREM-PMF exploration cycles in units of all starts (a start that "
        f"has left the batch counts no more; at most {ms.EXPLORE_CYCLES} a round); old: "
        "the default with the wide-data gate switched off."
    )


if __name__ == "__main__":
    main()
