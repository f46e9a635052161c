"""Issue 24, item 3: name-checked data.

Rows given to a fitted estimator or a posterior are bound to the fitted variables by
name and to the fitted alphabets by label, or refused with a clear error; never read
by position when names or labels say otherwise. Every answer on reordered or
relabelled data is checked against the answer on the data as fitted, and that one
against a brute-force Bayes' rule.
"""

import json

import arviz as az
import numpy as np
import pandas as pd
import pytest

from bayespmf.data import CategoricalData, as_categorical
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import LatentClassPMF
from bayespmf.models import (
    impute,
    initvals,
    latent_class_model,
    posterior_class_proba,
    posterior_predict_proba,
)
from bayespmf.models.latent_class import category_dim, factor_var_name

NAMES = ["a", "b", "c"]
LABELS = [["no", "yes"], ["lo", "mid", "hi"], ["w", "x", "y", "z"]]


@pytest.fixture(scope="module")
def fitted():
    sim, _ = make_latent_class(
        300, [2, 3, 4], n_components=2, observed_prob=0.8, random_state=2
    )
    data = CategoricalData.from_codes(sim.codes, [2, 3, 4], names=NAMES, categories=LABELS)
    est = LatentClassPMF(2, "em", max_iter=5000, tol=1e-9, random_state=0).fit(data)
    return data, est


def _permute_alphabet(data, var, perm):
    """``data`` with the labels of ``var`` listed in the order ``perm`` (same rows)."""
    j = data.names.index(var)
    inv = np.argsort(perm)  # old code c is new code inv[c]
    codes = data.codes.copy()
    col = codes[:, j]
    codes[:, j] = np.where(col >= 0, inv[np.maximum(col, 0)], -1)
    cats = [list(c) for c in data.categories]
    cats[j] = [data.categories[j][p] for p in perm]
    return CategoricalData.from_codes(codes, data.n_categories, data.names, cats)


def _brute_conditional(codes, weights, factors, t):
    """Pr(x_t | other observed entries), row by row, class by class."""
    out = np.zeros((codes.shape[0], factors[t].shape[0]))
    for s, row in enumerate(codes):
        for f in range(len(weights)):
            term = weights[f]
            for n, x in enumerate(row):
                if n != t and x >= 0:
                    term *= factors[n][x, f]
            out[s] += term * factors[t][:, f]
        out[s] /= out[s].sum()
    return out


def _point_posterior(est, draws=3):
    """A posterior of ``draws`` copies of the estimate, with labelled coordinates."""
    names, cats = est.variable_names_, est.category_labels_
    post = {"weights": np.tile(est.weights_, (1, draws, 1))}
    dims = {"weights": ["class"]}
    coords = {}
    for n, a, c in zip(names, est.factors_, cats, strict=True):
        post[factor_var_name(n)] = np.tile(a.T, (1, draws, 1, 1))
        dims[factor_var_name(n)] = ["class", category_dim(n)]
        coords[category_dim(n)] = c
    idata = az.from_dict({"posterior": post}, dims=dims, coords=coords)
    idata.posterior.attrs["bayespmf_variables"] = json.dumps(names)
    return idata


# ------------------------------------------------------------ the estimator


def test_estimator_answers_on_the_fitted_data_follow_bayes_rule(fitted):
    data, est = fitted
    for t in range(3):
        want = _brute_conditional(data.codes, est.weights_, est.factors_, t)
        np.testing.assert_allclose(est.predict_proba(data, t), want, rtol=1e-10)


