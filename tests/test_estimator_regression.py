"""``LatentClassRegression``: the estimator over ``fit_latent_class_regression``.

Reference values come from the fit function called directly and from brute-force
enumeration of the classes row by row (softmax prior times the observed factor
entries), independent of the sparse kernels the estimator uses.
"""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax
from scipy.stats import norm
from sklearn.base import clone

from bayespmf._validation import DataValidationError
from bayespmf.estimators import LatentClassPMF, LatentClassRegression, NotFittedError
from bayespmf.estimators import regression as regression_module
from bayespmf.fit import fit_latent_class_regression

BETA = np.array([[0.0, 0.5], [0.0, 1.5], [0.0, -1.0]])  # intercept, two covariates
FIT_KW = {"n_init": 8, "random_state": 0}
LABELS = np.array(["lo", "mid", "hi"])


def simulate(n_rows, rng, *, beta=BETA, n_items=5, n_cat=3, missing=0.2):
    """Rows from the latent-class regression model (as in tests/test_covariates.py)."""
    n_components = beta.shape[1]
    factors = [
        rng.dirichlet(np.full(n_cat, 0.5), size=n_components).T for _ in range(n_items)
    ]
    z = rng.normal(size=(n_rows, beta.shape[0] - 1))
    p = softmax(np.c_[np.ones(n_rows), z] @ beta, axis=1)
    h = (p.cumsum(axis=1) > rng.random((n_rows, 1))).argmax(axis=1)
    x = np.stack(
        [(a[:, h].cumsum(axis=0) > rng.random(n_rows)).argmax(axis=0) for a in factors],
        axis=1,
    )
    x[rng.random(x.shape) < missing] = -1
    x[0] = -1  # one row with nothing observed: scores 0, left out of BIC's S
    return x, z


def brute_force(x, z, coef, factors, *, fit_intercept=True):
    """Per row: log Pr(x_obs | z) and Pr(H | x_obs, z), classes enumerated."""
    design = np.c_[np.ones(len(z)), z] if fit_intercept else np.asarray(z)
    ll, post = np.empty(x.shape[0]), np.empty((x.shape[0], coef.shape[1]))
    for s in range(x.shape[0]):
        eta = design[s] @ coef
        prior = np.exp(eta - eta.max())
        prior /= prior.sum()
        joint = prior.copy()
        for f in range(coef.shape[1]):
            for n, a in enumerate(factors):
                if x[s, n] >= 0:
                    joint[f] *= a[x[s, n], f]
        ll[s] = np.log(joint.sum())
        post[s] = joint / joint.sum()
    return ll, post


@pytest.fixture(scope="module")
def data():
    return simulate(300, np.random.default_rng(3))


@pytest.fixture(scope="module")
def model(data):
    x, z = data
    return LatentClassRegression(2, **FIT_KW).fit(x, covariates=z)


@pytest.fixture(scope="module")
def frames(data):
    """The same data as DataFrames: string labels, NaN missing, named covariates."""
    x, z = data
    index = pd.Index([f"r{s}" for s in range(x.shape[0])], name="id")
    labels = np.where(x >= 0, LABELS[np.maximum(x, 0)], None)
    df = pd.DataFrame(labels, index=index, columns=[f"q{n}" for n in range(x.shape[1])])
    # the alphabet of a string column is its sorted labels: hi < lo < mid
    recode = np.array([1, 2, 0])
    codes = np.where(x >= 0, recode[np.maximum(x, 0)], -1)
    cov = pd.DataFrame(z, index=index, columns=["age", "income"])
    return df, cov, codes


@pytest.fixture(scope="module")
def frame_model(frames):
    df, cov, _ = frames
    return LatentClassRegression(2, **FIT_KW).fit(df, covariates=cov)


# ------------------------------------------------------------------ the fit function


def test_fit_equals_the_function_called_directly(data):
    x, z = data
    w = np.random.default_rng(0).integers(1, 4, size=x.shape[0]).astype(float)
    kw = {"fit_intercept": True, "n_init": 8, "n_starts": 2, "ridge": 1e-3}
    kw |= {"max_iter": 500, "tol": 1e-9, "random_state": 1}
    m = LatentClassRegression(2, **kw).fit(x, covariates=z, sample_weight=w)
    ref = fit_latent_class_regression(x, z, 2, sample_weight=w, **kw)
    assert np.array_equal(m.coef_, ref.params.beta)
    assert np.array_equal(m.coef_stderr_, ref.stderr, equal_nan=True)
    assert np.array_equal(m.coef_covariance_, ref.info["covariance"])
    assert all(np.array_equal(a, b) for a, b in zip(m.factors_, ref.params.factors))
    assert m.loglik_ == ref.loglik and m.loglik_start_ == ref.loglik_start
    assert m.n_iter_ == ref.n_iter and m.converged_ == ref.converged
    assert np.array_equal(m.loglik_trace_, ref.loglik_trace)
    # weights_: the class prior averaged over the training rows, weighted
    prior = softmax(np.c_[np.ones(len(z)), z] @ ref.params.beta, axis=1)
    assert np.allclose(m.weights_, (w[:, None] * prior).sum(axis=0) / w.sum())


