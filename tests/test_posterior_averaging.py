"""Model averaging of latent-class posteriors across ranks (bayespmf.models.averaging)
and the posterior rows of the tasks that use it."""

import warnings

import arviz as az
import numpy as np
import pytest

from bayespmf import CategoricalData, DataValidationError, datasets
from bayespmf.apps import _splits, _task_latent, tasks
from bayespmf.models import averaged_predict_proba, rank_weights, stacking_weights
from bayespmf.pmf import conditional_pmf

VOTES, _ = datasets.load_votes()


def _loglik_fits(rng, means, n_rows=40, chains=2, draws=400):
    """Posteriors with made-up pointwise log-likelihoods (one value per row)."""
    fits = {}
    for label, mean in means.items():
        ll = rng.normal(mean, 0.05, size=(chains, draws, n_rows))
        fits[label] = az.from_dict(
            {
                "posterior": {"mu": rng.normal(size=(chains, draws))},
                "log_likelihood": {"x": ll},
            },
        )
    return fits


def _compare(fits, method):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' inplace deprecation inside ArviZ
        return az.compare(
            {str(k): v for k, v in fits.items()}, method=method, round_to="none"
        )


# ------------------------------------------------------------------ stacking weights


def test_stacking_weights_equal_az_compare_on_pointwise_loo(rng):
    # rows each model predicts better: interior stacking weights
    n = 40
    means = {
        2: np.where(np.arange(n) < 20, -1.0, -3.0),
        3: np.where(np.arange(n) < 20, -2.5, -1.2),
        5: np.full(n, -2.0),
    }
    fits = _loglik_fits(rng, means, n_rows=n)
    table = _compare(fits, "stacking")
    loo_i = np.column_stack([az.loo(fits[k], pointwise=True).elpd_i.values for k in fits])
    w = stacking_weights(loo_i)
    assert w.sum() == pytest.approx(1.0)
    expected = np.array([table.loc[str(k), "weight"] for k in fits])
    np.testing.assert_allclose(w, expected, atol=2e-3)
    assert 0.1 < w[0] < 0.9 and 0.1 < w[1] < 0.9  # an interior optimum was tested
    # and rank_weights returns az.compare's weights in the labels' order
    got = rank_weights(fits)
    assert list(got.index) == [2, 3, 5]
    assert got.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(got.values, expected / expected.sum(), atol=1e-12)


def test_stacking_weights_maximize_the_log_score_brute_force(rng):
    lpd = np.log(rng.uniform(0.01, 1.0, size=(30, 2)))
    w = stacking_weights(lpd)
    grid = np.linspace(0.0, 1.0, 100_001)
    score = np.log(np.exp(lpd) @ np.vstack([grid, 1 - grid])).sum(axis=0)
    assert w[0] == pytest.approx(grid[np.argmax(score)], abs=1e-4)
    # a shift of a row changes nothing; a very negative scale does not underflow
    shifted = lpd + rng.normal(size=(30, 1)) - 2000.0
    np.testing.assert_allclose(stacking_weights(shifted), w, atol=1e-9)


def test_stacking_weights_drop_a_dominated_model(rng):
    good = np.log(rng.uniform(0.3, 1.0, size=50))
    w = stacking_weights(np.column_stack([good, good - 1.0]))
    assert w[0] == pytest.approx(1.0, abs=1e-6)


def test_bb_pseudo_bma_weights_are_bootstrapped_pseudo_bma(rng):
    fits = _loglik_fits(rng, {1: -1.00, 2: -1.02, 3: -1.5})
    elpd_i = np.column_stack(
        [az.loo(f, pointwise=True).elpd_i.values for f in fits.values()]
    )
    n = elpd_i.shape[0]
    # Yao et al. (2018), Sec. 3.2, by explicit loops over replications
    boot = np.random.default_rng(7)
    want = np.zeros(3)
    for _ in range(1000):
        z = n * boot.dirichlet(np.ones(n)) @ elpd_i
        want += np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    want /= 1000
    got = rank_weights(fits, method="BB-pseudo-BMA", seed=7)
    np.testing.assert_allclose(got.values, want, rtol=1e-10)
    np.testing.assert_allclose(got.attrs["compare"]["weight"].loc[["1", "2", "3"]], want)
    # the same seed gives the same weights; another seed other (bootstrap) weights
    again = rank_weights(fits, method="BB-pseudo-BMA", seed=7)
    np.testing.assert_array_equal(again.values, got.values)
    other = rank_weights(fits, method="BB-pseudo-BMA", seed=8)
    assert not np.array_equal(other.values, got.values)
    np.testing.assert_allclose(other.values, got.values, atol=0.05)


