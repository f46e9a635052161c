"""Atomic file writes: a save either completes or leaves the old file as it was.

Saved estimates and posteriors (:mod:`bayespmf.io`, the estimators' ``save``) and
``results.json`` of ``bayespmf run`` go through :func:`atomic_write`: the content is
written to a temporary file in the target's folder, flushed and ``fsync``-ed, and only
then renamed over the target with :func:`os.replace` (atomic on POSIX and Windows within
one file system). On any exception (a full disk, a file-size limit, an interrupt) the
temporary file is closed and removed and the exception re-raised: the old file stays
intact and loadable, and no half-written file is left behind. The temporary files are
named ``.<name>.<random>.tmp``. ``bayespmf run`` writes a whole run into a staging
folder beside its output folder and moves it into place with :func:`replace_folder`
(:mod:`bayespmf.apps.run`).

netCDF-4 files are assembled in memory by :func:`write_netcdf` and then written like any
other bytes, so that HDF5 never meets a failing disk. When an HDF5 write to a file
fails (``EFBIG``, ``ENOSPC``), h5py and h5netcdf go on using the half-written file:
h5netcdf deletes the half-created variable, or, after h5py's close raised part way, its
``__del__`` flushes the half-closed file again; either crashes the interpreter with a
segmentation fault (h5py 3.16 / HDF5 2.0, h5netcdf 1.8, xarray 2026.9).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "atomic_write", "replace_file", "replace_folder", "write_netcdf"]

#: First bytes of an HDF5 (netCDF-4) file.
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX); a no-op where folders cannot open."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _keep_mode(tmp: Path, target: Path) -> None:
    """Give ``tmp`` the permission bits of an existing ``target`` (the file it replaces)."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return  # no old file: the new one was created with 0o666 & ~umask
    with contextlib.suppress(OSError):
        os.chmod(tmp, mode)