def test_defaults_equal_the_function_defaults(data, model):
    x, z = data
    ref = fit_latent_class_regression(x, z, 2, **FIT_KW)
    assert np.array_equal(model.coef_, ref.params.beta)
    assert model.loglik_ == ref.loglik
    prior = softmax(np.c_[np.ones(len(z)), z] @ ref.params.beta, axis=1)
    assert np.allclose(model.weights_, prior.mean(axis=0))
    assert model.n_categories_.tolist() == [3] * 5


class _Sentinel:
    def __init__(self, name):
        self.name = name


class _Called(Exception):
    pass


def test_every_argument_is_passed_through(monkeypatch):
    """TensorLy's wrapper check: each sentinel arrives as itself, under its own name."""
    seen = {}

    def recorder(data, covariates, n_components, **kwargs):
        seen.update(data=data, covariates=covariates, n_components=n_components, **kwargs)
        raise _Called

    monkeypatch.setattr(regression_module, "fit_latent_class_regression", recorder)
    init = {
        k: _Sentinel(k)
        for k in inspect.signature(LatentClassRegression).parameters
        if k != "progressbar"
    }
    init["progressbar"] = _Sentinel("progressbar")
    fit_kw = {k: _Sentinel(k) for k in ("covariates", "n_categories", "sample_weight")}
    x = _Sentinel("data")
    with pytest.raises(_Called):
        LatentClassRegression(**init).fit(x, **fit_kw)
    expected = {**init, **fit_kw, "data": x}
    for name, value in expected.items():
        assert seen[name] is value, name
    exposed = set(expected) | {"owner"}
    function = set(inspect.signature(fit_latent_class_regression).parameters)
    # always on: the estimator reports stderr and a polished estimate
    assert function - exposed == {"stderr", "polish"}
    assert seen["owner"] == "LatentClassRegression"


# ------------------------------------------------------------------ inference


def test_score_samples_and_posteriors_equal_brute_force(data, model):
    x, z = data
    ll, post = brute_force(x, z, model.coef_, model.factors_)
    assert np.allclose(model.score_samples(x, z), ll, rtol=1e-12, atol=1e-12)
    assert model.score_samples(x, z)[0] == 0.0  # nothing observed
    assert model.score(x, z) == pytest.approx(ll.mean(), rel=1e-12)
    assert model.loglik_ == pytest.approx(ll.sum(), rel=1e-10)
    p = model.predict_class_proba(x, z)
    assert p.shape == (x.shape[0], 2)
    assert np.allclose(p.sum(axis=1), 1.0)
    assert np.allclose(p, post, rtol=1e-10, atol=1e-12)
    assert np.array_equal(model.predict_class(x, z), post.argmax(axis=1))
    prior = softmax(np.c_[np.ones(len(z)), z] @ model.coef_, axis=1)
    assert np.allclose(model.predict_prior_proba(z), prior)
    assert np.allclose(p[0], prior[0])  # an all-missing row gets its prior


def test_a_single_new_row_is_predicted(model):
    """One row (or a constant covariate) is rank-deficient but must be predicted."""
    x, z = np.array([[0, 2, -1, 1, 0]]), np.array([[0.3, -1.2]])
    ll, post = brute_force(x, z, model.coef_, model.factors_)
    assert np.allclose(model.score_samples(x, z), ll)
    assert np.allclose(model.predict_class_proba(x, z), post)
    z2 = np.ones((2, 2))  # constant columns duplicate the intercept
    prior = softmax(np.ones(3) @ model.coef_)
    assert np.allclose(model.predict_class_proba(np.full((2, 5), -1), z2), prior)


def test_information_criteria(data, model):
    x, z = data
    k = 3 * 1 + 2 * 5 * (3 - 1)  # D'(F-1) + F sum(I_n - 1)
    assert model.n_parameters_ == k
    ll, _ = brute_force(x, z, model.coef_, model.factors_)
    n_obs = x.shape[0] - 1  # row 0 has nothing observed
    assert model.aic(x, z) == pytest.approx(-2 * ll.sum() + 2 * k, rel=1e-12)
    assert model.bic(x, z) == pytest.approx(-2 * ll.sum() + k * np.log(n_obs), rel=1e-12)