def test_pseudo_bma_weights_from_elpd(rng):
    fits = _loglik_fits(rng, {1: -1.00, 2: -1.02, 3: -1.5})
    elpd = np.array([az.loo(f).elpd for f in fits.values()])
    expected = np.exp(elpd - elpd.max())
    expected /= expected.sum()
    np.testing.assert_allclose(
        rank_weights(fits, method="pseudo-BMA").values, expected, rtol=1e-9
    )


def test_weight_arguments_are_checked(rng):
    with pytest.raises(DataValidationError, match="must be one of"):
        rank_weights(_loglik_fits(rng, {1: -1.0}), method="bma")
    with pytest.raises(DataValidationError, match="finite entry"):
        stacking_weights([[-np.inf, -np.inf], [0.0, -1.0]])
    with pytest.raises(DataValidationError, match="2-D"):
        stacking_weights([0.0, 1.0])
    assert rank_weights(_loglik_fits(rng, {4: -1.0})).to_dict() == {4: 1.0}


# ------------------------------------------------------------------ averaged PMF


def _fake_posterior(rng, n_cat, names, n_components, chains=2, draws=5):
    post = {"weights": rng.dirichlet(np.ones(n_components), size=(chains, draws))}
    dims = {"weights": ["class"]}
    for name, k in zip(names, n_cat, strict=True):
        post[f"A_{name}"] = rng.dirichlet(np.ones(k), size=(chains, draws, n_components))
        dims[f"A_{name}"] = ["class", f"{name}_category"]
    return az.from_dict({"posterior": post}, dims=dims)


def _brute_force_proba(idata, codes, names, target):
    """mean over draws of Pr(x_t | other observed entries), by explicit loops."""
    post = idata.posterior
    w = post["weights"].values.reshape(-1, post.sizes["class"])
    a = [post[f"A_{n}"].values.reshape(w.shape[0], w.shape[1], -1) for n in names]
    out = np.zeros((codes.shape[0], a[target].shape[2]))
    for d in range(w.shape[0]):
        for s, row in enumerate(codes):
            cls = w[d].copy()
            for n, x in enumerate(row):
                if n != target and x >= 0:
                    cls = cls * a[n][d][:, x]
            cls /= cls.sum()
            out[s] += cls @ a[target][d]
    return out / w.shape[0]


def test_averaged_predict_proba_equals_brute_force_over_draws_and_ranks(rng):
    names, n_cat = ["u", "v", "w"], [2, 3, 4]
    codes = np.array([[0, 2, -1], [1, -1, 3], [-1, 0, 1], [1, 1, 0]])
    data = CategoricalData.from_codes(codes, n_cat, names=names)
    fits = {r: _fake_posterior(rng, n_cat, names, r) for r in (1, 2, 3)}
    weights = {1: 0.2, 2: 0.0, 3: 0.8}
    for target in range(3):
        got = averaged_predict_proba(fits, weights, data, target, model_data=data)
        expected = sum(
            wk * _brute_force_proba(fits[r], codes, names, target)
            for r, wk in weights.items()
        )
        np.testing.assert_allclose(got, expected, rtol=1e-10)
        np.testing.assert_allclose(got.sum(axis=1), 1.0)
    # weights are normalized; a sequence of posteriors takes a sequence of weights
    seq = averaged_predict_proba(list(fits.values()), [1, 0, 4], data, "v", model_data=data)
    np.testing.assert_allclose(
        seq, averaged_predict_proba(fits, weights, data, "v", model_data=data)
    )
    with pytest.raises(DataValidationError, match="no weight for"):
        averaged_predict_proba(fits, {1: 1.0}, data, 0, model_data=data)


# ------------------------------------------------------------------ task rows


def _point_mass_sample(data, *, n_components, init, draws, chains, **kw):
    """Stand-in for bayespmf.models.sample: every draw is the start ``init``."""
    post = {"weights": np.broadcast_to(init.weights, (chains, draws, n_components))}
    dims = {"weights": ["class"]}
    for name, a in zip(data.names, init.factors, strict=True):
        post[f"A_{name}"] = np.broadcast_to(a.T, (chains, draws, *a.T.shape))
        dims[f"A_{name}"] = ["class", f"{name}_category"]
    return az.from_dict({"posterior": post}, dims=dims)


