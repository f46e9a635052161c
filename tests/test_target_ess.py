"""Sampling to a target instead of a length: ``sample(..., target_ess=...)`` (issue 36)."""

import arviz as az
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayespmf import ConvergenceWarning, DataValidationError
from bayespmf.datasets import make_latent_class
from bayespmf.models import convergence_summary, latent_class_model, sample
from bayespmf.models.diagnostics import rhat_ess_bulk

#: A short first batch (the target needs more), chains one after the other.
OPTS = dict(
    method="gibbs", draws=60, tune=20, chains=2, cores=1, progressbar=False, n_sweeps=1
)
#: Reached in a few batches of the case below.
TARGET = dict(target_ess=100, target_rhat=1.05)


@pytest.fixture(scope="module")
def case():
    data, truth = make_latent_class(
        150, [3, 2, 3, 2], n_components=2, observed_prob=0.8, random_state=3
    )
    return latent_class_model(data, 2), (truth.weights, truth.factors)


@pytest.fixture(scope="module")
def reached(case):
    model, point = case
    return sample(model, init=point, random_seed=0, **OPTS, **TARGET)


def test_the_target_is_reached_in_several_batches(reached):
    post = reached.posterior
    attrs = post.attrs
    assert attrs["target_reached"] == 1
    assert attrs["target_ess"] == 100.0 and attrs["target_rhat"] == 1.05
    assert "target_max_time" not in attrs
    batches = attrs["target_batches"]
    assert batches[0] == OPTS["draws"] and len(batches) > 1
    assert post.sizes["draw"] == sum(batches) > OPTS["draws"]
    assert len(attrs["target_batch_seconds"]) == len(batches)
    assert len(attrs["target_check_seconds"]) == len(batches)
    assert all(
        c <= b for c, b in zip(attrs["target_check_seconds"], attrs["target_batch_seconds"])
    )
    assert attrs["total_time"] >= attrs["sampling_time"] > 0
    assert attrs["tuning_steps"] == OPTS["tune"]
    # every group holds every batch's draws
    for group in ("unaligned_posterior", "log_likelihood", "sample_stats"):
        assert reached[group].sizes["draw"] == sum(batches), group
    np.testing.assert_array_equal(post["draw"].values, np.arange(sum(batches)))
    # the quantity checked is convergence_summary's, on the aligned draws
    table = convergence_summary(reached)["table"]
    assert attrs["target_rhat_max"] == pytest.approx(table["r_hat_max"].max(), rel=1e-9)
    assert attrs["target_ess_bulk_min"] == pytest.approx(
        table["ess_bulk_min"].min(), rel=1e-9
    )
    assert table["r_hat_max"].max() <= 1.05 and table["ess_bulk_min"].min() >= 100


def test_the_target_attrs_can_be_written_to_netcdf(reached, tmp_path):
    path = tmp_path / "posterior.nc"
    reached.posterior.to_dataset().to_netcdf(path, engine="h5netcdf")
    back = xr.open_dataset(path, engine="h5netcdf")
    assert back.attrs["target_reached"] == 1
    assert list(back.attrs["target_batches"]) == reached.posterior.attrs["target_batches"]
    back.close()


def test_the_log_likelihood_follows_the_joined_draws(case, reached):
    """Each draw's log-likelihood is that of its own (joined) parameters."""
    import pymc as pm

    model, _ = case
    idata = reached.copy()
    del idata["log_likelihood"]
    pm.compute_log_likelihood(idata, model=model, progressbar=False)
    np.testing.assert_allclose(
        idata.log_likelihood["x"].values,
        reached.log_likelihood["x"].values,
        rtol=1e-10,
    )


def test_one_seed_reproduces_the_run(case, reached):
    model, point = case
    again = sample(model, init=point, random_seed=0, **OPTS, **TARGET)
    assert (
        again.posterior.attrs["target_batches"] == reached.posterior.attrs["target_batches"]
    )
    for name in reached.posterior.data_vars:
        np.testing.assert_array_equal(again.posterior[name], reached.posterior[name])


