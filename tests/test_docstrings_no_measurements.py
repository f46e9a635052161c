"""Docstrings state behaviour, not measurements (issue 37, item 2).

Figures measured in a particular run (timings, ESS and ESS per second, r-hat values,
speed-ups, memory peaks, errors of a benchmark run) go stale in a docstring: they
belong on the documentation's benchmark pages (``docs/benchmark_figures.md``), next
to the script that regenerates them, and a docstring says what an option does and
links there (``:ref:`bench-...```). This test reads every module, class and function
docstring of the package, and every block of comments (``#:`` ones are the constants'
documentation that Sphinx renders), with :mod:`ast` and :mod:`tokenize` (nothing is
imported), and fails on the patterns of such figures. Constants, defaults,
arithmetic (``2**26 float64 = 512 MiB``) and the papers' numbers are not matched.
It also checks that every ``:ref:`bench-...``` label a docstring or comment names
exists on that page.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bayespmf"
FIGURES_PAGE = ROOT / "docs" / "benchmark_figures.md"

_NUM = r"\d+(?:\.\d+)?"
_UNIT_TIME = r"(?:s|ms|µs|us|ns|min|mins|minutes?|seconds?|hours?|h)"

#: (name, pattern): a match in a docstring or documentation comment is a measured figure.
PATTERNS = [
    # "Measured on UCI Car at rank 4, ...", "(measured at S=1e5, ...: ~25% faster)"
    (
        "measured-with-number",
        re.compile(r"(?i)\bmeasured\b[^.;]{0,120}?(?<![\w^*.])\d"),
    ),
    # "r-hat 2.37", "aligned r-hat <= 1.003", "r-hat about 1.9"
    ("r-hat-value", re.compile(r"(?i)\br-?hat\s*(?:of|was|about|<=|>=|=|<|>)?\s*\d")),
    # "bulk ESS 2527", "ESS per second was 16.1", "bulk ESS/s was 44"
    (
        "ess-value",
        re.compile(
            r"(?i)\bESS(?:/s| per (?:second|draw|sweep))?\s*(?:was|of|about|:)?\s*\d"
        ),
    ),
    # "took 430 s", "(1-2 ms)", "0.48 s / 2.6 s", "about 1 s", "24.8 ms / iter"
    (
        "duration",
        re.compile(rf"(?<![\w.^*/-]){_NUM}(?:\s*[-\u2013]+\s*{_NUM})?\s?{_UNIT_TIME}\b"),
    ),
    # "7x faster", "1.5-3x fewer sweeps", "3 times slower", "2-12x the best"
    (
        "speed-ratio",
        re.compile(
            rf"(?i){_NUM}\s?(?:x|\u00d7|times)\s+(?:faster|slower|fewer|more|as long|the)\b"
        ),
    ),
    # "faster ... 25%", "20 % slower", "ran 10--30 % faster"
    ("percent-faster", re.compile(rf"(?i){_NUM}\s?%\s+(?:faster|slower)\b")),
    # "peak resident memory 669 MB", "took 892 MB"
    (
        "memory-peak",
        re.compile(
            rf"(?i)\b(?:peak|resident|took|held)\b[^.;]{{0,60}}?{_NUM}\s?[KMG]i?B\b"
        ),
    ),
    # "classified at 81.5 %"
    ("accuracy", re.compile(rf"(?i)\b(?:classified|accuracy)\b[^.;]{{0,40}}?{_NUM}\s?%")),
    # "86.5-87.8 %", "about 1.5-4 %": a range of percentages observed over runs
    ("percent-range", re.compile(rf"{_NUM}\s?[-\u2013]+\s?{_NUM}\s?%")),
    # "a trial takes about a minute", "needs about a second to compile"
    (
        "duration-in-words",
        re.compile(
            r"(?i)\b(?:about|takes|took|needs)\s+(?:a|one)\s+(?:second|minute|hour)\b"
        ),
    ),
    # "alpha-hat 92", "alpha-hat 1.52 +- 0.12"
    ("estimate-value", re.compile(r"(?i)\balpha-hat\s+\d")),
    # "stopped 0.03 log-likelihood units short", "then +3 log-likelihood units"
    (
        "loglik-units",
        re.compile(rf"[+]?{_NUM}(?:\s*-\s*{_NUM})?\s+(?:log-likelihood\s+)?units\b"),
    ),
    # "the chosen split's factor MSE was 0.00438", "vertex error 15.6 vs 15.7"
    ("error-value", re.compile(rf"(?i)\b(?:MSE|RMSE|MAE|error)\s+(?:was\s+)?{_NUM}\b")),
    ("versus-figures", re.compile(rf"(?<![\w.]){_NUM} vs\.? {_NUM}")),
    # "it held the true alpha in 17 of 18 fits"
    (
        "share-of-runs",
        re.compile(r"\b\d+ of \d+ (?:\w+ )?(?:fits|runs|seeds|trials|cases|starts)\b"),
    ),
    # "NUTS took 15 leapfrog steps per draw", "took 0.34-0.79 times"
    ("took-number", re.compile(rf"(?i)\btook\s+(?:about\s+)?{_NUM}\b")),
    # "the centroids' Monte Carlo sd is about 0.3 % of their spread"
    ("sd-value", re.compile(rf"(?i)\bsd\b[^.;]{{0,20}}?{_NUM}\s?%")),
    # "36 iterations at 1e-8, 54 at 1e-10"
    ("iterations-at", re.compile(r"(?i)\b\d+ (?:iterations|sweeps|cycles) at\b")),
    # "the validation RMSE is flat after ~15 here"
    ("here", re.compile(rf"~\s?{_NUM}\s+here\b")),
    # "(seed 1) the Aitken rule ...", "seed 0: alpha-hat 92"
    ("seed-result", re.compile(r"(?i)\bseed \d+(?:\)|:)")),
    # "gave cells of 1, 8, 10 and 18 documents"
    ("list-of-results", re.compile(r"(?i)\bgave\b[^.;]{0,30}?\d+(?:, \d+)+,? and \d+")),
    # "(best of 7, ms per call", "median of 20 calls"
    ("timing-protocol", re.compile(r"(?i)\b(?:best|median) of \d+\b")),
    # "on the project's 2-core machine", "load average 9"
    (
        "machine",
        re.compile(
            r"(?i)\bload average\b|project's (?:2-core )?machine|development machine"
        ),
    ),
]

#: A benchmark script named in the same stretch of text as decimal figures.
BENCH_SCRIPT = re.compile(r"benchmarks/\w+\.py")
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")
BENCH_WINDOW = 200

REF = re.compile(r":ref:`(?:[^`<]*<)?(bench-[\w-]+)>?`")


def _texts(path: Path):
    """(line, text) of every docstring and every block of comment lines of a module."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        if isinstance(node, nodes) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                yield first.lineno, first.value.value
    block: list[str] = []
    start = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            if not block:
                start = tok.start[0]
            block.append(tok.string.lstrip("#:").strip())
        elif tok.type != tokenize.NL and block:
            yield start, " ".join(block)
            block = []
    if block:
        yield start, " ".join(block)


