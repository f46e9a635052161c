"""Save and load fitted estimators and posteriors in code-free, versioned files.

:func:`save` writes

* a fitted :class:`~bayespmf.estimators.LatentClassPMF` as netCDF-4 (``.nc``, the
  default: one variable per factor with named dimensions, readable by any netCDF tool)
  or as the estimator's own ``.npz`` (:meth:`LatentClassPMF.save
  <bayespmf.estimators.LatentClassPMF.save>`: arrays plus JSON metadata);
* a posterior (ArviZ 1's ``xarray.DataTree``, what :func:`bayespmf.models.sample`
  returns) as netCDF-4 groups, one per ArviZ group. Posteriors saved by bayespmf 0.1
  (ArviZ 0.23's ``InferenceData``, the same groups) load as a ``DataTree`` too.

Every file records ``bayespmf_format`` (what it holds), ``format_version`` and the
``bayespmf_version`` that wrote it. :func:`load` recognizes the file by its first bytes
and its recorded format, refuses another format version with
:class:`IncompatibleFormatError`, and never executes code: there is no pickle anywhere,
and an ``.npz`` holding an object (pickled) array is refused before any array is read
(:class:`UnsafeFileError`). :func:`load_npz_safely` is that npz reader for any saved
object: it never answers with NumPy's advice to load a file "unsafely".

**Nothing lost.** Files are written to a temporary file beside the target and renamed
over it only when complete (:mod:`bayespmf._atomic`): a save that fails (a full disk,
a file-size limit) raises and leaves the old file intact and loadable. An estimate
keeps every parameter and fitted attribute in both formats (``loglik_``,
``optima_``, ``n_init_best_``, ``info_``, a ``random_state`` generator's state, ...).
A path whose suffix disagrees with the format is a ``ValueError`` (NumPy would write
another file).

**Nothing silently wrong.** Every file records a SHA-256 checksum of its arrays (and an
estimate's metadata); :func:`load` verifies it and validates what it read (weights and
factors finite and on the simplex, one rank, category labels matching the factors;
a posterior's ``weights`` and ``A_*`` draws on the simplex), refusing a damaged file
with :class:`CorruptFileError`. Files of bayespmf <= 0.2 carry no checksum and are
validated only.

Examples
--------
>>> import os, tempfile
>>> from bayespmf import LatentClassPMF
>>> m = LatentClassPMF.from_params([0.4, 0.6], [np.array([[0.3, 0.9], [0.7, 0.1]])])
>>> path = save(m, os.path.join(tempfile.mkdtemp(), "fit.nc"))
>>> m2 = load(path)
>>> np.array_equal(m2.weights_, m.weights_), m2.factors_[0].shape
(True, (2, 2))
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bayespmf._atomic import write_netcdf
from bayespmf._npz import (
    ZIP_MAGIC,
    CorruptFileError,
    UnsafeFileError,
    arrays_sha256,
    check_npz_members,
    checksum_error,
    json_default,
    load_npz_safely,
)
from bayespmf._validation import DataValidationError
from bayespmf._version import __version__

__all__ = [
    "FORMAT_VERSION",
    "CorruptFileError",
    "IncompatibleFormatError",
    "UnsafeFileError",
    "load",
    "load_npz_safely",
    "save",
]

#: Version of the netCDF layouts written here; bumped on any incompatible change. A file
#: with another version is refused (the npz form carries the estimator's own version).
FORMAT_VERSION = 1

#: The ``bayespmf_format`` tags, one per kind of object.
_ESTIMATOR = "bayespmf.LatentClassPMF"
_POSTERIOR = "bayespmf.InferenceData"  # the tag of bayespmf 0.1, kept so its files load

#: netCDF-4 (HDF5) is the only netCDF flavour written; h5netcdf ships with ArviZ.
_ENGINE = "h5netcdf"

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"

#: Root attribute holding the SHA-256 of a file's content (absent in bayespmf <= 0.2).
_CHECKSUM = "checksum"

#: Attributes of a saved estimate covered by its checksum (with every variable).
_DIGESTED_ATTRS = ("params", "n_iter", "converged", "names", "categories", "exact")

#: Tolerance of the simplex checks of loaded posteriors (check_params' default).
_SIMPLEX_ATOL = 1e-6


class IncompatibleFormatError(DataValidationError):
    """A file written in a format version this bayespmf does not read."""


# ------------------------------------------------------------------------------ save


def save(obj, path, *, format: str | None = None) -> Path:
    """Save a fitted ``LatentClassPMF`` or a posterior (``xarray.DataTree``) to ``path``.

    Parameters
    ----------
    obj : LatentClassPMF or xarray.DataTree
        A fitted estimator, or a posterior (e.g. from :func:`bayespmf.models.sample`).
    path : str or os.PathLike
        Replaced atomically if it exists: the new content is written to a temporary
        file beside it and renamed over it when complete, so a failed save leaves the
        old file as it was.
    format : {"netcdf", "npz"}, optional
        Default from the suffix: ``.npz`` gives the estimator's own npz form, anything
        else netCDF-4. Posteriors are always netCDF-4. ``"npz"`` needs a path ending in
        ``.npz`` and ``"netcdf"`` one that does not.

    Returns
    -------
    pathlib.Path
        ``path``: the file written.

    Raises
    ------
    ValueError
        An unsupported object or format, a suffix that disagrees with ``format``, or
        an estimator that is not fitted.
    OSError
        The file could not be written (the old file, if any, is left intact).
    """
    from bayespmf.estimators import LatentClassPMF

    path = Path(path)
    is_npz = path.suffix.lower() == ".npz"
    if format is None:
        format = "npz" if is_npz else "netcdf"
    if format not in ("netcdf", "npz"):
        raise ValueError(
            f"The 'format' argument of save must be 'netcdf' or 'npz'. Got {format!r}."
        )
    if format == "npz" and not is_npz:
        raise ValueError(
            f"save: format='npz' but the path {str(path)!r} does not end in '.npz' "
            "(NumPy would write another file). Use a path ending in '.npz' (e.g. "
            f"{str(path.with_suffix('.npz'))!r}), or format='netcdf'."
        )
    if format == "netcdf" and is_npz:
        raise ValueError(
            f"save: format='netcdf' but the path {str(path)!r} ends in '.npz'. Use a "
            f"path ending in '.nc' (e.g. {str(path.with_suffix('.nc'))!r}), or "
            "format='npz'."
        )
    if isinstance(obj, LatentClassPMF):
        obj._check_fitted()
        if format == "npz":
            return obj.save(path)
        _save_estimator_netcdf(obj, path)
        return path
    if _is_inference_data(obj):
        if format == "npz":
            raise ValueError(
                "Posteriors (xarray.DataTree) are saved as netCDF only; use a path "
                "ending in '.nc' or format='netcdf'."
            )
        _save_posterior(obj, path)
        return path
    raise ValueError(
        "The 'obj' argument of save must be a fitted LatentClassPMF or a posterior "
        f"(xarray.DataTree, as bayespmf.models.sample returns). Got {type(obj).__name__}."
    )


def _is_inference_data(obj) -> bool:
    import xarray as xr

    return isinstance(obj, xr.DataTree)


def _root_attrs(kind: str) -> dict:
    return {
        "bayespmf_format": kind,
        "format_version": FORMAT_VERSION,
        "bayespmf_version": __version__,
    }


def _array_dims(name: str) -> tuple[str, ...]:
    """The netCDF dimensions of a saved estimate's array, from its name."""
    if name.endswith("weights"):  # weights, optimum_<k>_weights
        return ("class",)
    if name == "loglik_trace":
        return ("iteration",)
    n = name.rsplit("_", 1)[1]  # factor_<n>, optimum_<k>_factor_<n>
    return (f"category_{n}", "class")


