r"""Kernels of the Voronoi Latent Admixture (VLAD) algorithm for Dirichlet simplex nests.

Yurochkin, Guha, Sun & Nguyen (ICML 2019). One module per idea, all re-exported here:

- :mod:`bayespmf.kernels.vlad_geometry`: preprocessing, the top singular subspace, the
  VLAD centroids, their extension and barycentric coordinates (Alg. 1 and 2);
- :mod:`bayespmf.kernels.vlad_moments`: alpha by the method of moments (eq. (5) with
  Lemma 3 of Supplement A.3) and the SIMEX noise correction;
- :mod:`bayespmf.kernels.vlad_calibration`: alpha and the extension calibrated by a
  parametric bootstrap, and the clustering of simulated nests;
- :mod:`bayespmf.kernels.vlad_asymmetric`: the cell-mass test of a symmetric Dirichlet
  (calibrated by simulating the fitted nest) and the vector-alpha estimate.

Arrays in, arrays out, no warnings; validation and warnings live in
:func:`bayespmf.fit.simplex.fit_simplex_nest`.
"""

from bayespmf.kernels.kmeans import DEFAULT_KMEANS_MAX_ITER, DEFAULT_N_INIT, kmeans
from bayespmf.kernels.vlad_asymmetric import (
    SYMMETRY_REPS,
    AlphaVector,
    MassBalance,
    dirichlet_cvt,
    estimate_alpha_vector,
    mass_balance,
    match_cells,
    symmetry_test,
)
from bayespmf.kernels.vlad_calibration import (
    CALIBRATION_MAX_EVALS,
    NOISE_SIMULATORS,
    AlphaCalibration,
    FrameFit,
    calibrate_alpha,
    frame_kmeans,
)
from bayespmf.kernels.vlad_geometry import (
    KERNELS,
    Subspace,
    barycentric_weights,
    center_and_gram,
    extend_centroids,
    preprocess,
    top_subspace,
    vlad_centroids,
)
from bayespmf.kernels.vlad_moments import (
    NOISE_CORRECTIONS,
    alpha_objective,
    corrected_metric,
    dirichlet_cov_scale,
    estimate_alpha,
    noise_bulk_edge,
    noise_fraction,
    noise_variance,
    phi_star,
    signal_margin,
    simex_phi_star,
)

__all__ = [
    "CALIBRATION_MAX_EVALS",
    "DEFAULT_KMEANS_MAX_ITER",
    "DEFAULT_N_INIT",
    "KERNELS",
    "NOISE_CORRECTIONS",
    "NOISE_SIMULATORS",
    "SYMMETRY_REPS",
    "AlphaCalibration",
    "AlphaVector",
    "FrameFit",
    "MassBalance",
    "Subspace",
    "alpha_objective",
    "barycentric_weights",
    "calibrate_alpha",
    "center_and_gram",
    "corrected_metric",
    "dirichlet_cov_scale",
    "dirichlet_cvt",
    "estimate_alpha",
    "estimate_alpha_vector",
    "extend_centroids",
    "frame_kmeans",
    "kmeans",
    "mass_balance",
    "match_cells",
    "noise_bulk_edge",
    "noise_fraction",
    "noise_variance",
    "phi_star",
    "preprocess",
    "signal_margin",
    "simex_phi_star",
    "symmetry_test",
    "top_subspace",
    "vlad_centroids",
]
