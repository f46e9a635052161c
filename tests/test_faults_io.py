"""Issue 24, items 1 and 2: atomic saves and exact, checked round trips.

Faults are injected for real: a file object that fills the disk part way through a
write, a file-size limit in a child process (the kernel's EFBIG), a writer that dies
mid-run, files altered on disk after saving.
"""

import dataclasses
import errno
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import arviz as az
import h5py
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayespmf._atomic as atomic
from bayespmf import DataValidationError, LatentClassPMF
from bayespmf import io as bio
from bayespmf._npz import arrays_sha256, decode_value, encode_value
from bayespmf.apps.cli import main
from bayespmf.datasets import make_latent_class
from bayespmf.estimators import LatentClassRegression
from bayespmf.fit.latent_class import METHODS

LEGACY_POSTERIOR = Path(__file__).parent / "data" / "posterior_bayespmf_0.1_arviz_0.23.nc"


@pytest.fixture(scope="module")
def data():
    return make_latent_class(
        300, [3, 2, 4, 3], n_components=2, observed_prob=0.9, random_state=0
    )[0]


@pytest.fixture(scope="module")
def fits(data):
    """One fit per method (every kind of ``info_``), random states of every kind."""
    states = [0, None, np.random.default_rng(5), np.random.SeedSequence(7)]
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence / local-optimum warnings
        for k, method in enumerate(METHODS):
            n_init = 3 if method == "auto" else None
            rs = states[k % len(states)]
            out[method] = LatentClassPMF(2, method, n_init=n_init, random_state=rs).fit(
                data
            )
    return out


@pytest.fixture(scope="module")
def model(fits):
    return fits["auto"]


def _posterior(n_draws=5):
    rng = np.random.default_rng(0)
    return az.from_dict(
        {
            "posterior": {
                "weights": rng.dirichlet([1, 1], size=(2, n_draws)),
                "A_x0": rng.dirichlet([1, 1, 1], size=(2, n_draws, 2)),
            },
            "sample_stats": {
                "diverging": rng.random((2, n_draws)) < 0.1,
                "tree_depth": rng.integers(1, 5, size=(2, n_draws)),
            },
            "log_likelihood": {"x": rng.normal(size=(2, n_draws, 7))},
        },
        dims={"weights": ["class"], "A_x0": ["class", "x0_category"]},
        coords={"x0_category": ["a", "b", "c"]},
    )


# --------------------------------------------------------------- exact comparison


