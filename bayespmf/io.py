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

from bayespmf._npz import ZIP_MAGIC, UnsafeFileError, check_npz_members, load_npz_safely
from bayespmf._validation import DataValidationError
from bayespmf._version import __version__

__all__ = [
    "FORMAT_VERSION",
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
        Written over if it exists.
    format : {"netcdf", "npz"}, optional
        Default from the suffix: ``.npz`` gives the estimator's own npz form, anything
        else netCDF-4. Posteriors are always netCDF-4.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        An unsupported object or format, or an estimator that is not fitted.
    """
    from bayespmf.estimators import LatentClassPMF

    path = Path(path)
    if format is None:
        format = "npz" if path.suffix.lower() == ".npz" else "netcdf"
    if format not in ("netcdf", "npz"):
        raise ValueError(
            f"The 'format' argument of save must be 'netcdf' or 'npz'. Got {format!r}."
        )
    if isinstance(obj, LatentClassPMF):
        obj._check_fitted()
        if format == "npz":
            # np.savez appends .npz to other suffixes; the estimator writes the file
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


def _save_estimator_netcdf(model, path: Path) -> None:
    import xarray as xr

    n_class = model.weights_.size
    data_vars = {"weights": (("class",), np.asarray(model.weights_, dtype=float))}
    coords = {"class": np.arange(n_class)}
    for n, a in enumerate(model.factors_):
        data_vars[f"factor_{n}"] = ((f"category_{n}", "class"), np.asarray(a, dtype=float))
    trace = np.asarray(model.loglik_trace_, dtype=float)
    data_vars["loglik_trace"] = (("iteration",), trace)
    params = {k: v for k, v in model.get_params().items() if k != "random_state"}
    attrs = _root_attrs(_ESTIMATOR) | {
        # JSON strings: netCDF attributes hold numbers, strings and flat arrays only
        "params": json.dumps(params),
        "n_iter": int(model.n_iter_),
        "converged": int(bool(model.converged_)),
        "names": json.dumps(getattr(model, "_names", None)),
        "categories": json.dumps(getattr(model, "_categories", None)),
    }
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    ds.to_netcdf(path, engine=_ENGINE, mode="w")


def _save_posterior(idata, path: Path) -> None:
    # root-group attributes record what the file is; the groups are ArviZ's
    tree = idata.copy()
    tree.attrs = dict(tree.attrs) | _root_attrs(_POSTERIOR)
    tree.to_netcdf(path, engine=_ENGINE, mode="w")


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
                return _estimator_from_dataset(root.load(), attrs)
    except OSError as err:
        raise DataValidationError(f"{path} is not a readable netCDF-4 file: {err}") from err
    if kind == _POSTERIOR:
        _check_version(path, attrs)
        with xr.open_datatree(path, engine=_ENGINE) as tree:
            return tree.load()
    raise DataValidationError(
        f"{path} is a netCDF file but not one written by bayespmf.io.save (no "
        "'bayespmf_format' attribute). Use arviz.from_netcdf or xarray for other files."
    )


def _estimator_from_dataset(ds, attrs: dict):
    from bayespmf.estimators import LatentClassPMF

    try:
        params = json.loads(attrs["params"])
        names = json.loads(attrs["names"])
        categories = json.loads(attrs["categories"])
        n_factors = sum(1 for v in ds.data_vars if str(v).startswith("factor_"))
        factors = [
            np.asarray(ds[f"factor_{n}"].values, dtype=float) for n in range(n_factors)
        ]
        weights = np.asarray(ds["weights"].values, dtype=float)
        trace = np.asarray(ds["loglik_trace"].values, dtype=float)
    except (KeyError, TypeError, json.JSONDecodeError) as err:
        raise DataValidationError(f"The saved LatentClassPMF is incomplete: {err}") from err
    params.pop("rank", None)  # from_params takes the rank from the weights
    model = LatentClassPMF.from_params(weights, factors, **params)
    model.n_iter_ = int(attrs["n_iter"])
    model.converged_ = bool(attrs["converged"])
    model.loglik_trace_ = trace
    model.info_ = {}
    model._names, model._categories = names, categories
    return model