def test_coef_df(model):
    table = model.coef_df()
    assert list(table.columns) == ["covariate", "class", "coef", "stderr", "z", "p_value"]
    assert table["covariate"].tolist() == ["(intercept)", "z0", "z1"]
    assert table["class"].tolist() == [1, 1, 1]  # class 0 is the reference: no rows
    assert np.array_equal(table["coef"], model.coef_[:, 1])
    assert np.array_equal(table["stderr"], model.coef_stderr_[:, 1])
    assert np.allclose(table["z"], model.coef_[:, 1] / model.coef_stderr_[:, 1])
    assert np.allclose(table["p_value"], 2 * norm.sf(np.abs(table["z"])))
    assert np.all(np.isnan(model.coef_stderr_[:, 0]))
    assert np.all(np.isfinite(model.coef_stderr_[:, 1]))
    assert model.get_coefficients_df().equals(table)
    # recovery, up to the labelling of the two classes
    sign = np.sign(model.coef_[1, 1])
    assert np.all(np.abs(sign * model.coef_[1:, 1] - BETA[1:, 1]) < 4 * table["stderr"][1:])


def test_three_classes_without_intercept():
    rng = np.random.default_rng(5)
    beta = np.array([[0.0, 0.0, 0.0], [0.0, 1.5, -1.5]])  # no intercept in truth
    x, z = simulate(250, rng, beta=beta, missing=0.1)
    m = LatentClassRegression(3, fit_intercept=False, n_init=6, random_state=0)
    m.fit(x, covariates=pd.Series(z[:, 0], name="age"))  # a Series: one covariate
    assert m.coef_.shape == (1, 3) and m.covariate_names_ == ["age"]
    assert m.coef_df()["class"].tolist() == [1, 2]
    assert m.n_parameters_ == 1 * 2 + 3 * 5 * 2
    ll, post = brute_force(x, z[:, :1], m.coef_, m.factors_, fit_intercept=False)
    assert np.allclose(m.score_samples(x, z[:, 0]), ll)
    assert np.allclose(m.predict_class_proba(x, z[:, 0]), post)


# ------------------------------------------------------------------ pandas


def test_dataframes_in_pandas_out(frames, frame_model):
    df, cov, codes = frames
    m = frame_model
    assert m.covariate_names_ == ["(intercept)", "age", "income"]
    assert m.coef_df()["covariate"].tolist() == ["(intercept)", "age", "income"]
    ref = LatentClassRegression(2, **FIT_KW).fit(codes, covariates=cov.to_numpy())
    assert np.array_equal(m.coef_, ref.coef_)
    ss = m.score_samples(df, cov)
    assert isinstance(ss, pd.Series) and ss.index.equals(df.index)
    assert np.allclose(ss, ref.score_samples(codes, cov.to_numpy()))
    p = m.predict_class_proba(df, cov)
    assert isinstance(p, pd.DataFrame) and p.index.equals(df.index)
    assert p.columns.tolist() == [0, 1]
    assert np.allclose(p, ref.predict_class_proba(codes, cov.to_numpy()))
    c = m.predict_class(df, cov)
    assert isinstance(c, pd.Series) and c.index.equals(df.index)
    prior = m.predict_prior_proba(cov)
    assert isinstance(prior, pd.DataFrame) and prior.index.equals(cov.index)
    # covariates are matched by column name, not position
    assert np.allclose(m.score_samples(df, cov[["income", "age"]]), ss)
    # a subset of rows, and an array X with DataFrame covariates
    sub = m.predict_class_proba(df.iloc[5:8], cov.iloc[5:8])
    assert sub.index.equals(df.index[5:8])
    assert np.allclose(sub, p.iloc[5:8])
    assert m.score(df, cov) == pytest.approx(ss.mean())
    assert m.bic(df, cov) == pytest.approx(ref.bic(codes, cov.to_numpy()))


def test_dataframe_covariate_errors(frames, frame_model):
    df, cov, _ = frames
    with pytest.raises(ValueError, match=r"'covariates'.*index of 'X'"):
        frame_model.score_samples(df, cov.reset_index(drop=True))
    with pytest.raises(ValueError, match=r"'covariates'.*lacks the column"):
        frame_model.score_samples(df, cov[["age"]])
    bad = cov.assign(income=["x"] * len(cov))
    with pytest.raises(ValueError, match=r"'covariates'.*numeric"):
        LatentClassRegression(2).fit(df, covariates=bad)
    with pytest.raises(ValueError, match=r"'covariates'.*index of 'X'"):
        LatentClassRegression(2).fit(df, covariates=cov.iloc[::-1])


# ------------------------------------------------------------------ sklearn API