def assert_same(a, b, where="value"):
    """``a`` and ``b`` equal in type and value, all the way down (NaN equal to NaN)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        np.testing.assert_array_equal(a, b, err_msg=where, strict=True)
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=where)
        for col in a.columns:
            assert_same(list(a[col]), list(b[col]), f"{where}[{col!r}]")
    elif isinstance(a, np.random.Generator):
        assert_same(a.bit_generator.state, b.bit_generator.state, where)
    elif isinstance(a, np.random.SeedSequence):
        for f in ("entropy", "spawn_key", "pool_size", "n_children_spawned"):
            assert getattr(a, f) == getattr(b, f), f"{where}.{f}"
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, float | np.floating):
        assert a == b or (np.isnan(a) and np.isnan(b)), f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def assert_same_fit(a, b):
    assert sorted(vars(a)) == sorted(vars(b))
    for name in vars(a):
        assert_same(getattr(a, name), getattr(b, name), name)


# --------------------------------------------------------------- exact round trips


@pytest.mark.parametrize("suffix", [".npz", ".nc"])
@pytest.mark.parametrize("method", list(METHODS))
def test_every_attribute_and_parameter_round_trips(fits, data, tmp_path, method, suffix):
    m = fits[method]
    back = bio.load(bio.save(m, tmp_path / f"fit{suffix}"))
    assert_same_fit(m, back)  # every parameter and fitted attribute, types included
    meta, _ = m._saved_state()
    assert '"repr"' not in json.dumps(meta["exact"])  # nothing kept only as text
    # independently: the loaded fit answers exactly like the original
    np.testing.assert_array_equal(back.score_samples(data), m.score_samples(data))
    np.testing.assert_array_equal(
        back.predict_proba(data, "x1"), m.predict_proba(data, "x1")
    )


def test_probe_attributes_survive_netcdf(model, tmp_path):
    # the probe's losses: loglik_ -> nan, n_init_best_, optima_, random_state
    back = bio.load(bio.save(model, tmp_path / "fit.nc"))
    assert back.loglik_ == model.loglik_ and np.isfinite(back.loglik_)
    assert back.n_init_best_ == model.n_init_best_ is not None
    pd.testing.assert_frame_equal(back.optima_, model.optima_)
    assert back.random_state == model.random_state


@pytest.mark.parametrize("suffix", [".npz", ".nc"])
def test_given_starts_and_generators_round_trip(data, tmp_path, suffix):
    rng = np.random.default_rng(11)
    starts = [
        (rng.dirichlet([1, 1]), [rng.dirichlet([1] * k, size=2).T for k in (3, 2, 4, 3)])
        for _ in range(2)
    ]
    m = LatentClassPMF(2, init=starts, random_state=rng, n_init=2, max_iter=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(data)
    back = bio.load(bio.save(m, tmp_path / f"fit{suffix}"))
    assert_same_fit(m, back)
    assert_same(m.get_params(), back.get_params())
    # the generator continues where the saved one stood
    assert back.random_state.random() == m.random_state.random()


def test_regression_keeps_a_generator_seed(tmp_path):
    rng = np.random.default_rng(1)
    z = rng.normal(size=200)
    h = (rng.random(200) < 1 / (1 + np.exp(-z))).astype(int)
    x = (rng.random((200, 4)) < np.where(h, 0.85, 0.15)[:, None]).astype(int)
    m = LatentClassRegression(2, n_init=2, random_state=np.random.default_rng(4))
    m.fit(x, covariates=z)
    back = LatentClassRegression.load(m.save(tmp_path / "fit.npz"))
    assert_same_fit(m, back)


def test_encoded_values_refuse_unknown_types():
    doc = {"__bayespmf__": "record", "type": "Popen", "fields": [["args", "ls"]]}
    with pytest.raises(bio.CorruptFileError, match=r"f\.npz .*unknown record type"):
        decode_value(doc, path="f.npz")
    gen = encode_value(np.random.default_rng(0))
    gen["state"]["items"][0][1] = "os.system"
    with pytest.raises(bio.CorruptFileError, match="unknown bit generator"):
        decode_value(gen)
    with pytest.raises(bio.CorruptFileError, match="dtype"):
        decode_value({"__bayespmf__": "array", "dtype": "|O", "shape": [1], "values": [1]})


# --------------------------------------------------------------- suffix vs format


def test_suffix_that_disagrees_with_the_format_is_an_error(model, tmp_path):
    with pytest.raises(ValueError, match=r"fit\.bin.*'\.bin'.*fit\.npz"):
        model.save(tmp_path / "fit.bin")
    with pytest.raises(ValueError, match=r"format='npz'.*other\.nc.*other\.npz"):
        bio.save(model, tmp_path / "other.nc", format="npz")
    with pytest.raises(ValueError, match=r"format='netcdf'.*x\.npz.*x\.nc"):
        bio.save(model, tmp_path / "x.npz", format="netcdf")
    reg = LatentClassRegression(2)
    with pytest.raises(ValueError, match=r"LatentClassRegression\.save.*fit\.bin"):
        reg.save(tmp_path / "fit.bin")
    assert os.listdir(tmp_path) == []  # nothing written, nothing renamed
    # the suffix case does not matter; the file written is the one named
    assert model.save(tmp_path / "FIT.NPZ") == tmp_path / "FIT.NPZ"
    assert os.listdir(tmp_path) == ["FIT.NPZ"]


# --------------------------------------------------------------- failed saves


class _DiskFull:
    """``open`` for the atomic writer: the disk fills after ``budget`` bytes."""

    def __init__(self, budget):
        self.budget, self.files = budget, []

    def __call__(self, fd, mode="r", **kwargs):
        fh = _FillingFile(fd, self.budget)
        self.files.append(fh)
        return fh


class _FillingFile:
    def __init__(self, fd, budget):
        self._fh = open(fd, "wb")
        self.budget = budget

    def write(self, data):
        room = self.budget - self._fh.tell()
        if len(data) > room:
            self._fh.write(bytes(memoryview(data)[: max(room, 0)]))
            self._fh.flush()  # the part that fitted is on disk
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    @property
    def closed(self):
        return self._fh.closed


def _save_case(kind, model, tmp_path):
    """(path, old object, new object, save function) for one kind of file."""
    old = LatentClassPMF.from_params(model.weights_, model.factors_)
    if kind == "npz":
        return tmp_path / "fit.npz", old, model, lambda o, p: o.save(p)
    if kind == "netcdf":
        return tmp_path / "fit.nc", old, model, bio.save
    return tmp_path / "post.nc", _posterior(3), _posterior(40), bio.save


@pytest.mark.parametrize("kind", ["npz", "netcdf", "posterior"])
def test_failed_save_leaves_the_old_file_intact(kind, model, tmp_path, monkeypatch):
    path, old, new, save = _save_case(kind, model, tmp_path)
    save(old, path)
    before = path.read_bytes()
    sizing = tmp_path.parent / f"{tmp_path.name}_sizing"
    sizing.mkdir()
    new_size = len(save(new, sizing / path.name).read_bytes())
    disk = _DiskFull(new_size // 2)
    monkeypatch.setattr(atomic, "open", disk, raising=False)
    with pytest.raises(OSError, match="No space left") as info:
        save(new, path)
    assert info.value.errno == errno.ENOSPC
    assert disk.files and all(f.closed for f in disk.files)  # handle closed, then removed
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left
    assert path.read_bytes() == before
    monkeypatch.undo()
    back = bio.load(path)  # the old file loads, and is the old object
    if kind == "posterior":
        xr.testing.assert_equal(back.posterior, old.posterior)
    else:
        np.testing.assert_array_equal(back.weights_, old.weights_)
    save(new, path)  # and the next save goes through
    assert path.read_bytes() != before


def test_interrupted_write_removes_the_temporary_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("old")
    os.chmod(path, 0o640)
    with pytest.raises(KeyboardInterrupt), atomic.atomic_write(path) as fh:
        fh.write(b"half")
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == ["notes.txt"] and path.read_text() == "old"
    with atomic.atomic_write(path, text=True) as fh:
        fh.write("new")
    assert path.read_text() == "new"
    assert (path.stat().st_mode & 0o777) == 0o640  # the replaced file's permissions


def test_netcdf_fallback_without_in_memory_writes(model, tmp_path, monkeypatch):
    # xarray < 2025.08 cannot write netCDF-4 to memory: the temporary file path is used
    monkeypatch.setattr(atomic, "_netcdf_bytes", lambda obj, engine: None)
    path = bio.save(model, tmp_path / "fit.nc")
    assert_same_fit(model, bio.load(path))
    before = path.read_bytes()

    def dies_midway(self, target, **kwargs):
        Path(target).write_bytes(before[: len(before) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", dies_midway)
    with pytest.raises(OSError, match="No space"):
        bio.save(model, path)
    assert os.listdir(tmp_path) == ["fit.nc"] and path.read_bytes() == before


_CHILD = textwrap.dedent(
    """
    import errno, gc, os, resource, signal, sys, warnings
    import numpy as np
    sys.path.insert(0, {tests!r})
    from test_faults_io import _posterior
    from bayespmf import LatentClassPMF, io as bio
    from bayespmf.datasets import make_latent_class

    warnings.simplefilter("ignore")
    os.chdir({folder!r})
    data, _ = make_latent_class(300, [3, 2, 4], n_components=2, random_state=0)
    new = LatentClassPMF(2, n_init=3, random_state=0).fit(data)
    old = LatentClassPMF.from_params(new.weights_, new.factors_)
    cases = [
        ("fit.nc", old, new, bio.save),
        ("fit.npz", old, new, lambda o, p: o.save(p)),
        ("post.nc", _posterior(3), _posterior(60), bio.save),
    ]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
    expected = set()
    for name, o, n, save in cases:
        expected.add(name)
        size = os.path.getsize(save(o, name))
        before = open(name, "rb").read()
        assert os.path.getsize(save(n, "sizing_" + name)) > size + 512
        os.remove("sizing_" + name)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 512, resource.RLIM_INFINITY))
        try:
            save(n, name)
        except OSError as err:
            assert err.errno == errno.EFBIG, err
        else:
            raise AssertionError("the save did not fail")
        finally:
            resource.setrlimit(
                resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            )
        gc.collect()
        assert open(name, "rb").read() == before
        assert set(os.listdir(".")) == expected  # no temporary file left
        bio.load(name)
        print("OK", name, flush=True)
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ (Linux)")
def test_file_size_limit_during_save_keeps_old_file_and_process(tmp_path):
    # the probe saw a segmentation fault after a failed netCDF write: run it in a child
    folder = tmp_path / "files"
    folder.mkdir()
    script = _CHILD.format(tests=str(Path(__file__).parent), folder=str(folder))
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # -11 was the segfault
    assert proc.stdout.split("\n")[:3] == ["OK fit.nc", "OK fit.npz", "OK post.nc"]


