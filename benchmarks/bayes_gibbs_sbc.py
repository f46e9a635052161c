"""Simulation-based calibration of the Gibbs step (issue 25, "Correctness").

Each replication draws the parameters from the model's prior (``weights ~
Dir(weights_prior)``, every class's PMF of every variable ``~ Dir(factor_prior)``),
the rows from the model (a class per row, then its categories; a share of the entries
made missing) and runs :class:`bayespmf.models.LatentClassGibbs` on the posterior of
:func:`bayespmf.models.latent_class_model` given those rows (one model and step per
setting, the step given each replication's rows), from the model's initial point:
``--burn`` sweeps, then ``--draws`` draws kept every ``--thin`` sweeps (the step's
``n_sweeps``). For each
label-invariant quantity -- the marginal cell probabilities
``P(x_n = i) = sum_f lambda_f A_n(i, f)`` (the first ``--cells`` categories of every
variable) and the largest class weight -- the rank of the true value among the kept
draws (0 to ``draws``) is recorded. If the step samples the posterior, every rank is
uniform on ``0..draws`` (Talts et al., 2018). Printed per quantity: the rank counts in
``--bins`` equal bins, the chi-square statistic of uniformity and its p-value; then
the pooled ranks of every quantity ("pooled", a loose overall check), the smallest
p-value and its Bonferroni bound. Run::

    python benchmarks/bayes_gibbs_sbc.py             # 200 replications (2 cores: ~2 min)
    python benchmarks/bayes_gibbs_sbc.py --quick     # 20 replications

``--factor-prior-fit`` builds the sampled model with another ``factor_prior`` than the
simulation's: a wrong posterior, which the ranks must show (a check of the check).
"""

from __future__ import annotations

import argparse
import time
import warnings
from functools import cache

import numpy as np
from scipy import stats

from bayespmf.models import LatentClassGibbs, latent_class_model


def simulate(rng, n_rows, n_categories, n_components, missing, weights_prior, factor_prior):
    """Parameters from the prior and rows from the model (-1 for a missing entry)."""
    weights = rng.dirichlet(np.full(n_components, weights_prior))
    factors = [
        rng.dirichlet(np.full(k, factor_prior), size=n_components) for k in n_categories
    ]
    z = rng.choice(n_components, size=n_rows, p=weights)
    codes = np.empty((n_rows, len(n_categories)), dtype=np.int64)
    for n, a in enumerate(factors):
        u = rng.random(n_rows)[:, None]
        codes[:, n] = (u > np.cumsum(a[z], axis=1)).sum(axis=1)
    codes = np.minimum(codes, np.array(n_categories) - 1)
    codes[rng.random(codes.shape) < missing] = -1
    return weights, factors, codes


def quantities(weights, factors, cells):
    """Label-invariant quantities: marginal cell probabilities, the largest weight."""
    out = [weights @ a[:, i] for a in factors for i in range(min(cells, a.shape[1]))]
    return np.array([*out, weights.max()])


def quantity_names(n_categories, cells):
    names = [
        f"P(x{n}={i})" for n, k in enumerate(n_categories) for i in range(min(cells, k))
    ]
    return [*names, "max weight"]


@cache
def _model_and_step(rows, categories, n_components, weights_prior, factor_prior, thin):
    """One model and step per setting: the replications differ only by their rows,
    which :func:`run_replication` gives the step (building a model and compiling its
    transforms per replication would cost more than its Gibbs run).
    """
    model = latent_class_model(
        np.zeros((rows, len(categories)), dtype=np.int64),
        n_components,
        n_categories=list(categories),
        weights_prior=weights_prior,
        factor_prior=factor_prior,
    )
    return model, LatentClassGibbs(model=model, threads=1, n_sweeps=thin)