def test_another_seed_changes_the_run(case, reached):
    model, point = case
    other = sample(model, init=point, random_seed=1, **OPTS, **TARGET)
    n = min(other.posterior.sizes["draw"], reached.posterior.sizes["draw"])
    first = other.posterior["weights"].values[:, :n]
    assert not np.allclose(first, reached.posterior["weights"].values[:, :n])
    assert other.posterior.attrs["target_reached"] == 1


def test_each_batch_continues_every_chain_from_its_last_draw(case, monkeypatch):
    """Batch b + 1 starts at batch b's last draw, untuned, the same step, a new seed."""
    from bayespmf.models import _families

    model, point = case
    calls = []
    real = _families.run_sampler

    def spy(sampled, **kwargs):
        out = real(sampled, **kwargs)
        calls.append((kwargs, out))
        return out

    monkeypatch.setattr(_families, "run_sampler", spy)
    idata = sample(model, init=point, random_seed=1, **OPTS, **TARGET)
    assert len(calls) == len(idata.posterior.attrs["target_batches"]) > 1
    first = calls[0][0]
    assert first["tune"] == OPTS["tune"] and first["random_seed"] == 1
    ends = np.cumsum(idata.posterior.attrs["target_batches"])
    raw = idata.unaligned_posterior
    for b, (kwargs, out) in enumerate(calls[1:], start=1):
        assert kwargs["tune"] == 0
        assert kwargs["draws"] == idata.posterior.attrs["target_batches"][b]
        assert kwargs["step"] is first["step"]  # the same Gibbs step, built once
        assert kwargs["random_seed"] != calls[b - 1][0]["random_seed"]
        for c, start in enumerate(kwargs["initvals"]):
            for name, value in start.items():
                np.testing.assert_array_equal(value, raw[name].values[c, ends[b - 1] - 1])
        # and the batch's draws are where the joined chain holds them
        np.testing.assert_array_equal(
            out.posterior["weights"].values,
            raw["weights"].values[:, ends[b - 1] : ends[b]],
        )


def test_a_first_batch_on_target_is_the_plain_run(case):
    model, point = case
    opts = dict(OPTS, draws=40, log_likelihood=False)
    plain = sample(model, init=point, random_seed=5, **opts)
    met = sample(model, init=point, random_seed=5, target_ess=1, target_rhat=10, **opts)
    assert met.posterior.attrs["target_batches"] == [40]
    for name in plain.posterior.data_vars:
        np.testing.assert_array_equal(met.posterior[name], plain.posterior[name])


def test_an_unreachable_target_warns_with_numbers_and_returns_the_draws(case):
    model, point = case
    with pytest.warns(ConvergenceWarning) as caught:
        idata = sample(
            model,
            init=point,
            random_seed=0,
            target_ess=1e7,
            max_time=0.5,
            log_likelihood=False,
            **OPTS,
        )
    message = str(caught[0].message)
    attrs = idata.posterior.attrs
    assert attrs["target_reached"] == 0 and attrs["target_max_time"] == 0.5
    n = idata.posterior.sizes["draw"]
    assert n == sum(attrs["target_batches"]) >= OPTS["draws"]
    assert f"worst aligned r-hat {attrs['target_rhat_max']:.4f}" in message
    assert f"smallest bulk ESS {attrs['target_ess_bulk_min']:.1f}" in message
    assert f"after {n} draws per chain" in message
    assert "max_time=0.5 s" in message and "bulk ESS >= 1e+07" in message