# --------------------------------------------------------------- bayespmf run


def _spec(tmp_path):
    p = tmp_path / "spec.toml"
    p.write_text(
        'seed = 1\n[data]\nname = "votes"\n[fit]\nn_components = 2\nmethod = "em"\n'
        "[output]\nfigures = false\n"
    )
    return p


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _fail_estimate_nc(monkeypatch):
    import bayespmf.apps.run as run

    def dies_midway(obj, path, **kwargs):
        Path(path).write_bytes(b"\x89HDF\r\n\x1a\n half of a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run, "write_netcdf", dies_midway)


def _siblings(out):
    """What a run left beside its output folder (staging or old folders: nothing)."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith("."))


def test_failed_run_leaves_no_result_files(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    _fail_estimate_nc(monkeypatch)  # after summary.csv and fit.npz were written
    assert main(["run", str(_spec(tmp_path)), "--out", str(out), "--no-progress"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert not out.exists()  # nothing of the failed run
    assert _siblings(out) == []  # its staging folder removed


def test_failed_run_keeps_the_previous_complete_run(tmp_path, monkeypatch):
    out = tmp_path / "out"
    spec = _spec(tmp_path)
    assert main(["run", str(spec), "--out", str(out), "--no-progress"]) == 0
    done = _snapshot(out)
    listed = json.loads(done["results.json"])["files"]
    assert sorted(listed) == sorted(done)  # the marker lists exactly the run's files
    _fail_estimate_nc(monkeypatch)
    assert main(["run", str(spec), "--out", str(out), "--no-progress"]) == 1
    assert _snapshot(out) == done  # byte for byte
    assert _siblings(out) == []  # no staging folder left


def test_run_failing_while_moving_results_keeps_the_previous_run(tmp_path, monkeypatch):
    out = tmp_path / "out"
    spec = _spec(tmp_path)
    assert main(["run", str(spec), "--out", str(out), "--no-progress"]) == 0
    done = _snapshot(out)
    rename = os.rename

    def fails_on_the_new_folder(src, dst):
        if Path(src).name.startswith(".out.partial-"):  # the old folder is aside now
            raise OSError(errno.EIO, "Input/output error")
        return rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", fails_on_the_new_folder)
    assert main(["run", str(spec), "--out", str(out), "--no-progress"]) == 1
    assert _snapshot(out) == done  # the previous run renamed back, whole
    assert _siblings(out) == []


# --------------------------------------------------------------- damaged files


def _npz_members(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _rewrite_npz(path, members, *, checksum):
    members = {k: v for k, v in members.items() if k != "checksum"}
    if checksum:
        members["checksum"] = np.array(arrays_sha256(members))
    np.savez(path, **members)


def test_checksum_detects_changes_that_stay_valid(model, tmp_path):
    # rows of a factor swapped: still column-stochastic, so only the checksum sees it
    npz = model.save(tmp_path / "fit.npz")
    members = _npz_members(npz)
    members["factor_2"] = members["factor_2"][::-1].copy()
    np.savez(npz, **members)  # the recorded checksum kept
    with pytest.raises(bio.CorruptFileError, match=r"fit\.npz is damaged.*checksum"):
        bio.load(npz)
    nc = bio.save(model, tmp_path / "fit.nc")
    with h5py.File(nc, "r+") as f:
        f["factor_2"][...] = f["factor_2"][...][::-1]
    with pytest.raises(bio.CorruptFileError, match=r"fit\.nc is damaged.*checksum"):
        bio.load(nc)
    post = bio.save(_posterior(), tmp_path / "post.nc")
    with h5py.File(post, "r+") as f:
        w = f["posterior/weights"][...]
        w[0, 0] = w[0, 0, ::-1]  # one draw's classes swapped: still on the simplex
        f["posterior/weights"][...] = w
    with pytest.raises(bio.CorruptFileError, match=r"post\.nc is damaged.*checksum"):
        bio.load(post)


def test_flipped_byte_is_refused(model, tmp_path):
    nc = bio.save(model, tmp_path / "fit.nc")
    raw = bytearray(nc.read_bytes())
    with h5py.File(nc, "r") as f:  # a byte inside factor_0's data
        offset = f["factor_0"].id.get_offset()
    raw[offset + 3] ^= 0x40
    nc.write_bytes(bytes(raw))
    with pytest.raises(DataValidationError, match=r"fit\.nc"):
        bio.load(nc)


#: Damage of the probe, each with what the error must say.
_DAMAGE = [
    ("weights", lambda m: m | {"weights": np.array([2.0, -1.0])}, r"'weights'"),
    (
        "nan factor",
        lambda m: m | {"factor_0": np.where(np.eye(3, 2) > 0, np.nan, m["factor_0"])},
        r"'factors\[0\]' must be finite",
    ),
    (
        "wrong rank",
        lambda m: m | {"factor_1": np.full((2, 3), 0.5)},
        r"'factors\[1\]' must have shape \(2, 2\)",
    ),
    ("wrong ndim", lambda m: m | {"factor_1": np.full(2, 0.5)}, r"'factors\[1\]'"),
    ("missing", lambda m: {k: v for k, v in m.items() if k != "weights"}, "missing"),
]


def _legacy_npz(members, **meta_changes):
    """The npz of bayespmf <= 0.2: no checksum, no exact metadata."""
    meta = json.loads(str(members["meta"]))
    meta.pop("exact")
    meta |= meta_changes
    return {k: v for k, v in members.items() if k != "checksum"} | {
        "meta": np.array(json.dumps(meta))
    }


@pytest.mark.parametrize(("case", "damage", "match"), _DAMAGE, ids=[d[0] for d in _DAMAGE])
@pytest.mark.parametrize("checksum", [False, True], ids=["legacy", "checksum-recomputed"])
def test_invalid_content_is_refused_npz(model, tmp_path, case, damage, match, checksum):
    path = model.save(tmp_path / "fit.npz")
    members = damage(_npz_members(path))
    _rewrite_npz(path, members if checksum else _legacy_npz(members), checksum=checksum)
    with pytest.raises(
        bio.CorruptFileError, match=rf"fit\.npz does not hold a valid.*{match}"
    ):
        bio.load(path)


@pytest.mark.parametrize(
    ("case", "damage", "match"), _DAMAGE[:3], ids=["w", "nan", "n_components"]
)
def test_invalid_content_is_refused_netcdf_legacy(model, tmp_path, case, damage, match):
    path = bio.save(model, tmp_path / "fit.nc")
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        ds = ds.load()
    arrays = damage({k: ds[k].values for k in ("weights", "factor_0", "factor_1")})
    legacy = ds.drop_vars(["factor_0", "factor_1", "weights"])
    for k, a in arrays.items():
        same = a.shape == ds[k].shape
        legacy[k] = (ds[k].dims if same else (f"{k}_rows", f"{k}_cols"), a)
    legacy.attrs = {k: v for k, v in ds.attrs.items() if k not in ("checksum", "exact")}
    other = tmp_path / "legacy.nc"
    legacy.to_netcdf(other, engine="h5netcdf")
    with pytest.raises(bio.CorruptFileError, match=rf"legacy\.nc does not hold.*{match}"):
        bio.load(other)


def test_labels_that_disagree_with_the_factors_are_refused(model, tmp_path):
    path = model.save(tmp_path / "fit.npz")
    members = _legacy_npz(_npz_members(path), categories=[["a", "b"], ["a", "b"]] * 2)
    _rewrite_npz(path, members, checksum=False)
    with pytest.raises(bio.CorruptFileError, match="factor 0 has 3 categories but 2"):
        bio.load(path)
    members = _legacy_npz(_npz_members(model.save(path)), names=["x0"])
    _rewrite_npz(path, members, checksum=False)
    with pytest.raises(bio.CorruptFileError, match="4 factors but the variable names"):
        bio.load(path)


def test_invalid_posterior_draws_are_refused(tmp_path):
    post = _posterior()
    post.posterior["weights"][0, 0] = [2.0, -1.0]
    path = bio.save(post, tmp_path / "post.nc")  # a checksum of the bad draws
    with pytest.raises(bio.CorruptFileError, match=r"posterior/weights.*summing to one"):
        bio.load(path)


# --------------------------------------------------------------- older files


def test_files_without_checksum_still_load(model, tmp_path):
    path = model.save(tmp_path / "fit.npz")
    _rewrite_npz(path, _legacy_npz(_npz_members(path)), checksum=False)
    back = bio.load(path)  # validated, not verified
    np.testing.assert_array_equal(back.weights_, model.weights_)
    assert back.loglik_ == model.loglik_ and back.n_init_best_ == model.n_init_best_
    pd.testing.assert_frame_equal(back.optima_, model.optima_)
    assert back.info_ == {}  # not kept before; now it is


def test_legacy_posterior_resaved_verifies(tmp_path):
    old = bio.load(LEGACY_POSTERIOR)  # no checksum: validated only
    path = bio.save(old, tmp_path / "post.nc")
    with xr.open_dataset(path, engine="h5netcdf") as root:
        assert len(root.attrs["checksum"]) == 64
    back = bio.load(path)  # verified
    for group in old.children:
        xr.testing.assert_identical(back[group].to_dataset(), old[group].to_dataset())
