import json
import warnings
import zipfile
from pathlib import Path

import arviz as az
import numpy as np
import pytest
import xarray as xr

from bayespmf import DataValidationError, LatentClassPMF, __version__
from bayespmf import io as bio
from bayespmf.datasets import make_latent_class


@pytest.fixture(scope="module")
def fitted():
    data, _ = make_latent_class(
        400, [3, 2, 4], n_components=2, observed_prob=0.8, random_state=0
    )
    return LatentClassPMF(2, "em", random_state=0, max_iter=2000).fit(data), data


@pytest.fixture
def idata():
    rng = np.random.default_rng(0)
    return az.from_dict(
        {
            "posterior": {"weights": rng.dirichlet([1, 1], size=(2, 5))},
            "log_likelihood": {"x": rng.normal(size=(2, 5, 7))},
        },
        dims={"weights": ["class"]},
        attrs={"posterior": {"method": "nuts"}},
    )


def _same_fit(a, b, data):
    np.testing.assert_array_equal(a.weights_, b.weights_)
    for x, y in zip(a.factors_, b.factors_, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.loglik_trace_, b.loglik_trace_)
    assert (a.n_iter_, a.converged_, a.method, a.tol, a.max_iter) == (
        b.n_iter_,
        b.converged_,
        b.method,
        b.tol,
        b.max_iter,
    )
    assert b._names == data.names and b._categories == data.categories
    np.testing.assert_array_equal(
        a.predict_proba(data, target="x1"), b.predict_proba(data, target="x1")
    )


@pytest.mark.parametrize("suffix", [".nc", ".npz"])
def test_estimator_roundtrip(fitted, tmp_path, suffix):
    model, data = fitted
    path = bio.save(model, tmp_path / f"fit{suffix}")
    _same_fit(model, bio.load(path), data)


def test_netcdf_is_self_describing(fitted, tmp_path):
    model, _ = fitted
    path = bio.save(model, tmp_path / "fit.nc")
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        assert ds.attrs["bayespmf_version"] == __version__
        assert ds.attrs["bayespmf_format"] == "bayespmf.LatentClassPMF"
        assert int(ds.attrs["format_version"]) == bio.FORMAT_VERSION
        assert ds["factor_2"].dims == ("category_2", "class")
        assert json.loads(ds.attrs["params"])["method"] == "em"


#: A posterior saved by bayespmf 0.1 (ArviZ 0.23.4, PyMC 5.28; see the script beside it).
LEGACY_POSTERIOR = Path(__file__).parent / "data" / "posterior_bayespmf_0.1_arviz_0.23.nc"


def test_posterior_saved_by_bayespmf_0_1_loads_and_works():
    from bayespmf.models import (
        convergence_summary,
        posterior_class_proba,
        posterior_params,
        posterior_predict_proba,
    )

    back = bio.load(LEGACY_POSTERIOR)
    assert isinstance(back, xr.DataTree)
    assert {
        "posterior",
        "unaligned_posterior",
        "sample_stats",
        "log_likelihood",
        "observed_data",
        "constant_data",
    } <= set(back.children)
    post = back.posterior
    assert (post.sizes["chain"], post.sizes["draw"], post.sizes["class"]) == (2, 20, 2)
    w, stacked = posterior_params(back)  # the variables recorded at sampling time
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert stacked.shape == (40, 2 + 3 + 2, 2)
    # the rows recorded in the file, read back as data
    member = posterior_class_proba(back)
    assert member["mean"].shape == (back.observed_data.sizes["row"], 2)
    np.testing.assert_allclose(member["mean"].values.sum(axis=1), 1.0)
    p = posterior_predict_proba(back, back.observed_data["x"].values, 1)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    # the per-row log-likelihood group works with ArviZ 1's LOO
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k of 40 draws
        loo = az.loo(back)
    assert np.isfinite(loo.elpd)
    assert set(convergence_summary(back)["table"].index) == set(post.data_vars)


