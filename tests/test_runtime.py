"""bayespmf._runtime: PyTensor's C backend gets a BLAS; the default numba one needs none.

Each check runs Python in a subprocess, because the setting is made once per process at
import and a test process has long since imported bayespmf and PyTensor.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bayespmf import _runtime

#: Text of PyTensor's BLAS warning and its NumPy C-API fallback log line.
NOTICES = ("could not link to a BLAS", "NumPy C-API based implementation")

needs_wheel = pytest.mark.skipif(
    _runtime.openblas_ldflags() is None,
    reason="no scipy-openblas32 library on this platform (PyTensor keeps its own BLAS)",
)


def _run(
    code: str, tmp_path: Path, pytensor_flags: str = ""
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with warnings shown and a fresh ArviZ stamp.

    ArviZ prints its notice once a day per user cache directory, so a new
    ``XDG_CACHE_HOME`` makes the notice due. The PyTensor compile cache stays the one
    this process uses (``base_compiledir`` from ``PYTENSOR_FLAGS``), so that the small
    graphs below compile once per machine; any other PyTensor flag is dropped.
    """
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONWARNINGS"}}
    keep = [
        f
        for f in os.environ.get("PYTENSOR_FLAGS", "").split(",")
        if f.strip().startswith("base_compiledir=")
    ]
    env["PYTENSOR_FLAGS"] = ",".join([*keep, pytensor_flags] if pytensor_flags else keep)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_default_numba_backend_never_reads_the_blas_flags(tmp_path):
    # Without bayespmf: PyTensor's default mode (numba) compiles and runs a model's
    # logp/dlogp and a matrix product without looking up a C BLAS, so it cannot warn.
    code = (
        "import numpy as np, pymc as pm, pytensor, pytensor.tensor as pt\n"
        "param = type(pytensor.config).__dict__['blas__ldflags']\n"
        "a = pt.dmatrix(); pytensor.function([a], a @ a)(np.eye(3))\n"
        "with pm.Model() as m:\n"
        "    x = pm.Normal('x', shape=3); pm.Normal('y', x.sum(), observed=1.0)\n"
        "m.compile_dlogp()(m.initial_point())\n"
        "print(pytensor.config.linker, 'val' in vars(param))\n"
    )
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["auto", "False"]
    for notice in NOTICES:
        assert notice not in out.stderr


def test_import_shows_neither_notice(tmp_path):
    code = (
        "import bayespmf, pymc, arviz, pytensor\n"
        # reading the flags runs PyTensor's own BLAS search when nobody set them
        "print(repr(pytensor.config.blas__ldflags))\n"
    )
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    for notice in NOTICES:
        assert notice not in out.stderr
    if _runtime.openblas_ldflags() is not None:
        assert "-Ddgemm_=scipy_dgemm_" in out.stdout


@pytest.mark.slow
@needs_wheel
def test_blas_graphs_compile_link_and_agree_with_numpy(tmp_path):
    code = """
import numpy as np
import bayespmf, pytensor, pytensor.tensor as pt
from pytensor.compile.mode import Mode
A, B, x = pt.dmatrix("A"), pt.dmatrix("B"), pt.dvector("x")
c_mode = Mode(linker="cvm", optimizer="fast_run")  # the C backend (not the default)
f = pytensor.function([A, B, x], [A @ B, A @ x, A + pt.outer(x, x)], mode=c_mode)
ops = sorted({type(n.op).__name__ for n in f.maker.fgraph.apply_nodes})
rng = np.random.default_rng(0)
a, b, v = rng.random((20, 20)), rng.random((20, 20)), rng.random(20)
got = f(a, b, v)
ok = [np.allclose(got[0], a @ b), np.allclose(got[1], a @ v),
      np.allclose(got[2], a + np.outer(v, v))]
print(ops, ok)
"""
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    # the C op PyTensor uses only when it has BLAS flags (Gemv otherwise); PyTensor 3.3
    # writes A + outer(x, x) as an Elemwise, not as CGer
    assert "CGemv" in out.stdout
    assert "Dot22" in out.stdout
    assert "[True, True, True]" in out.stdout
    for notice in NOTICES:
        assert notice not in out.stderr


@pytest.mark.parametrize("user_flags", ["", "-L/nonexistent -lmyblas"])
def test_user_pytensor_flags_win(tmp_path, user_flags):
    code = "import bayespmf, pytensor\nprint(repr(pytensor.config.blas__ldflags))"
    out = _run(code, tmp_path, pytensor_flags=f"blas__ldflags={user_flags}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr(user_flags)
    assert "could not link to a BLAS" not in out.stderr


def test_flags_set_in_code_before_import_win(tmp_path):
    code = (
        "import pytensor\n"
        "pytensor.config.blas__ldflags = '-lmyblas'\n"
        "import bayespmf\n"
        "print(repr(pytensor.config.blas__ldflags))\n"
    )
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr("-lmyblas")


def test_missing_wheel_falls_back_silently(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert _runtime.openblas_ldflags() is None


@needs_wheel
def test_flags_name_an_existing_library():
    flags = _runtime.openblas_ldflags().split()
    lib_dir = Path(next(f[2:] for f in flags if f.startswith("-L")))
    lib = next(f[2:] for f in flags if f.startswith("-l"))
    assert (lib_dir / f"lib{lib}.so").is_file()
    renamed = {f[2:].split("=")[0] for f in flags if f.startswith("-D")}
    assert renamed == set(_runtime.BLAS_ROUTINES)


def test_routine_list_covers_what_pytensor_calls():
    # Every Fortran BLAS routine that the installed PyTensor's C code calls by name must
    # be renamed to the wheel's prefixed symbol, or a BLAS op would fail to load.
    import pytensor

    root = Path(pytensor.__file__).parent
    call = re.compile(
        r"""(?:\b|["'])([sdcz](?:gemm|gemv|ger[uc]?|dot[uc]?|axpy|scal|copy|swap|nrm2"""
        r"""|asum|trsm|trmv|symm|syrk|syr2k|rotm?g?|i?amax)_)(?:\s*\(|["'])"""
    )
    called = set()
    for path in root.rglob("*"):
        # the header only declares; alt_blas_* is the fallback used without BLAS
        if path.suffix not in {".py", ".c", ".h", ".cpp"} or path.name == "blas_headers.py":
            continue
        if path.name.startswith("alt_blas"):
            continue
        called.update(call.findall(path.read_text(encoding="utf-8", errors="ignore")))
    assert {"dgemm_", "dgemv_"} <= called  # the scan works
    assert called <= set(_runtime.BLAS_ROUTINES)
