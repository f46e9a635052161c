"""Reading ``.npz`` files without ever unpickling them (below :mod:`bayespmf.io`).

The estimators load their saved fits through :func:`load_npz_safely`; living here, it
needs nothing from :mod:`bayespmf.io` (which imports the estimators), so imports flow
one way. :mod:`bayespmf.io` re-exports both public names.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np

from bayespmf._atomic import atomic_write
from bayespmf._validation import DataValidationError

__all__ = [
    "ZIP_MAGIC",
    "CorruptFileError",
    "UnsafeFileError",
    "arrays_sha256",
    "check_npz_members",
    "check_suffix",
    "decode_value",
    "encode_value",
    "load_fit",
    "load_npz_safely",
    "save_fit",
]

#: The first bytes of a zip archive (an npz file).
ZIP_MAGIC = b"PK\x03\x04"


class UnsafeFileError(DataValidationError):
    """A file that could only be read by unpickling (executing) its contents."""


class CorruptFileError(DataValidationError):
    """A saved file whose content is damaged: a checksum mismatch or invalid values."""


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


def json_default(obj):
    """NumPy scalars as Python ones, for json.dumps."""
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


# ------------------------------------------------------------------ checksums


def arrays_sha256(arrays, text: str = "") -> str:
    """SHA-256 of named arrays (and an optional text), independent of the file format.

    Numbers are hashed as their little-endian bytes with kind, size and shape; strings
    and other objects (labels) as the JSON list of their ``str``, so that a label array
    read back as ``<U`` or as ``object`` hashes the same.

    Parameters
    ----------
    arrays : mapping of str to array_like
        Hashed in sorted name order.
    text : str, optional
        Hashed first (e.g. a file's metadata).

    Returns
    -------
    str
        The hex digest.

    Examples
    --------
    >>> a = arrays_sha256({"w": np.array([0.5, 0.5])})
    >>> a == arrays_sha256({"w": np.array([0.5, 0.5]).astype(">f8")})
    True
    >>> a == arrays_sha256({"w": np.array([0.5, 0.25])})
    False
    """
    h = hashlib.sha256()
    h.update(text.encode("utf-8"))
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        if a.dtype.kind in "biufcmM":
            a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
            h.update(f"\0{name}\0{a.dtype.kind}{a.dtype.itemsize}\0{a.shape}\0".encode())
            h.update(a.reshape(-1).view(np.uint8))
        else:
            body = json.dumps([str(x) for x in a.reshape(-1).tolist()])
            h.update(f"\0{name}\0text\0{a.shape}\0{body}".encode())
    return h.hexdigest()


def checksum_error(path, stored: str, actual: str) -> CorruptFileError:
    """The error for a file whose content does not match its recorded checksum."""
    return CorruptFileError(
        f"{path} is damaged: its content does not match the SHA-256 checksum recorded "
        f"when it was saved (recorded {stored[:12]}..., found {actual[:12]}...). Restore "
        "it from a copy, or save the object again."
    )


# ------------------------------------------------------------------ exact values

#: Key marking an encoded value that JSON cannot hold as it is (see encode_value).
_TAG = "__bayespmf__"

#: Bit generators a saved random_state may name (no other class is ever constructed).
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")

#: dtype kinds written as arrays: booleans, integers, floats, strings.
_ARRAY_KINDS = "biufU"


def _record_types() -> dict[str, type]:
    """The records a saved fit may hold (NamedTuples, frozen dataclasses), by name.

    The only classes a file can make the loader construct.
    """
    from bayespmf.fit.em import EMInfo
    from bayespmf.marginals.pairwise import PairwiseMarginals
    from bayespmf.marginals.projections import RandomProjections
    from bayespmf.pmf import LatentClassParams

    types = (EMInfo, LatentClassParams, PairwiseMarginals, RandomProjections)
    return {t.__name__: t for t in types}


def _record_fields(obj) -> dict | None:
    import dataclasses

    types = _record_types()
    if types.get(type(obj).__name__) is not type(obj):
        return None
    if dataclasses.is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return dict(obj._asdict())


def encode_value(obj):
    """A JSON-able form of ``obj``; :func:`decode_value` makes an equal object of it.

    The same type comes back, and reading it runs no code (no pickle).
    JSON numbers, strings, ``None`` and lists are kept; everything else is a dict
    tagged ``"__bayespmf__"``: NumPy arrays (bool, int, float, str) and scalars with
    their dtype, tuples, dicts (any keys), pandas DataFrames (columns, dtypes, index),
    ``numpy.random.Generator`` (its bit generator's state) and ``SeedSequence``, and the
    fit records of bayespmf (``EMInfo``, ``LatentClassParams``, ``PairwiseMarginals``,
    ``RandomProjections``). Any other object is kept as its ``repr`` (tag ``"repr"``),
    read back as that string. Python floats are written with ``repr`` precision (exact,
    ``NaN`` and ``Infinity`` included).

    Examples
    --------
    >>> doc = encode_value({"n": np.int64(3), "x": (np.arange(2.0), None)})
    >>> back = decode_value(json.loads(json.dumps(doc)))
    >>> type(back["n"]).__name__, back["x"][0].tolist(), back["x"][1]
    ('int64', [0.0, 1.0], None)
    """
    if isinstance(obj, np.generic):  # before the Python types: np.float64 is a float
        if obj.dtype.kind in _ARRAY_KINDS:
            return {_TAG: "scalar", "dtype": obj.dtype.str, "value": obj.item()}
    elif obj is None or type(obj) in (bool, int, float, str):
        return obj
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in _ARRAY_KINDS:
            return {
                _TAG: "array",
                "dtype": obj.dtype.str,
                "shape": list(obj.shape),
                "values": obj.reshape(-1).tolist(),
            }
    elif type(obj) is list:
        return [encode_value(v) for v in obj]
    elif type(obj) is tuple:
        return {_TAG: "tuple", "items": [encode_value(v) for v in obj]}
    elif type(obj) is dict:
        items = [[encode_value(k), encode_value(v)] for k, v in obj.items()]
        return {_TAG: "dict", "items": items}
    elif isinstance(obj, np.random.Generator):
        return {_TAG: "generator", "state": encode_value(obj.bit_generator.state)}
    elif isinstance(obj, np.random.SeedSequence):
        return {
            _TAG: "seed_sequence",
            "entropy": encode_value(obj.entropy),
            "spawn_key": encode_value(tuple(obj.spawn_key)),
            "pool_size": int(obj.pool_size),
            "n_children_spawned": int(obj.n_children_spawned),
        }
    else:
        fields = _record_fields(obj)
        if fields is not None:
            return {
                _TAG: "record",
                "type": type(obj).__name__,
                "fields": [[k, encode_value(v)] for k, v in fields.items()],
            }
        frame = _encode_frame(obj)
        if frame is not None:
            return frame
    return {
        _TAG: "repr",
        "type": f"{type(obj).__module__}.{type(obj).__qualname__}",
        "value": repr(obj),
    }


def _encode_frame(obj):
    import pandas as pd

    if type(obj) is not pd.DataFrame or not obj.columns.is_unique:
        return None
    columns, dtypes = [], []
    for name in obj.columns:
        col = obj[name]
        values = col.to_numpy()
        if values.dtype.kind in _ARRAY_KINDS and values.dtype.kind != "U":
            columns.append(encode_value(values))
        elif values.dtype.kind == "O":
            columns.append([encode_value(v) for v in values.tolist()])
        else:
            return None
        dtypes.append(str(col.dtype))
    index = obj.index
    if type(index) is pd.RangeIndex:
        idx = {"range": [index.start, index.stop, index.step]}
    else:
        idx = {"values": [encode_value(v) for v in index.tolist()]}
    return {
        _TAG: "frame",
        "columns": [encode_value(c) for c in obj.columns],
        "dtypes": dtypes,
        "data": columns,
        "index": idx | {"name": encode_value(index.name)},
    }


def decode_value(doc, *, path=None):
    """Invert :func:`encode_value` (after a JSON round trip).

    Only the tagged types listed there are constructed; an unknown tag, record or bit
    generator, or a malformed entry, is a :class:`CorruptFileError` naming ``path``.
    """
    try:
        return _decode(doc)
    except CorruptFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise CorruptFileError(
            f"{path if path is not None else 'The file'} holds a malformed saved value "
            f"({type(err).__name__}: {err}). The file is damaged or was not written by "
            "bayespmf; save the object again."
        ) from err


def _decode(doc):
    if doc is None or type(doc) in (bool, int, float, str):
        return doc
    if type(doc) is list:
        return [_decode(v) for v in doc]
    if type(doc) is not dict or _TAG not in doc:
        raise ValueError(f"untagged value {str(doc)[:60]!r}")
    tag = doc[_TAG]
    if tag in ("array", "scalar"):
        dtype = np.dtype(doc["dtype"])
        if dtype.kind not in _ARRAY_KINDS:
            raise ValueError(f"dtype {doc['dtype']!r} is not saved by bayespmf")
        if tag == "scalar":
            return dtype.type(doc["value"])
        return np.array(doc["values"], dtype=dtype).reshape(doc["shape"])
    if tag == "tuple":
        return tuple(_decode(v) for v in doc["items"])
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in doc["items"]}
    if tag == "generator":
        state = _decode(doc["state"])
        name = state["bit_generator"]
        if name not in _BIT_GENERATORS:
            raise ValueError(f"unknown bit generator {name!r}")
        bit_generator = getattr(np.random, name)()
        bit_generator.state = state
        return np.random.Generator(bit_generator)
    if tag == "seed_sequence":
        return np.random.SeedSequence(
            _decode(doc["entropy"]),
            spawn_key=_decode(doc["spawn_key"]),
            pool_size=int(doc["pool_size"]),
            n_children_spawned=int(doc["n_children_spawned"]),
        )
    if tag == "record":
        cls = _record_types().get(doc["type"])
        if cls is None:
            raise ValueError(f"unknown record type {doc['type']!r}")
        return cls(**{str(k): _decode(v) for k, v in doc["fields"]})
    if tag == "frame":
        return _decode_frame(doc)
    if tag == "repr":
        return str(doc["value"])
    raise ValueError(f"unknown tag {tag!r}")


def _decode_frame(doc):
    import pandas as pd

    data = {}
    names = [_decode(c) for c in doc["columns"]]
    for name, values, dtype in zip(names, doc["data"], doc["dtypes"], strict=True):
        values = _decode(values)
        if not isinstance(values, np.ndarray):
            arr = np.empty(len(values), dtype=object)
            for i, v in enumerate(values):
                arr[i] = v
            values = arr
        col = pd.Series(values, dtype=values.dtype)
        data[name] = col if str(col.dtype) == dtype else col.astype(dtype)
    idx = doc["index"]
    if "range" in idx:
        index = pd.RangeIndex(*idx["range"], name=_decode(idx["name"]))
    else:
        index = pd.Index([_decode(v) for v in idx["values"]], name=_decode(idx["name"]))
    frame = pd.DataFrame(data, columns=names)
    frame.index = index
    return frame


# ------------------------------------------------------------------ fits as npz


def check_suffix(path, *, owner: str, hint: str = "") -> Path:
    """``path`` as a Path if it ends in ``.npz``; else a ValueError naming it and the fix.

    NumPy would append ``.npz`` to any other name, so the file written would not be
    the one asked for.
    """
    path = Path(path)
    if path.suffix.lower() != ".npz":
        raise ValueError(
            f"{owner} writes an .npz file, but the path {str(path)!r} ends in "
            f"{path.suffix or 'no suffix'!r}. Pass a path ending in '.npz' (e.g. "
            f"{str(path.with_suffix('.npz'))!r}){hint}."
        )
    return path


def save_fit(
    path, meta: dict, *, fmt: str, version: int, owner: str = "save_fit", **arrays
):
    """Write a fitted estimator atomically: its arrays plus JSON metadata, no pickle.

    ``meta`` gets ``format``, ``format_version`` and ``bayespmf_version`` added; NumPy
    scalars in it are written as Python numbers. A member ``checksum`` holds the
    SHA-256 (:func:`arrays_sha256`) of every other member, the metadata included. The
    file is written through :func:`bayespmf._atomic.atomic_write`: a failed write
    leaves an existing file at ``path`` as it was. :func:`load_fit` reads it back.

    Raises
    ------
    ValueError
        ``path`` does not end in ``.npz`` (NumPy would write another file).

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

    path = check_suffix(path, owner=owner)
    head = {"format": fmt, "format_version": version, "bayespmf_version": __version__}
    members = {"meta": np.array(json.dumps(head | meta, default=json_default))}
    members |= {name: np.asarray(a) for name, a in arrays.items()}
    members["checksum"] = np.array(arrays_sha256(members))
    with atomic_write(path) as fh:
        np.savez(fh, **members)
    return path


def load_fit(path, *, fmt: str, version: int, owner: str) -> tuple[dict, dict]:
    """Read a fit written by :func:`save_fit`: its arrays and its metadata.

    The checksum is verified when the file has one (files of bayespmf <= 0.2 have
    none and load unverified).

    Raises
    ------
    DataValidationError
        Not a saved ``owner`` (no metadata, another format), or written in another
        format version (with the versions and the fix in the message).
    CorruptFileError
        The arrays or metadata do not match the recorded checksum.
    UnsafeFileError
        A member that only unpickling could read (see :func:`load_npz_safely`).
    """
    arrays = load_npz_safely(path, what=f"a {owner} fit saved by bayespmf")
    try:
        meta = json.loads(str(arrays["meta"]))
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
    stored = arrays.pop("checksum", None)
    if stored is not None:
        actual = arrays_sha256(arrays)
        if stored.shape != () or str(stored) != actual:
            raise checksum_error(path, str(stored), actual)
    arrays.pop("meta")
    return arrays, meta