def test_a_one_class_model_reaches_its_exact_posterior():
    """One class: every Gibbs draw is an exact draw of the Dirichlet posterior.

    The weight (always 1) carries no uncertainty and is left out of the target; the
    factors' draws, joined over the batches, have the conjugate posterior mean.
    """
    codes = np.array([[0, 1], [1, 1], [2, 0], [0, -1], [1, 1], [2, 1]] * 5)
    model = latent_class_model(codes, 1, n_categories=[3, 2])
    point = ([1.0], [np.full((3, 1), 1 / 3), np.full((2, 1), 1 / 2)])
    idata = sample(
        model,
        init=point,
        random_seed=0,
        target_ess=200,
        target_rhat=1.05,
        log_likelihood=False,
        **OPTS,
    )
    assert idata.posterior.attrs["target_reached"] == 1
    assert len(idata.posterior.attrs["target_batches"]) > 1
    a0 = idata.posterior["A_x0"].values.reshape(-1, 3)
    counts = np.bincount(codes[:, 0], minlength=3)
    exact = (1 + counts) / (3 + counts.sum())  # Dirichlet(1 + counts) (default prior)
    sd = np.sqrt(exact * (1 - exact) / (4 + counts.sum()))
    assert np.all(np.abs(a0.mean(0) - exact) < 5 * sd / np.sqrt(200))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_ess": -5}, r"'target_ess'.*finite number above 0 .*got -5"),
        ({"target_ess": 0}, r"'target_ess'.*got 0\."),
        ({"target_ess": float("nan")}, r"'target_ess'.*got nan"),
        ({"target_ess": "400"}, r"'target_ess'.*got '400'"),
        ({"target_ess": True}, r"'target_ess'.*got True"),
        ({"target_ess": 400, "target_rhat": 1.0}, r"'target_rhat'.*above 1 .*got 1\.0"),
        ({"target_ess": 400, "max_time": 0}, r"'max_time'.*above 0 \(seconds"),
        ({"target_rhat": 1.01}, r"'target_rhat'.*applies with 'target_ess' only"),
        ({"max_time": 60}, r"'max_time'.*applies with 'target_ess' only"),
        ({"target_ess": 400, "chains": 1}, r"at least 2 chains"),
        ({"target_ess": 400, "var_names": ["weights"]}, r"'var_names'"),
        (
            {"target_ess": 400, "method": "nuts", "n_sweeps": None},
            r"'target_ess' is not available with method='nuts'.*step size and mass "
            r"matrix.*Use method='gibbs'",
        ),
        (
            {"target_ess": 400, "method": "advi", "n_sweeps": None, "cores": None},
            r"'target_ess' is not available with method='advi'",
        ),
    ],
)
def test_targets_that_cannot_be_met_exactly_are_refused(case, kwargs, match):
    model, _ = case
    opts = {**OPTS, **kwargs}
    opts = {k: v for k, v in opts.items() if v is not None}
    # init="auto" would fit first: each refusal comes before any work
    with pytest.raises(ValueError, match=match):
        sample(model, init="auto", **opts)


def test_target_ess_is_refused_for_external_nuts_and_a_regression(case):
    model, _ = case
    opts = {k: v for k, v in OPTS.items() if k not in ("n_sweeps", "method")}
    with pytest.raises(DataValidationError, match=r"method='nuts'.*nutpie, numpyro"):
        sample(model, method="nuts", nuts_sampler="numpyro", target_ess=400, **opts)
    data, _ = make_latent_class(
        40, [2, 3], n_components=2, observed_prob=0.9, random_state=0
    )
    z = pd.DataFrame({"age": np.linspace(-1, 1, data.n_samples)})
    regression = latent_class_model(data, 2, covariates=z)
    with pytest.raises(DataValidationError, match=r"regression model.*NUTS step"):
        sample(regression, init="auto", target_ess=400, **OPTS)


