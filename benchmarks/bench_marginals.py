"""Timings of bayespmf.marginals next to one bincount pass over the observed entries.

Simulates S rows of N variables with I categories each and a fraction of the entries
missing (uniform random codes: the timings do not depend on the distribution), then
reports the best of ``--repeats`` runs (after one warm-up) of

* one ``np.bincount`` of ``offsets[n] + code`` over all observed entries (the cost
  floor of any statistic that reads every observed entry once),
* ``pairwise_marginals``,
* ``triple_marginals`` (all N choose 3 triples),
* ``random_projections`` + ``projection_marginals`` (M projections per pair).

Usage::

    python benchmarks/bench_marginals.py --n-samples 100000 --n-variables 15
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import parse_args_quick

from bayespmf.marginals import (
    pairwise_marginals,
    projection_marginals,
    random_projections,
    triple_marginals,
)
from bayespmf.pmf import offsets_of


def best_time(func, repeats: int) -> float:
    """Best wall time of ``repeats`` calls, after one warm-up call."""
    func()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def simulate(n_samples, n_variables, n_categories, missing, seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_categories, size=(n_samples, n_variables))
    codes[rng.random(codes.shape) < missing] = -1
    return codes, np.full(n_variables, n_categories, dtype=np.int64)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument("--n-variables", type=int, default=15)
    parser.add_argument("--n-categories", type=int, default=10)
    parser.add_argument("--missing", type=float, default=0.5)
    parser.add_argument("--n-projections", type=int, default=200, help="M (paper: 200)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parse_args_quick(
        parser, argv, n_samples=10_000, n_variables=6, n_projections=20, repeats=1
    )

    codes, n_cat = simulate(
        args.n_samples, args.n_variables, args.n_categories, args.missing, args.seed
    )
    offsets = offsets_of(n_cat)
    mask = codes >= 0

    def one_bincount():
        return np.bincount((offsets[:-1] + codes)[mask], minlength=int(offsets[-1]))

    proj = random_projections(n_cat, args.n_projections, random_state=args.seed)
    n_triples = args.n_variables * (args.n_variables - 1) * (args.n_variables - 2) // 6

    t_bin = best_time(one_bincount, args.repeats)
    t_pair = best_time(lambda: pairwise_marginals(codes, n_cat), args.repeats)
    t_triple = best_time(lambda: triple_marginals(codes, n_cat), args.repeats)
    t_draw = best_time(
        lambda: random_projections(n_cat, args.n_projections, random_state=args.seed),
        args.repeats,
    )
    t_proj = best_time(lambda: projection_marginals(codes, proj), args.repeats)

    print(
        f"S={args.n_samples} N={args.n_variables} I={args.n_categories} "
        f"missing={args.missing:.0%} observed entries={int(mask.sum())} "
        f"(best of {args.repeats} after a warm-up; numpy {np.__version__})"
    )
    m, p = args.n_projections, proj.n_pairs
    rows = [
        ("one np.bincount pass over observed entries", t_bin),
        ("pairwise_marginals", t_pair),
        (f"triple_marginals ({n_triples} triples)", t_triple),
        (f"random_projections (M={m}, {p} pairs)", t_draw),
        (f"projection_marginals (M={m}, {p} pairs)", t_proj),
    ]
    for label, seconds in rows:
        print(f"  {label:<44} {1e3 * seconds:9.2f} ms  ({seconds / t_bin:5.1f}x bincount)")


if __name__ == "__main__":
    main()
