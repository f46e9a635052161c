"""The Gibbs posterior of chunked data (bayespmf.dask.gibbs.sample_gibbs)."""

import arviz as az
import dask
import dask.array as da
import numpy as np
import pytest

from bayespmf import CategoricalData, DataValidationError
from bayespmf.dask import DaskCategoricalData
from bayespmf.dask.gibbs import _patterns, sample_gibbs
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import convergence_summary, posterior_params, sample

FAST = dict(progressbar=False)


@pytest.fixture(scope="module")
def separated():
    """Well separated classes: the Gibbs chains mix within a few sweeps."""
    data, _ = make_latent_class(
        300,
        4,
        n_components=2,
        n_variables=6,
        observed_prob=0.8,
        factor_prior="separable",
        epsilon=0.1,
        random_state=1,
    )
    point = LatentClassPMF(2, random_state=0).fit(data)
    return data, point


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _draws(idata):
    return {v: idata.posterior[v].values for v in idata.posterior.data_vars}


def test_same_posterior_as_in_memory_gibbs(separated, sync):
    data, point = separated
    memory = sample(
        data,
        n_components=2,
        init=point,
        method="gibbs",
        draws=300,
        tune=50,
        chains=2,
        random_seed=1,
        log_likelihood=False,
        cores=1,
        **FAST,
    )
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=120)
    chunked = sample_gibbs(
        ddata, 2, init=point, draws=600, tune=50, chains=2, random_seed=2, **FAST
    )
    # the same variables, dims and coordinates as the in-memory posterior
    assert set(chunked.posterior.data_vars) == set(memory.posterior.data_vars)
    for var in memory.posterior.data_vars:
        a, b = chunked.posterior[var], memory.posterior[var]
        assert a.dims == b.dims
        for dim in a.dims[2:]:
            assert a[dim].values.tolist() == b[dim].values.tolist()
    assert "unaligned_posterior" in chunked.children
    summary = convergence_summary(chunked)
    assert summary["table"]["r_hat_max"].max() < 1.05
    # means within Monte Carlo error of each other, sds alike
    for var in memory.posterior.data_vars:
        means = []
        for idata in (chunked, memory):
            post = idata.posterior.to_dataset()[[var]]
            means.append(
                (
                    post[var].mean(("chain", "draw")).values,
                    az.mcse(post, method="mean")[var].values,
                    post[var].std(("chain", "draw")).values,
                )
            )
        (m1, e1, s1), (m2, e2, s2) = means
        z = np.abs(m1 - m2) / np.sqrt(e1**2 + e2**2)
        assert z.max() < 4.5, (var, z.max())
        assert 0.7 < (s1 / s2).min() and (s1 / s2).max() < 1.45, var


def test_rank_one_is_the_exact_conjugate_posterior(sync):
    """With one class the posterior is Dirichlet(prior + category counts), exactly."""
    rng = np.random.default_rng(5)
    codes = rng.choice(3, size=(500, 2), p=[0.7, 0.2, 0.1])
    codes[rng.random(codes.shape) < 0.3] = -1
    data = CategoricalData.from_codes(codes, 3, names=["a", "b"])
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=200)
    prior = 40.0  # far from the counts' proportions: a prior ignored would show
    # the chains share each pass over the chunks: 8 x 250 independent draws
    idata = sample_gibbs(
        ddata,
        1,
        draws=250,
        tune=0,
        chains=8,
        random_seed=0,
        factor_prior=prior,
        overrelax=0,  # fresh draws: independent, whatever the start
        **FAST,
    )
    for j, name in enumerate(["a", "b"]):
        alpha = prior + np.bincount(codes[codes[:, j] >= 0, j], minlength=3)
        mean = alpha / alpha.sum()
        sd = np.sqrt(mean * (1 - mean) / (alpha.sum() + 1))
        draws = idata.posterior[f"A_{name}"].values[:, :, 0, :].reshape(-1, 3)
        # independent draws: the Monte Carlo error of the mean is sd / sqrt(2000)
        assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * sd / np.sqrt(2000))
        np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.1)