def replace_file(src, dst) -> Path:
    """``fsync`` the finished file ``src``, then rename it over ``dst`` atomically.

    Parameters
    ----------
    src, dst : str or os.PathLike
        Both in the same folder (same file system), as :func:`os.replace` requires.

    Returns
    -------
    pathlib.Path
        ``dst``.
    """
    src, dst = Path(src), Path(dst)
    fd = os.open(src, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _keep_mode(src, dst)
    os.replace(src, dst)
    _fsync_dir(dst.parent)
    return dst


def replace_folder(src, dst) -> Path:
    """Put the finished folder ``src`` in the place of ``dst`` (replaced, if it exists).

    Every file of ``src`` and ``src`` itself are ``fsync``-ed; then an existing
    ``dst`` is renamed aside (``.<name>.old-<random>``), ``src`` renamed to ``dst``
    and the old folder removed. Should the second rename fail, the old folder is
    renamed back, so ``dst`` is either the old folder or the new one, whole. (POSIX
    has no atomic exchange of two folders: a process killed between the renames
    leaves no ``dst``, with the old and the new folder complete beside it.)

    Parameters
    ----------
    src, dst : str or os.PathLike
        Folders in the same parent folder (one file system).

    Returns
    -------
    pathlib.Path
        ``dst``.

    Examples
    --------
    >>> import tempfile
    >>> top = Path(tempfile.mkdtemp())
    >>> (top / "new").mkdir(); _ = (top / "new" / "a.txt").write_text("new")
    >>> (top / "out").mkdir(); _ = (top / "out" / "b.txt").write_text("old")
    >>> _ = replace_folder(top / "new", top / "out")
    >>> sorted(p.name for p in top.iterdir()), os.listdir(top / "out")
    (['out'], ['a.txt'])
    """
    src, dst = Path(src), Path(dst)
    for folder, _dirs, files in os.walk(src):
        for name in files:
            fd = os.open(Path(folder) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))
    old = None
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old-{secrets.token_hex(6)}")
        os.rename(dst, old)
    try:
        os.rename(src, dst)
    except BaseException:
        if old is not None:
            os.rename(old, dst)  # the previous folder back in its place
        raise
    _fsync_dir(dst.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return dst


@contextlib.contextmanager
def atomic_write(path, *, text: bool = False, encoding: str = "utf-8") -> Iterator:
    """Open a temporary file beside ``path``; on success move it over ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The file to (re)write. Its folder must exist.
    text : bool, default False
        Yield a text file (``encoding``, ``newline=""``) instead of a binary one.
    encoding : str, default "utf-8"

    Yields
    ------
    file object
        Write the whole content to it. When the ``with`` block ends normally, it is
        flushed, ``fsync``-ed, closed and renamed over ``path``; when the block (or the
        flush) raises, it is closed and removed, ``path`` is left untouched, and the
        exception propagates.

    Examples
    --------
    >>> import os, tempfile
    >>> p = Path(tempfile.mkdtemp()) / "notes.txt"
    >>> with atomic_write(p, text=True) as fh:
    ...     _ = fh.write("first")
    >>> try:
    ...     with atomic_write(p, text=True) as fh:
    ...         _ = fh.write("half of the second")
    ...         raise OSError("disk full")
    ... except OSError:
    ...     pass
    >>> p.read_text(), os.listdir(p.parent)
    ('first', ['notes.txt'])
    """
    path = Path(path)
    tmp = _temp_name(path)
    # O_EXCL: never write through a file (or link) that already exists; 0o666 & ~umask
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666)
    try:
        fh = open(fd, "w", encoding=encoding, newline="") if text else open(fd, "wb")
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    try:
        with fh:  # closed (even when the flush fails) before the file is removed
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _keep_mode(tmp, path)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """A temporary path beside ``path`` for writers that want a file name.

    The writer creates the file at the yielded path; when the ``with`` block ends
    normally it is ``fsync``-ed and renamed over ``path`` (:func:`replace_file`); when
    it raises, whatever the writer left there is removed and the exception propagates.
    The writer must have closed the file when the block ends.
    """
    path = Path(path)
    tmp = _temp_name(path)
    try:
        yield tmp
        replace_file(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _netcdf_bytes(obj, engine: str):
    """``obj`` (an xarray Dataset or DataTree) as netCDF-4 bytes, or None if unsupported.

    xarray writes netCDF-4 to a file object from 2025.08 on; older versions refuse (or
    fall back to netCDF-3 with scipy), and get None.
    """
    buf = io.BytesIO()
    try:
        obj.to_netcdf(buf, engine=engine, mode="w")
    except (TypeError, ValueError, NotImplementedError):
        # an xarray that cannot write netCDF-4 to a file object; a genuine error
        # (a value netCDF cannot hold) raises again from the file-based writer
        return None
    view = buf.getbuffer()
    return view if bytes(view[: len(HDF5_MAGIC)]) == HDF5_MAGIC else None


def write_netcdf(obj, path, *, engine: str = "h5netcdf") -> Path:
    """Write an xarray ``Dataset`` or ``DataTree`` to ``path`` as netCDF-4, atomically.

    The file is assembled in memory (HDF5 never writes to the disk, so a disk failure
    cannot leave HDF5 in a state that crashes the process) and written with
    :func:`atomic_write`: on failure the old file is intact and the process goes on.
    The price is one in-memory copy of the file while it is written. With xarray older
    than 2025.08 (no netCDF-4 in memory) HDF5 writes a temporary file beside ``path``
    instead, which is renamed over it when complete.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataTree
    path : str or os.PathLike
    engine : str, default "h5netcdf"

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    data = _netcdf_bytes(obj, engine)
    if data is not None:
        try:
            with atomic_write(path) as fh:
                fh.write(data)
        finally:
            data.release()  # a BytesIO with a live view cannot close when collected
        return path
    # xarray < 2025.08 cannot write netCDF-4 to memory: HDF5 writes the temporary file
    # itself, so a disk failure can still crash the process there (see the module
    # docstring); the old file is left intact by any error that lets Python go on
    with atomic_path(path) as tmp:
        obj.to_netcdf(tmp, engine=engine, mode="w")
    return path