def run_replication(seed, args):
    """The rank of every quantity's true value among the thinned Gibbs draws."""
    rng = np.random.default_rng(seed)
    weights, factors, codes = simulate(
        rng,
        args.rows,
        args.categories,
        args.n_components,
        args.missing,
        args.weights_prior,
        args.factor_prior,
    )
    truth = quantities(weights, factors, args.cells)
    fit_prior = (
        args.factor_prior if args.factor_prior_fit is None else args.factor_prior_fit
    )
    model, step = _model_and_step(
        args.rows,
        tuple(args.categories),
        args.n_components,
        args.weights_prior,
        fit_prior,
        args.thin,
    )
    step.rng = rng
    step._set_rows(codes)  # the rows of a model built on this replication's data
    names = step._names
    point = model.initial_point()
    draws = []
    # one step is --thin sweeps; the burn-in is rounded up to whole steps
    for t in range(-(-args.burn // args.thin) + args.draws):
        point, _ = step.step(point)
        if t >= -(-args.burn // args.thin):
            log_w, *log_a = step._to_log(*[point[n] for n in names])
            draws.append(quantities(np.exp(log_w), [np.exp(a) for a in log_a], args.cells))
    return (np.array(draws) < truth).sum(axis=0)


def uniformity(candidates, n_draws, bins):
    """Rank counts in ``bins`` equal bins of 0..n_draws, chi-square and p-value."""
    edges = np.linspace(0, n_draws + 1, bins + 1)
    counts = np.histogram(candidates, bins=edges)[0]
    res = stats.chisquare(counts)
    return counts, float(res.statistic), float(res.pvalue)


def pooled(candidates, n_draws, bins):
    """:func:`uniformity` of every quantity's ranks together (a loose overall check:
    the quantities of one replication are not independent)."""
    return uniformity(candidates.ravel(), n_draws, bins)


def sbc(args):
    """Run the replications; return the quantity names and the ranks (reps x q)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        candidates = np.array(
            [run_replication(args.seed + r, args) for r in range(args.reps)]
        )
    return quantity_names(args.categories, args.cells), candidates


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="20 replications")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--categories", type=int, nargs="+", default=[2, 3, 2, 3])
    ap.add_argument("--n-components", type=int, default=2)
    ap.add_argument("--missing", type=float, default=0.1)
    ap.add_argument("--weights-prior", type=float, default=1.0)
    ap.add_argument("--factor-prior", type=float, default=1.0)
    ap.add_argument("--factor-prior-fit", type=float, default=None)
    ap.add_argument("--cells", type=int, default=1, help="categories per variable")
    ap.add_argument("--burn", type=int, default=50)
    ap.add_argument("--draws", type=int, default=19)
    ap.add_argument("--thin", type=int, default=10)
    ap.add_argument("--bins", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = min(args.reps, 20)
    return args


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    names, candidates = sbc(args)
    seconds = time.perf_counter() - start
    print(
        f"SBC of LatentClassGibbs: {args.reps} replications, S={args.rows}, "
        f"categories {args.categories}, rank {args.n_components}, "
        f"{args.missing:.0%} missing, "
        f"priors {args.weights_prior}/{args.factor_prior}"
        + (
            f" (sampled with factor_prior={args.factor_prior_fit})"
            if args.factor_prior_fit
            else ""
        )
        + f"; {args.draws} draws thinned by {args.thin} after {args.burn}; {seconds:.0f} s"
    )
    print(f"{'quantity':>12} {'rank counts per bin':>28} {'chi2':>7} {'p':>7}")
    pvalues = []
    for q, name in enumerate(names):
        counts, chi2, p = uniformity(candidates[:, q], args.draws, args.bins)
        pvalues.append(p)
        print(f"{name:>12} {' '.join(f'{c:4d}' for c in counts):>28} {chi2:7.2f} {p:7.3f}")
    counts, chi2, p = pooled(candidates, args.draws, args.bins)
    print(f"{'pooled':>12} {' '.join(f'{c:4d}' for c in counts):>28} {chi2:7.2f} {p:7.3f}")
    p_min = min(pvalues)
    print(
        f"smallest p {p_min:.3f}; Bonferroni over {len(names)} quantities "
        f"{min(1.0, p_min * len(names)):.3f} (uniform ranks: not small)"
    )


if __name__ == "__main__":
    main()
