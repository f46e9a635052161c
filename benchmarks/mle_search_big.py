"""Batched search strategies for the latent-class MLE on the MovieLens cases (issue 11).

On ``ml-romance`` of ``benchmarks/_lca_suite.py`` (302 rows, 30 five-level items, rank
4: 483 parameters, 60 % of the ratings missing) the default ``method="auto"`` ends
3-6 log-likelihood units below the best known optimum, and nearly every start ends at
its own local maximum. This study runs, per case and seed and in one process, searches
built on the library's batched machinery (``fit_source.as_source``, ``source.em_kernel(rank,
"numba")``, ``batched_squarem_pmf_step``, ``ms._explore``, ``ms._build_starts``) and
prints the best total log-likelihood each reached (the best few states of each search
refined by SQUAREM-PMF to ``tol=1e-8``), its gap to the best of the run and its wall
time, next to StepMix (``measurement="categorical_nan"``, ``n_init=20``, run as
``benchmarks/mle_reliability.py`` runs it) in the same process.

Strategies (``--strategies``):

* ``default``: ``fit_latent_class(data, rank, random_state=seed)``: rounds of 300
  starts (CNMF-SPA, row seeds, uniform), 20 batched SQUAREM-PMF cycles each, the best
  30 refined; later rounds half basin hops (``MAX_ROUNDS`` rounds at most).
* ``default-cross``: the default with half of its basin hops (later rounds) replaced
  by the class-level recombination of ``prior-cross`` below between two of the
  ``N_ANCHORS`` best optima so far (the library's ``ms._build_starts`` wrapped while
  it runs); ``--anchors`` sets ``N_ANCHORS`` for it (default the library's 5).
* ``small-em``: many cheap starts ("small EM", Biernacki, Celeux & Govaert 2003):
  ``--small-em-starts`` starts run 5 batched cycles, the best 10 % 20 more, the best
  30 of those are refined.
* ``basin``: the basin share of the best optimum: ``--basin-starts`` starts (half row
  seeds, half uniform) run 170 batched cycles (converged: the best values no longer
  move) and the table counts how many end within 0.01 of the best of the run; with
  ``--prior`` the starts first run the smoothed EM below. Expensive; off by default.
* ``ils-param``: iterated local search in parameter space from a pool of the
  ``POOL`` best distinct optima (distinct: log-likelihoods more than 0.01 apart) of one
  round of 300 explored starts. Each iteration draws ``HOPS`` hops, each from a pool
  member drawn uniformly, moved a share U(0.05, 0.5) of the way to a uniform random
  start (the hop of ``ms._perturbed``); all hops run ``C1`` batched cycles, the best
  ``KEEP`` run ``C2`` more and join the pool, which keeps its ``POOL`` best distinct
  members. ``ITERS`` iterations.
* ``ils-member``: the same search with hops in membership space: the pool member's row
  posteriors, a random share U(0.05, 0.3) of the rows reassigned to random classes
  (one-hot), one M-step (pseudo-count 1e-3).
* ``prior-cross``: (1) the exploration stage runs a smoothed EM first: every start
  takes ``PRIOR_ITERS`` batched EM iterations of the posterior mode under a symmetric
  Dirichlet prior (pseudo-count ``PRIOR_ALPHA`` added to every expected count of the
  M-step; batched as dense one-hot matrix products), then the 20 ordinary cycles, so
  that the pool is filled from a smoothed likelihood; (2) the iterated local search
  above with half the hops class-level recombination (path relinking): a child keeps
  the classes of one pool member and takes a random non-empty proper subset of the
  classes (profiles and weights) of another member, classes matched by the Hungarian
  method (``bayespmf.metrics.match_components``), then moved a share U(0, 0.1) toward
  a uniform random start; the other half parameter hops of share U(0.2, 0.5); (3) a
  restart when ``RESTART`` iterations did not raise the best: the pool is refilled by
  a fresh smoothed round of 300 starts (no CNMF-SPA), keeping the best member.

Measured (2 shared cores, load 3.4-6.7, seeds 0-4, one run per table): on
ml-romance the best of all runs was -3542.081 (found by ``ils-param`` and
``prior-cross``); ``prior-cross`` reached it on seeds 0 and 1 and ended 0.94 and 1.32
below on seeds 2 and 3 (-3542.450 on seed 4), in 25-30 s; ``ils-param`` reached it on
seed 0 only, in 12 s; the default ended 1.9-6.2 below in 4.6-5.0 s; StepMix
(``n_init=20``) 28-48 below in 9-11 s; ``small-em`` (3000 starts) 8-16 below. Of 2000
converged random starts (``basin``) none ended within 1 unit of -3542.450: the best
optimum's basin holds less than 1/2000 of the starts. ``default-cross`` changed
nothing systematic (ml-romance gaps 0-3.8 with 5 anchors, 0-6.3 with 30; ml-action
as the default, one seed 0.94 below). On ml-action ``prior-cross`` reached -5225.285 on
every seed (30-36 s); the default on 4 of 5 (seed 2: 0.943 below, with a
``LocalOptimumWarning``).

Every random part draws from ``numpy.random.default_rng(seed)``. Numba kernels are
compiled on the case before anything is timed. Usage::

    python benchmarks/mle_search_big.py                    # ml-romance, ml-action, 0-4
    python benchmarks/mle_search_big.py --cases ml-romance --seeds 0 1
    python benchmarks/mle_search_big.py --strategies default prior-cross stepmix
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
from _common import timed
from _lca_suite import suite
from mle_reliability import fit_stepmix

from bayespmf.fit import defaults
from bayespmf.fit import latent_class as lc
from bayespmf.fit import multistart as ms
from bayespmf.fit import source as fit_source
from bayespmf.fit.em import run_em
from bayespmf.kernels.em import init_random, normalize_blocks
from bayespmf.kernels.squarem import batched_squarem_pmf_step
from bayespmf.metrics import match_components
from bayespmf.pmf import (
    LatentClassParams,
    offsets_of,
    one_hot_design,
    split_factors,
    stack_factors,
)

#: Iterated local search: pool size, hops per iteration, cycles of every hop, hops
#: kept, their further cycles, iterations, and non-improving iterations before a
#: restart (prior-cross only).
POOL, HOPS, C1, KEEP, C2, ITERS, RESTART = 30, 100, 15, 10, 60, 30, 6
#: Smoothed exploration of prior-cross: Dirichlet pseudo-count and EM iterations.
PRIOR_ALPHA, PRIOR_ITERS = 0.5, 40
#: States of a search refined to tol 1e-8 at the end (its best distinct ones).
N_FINAL = 3
STRATEGIES = (
    "default",
    "default-cross",
    "small-em",
    "basin",
    "ils-param",
    "ils-member",
    "prior-cross",
    "stepmix",
)


class Problem:
    """One case's batched EM map, one-hot design and SQUAREM-PMF refinement."""

    def __init__(self, case):
        self.case, self.n_components = case, case.n_components
        self.source = fit_source.as_source(case.data, None)
        self.n_cat = np.asarray(self.source.n_categories)
        self.offsets = offsets_of(self.n_cat)
        self.kernel = self.source.em_kernel(self.n_components, "numba")
        self.refine_kernel = self.source.em_kernel(self.n_components, "auto")
        codes = np.asarray(self.source.codes)
        self.design = one_hot_design(codes, self.n_cat, drop_empty=True).toarray()

    def stack(self, starts):
        w = np.stack([np.asarray(p.weights, dtype=float) for _, p in starts])
        a = np.stack([stack_factors(p.factors) for _, p in starts], axis=1)
        return w, a

    def cycles(self, w, a, n):
        """``n`` batched SQUAREM-PMF cycles of K states ``(K, F)``, ``(P, K, F)``."""
        ll = np.full(w.shape[0], -np.inf)
        for _ in range(n):
            w, a, ll, _ = batched_squarem_pmf_step(self.kernel.step, w, a, self.n_cat)
        return w, a, ll

    def posterior(self, w, a):
        z = self.design @ np.log(a) + np.log(w)
        z -= z.max(axis=1, keepdims=True)
        r = np.exp(z)
        return r / r.sum(axis=1, keepdims=True)

    def m_step(self, resp, alpha=1e-3):
        a = normalize_blocks(self.design.T @ resp + alpha, self.offsets)
        w = resp.sum(axis=0) + alpha
        return w / w.sum(), a

    def prior_em(self, w, a, alpha, n_iter):
        """Batched EM for the posterior mode under a Dirichlet(1 + alpha) prior."""
        n_par, k, f = a.shape
        for _ in range(n_iter):
            z = (self.design @ np.log(a).reshape(n_par, k * f)).reshape(-1, k, f)
            z += np.log(w)[None]
            z -= z.max(axis=2, keepdims=True)
            r = np.exp(z)
            r /= r.sum(axis=2, keepdims=True)
            counts = (self.design.T @ r.reshape(-1, k * f)).reshape(n_par, k, f)
            a = normalize_blocks(counts + alpha, self.offsets)
            w = r.sum(axis=0) + 1e-3
            w /= w.sum(axis=1, keepdims=True)
        return w, a

    def refine(self, w, a):
        """SQUAREM-PMF to tol 1e-8 from one state; returns the log-likelihood."""
        _, info = run_em(
            self.refine_kernel,
            w / w.sum(),
            normalize_blocks(a, self.offsets),
            self.n_cat,
            accelerate="squarem",
            max_iter=defaults.DEFAULT_MAX_ITER["auto"],
            tol=defaults.DEFAULT_TOL["auto"],
            owner="mle_search_big",
            warn=False,
        )
        return float(info.loglik)

    def refine_best(self, w, a, ll, n=N_FINAL):
        keep = distinct(ll, n)
        return max(self.refine(w[k], a[:, k]) for k in keep)


