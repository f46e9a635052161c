"""The ``bayespmf`` command line: argument parsing only; the work is in the library."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


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
        "check the target and ranks), then stop; fit and write nothing",
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
        from bayespmf.apps.run import run_spec
        from bayespmf.apps.spec import load_spec

        spec = load_spec(args.spec)
        if args.check:
            print(f"{args.spec}: valid")
            return 0
        run_spec(spec, out_dir=args.out, progressbar=not args.no_progress)
        return 0
    except DataValidationError as err:
        print(f"bayespmf: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
