"""One ``sample()`` for every model family (issue 23, item 1)."""

import numpy as np
import pandas as pd
import pytest

from bayespmf import DataValidationError
from bayespmf.datasets import make_latent_class, make_simplex_nest
from bayespmf.models import latent_class_model, model_family, sample
from bayespmf.models.simplex_nest import simplex_nest_model

#: The options every family takes, small enough for a test.
OPTIONS = dict(draws=15, tune=15, chains=2, cores=1, random_seed=4, progressbar=False)


def _families():
    data, _ = make_latent_class(
        80, [2, 3, 2], n_components=2, observed_prob=0.9, random_state=0
    )
    rng = np.random.default_rng(0)
    z = pd.DataFrame({"age": rng.normal(size=data.n_samples)})
    X, _ = make_simplex_nest(60, 4, 3, alpha=2.0, sigma=0.1, random_state=1)
    return {
        "latent_class": latent_class_model(data, n_components=2),
        "regression": latent_class_model(data, n_components=2, covariates=z),
        "simplex_nest": simplex_nest_model(X, 3, alpha=2.0),
    }


@pytest.fixture(scope="module")
def families():
    return _families()


def test_model_family_names_each_factory(families):
    assert {name: model_family(m) for name, m in families.items()} == {
        name: name for name in families
    }


@pytest.mark.slow
@pytest.mark.parametrize("family", ["latent_class", "regression", "simplex_nest"])
def test_one_sample_runs_every_family_with_the_same_options(families, family):
    idata = sample(families[family], **OPTIONS)
    post = idata.posterior
    assert (post.sizes["chain"], post.sizes["draw"]) == (2, 15)
    assert post.attrs["sampling_method"] == "nuts"
    assert post.attrs["nuts_sampler"] == "pymc"
    # every family: aligned draws beside the raw ones, a per-row log-likelihood
    assert {"unaligned_posterior", "sample_stats", "log_likelihood"} <= set(idata.children)
    loglik = idata.log_likelihood.to_dataset()
    for var in loglik.data_vars.values():  # one value per row and draw
        assert var.dims[:2] == ("chain", "draw") and var.ndim == 3
        assert np.isfinite(var.values).all()
    # one seed, the same draws
    again = sample(families[family], **OPTIONS)
    for var in post.data_vars:
        np.testing.assert_array_equal(again.posterior[var].values, post[var].values)


def test_options_a_family_lacks_are_refused(families):
    with pytest.raises(DataValidationError, match=r"simplex_transform.*latent-class"):
        sample(families["simplex_nest"], simplex_transform="pymc", **OPTIONS)
    with pytest.raises(DataValidationError, match="NUTS or Gibbs only"):
        sample(families["regression"], method="advi", **OPTIONS)
    with pytest.raises(DataValidationError, match=r"init='optima'.*latent-class"):
        sample(families["regression"], init="optima", **OPTIONS)


@pytest.mark.parametrize("family", ["simplex_nest"])
def test_gibbs_is_refused_for_every_family_but_latent_class(families, family):
    with pytest.raises(DataValidationError, match="latent-class models only"):
        sample(families[family], method="gibbs", **OPTIONS)


def test_the_registry_recognizes_each_family_once(families):
    from bayespmf.models.posterior import FAMILIES, MODEL_FAMILIES, family_of

    assert sorted(f.name for f in FAMILIES) == sorted(MODEL_FAMILIES)
    for name, model in families.items():
        assert family_of(model).name == name
        # the latent-class record is the fallback; no other family claims another's model
        claims = [f.name for f in FAMILIES if f.detect(model)]
        assert claims[0] == name


@pytest.mark.slow
@pytest.mark.parametrize("family", ["regression", "simplex_nest"])
def test_the_old_samplers_are_aliases_of_sample(families, family):
    from bayespmf.models.regression import sample_regression
    from bayespmf.models.simplex_nest import sample_simplex_nest

    alias = {"regression": sample_regression, "simplex_nest": sample_simplex_nest}[family]
    a = alias(families[family], **OPTIONS).posterior
    b = sample(families[family], **OPTIONS).posterior
    assert set(a.data_vars) == set(b.data_vars)
    for var in a.data_vars:
        np.testing.assert_array_equal(a[var].values, b[var].values)


def test_the_aliases_default_to_what_sample_defaults_to():
    import inspect

    from bayespmf.models._families import SAMPLE_DEFAULTS

    params = inspect.signature(sample).parameters
    options = {
        name: p.default
        for name, p in params.items()
        if p.kind is p.KEYWORD_ONLY and name not in ("n_components", "init")
    }
    assert options == SAMPLE_DEFAULTS


def test_log_likelihood_auto_skips_a_group_too_large_with_a_warning(families, monkeypatch):
    """``log_likelihood="auto"`` (the default) skips the group above the size cap."""
    from bayespmf.models import _families
    from bayespmf.models._families import log_likelihood_bytes

    model = families["latent_class"]
    assert log_likelihood_bytes(model, 2, 15) == 8 * 2 * 15 * 80
    opts = dict(OPTIONS, method="gibbs", chains=1, cores=1)
    opts.pop("tune")
    monkeypatch.setattr(_families, "LOG_LIKELIHOOD_MAX_BYTES", 8 * 15 * 80 - 1)
    with pytest.warns(UserWarning, match=r"log_likelihood group was not computed"):
        idata = sample(model, tune=5, **opts)
    assert "log_likelihood" not in idata.children
    assert "log_likelihood" in sample(model, tune=5, log_likelihood=True, **opts).children
    monkeypatch.setattr(_families, "LOG_LIKELIHOOD_MAX_BYTES", 8 * 15 * 80)
    assert "log_likelihood" in sample(model, tune=5, **opts).children
    with pytest.raises(DataValidationError, match="'log_likelihood'"):
        sample(model, log_likelihood="yes", **opts)
