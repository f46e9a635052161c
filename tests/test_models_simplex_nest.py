"""The simplex-nest PyMC model, VLAD-started sampling and vertex alignment."""

import arviz as az
import numpy as np
import pymc as pm
import pytest

from bayespmf._validation import DataValidationError
from bayespmf.datasets._simulate import make_simplex_nest
from bayespmf.estimators.simplex import VLAD
from bayespmf.models import align_labels, initvals, sample
from bayespmf.models.simplex_nest import simplex_nest_model


@pytest.mark.parametrize("kernel", ["gaussian", "poisson", "multinomial"])
@pytest.mark.filterwarnings("ignore::bayespmf.fit.simplex.UnresolvedSimplexWarning")
def test_model_structure_and_finite_logp_at_vlad_start(kernel):
    # the Poisson nest (n = 200, D = 6) is inside the noise bulk and VLAD says so; the
    # test is about the model built around VLAD's start
    kw = {"multinomial": {"words_per_doc": 500}, "gaussian": {"sigma": 0.05}}
    X, _ = make_simplex_nest(
        200, 6, 3, alpha=1.0, kernel=kernel, random_state=0, **kw.get(kernel, {})
    )
    model = simplex_nest_model(X, 3, kernel)
    dims = model.named_vars_to_dims
    assert dims["vertices"] == ("vertex", "feature")
    assert dims["theta"] == ("obs", "vertex")
    assert dims["x"] == ("obs", "feature")
    free = {v.name for v in model.free_RVs}
    assert free == {"vertices", "theta", "alpha"} | (
        {"sigma"} if kernel == "gaussian" else set()
    )
    fixed = simplex_nest_model(X, 3, kernel, alpha=2.0)
    assert "alpha" not in {v.name for v in fixed.free_RVs}
    vlad = VLAD(3, kernel, alpha=1.0, random_state=0).fit(X)
    iv = initvals(model, vlad, chains=2, random_seed=0)
    logp = model.compile_logp()
    for point in iv:
        ip = model.initial_point()
        full = {**ip}
        for rv in model.free_RVs:
            val = model.rvs_to_transforms[rv]
            value = point[rv.name]
            name = model.rvs_to_values[rv].name
            full[name] = val.forward(value, *rv.owner.inputs).eval() if val else value
        assert np.isfinite(logp(full))


def _fake_idata(V, theta, perms):
    """One chain; draw s holds vertices V[perms[s]] and theta[:, perms[s]]."""
    verts = np.stack([V[p] for p in perms])[None]
    th = np.stack([theta[:, p] for p in perms])[None]
    return az.from_dict(
        {
            "posterior": {
                "vertices": verts,
                "theta": th,
                "sigma": np.ones((1, len(perms))),
            }
        },
        dims={"vertices": ["vertex", "feature"], "theta": ["obs", "vertex"]},
    )


def test_align_labels_undoes_vertex_planted_permutations_exactly(rng):
    V = rng.normal(size=(4, 5)) * 3
    theta = rng.dirichlet(np.ones(4), size=7)
    perms = [rng.permutation(4) for _ in range(6)]
    idata = _fake_idata(V, theta, perms)
    out = align_labels(idata, V + 0.01 * rng.normal(size=V.shape))
    for s in range(6):
        np.testing.assert_array_equal(out.posterior["vertices"].values[0, s], V)
        np.testing.assert_array_equal(out.posterior["theta"].values[0, s], theta)
    stored = out.sample_stats["vertex_permutation"].values[0]
    for s, p in enumerate(perms):
        np.testing.assert_array_equal(p[stored[s]], np.arange(4))  # perm^-1 applied
    np.testing.assert_array_equal(
        out.unaligned_posterior["vertices"].values, idata.posterior["vertices"].values
    )
    np.testing.assert_array_equal(
        out.posterior["sigma"].values, idata.posterior["sigma"].values
    )