def distinct(ll, n, tol=ms.OPTIMUM_LOGLIK_ATOL):
    """Indices of the ``n`` best entries of ``ll`` more than ``tol`` apart."""
    out: list[int] = []
    for i in np.argsort(-ll, kind="stable"):
        if all(abs(ll[i] - ll[j]) > tol for j in out):
            out.append(int(i))
        if len(out) == n:
            break
    return out


# --------------------------------------------------------------------------- hops


def hop_param(pb, pool, j, rng, low=0.05, high=0.5):
    w, a = pool[0][j], normalize_blocks(pool[1][:, j], pb.offsets)
    eta = rng.uniform(low, high)
    other = init_random(pb.n_cat, pb.n_components, rng)
    return (1 - eta) * w + eta * other.weights, (1 - eta) * a + eta * stack_factors(
        other.factors
    )


def hop_member(pb, pool, j, rng, low=0.05, high=0.3):
    resp = pb.posterior(pool[0][j], normalize_blocks(pool[1][:, j], pb.offsets))
    n_rows = resp.shape[0]
    rows = rng.choice(n_rows, max(1, int(rng.uniform(low, high) * n_rows)), replace=False)
    resp[rows] = 0.0
    resp[rows, rng.integers(pb.n_components, size=rows.size)] = 1.0
    return pb.m_step(resp)


