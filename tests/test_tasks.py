import numpy as np
import pandas as pd
import pytest

from bayespmf import CategoricalData, DataValidationError, datasets
from bayespmf.apps._splits import RatingSplit
from bayespmf.apps._task_latent import fit_latent, params_proba
from bayespmf.apps.baselines import BiasedMF, one_hot_features, rating_average
from bayespmf.apps.tasks import ITER_CHECKPOINTS, classify, predict_ratings
from bayespmf.estimators import LatentClassPMF

VOTES, _ = datasets.load_votes()
ANIMATION, _ = datasets.load_movielens("Animation")


@pytest.fixture(scope="module")
def votes_table():
    return classify(
        "votes",
        methods=["cnmf-spa", "em"],
        n_trials=2,
        candidates=[3],
        random_state=7,
        # the estimator's own start, so that a direct LatentClassPMF fit reproduces it
        # (the choice among starts: tests/test_task_starts.py)
        spa_starts=["bootstrap"],
    )


def _trials(table, method):
    return [r for r in table.attrs["trials"] if r["method"] == method]


def test_classify_table_layout(votes_table):
    t = votes_table
    assert list(t.index) == [
        "cnmf-spa",
        "em",
        "naive-bayes",
        "logistic-regression",
        "linear-svm",
    ]
    assert {"accuracy_mean", "accuracy_std", "fit_s", "total_s", "n_trials"} <= set(t)
    assert (t["n_trials"] == 2).all()
    assert t["accuracy_mean"].between(80, 100).all()
    accs = [r["accuracy"] for r in _trials(t, "em")]
    assert t.loc["em", "accuracy_mean"] == pytest.approx(100 * np.mean(accs))
    assert t.loc["em", "accuracy_std"] == pytest.approx(100 * np.std(accs))


def test_classify_accuracy_equals_direct_computation(votes_table):
    j = VOTES.index_of("class")
    for rec in _trials(votes_table, "cnmf-spa"):
        train, _, test = VOTES.train_test_split(0.5, 0.2, 0.3, random_state=rec["seed"])
        est = LatentClassPMF(3, "cnmf-spa", random_state=rec["seed"]).fit(train)
        obs = test.mask[:, j]
        with np.errstate(invalid="ignore"):
            pred = est.predict(test[obs], j)
        assert rec["accuracy"] == pytest.approx(np.mean(pred == test.codes[obs, j]))


def test_sklearn_baselines_identical_to_direct_sklearn(votes_table):
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import CategoricalNB
    from sklearn.preprocessing import OneHotEncoder

    j = VOTES.index_of("class")
    feats = [n for n in range(VOTES.n_variables) if n != j]
    for rec in _trials(votes_table, "logistic-regression"):
        train, _, test = VOTES.train_test_split(0.5, 0.2, 0.3, random_state=rec["seed"])
        tr = train.codes[train.mask[:, j]]
        te = test.codes[test.mask[:, j]]
        enc = OneHotEncoder(
            categories=[list(range(VOTES.n_categories[n])) for n in feats],
            handle_unknown="ignore",  # -1 (missing) -> all-zero block
        ).fit(tr[:, feats])
        c = float(rec["selected"].split("=")[1])
        lr = LogisticRegression(C=c, max_iter=5000).fit(
            enc.transform(tr[:, feats]), tr[:, j]
        )
        acc = np.mean(lr.predict(enc.transform(te[:, feats])) == te[:, j])
        assert rec["accuracy"] == acc
    for rec in _trials(votes_table, "naive-bayes"):
        train, _, test = VOTES.train_test_split(0.5, 0.2, 0.3, random_state=rec["seed"])
        tr = train.codes[train.mask[:, j]][:, [*feats, j]]
        te = test.codes[test.mask[:, j]][:, [*feats, j]]
        k = np.asarray(VOTES.n_categories)[feats]
        x_tr, x_te = tr[:, :-1].copy(), te[:, :-1].copy()
        x_tr[x_tr < 0] = np.broadcast_to(k, x_tr.shape)[x_tr < 0]
        x_te[x_te < 0] = np.broadcast_to(k, x_te.shape)[x_te < 0]
        alpha = float(rec["selected"].split("=")[1])
        nb = CategoricalNB(alpha=alpha, min_categories=k + 1).fit(x_tr, tr[:, -1])
        assert rec["accuracy"] == np.mean(nb.predict(x_te) == te[:, -1])


def test_one_hot_missing_is_all_zero():
    x = one_hot_features([[0, -1, 1], [1, 2, -1]], [2, 3, 2]).toarray()
    np.testing.assert_array_equal(x.sum(axis=1), [2, 2])
    np.testing.assert_array_equal(x[0], [1, 0, 0, 0, 0, 0, 1])