def test_posterior_roundtrip(idata, tmp_path):
    path = bio.save(idata, tmp_path / "post.nc")
    back = bio.load(path)
    assert isinstance(back, xr.DataTree)
    assert set(back.children) == {"posterior", "log_likelihood"}
    xr.testing.assert_equal(back.posterior, idata.posterior)
    xr.testing.assert_equal(back.log_likelihood, idata.log_likelihood)
    assert "bayespmf_format" not in idata.posterior.attrs  # the input is untouched
    with xr.open_dataset(path, engine="h5netcdf") as root:
        assert root.attrs["bayespmf_version"] == __version__


def test_incompatible_version_is_refused(fitted, idata, tmp_path):
    model, _ = fitted
    for obj, name in [(model, "fit.nc"), (idata, "post.nc")]:
        path = bio.save(obj, tmp_path / name)
        xr.Dataset(attrs={"format_version": 99, "bayespmf_version": "9.0"}).to_netcdf(
            path, mode="a", engine="h5netcdf"
        )
        with pytest.raises(
            bio.IncompatibleFormatError, match=r"version 99 \(bayespmf 9.0\)"
        ):
            bio.load(path)


def test_incompatible_npz_version_is_refused(fitted, tmp_path):
    model, _ = fitted
    path = bio.save(model, tmp_path / "fit.npz")
    with np.load(path) as f:
        arrays = dict(f)
    meta = json.loads(str(arrays["meta"]))
    meta["format_version"] = 7
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    with pytest.raises(DataValidationError, match="format version 7"):
        bio.load(path)


class _Boom:
    def __reduce__(self):  # pragma: no cover - must never run
        raise AssertionError("unpickled")


def test_pickle_bearing_npz_is_refused(fitted, tmp_path):
    model, _ = fitted
    path = bio.save(model, tmp_path / "fit.npz")
    with np.load(path) as f:
        arrays = dict(f)
    arrays["payload"] = np.array([{"a": 1}], dtype=object)
    np.savez(path, **arrays)
    with zipfile.ZipFile(path) as zf:
        assert "payload.npy" in zf.namelist()
    with pytest.raises(bio.UnsafeFileError, match=r"object array.*'payload\.npy'"):
        bio.load(path)
    # also when the object array replaces one the estimator reads
    arrays.pop("payload")
    arrays["weights"] = np.array([0.5, 0.5], dtype=object)
    np.savez(path, **arrays)
    with pytest.raises(bio.UnsafeFileError, match="refusing to load"):
        bio.load(path)


def test_plain_pickle_is_refused(tmp_path):
    import pickle

    path = tmp_path / "x.pkl"
    path.write_bytes(pickle.dumps({"weights": [1.0]}))
    with pytest.raises(bio.UnsafeFileError, match="pickle"):
        bio.load(path)


