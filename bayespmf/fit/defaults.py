"""The defaults of :func:`bayespmf.fit.fit_latent_class`, each with what chose it.

Read at call time (``defaults.DEFAULT_N_INIT``), so a study may change one for a
whole session (``bayespmf.fit.defaults.DEFAULT_N_INIT = 100``).
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_ITER", "DEFAULT_N_INIT", "DEFAULT_TOL", "MAX_ROUNDS"]


#: Per-stage defaults of (max_iter, tol) used when the caller gives None. The "auto"
#: refinement runs to a tighter tolerance than a single EM so that optima a few
#: hundredths of a log-likelihood unit apart are told apart.
DEFAULT_MAX_ITER = {"em": 1000, "squarem": 1000, "auto": 2000, "cnmf-opt": 3000}

DEFAULT_TOL = {"em": 1e-7, "squarem": 1e-7, "auto": 1e-8, "cnmf-opt": 1e-7}

#: Starts of ``method="auto"`` (CNMF-SPA plus random ones), chosen by measurement
#: (benchmarks/mle_reliability.py; :ref:`bench-n-init`): with 100 starts the default
#: missed the best known optimum of UCI Car and Nursery; with 300 it reached both, and
#: refining all 100 of 100 did not (the starts, not the pruning, were short).
DEFAULT_N_INIT = 300

MAX_ROUNDS = 4