def test_rhat_ess_bulk_is_arviz_entry_by_entry():
    """The vectorized r-hat and bulk ESS are ArviZ's: ties, constants, short chains."""
    rng = np.random.default_rng(0)
    for chains, draws in [(2, 200), (3, 41), (1, 30), (4, 7), (2, 5), (2, 3)]:
        x = rng.normal(size=(chains, draws, 4)).cumsum(axis=1) * 0.3
        x += rng.normal(size=(chains, draws, 4))
        x[:, :, 1] = np.round(x[:, :, 1])  # ties
        x[:, :, 2] = 2.0  # constant
        rhat, ess = rhat_ess_bulk(x)
        for i in range(4):
            with np.errstate(divide="ignore", invalid="ignore"):
                want_r = float(az.rhat(x[:, :, i]))
                want_e = float(az.ess(x[:, :, i], method="bulk"))
            np.testing.assert_allclose(rhat[i], want_r, rtol=1e-10, equal_nan=True)
            np.testing.assert_allclose(ess[i], want_e, rtol=1e-10, equal_nan=True)


def test_the_returned_result_judges_the_target(monkeypatch):
    """A check met on the draws aligned batch by batch is judged again on the result.

    Stand-ins for the sampler and the alignment: the check (draws aligned batch by
    batch) says "reached" from 200 draws on, the finished result only from 400 on, so
    the batches go on after the first such check; the batch lengths follow the rule
    (as many as so far where the r-hat is reached but the ESS is far short).
    """
    from bayespmf.models import _target

    finished, judged = [], []

    def run(*, draws, tune, initvals, random_seed):
        x = np.random.default_rng(random_seed).normal(size=(2, draws))
        coords = {"chain": [0, 1], "draw": np.arange(draws)}
        post = xr.Dataset({"w": (("chain", "draw"), x)}, coords=coords)
        return xr.DataTree.from_dict({"posterior": post})

    def finish(raw):
        finished.append(raw.posterior.sizes["draw"])
        return raw.copy()

    def stats(post, watch=None):  # right after a finish: the result's statistics
        enough = 400 if len(finished) > len(judged) else 200
        judged[:] = finished
        ess = 1000.0 if post.sizes["draw"] >= enough else 10.0
        return np.array([0]), np.array([1.0]), np.array([ess])

    monkeypatch.setattr(_target, "entry_stats", stats)
    spec = _target.TargetSpec(500.0, 1.01, None)
    out = _target.sample_to_target(
        run,
        finish,
        lambda raw, aligned: raw["posterior"].to_dataset(),
        ["w"],
        spec=spec,
        draws=100,
        tune=0,
        initvals=None,
        random_seed=0,
        started=0.0,
        owner="sample",
    )
    attrs = out.posterior.attrs
    assert attrs["target_batches"] == [100, 100, 200] and attrs["target_reached"] == 1
    assert finished == [100, 200, 400]  # the first batch, then each check met
    assert out.posterior.sizes["draw"] == 400


def test_a_check_computes_the_entries_near_the_target(monkeypatch):
    """Between batches only the entries near or short of the target are computed."""
    from bayespmf.models import _target

    rng = np.random.default_rng(0)
    phi = np.array([0.0, 0.5, 0.9, 0.97, 0.0, 0.8])  # slower mixing, smaller ESS
    x = rng.normal(size=(2, 400, 6))
    for t in range(1, 400):
        x[:, t] += phi * x[:, t - 1]
    idata = az.from_dict({"posterior": {"a": x[:, :, :4], "b": x[:, :, 4:]}})
    entries, rhat, ess = _target.entry_stats(idata)
    assert entries.tolist() == list(range(6))
    some = _target.entry_stats(idata, watch=np.array([1, 4]))
    assert some[0].tolist() == [1, 4]
    np.testing.assert_array_equal(some[1], rhat[[1, 4]])
    np.testing.assert_array_equal(some[2], ess[[1, 4]])
    monkeypatch.setattr(_target, "WATCH_MIN", 1)
    spec = _target.TargetSpec(float(np.sort(ess)[2]), 10.0, None)
    watch = _target._watch(entries, rhat, ess, spec)
    assert watch.tolist() == sorted(np.flatnonzero(ess < 2 * spec.ess).tolist())
    assert 3 in watch and 0 not in watch


