"""Run the property-based reliability suite and print its tally as a Markdown table.

Usage::

    python benchmarks/reliability_report.py

Runs every fuzz test of ``tests/test_reliability.py`` (the same derandomized cases as
``pytest``, and the same checks: no crash, at least ``MIN_OK_SHARE`` correct results),
then the regression tests of the crashes it found, and prints per entry point: inputs
tried, correct results, documented errors by kind and crashes (a failing test also
prints its traceback). A crash repro marked ``xfail`` that now passes is reported as
fixed, with the advice to drop the mark; an unmarked regression test is reported as
passing or failing.
"""

import importlib.util
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = HERE.parent / "tests" / "test_reliability.py"


def load_suite():
    spec = importlib.util.spec_from_file_location("test_reliability", SUITE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def is_xfail(test) -> bool:
    """Whether ``test`` carries a ``pytest.mark.xfail`` (directly or via a mark list)."""
    return any(getattr(m, "name", None) == "xfail" for m in getattr(test, "pytestmark", []))


def main() -> None:
    suite = load_suite()
    properties = [
        getattr(suite, name)
        for name in dir(suite)
        if name.startswith("test_") and hasattr(getattr(suite, name), "property")
    ]
    repros = [
        getattr(suite, name)
        for name in dir(suite)
        if name.startswith("test_b") and name[6:7].isdigit()
    ]
    failures = {}
    t0 = time.perf_counter()
    for test in properties:
        try:
            test()
        except Exception:
            failures[test.__name__] = traceback.format_exc()
    elapsed = time.perf_counter() - t0

    tally = suite.TALLY
    kinds = sorted({k for c in tally.values() for k in c} - {"inputs", "ok", "crash"})
    header = ["entry point", "inputs", "ok", *kinds, "crashes"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    total = {k: 0 for k in header[1:]}
    for entry in sorted(tally):
        c = tally[entry]
        row = [c["inputs"], c["ok"], *[c[k] for k in kinds], c["crash"]]
        for k, v in zip(header[1:], row, strict=True):
            total[k] += v
        print(f"| {entry} | " + " | ".join(str(v) for v in row) + " |")
    print("| **total** | " + " | ".join(str(total[k]) for k in header[1:]) + " |")
    print(f"\nproperty tests: {len(properties)}, {elapsed:.1f} s")

    print("\nCrashes found (repros; xfail-marked ones are not fixed yet):")
    for test in repros:
        bug = test.__name__[5:7].upper()
        xfail = is_xfail(test)
        try:
            test()
        except Exception as err:
            first = str(err).splitlines()[0][:90] if str(err) else ""
            status = (
                f"still failing (xfail): {type(err).__name__}: {first}"
                if xfail
                else f"REGRESSION, the regression test fails: {type(err).__name__}: {first}"
            )
        else:
            status = (
                "FIXED (the xfail repro passes: remove the xfail)"
                if xfail
                else "fixed (regression test passes)"
            )
        print(f"  {bug}: {suite.FIXED_BUGS.get(bug, '?')}\n      {status}")
    for name, tb in failures.items():
        print(f"\nFAILED {name}:\n{tb}")


if __name__ == "__main__":
    main()