def test_weights_prior_is_used(separated, sync):
    data, point = separated
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=200)
    idata = sample_gibbs(
        ddata, 2, init=point, draws=20, tune=5, chains=1, weights_prior=1e5, **FAST
    )
    # a prior of 1e5 per class outweighs 300 rows: the weights sit at 1/2
    np.testing.assert_allclose(idata.posterior["weights"].values, 0.5, atol=0.01)


def test_same_draws_for_a_seed_and_chunking(separated):
    data, point = separated
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=70)
    kw = dict(init=point, draws=15, tune=3, chains=2, n_sweeps=2, **FAST)
    with dask.config.set(scheduler="synchronous"):
        first = _draws(sample_gibbs(ddata, 2, random_seed=11, **kw))
        other = _draws(sample_gibbs(ddata, 2, random_seed=12, **kw))
        streamed = _draws(sample_gibbs(ddata, 2, random_seed=11, persist=False, **kw))
    with dask.config.set(scheduler="threads", num_workers=2):
        threaded = _draws(sample_gibbs(ddata, 2, random_seed=11, threads=1, **kw))
    for var, values in first.items():
        np.testing.assert_array_equal(values, threaded[var])
        np.testing.assert_array_equal(values, streamed[var])
    assert not np.allclose(first["weights"], other["weights"])
    assert not np.allclose(first["A_x0"][0], first["A_x0"][1])  # chains differ
    # another chunking is another set of streams: other draws, the same model
    rechunked = DaskCategoricalData.from_categorical_data(data, chunk_rows=100)
    with dask.config.set(scheduler="synchronous"):
        moved = _draws(sample_gibbs(rechunked, 2, random_seed=11, **kw))
    assert not np.allclose(first["weights"], moved["weights"])


def test_distributed_client_gives_the_same_draws(separated):
    distributed = pytest.importorskip("dask.distributed")
    data, point = separated
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=100)
    kw = dict(init=point, draws=5, tune=1, chains=2, random_seed=3, **FAST)
    with dask.config.set(scheduler="synchronous"):
        local = _draws(sample_gibbs(ddata, 2, **kw))
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = _draws(sample_gibbs(ddata, 2, client=client, **kw))
    for var, values in local.items():
        np.testing.assert_array_equal(values, remote[var])


def test_default_start_and_reading_back(sync):
    data, truth = make_latent_class(
        400, 3, n_components=2, n_variables=5, factor_prior="separable", random_state=4
    )
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=150)
    idata = sample_gibbs(ddata, 2, draws=40, tune=20, chains=2, random_seed=3, **FAST)
    w, stacked = posterior_params(idata)  # variables read from the posterior's attrs
    assert w.shape == (80, 2) and stacked.shape == (80, 15, 2)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert idata.posterior.attrs["n_rows"] == 400
    assert idata.posterior.attrs["n_chunks"] == 3
    assert idata.sample_stats["sweep_time"].shape == (2, 40)
    # aligned to the fitted start: the truth's class weights, in some order
    got = np.sort(w.mean(axis=0))
    np.testing.assert_allclose(got, np.sort(truth.weights), atol=0.1)


