"""Sparse document-term input (scipy.sparse) against the dense path on the same data."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bayespmf._validation import DataValidationError
from bayespmf.datasets import make_simplex_nest
from bayespmf.estimators.simplex import GDM, VLAD, SimplexSPA
from bayespmf.fit.simplex import fit_simplex_nest
from bayespmf.kernels import vlad_geometry
from bayespmf.kernels.spa import spa, spa_centered_rows
from bayespmf.kernels.vlad_geometry import preprocess, top_subspace


@pytest.fixture(scope="module")
def corpus():
    """A small simulated LDA corpus: 300 documents of 60 words, vocabulary 40."""
    X, _ = make_simplex_nest(
        300, 40, 3, kernel="multinomial", alpha=0.5, words_per_doc=60, random_state=0
    )
    S = sp.csr_matrix(X)
    assert S.nnz < 0.5 * X.size  # genuinely sparse
    return X, S


def _same_fit(a, b, rtol=1e-9, atol=1e-11):
    np.testing.assert_allclose(b.vertices, a.vertices, rtol=rtol, atol=atol)
    assert sorted(a.details) == sorted(b.details)
    for key, val in a.details.items():
        if isinstance(val, np.ndarray) or isinstance(val, float):
            np.testing.assert_allclose(
                np.asarray(b.details[key], float),
                np.asarray(val, float),
                rtol=rtol,
                atol=atol,
                err_msg=key,
            )


@pytest.mark.parametrize("method", ["vlad", "gdm", "spa"])
@pytest.mark.parametrize("kernel", ["multinomial", "poisson"])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_fit_equals_dense(corpus, method, kernel, fmt):
    X, S = corpus
    dense = fit_simplex_nest(X, 3, method, kernel=kernel, random_state=0)
    fit = fit_simplex_nest(S.asformat(fmt), 3, method, kernel=kernel, random_state=0)
    _same_fit(dense, fit)
    if method != "spa":
        np.testing.assert_array_equal(fit.details["labels"], dense.details["labels"])


def test_sparse_vlad_arpack_route_equals_dense(corpus, monkeypatch):
    """Above GRAM_MAX_FEATURES: ARPACK on the centred operator, never the matrix."""
    X, S = corpus
    monkeypatch.setattr(vlad_geometry, "GRAM_MAX_FEATURES", 10)
    Y, _ = preprocess(X, "multinomial")
    Ys, _ = preprocess(S, "multinomial")
    assert sp.issparse(Ys)
    a, b = top_subspace(Y, 2, random_state=0), top_subspace(Ys, 2, random_state=0)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(y, x, rtol=1e-8, atol=1e-12)
    _same_fit(
        fit_simplex_nest(X, 3, "vlad", kernel="multinomial", random_state=1),
        fit_simplex_nest(S, 3, "vlad", kernel="multinomial", random_state=1),
        rtol=1e-7,
        atol=1e-10,
    )


@pytest.mark.parametrize("cls", [VLAD, GDM, SimplexSPA])
def test_estimators_transform_and_score_sparse(corpus, cls):
    X, S = corpus
    kw = {} if cls is SimplexSPA else {"random_state": 0}
    dense = cls(3, "multinomial", **kw).fit(X)
    est = cls(3, "multinomial", **kw).fit(S)
    np.testing.assert_allclose(est.vertices_, dense.vertices_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(
        est.transform(S[:50]), dense.transform(X[:50]), rtol=1e-7, atol=1e-9
    )
    assert est.score(S) == pytest.approx(dense.score(X), rel=1e-9)


def test_spa_centered_rows_matches_augmented_spa(corpus):
    X, _ = corpus
    Y = preprocess(X, "multinomial")[0]
    Yc = Y - Y.mean(axis=0)
    t = np.sqrt(np.max(np.sum(Yc**2, axis=1)))
    aug = np.vstack([Yc.T, np.full((1, Y.shape[0]), t)])
    expect = spa(aug, 5, normalize=False)
    np.testing.assert_array_equal(spa_centered_rows(Y, 5), expect)
    np.testing.assert_array_equal(spa_centered_rows(sp.csr_matrix(Y), 5), expect)


def test_sparse_input_is_not_modified(corpus):
    _, S = corpus
    before = S.copy()
    fit_simplex_nest(S, 3, "gdm", kernel="multinomial", random_state=0)
    assert (S != before).nnz == 0


def test_sparse_refusals_name_the_problem():
    bad = sp.csr_matrix(np.array([[1.0, -2.0], [0.0, 3.0], [1.0, 1.0]]))
    with pytest.raises(
        DataValidationError, match=r"negative count \(-2 at row 0, column 1"
    ):
        fit_simplex_nest(bad, 2, "vlad", kernel="poisson")
    frac = sp.csr_matrix(np.array([[1.0, 0.5], [0.0, 3.0], [1.0, 1.0]]))
    with pytest.raises(DataValidationError, match=r"0\.5 at row 0, column 1"):
        fit_simplex_nest(frac, 2, "gdm", kernel="multinomial")
    empty = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
    with pytest.raises(DataValidationError, match=r"have no words \(first: \[1\]\)"):
        fit_simplex_nest(empty, 2, "spa", kernel="multinomial")
    nan = sp.csr_matrix(np.array([[1.0, np.nan], [0.0, 3.0], [1.0, 1.0]]))
    with pytest.raises(DataValidationError, match="NaN or infinite"):
        fit_simplex_nest(nan, 2, "spa")


@pytest.mark.slow
def test_sparse_model_logp_equals_dense():
    pytest.importorskip("pymc")
    from bayespmf.models import simplex_nest_model

    X, _ = make_simplex_nest(
        30, 12, 3, kernel="multinomial", alpha=0.5, words_per_doc=20, random_state=0
    )
    S = sp.csr_matrix(X)
    dense = simplex_nest_model(X, 3, "multinomial")
    model = simplex_nest_model(S, 3, "multinomial")
    assert model.rvs_to_values[model["x"]].eval().size == S.nnz  # no dense (n, D)
    point = dense.initial_point(0)
    rng = np.random.default_rng(1)
    point = {k: v + 0.3 * rng.normal(size=v.shape) for k, v in point.items()}
    assert model.compile_logp()(point) == pytest.approx(dense.compile_logp()(point))
    # the per-row sums of the nonzero terms equal the dense rows' log-likelihoods
    rows = model.coords["entry"]
    terms = model.compile_logp(vars=[model["x"]], sum=False)(point)[0]
    per_row = np.bincount(rows, weights=terms, minlength=X.shape[0])
    dense_rows = dense.compile_logp(vars=[dense["x"]], sum=False)(point)[0]
    np.testing.assert_allclose(per_row, dense_rows, rtol=1e-10)
    with pytest.raises(DataValidationError, match="kernel='multinomial'"):
        simplex_nest_model(S, 3, "poisson")


def test_sparse_loglik_rows_sum_each_rows_entries():
    xr = pytest.importorskip("xarray")
    from bayespmf.models.simplex_nest import _loglik_rows

    rows = np.array([0, 0, 1, 2, 2, 2])
    values = np.arange(12.0).reshape(1, 2, 6)
    tree = xr.DataTree.from_dict(
        {
            "log_likelihood": xr.Dataset(
                {"x": (("chain", "draw", "entry"), values)}, coords={"entry": rows}
            )
        }
    )
    out = _loglik_rows(tree)["log_likelihood"]["x"]
    assert out.dims == ("chain", "draw", "obs")
    np.testing.assert_allclose(out.values, [[[1, 2, 12], [13, 8, 30]]])
