"""Label alignment of a latent-class posterior to a point estimate (Hungarian method)."""

from __future__ import annotations

import numpy as np

from bayespmf.data import CategoricalData
from bayespmf.models._alignment import apply_permutations, hungarian_permutations
from bayespmf.models._binding import params_of
from bayespmf.models._draws import posterior_params, variable_names

__all__ = ["align_labels"]


def align_labels(
    idata, reference, data: CategoricalData | None = None, *, n_refine: int = 2
):
    """Relabel every draw's classes to match a reference by the Hungarian method.

    Mixture posteriors are invariant to permuting the classes, and samplers visit
    several permutations (STACK-NOTES.md), so raw r-hat/ESS are meaningless. For each
    draw, the permutation minimizing the squared distance between its stacked factors
    (and weights) and the reference's is applied to every variable with a ``class``
    dimension. With ``n_refine > 0`` the reference is then replaced by the aligned
    posterior mean and the alignment repeated (the first pivot must come from outside
    the chains, e.g. a point estimate; a chain's own mean mixes labels).

    Parameters
    ----------
    idata : xarray.DataTree
        With a ``posterior`` group from :func:`latent_class_model`.
    reference : LatentClassPMF, (weights, factors) or dict
        The pivot.
    data : CategoricalData, optional
        The model's data (for the variable names); taken from
        ``idata.attrs["bayespmf_variables"]`` when omitted.
    n_refine : int, default 2
        Rounds of refinement against the aligned posterior mean.

    Returns
    -------
    xarray.DataTree
        A new object whose ``posterior`` is aligned; the draws as sampled are kept in
        the group ``unaligned_posterior`` and the permutations (``perm[f]`` = raw
        class put at position ``f``) in ``sample_stats["class_permutation"]``.
    """
    names = variable_names(idata, data)
    post = idata.posterior
    n_components = post.sizes["class"]
    n_cat = [post.sizes[f"{n}_category"] for n in names]
    labels = [[str(c) for c in post[f"{n}_category"].values] for n in names]
    fake = CategoricalData(np.zeros((1, len(names)), dtype=np.int64), n_cat, names, labels)
    ref = params_of(reference, fake, n_components)
    ref_stacked = np.concatenate([np.asarray(a) for a in ref.factors], axis=0)
    ref_w = np.asarray(ref.weights)
    w, stacked = posterior_params(idata, fake)
    c, d = post.sizes["chain"], post.sizes["draw"]
    # components are the classes: stacked factor columns plus the weight
    feats = np.concatenate([stacked, w[:, None, :]], axis=1).transpose(0, 2, 1)
    ref_feats = np.concatenate([ref_stacked, ref_w[None, :]], axis=0).T
    perms = hungarian_permutations(feats, ref_feats, n_refine=n_refine)
    return apply_permutations(
        idata, perms.reshape(c, d, n_components), "class", "class_permutation"
    )
