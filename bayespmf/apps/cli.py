"""The ``bayespmf`` command line: argument parsing only; the work is in the library."""

from __future__ import annotations

import argparse
import errno
import sys

__all__ = ["main"]

#: Errors of a write that the user can remedy (space, quota, size limit, permissions,
#: a read-only or failing disk): reported in one line, not as a traceback.
_WRITE_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EACCES", "EPERM", "EIO")
    if hasattr(errno, name)
)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayespmf",
        description="Bayesian learning of joint PMFs: run model specifications on shipped "
        "data sets.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run a model specification (TOML), e.g. models/car.toml",
        description="Fit, sample and evaluate as a TOML specification says; every key "
        "is checked before any work starts. See bayespmf.apps.spec for the format.",
    )
    run.add_argument("spec", help="path of the .toml specification")
    run.add_argument("--out", help="output directory (overrides output.dir)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument(
        "--check",
        action="store_true",
        help="make every check the run makes on its inputs (the data set is loaded to "
        "check the target and ranks; the output folder must be writable and new, empty "
        "or an earlier run's), then stop; fit and write nothing",
    )
    ds = sub.add_parser("datasets", help="list the shipped data sets or describe one")
    ds.add_argument("name", nargs="?", help="a data set to describe")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bayespmf`` command.

    Examples
    --------
    >>> main(["datasets"])  # doctest: +ELLIPSIS
    car: ...
    0
    """
    args = _build_parser().parse_args(argv)
    from bayespmf._validation import DataValidationError

    try:
        if args.command == "datasets":
            from bayespmf import datasets

            names = [args.name] if args.name else datasets.list_datasets()
            for name in names:
                print(datasets.describe(name))
            return 0
        from bayespmf.apps.run import check_output_dir, output_dir, run_spec
        from bayespmf.apps.spec import load_spec

        spec = load_spec(args.spec)
        # the output folder is an input too: checked before any work, --check included
        out = check_output_dir(
            output_dir(spec, args.out), source="--out" if args.out else "output.dir"
        )
        if args.check:
            print(f"{args.spec}: valid")
            return 0
        try:
            run_spec(spec, out_dir=args.out, progressbar=not args.no_progress)
        except OSError as err:
            if err.errno not in _WRITE_ERRNOS:
                raise
            where = f" ({err.filename})" if err.filename else ""
            print(
                f"bayespmf: error: the run could not write its results to {out}: "
                f"{err.strerror or err}{where}. Nothing of this run was kept: {out} is "
                "as it was before. Free space (or fix the disk or permissions) and run "
                "again.",
                file=sys.stderr,
            )
            return 1
        return 0
    except DataValidationError as err:
        print(f"bayespmf: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
