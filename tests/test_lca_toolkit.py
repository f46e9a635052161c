"""Model choice and class membership of LatentClassPMF, against hand computations."""

import itertools

import numpy as np
import pytest

from bayespmf import DataValidationError, LatentClassPMF
from bayespmf.datasets import make_latent_class


@pytest.fixture(scope="module")
def fitted():
    data, _ = make_latent_class(600, [2, 3, 2, 3], n_components=2, random_state=4)
    data, _ = data.hide_entries(0.1, random_state=0)
    return data, LatentClassPMF(2, random_state=0, n_init=8).fit(data)


def test_information_criteria_by_hand(fitted):
    data, m = fitted
    codes = np.asarray(data.codes)
    # Bayes' rule and the likelihood written out with loops, no package maths
    ll = 0.0
    for row in codes:
        p = 0.0
        for f in range(2):
            term = m.weights_[f]
            for n, x in enumerate(row):
                if x >= 0:
                    term *= m.factors_[n][x, f]
            p += term
        ll += np.log(p)
    k = 2 * (1 + (1 + 2 + 1 + 2)) - 1
    s = codes.shape[0]
    assert m.n_parameters_ == k == 13
    assert m.aic(data) == pytest.approx(-2 * ll + 2 * k, rel=1e-10)
    assert m.bic(data) == pytest.approx(-2 * ll + k * np.log(s), rel=1e-10)
    assert m.caic(data) == pytest.approx(-2 * ll + k * (np.log(s) + 1), rel=1e-10)
    assert m.sabic(data) == pytest.approx(-2 * ll + k * np.log((s + 2) / 24), rel=1e-10)
    assert m.loglik_ == pytest.approx(ll, rel=1e-10)


def test_class_membership_is_bayes_rule(fitted):
    data, m = fitted
    codes = np.asarray(data.codes)[:20]
    proba = m.predict_class_proba(codes)
    for row, p in zip(codes, proba, strict=True):
        joint = np.array(
            [
                m.weights_[f]
                * np.prod([m.factors_[n][x, f] for n, x in enumerate(row) if x >= 0])
                for f in range(2)
            ]
        )
        np.testing.assert_allclose(p, joint / joint.sum(), rtol=1e-10)
    np.testing.assert_array_equal(m.predict_class(codes), proba.argmax(axis=1))
    # relative entropy from its definition
    full = m.predict_class_proba(data)
    ent = -np.sum(full * np.log(full))
    assert m.relative_entropy(data) == pytest.approx(
        1 - ent / (full.shape[0] * np.log(2)), rel=1e-10
    )


def test_goodness_of_fit_by_enumeration(fitted):
    data, m = fitted
    codes = np.asarray(data.codes)
    complete = codes[(codes >= 0).all(axis=1)]
    n = complete.shape[0]
    g2 = chi2 = 0.0
    for cell in itertools.product(*(range(i) for i in m.n_categories_)):
        o = np.sum(np.all(complete == cell, axis=1))
        e = n * sum(
            m.weights_[f] * np.prod([m.factors_[j][x, f] for j, x in enumerate(cell)])
            for f in range(2)
        )
        g2 += 2 * o * np.log(o / e) if o > 0 else 0.0
        chi2 += (o - e) ** 2 / e
    gof = m.goodness_of_fit(data)
    assert gof["G2"] == pytest.approx(g2, rel=1e-10)
    assert gof["chi2"] == pytest.approx(chi2, rel=1e-10)
    assert gof["df"] == 36 - 1 - 13
    assert gof["n_complete"] == n


def test_goodness_of_fit_refuses_a_rank_too_large_for_the_table():
    data, _ = make_latent_class(300, [2, 2, 2], n_components=2, random_state=0)
    m = LatentClassPMF(2, random_state=0, n_init=4).fit(data)  # k = 7 = 2^3 - 1
    with pytest.raises(DataValidationError, match="df = 0"):
        m.goodness_of_fit(data)


def test_dataframe_in_labels_and_index_out():
    import pandas as pd

    rng = np.random.default_rng(0)
    data, _ = make_latent_class(400, [2, 3, 2, 3], n_components=2, random_state=1)
    labels = [["no", "yes"], ["low", "mid", "high"], ["a", "b"], ["x", "y", "z"]]
    df = pd.DataFrame(
        {
            f"q{n}": [
                labels[n][c] if c >= 0 else None for c in np.asarray(data.codes)[:, n]
            ]
            for n in range(4)
        },
        index=pd.Index(rng.permutation(400) + 1000, name="respondent"),
    )
    m = LatentClassPMF(2, random_state=0, n_init=8).fit(df)
    same = LatentClassPMF(2, random_state=0, n_init=8).fit(
        __import__("bayespmf").CategoricalData.from_pandas(df)
    )
    np.testing.assert_array_equal(m.weights_, same.weights_)
    new = df.iloc[:5].copy()
    new.loc[new.index[0], "q1"] = np.nan  # missing in new rows is fine
    proba = m.predict_proba(new, "q1")
    assert list(proba.columns) == ["high", "low", "mid"]  # the fitted (sorted) labels
    assert proba.index.equals(new.index)
    pred = m.predict(new, "q1")
    assert pred.name == "q1" and set(pred) <= {"high", "low", "mid"}
    membership = m.predict_class_proba(new)
    assert membership.shape == (5, 2) and membership.index.equals(new.index)
    assert m.score_samples(new).index.equals(new.index)
    # a column subset: absent variables are missing in every row
    assert np.isfinite(m.score_samples(new[["q0", "q2"]])).all()
    weights, cond = m.get_parameters_df()
    assert weights["weight"].sum() == pytest.approx(1.0)
    assert set(cond["variable"]) == {"q0", "q1", "q2", "q3"}
    assert cond.groupby(["variable", "class"])["probability"].sum().round(12).eq(1).all()
    bad = new.copy()
    bad.loc[bad.index[1], "q0"] = "maybe"
    with pytest.raises(DataValidationError, match=r"label\(s\) \['maybe'\]"):
        m.predict(bad, "q1")
    with pytest.raises(DataValidationError, match="not variables of the fitted data"):
        m.score(new.rename(columns={"q3": "q9"}))