@pytest.mark.parametrize("method", ["em", "cnmf-spa-em", "squarem"])
def test_fit_latent_final_iterate_is_the_estimator(method):
    train, _, _ = VOTES.train_test_split(0.5, 0.2, 0.3, random_state=3)
    seen = []
    fit_latent(method, train, 3, 11, None, None, lambda it, p: seen.append((it, p)))
    est = LatentClassPMF(3, method, random_state=11).fit(train)
    last_it, last = seen[-1]
    assert last_it == est.n_iter_
    np.testing.assert_allclose(last.weights, est.weights_, rtol=1e-8, atol=1e-10)
    for a, b in zip(last.factors, est.factors_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    assert [it for it, _ in seen[:-1]] == [c for c in ITER_CHECKPOINTS if c < last_it]


def test_classify_is_deterministic():
    kw = {
        "methods": ["squarem"],
        "baselines": ["linear-svm"],
        "n_trials": 2,
        "candidates": [2, 3],
    }
    a = classify("votes", random_state=1, **kw)
    b = classify("votes", random_state=1, **kw)
    cols = ["accuracy_mean", "accuracy_std", "selected"]
    pd.testing.assert_frame_equal(a[cols], b[cols])


def test_posterior_variant_with_point_mass_posterior_matches_point_estimate(monkeypatch):
    """A posterior whose every draw is the point estimate predicts like it."""
    import arviz as az

    import bayespmf.models as models

    def fake_sample(data, *, n_components, init, draws, chains, **kw):
        post = {"weights": np.broadcast_to(init.weights, (chains, draws, n_components))}
        for name, a in zip(data.names, init.factors, strict=True):
            post[f"A_{name}"] = np.broadcast_to(a.T, (chains, draws, *a.T.shape))
        dims = {"weights": ["class"]}
        dims |= {f"A_{n}": ["class", f"{n}_category"] for n in data.names}
        idata = az.from_dict({"posterior": post}, dims=dims)
        idata.posterior.attrs["sampling_time"] = 0.0
        return idata

    monkeypatch.setattr(models, "sample", fake_sample)
    t = classify(
        "votes",
        methods=["cnmf-spa-em"],
        baselines=[],
        n_trials=2,
        candidates=[3],
        random_state=2,
        posterior={"draws": 4, "chains": 1, "n_trials": 1},
    )
    assert list(t.index) == ["cnmf-spa-em", "nuts-posterior"]
    assert t.loc["nuts-posterior", "n_trials"] == 1
    point = _trials(t, "cnmf-spa-em")[0]
    post = _trials(t, "nuts-posterior")[0]
    assert post["seed"] == point["seed"]
    assert post["accuracy"] == pytest.approx(point["accuracy"])


# ------------------------------------------------------------------ ratings


def test_rating_split_follows_the_protocol():
    split = RatingSplit(ANIMATION, (0.5, 0.2, 0.3), seed=5)
    n_obs = ANIMATION.mask.sum()
    (hv, _), (ht, yt) = split.parts["val"], split.parts["test"]
    assert hv.shape[0] + ht.shape[0] == round(0.5 * n_obs)
    assert hv.shape[0] == pytest.approx(0.2 * n_obs, abs=1)
    # hidden entries are missing in the training data, and every user keeps one rating
    for h in (hv, ht):
        assert (split.train.codes[h[:, 0], h[:, 1]] == -1).all()
        np.testing.assert_array_equal(ANIMATION.codes[h[:, 0], h[:, 1]], h[:, 2])
    assert not {tuple(r) for r in hv[:, :2]} & {tuple(r) for r in ht[:, :2]}
    assert (split.train.mask.sum(axis=1) >= 1).all()
    np.testing.assert_array_equal(yt, ht[:, 2] + 1.0)  # ratings "1".."5"


def test_rating_mmse_and_map_equal_direct_computation():
    split = RatingSplit(ANIMATION, (0.5, 0.2, 0.3), seed=5)
    est = LatentClassPMF(3, "em", random_state=0).fit(split.train)

    got = split.evaluate_proba(params_proba(est.params_), "test")
    h, truth = split.parts["test"]
    mmse = np.array(
        [est.expected_value(split.train.codes[[r]], c, np.arange(1, 6))[0] for r, c, _ in h]
    )
    mode = np.array([est.predict(split.train.codes[[r]], c)[0] + 1.0 for r, c, _ in h])
    assert got["rmse"] == pytest.approx(np.sqrt(np.mean((mmse - truth) ** 2)))
    assert got["mae"] == pytest.approx(np.mean(np.abs(mmse - truth)))
    assert got["rmse_map"] == pytest.approx(np.sqrt(np.mean((mode - truth) ** 2)))
    assert got["mae_map"] == pytest.approx(np.mean(np.abs(mode - truth)))


def test_predict_ratings_table_and_averages():
    t = predict_ratings(
        "Animation",
        methods=["em"],
        baselines=["global-average", "user-average", "movie-average", "biased-mf"],
        n_trials=1,
        candidates=[2],
        random_state=4,
    )
    assert list(t.index) == [
        "em",
        "em (MAP)",
        "global-average",
        "user-average",
        "movie-average",
        "biased-mf",
    ]
    rec = _trials(t, "global-average")[0]
    split = RatingSplit(ANIMATION, (0.5, 0.2, 0.3), seed=rec["seed"])
    _, truth = split.parts["test"]
    train_vals = (split.train.codes[split.train.mask] + 1.0).mean()
    assert rec["rmse"] == pytest.approx(np.sqrt(np.mean((train_vals - truth) ** 2)))
    assert t.loc["em", "rmse_mean"] < t.loc["global-average", "rmse_mean"]
    assert t.loc["biased-mf", "rmse_mean"] < t.loc["global-average", "rmse_mean"]


def test_biased_mf_half_steps_are_exact_ridge_solutions():
    rng = np.random.default_rng(0)
    r = rng.integers(1, 6, size=(40, 8)).astype(float)
    r[rng.random(r.shape) < 0.4] = np.nan
    m = BiasedMF(n_components=2, reg=3.0, n_epochs=5, random_state=0).fit(r)
    # the last half-step solved every item's ridge regression given the users
    x = np.hstack([m.user_factors_, np.ones((40, 1))])
    for i in range(8):
        obs = ~np.isnan(r[:, i])
        y = r[obs, i] - m.mean_ - m.user_bias_[obs]
        a = np.vstack([x[obs], np.sqrt(3.0) * np.eye(3)])
        b = np.concatenate([y, np.zeros(3)])
        beta = np.linalg.lstsq(a, b, rcond=None)[0]
        np.testing.assert_allclose(beta[:2], m.item_factors_[i], atol=1e-8)
        np.testing.assert_allclose(beta[2], m.item_bias_[i], atol=1e-8)


def test_rating_average_user_without_ratings_gets_global_mean():
    r = np.array([[np.nan, np.nan], [2.0, 4.0]])
    np.testing.assert_allclose(rating_average("user-average", r, [0], [1]), [3.0])


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"methods": ["cnmf-spaa"]},
            r"Unknown method 'cnmf-spaa'.*Did you mean 'cnmf-spa'",
        ),
        ({"baselines": ["svm"]}, r"Unknown baseline 'svm'"),
        ({"n_trials": 0}, r"'n_trials' parameter of classify must be an int >= 1"),
        ({"candidates": []}, r"'candidates' must list at least one rank"),
        ({"candidates": [0]}, r"'candidates' parameter must be an int"),
        ({"posterior": {"draw": 10}}, r"Unknown posterior option 'draw'.*'draws'"),
        ({"posterior": "yes"}, r"'posterior' must be False, True or a dict"),
        ({"target": "party"}, r"Unknown variable 'party'"),
        ({"n_trial": 2}, r"classify got unknown option\(s\) \['n_trial'\]"),
    ],
)
def test_classify_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        classify("votes", **kwargs)


