"""The CNMF-SPA starts of the tasks: every start fitted, the validation-best one kept."""

import numpy as np
import pytest

from bayespmf import DataValidationError, datasets
from bayespmf.apps._splits import ClassifySplit, RatingSplit
from bayespmf.apps._task_latent import (
    SPA_STARTS,
    fit_from_start,
    fit_latent,
    paper_split,
    params_proba,
    select_latent,
    spa_start,
)
from bayespmf.apps.tasks import check_task_inputs, classify, predict_ratings
from bayespmf.kernels.cnmf_spa import cnmf_spa
from bayespmf.marginals import pairwise_marginals

CAR, _ = datasets.load_car()


@pytest.fixture(scope="module")
def car_split():
    return ClassifySplit(CAR, CAR.index_of("class"), (0.5, 0.2, 0.3), 5)


@pytest.mark.parametrize("method", ["cnmf-spa", "cnmf-spa-em", "cnmf-opt"])
def test_selected_start_is_the_validation_best(car_split, method):
    """The kept (start, rank, iterate) scores best on validation; ties to the first."""
    starts = tuple(SPA_STARTS)
    best = select_latent(method, car_split, [2, 4], 5, 20, None, starts)
    assert set(best["by_start"]) == set(starts)
    val = {}
    for name, rec in best["by_start"].items():
        m = car_split.evaluate_proba(params_proba(rec["params"]), "val")
        assert car_split.score(m) == rec["score"]  # each start's own best, re-scored
        val[name] = rec["score"]
    top = max(val.values())
    assert best["score"] == top
    assert best["start"] == next(n for n in starts if val[n] == top)
    assert best["params"] is best["by_start"][best["start"]]["params"]
    assert best["n_components"] == best["by_start"][best["start"]]["n_components"]


def test_start_order_breaks_ties(car_split):
    """Reversing the order of the starts only changes the winner among equal scores."""
    fwd = select_latent("cnmf-spa", car_split, [3], 5, None, None, tuple(SPA_STARTS))
    rev = select_latent("cnmf-spa", car_split, [3], 5, None, None, tuple(SPA_STARTS)[::-1])
    assert fwd["score"] == rev["score"]
    tied = [n for n, r in fwd["by_start"].items() if r["score"] == fwd["score"]]
    assert fwd["start"] == next(n for n in SPA_STARTS if n in tied)
    assert rev["start"] == next(n for n in tuple(SPA_STARTS)[::-1] if n in tied)


@pytest.mark.parametrize("method", ["cnmf-spa", "cnmf-spa-em", "cnmf-opt"])
def test_fit_from_start_runs_the_estimators_stages(car_split, method):
    """From the estimator's CNMF-SPA start, fit_from_start gives fit_latent's iterates."""
    train = car_split.train
    marginals = pairwise_marginals(train)
    start, _ = cnmf_spa(marginals, 3, random_state=np.random.default_rng(11))
    ours, theirs = [], []
    fit_from_start(
        method, train, marginals, 3, start, 11, 40, None, lambda i, p: ours.append((i, p))
    )
    fit_latent(method, train, 3, 11, 40, None, lambda i, p: theirs.append((i, p)))
    assert [i for i, _ in ours] == [i for i, _ in theirs]
    for (_, p), (_, q) in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(p.weights, q.weights, rtol=1e-7, atol=1e-10)
        for a, b in zip(p.factors, q.factors, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)


def test_bootstrap_start_alone_is_the_previous_selection(car_split):
    """spa_starts=("bootstrap",) is the estimator's fit at every rank, as before."""
    best = select_latent("cnmf-spa-em", car_split, [2, 3], 5, 20, None, ("bootstrap",))
    seen = []
    for n_components in (2, 3):
        fit_latent(
            "cnmf-spa-em",
            car_split.train,
            n_components,
            5,
            20,
            None,
            lambda i, p, r=n_components: seen.append((r, i, p)),
        )
    scores = [
        car_split.score(car_split.evaluate_proba(params_proba(p), "val"))
        for _, _, p in seen
    ]
    k = int(np.argmax(scores))  # the first of ties
    assert (best["n_components"], best["n_iter"]) == seen[k][:2]
    assert best["score"] == scores[k]


def test_paper_start_puts_the_target_first_in_s1():
    split = ClassifySplit(CAR, 3, (0.5, 0.2, 0.3), 2)
    m = pairwise_marginals(split.train)
    assert paper_split(7, first=3) == ((3, 0, 1, 2, 4), (5, 6))
    got = spa_start("paper", split, 3, 0, m)
    want, info = cnmf_spa(m, 3, split=((3, 0, 1, 2, 4), (5, 6)))
    assert info["split"] == ((3, 0, 1, 2, 4), (5, 6))
    np.testing.assert_array_equal(got.weights, want.weights)
    ridge = spa_start("paper-ridge", split, 3, 0, m)
    want_r, _ = cnmf_spa(
        m, 3, split=((3, 0, 1, 2, 4), (5, 6)), ridge=SPA_STARTS["paper-ridge"][1]
    )
    np.testing.assert_array_equal(ridge.weights, want_r.weights)
    assert not np.array_equal(ridge.factors[5], want.factors[5])  # H regularized


def test_paper_start_skipped_when_too_few_variables():
    """With N <= M the paper's split does not exist: that start is left out, noted."""
    data, _ = datasets.make_latent_class(300, [3, 3, 3, 3], n_components=2, random_state=0)
    split = ClassifySplit(data, 0, (0.5, 0.2, 0.3), 1)
    best = select_latent("cnmf-spa", split, [2], 1, None, None, ("paper", "bootstrap"))
    assert best["start"] == "bootstrap"
    assert any("paper" in n for n in best["notes"])
    with pytest.raises(DataValidationError, match="No rank"):
        select_latent("cnmf-spa", split, [2], 1, None, None, ("paper",))


def test_tasks_report_the_start_and_check_the_option():
    t = classify(
        "car",
        methods=["cnmf-spa-em", "em"],
        baselines=[],
        n_trials=1,
        candidates=[3],
        max_iter=10,
        random_state=0,
        spa_starts=["paper-ridge", "bootstrap"],
    )
    sel = {r["method"]: r["selected"] for r in t.attrs["trials"]}
    assert sel["cnmf-spa-em"].split("start=")[1] in ("paper-ridge", "bootstrap")
    assert "start=" not in sel["em"]  # not a CNMF-SPA method
    with pytest.raises(DataValidationError, match="Unknown CNMF-SPA start 'papr'"):
        check_task_inputs("classify", "car", spa_starts=["papr"])
    with pytest.raises(DataValidationError, match="at least one start"):
        classify("car", methods=["cnmf-spa"], baselines=[], n_trials=1, spa_starts=[])


def test_ratings_paper_start_is_the_first_five_movies():
    data, _ = datasets.load_movielens("Animation")
    split = RatingSplit(data, (0.5, 0.2, 0.3), 3)
    m = pairwise_marginals(split.train)
    got = spa_start("paper", split, 5, 0, m)
    want, _ = cnmf_spa(m, 5, split=(tuple(range(5)), tuple(range(5, 30))))
    np.testing.assert_array_equal(got.weights, want.weights)
    t = predict_ratings(
        data,
        methods=["cnmf-spa"],
        baselines=[],
        n_trials=1,
        candidates=[5],
        random_state=0,
        spa_starts=["paper"],
    )
    assert t.loc["cnmf-spa", "selected"] == "n_components=5, iter=0, start=paper"
