"""``sample(..., method="gibbs")`` converged by default (issue 36, items 1 and 2).

Without ``draws`` (and without ``target_ess``) a Gibbs run of a latent-class model
samples to the default target; with ``draws`` it keeps a fixed length; on data above
``START_SUBSAMPLE_ROWS`` rows the default start is a subsample's fit refined on every
row (:func:`bayespmf.models.subsample_start`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bayespmf.models.posterior as posterior
from bayespmf._validation import ConvergenceWarning, DataValidationError
from bayespmf.datasets import make_latent_class
from bayespmf.models import latent_class_model, sample, subsample_start
from bayespmf.models._families import DEFAULT_DRAWS, DEFAULT_TUNE, default_length
from bayespmf.models._target import (
    DEFAULT_MAX_TIME,
    DEFAULT_TARGET_ESS,
    TARGET_FIRST_DRAWS,
    TARGET_TUNE,
    target_stats,
)
from bayespmf.pmf import log_likelihood_rows

QUIET = dict(chains=2, cores=1, progressbar=False, log_likelihood=False)


@pytest.fixture(scope="module")
def data():
    d, _ = make_latent_class(400, 3, 2, 0.3, n_variables=6, random_state=3)
    return d


NONE = dict.fromkeys(["draws", "tune", "target_ess", "target_rhat", "max_time"])


def length(family="latent_class", method="gibbs", chains=4, kwargs=None, **given):
    return default_length(family, method, chains, kwargs or {}, **{**NONE, **given})


def test_the_default_length_rule():
    assert length() == (
        TARGET_FIRST_DRAWS,
        TARGET_TUNE,
        DEFAULT_TARGET_ESS,
        None,
        DEFAULT_MAX_TIME,
    )
    # a max_time or target_rhat given applies to the default target
    assert length(target_rhat=1.05, max_time=30.0)[2:] == (DEFAULT_TARGET_ESS, 1.05, 30.0)
    # a fixed length wherever the target is not asked for and not available
    fixed = (DEFAULT_DRAWS, DEFAULT_TUNE, None, None, None)
    assert length(method="nuts") == fixed
    assert length(chains=1) == fixed
    assert length(family="regression") == fixed
    assert length(kwargs={"var_names": ["weights"]}) == fixed
    assert length(draws=300) == (300, DEFAULT_TUNE, None, None, None)
    # an explicit target without draws starts with the target's first batch
    first = (TARGET_FIRST_DRAWS, TARGET_TUNE, 100.0)
    assert length(chains=2, target_ess=100.0)[:3] == first


def fixed_run(data, **kw):
    """A short Gibbs run of fixed length (2 chains, one process)."""
    opts = dict(method="gibbs", draws=20, tune=5, random_seed=0, **QUIET)
    return sample(latent_class_model(data, 2), **{**opts, **kw})


def test_gibbs_without_draws_samples_to_the_default_target(data):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        idata = sample(latent_class_model(data, 2), method="gibbs", random_seed=0, **QUIET)
    attrs = idata.posterior.attrs
    assert attrs["target_ess"] == DEFAULT_TARGET_ESS
    assert attrs["target_max_time"] == DEFAULT_MAX_TIME
    assert attrs["target_batches"][0] == TARGET_FIRST_DRAWS
    assert attrs["tuning_steps"] == TARGET_TUNE
    assert attrs["target_reached"] == 1
    rhat, ess = target_stats(idata)
    assert rhat <= 1.01 and ess >= DEFAULT_TARGET_ESS
    assert idata.posterior.sizes["draw"] == sum(attrs["target_batches"])
    assert attrs["start_time"] > 0  # the start is timed


def test_gibbs_with_draws_keeps_a_fixed_length(data):
    idata = fixed_run(data, draws=30)
    assert idata.posterior.sizes["draw"] == 30
    assert "target_ess" not in idata.posterior.attrs
    with pytest.raises(DataValidationError, match="max_time"):
        sample(latent_class_model(data, 2), method="gibbs", draws=30, max_time=5, **QUIET)


def test_the_default_target_stops_at_max_time_with_numbers(data):
    with pytest.warns(ConvergenceWarning, match=r"r-hat .* smallest bulk ESS"):
        idata = sample(
            latent_class_model(data, 2),
            method="gibbs",
            target_rhat=1.0000001,  # out of reach
            max_time=1.0,
            random_seed=1,
            **QUIET,
        )
    assert idata.posterior.attrs["target_reached"] == 0
    assert idata.posterior.attrs["target_max_time"] == 1.0


def test_subsample_start_is_seeded_and_refined_on_every_row(data, monkeypatch):
    monkeypatch.setattr(posterior, "START_SUBSAMPLE_ROWS", 150)
    a = subsample_start(data, 2, random_seed=5)
    b = subsample_start(data, 2, random_seed=5)
    np.testing.assert_array_equal(a.weights_, b.weights_)
    assert a.start_subsample_rows_ == 150 and a.start_refine_iter_ >= 1
    # the refinement on every row does not lose likelihood against the subsample fit
    rng = np.random.default_rng(5)
    rows = np.sort(rng.choice(data.codes.shape[0], size=150, replace=False))
    from bayespmf.estimators import LatentClassPMF

    seed = int(rng.integers(2**31 - 1))
    sub = LatentClassPMF(2, n_init=posterior.START_SUBSAMPLE_N_INIT, random_state=seed)
    sub.fit(data[rows])
    full = log_likelihood_rows(data.codes, sub.weights_, sub.factors_).sum()
    assert a.loglik_ >= full - 1e-6
    assert np.isclose(a.start_subsample_loglik_, sub.loglik_)


def test_sample_records_a_subsample_start(data, monkeypatch):
    monkeypatch.setattr(posterior, "START_SUBSAMPLE_ROWS", 150)
    idata = fixed_run(data)
    attrs = idata.posterior.attrs
    assert attrs["start_subsample_rows"] == 150
    assert attrs["start_refine_converged"] in (0, 1)
    assert attrs["start_refine_iter"] >= 1
    # at or below the threshold, the full fit (no record)
    monkeypatch.setattr(posterior, "START_SUBSAMPLE_ROWS", 10_000)
    idata = fixed_run(data)
    assert "start_subsample_rows" not in idata.posterior.attrs


def test_a_target_thins_the_draws_unless_n_sweeps_is_given(data):
    from bayespmf.models.gibbs import TARGET_MAX_SWEEPS, target_sweeps

    assert target_sweeps(10**7) == 1 and target_sweeps(1) == TARGET_MAX_SWEEPS
    opts = dict(method="gibbs", random_seed=0, max_time=2.0, **QUIET)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        thinned = sample(latent_class_model(data, 2), **opts)
        given = sample(latent_class_model(data, 2), n_sweeps=2, **opts)
    # 400 rows x 6 variables: far below TARGET_SWEEP_ENTRIES, so the cap
    assert thinned.posterior.attrs["gibbs_sweeps_per_draw"] == TARGET_MAX_SWEEPS
    assert given.posterior.attrs["gibbs_sweeps_per_draw"] == 2