def test_patterns_match_numpy_unique():
    rng = np.random.default_rng(0)
    codes = rng.integers(-1, 2, size=(300, 4))
    codes[:5] = -1  # rows with no observed entry are left out
    n_cat = np.array([2, 2, 2, 2])
    patterns, counts = _patterns(codes, n_cat)
    want, want_counts = np.unique(codes, axis=0, return_counts=True)
    keep = (want >= 0).any(axis=1)
    np.testing.assert_array_equal(patterns, want[keep])
    np.testing.assert_array_equal(counts, want_counts[keep])
    # mostly distinct rows are kept as they are, each with count 1
    distinct = rng.integers(-1, 10, size=(50, 6))
    distinct[3] = -1
    rows, ones = _patterns(distinct, np.full(6, 10))
    np.testing.assert_array_equal(rows, np.delete(distinct, 3, axis=0))
    assert ones.tolist() == [1] * 49
    # alphabets too large for one int64 key per row: np.unique over rows instead
    wide = np.array([2**15] * 5)
    patterns, counts = _patterns(codes[:, [0, 1, 2, 3, 0]], wide)
    assert counts.sum() == 295 and (patterns >= 0).any(axis=1).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_components": 0}, "n_components"),
        ({"draws": 0}, "draws"),
        ({"chains": 0}, "chains"),
        ({"n_sweeps": 0}, "n_sweeps"),
        ({"factor_prior": 0.0}, "factor_prior"),
        ({"weights_prior": -1.0}, "weights_prior"),
        ({"random_seed": "seed"}, "random_seed"),
        ({"split_every": 1}, "split_every"),
        ({"init": (np.ones(3) / 3, [np.ones((3, 3)) / 3] * 2)}, "classes"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    ddata = DaskCategoricalData.from_dask_array(
        da.from_array(np.array([[0, 1], [1, 0], [2, 1]]), chunks=(2, 2)), [3, 2]
    )
    args = {"n_components": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        sample_gibbs(ddata, args.pop("n_components"), draws=args.pop("draws", 5), **args)


def test_bad_data_is_refused(sync):
    with pytest.raises(DataValidationError, match="DaskCategoricalData"):
        sample_gibbs(np.zeros((3, 2), dtype=int), 2)
    never = DaskCategoricalData.from_dask_array(
        da.from_array(np.array([[0, -1], [1, -1], [1, -1]]), chunks=(2, 2)), [2, 2]
    )
    with pytest.raises(DataValidationError, match="never observed"):
        sample_gibbs(never, 2, draws=5, **FAST)
    bad = DaskCategoricalData.from_dask_array(
        da.from_array(np.array([[0, 1], [1, 7]]), chunks=(1, 2)), [2, 2]
    )
    with pytest.raises(DataValidationError):
        sample_gibbs(bad, 2, draws=5, **FAST)


def test_the_package_exports_the_sampler_lazily():
    import bayespmf.dask

    assert bayespmf.dask.sample_gibbs is sample_gibbs
    assert "sample_gibbs" in dir(bayespmf.dask)
    with pytest.raises(AttributeError, match="no_such_name"):
        bayespmf.dask.no_such_name


def test_sample_front_door_takes_chunked_data(separated, sync):
    """sample(ddata, n_components=..., method="gibbs") is sample_gibbs: the same draws."""
    data, point = separated
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=100)
    kw = dict(init=point, draws=10, tune=2, chains=2, random_seed=3, **FAST)
    front = sample(ddata, n_components=2, method="gibbs", n_sweeps=2, **kw)
    direct = sample_gibbs(ddata, 2, n_sweeps=2, **kw)
    for var, values in _draws(direct).items():
        np.testing.assert_array_equal(_draws(front)[var], values)
    assert front.posterior.attrs["sampling_method"] == "gibbs"
    assert "unaligned_posterior" in front.children


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "nuts"}, r"'method' is 'nuts'.*method='gibbs'"),
        ({"method": "gibbs", "n_components": None}, "'n_components' is required"),
        ({"method": "gibbs", "nuts_sampler": "numpyro"}, "'nuts_sampler' does not apply"),
        ({"method": "gibbs", "log_likelihood": True}, "'log_likelihood' does not apply"),
        ({"method": "gibbs", "jitter": 0.1}, "'jitter' does not apply"),
        ({"method": "gibbs", "cores": 2}, r"Unknown option\(s\) \['cores'\]"),
        ({"method": "gibbs", "init": "optima"}, "'init' is 'optima'"),
    ],
)
def test_sample_front_door_refuses_what_chunked_gibbs_cannot_do(separated, kwargs, match):
    data, _ = separated
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=100)
    kwargs = {"n_components": 2} | kwargs
    with pytest.raises(ValueError, match=match):
        sample(ddata, draws=2, tune=1, chains=1, **kwargs, **FAST)