def test_estimator_binds_reordered_variables_by_name(fitted):
    data, est = fitted
    rev = data.select_variables(NAMES[::-1])
    for t in NAMES:
        np.testing.assert_array_equal(est.predict_proba(rev, t), est.predict_proba(data, t))
        np.testing.assert_array_equal(est.predict(rev, t), est.predict(data, t))
    np.testing.assert_array_equal(
        est.predict_class_proba(rev), est.predict_class_proba(data)
    )
    np.testing.assert_array_equal(est.score_samples(rev), est.score_samples(data))
    # equal alphabet sizes: a positional reading would not even fail loudly
    sim, _ = make_latent_class(300, [3, 3, 3], n_components=2, random_state=5)
    same = CategoricalData.from_codes(sim.codes, 3, names=["u", "v", "w"])
    est3 = LatentClassPMF(2, "em", max_iter=5000, tol=1e-9, random_state=0).fit(same)
    shuffled = same.select_variables(["w", "u", "v"])
    want = est3.predict_proba(same, "u")
    np.testing.assert_array_equal(est3.predict_proba(shuffled, "u"), want)
    positional = est3.predict_proba(shuffled.codes, 0)  # bare codes: by position
    assert np.abs(positional - want).max() > 0.01


def test_estimator_recodes_another_alphabet_order(fitted):
    data, est = fitted
    other = _permute_alphabet(_permute_alphabet(data, "b", [2, 0, 1]), "c", [3, 1, 0, 2])
    assert other.categories[1] == ["hi", "lo", "mid"]
    for t in NAMES:
        np.testing.assert_array_equal(
            est.predict_proba(other, t), est.predict_proba(data, t)
        )
    np.testing.assert_array_equal(
        est.predict_class_proba(other), est.predict_class_proba(data)
    )
    # predicted codes are the fitted alphabet's
    got = np.asarray(est.category_labels_[1], dtype=object)[est.predict(other, "b")]
    want = np.asarray(LABELS[1], dtype=object)[est.predict(data, "b")]
    np.testing.assert_array_equal(got, want)


def test_estimator_recodes_rows_that_saw_only_some_labels(fitted):
    data, est = fitted
    rows = data.to_pandas().iloc[:40]
    keep = rows["c"].isin(["x", "z"]) | rows["c"].isna()
    sub = rows[keep].astype(object)  # plain labels: the alphabet is what occurs
    new = CategoricalData.from_pandas(sub[["c", "a", "b"]])
    assert new.categories[0] == ["x", "z"]
    np.testing.assert_array_equal(
        est.predict_proba(new, "a"), est.predict_proba(data[np.flatnonzero(keep)], "a")
    )


def test_estimator_refuses_unknown_labels_and_variables(fitted):
    data, est = fitted
    cats = [list(c) for c in data.categories]
    cats[1] = ["lo", "mid", "huge"]
    relabelled = CategoricalData.from_codes(data.codes, [2, 3, 4], NAMES, cats)
    with pytest.raises(ValueError, match=r"Variable 'b'.*\['huge'\].*never had"):
        est.predict_proba(relabelled, "a")
    # an unknown label no row uses is no obstacle
    unused = relabelled[np.flatnonzero(data.codes[:, 1] != 2)]
    np.testing.assert_array_equal(
        est.predict_proba(unused, "a"),
        est.predict_proba(data[np.flatnonzero(data.codes[:, 1] != 2)], "a"),
    )
    with pytest.raises(ValueError, match=r"missing \['c'\]"):
        est.predict_proba(data.select_variables(["a", "b"]), "a")
    renamed = CategoricalData.from_codes(data.codes, [2, 3, 4], ["a", "b", "q"], LABELS)
    with pytest.raises(ValueError, match=r"missing \['c'\], not in the model \['q'\]"):
        est.predict_class_proba(renamed)


