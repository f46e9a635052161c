"""Reading ``.npz`` files without ever unpickling them (below :mod:`bayespmf.io`).

The estimators load their saved fits through :func:`load_npz_safely`; living here, it
needs nothing from :mod:`bayespmf.io` (which imports the estimators), so imports flow
one way. :mod:`bayespmf.io` re-exports both public names.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from bayespmf._validation import DataValidationError

__all__ = [
    "ZIP_MAGIC",
    "UnsafeFileError",
    "check_npz_members",
    "load_fit",
    "load_npz_safely",
    "save_fit",
]

#: The first bytes of a zip archive (an npz file).
ZIP_MAGIC = b"PK\x03\x04"


class UnsafeFileError(DataValidationError):
    """A file that could only be read by unpickling (executing) its contents."""


def load_npz_safely(path, *, what: str) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz`` file without ever unpickling (running) its data.

    ``numpy.load`` answers a file it cannot read without pickle with advice to load it
    "unsafely"; this answers with what the file is not, and refuses. The zip container
    and each member's ``.npy`` header are checked first, so an object (pickled) array
    is refused before any array data is read.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.npz`` file.
    what : str
        What the file should hold, used in messages as ``"<path> is not <what>: ..."``,
        e.g. ``"a LatentClassPMF fit saved by bayespmf"``.

    Returns
    -------
    dict of str to numpy.ndarray
        Every member by name (as ``numpy.load(path).files`` names them), read in full;
        the file is closed on return.

    Raises
    ------
    FileNotFoundError
        No such file.
    UnsafeFileError
        A member holds an object array (only unpickling could read it), or the file
        is a Python pickle. A :class:`~bayespmf.DataValidationError`.
    DataValidationError
        Anything else that is not an npz archive of plain arrays: an empty or garbage
        file, a single ``.npy`` array, a damaged zip, a member that is not an array.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "fit.npz")
    >>> np.savez(path, weights=np.array([0.4, 0.6]))
    >>> load_npz_safely(path, what="a saved fit")["weights"]
    array([0.4, 0.6])
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(b"not an archive")
    >>> load_npz_safely(path, what="a saved fit")
    Traceback (most recent call last):
    ...
    bayespmf._validation.DataValidationError: ... is not a saved fit: ...
    """
    path = Path(path)
    check_npz_members(path, what)
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as err:
        if isinstance(err, FileNotFoundError | DataValidationError):
            raise
        if "pickle" in str(err):  # never pass on numpy's advice to load unsafely
            raise UnsafeFileError(
                f"{path} is not {what}: it could not be read without unpickling "
                "(running) its data; refusing to load."
            ) from None
        raise DataValidationError(f"{path} is not {what}: not a valid npz file.") from err


def check_npz_members(path: Path, what: str) -> None:
    """Check the container, then read every member's ``.npy`` header (not its data).

    Refuses a non-zip file (and says what it looks like) and object dtypes, so that
    ``numpy.load`` with ``allow_pickle=False`` never meets either.
    """
    if not path.exists():
        raise FileNotFoundError(f"No such file: {path} (expected {what}).")
    with open(path, "rb") as fh:
        head = fh.read(8)  # enough for the zip, pickle and .npy magic
    if not head.startswith(ZIP_MAGIC):
        raise _not_npz_error(path, what, head)
    try:
        with zipfile.ZipFile(path) as zf:
            for member in zf.namelist():
                with zf.open(member) as fh:
                    version = np.lib.format.read_magic(fh)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    _, _, dtype = read_header(fh)
                if dtype.hasobject:
                    raise UnsafeFileError(
                        f"{path} is not {what}: it holds an object array ({member!r}), "
                        "which only unpickling could read, and unpickling executes "
                        "data. bayespmf files never contain pickles: refusing to load."
                    )
    except (zipfile.BadZipFile, EOFError, ValueError) as err:
        if isinstance(err, DataValidationError):
            raise
        raise DataValidationError(
            f"{path} is not {what}: not a valid npz file ({err})."
        ) from err


def _not_npz_error(path: Path, what: str, head: bytes) -> DataValidationError:
    if not head:
        return DataValidationError(f"{path} is not {what}: the file is empty.")
    if head[:1] == b"\x80":
        return UnsafeFileError(
            f"{path} is not {what}: it looks like a Python pickle, and bayespmf never "
            "unpickles files (that would execute code). Save with bayespmf.io.save."
        )
    if head.startswith(b"\x93NUMPY"):
        return DataValidationError(
            f"{path} is not {what}: it is a single .npy array, not an npz archive."
        )
    return DataValidationError(
        f"{path} is not {what}: not a valid npz file (it is not a zip archive)."
    )


def _json_scalar(obj):
    """NumPy scalars as Python ones, for json.dumps."""
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def save_fit(path, meta: dict, *, fmt: str, version: int, **arrays) -> Path:
    """Write a fitted estimator: its arrays plus JSON metadata, no pickle.

    ``meta`` gets ``format``, ``format_version`` and ``bayespmf_version`` added; NumPy
    scalars in it are written as Python numbers. :func:`load_fit` reads it back.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "fit.npz")
    >>> _ = save_fit(p, {"n_iter": np.int64(3)}, fmt="demo", version=1, w=np.ones(2))
    >>> arrays, meta = load_fit(p, fmt="demo", version=1, owner="Demo")
    >>> meta["n_iter"], arrays["w"].tolist()
    (3, [1.0, 1.0])
    """
    from bayespmf._version import __version__

    path = Path(path)
    head = {"format": fmt, "format_version": version, "bayespmf_version": __version__}
    np.savez(path, meta=np.array(json.dumps(head | meta, default=_json_scalar)), **arrays)
    return path


def load_fit(path, *, fmt: str, version: int, owner: str) -> tuple[dict, dict]:
    """Read a fit written by :func:`save_fit`: its arrays and its metadata.

    Raises
    ------
    DataValidationError
        Not a saved ``owner`` (no metadata, another format), or written in another
        format version (with the versions and the fix in the message).
    UnsafeFileError
        A member that only unpickling could read (see :func:`load_npz_safely`).
    """
    arrays = load_npz_safely(path, what=f"a {owner} fit saved by bayespmf")
    try:
        meta = json.loads(str(arrays.pop("meta")))
    except (KeyError, ValueError) as err:
        raise DataValidationError(f"{path} is not a saved {owner}.") from err
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise DataValidationError(f"{path} is not a saved {owner}.")
    if meta.get("format_version") != version:
        raise DataValidationError(
            f"{path} was written in format version {meta.get('format_version')} "
            f"(bayespmf {meta.get('bayespmf_version')}); this bayespmf reads "
            f"version {version}. Refit or use a matching bayespmf."
        )
    return arrays, meta
