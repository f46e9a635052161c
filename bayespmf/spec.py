"""Model specifications (TOML) for ``bayespmf run``: parsing and validation.

A specification names a shipped data set, what to fit and where to write. Every key is
checked before any work starts; an unknown key, a wrong type or a missing file fails
with a message that names the key and the file.

Example specification (``models/car.toml``)::

    [data]
    name = "car"

    [fit]
    rank = 5
    method = "cnmf-spa-em"
    random_state = 0

    [output]
    dir = "results/car"
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bayespmf._validation import DataValidationError

__all__ = ["RunSpec", "SpecError", "load_spec"]


class SpecError(DataValidationError):
    """A model specification file is invalid."""


# section -> key -> (accepted types, default); a default of ... means required.
_SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], object]]] = {
    "data": {
        "name": ((str,), ...),
        "target": ((str,), None),
        "options": ((dict,), {}),
        "test_fraction": ((float,), 0.3),
    },
    "fit": {
        "rank": ((int,), None),
        "method": ((str,), "cnmf-spa-em"),
        "max_iter": ((int,), 500),
        "tol": ((float,), 1e-7),
        "random_state": ((int,), 0),
    },
    "output": {
        "dir": ((str,), None),
    },
}


@dataclass
class RunSpec:
    """A validated specification (see the module docstring for the format)."""

    path: Path
    data: dict = field(default_factory=dict)
    fit: dict | None = None
    output: dict = field(default_factory=dict)


def _fail(path, msg):
    raise SpecError(f"{path}: {msg}")


def load_spec(path: str | Path) -> RunSpec:
    r"""Read and validate a TOML model specification.

    Raises
    ------
    SpecError
        Missing or unreadable file, invalid TOML, an unknown section or key (with a
        "did you mean"), a value of the wrong type, or an unknown data set.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "s.toml"
    >>> _ = p.write_text(chr(10).join(['[data]', 'name = "car"', '[fit]', 'rank = 3']))
    >>> load_spec(p).fit["rank"]
    3
    >>> _ = p.write_text(chr(10).join(['[data]', 'name = "car"', '[fit]', 'rnak = 3']))
    >>> load_spec(p)
    Traceback (most recent call last):
    ...
    bayespmf.spec.SpecError: ...: unknown key 'fit.rnak'. Did you mean 'rank'? ...
    """
    from bayespmf.datasets._registry import get_info

    path = Path(path)
    if not path.is_file():
        _fail(
            path,
            "file not found. Pass the path of a .toml specification, e.g. models/car.toml.",
        )
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from err
    spec = RunSpec(path=path)
    for section in raw:
        if section not in _SCHEMA:
            close = difflib.get_close_matches(section, list(_SCHEMA), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            _fail(path, f"unknown section [{section}].{hint} Sections: {list(_SCHEMA)}.")
    if "data" not in raw:
        _fail(path, 'missing section [data] (with at least name = "...").')
    for section, keys in _SCHEMA.items():
        given = raw.get(section)
        if given is None:
            continue
        if not isinstance(given, dict):
            _fail(path, f"'{section}' must be a table [{section}].")
        values = {}
        for key, value in given.items():
            if key not in keys:
                close = difflib.get_close_matches(key, list(keys), n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                _fail(
                    path,
                    f"unknown key '{section}.{key}'.{hint} Keys of "
                    f"[{section}]: {list(keys)}.",
                )
            types, _ = keys[key]
            ok = isinstance(value, types) and not (
                isinstance(value, bool) and bool not in types
            )
            if float in types and isinstance(value, int) and not isinstance(value, bool):
                value, ok = float(value), True
            if not ok:
                _fail(
                    path,
                    f"'{section}.{key}' must be of type "
                    f"{'/'.join(t.__name__ for t in types)}; got {value!r}.",
                )
            values[key] = value
        for key, (_, default) in keys.items():
            if key not in values:
                if default is ...:
                    _fail(path, f"missing required key '{section}.{key}'.")
                values[key] = default
        setattr(spec, section, values)
    try:
        get_info(spec.data["name"])
    except DataValidationError as err:
        raise SpecError(f"{path}: 'data.name': {err}") from err
    if spec.fit is not None and spec.fit["rank"] is not None and spec.fit["rank"] < 1:
        _fail(path, f"'fit.rank' must be >= 1; got {spec.fit['rank']}.")
    if not 0.0 < spec.data["test_fraction"] < 1.0:
        _fail(path, "'data.test_fraction' must be in (0, 1).")
    return spec
