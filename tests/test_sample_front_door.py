"""One ``sample()`` for every model family (issue 23, item 1)."""

import numpy as np
import pandas as pd
import pytest

from bayespmf import DataValidationError
from bayespmf.datasets import make_latent_class, make_simplex_nest
from bayespmf.models import initvals, latent_class_model, model_family, sample
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


class _Stop(Exception):
    """Raised by the stand-in sampler once it has seen the starts."""


def _flat(start) -> np.ndarray:
    return np.concatenate([np.ravel(start[k]) for k in sorted(start)])


@pytest.mark.parametrize("family", ["latent_class", "regression", "simplex_nest"])
def test_jitter_spreads_every_familys_starts(families, family, monkeypatch):
    """``sample(jitter=)`` is the sd of the chains' jitter, the same for every family."""
    from bayespmf.models import _families
    from bayespmf.models.posterior import family_of

    model = families[family]
    point = family_of(model).estimate(model, 0)
    seen = []

    def stand_in(sampled, *, initvals, **kwargs):
        seen.append(initvals)
        raise _Stop

    monkeypatch.setattr(_families, "run_sampler", stand_in)
    # the pivot coordinates would rename a latent-class model's starts: PyMC's here
    opts = dict(OPTIONS, simplex_transform="pymc") if family == "latent_class" else OPTIONS
    spread = {}
    for jitter in (0, 0.05, 0.5):
        with pytest.raises(_Stop):
            sample(model, init=point, jitter=jitter, **opts)
        first, second = (_flat(start) for start in seen[-1][:2])
        spread[jitter] = np.abs(first - second).max()
        # the same starts as initvals gives at that jitter
        own = initvals(
            model, point, chains=2, jitter=jitter, random_seed=OPTIONS["random_seed"]
        )
        np.testing.assert_allclose(first, _flat(own[0]))
    assert spread[0] == 0.0  # every chain at the point estimate itself
    assert 0 < spread[0.05] < spread[0.5]
    with pytest.raises(_Stop):  # None: the default, INIT_JITTER
        sample(model, init=point, **opts)
    assert np.abs(_flat(seen[-1][0]) - _flat(seen[-1][1])).max() == pytest.approx(
        spread[0.05]
    )


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.1", True, [0.1]])
def test_a_bad_jitter_is_refused_before_any_work(families, bad):
    for model in families.values():
        with pytest.raises(DataValidationError, match=r"'jitter' parameter of sample"):
            sample(model, jitter=bad, **OPTIONS)
        with pytest.raises(DataValidationError, match=r"'jitter' parameter of initvals"):
            initvals(model, jitter=bad)


def test_jitter_without_a_start_to_jitter_is_refused(families):
    # init=None on a latent-class model: PyMC initializes the chains, nothing is jittered
    with pytest.raises(DataValidationError, match=r"'jitter'.*init=None"):
        sample(families["latent_class"], init=None, jitter=0.1, **OPTIONS)


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