def hop_cross(pb, pool, j, rng):
    w_pool, a_pool = pool
    if w_pool.shape[0] < 2:
        return hop_param(pb, pool, j, rng)
    i = int(rng.choice([k for k in range(w_pool.shape[0]) if k != j]))
    a = normalize_blocks(a_pool[:, j], pb.offsets)
    b = normalize_blocks(a_pool[:, i], pb.offsets)
    perm = match_components(b, a)
    take = rng.random(pb.n_components) < 0.5
    if take.all() or not take.any():
        take[:] = False
        take[rng.integers(pb.n_components)] = True
    child_a = np.where(take[None, :], b[:, perm], a)
    child_w = np.where(take, w_pool[i][perm], w_pool[j])
    return hop_param(pb, (child_w[None] / child_w.sum(), child_a[:, None]), 0, rng, 0, 0.1)


def hop_cross_param(pb, pool, j, rng):
    if rng.random() < 0.5:
        return hop_cross(pb, pool, j, rng)
    return hop_param(pb, pool, j, rng, 0.2, 0.5)


# ----------------------------------------------------------------------- searches


def explore_round(pb, rng, init="auto", n_init=defaults.DEFAULT_N_INIT, alpha=0.0):
    """One round of starts, (smoothed EM,) 20 cycles; the best 30 run 80 more."""
    starts, _ = ms._build_starts(pb.source, pb.n_components, n_init, init, rng)
    if alpha > 0:
        w, a = pb.prior_em(*pb.stack(starts), alpha, PRIOR_ITERS)
        w, a, ll = pb.cycles(w, a, ms.EXPLORE_CYCLES)
    else:
        w, a, ll = ms._explore(pb.source, pb.n_components, starts, ms.EXPLORE_CYCLES)
    top = np.argsort(-ll, kind="stable")[: max(ms.MIN_REFINE, n_init // 10)]
    return pb.cycles(w[top], a[:, top], 80)


def ils(pb, seed, hop, alpha=0.0, restart=0, iters=ITERS):
    """Iterated local search from a pool of optima; returns the refined best."""
    rng = np.random.default_rng(seed)
    w, a, ll = explore_round(pb, rng, alpha=alpha)
    best_seen, last_gain = -np.inf, 0
    for it in range(iters):
        keep = distinct(ll, POOL)
        w, a, ll = w[keep], a[:, keep], ll[keep]
        if ll[0] > best_seen + ms.OPTIMUM_LOGLIK_ATOL:
            best_seen, last_gain = ll[0], it
        elif restart and it - last_gain >= restart:
            fw, fa, fl = explore_round(pb, rng, init="more", alpha=alpha)
            w = np.concatenate([w[:1], fw])
            a = np.concatenate([a[:, :1], fa], axis=1)
            ll = np.concatenate([ll[:1], fl])
            last_gain = it
        hops = [hop(pb, (w, a), int(rng.integers(w.shape[0])), rng) for _ in range(HOPS)]
        hw = np.stack([h[0] for h in hops])
        ha = np.stack([h[1] for h in hops], axis=1)
        hw, ha, hll = pb.cycles(hw, ha, C1)
        top = np.argsort(-hll, kind="stable")[:KEEP]
        hw, ha, hll = pb.cycles(hw[top], ha[:, top], C2)
        w = np.concatenate([w, hw])
        a = np.concatenate([a, ha], axis=1)
        ll = np.concatenate([ll, hll])
    return pb.refine_best(w, a, ll)


def small_em(pb, seed, n_starts):
    rng = np.random.default_rng(seed)
    starts, _ = ms._build_starts(pb.source, pb.n_components, n_starts, "auto", rng)
    w, a, ll = ms._explore(pb.source, pb.n_components, starts, 5)
    top = np.argsort(-ll, kind="stable")[: max(30, n_starts // 10)]
    w, a, ll = pb.cycles(w[top], a[:, top], 20)
    top = np.argsort(-ll, kind="stable")[:30]
    return max(pb.refine(w[k], a[:, k]) for k in top)


def basin(pb, seed, n_starts, alpha):
    """Every start converged (170 batched cycles); the final log-likelihoods and kinds."""
    rng = np.random.default_rng(seed)
    starts = [
        ("rows", ms.rows_start(pb.source.categorical(), pb.n_components, rng))
        if k % 2 == 0
        else ("random", init_random(pb.n_cat, pb.n_components, rng))
        for k in range(n_starts)
    ]
    w, a = pb.stack(starts)
    if alpha > 0:
        w, a = pb.prior_em(w, a, alpha, PRIOR_ITERS)
    _, _, ll = pb.cycles(w, a, 170)
    return ll, np.array([k for k, _ in starts])


def recombined(anchors, n_cat, n_components, rng):
    """A child of two anchors: some classes (profile and weight) from each."""
    i, j = rng.choice(len(anchors), 2, replace=False)
    p, q = anchors[i], anchors[j]
    a, b = stack_factors(p.factors), stack_factors(q.factors)
    perm = match_components(b, a)
    take = rng.random(n_components) < 0.5
    if take.all() or not take.any():
        take[:] = False
        take[rng.integers(n_components)] = True
    child_a = np.where(take[None, :], b[:, perm], a)
    child_w = np.where(take, np.asarray(q.weights)[perm], p.weights)
    eta = rng.uniform(0, 0.1)
    other = init_random(n_cat, n_components, rng)
    return LatentClassParams(
        (1 - eta) * child_w / child_w.sum() + eta * other.weights,
        split_factors((1 - eta) * child_a + eta * stack_factors(other.factors), n_cat),
    )


def default_cross(case, seed, n_anchors):
    """``fit_latent_class`` with half of its basin hops replaced by recombinations."""
    build, anchors_before = ms._build_starts, ms.N_ANCHORS

    def build_cross(source, n_components, n_init, init, rng, anchors=()):
        starts, skipped = build(source, n_components, n_init, init, rng, anchors)
        if len(anchors) >= 2:
            n_cat = source.n_categories
            starts = [
                ("perturbed", recombined(anchors, n_cat, n_components, rng))
                if kind == "perturbed" and k % 2
                else (kind, p)
                for k, (kind, p) in enumerate(starts)
            ]
        return starts, skipped

    ms._build_starts, ms.N_ANCHORS = build_cross, n_anchors
    try:
        return lc.fit_latent_class(case.data, case.n_components, random_state=seed).loglik
    finally:
        ms._build_starts, ms.N_ANCHORS = build, anchors_before


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["ml-romance", "ml-action"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument(
        "--strategies",
        nargs="+",
        default=[s for s in STRATEGIES if s != "basin"],
        choices=STRATEGIES,
    )
    ap.add_argument("--iters", type=int, default=ITERS, help="ILS iterations")
    ap.add_argument("--anchors", type=int, default=ms.N_ANCHORS, help="default-cross")
    ap.add_argument("--small-em-starts", type=int, default=3000)
    ap.add_argument("--basin-starts", type=int, default=2000)
    ap.add_argument("--prior", action="store_true", help="basin: smoothed EM first")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print(f"load average at start {os.getloadavg()} ({os.cpu_count()} cores)")
    hops = {"ils-param": (hop_param, 0.0, 0), "ils-member": (hop_member, 0.0, 0)}
    hops["prior-cross"] = (hop_cross_param, PRIOR_ALPHA, RESTART)
    for case in suite(names=args.cases):
        pb = Problem(case)
        # compile every kernel before timing
        w0, a0 = pb.stack([("r", init_random(pb.n_cat, pb.n_components, 0))] * 2)
        pb.refine(w0[0], a0[:, 0])
        pb.cycles(w0, a0, 1)
        if "stepmix" in args.strategies:
            fit_stepmix(case, 0, 1, 1e-6, 100)
        rows, basins = [], []
        for seed in args.seeds:
            for name in args.strategies:
                if name == "default":
                    fit, t = timed(
                        lambda s=seed: lc.fit_latent_class(
                            case.data, case.n_components, random_state=s
                        )
                    )
                    rows.append((name, seed, fit.loglik, t))
                elif name == "default-cross":
                    ll, t = timed(default_cross, case, seed, args.anchors)
                    rows.append((f"default-cross, {args.anchors} anchors", seed, ll, t))
                elif name == "small-em":
                    ll, t = timed(small_em, pb, seed, args.small_em_starts)
                    rows.append((f"small-em x{args.small_em_starts}", seed, ll, t))
                elif name == "basin":
                    (lls, kinds), t = timed(
                        basin, pb, seed, args.basin_starts, PRIOR_ALPHA * args.prior
                    )
                    basins.append((seed, lls, kinds, t))
                    label = f"basin x{args.basin_starts}" + (" prior" if args.prior else "")
                    rows.append((label, seed, float(lls.max()), t))
                elif name == "stepmix":
                    row, _ = fit_stepmix(case, seed, 20, 1e-8, 5000)
                    rows.append(("StepMix n_init=20", seed, row.loglik, row.seconds))
                else:
                    hop, alpha, restart = hops[name]
                    ll, t = timed(ils, pb, seed, hop, alpha, restart, args.iters)
                    rows.append((name, seed, ll, t))
                print(
                    f"  {case.name} seed {seed} {rows[-1][0]}: {rows[-1][2]:.3f} "
                    f"({rows[-1][3]:.1f} s)",
                    flush=True,
                )
        best = max(r[2] for r in rows)
        print(
            f"\n## {case.name} (S={case.data.n_samples}, rank {case.n_components}); "
            f"best of the "
            f"run {best:.3f}; load average {os.getloadavg()[0]:.1f}\n"
        )
        print("| strategy | seed | best log-lik | gap to best of run | wall s |")
        print("|---|---|---|---|---|")
        order = list(dict.fromkeys(r[0] for r in rows))
        for name, seed, ll, t in sorted(rows, key=lambda r: (order.index(r[0]), r[1])):
            print(f"| {name} | {seed} | {ll:.3f} | {best - ll:.3f} | {t:.1f} |")
        for seed, lls, kinds, t in basins:
            for kind in np.unique(kinds):
                m = kinds == kind
                print(
                    f"basin seed {seed} {kind}: {int(np.sum(lls[m] >= best - 0.01))} of "
                    f"{m.sum()} starts within 0.01 of {best:.3f}; best {lls[m].max():.3f}"
                )
    print(f"\nload average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