def test_estimator_keeps_positional_meaning_without_names(fitted):
    data, est = fitted
    codes = np.array(data.codes)
    before = codes.copy()
    np.testing.assert_array_equal(est.predict_proba(codes, 1), est.predict_proba(data, 1))
    np.testing.assert_array_equal(codes, before)  # the caller's array is untouched
    unnamed = CategoricalData.from_codes(codes, [2, 3, 4])  # default names and labels
    np.testing.assert_array_equal(
        est.predict_proba(unnamed, "b"), est.predict_proba(data, "b")
    )
    # default names, real labels: variables by position, labels by label
    unnamed = CategoricalData.from_codes(
        _permute_alphabet(data, "c", [1, 0, 3, 2]).codes,
        [2, 3, 4],
        categories=[LABELS[0], LABELS[1], ["x", "w", "z", "y"]],
    )
    np.testing.assert_array_equal(
        est.predict_proba(unnamed, "a"), est.predict_proba(data, "a")
    )
    with pytest.raises(ValueError, match="has 2 variables; the model has 3"):
        est.predict_proba(CategoricalData.from_codes(codes[:, :2], [2, 3]), 0)


def test_estimator_fitted_on_int_labels_reads_string_labels(fitted):
    data, _ = fitted
    frame = pd.DataFrame(
        {
            n: pd.Series(data.codes[:, j] + 10).where(data.codes[:, j] >= 0)
            for j, n in enumerate(NAMES)
        }
    ).astype("Int64")
    est = LatentClassPMF(2, "em", max_iter=5000, tol=1e-9, random_state=0).fit(frame)
    as_str = frame.astype(object).map(lambda v: None if pd.isna(v) else str(v))
    np.testing.assert_array_equal(
        est.predict_proba(as_str[NAMES[::-1]], "a"), est.predict_proba(frame, "a")
    )


# ------------------------------------------------------------ the posterior


def test_posterior_functions_bind_reordered_variables_and_alphabets(fitted):
    data, est = fitted
    idata = _point_posterior(est)
    rows = data[:60]
    # a point-mass posterior answers as the estimate does
    want = posterior_predict_proba(idata, rows, "a")
    np.testing.assert_allclose(want, est.predict_proba(rows, "a"), rtol=1e-12)
    member = posterior_class_proba(idata, rows)["mean"].values
    np.testing.assert_allclose(member, est.predict_class_proba(rows), rtol=1e-12)
    filled = impute(idata, rows, random_seed=1).values
    rev = rows.select_variables(NAMES[::-1])
    other = _permute_alphabet(_permute_alphabet(rows, "b", [1, 2, 0]), "c", [3, 2, 1, 0])
    for new in (rev, other, _permute_alphabet(rev, "c", [2, 3, 0, 1])):
        np.testing.assert_array_equal(posterior_predict_proba(idata, new, "a"), want)
        np.testing.assert_array_equal(posterior_class_proba(idata, new)["mean"], member)
        got = impute(idata, new, random_seed=1)
        assert list(got["variable"].values) == NAMES
        np.testing.assert_array_equal(got.values, filled)  # the posterior's codes
    # imputed codes are in the posterior's alphabet and observed ones are copied
    assert all(filled[..., j].max() < k for j, k in enumerate([2, 3, 4]))
    obs = rows.codes >= 0
    np.testing.assert_array_equal(filled[0, 0][obs], rows.codes[obs])


def test_posterior_functions_refuse_unknown_labels(fitted):
    data, est = fitted
    idata = _point_posterior(est)
    cats = [list(c) for c in data.categories]
    cats[2] = ["w", "x", "y", "zz"]
    bad = CategoricalData.from_codes(data.codes, [2, 3, 4], NAMES, cats)
    bad = bad[np.flatnonzero(data.codes[:, 2] == 3)]
    for call in (
        lambda: posterior_predict_proba(idata, bad, "a"),
        lambda: posterior_class_proba(idata, bad),
        lambda: impute(idata, bad, random_seed=0),
    ):
        with pytest.raises(ValueError, match=r"Variable 'c'.*\['zz'\]"):
            call()


