"""Reproduce the convergence experiments of Yurochkin et al. (ICML 2019), Figs. 2-4 style.

For each kernel (Gaussian, Poisson, multinomial/LDA) and each sample size n, simulate
a Dirichlet simplex nest with the paper's settings (Supplement B: D = 500, K = 10,
alpha = 2, c_min = 0.5, sigma = 1, LDA with D = 2000 and 3000 words per document) and
print the minimum-matching distance to the true vertices and the wall time of
VLAD (alpha estimated), VLAD with the true alpha, GDM and SPA. Then NUTS and ADVI on
a small Gaussian nest, with wall times and the ratio NUTS time / VLAD time.

    python benchmarks/dsn_figures.py                 # paper sizes (hours for GDM/NUTS)
    python benchmarks/dsn_figures.py --scale 0.2     # n and D scaled by 0.2

``--scale`` multiplies every n and D (not K, alpha, sigma or words per document).
"""

from __future__ import annotations

import argparse
import time
import warnings

from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.estimators.simplex import GDM, VLAD, SimplexSPA
from bayespmf.metrics import min_matching_distance

PAPER_N = (1000, 3000, 10_000, 30_000)
SETTINGS = {
    "gaussian": {"n_features": 500, "kw": {"sigma": 1.0}},
    "poisson": {"n_features": 500, "kw": {}},
    "multinomial": {"n_features": 2000, "kw": {"words_per_doc": 3000}},
}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def convergence(kernel, ns, D, K, alpha, seed, n_init):
    print(f"\n== {kernel}: D={D}, K={K}, alpha={alpha} (Fig. 2 setting) ==")
    print(
        f"{'n':>7} | {'VLAD':>16} | {'VLAD-alpha':>16} | {'GDM':>16} | {'SPA':>16} |"
        " alpha_hat"
    )
    worse = []
    for n in ns:
        X, truth = make_simplex_nest(
            n, D, K, alpha=alpha, kernel=kernel, random_state=seed, **SETTINGS[kernel]["kw"]
        )
        ests = {
            "VLAD": VLAD(K, kernel, n_init=n_init, random_state=seed),
            "VLAD-alpha": VLAD(K, kernel, alpha=alpha, n_init=n_init, random_state=seed),
            "GDM": GDM(K, kernel, n_init=n_init, random_state=seed),
            "SPA": SimplexSPA(K, kernel),
        }
        row, errs = [], {}
        for name, est in ests.items():
            _, t = timed(lambda est=est: est.fit(X))
            errs[name] = min_matching_distance(est.vertices_, truth.vertices)
            row.append(f"{errs[name]:8.4f} {t:6.2f}s")
        print(f"{n:7d} | " + " | ".join(row) + f" | {ests['VLAD'].alpha_:.3f}", flush=True)
        for other in ("GDM", "SPA"):
            if errs["VLAD"] > errs[other]:
                worse.append((n, other, errs["VLAD"], errs[other]))
    return worse


def bayes(n, D, K, alpha, sigma, draws, tune, chains, advi_iter, seed):
    from bayespmf.models.simplex_nest import sample_simplex_nest, simplex_nest_model

    print(
        f"\n== NUTS / ADVI vs VLAD: Gaussian n={n}, D={D}, K={K}, alpha={alpha}, "
        f"sigma={sigma} =="
    )
    X, truth = make_simplex_nest(n, D, K, alpha=alpha, sigma=sigma, random_state=seed)
    vlad, t_vlad = timed(lambda: VLAD(K, random_state=seed).fit(X))
    print(
        f"VLAD: mmd={min_matching_distance(vlad.vertices_, truth.vertices):.4f} "
        f"alpha_hat={vlad.alpha_:.3f} sigma_hat={vlad.sigma_:.4f} time={t_vlad:.3f}s"
    )
    model = simplex_nest_model(X, K, alpha=alpha)
    for method, kw in (
        ("nuts", {"draws": draws, "tune": tune, "chains": chains, "cores": 1}),
        ("advi", {"draws": draws, "advi_iterations": advi_iter}),
    ):
        idata, t = timed(
            lambda method=method, kw=kw: sample_simplex_nest(
                model, init=vlad, method=method, random_seed=seed, progressbar=False, **kw
            )
        )
        V = idata.posterior["vertices"].mean(("chain", "draw")).values
        s = float(idata.posterior["sigma"].mean())
        err = min_matching_distance(V, truth.vertices)
        t_s = idata.posterior.attrs["sampling_time"]
        print(
            f"{method.upper()}: mmd(posterior mean)={err:.4f} sigma={s:.4f} "
            f"time={t:.1f}s (sampling {t_s:.1f}s) time/VLAD={t / t_vlad:.0f}x",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply n and D")
    ap.add_argument("--kernels", default="gaussian,poisson,multinomial")
    ap.add_argument("--n-vertices", type=int, default=10)
    ap.add_argument("--alpha", type=float, default=2.0)
    ap.add_argument("--n-init", type=int, default=8, help="k-means restarts (paper: 8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--advi-iter", type=int, default=20_000)
    ap.add_argument("--skip-bayes", action="store_true")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*BLAS.*")

    t0 = time.perf_counter()
    ns = [max(50, round(n * args.scale)) for n in PAPER_N]
    all_worse = []
    for kernel in args.kernels.split(","):
        D = max(args.n_vertices + 1, round(SETTINGS[kernel]["n_features"] * args.scale))
        all_worse += [
            (kernel, *w)
            for w in convergence(
                kernel, ns, D, args.n_vertices, args.alpha, args.seed, args.n_init
            )
        ]
    if not args.skip_bayes:
        # the small case of STACK-NOTES.md (n=500, D=10, K=3, alpha=2.5, sigma=0.1)
        bayes(
            max(100, int(500 * min(1.0, 2 * args.scale))),
            10,
            3,
            2.5,
            0.1,
            args.draws,
            args.tune,
            args.chains,
            args.advi_iter,
            args.seed,
        )
    print("\nVLAD at least as accurate as GDM and SPA at every n:", not all_worse)
    for kernel, n, other, e_v, e_o in all_worse:
        print(f"  {kernel} n={n}: VLAD {e_v:.4f} > {other} {e_o:.4f}")
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