def test_classify_needs_a_target_for_raw_data():
    data = CategoricalData.from_codes([[0, 1], [1, 0]] * 10)
    with pytest.raises(DataValidationError, match="'target' is required"):
        classify(data)
    with pytest.raises(DataValidationError, match="must be a shipped data set's name"):
        classify(np.zeros((3, 3)))


def test_predict_ratings_errors():
    with pytest.raises(DataValidationError, match="Unknown genre 'Actoin'"):
        predict_ratings("Actoin")
    with pytest.raises(DataValidationError, match="'fractions' must be three"):
        predict_ratings("action", fractions=(0.5, 0.5))
    with pytest.raises(DataValidationError, match="Unknown baseline 'naive-bayes'"):
        predict_ratings("action", baselines=["naive-bayes"])


def test_both_tasks_show_the_shared_protocol_options():
    import inspect

    from bayespmf.apps.tasks import PROTOCOL_DEFAULTS

    for task in (classify, predict_ratings):
        params = inspect.signature(task).parameters
        shown = {k: params[k].default for k in PROTOCOL_DEFAULTS}
        assert shown == PROTOCOL_DEFAULTS
        assert all(p.kind is not p.VAR_KEYWORD for p in params.values())


def test_tasks_module_keeps_its_names_after_the_split():
    # the parts live in private modules; the protocol module still exports them
    from bayespmf.apps import _splits, _task_latent, _task_posterior, tasks

    for name in tasks.__all__:
        assert hasattr(tasks, name), name
    assert tasks.rating_values is _splits.rating_values
    assert tasks.ITER_CHECKPOINTS is _task_latent.ITER_CHECKPOINTS
    assert tasks.POSTERIOR_DEFAULTS is _task_posterior.POSTERIOR_DEFAULTS
    assert tasks.POSTERIOR_COMBINE is _task_posterior.POSTERIOR_COMBINE


def test_ratings_records_split_mmse_and_map_rows():
    # one latent-class record per trial becomes an MMSE row and a "(MAP)" row
    t = predict_ratings(
        ANIMATION,
        methods=["em"],
        baselines=[],
        n_trials=1,
        candidates=[2],
        max_iter=20,
        random_state=3,
    )
    recs = {r["method"]: r for r in t.attrs["trials"]}
    assert list(recs) == ["em", "em (MAP)"]
    assert not any(k.endswith("_map") for r in recs.values() for k in r)
    assert recs["em"]["seed"] == recs["em (MAP)"]["seed"]
    assert recs["em"]["rmse"] != recs["em (MAP)"]["rmse"]