def test_posterior_without_coordinates_checks_alphabet_sizes(fitted):
    data, est = fitted
    post = {"weights": np.tile(est.weights_, (1, 2, 1))}
    post |= {
        factor_var_name(n): np.tile(a.T, (1, 2, 1, 1))
        for n, a in zip(NAMES, est.factors_, strict=True)
    }
    idata = az.from_dict({"posterior": post})
    idata.posterior.attrs["bayespmf_variables"] = json.dumps(NAMES)
    np.testing.assert_allclose(
        posterior_predict_proba(idata, data[:5], "b", model_data=data),
        est.predict_proba(data[:5], "b"),
        rtol=1e-12,
    )
    short = CategoricalData.from_codes(np.minimum(data.codes[:5], 1), 2, NAMES)
    with pytest.raises(ValueError, match=r"Variable 'b' of 'data' has 2 categories"):
        posterior_class_proba(idata, short)


def test_start_with_a_larger_alphabet_than_the_model_is_refused(fitted):
    data, est = fitted
    keep = np.flatnonzero(data.codes[:, 2] != 3)
    sub = CategoricalData.from_pandas(data[keep].to_pandas().astype(object))
    assert sub.categories[2] == ["w", "x", "y"]
    model = latent_class_model(sub, n_components=2)
    with pytest.raises(ValueError, match=r"'c' has 3 categories in the model and 4"):
        initvals(model, est)


# ------------------------------------------------------------ labels and columns


def test_from_codes_refuses_a_repeated_label():
    with pytest.raises(ValueError, match=r"variable 'v'.*\['u'\]"):
        CategoricalData.from_codes(
            [[0, 1], [1, 0]], 2, names=["v", "w"], categories=[["u", "u"], ["a", "b"]]
        )


def test_mixed_type_column_is_refused():
    df = pd.DataFrame(
        {"m": pd.Series([1, "1", 2, "x", None], dtype=object), "k": list("pqpqp")}
    )
    with pytest.raises(ValueError, match=r"Column 'm' of 'df' mixes strings"):
        CategoricalData.from_pandas(df)
    with pytest.raises(ValueError, match=r"Column 'm' of 'df' mixes strings"):
        LatentClassPMF(1, "em").fit(df)
    # one type per column is fine, and numbers sort as numbers
    ok = CategoricalData.from_pandas(df.assign(m=[1, 10, 2, 1, None]))
    assert ok.categories[0] == ["1.0", "2.0", "10.0"]
    assert ok.codes[:, 0].tolist() == [0, 2, 1, 0, -1]


def test_duplicated_column_names_are_named():
    df = pd.DataFrame([[0, 1, 0], [1, 0, 1]], columns=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"duplicated column name\(s\) \['a'\]"):
        CategoricalData.from_pandas(df)
    with pytest.raises(ValueError, match=r"duplicated column name\(s\) \['a'\]"):
        LatentClassPMF(1, "em").fit(df)
    like = CategoricalData.from_codes([[0, 1], [1, 0]], 2, names=["a", "b"])
    with pytest.raises(ValueError, match=r"duplicated column name\(s\) \['a'\]"):
        as_categorical(df.astype(str), like)
    # 1 and "1" name the same variable once stringified
    with pytest.raises(ValueError, match=r"duplicated column name\(s\) \['1'\]"):
        CategoricalData.from_pandas(pd.DataFrame([[0, 1], [1, 0]], columns=[1, "1"]))


def test_regression_estimator_binds_reordered_and_relabelled_rows(fitted):
    """LatentClassRegression reads a CategoricalData by name and label too."""
    from bayespmf import LatentClassRegression

    data, _ = fitted
    z = np.random.default_rng(0).normal(size=(data.n_samples, 1))
    reg = LatentClassRegression(2, random_state=0).fit(data, covariates=z)
    want = reg.predict_class_proba(data, z)
    rev = data.select_variables(NAMES[::-1])
    np.testing.assert_array_equal(reg.predict_class_proba(rev, z), want)
    other = _permute_alphabet(data, "c", [3, 1, 0, 2])
    np.testing.assert_array_equal(reg.predict_class_proba(other, z), want)
    # bare codes stay positional: reversed codes give another answer (or are refused)
    try:
        positional = reg.predict_class_proba(rev.codes, z)
    except ValueError:
        return
    assert np.abs(positional - want).max() > 1e-3
