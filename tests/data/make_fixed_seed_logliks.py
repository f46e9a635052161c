"""Record fixed-seed log-likelihoods of every LatentClassPMF method.

Run once on a known-good tree (it wrote ``fixed_seed_logliks.json`` on commit 689be97,
before the fit pipeline moved to ``bayespmf.fit``, and again when CNMF-SPA's split
choice and JUROR's rho changed on purpose: cnmf-spa, cnmf-opt, cnmf-spa-em,
cnmf-spa-squarem and juror* moved then; em, squarem, ctd and ad-em did not; cnmf-opt
again when its default solver became SQUAREM-accelerated EM of the same composite
likelihood, -1514.96 -> -1508.82 after 30 iterations; juror* again when JUROR's G3 took
diagonally scaled steps and rho="cv" split the rows, with a new grid: juror
-1520.48 -> -1520.60, juror-b -1520.42 -> -1520.50, juror-c -1520.57 -> -1520.60);
``tests/test_fit_regression.py`` checks that refactors do not move these numbers.
Explicit method, ``tol=1e-300`` (so the iteration count, not the stopping rule, ends
every fit) and ``max_iter``.
"""

import json
import warnings
from pathlib import Path

from bayespmf import LatentClassPMF
from bayespmf.datasets import make_latent_class

CASES = [
    ("em", 25),
    ("squarem", 8),
    ("cnmf-spa", 1),
    ("cnmf-opt", 30),
    ("cnmf-spa-em", 25),
    ("cnmf-spa-squarem", 8),
    ("juror", 5),
    ("juror-b", 5),
    ("juror-c", 5),
    ("ctd", 5),
    ("ad-em", 5),
]


def data():
    d, _ = make_latent_class(400, [3, 2, 4, 3, 2], n_components=3, random_state=7)
    d, _ = d.hide_entries(0.2, random_state=1)
    return d


def loglik(method, max_iter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LatentClassPMF(
            3, method=method, max_iter=max_iter, tol=1e-300, random_state=0
        )
        est.fit(data())
    return float(est.score_samples(data()).sum())


if __name__ == "__main__":
    out = {m: [it, loglik(m, it)] for m, it in CASES}
    path = Path(__file__).with_name("fixed_seed_logliks.json")
    path.write_text(json.dumps(out, indent=1))
    print(out)