def test_foreign_files_are_refused(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("hello")
    with pytest.raises(DataValidationError, match="not a file bayespmf"):
        bio.load(path)
    nc = tmp_path / "other.nc"
    xr.Dataset({"a": ("x", [1.0, 2.0])}).to_netcdf(nc, engine="h5netcdf")
    with pytest.raises(DataValidationError, match="no 'bayespmf_format'"):
        bio.load(nc)
    bad_zip = tmp_path / "bad.npz"
    bad_zip.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(DataValidationError, match="not a valid npz"):
        bio.load(bad_zip)
    with pytest.raises(FileNotFoundError):
        bio.load(tmp_path / "missing.nc")


def test_save_errors(fitted, idata, tmp_path):
    with pytest.raises(ValueError, match="fitted LatentClassPMF or a posterior"):
        bio.save({"weights": 1}, tmp_path / "x.nc")
    with pytest.raises(ValueError, match="not fitted"):
        bio.save(LatentClassPMF(2), tmp_path / "x.nc")
    with pytest.raises(ValueError, match="netCDF only"):
        bio.save(idata, tmp_path / "x.npz")
    with pytest.raises(ValueError, match="'format'"):
        bio.save(fitted[0], tmp_path / "x.nc", format="json")


# ------------------------------------------------------- load_npz_safely (issue 14)

WHAT = "a LatentClassPMF fit saved by bayespmf"


def _explode():  # pragma: no cover - must never run
    raise AssertionError("unpickled: the loader ran code from the file")


class _RunsCodeWhenUnpickled:
    """Pickles fine; unpickling it calls ``_explode``."""

    def __reduce__(self):
        return (_explode, ())


def _messages(err):
    """The message of ``err`` and of every exception chained to it."""
    out = []
    while err is not None:
        out.append(str(err))
        err = err.__cause__ or (None if err.__suppress_context__ else err.__context__)
    return " | ".join(out)


def _refuse(path, error, match):
    with pytest.raises(error, match=match) as info:
        bio.load_npz_safely(path, what=WHAT)
    text = _messages(info.value)
    assert "allow_pickle" not in text and "unsafe" not in text.lower()
    return info.value


def test_load_npz_safely_reads_a_saved_fit(fitted, tmp_path):
    model, _ = fitted
    path = model.save(tmp_path / "fit.npz")
    arrays = bio.load_npz_safely(path, what=WHAT)
    assert set(arrays) >= {"weights", "loglik_trace", "meta", "factor_0"}
    np.testing.assert_array_equal(arrays["weights"], model.weights_)
    assert json.loads(str(arrays["meta"]))["format"]
    assert bio.load_npz_safely(str(path), what=WHAT).keys() == arrays.keys()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (
            b"hello, not a fit",
            r"is not a LatentClassPMF fit saved by bayespmf: .*not a zip",
        ),
        (b"", "the file is empty"),
        (b"PK\x03\x04garbage", "not a valid npz file"),
        (bytes(range(256)) * 8, "not a valid npz file"),
    ],
)
def test_load_npz_safely_refuses_garbage(tmp_path, content, match):
    path = tmp_path / "fit.npz"
    path.write_bytes(content)
    err = _refuse(path, DataValidationError, match)
    assert not isinstance(err, bio.UnsafeFileError)


def test_load_npz_safely_refuses_npy_and_foreign_zip(tmp_path):
    npy = tmp_path / "fit.npz"
    np.save(npy.with_suffix(".npy"), np.arange(3))
    npy.write_bytes(npy.with_suffix(".npy").read_bytes())
    _refuse(npy, DataValidationError, "single .npy array, not an npz archive")
    foreign = tmp_path / "notes.zip"
    with zipfile.ZipFile(foreign, "w") as zf:
        zf.writestr("readme.txt", "text, not an array")
    _refuse(foreign, DataValidationError, "not a valid npz file")


def test_load_npz_safely_refuses_pickles_without_running_them(fitted, tmp_path):
    import pickle

    model, _ = fitted
    path = model.save(tmp_path / "fit.npz")
    with np.load(path) as f:
        arrays = dict(f)
    arrays["weights"] = np.array([_RunsCodeWhenUnpickled()], dtype=object)
    np.savez(path, **arrays)
    _refuse(path, bio.UnsafeFileError, r"not a LatentClassPMF fit .*object array")
    pkl = tmp_path / "fit.pkl"
    pkl.write_bytes(pickle.dumps({"weights": [1.0]}))
    _refuse(pkl, bio.UnsafeFileError, "looks like a Python pickle")


def test_load_npz_safely_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.npz.*expected a LatentClass"):
        bio.load_npz_safely(tmp_path / "missing.npz", what=WHAT)


def test_load_never_passes_on_numpys_pickle_advice(fitted, tmp_path):
    model, _ = fitted
    path = model.save(tmp_path / "fit.npz")
    with np.load(path) as f:
        arrays = dict(f)
    arrays["meta"] = np.array([{"format": "x"}], dtype=object)
    np.savez(path, **arrays)
    with pytest.raises(bio.UnsafeFileError) as info:
        bio.load(path)
    assert "allow_pickle" not in _messages(info.value)