def test_clone_get_set_params():
    m = LatentClassRegression(3, ridge=0.1, n_init=5, random_state=2)
    params = m.get_params()
    assert params == {
        "n_components": 3,
        "fit_intercept": True,
        "n_init": 5,
        "n_starts": 3,
        "ridge": 0.1,
        "max_iter": None,
        "tol": None,
        "random_state": 2,
        "progressbar": False,
    }
    c = clone(m)
    assert c is not m and c.get_params() == params
    c.set_params(n_components=2, tol=1e-8)
    assert c.n_components == 2 and c.tol == 1e-8 and m.n_components == 3
    assert not hasattr(c, "coef_")


def test_not_fitted():
    m = LatentClassRegression(2)
    for call in (
        lambda: m.predict_class_proba([[0]], [[0.0]]),
        lambda: m.score_samples([[0]], [[0.0]]),
        lambda: m.predict_prior_proba([[0.0]]),
        m.coef_df,
        lambda: m.n_parameters_,
        lambda: m.save("unused.npz"),
    ):
        with pytest.raises(NotFittedError, match="not fitted"):
            call()


def test_y_must_be_none(data):
    x, z = data
    with pytest.raises(ValueError, match=r"'y' must be None.*covariates="):
        LatentClassRegression(2).fit(x, z)


def test_bad_covariates(data, model):
    x, z = data
    est = LatentClassRegression(2, **FIT_KW)
    with pytest.raises(ValueError, match=r"'covariates'.*one row per row"):
        est.fit(x, covariates=z[:-1])
    nan = z.copy()
    nan[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"'covariates'.*finite"):
        est.fit(x, covariates=nan)
    with pytest.raises(ValueError, match=r"'covariates'.*required"):
        est.fit(x, covariates=None)
    with pytest.raises(ValueError, match=r"'covariates'.*collinear"):
        est.fit(x, covariates=np.c_[z, 2 * z[:, 0]])
    with pytest.raises(ValueError, match=r"'covariates'.*one row per row"):
        model.predict_class_proba(x, z[:-1])
    with pytest.raises(ValueError, match=r"'covariates'.*finite"):
        model.score_samples(x, nan)
    with pytest.raises(ValueError, match=r"'covariates'.*2 column"):
        model.score_samples(x, z[:, :1])
    assert not hasattr(est, "coef_")


def test_caller_arrays_not_mutated(data):
    x, z = data
    x0, z0 = x.copy(), z.copy()
    w = np.ones(len(x))
    m = LatentClassRegression(2, **FIT_KW).fit(x, covariates=z, sample_weight=w)
    m.predict_class_proba(x, z)
    m.score_samples(x, z)
    assert np.array_equal(x, x0) and np.array_equal(z, z0)
    assert np.array_equal(w, np.ones(len(x)))


# ------------------------------------------------------------------ persistence


def _assert_same(a, b):
    for name in ("coef_", "coef_stderr_", "coef_covariance_", "weights_"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    for name in ("n_categories_", "loglik_trace_"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert len(a.factors_) == len(b.factors_)
    assert all(np.array_equal(u, v) for u, v in zip(a.factors_, b.factors_))
    for name in ("loglik_", "loglik_start_", "n_iter_", "converged_", "covariate_names_"):
        assert getattr(a, name) == getattr(b, name), name
    assert a.get_params() == b.get_params()


def test_save_load_round_trip(tmp_path, data, model):
    x, z = data
    path = model.save(tmp_path / "fit.npz")
    back = LatentClassRegression.load(path)
    _assert_same(model, back)
    assert np.array_equal(back.score_samples(x, z), model.score_samples(x, z))
    assert back.coef_df().equals(model.coef_df())


def test_save_load_dataframe_fit(tmp_path, frames, frame_model):
    df, cov, _ = frames
    back = LatentClassRegression.load(frame_model.save(tmp_path / "frame.npz"))
    _assert_same(frame_model, back)
    assert back.score_samples(df, cov).equals(frame_model.score_samples(df, cov))
    assert np.allclose(
        back.score_samples(df, cov[["income", "age"]]), back.score_samples(df, cov)
    )


def test_load_refuses_other_files(tmp_path):
    other = LatentClassPMF.from_params([1.0], [np.array([[0.5], [0.5]])])
    with pytest.raises(DataValidationError, match="not a saved LatentClassRegression"):
        LatentClassRegression.load(other.save(tmp_path / "pmf.npz"))
    evil = tmp_path / "evil.npz"
    np.savez(evil, meta=np.array([{"format": "x"}], dtype=object))
    with pytest.raises(DataValidationError, match="unpickling"):
        LatentClassRegression.load(evil)
