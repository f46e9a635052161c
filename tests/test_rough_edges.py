"""The last rough edges a user hits (issue 39): one test per row of the issue's table.

Each test feeds exactly the row's input and checks what the user should now get.
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from bayespmf import CategoricalData, DataValidationError
from bayespmf.apps.cli import main
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import (
    GDM,
    VLAD,
    LatentClassPMF,
    LatentClassRegression,
    PurificationNMF,
    SimplexSPA,
)

# ------------------------------------------------------------------ bayespmf run

_SPEC = (
    'seed = 1\n[data]\nname = "votes"\n[fit]\nn_components = 2\nmethod = "em"\n'
    "[output]\nfigures = false\n"
)


def _spec(tmp_path, out=None, text=_SPEC, name="spec.toml"):
    if out is not None:
        text += f"dir = {json.dumps(str(out))}\n"
    p = tmp_path / name
    p.write_text(text)
    return p


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _beside(out):
    """Hidden folders a run left beside its output folder (staging, old): none."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith("."))


def _no_work(monkeypatch):
    import bayespmf.apps.run as run

    def fails(*args, **kwargs):
        raise AssertionError("the run started working before checking its output")

    monkeypatch.setattr(run, "_run_staged", fails)


def _read_only(folder: Path, monkeypatch, request) -> None:
    folder.chmod(0o555)
    request.addfinalizer(lambda: folder.chmod(0o755))
    if os.geteuid() == 0:  # root writes anywhere: answer as any user would be answered
        access = os.access

        def user_access(path, mode, *args, **kwargs):
            if Path(path) == folder and mode & os.W_OK:
                return False
            return access(path, mode, *args, **kwargs)

        monkeypatch.setattr(os, "access", user_access)