def _estimator_digest(ds) -> str:
    arrays = {str(k): v.values for k, v in ds.variables.items()}
    attrs = {k: ds.attrs.get(k) for k in _DIGESTED_ATTRS}
    return arrays_sha256(arrays, json.dumps(attrs, sort_keys=True, default=json_default))


def _save_estimator_netcdf(model, path: Path) -> None:
    import xarray as xr

    meta, arrays = model._saved_state()
    data_vars = {name: (_array_dims(name), a) for name, a in arrays.items()}
    coords = {"class": np.arange(model.weights_.size)}
    attrs = _root_attrs(_ESTIMATOR) | {
        # JSON strings: netCDF attributes hold numbers, strings and flat arrays only
        "params": json.dumps(meta["params"], default=json_default),
        "n_iter": int(meta["n_iter"]),
        "converged": int(meta["converged"]),
        "names": json.dumps(meta["names"], default=json_default),
        "categories": json.dumps(meta["categories"], default=json_default),
        "exact": json.dumps(meta["exact"]),
    }
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    ds.attrs[_CHECKSUM] = _estimator_digest(ds)
    write_netcdf(ds, path, engine=_ENGINE)


def _posterior_digest(tree) -> str:
    arrays = {}
    for node in tree.subtree:
        for name, var in node.to_dataset(inherit=False).variables.items():
            arrays[f"{node.path}/{name}{tuple(var.dims)}"] = var.values
    return arrays_sha256(arrays)


def _save_posterior(idata, path: Path) -> None:
    # root-group attributes record what the file is; the groups are ArviZ's
    tree = idata.copy()
    tree.attrs = dict(tree.attrs) | _root_attrs(_POSTERIOR)
    tree.attrs[_CHECKSUM] = _posterior_digest(tree)
    write_netcdf(tree, path, engine=_ENGINE)


# ------------------------------------------------------------------------------ load