def test_next_batch_is_sized_from_the_rhat_and_the_ess():
    """A further batch asks for the draws that bring the ESS (ESS_MARGIN) and the
    r-hat's excess over 1 (RHAT_MARGIN) to their targets, assuming both scale with
    the draws; at least MIN_BATCH_SHARE, at most the draws so far; as many as so far
    when the figures are not finite."""
    from bayespmf.models._target import (
        ESS_MARGIN,
        MIN_BATCH_SHARE,
        RHAT_MARGIN,
        TargetSpec,
        _next_length,
    )

    spec = TargetSpec(400.0, 1.01, None)
    # the ESS alone: 800 draws gave 300, 400 * 1.1 / 300 of them are needed
    assert (
        _next_length(800, 1.005, 300.0, spec)
        == int(np.ceil(800 * ESS_MARGIN * 4 / 3)) - 800
    )
    # the r-hat: an excess of 0.012 needs 1.2 * RHAT_MARGIN times the draws
    want = int(np.ceil(800 * RHAT_MARGIN * 1.2)) - 800
    assert _next_length(800, 1.012, 1000.0, spec) == want < 800
    assert _next_length(800, 1.05, 1000.0, spec) == 800  # at most as many as so far
    assert _next_length(800, 1.005, 5000.0, spec) == int(np.ceil(MIN_BATCH_SHARE * 800))
    assert _next_length(800, float("nan"), 300.0, spec) == 800
    assert _next_length(800, 1.02, 0.0, spec) == 800


def test_a_slow_first_batch_is_thinned_and_the_further_ones_sparser():
    """With ``thin`` (the Gibbs step without a user's n_sweeps), a first batch whose
    slowest entry has few draws per autocorrelation time keeps one draw in
    ``thin_factor`` (the last kept: the next batch continues from it), ``thin`` is
    told once, and the result's draws are the kept ones followed by the further
    batches'."""
    from bayespmf.models import _target

    batches, told = [], []

    def run(*, draws, tune, initvals, random_seed):
        rng = np.random.default_rng(random_seed)
        x = np.empty((2, draws))
        x[:, 0] = rng.normal(size=2)
        for t in range(1, draws):  # AR(1), phi 0.95: tau about 39 draws
            x[:, t] = 0.95 * x[:, t - 1] + np.sqrt(1 - 0.95**2) * rng.normal(size=2)
        batches.append(x)
        coords = {"chain": [0, 1], "draw": np.arange(draws)}
        post = xr.Dataset({"w": (("chain", "draw"), x)}, coords=coords)
        return xr.DataTree.from_dict({"posterior": post})

    out = _target.sample_to_target(
        run,
        lambda raw: raw.copy(),
        lambda raw, aligned: raw["posterior"].to_dataset(),
        ["w"],
        spec=_target.TargetSpec(100.0, 1.5, 30.0),
        draws=200,
        tune=0,
        initvals=None,
        random_seed=0,
        started=__import__("time").perf_counter(),
        owner="sample",
        thin=told.append,
    )
    attrs = out.posterior.attrs
    k = attrs["target_thin"]
    assert told == [k] and k > 1
    ess = float(rhat_ess_bulk(batches[0][..., None])[1][0])
    assert k == _target.thin_factor(200, 2, ess)
    first = batches[0][:, (200 - 1) % k :: k]
    assert attrs["target_batches"][0] == first.shape[1]
    assert first[0, -1] == batches[0][0, -1]  # the last draw kept
    got = out.posterior["w"].values
    np.testing.assert_array_equal(got[:, : first.shape[1]], first)
    np.testing.assert_array_equal(got[:, first.shape[1] :], np.concatenate(batches[1:], 1))
    assert out.posterior.sizes["draw"] == sum(attrs["target_batches"])


def test_no_thinning_where_the_user_gives_n_sweeps(reached):
    """OPTS give n_sweeps: the draws are the user's spacing, never thinned."""
    assert reached.posterior.attrs["target_thin"] == 1
    assert reached.posterior.attrs["gibbs_sweeps_per_draw"] == 1