@pytest.mark.parametrize("case", ["file", "below a file", "read-only folder"])
def test_row1_unusable_output_dir_fails_before_any_work(
    tmp_path, monkeypatch, capsys, request, case
):
    if case == "file":
        out = tmp_path / "results.txt"
        out.write_text("mine")
        fix = "is a file, not a folder"
    elif case == "below a file":
        (tmp_path / "notes").write_text("mine")
        out = tmp_path / "notes" / "car"
        fix = "which is a file, not a folder"
    else:
        out = tmp_path / "locked"
        out.mkdir()
        _read_only(out, monkeypatch, request)
        fix = "is read-only"
    spec = _spec(tmp_path, out)
    _no_work(monkeypatch)
    for extra in (["--check"], ["--no-progress"]):  # --check makes the same check
        assert main(["run", str(spec), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"output.dir {out}" in err and fix in err and "Choose" in err
    top = "results.txt" if case == "file" else out.relative_to(tmp_path).parts[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["spec.toml", top])


def test_row2_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    import bayespmf.apps.run as run

    def disk_fills_up(obj, path, **kwargs):
        Path(path).write_bytes(b"\x89HDF\r\n\x1a\n half of a file")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(run, "write_netcdf", disk_fills_up)
    out = tmp_path / "out"
    assert main(["run", str(_spec(tmp_path)), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "No space left on device" in err and str(out) in err
    assert not out.exists() and _beside(out) == []  # nothing half-written


def test_row3_results_folder_describes_exactly_one_run(tmp_path, monkeypatch, capsys):
    import bayespmf.apps.run as run

    out = tmp_path / "out"
    first = _spec(tmp_path, name="first.toml")
    assert main(["run", str(first), "--out", str(out), "--no-progress"]) == 0
    run1 = _snapshot(out)
    assert "estimate.nc" in run1
    # a second run failing part-way: the folder keeps run 1, and only run 1
    writer = run.write_netcdf

    def fails(obj, path, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(run, "write_netcdf", fails)
    assert main(["run", str(first), "--out", str(out), "--no-progress"]) == 1
    assert _snapshot(out) == run1 and _beside(out) == []
    # a second run that completes replaces the folder: no file of run 1 beside its own
    monkeypatch.setattr(run, "write_netcdf", writer)
    second = _spec(tmp_path, text=_SPEC + "netcdf = false\n", name="second.toml")
    assert main(["run", str(second), "--out", str(out), "--no-progress"]) == 0
    run2 = _snapshot(out)
    assert "estimate.nc" not in run2
    assert sorted(json.loads(run2["results.json"])["files"]) == sorted(run2)
    assert _beside(out) == []
    # a folder holding anything else is refused before any work, never deleted
    (out / "my_notes.txt").write_text("mine")
    capsys.readouterr()
    _no_work(monkeypatch)
    assert main(["run", str(second), "--out", str(out)]) == 2
    assert "my_notes.txt" in capsys.readouterr().err
    assert (out / "my_notes.txt").read_text() == "mine"


# ------------------------------------------------------------------ estimators

X = np.array([[0, 1, 2], [1, 0, 1], [0, 0, 0], [1, 1, 2]] * 5)
Z = np.ones((X.shape[0], 1))
Y = np.random.default_rng(0).random((20, 4))


@pytest.mark.parametrize(
    ("estimator", "method", "args"),
    [
        (LatentClassPMF(2), "predict", (X, 0)),
        (LatentClassPMF(2), "predict_proba", (X, 0)),
        (LatentClassPMF(2), "predict", (X,)),  # the call: no target
        (LatentClassPMF(2), "predict_proba", (X,)),
        (LatentClassPMF(2), "expected_value", (X, 0)),
        (LatentClassPMF(2), "predict_class_proba", (X,)),
        (LatentClassPMF(2), "score", (X,)),
        (LatentClassRegression(2), "predict_class_proba", (X, Z)),
        (LatentClassRegression(2), "score", (X, Z)),
        (PurificationNMF(2), "transform", (Y,)),
        (VLAD(2), "transform", (Y,)),
        (GDM(2), "score", (Y,)),
        (SimplexSPA(2), "transform", (Y,)),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str | tuple) else None,
)
def test_row4_methods_before_fit_raise_not_fitted(estimator, method, args):
    with pytest.raises(NotFittedError, match=rf"This {type(estimator).__name__} is not"):
        getattr(estimator, method)(*args)


def test_predict_without_target_is_the_class_as_in_sklearn_mixtures():
    data, _ = make_latent_class(300, 3, n_components=2, n_variables=4, random_state=2)
    est = LatentClassPMF(2, random_state=0).fit(data)
    np.testing.assert_array_equal(est.predict(data), est.predict_class(data))
    np.testing.assert_allclose(est.predict_proba(data), est.predict_class_proba(data))
    assert est.predict_proba(data, 0).shape == (300, 3)  # a target: that variable


@pytest.fixture(scope="module")
def rare():
    """Votes-sized simulated codes in which category 3 of variable 0 occurs once."""
    data, _ = make_latent_class(240, 3, n_components=2, n_variables=5, random_state=0)
    codes = np.array(data.codes)
    codes[5, 0] = 3
    return codes


def test_row5_grid_search_on_categorical_data(rare):
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.utils import _safe_indexing

    data = CategoricalData.from_codes(rare)
    fold = _safe_indexing(data, np.arange(10, 30))
    assert isinstance(fold, CategoricalData) and fold.n_samples == 20
    assert fold.n_categories.tolist() == [4, 3, 3, 3, 3]  # the alphabets are kept
    est = LatentClassPMF(1, method="em", random_state=0)
    search = GridSearchCV(est, {"n_components": [1, 2]}, cv=3).fit(data)
    scores = [search.cv_results_[f"split{k}_test_score"] for k in range(3)]
    assert np.all(np.isfinite(scores))
    assert np.all(np.isfinite(cross_val_score(clone(est), data, cv=3)))


def test_row6_grid_search_on_codes_with_a_rare_category(rare):
    from sklearn.model_selection import GridSearchCV

    n_cat = [4, 3, 3, 3, 3]
    est = LatentClassPMF(1, method="em", random_state=0, n_categories=n_cat)
    search = GridSearchCV(est, {"n_components": [1, 2]}, cv=3).fit(rare)
    for k in range(3):  # the fold without the rare category has it too
        assert np.all(np.isfinite(search.cv_results_[f"split{k}_test_score"]))
    with pytest.raises(DataValidationError, match=r"n_categories=\[5, 3, 3, 3, 3\], but"):
        est.fit(rare, n_categories=[5, 3, 3, 3, 3])  # given twice, unequal: refused
    # without the alphabets, the fold that meets the category says how to pass them
    bare = LatentClassPMF(1, method="em", random_state=0)
    fix = r"Pass the full alphabets to the estimator, LatentClassPMF\(\.\.\., n_categ"
    with pytest.raises(DataValidationError, match=fix):
        GridSearchCV(bare, {"n_components": [1, 2]}, cv=3, error_score="raise").fit(rare)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GridSearchCV(bare, {"n_components": [1, 2]}, cv=3).fit(rare)
    assert any("n_categories=[...]" in str(w.message) for w in caught)


def test_row7_fit_on_dask_data_runs_chunked(rare, monkeypatch):
    import dask

    from bayespmf.dask import DaskCategoricalData

    data = CategoricalData.from_codes(rare)
    ddata = DaskCategoricalData.from_categorical_data(data, chunk_rows=100)
    monkeypatch.setattr(  # never loaded into memory: fitted chunk by chunk
        DaskCategoricalData, "compute", lambda self, **kw: pytest.fail("computed")
    )
    with dask.config.set(scheduler="synchronous"):
        chunked = LatentClassPMF(2, method="em", random_state=0).fit(ddata)
    in_memory = LatentClassPMF(2, method="em", random_state=0).fit(data)
    np.testing.assert_allclose(chunked.loglik_, in_memory.loglik_, rtol=1e-9)
    np.testing.assert_allclose(chunked.weights_, in_memory.weights_, atol=1e-6)


def test_row8_predict_proba_with_other_alphabets(rare):
    data = CategoricalData.from_codes(rare[:, 1:])  # alphabets [3, 3, 3, 3]
    other = CategoricalData.from_codes(np.minimum(rare[:, 1:], 1), n_categories=2)
    match = r"Variable 'x0' of 'data' has the alphabet of 2 categories \[0, 1\], but the "
    match += r"model's alphabet of that variable has 3 categories \[0, 1, 2\]"
    for fitted_on in (data, np.asarray(data.codes)):  # labelled fit and bare codes
        model = LatentClassPMF(2, method="em", random_state=0).fit(fitted_on)
        with pytest.raises(DataValidationError, match=match):
            model.predict_proba(other, 1)


def _posterior_with_coordinates():
    """A posterior laid out as bayespmf.models.sample writes it (u: 3, v: 2 labels)."""
    import arviz as az

    au = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    av = np.array([[0.5, 0.5], [0.2, 0.8]])
    post = {
        "weights": np.tile([0.5, 0.5], (1, 4, 1)),
        "A_u": np.tile(au, (1, 4, 1, 1)),
        "A_v": np.tile(av, (1, 4, 1, 1)),
    }
    idata = az.from_dict(
        {"posterior": post},
        dims={"weights": ["class"], "A_u": ["class", "u_category"]}
        | {"A_v": ["class", "v_category"]},
        coords={"class": [0, 1], "u_category": ["0", "1", "2"], "v_category": ["0", "1"]},
    )
    idata.posterior.attrs["bayespmf_variables"] = json.dumps(["u", "v"])
    return idata


def test_row9_impute_with_other_alphabets():
    from bayespmf.models import impute

    idata = _posterior_with_coordinates()
    same = CategoricalData.from_codes([[2, -1], [-1, 1]], [3, 2], names=["u", "v"])
    assert impute(idata, same, random_seed=0).shape == (1, 4, 2, 2)
    smaller = CategoricalData.from_codes([[1, -1], [-1, 1]], [2, 2], names=["u", "v"])
    larger = CategoricalData.from_codes([[1, -1], [-1, 2]], [3, 3], names=["u", "v"])
    for data, var, got, want in [(smaller, "u", 2, 3), (larger, "v", 3, 2)]:
        match = rf"Variable '{var}' of 'data' has the alphabet of {got} categories.*"
        match += rf"the model's alphabet of that variable has {want} categories"
        with pytest.raises(DataValidationError, match=match):
            impute(idata, data, random_seed=0)


def test_row10_random_seed_that_is_not_a_seed():
    from bayespmf.models import impute, sample

    data = CategoricalData.from_codes(np.random.default_rng(0).integers(0, 2, (40, 3)))
    with pytest.raises(ValueError, match=r"The 'random_seed' argument of sample must"):
        sample(data, n_components=2, draws=5, tune=5, chains=1, random_seed="abc")
    with pytest.raises(ValueError, match=r"The 'random_seed' argument of impute must"):
        impute(_posterior_with_coordinates(), random_seed="abc")


def test_row11_codes_below_missing_and_overflowing():
    with pytest.raises(DataValidationError, match=r"code -2 is neither missing \(-1\) nor"):
        CategoricalData.from_codes([[0, 1], [-2, 1], [0, 0]])
    big = np.array([[0, 1], [2**64 - 1, 1], [1, 0]], dtype=np.uint64)
    with pytest.raises(DataValidationError, match=r"code 18446744073709551615 .* overflow"):
        CategoricalData.from_codes(big)


def test_row12_dask_codes_with_nan():
    import dask.array as da

    from bayespmf.dask import DaskCategoricalData

    codes = np.array([[0, 1, 0], [1, 0, np.nan], [1, 1, 1]])
    with pytest.raises(DataValidationError, match=r"NaN in column 2: use -1 for missing"):
        DaskCategoricalData(da.from_array(codes, chunks=(2, 3)))


def _rank1():
    from bayespmf.models import latent_class_model

    data = CategoricalData.from_codes(np.random.default_rng(0).integers(0, 2, (40, 3)))
    return data, latent_class_model(data, n_components=1)


@pytest.mark.slow
def test_row13_rank1_pivot_transform_has_no_free_weight():
    from bayespmf.models import pivot_model

    _, model = _rank1()
    point = LatentClassPMF.from_params([1.0], [np.full((2, 1), 0.5)] * 3)
    pivoted = pivot_model(model, point)  # raised "needs n_entries >= 2"
    start = pivoted.initial_point()
    assert start["weights_pivot_logratio__"].shape == (0,)
    assert np.isfinite(pivoted.compile_logp()(start))
    assert np.all(np.isfinite(pivoted.compile_dlogp()(start)))


@pytest.mark.slow
@pytest.mark.jax
def test_row13_rank1_samples_with_numpyro():
    pytest.importorskip("numpyro")
    from bayespmf.models import sample

    data, _ = _rank1()
    idata = sample(
        data,
        n_components=1,
        nuts_sampler="numpyro",
        draws=5,
        tune=5,
        chains=1,
        random_seed=0,
        progressbar=False,
    )
    np.testing.assert_array_equal(idata.posterior["weights"].values, 1.0)