def test_posterior_rows_of_point_mass_posteriors(monkeypatch):
    """Point-mass posteriors at the validation-best iterates of every rank.

    The draw average, the plug-in and the validation-best rank then predict like
    the point estimate; the validation stacking weights are those of the point
    estimates' validation log scores, computed here independently.
    """
    import bayespmf.models as models

    monkeypatch.setattr(models, "sample", _point_mass_sample)
    t = tasks.classify(
        VOTES,
        "class",
        methods=["cnmf-spa-em"],
        baselines=[],
        n_trials=1,
        candidates=[2, 3],
        random_state=3,
        posterior={
            "draws": 3,
            "chains": 2,
            "candidates": [2, 3],
            "combine": ["chosen", "plugin", "val-best", "val-stacking"],
        },
    )
    assert list(t.index) == [
        "cnmf-spa-em",
        "nuts-posterior",
        "nuts-posterior (plugin)",
        "nuts-posterior (val-best)",
        "nuts-posterior (val-stacking)",
    ]
    rec = {r["method"]: r for r in t.attrs["trials"]}
    point = rec["cnmf-spa-em"]["accuracy"]
    for row in ("nuts-posterior", "nuts-posterior (plugin)", "nuts-posterior (val-best)"):
        assert rec[row]["accuracy"] == pytest.approx(point)

    # independent: the validation-best iterate at each rank, its log score on val
    j = VOTES.index_of("class")
    seed = rec["cnmf-spa-em"]["seed"]
    split = _splits.ClassifySplit(VOTES, j, (0.5, 0.2, 0.3), seed)
    best = _task_latent.select_latent("cnmf-spa-em", split, [2, 3], seed, None, None)
    x, y = split.parts["val"]
    lpd = []
    for r in (2, 3):
        params = best["by_rank"][r]["params"]
        p = conditional_pmf(x, params.weights, params.factors, j)
        lpd.append(np.log(p[np.arange(y.size), y]))
    w = stacking_weights(np.column_stack(lpd))
    got = dict(
        kv.split(":") for kv in rec["nuts-posterior (val-stacking)"]["rank_weights"].split()
    )
    np.testing.assert_allclose([float(got["2"]), float(got["3"])], w, atol=0.006)


def test_rating_log_score_matches_the_predictive_pmf():
    data, _ = datasets.load_movielens("Animation")
    split = _splits.RatingSplit(data, (0.5, 0.2, 0.3), seed=1)
    est = _task_latent.select_latent("em", split, [2], 1, 30, None)
    proba = _task_latent.params_proba(est["params"])
    got = split.log_score(proba, "val")
    h, _ = split.parts["val"]
    codes = split.train.codes
    expected = [np.log(proba(codes[[u]], int(n))[0, k]) for u, n, k in h[:50]]
    np.testing.assert_allclose(got[:50], expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("posterior", "match"),
    [
        ({"combine": ["stack"]}, r"Unknown combine 'stack'.*'stacking'"),
        ({"combine": []}, r"at least one row"),
        ([{}, {"draws": 10}], r"Two posterior configurations give the row"),
        ([{}, "x"], r"list of such dicts"),
        ({"candidates": [0]}, r"candidates"),
    ],
)
def test_posterior_options_are_checked(posterior, match):
    with pytest.raises(ValueError, match=match):  # DataValidationError is a ValueError
        tasks.classify("votes", n_trials=1, candidates=[2], posterior=posterior)


# ------------------------------------------------------------------ real posteriors


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto")
def test_rank_weights_of_sampled_posteriors_equal_az_compare():
    from bayespmf.models import sample

    data, _ = datasets.make_latent_class(
        150, [2, 3, 2, 3], n_components=2, observed_prob=0.9, random_state=0
    )
    fits = {
        r: sample(
            data,
            n_components=r,
            draws=100,
            tune=100,
            chains=2,
            cores=1,
            random_seed=0,
            progressbar=False,
        )
        for r in (2, 3)
    }
    w = rank_weights(fits, method="stacking")
    table = _compare(fits, "stacking")
    np.testing.assert_allclose(
        w.values, [table.loc[str(r), "weight"] for r in (2, 3)], atol=1e-12
    )
    assert w.sum() == pytest.approx(1.0)
    loo_i = np.column_stack(
        [az.loo(f, pointwise=True).elpd_i.values for f in fits.values()]
    )
    np.testing.assert_allclose(stacking_weights(loo_i), w.values, atol=2e-3)
