"""Process settings applied once, when :mod:`bayespmf` is imported.

Two notices used to reach every user although none of them could act on them:

* PyTensor's "could not link to a BLAS installation" ``UserWarning`` (and, for the
  ``BatchedDot`` op, its "Using NumPy C-API based implementation for BLAS functions"
  log line). The cause is real: a pip-installed PyTensor looks for ``libblas``,
  ``libopenblas`` or MKL in the compiler's library directories, finds none on a machine
  without a system BLAS, and then runs matrix products (``Dot22``, ``Gemv``, ``Ger``)
  in Python instead of C. The fix is to give it one: the ``scipy-openblas32`` wheel (a
  dependency on Linux) ships OpenBLAS as a shared library with LP64 (32-bit integer)
  BLAS, the integer width PyTensor's C code uses. The wheel prefixes every symbol
  (``scipy_dgemm_`` for ``dgemm_``) so that it never clashes with the copies NumPy and
  SciPy bundle, so the flags also rename, by ``-D`` macros, the Fortran routines
  PyTensor's C code calls. A user's own ``blas__ldflags`` (``PYTENSOR_FLAGS``,
  ``.pytensorrc`` or ``pytensor.config`` before this import) always wins, and without
  the wheel nothing changes.
* ArviZ 0.23's "ArviZ is undergoing a major refactor" ``FutureWarning``, printed on the
  first import of each day. It announces ArviZ 1.x, which needs Python >= 3.12 and which
  PyMC 5 (pinned here) does not accept, so a bayespmf user cannot migrate. ArviZ offers
  no switch other than installing its three 1.x preview packages, so this message, and
  only this message, from the ``arviz`` module is filtered; every other
  ``FutureWarning`` is shown as before.

Nothing here imports PyMC or ArviZ: both stay lazy (importing them costs about 2 s).

:func:`n_cpus` is the one count of the CPUs this process may use, read by every
parallel default (sampler cores, task runs).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import warnings
from pathlib import Path

__all__ = ["configure", "configure_pytensor_blas", "n_cpus", "openblas_ldflags"]

#: Fortran BLAS routines that PyTensor 2.38's C code calls by name (``Dot22``/``Gemm``:
#: gemm; ``CGemv``: gemv and dot; ``CGer``: ger; sparse ``Usmm``: axpy), in single and
#: double precision. tests/test_runtime.py checks the installed PyTensor against this
#: list, so a PyTensor that calls another routine fails there, not at a user's link.
BLAS_ROUTINES = tuple(
    f"{p}{name}_" for name in ("gemm", "gemv", "ger", "dot", "axpy") for p in "sd"
)

#: The ArviZ notice silenced by :func:`configure` (a regular expression for the start of
#: the message; ArviZ begins it with a newline).
ARVIZ_REFACTOR_NOTICE = r"\s*ArviZ is undergoing a major refactor"


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
        # exists once the value was set in code or PyTensor ran its own (slow, 0.5 s)
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


def _silence_arviz_refactor_notice() -> None:
    """Filter ArviZ 0.23's daily refactor notice, and nothing else."""
    warnings.filterwarnings(
        "ignore", message=ARVIZ_REFACTOR_NOTICE, category=FutureWarning, module="arviz"
    )


def configure() -> None:
    """Apply the settings described in the module docstring (once per process)."""
    configure_pytensor_blas()
    _silence_arviz_refactor_notice()


configure()
