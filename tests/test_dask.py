import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("dask.distributed")

from bayespmf import CategoricalData, ConvergenceWarning, DataValidationError  # noqa: E402
from bayespmf import marginals as mem  # noqa: E402
from bayespmf.dask import (  # noqa: E402
    DaskCategoricalData,
    DaskEMKernel,
    fit_em_dask,
    fit_latent_class,
    pairwise_marginals,
    triple_marginals,
)
from bayespmf.datasets import make_latent_class  # noqa: E402
from bayespmf.estimators import LatentClassPMF  # noqa: E402
from bayespmf.fit import fit_em  # noqa: E402
from bayespmf.kernels.em import build_em_kernel  # noqa: E402

N_CAT = [3, 4, 2, 5]


@pytest.fixture(scope="module")
def data():
    d, _ = make_latent_class(2000, N_CAT, n_components=3, observed_prob=0.6, random_state=3)
    return d


@pytest.fixture(scope="module")
def ddata(data):
    return DaskCategoricalData.from_categorical_data(data, chunk_rows=450)


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


# ------------------------------------------------------------------ container


def test_container_roundtrip(data, ddata):
    assert ddata.n_chunks == 5
    assert ddata.shape == data.shape
    assert ddata.compute(scheduler="synchronous") == data
    assert "n_chunks=5" in repr(ddata)


def test_infers_n_categories_and_merges_column_chunks(sync):
    x = da.from_array(np.array([[0, 1, 2], [1, -1, 0], [1, 0, 1]]), chunks=(2, 1))
    d = DaskCategoricalData.from_dask_array(x)
    assert d.n_categories.tolist() == [2, 2, 3]
    assert d.codes.numblocks == (2, 1)


@pytest.mark.parametrize(
    ("codes", "kwargs", "match"),
    [
        (np.zeros((3, 2)), {}, "dask.array.Array"),
        (da.zeros(3, dtype=int), {"n_categories": 2}, "2-D"),
        (da.zeros((3, 2), dtype=int), {"n_categories": [2, 1]}, "at least 2 categories"),
        (da.zeros((3, 2), dtype=int), {"n_categories": 2, "names": ["a", "a"]}, "unique"),
        (da.from_array(np.array([["a", "b"]])), {"n_categories": 2}, "integer codes"),
    ],
)
def test_container_errors(codes, kwargs, match):
    with pytest.raises(DataValidationError, match=match):
        DaskCategoricalData(codes, **kwargs)


def test_bad_codes_raise_when_computed(sync):
    x = da.from_array(np.array([[0, 1], [5, 0]]), chunks=(1, 2))
    d = DaskCategoricalData.from_dask_array(x, n_categories=[2, 2])
    with pytest.raises(DataValidationError, match="code 5"):
        pairwise_marginals(d)
    with pytest.raises(DataValidationError, match="code 5"):
        fit_em_dask(d, 1)


def test_from_dask_dataframe_matches_from_pandas(sync):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "colour": rng.choice(["red", "blue", "green", None], size=50),
            "size": pd.Categorical(
                rng.choice(["S", "M", "L"], size=50), ["S", "M", "L", "XL"]
            ),
            "flag": rng.choice([True, False], size=50),
            "n": rng.choice([3, 1, 2], size=50),
        }
    )
    expected = CategoricalData.from_pandas(df)
    got = DaskCategoricalData.from_dask_dataframe(dd.from_pandas(df, npartitions=4))
    assert got.n_chunks == 4
    assert got.compute() == expected


def test_from_dask_dataframe_errors():
    df = pd.DataFrame({"a": ["x"] * 5, "b": ["u", "v", "u", "v", "u"]})
    with pytest.raises(DataValidationError, match="Column 'a'"):
        DaskCategoricalData.from_dask_dataframe(dd.from_pandas(df, npartitions=2))
    with pytest.raises(DataValidationError, match=r"dask\.dataframe"):
        DaskCategoricalData.from_dask_dataframe(df)


# ------------------------------------------------------------------ marginals


@pytest.mark.parametrize("split_every", [2, 8])
def test_pairwise_marginals_exact(data, ddata, sync, split_every):
    ref = mem.pairwise_marginals(data)
    got = pairwise_marginals(ddata, split_every=split_every)
    np.testing.assert_array_equal(got.joint, ref.joint)
    np.testing.assert_array_equal(got.counts, ref.counts)
    assert got.n_samples == ref.n_samples


