"""The default fit at scale: many rows, and one variable of very many categories.

Two cases, each fitted in a fresh Python process (so that its peak resident memory is
its own), each beside ``method="em"`` (one start, plain EM: the cheapest fit of the
same rows) in the same run:

* **rows**: 2e6 rows of 5 variables of 40 categories, 30 % of the entries missing,
  drawn from a random 2-class model; ``LatentClassPMF(2, n_init=30)``.
* **flat**: the same shape drawn independently and uniformly, so without latent
  structure: the likelihood is nearly flat and the starts crawl toward its maximum for
  thousands of EM maps (the hardest case for the iterations; the polish stops at its
  budget, ``POLISH_SHARE``, and the row says so).
* **categories**: 2e5 rows, one variable of 100,000 categories (the largest alphabet
  :class:`~bayespmf.CategoricalData` takes) beside four small ones, from a random
  2-class model; the default ``LatentClassPMF(2)``.

Each row prints the wall time of the fit (data generation excluded), its peak resident
memory (``ru_maxrss`` of the process, data and imports included), the log-likelihood,
and for the default fit the EM maps per stage (``info["work"]``). The import and the
compilation are warmed by a small fit on the same process first.

    python benchmarks/default_fit_scale.py [--cases rows flat categories] [--quick]
        [--against DIR]

``--quick`` runs the cases at 1/100 of their rows (a smoke run). ``--against DIR``
adds the default fit of another checkout of bayespmf (``git worktree add DIR
<commit>``), run in the same way right after ours: the baseline in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

CASES = ("rows", "flat", "categories")


def make_case(case: str, scale: float, seed: int = 0):
    """``(CategoricalData, n_components, fit keywords)`` of a case."""
    from bayespmf.datasets import make_latent_class

    if case in ("rows", "flat"):
        n_rows = int(2_000_000 * scale)
        if case == "rows":
            data, _ = make_latent_class(
                n_rows, [40] * 5, 2, observed_prob=0.7, random_state=seed
            )
            return data, 2, {"n_init": 30}
        from bayespmf import CategoricalData

        rng = np.random.default_rng(seed)
        codes = rng.integers(0, 40, size=(n_rows, 5), dtype=np.int16)
        codes[rng.random(codes.shape) < 0.3] = -1
        return CategoricalData(codes, n_categories=[40] * 5), 2, {"n_init": 30}
    n_rows = int(200_000 * scale)
    data, _ = make_latent_class(n_rows, [100_000, 2, 3, 3, 4], 2, random_state=seed)
    return data, 2, {}


def run_one(case: str, method: str, scale: float, seed: int) -> dict:
    """Fit one case in this process; the figures as a dict."""
    import resource
    import warnings

    from bayespmf import LatentClassPMF
    from bayespmf.datasets import make_latent_class

    warm, _ = make_latent_class(500, [4, 3, 3], 2, random_state=1)
    LatentClassPMF(2, random_state=0).fit(warm)
    LatentClassPMF(2, method="em", random_state=0).fit(warm)
    data, n_components, kwargs = make_case(case, scale, seed)
    if method == "em":
        kwargs = {"method": "em"}
    est = LatentClassPMF(n_components, random_state=seed, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(data)
        seconds = time.perf_counter() - t0
    info = est.info_ or {}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cut = info.get("polish_cut")
    return {
        "case": case,
        "method": method if method == "em" else "default",
        "cut": cut is not None,
        "rows": data.n_samples,
        "seconds": seconds,
        "peak_gb": peak / 1e9,
        "loglik": float(est.loglik_),
        "work": {k: int(v) for k, v in dict(info.get("work", {})).items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--against", metavar="DIR", help="another checkout, same run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="1/100 of the rows")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "METHOD"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    scale = 0.01 if args.quick else 1.0
    if args.child:
        print(json.dumps(run_one(*args.child, scale=scale, seed=args.seed)))
        return 0
    print(
        f"{'case':<11} {'fit':<8} {'rows':>9} {'seconds':>8} {'peak GB':>8} "
        f"{'loglik':>16}  EM maps (explore/refine/polish)"
    )
    status = 0
    runs = [("default", None, "default"), ("em", None, "em")]
    if args.against:
        runs.append(("default", os.path.abspath(args.against), "against"))
    for case in args.cases:
        for method, checkout, label in runs:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                case,
                method,
                "--seed",
                str(args.seed),
            ] + (["--quick"] if args.quick else [])
            env = dict(os.environ)
            if checkout is not None:
                env["PYTHONPATH"] = checkout
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                print(f"{case:<11} {label:<8} failed:\n{proc.stderr[-2000:]}")
                status = 1
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            work = "/".join(
                str(r["work"].get(k, 0)) for k in ("explore", "refine", "polish")
            )
            note = " (polish cut at its budget)" if r.get("cut") else ""
            print(
                f"{r['case']:<11} {label:<8} {r['rows']:>9} {r['seconds']:>8.1f} "
                f"{r['peak_gb']:>8.2f} {r['loglik']:>16.4f}  "
                f"{work if r['work'] else '-'}{note}"
            )
    if args.against:
        print(f"against: {args.against}")
    return status


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    sys.exit(main())