def load(path):
    """Load what :func:`save` (or ``LatentClassPMF.save``) wrote.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    LatentClassPMF or xarray.DataTree

    Raises
    ------
    FileNotFoundError
        No such file.
    UnsafeFileError
        An ``.npz`` holding object arrays (loading them would unpickle, i.e. run code),
        or a pickle file.
    IncompatibleFormatError
        A file written in another format version.
    CorruptFileError
        Content that does not match its recorded checksum, or that is invalid (weights
        or factors not finite or off the simplex, shapes or labels that disagree).
    DataValidationError
        Anything else that is not a bayespmf file.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head.startswith(ZIP_MAGIC):
        return _load_npz(path)
    if head.startswith(_HDF5_MAGIC):
        return _load_netcdf(path)
    if head[:1] == b"\x80":
        raise UnsafeFileError(
            f"{path} looks like a Python pickle; bayespmf never unpickles files (that "
            "would execute code). Save with bayespmf.io.save instead."
        )
    raise DataValidationError(
        f"{path} is not a file bayespmf.io.save writes (netCDF-4 or npz)."
    )


def _load_npz(path: Path):
    from bayespmf.estimators import LatentClassPMF

    check_npz_members(path, _NPZ_WHAT)
    try:
        return LatentClassPMF.load(path)
    except ValueError as err:  # numpy refuses object arrays without allow_pickle
        if isinstance(err, DataValidationError):
            raise
        # numpy's own message advises loading "unsafely"; never pass that on
        raise UnsafeFileError(
            f"{path} is not {_NPZ_WHAT}: it could not be read without unpickling."
        ) from None


#: What an npz written by bayespmf holds, for messages.
_NPZ_WHAT = "a LatentClassPMF fit saved by bayespmf"


def _check_version(path: Path, attrs: dict) -> None:
    version = attrs.get("format_version")
    try:
        version = int(version)
    except (TypeError, ValueError):
        version = None
    if version != FORMAT_VERSION:
        raise IncompatibleFormatError(
            f"{path} was written in bayespmf format version {attrs.get('format_version')} "
            f"(bayespmf {attrs.get('bayespmf_version', 'unknown')}); this bayespmf "
            f"({__version__}) reads version {FORMAT_VERSION}. Load it with a matching "
            "bayespmf, or refit."
        )


def _load_netcdf(path: Path):
    import xarray as xr

    try:
        with xr.open_dataset(path, engine=_ENGINE) as root:
            attrs = dict(root.attrs)
            kind = attrs.get("bayespmf_format")
            if kind == _ESTIMATOR:
                _check_version(path, attrs)
                return _estimator_from_dataset(root.load(), attrs, path)
        if kind == _POSTERIOR:
            _check_version(path, attrs)
            with xr.open_datatree(path, engine=_ENGINE) as tree:
                tree = tree.load()
            _check_posterior(tree, attrs, path)
            return tree
    except OSError as err:
        raise DataValidationError(f"{path} is not a readable netCDF-4 file: {err}") from err
    raise DataValidationError(
        f"{path} is a netCDF file but not one written by bayespmf.io.save (no "
        "'bayespmf_format' attribute). Use arviz.from_netcdf or xarray for other files."
    )


def _verify(path: Path, attrs: dict, actual) -> None:
    """Compare the recorded checksum (absent before bayespmf 0.3: not checked)."""
    stored = attrs.get(_CHECKSUM)
    if stored is not None:
        actual = actual()
        if str(stored) != actual:
            raise checksum_error(path, str(stored), actual)


def _estimator_from_dataset(ds, attrs: dict, path: Path):
    from bayespmf.estimators import LatentClassPMF

    _verify(path, attrs, lambda: _estimator_digest(ds))
    try:
        meta = {
            "params": json.loads(attrs["params"]),
            "n_iter": int(attrs["n_iter"]),
            "converged": bool(attrs["converged"]),
            "names": json.loads(attrs["names"]),
            "categories": json.loads(attrs["categories"]),
        }
        if "exact" in attrs:
            meta["exact"] = json.loads(attrs["exact"])
    except (KeyError, TypeError, ValueError) as err:
        raise CorruptFileError(
            f"{path} does not hold a valid LatentClassPMF fit: the attribute {err} is "
            "missing or malformed. Save the fit again (or refit)."
        ) from err
    arrays = {str(k): np.asarray(v.values) for k, v in ds.data_vars.items()}
    return LatentClassPMF._from_saved(arrays, meta, path)


def _check_posterior(tree, attrs: dict, path: Path) -> None:
    """Checksum (when recorded), then the simplex constraints of the draws."""
    _verify(path, attrs, lambda: _posterior_digest(tree))
    for group in ("posterior", "unaligned_posterior"):
        if group not in tree.children:
            continue
        ds = tree[group].to_dataset()
        for name, var in ds.data_vars.items():
            name = str(name)
            if name == "weights":
                dims = ["class"] if "class" in var.dims else []
            elif name.startswith("A_"):
                dims = [d for d in var.dims if str(d).endswith("_category")]
            else:
                continue
            if len(dims) != 1:
                continue
            values = np.asarray(var.values, dtype=float)
            total = var.sum(dim=dims[0]).values
            if (
                not np.all(np.isfinite(values))
                or np.any(values < 0)
                or np.any(np.abs(total - 1.0) > _SIMPLEX_ATOL)
            ):
                raise CorruptFileError(
                    f"{path} does not hold a valid posterior: the draws of "
                    f"'{group}/{name}' are not all finite, non-negative and summing to "
                    f"one over '{dims[0]}'. The file is damaged; restore it from a copy "
                    "or sample again."
                )
