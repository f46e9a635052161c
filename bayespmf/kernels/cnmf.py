"""Coupled NMF of pairwise marginals: CNMF-SPA (Alg. 2) and CNMF-OPT (Alg. 1).

Under the latent-class model every pairwise marginal is a coupled nonnegative
factorization, ``X_jk = A_j diag(lambda) A_k^T`` (Ibrahim & Fu, eq. (5)). This module
gathers the names of the three modules that hold the method, one idea each:

* :mod:`bayespmf.kernels.cnmf_spa` -- :func:`cnmf_spa` recovers the factors in closed
  form from one "virtual NMF" matrix by the successive projection algorithm, the
  split of the variables chosen by misfit and a parametric bootstrap of the marginals
  (``bayespmf.kernels._cnmf_bootstrap``);
* :mod:`bayespmf.kernels.cnmf_opt` -- CNMF-OPT fits all observed pairs at once by
  KL-divergence mirror descent, usually started from :func:`cnmf_spa`: its validated
  problem (:func:`cnmf_opt_init`) and one sweep (:func:`cnmf_opt_step`);
  ``bayespmf.fit.cnmf.cnmf_opt`` runs the sweeps under the one loop;
* ``bayespmf.kernels._cnmf_common`` -- what both share: the checks of the marginals
  and of the rank (:func:`max_cnmf_rank`, :func:`check_n_components`), the pair weights and
  :func:`pairwise_misfit`.

The references are those of :mod:`bayespmf.kernels.cnmf_spa`.
"""

from __future__ import annotations

from bayespmf.kernels._cnmf_bootstrap import REPLICATE_BATCH_ENTRIES
from bayespmf.kernels._cnmf_common import (
    OBJECTIVE_FLOOR,
    PROB_FLOOR,
    check_n_components,
    max_cnmf_rank,
    pairwise_misfit,
)
from bayespmf.kernels.cnmf_opt import (
    ARMIJO_C,
    INIT_SMOOTHING,
    INITIAL_STEP,
    MAX_BACKTRACK,
    MAX_STEP,
    STEP_GROW,
    STEP_SHRINK,
    CNMFOptInfo,
    CNMFOptProblem,
    CNMFOptState,
    check_init_params,
    cnmf_opt_init,
    cnmf_opt_mm_map,
    cnmf_opt_mm_step,
    cnmf_opt_squarem_step,
    cnmf_opt_step,
)
from bayespmf.kernels.cnmf_spa import (
    BOOTSTRAP_MISFIT_RATIO,
    CUT_SHARES,
    DEFAULT_N_BOOTSTRAP,
    DEFAULT_N_SPLITS,
    MAX_BOOTSTRAPPED,
    MAX_ENUMERATED_NNLS_RANK,
    MAX_ENUMERATED_VARIABLES,
    SELECTIONS,
    cnmf_spa,
)

__all__ = [
    "CNMFOptInfo",
    "CNMFOptProblem",
    "CNMFOptState",
    "check_init_params",
    "check_n_components",
    "cnmf_opt_init",
    "cnmf_opt_mm_map",
    "cnmf_opt_mm_step",
    "cnmf_opt_squarem_step",
    "cnmf_opt_step",
    "cnmf_spa",
    "max_cnmf_rank",
    "pairwise_misfit",
]

# the constants of the three modules, importable from here as before the split
__all__ += [
    "ARMIJO_C",
    "BOOTSTRAP_MISFIT_RATIO",
    "CUT_SHARES",
    "DEFAULT_N_BOOTSTRAP",
    "DEFAULT_N_SPLITS",
    "INITIAL_STEP",
    "INIT_SMOOTHING",
    "MAX_BACKTRACK",
    "MAX_BOOTSTRAPPED",
    "MAX_ENUMERATED_NNLS_RANK",
    "MAX_ENUMERATED_VARIABLES",
    "MAX_STEP",
    "OBJECTIVE_FLOOR",
    "PROB_FLOOR",
    "REPLICATE_BATCH_ENTRIES",
    "SELECTIONS",
    "STEP_GROW",
    "STEP_SHRINK",
]
