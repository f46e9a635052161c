"""Process settings applied once, when :mod:`bayespmf` is imported.

PyTensor 3 compiles with numba by default; its C backend (``linker="cvm"``, e.g.
``backend="pytensor", mode=...`` of :func:`bayespmf.kernels.em.build_em_kernel`) is
still there for those who ask for it. The C backend's matrix products (``Dot22``,
``Gemv``, ``Ger``) call a Fortran BLAS, and a pip-installed PyTensor looks for
``libblas``, ``libopenblas`` or MKL in the compiler's library directories; on a machine
without a system BLAS it finds none, warns ("could not link to a BLAS installation")
and runs those products in Python. The numba backend never reads these flags (checked
with PyTensor 3.3: compiling and running PyMC's logp/dlogp and a ``dot`` in the
default mode leaves ``blas__ldflags`` unread), so nothing here matters to bayespmf's
defaults.

For the C backend, the ``scipy-openblas32`` wheel (the ``c-backend`` extra) ships
OpenBLAS as a shared library with LP64 (32-bit integer) BLAS, the integer width
PyTensor's C code uses. The wheel prefixes every symbol (``scipy_dgemm_`` for
``dgemm_``) so that it never clashes with the copies NumPy and SciPy bundle, so the
flags also rename, by ``-D`` macros, the Fortran routines PyTensor's C code calls. When
the wheel is installed, :func:`configure` points PyTensor at it; a user's own
``blas__ldflags`` (``PYTENSOR_FLAGS``, ``.pytensorrc`` or ``pytensor.config`` before
this import) always wins, and without the wheel nothing changes.

Nothing here imports PyMC or ArviZ: both stay lazy (importing them is slow).

:func:`n_cpus` is the one count of the CPUs this process may use, read by every
parallel default (sampler cores, task runs).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

__all__ = ["configure", "configure_pytensor_blas", "n_cpus", "openblas_ldflags"]

#: Fortran BLAS routines that PyTensor's C code calls by name (``Dot22``/``Gemm``:
#: gemm; ``CGemv``: gemv and dot; ``CGer``: ger; sparse ``Usmm``: axpy), in single and
#: double precision. tests/test_runtime.py checks the installed PyTensor against this
#: list, so a PyTensor that calls another routine fails there, not at a user's link.
BLAS_ROUTINES = tuple(
    f"{p}{name}_" for name in ("gemm", "gemv", "ger", "dot", "axpy") for p in "sd"
)


def openblas_ldflags() -> str | None:
    """PyTensor ``blas__ldflags`` for the OpenBLAS of the ``scipy-openblas32`` wheel.

    The wheel is located without importing it (importing it loads the library), from its
    pkg-config file, which names the symbol prefix.

    Returns
    -------
    str or None
        Link flags (``-L<dir> -l<lib>``, then one ``-D<routine>=<prefix><routine>`` per
        entry of :data:`BLAS_ROUTINES`), or None when the wheel or its library is not
        installed or the platform is not Linux (on macOS PyTensor finds Accelerate
        itself).

    Examples
    --------
    >>> flags = openblas_ldflags()
    >>> flags is None or "-Ddgemm_=" in flags
    True
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        spec = importlib.util.find_spec("scipy_openblas32")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    lib_dir = Path(spec.origin).parent / "lib"
    libs = sorted(lib_dir.glob("libscipy_openblas*.so"))
    pc_files = sorted((lib_dir / "pkgconfig").glob("*.pc"))
    if not libs or not pc_files:
        return None
    try:
        pc_text = pc_files[0].read_text(encoding="utf-8")
    except OSError:
        return None
    # "Cflags: ... -DBLAS_SYMBOL_PREFIX=scipy_": the prefix the wheel's symbols carry.
    match = re.search(r"-DBLAS_SYMBOL_PREFIX=(\w*)", pc_text)
    prefix = match.group(1) if match else ""
    if "USE_64BITINT=1" in pc_text or " " in str(lib_dir):
        # ILP64 would pass 64-bit integers to PyTensor's 32-bit ones; PyTensor splits
        # blas__ldflags on whitespace.
        return None
    lib_name = libs[0].name[len("lib") : -len(".so")]
    renames = " ".join(f"-D{r}={prefix}{r}" for r in BLAS_ROUTINES) if prefix else ""
    return f"-L{lib_dir} -l{lib_name} {renames}".strip()


def configure_pytensor_blas() -> bool:
    """Point PyTensor at the wheel's OpenBLAS unless the user chose BLAS flags.

    Returns
    -------
    bool
        True when ``pytensor.config.blas__ldflags`` was set here; False when the user
        set it (environment, ``.pytensorrc`` or in code), when PyTensor already
        computed its own value in this process, when there is no C compiler, or when
        :func:`openblas_ldflags` found no library.
    """
    import pytensor

    config = pytensor.config
    try:
        param = type(config).__dict__["blas__ldflags"]
        # is_default is False for a value from PYTENSOR_FLAGS or .pytensorrc; ``val``
        # exists once the value was set in code or PyTensor ran its own (slow)
        # detection, after which changing it would mix two BLAS setups in one process.
        user_or_used = not param.is_default or "val" in vars(param)
    except (KeyError, AttributeError):
        return False
    if user_or_used or not config.cxx:
        return False
    flags = openblas_ldflags()
    if flags is None:
        return False
    config.blas__ldflags = flags
    return True


def n_cpus() -> int:
    """Number of CPUs this process may use (its affinity mask, where the OS has one).

    ``os.cpu_count()`` counts the machine's CPUs, which overstates what a process
    confined by a container or ``taskset`` can use.

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> n_cpus() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def configure() -> None:
    """Apply the settings described in the module docstring (once per process)."""
    configure_pytensor_blas()


configure()