def test_triple_marginals_exact(data, ddata, sync):
    ref = mem.triple_marginals(data, triples=[(0, 1, 2), (1, 2, 3)])
    got = triple_marginals(ddata, triples=[(2, 1, 0), (1, 2, 3)])
    assert got.triples == ref.triples
    assert got.counts == ref.counts
    for t in ref.triples:
        np.testing.assert_array_equal(got.tensor(*t), ref.tensor(*t))


def test_marginals_on_distributed_client(data, ddata, client):
    ref = mem.pairwise_marginals(data)
    np.testing.assert_array_equal(pairwise_marginals(ddata, client=client).joint, ref.joint)


def test_marginals_reject_other_types(data):
    with pytest.raises(DataValidationError, match="DaskCategoricalData"):
        pairwise_marginals(data)
    with pytest.raises(ValueError, match="split_every"):
        pairwise_marginals(
            DaskCategoricalData.from_categorical_data(data, 500), split_every=1
        )


# ------------------------------------------------------------------ EM


def test_em_step_matches_in_memory_kernel(data, ddata, sync):
    kernel = build_em_kernel(data, n_components=3)
    dkernel = DaskEMKernel(ddata, n_components=3)
    assert dkernel.n_rows == kernel.n_rows
    rng = np.random.default_rng(1)
    w = rng.dirichlet(np.ones(3))
    a = np.concatenate([rng.dirichlet(np.ones(i), size=3).T for i in N_CAT])
    for ref, got in zip(kernel.step(w, a), dkernel.step(w, a), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
    assert dkernel.loglik(w, a) == pytest.approx(kernel.loglik(w, a), rel=1e-13)


@pytest.mark.filterwarnings("ignore::bayespmf.ConvergenceWarning")
@pytest.mark.parametrize("persist", [True, False])
def test_fit_em_matches_in_memory(data, ddata, sync, persist):
    ref, ref_info = fit_em(data, 3, random_state=5, max_iter=40, tol=1e-12)
    got, info = fit_em_dask(
        ddata, 3, random_state=5, max_iter=40, tol=1e-12, persist=persist
    )
    assert info.n_iter == ref_info.n_iter
    np.testing.assert_allclose(info.loglik_trace, ref_info.loglik_trace, rtol=1e-12)
    np.testing.assert_allclose(got.weights, ref.weights, rtol=1e-9)
    for a, b in zip(got.factors, ref.factors, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-14)


def test_squarem_matches_in_memory(data, ddata, sync):
    kw = {"accelerate": "squarem", "random_state": 2, "max_iter": 2000, "tol": 1e-13}
    ref, ref_info = fit_em(data, 3, **kw)
    got, info = fit_em_dask(ddata, 3, **kw)
    assert ref_info.converged and info.converged
    assert np.all(np.diff(info.loglik_trace) >= -1e-8 * abs(info.loglik_trace[-1]))
    # SQUAREM's extrapolation amplifies summation-order rounding; the fixed point agrees
    assert info.loglik_trace[-1] == pytest.approx(ref_info.loglik_trace[-1], rel=1e-9)
    np.testing.assert_allclose(got.weights, ref.weights, atol=1e-4)


@pytest.mark.filterwarnings("ignore::bayespmf.ConvergenceWarning")
@pytest.mark.parametrize("accelerate", [None, "squarem"])
def test_fit_em_on_distributed_client(data, ddata, client, accelerate):
    kw = {"accelerate": accelerate, "random_state": 4, "max_iter": 4, "tol": 0.0}
    ref, ref_info = fit_em(data, 3, **kw)
    got, info = fit_em_dask(ddata, 3, client=client, **kw)
    np.testing.assert_allclose(info.loglik_trace, ref_info.loglik_trace, rtol=1e-12)
    np.testing.assert_allclose(got.weights, ref.weights, rtol=1e-8)


def test_fit_em_dask_warns_and_callback_stops(ddata, sync):
    with pytest.warns(ConvergenceWarning, match="fit_em_dask did not converge"):
        fit_em_dask(ddata, 2, random_state=0, max_iter=2)
    seen = []
    _, info = fit_em_dask(
        ddata, 2, random_state=0, callback=lambda it, s: seen.append(it) or it == 3
    )
    assert seen == [1, 2, 3] and info.n_iter == 3 and not info.converged


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_components": 0}, "'n_components'"),
        ({"n_components": 2, "accelerate": "anderson"}, "'accelerate'"),
        ({"n_components": 2, "max_iter": 0}, "'max_iter'"),
        ({"n_components": 2, "tol": -1.0}, "'tol'"),
        ({"n_components": 2, "callback": 3}, "'callback'"),
        (
            {"n_components": 3, "init": ([1.0], [np.ones((i, 1)) / i for i in N_CAT])},
            "rank 1",
        ),
    ],
)
def test_fit_em_dask_argument_errors(ddata, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_em_dask(ddata, **kwargs)


def test_never_observed_variable_is_refused(sync):
    codes = np.array([[0, -1], [1, -1], [1, -1]])
    d = DaskCategoricalData.from_dask_array(da.from_array(codes, chunks=(2, 2)), [2, 2])
    with pytest.raises(DataValidationError, match=r"Variable\(s\) \[1\]"):
        fit_em_dask(d, 1)


def test_empty_rows_and_empty_chunks_are_skipped(sync):
    codes = np.array([[-1, -1], [-1, -1], [0, 1], [1, 0], [-1, -1], [1, 1]])
    d = DaskCategoricalData.from_dask_array(da.from_array(codes, chunks=(2, 2)), [2, 2])
    ref, ref_info = fit_em(codes, 2, random_state=0, max_iter=50)
    got, info = fit_em_dask(d, 2, random_state=0, max_iter=50)
    np.testing.assert_allclose(info.loglik_trace, ref_info.loglik_trace, rtol=1e-12)
    np.testing.assert_allclose(got.weights, ref.weights, rtol=1e-9)


@pytest.mark.filterwarnings("ignore::bayespmf.ConvergenceWarning")
@pytest.mark.parametrize("method", ["em", "cnmf-spa", "cnmf-spa-em", "cnmf-spa-squarem"])
def test_fit_latent_class_matches_estimator(data, ddata, sync, method):
    # SQUAREM's step-length choices amplify summation-order differences, so its two
    # paths are compared at the fixed point (a tight tol), the others step by step
    kw = {"tol": 1e-13, "max_iter": 2000} if method.endswith("squarem") else {}
    kw.setdefault("max_iter", 200)
    ref = LatentClassPMF(3, method, random_state=0, **kw).fit(data)
    got = fit_latent_class(ddata, 3, method, random_state=0, **kw)
    if not method.endswith("squarem"):
        assert got.n_iter_ == ref.n_iter_
    atol = 1e-4 if method.endswith("squarem") else 1e-9
    np.testing.assert_allclose(got.weights_, ref.weights_, atol=atol)
    assert got.score(data) == pytest.approx(ref.score(data), rel=1e-9)
    assert got._names == data.names
    proba = got.predict_proba(data[:10], target="x0")
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_fit_latent_class_agrees_with_the_in_memory_function(data, ddata, sync):
    import copy

    from bayespmf.fit import LatentClassFit
    from bayespmf.fit import fit_latent_class as fit_in_memory

    got = fit_latent_class(ddata, 3, "cnmf-spa-em", random_state=0, max_iter=200)
    ref = fit_in_memory(data, 3, "cnmf-spa-em", random_state=0, max_iter=200)
    assert isinstance(got, LatentClassFit)  # the in-memory function's result type
    assert got.n_iter == ref.n_iter and got.converged == ref.converged
    np.testing.assert_allclose(got.params.weights, ref.params.weights, atol=1e-9)
    np.testing.assert_allclose(got.loglik_trace, ref.loglik_trace, rtol=1e-12)
    assert got.loglik == pytest.approx(ref.loglik, rel=1e-12)
    # and it answers as the fitted estimator: a start bound by name
    assert got.variable_names_ == got.estimator.variable_names_ == data.names
    assert got.n_iter_ == got.n_iter
    np.testing.assert_array_equal(got.weights_, got.params.weights)
    again = copy.deepcopy(got)
    assert again.estimator.n_iter_ == again.n_iter == got.n_iter
    with pytest.raises(AttributeError):
        got.no_such_attribute_


def test_fit_latent_class_errors(ddata):
    with pytest.raises(ValueError, match="'method'"):
        fit_latent_class(ddata, 2, "spectral")
    with pytest.raises(DataValidationError, match="cannot be identified"):
        fit_latent_class(ddata, 500, "em")


def test_one_based_codes_are_refused():
    codes = da.from_array(np.array([[1, 2], [2, 1], [1, -1]]), chunks=(2, 2))
    with pytest.raises(DataValidationError, match="1-based"):
        DaskCategoricalData.from_dask_array(codes)
    # declared alphabets: no check
    DaskCategoricalData.from_dask_array(codes, [3, 3])


def test_importing_the_package_loads_neither_dask_nor_pymc():
    # bayespmf loads no Dask; bayespmf.dask loads PyMC only when sample_gibbs is used
    code = (
        "import sys, bayespmf; assert 'dask' not in sys.modules; "
        "import bayespmf.dask; assert 'pymc' not in sys.modules, 'pymc'; "
        "bayespmf.dask.sample_gibbs; assert 'pymc' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