def test_align_labels_vertex_errors(rng):
    idata = _fake_idata(np.eye(3), np.full((2, 3), 1 / 3), [np.arange(3)])
    with pytest.raises(DataValidationError, match=r"shape \(2, 3\).*\(3, 3\)"):
        align_labels(idata, np.zeros((2, 3)))
    bad = az.from_dict({"posterior": {"w": np.zeros((1, 2))}})
    with pytest.raises(DataValidationError, match=r"no draws of a bayespmf model"):
        align_labels(bad, np.zeros((2, 3)))


def test_small_nuts_starts_at_vlad_and_aligns():
    X, _ = make_simplex_nest(60, 4, 3, alpha=2.0, sigma=0.1, random_state=1)
    vlad = VLAD(3, alpha=2.0, random_state=0).fit(X)
    model = simplex_nest_model(X, 3, alpha=2.0)
    idata = sample(
        model,
        init=vlad,
        draws=20,
        tune=20,
        chains=2,
        cores=1,
        random_seed=3,
        progressbar=False,
    )
    assert idata.posterior.attrs["sampling_method"] == "nuts"
    assert "unaligned_posterior" in idata.children
    raw = idata.unaligned_posterior["vertices"].values  # (chain, draw, K, D)
    # Chains start at the jittered VLAD vertices and stay in that labelling: without
    # init a chain would sit in an arbitrary permutation (5 of 6 for K = 3).
    perms = idata.sample_stats["vertex_permutation"].values
    assert np.all(perms == np.arange(3))
    scale = np.linalg.norm(vlad.vertices_ - vlad.vertices_.mean(0))
    first = raw[:, 0]
    assert np.all(np.linalg.norm(first - vlad.vertices_, axis=(1, 2)) < 0.5 * scale)


def test_sample_errors():
    X, _ = make_simplex_nest(20, 3, 2, alpha=1.0, sigma=0.1, random_state=0)
    model = simplex_nest_model(X, 2, alpha=1.0)
    with pytest.raises(
        DataValidationError,
        match=r"'method' parameter of sample must be 'nuts' or 'advi'",
    ):
        sample(model, method="gibbs")
    with pytest.raises(DataValidationError, match=r"built by bayespmf"):
        sample(pm.Model())
    with pytest.raises(DataValidationError, match=r"vertices have shape \(3, 3\)"):
        sample(model, init={"vertices": np.zeros((3, 3))})
    with pytest.raises(DataValidationError, match=r"'init' must be None"):
        sample(model, init="vlad")
    with pytest.raises(DataValidationError, match=r"'n_components'.*>= 2"):
        simplex_nest_model(X, 1)


@pytest.mark.slow
def test_vector_alpha_hyperprior_starts_from_vlad_and_samples():
    """alpha='vector': one free alpha per vertex, started at VLAD's vector estimate."""
    import warnings

    from bayespmf.datasets import make_simplex_nest
    from bayespmf.estimators.simplex import VLAD
    from bayespmf.models import sample, simplex_nest_model

    X, _ = make_simplex_nest(
        400, 2, 3, alpha=[0.5, 1.5, 2.5], sigma=0.1, kernel="gaussian", random_state=0
    )
    model = simplex_nest_model(X, 3, alpha="vector")
    assert model.named_vars_to_dims["alpha"] == ("vertex",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VLAD's AsymmetricDirichletWarning
        vlad = VLAD(3, random_state=0).fit(X)
    iv = initvals(model, vlad, chains=2, random_seed=0)
    assert iv[0]["alpha"].shape == (3,)
    # the starts are VLAD's vector, jittered on the log scale
    assert np.allclose(np.log(iv[0]["alpha"]), np.log(vlad.alpha_), atol=0.3)
    idata = sample(
        model,
        init=vlad,
        draws=20,
        tune=20,
        chains=1,
        random_seed=1,
        progressbar=False,
        log_likelihood=False,
    )
    assert idata.posterior["alpha"].dims == ("chain", "draw", "vertex")
    assert np.isfinite(idata.posterior["alpha"].values).all()
    with pytest.raises(DataValidationError, match="'alpha'"):
        simplex_nest_model(X, 3, alpha="asymmetric")