def measurements(text: str) -> list[str]:
    """The measured figures ``text`` states, as ``"<pattern>: <excerpt>"``."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        if ">>>" in paragraph:  # an example: code and its output, not prose
            continue
        flat = " ".join(paragraph.split())
        found += [
            f"{name}: {m.group(0)!r}" for name, pat in PATTERNS for m in pat.finditer(flat)
        ]
        for m in BENCH_SCRIPT.finditer(flat):
            window = flat[max(m.start() - BENCH_WINDOW, 0) : m.end() + BENCH_WINDOW]
            if len(DECIMAL.findall(window)) >= 2:
                found.append(f"benchmark-figures: {m.group(0)!r} next to figures")
    return found


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_no_docstring_states_a_measured_figure():
    offences = [
        f"{path.relative_to(ROOT)}:{line}: {hit}"
        for path in _modules()
        for line, text in _texts(path)
        for hit in measurements(text)
    ]
    assert not offences, (
        "Docstrings and comments state measured figures; move them to "
        "docs/benchmark_figures.md (with the script that regenerates them) and link "
        "there:\n" + "\n".join(offences)
    )


def test_every_benchmark_reference_exists():
    labels = set(re.findall(r"^\((bench-[\w-]+)\)=$", FIGURES_PAGE.read_text(), re.M))
    missing = [
        f"{path.relative_to(ROOT)}: {label}"
        for path in _modules()
        for label in REF.findall(path.read_text(encoding="utf-8"))
        if label not in labels
    ]
    assert not missing, "unknown :ref: labels:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    "text",
    [
        "Measured on UCI Car at rank 4, 2 chains, one run",
        "chains settle in modes (r-hat 2.37 after label alignment)",
        "smallest bulk ESS per second 215, 138, 175",
        "which took 430 s against 10 s in memory",
        "pm.sample costs 1-2 ms per recorded draw",
        "dense 7x faster for binary items",
        "an unrolled graph ran 10--30 % faster",
        "peak resident memory 669 MB against 697 MB",
        "the exact start classified at 81.5 %",
        "(best of 7, ms per call)",
        "on the project's 2-core machine",
        "``benchmarks/bayes_gibbs.py``: 16.3 and 14.7 against 4.9 and 2.4",
    ],
)
def test_patterns_catch_measured_figures(text):
    assert measurements(text)


@pytest.mark.parametrize(
    "text",
    [
        "Largest joint PMF tensor joint_pmf() builds (entries); 2**26 float64 = 512 MiB.",
        "``log_likelihood`` adds it when it holds at most 1 GiB (chains x draws x rows)",
        "accuracy is measured on the test part",
        "Ibrahim & Fu, Sec. 5.2, Tables 1-2",
        "faster on large data; see :ref:`bench-gibbs-vs-nuts`",
        "``benchmarks/paper_squarem.py`` prints the difference per trial",
        "a dense 2500 x 2500 eigendecomposition per pair, 50 MB of float64",
        "the t quantile, 2.36 instead of 1.96, pays for that",
    ],
)
def test_patterns_spare_constants_and_behaviour(text):
    assert not measurements(text)
