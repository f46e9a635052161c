"""Property-based reliability suite: bad and extreme input never crashes bayespmf.

Every public entry point is called on 200 generated inputs (random shapes, alphabet
sizes, missing patterns, ranks, seeds and plainly wrong arguments). Each call must end
in either

* a correct result (probabilities non-negative and summing to one, log-likelihoods
  finite and, for EM, non-decreasing, marginals equal to a brute-force count), or
* a documented error (``DOCUMENTED_ERRORS``): a ``DataValidationError`` (malformed
  data) or a ``ValueError`` (a bad scalar argument, from ``check_int``/``check_float``/
  ``check_random_state``), raised by bayespmf's own checks with a message.

Anything else (another exception, a ``ValueError`` leaking out of NumPy/SciPy/pandas, a
NumPy ``RuntimeWarning`` leaking NaN) is a crash and fails the test; the crashes this
suite found (``FIXED_BUGS``) have regression tests at the end of this file. An error
is not a free pass: each entry point must also answer at least ``MIN_OK_SHARE`` of its
inputs with a correct result, so a regression that rejects valid input fails here too.
Inputs are never mutated and the same ``random_state`` gives bit-identical output.
``TALLY`` counts inputs and outcomes per entry point; ``benchmarks/reliability_report.py``
prints it as a table.
"""

import linecache
import warnings
from collections import Counter, defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import bayespmf  # noqa: E402
from bayespmf import (  # noqa: E402
    CategoricalData,
    ConvergenceWarning,
    DataValidationError,
    LatentClassPMF,
    metrics,
)
from bayespmf.fit import fit_em  # noqa: E402
from bayespmf.fit.squarem import squarem  # noqa: E402
from bayespmf.kernels.em import em_step_numpy, init_random  # noqa: E402
from bayespmf.kernels.squarem import squarem_pmf_step  # noqa: E402
from bayespmf.marginals import pairwise_marginals, triple_marginals  # noqa: E402
from bayespmf.pmf import offsets_of  # noqa: E402

#: 200 generated cases per entry point; small shapes keep the file well under 120 s.
#: derandomize: the same cases on every run (CI and the report agree); database=None:
#: nothing is written into the repository.
PROPERTY = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

#: entry point -> Counter of outcomes ("inputs", "ok", error class names, "crash").
TALLY: dict[str, Counter] = defaultdict(Counter)

#: Crashes this suite found (now fixed; the regression tests at the end pin them).
FIXED_BUGS = {
    "B1": "max_identifiable_rank overflows (OverflowError) when prod(I_n) > 1.8e308",
    "B2": "predict_proba gives NaN (RuntimeWarning) for a row impossible under the model",
    "B3": "hide_entries does not validate 'min_observed' (TypeError, or silently accepts)",
    "B4": "hide_entries(variables=[]) raises IndexError (float index array)",
}

#: Relative slack for "non-decreasing" log-likelihood traces (rounding of a sum of S
#: logs; EM is monotone in exact arithmetic).
MONOTONE_RTOL = 1e-10

SEED = st.integers(0, 2**32 - 1)


#: The errors an entry point may answer bad input with (both carry a message naming the
#: argument): DataValidationError for malformed data, ValueError for a bad scalar
#: argument (bayespmf._validation.check_int / check_float / check_random_state). They
#: count only when bayespmf raised them itself (``_raised_by_bayespmf``): a ValueError
#: from inside NumPy ("operands could not be broadcast", ...) is a crash, not a check.
DOCUMENTED_ERRORS = (DataValidationError, ValueError)

_PACKAGE_DIR = Path(bayespmf.__file__).resolve().parent

#: Least share of an entry point's 200 inputs that must give a correct result. The
#: strategies mix valid and broken arguments on purpose, so the share of valid inputs
#: differs by entry point; each minimum is about two thirds of the share the
#: (derandomized) cases give today (in brackets), so an entry point that starts
#: refusing valid input fails, while a change of hypothesis version does not. Where the
#: strategy knows an input is valid, ``run(..., known_valid=True)`` demands a result.
MIN_OK_SHARE = {
    # half the cases are arbitrary arrays (0-3 dims, NaN, inf, codes < -1, bad
    # n_categories); the rest are valid codes, refused only when n_categories is
    # inferred and a variable is constant or the codes look 1-based [46 %]
    "CategoricalData.from_codes": 0.25,
    # 0-7 rows x 0-4 columns: empty frames, and columns with < 2 values [22 %]
    "CategoricalData.from_pandas": 0.10,
    # ~half of 'fraction', 'variables' and 'min_observed' draws are out of range, and
    # on <= 8 rows a small fraction often hides nothing [20 %]
    "CategoricalData.hide_entries": 0.10,
    # a third of the fraction lists are arbitrary; <= 12 rows leave parts empty [20 %]
    "CategoricalData.train_test_split": 0.10,
    # a third of the chunk sizes are invalid, 1-2 variables, arbitrary triples [24 %]
    "triple_marginals": 0.15,
    # 'heavy'/'one_per_row' missingness on <= 12 rows leaves variables unobserved
    "pairwise_marginals": 0.40,  # [66 %]
    # ... plus ranks 0-4 (rank > identifiable) and CNMF on 1-2 variables [18 %; the
    # derandomized cases follow the test's source, and after the n_components rename
    # they are an unlucky set: 24-34 % with random seeds 1-8, every refusal checked]
    "LatentClassPMF.fit": 0.12,
    # ... plus half the initial values broken (wrong rank, unnormalized) [32 %]
    "fit_em": 0.20,
    # a quarter of the queries have a bad code or an extra column; bad targets [62 %]
    "LatentClassPMF.predict_proba": 0.40,
    "LatentClassPMF.score": 0.50,  # [78 %]
    # 'SqS4', tol < 0, max_evals < 2, empty or NaN x0 in half the cases [70 %]
    "squarem": 0.45,
    "squarem_pmf_step": 1.0,  # only valid inputs
    # two thirds of the parameter pairs are broken (NaN, shapes, ranks) [50 %]
    "metrics.factor_mse": 0.30,
    "metrics.joint_pmf_relative_error": 0.30,
    "metrics.match_components": 0.35,  # [55 %]
    # empty label lists [63 %]
    "metrics.accuracy": 0.40,
    "metrics.rmse": 0.40,
    "metrics.mae": 0.40,
}


def _raised_by_bayespmf(err: BaseException) -> bool:
    """Whether a ``raise`` statement in the bayespmf package raised ``err``.

    The innermost frame of the traceback must be in bayespmf and on a ``raise`` line:
    a NumPy error raised in C ("operands could not be broadcast") has a bayespmf line
    as its innermost Python frame, but not a ``raise``.
    """
    tb = err.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename
    if not Path(filename).resolve().is_relative_to(_PACKAGE_DIR):
        return False
    return linecache.getline(filename, tb.tb_lineno).lstrip().startswith("raise")


def run(entry: str, fn, *args, known_valid: bool = False, **kwargs):
    """Call ``fn`` and classify the outcome; return ``(ok, result)``.

    A documented error (see ``DOCUMENTED_ERRORS``) is tallied and returns
    ``(False, None)``, unless the strategy built the input to be valid
    (``known_valid``): then, like anything else, it is a crash and propagates. Every
    warning is an error here except the two below.
    """
    TALLY[entry]["inputs"] += 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # The fuzzed fits run 1-6 iterations on purpose: stopping early is their
        # documented outcome, reported as a ConvergenceWarning.
        warnings.simplefilter("ignore", ConvergenceWarning)
        # PyTensor says once per process that it found no BLAS (the environment, not
        # bayespmf); pyproject.toml ignores the same message for the whole test run.
        warnings.filterwarnings("ignore", message=".*BLAS.*", category=UserWarning)
        try:
            out = fn(*args, **kwargs)
        except DOCUMENTED_ERRORS as err:
            kind = type(err).__name__
            if not (str(err).strip() and _raised_by_bayespmf(err)):
                TALLY[entry]["crash"] += 1
                raise AssertionError(
                    f"{entry}: {kind} not raised by a bayespmf check (or without a "
                    f"message): {err!r}"
                ) from err
            if known_valid:
                TALLY[entry]["crash"] += 1
                raise AssertionError(f"{entry} refused a valid input: {err}") from err
            TALLY[entry][kind] += 1
            event(f"{entry}: {kind}")
            event(f"{entry}: {kind}: {str(err)[:60]}")
            return False, None
        except Exception:
            TALLY[entry]["crash"] += 1
            raise
    TALLY[entry]["ok"] += 1
    event(f"{entry}: ok")
    return True, out


def assert_outcomes(entry: str) -> None:
    """No crash, and at least ``MIN_OK_SHARE`` of the inputs answered correctly."""
    c = TALLY[entry]
    assert c["inputs"] > 0, f"{entry} was never called"
    assert c["crash"] == 0, f"{entry} crashed on {c['crash']} input(s)"
    share = MIN_OK_SHARE[entry]
    errors = {k: v for k, v in c.items() if k not in ("inputs", "ok", "crash")}
    assert c["ok"] >= share * c["inputs"], (
        f"{entry}: only {c['ok']} of {c['inputs']} generated inputs gave a result "
        f"(need {share:.0%}); errors: {errors}"
    )


def fuzz_test(*entries: str):
    """Make a hypothesis property into a test that also checks the outcomes.

    The returned test runs the property on its generated inputs, then
    :func:`assert_outcomes` for each of ``entries`` (counted afresh). The property
    itself stays reachable as ``test.property`` (the report runs the tests).
    """

    def decorate(prop):
        def test():
            for entry in entries:
                TALLY.pop(entry, None)
            prop()
            for entry in entries:
                assert_outcomes(entry)

        test.__name__ = test.__qualname__ = prop.__name__
        test.__doc__ = prop.__doc__
        test.property = prop
        test.entries = entries
        return test

    return decorate


def frozen_copy(x):
    return x.copy(deep=True) if isinstance(x, pd.DataFrame) else np.array(x, copy=True)


# ------------------------------------------------------------------ data strategies

PATTERNS = ("complete", "random", "heavy", "one_per_row", "empty_rows", "never_cat")


@st.composite
def categorical_codes(draw, max_rows=10, max_vars=5, max_cat=4, patterns=PATTERNS):
    """``(codes, n_categories, pattern)`` with a random missing pattern (valid codes)."""
    rng = np.random.default_rng(draw(SEED))
    n_rows = draw(st.integers(1, max_rows))
    n_vars = draw(st.integers(1, max_vars))
    n_cat = np.array(
        draw(st.lists(st.integers(2, max_cat), min_size=n_vars, max_size=n_vars))
    )
    pattern = draw(st.sampled_from(patterns))
    codes = (rng.random((n_rows, n_vars)) * n_cat).astype(np.int64)
    if pattern == "random":
        codes[rng.random(codes.shape) < 0.3] = -1
    elif pattern == "heavy":
        codes[rng.random(codes.shape) < 0.8] = -1
    elif pattern == "one_per_row":
        keep = rng.integers(0, n_vars, n_rows)
        mask = np.zeros(codes.shape, bool)
        mask[np.arange(n_rows), keep] = True
        codes[~mask] = -1
    elif pattern == "empty_rows":
        codes[rng.random(n_rows) < 0.4] = -1
    elif pattern == "never_cat":  # the last category of every variable never occurs
        codes = np.minimum(codes, n_cat - 2)
    event(f"pattern={pattern}")
    return codes, n_cat, pattern


def brute_pairwise(codes, n_cat):
    off = offsets_of(n_cat)
    joint = np.zeros((off[-1], off[-1]))
    counts = np.zeros((n_cat.size, n_cat.size), dtype=np.int64)
    for j in range(n_cat.size):
        for k in range(n_cat.size):
            rows = (codes[:, j] >= 0) & (codes[:, k] >= 0)
            counts[j, k] = rows.sum()
            for a, b in zip(codes[rows, j], codes[rows, k], strict=True):
                joint[off[j] + a, off[k] + b] += 1
            if counts[j, k]:
                joint[off[j] : off[j + 1], off[k] : off[k + 1]] /= counts[j, k]
    return joint, counts


def check_simplex(p, axis, what):
    p = np.asarray(p)
    assert np.all(np.isfinite(p)), f"{what} not finite"
    assert np.all(p >= 0), f"{what} negative"
    np.testing.assert_allclose(p.sum(axis=axis), 1.0, atol=1e-9, err_msg=what)


def check_monotone(trace, what="loglik"):
    trace = np.asarray(trace)
    assert np.all(np.isfinite(trace)), f"{what} trace not finite"
    slack = MONOTONE_RTOL * np.abs(trace[1:]) + 1e-12
    assert np.all(np.diff(trace) >= -slack), f"{what} decreased: {trace}"


def check_params(weights, factors, n_cat):
    check_simplex(weights, 0, "weights")
    assert len(factors) == len(n_cat)
    for a, i in zip(factors, n_cat, strict=True):
        assert a.shape == (i, np.size(weights))
        check_simplex(a, 0, "factor columns")


# ------------------------------------------------------------------ CategoricalData

_ELEMENTS = {
    np.int64: st.integers(-3, 6),
    np.int8: st.integers(-3, 6),
    np.uint8: st.integers(0, 6),
    np.float64: st.one_of(
        st.integers(-3, 6).map(float), st.floats(-3, 6), st.sampled_from([np.nan, np.inf])
    ),
    np.bool_: st.booleans(),
}


@st.composite
def bad_or_good_arrays(draw):
    dtype = draw(st.sampled_from(list(_ELEMENTS)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    event(f"ndim={len(shape)} dtype={np.dtype(dtype).name}")
    return draw(hnp.arrays(dtype, shape, elements=_ELEMENTS[dtype]))


n_categories_arg = st.one_of(
    st.none(),
    st.integers(-1, 6),
    st.lists(st.integers(-1, 7), min_size=0, max_size=5),
    st.lists(st.floats(0, 7), min_size=1, max_size=3),
)


@st.composite
def from_codes_args(draw):
    """``(codes, n_categories, known_valid)``."""
    if draw(st.booleans()):
        return draw(bad_or_good_arrays()), draw(n_categories_arg), False
    codes, n_cat, _ = draw(categorical_codes())
    n_cat = draw(st.sampled_from([None, n_cat, n_cat + 1, int(n_cat.max()) + 1]))
    if n_cat is None and np.any(codes.max(axis=0) < 1):
        event("inferred alphabet < 2")
    # codes below their alphabet sizes: valid whenever the sizes are given
    return codes, n_cat, n_cat is not None


@fuzz_test("CategoricalData.from_codes")
@PROPERTY
@given(args=from_codes_args())
def test_from_codes(args):
    codes, n_cat, known_valid = args
    before = frozen_copy(codes)
    ok, data = run(
        "CategoricalData.from_codes",
        CategoricalData.from_codes,
        codes,
        n_cat,
        known_valid=known_valid,
    )
    np.testing.assert_array_equal(codes, before)  # never mutated
    if not ok:
        return
    assert data.codes.ndim == 2 and not data.codes.flags.writeable
    np.testing.assert_array_equal(data.codes, before.astype(np.int64))
    assert np.all(data.n_categories >= 2)
    assert np.all(data.codes < data.n_categories) and np.all(data.codes >= -1)
    if codes.flags.writeable and codes.size:  # a copy, not a view of the input
        codes.flat[0] = 1 - codes.flat[0]
        assert data.codes.flat[0] == before.astype(np.int64).flat[0]


@st.composite
def frames(draw):
    rng = np.random.default_rng(draw(SEED))
    n_rows = draw(st.integers(0, 7))
    n_cols = draw(st.integers(0, 4))
    cols = {}
    for j in range(n_cols):
        kind = draw(st.sampled_from(["str", "int", "bool", "float", "category", "mixed"]))
        missing = rng.random(n_rows) < draw(st.sampled_from([0.0, 0.3, 1.0]))
        if kind == "str":
            vals = [None if m else str(rng.choice(list("abc"))) for m in missing]
        elif kind == "int":
            vals = pd.array(rng.integers(-2, 3, n_rows), dtype="Int64")
            vals[missing] = pd.NA
        elif kind == "bool":
            vals = [None if m else bool(rng.random() < 0.5) for m in missing]
        elif kind == "float":
            vals = np.where(missing, np.nan, rng.integers(0, 3, n_rows) / 2)
        elif kind == "category":
            raw = [None if m else str(rng.choice(list("xyz"))) for m in missing]
            vals = pd.Categorical(raw, categories=["x", "y", "z", "w"])
        else:  # ints and strings in one object column
            vals = [
                None if m else (int(rng.integers(3)) if rng.random() < 0.5 else "s")
                for m in missing
            ]
        cols[f"c{j}"] = vals
        event(f"column kind={kind}")
    return (
        pd.DataFrame(cols, index=range(n_rows))
        if n_cols
        else pd.DataFrame(index=range(n_rows))
    )


@fuzz_test("CategoricalData.from_pandas")
@PROPERTY
@given(df=frames(), dropna=st.booleans())
def test_from_pandas(df, dropna):
    before = df.copy(deep=True)
    ok, data = run(
        "CategoricalData.from_pandas", CategoricalData.from_pandas, df, dropna_rows=dropna
    )
    pd.testing.assert_frame_equal(df, before)
    if not ok:
        return
    rows = df[df.notna().any(axis=1)] if dropna else df
    assert data.shape == rows.shape
    for j, col in enumerate(rows.columns):
        for i, value in enumerate(rows[col]):
            code = data.codes[i, j]
            assert (code == -1) == bool(pd.isna(value))
            if code >= 0:
                assert data.categories[j][code] == str(value)


@st.composite
def hide_args(draw):
    codes, n_cat, _ = draw(categorical_codes(max_rows=8, max_vars=4))
    fraction = draw(
        st.one_of(
            st.floats(0.3, 1.0),
            st.floats(0.3, 1.0),
            st.floats(-0.2, 1.2),
            st.sampled_from([1e-9, 1.0]),
        )
    )
    n_vars = codes.shape[1]
    variables = draw(
        st.one_of(
            st.none(),
            st.none(),
            st.lists(st.integers(-n_vars - 1, n_vars), min_size=0, max_size=3),
            st.lists(
                st.sampled_from([f"x{j}" for j in range(n_vars)] + ["zz"]), max_size=2
            ),
        )
    )
    min_observed = draw(
        st.one_of(
            st.integers(0, 2),
            st.integers(0, 2),
            st.integers(-2, 4),
            st.sampled_from([1.5, "1", None]),
        )
    )
    return codes, n_cat, fraction, variables, min_observed, draw(SEED)


@fuzz_test("CategoricalData.hide_entries")
@PROPERTY
@given(args=hide_args())
def test_hide_entries(args):
    codes, n_cat, fraction, variables, min_observed, seed = args
    data = CategoricalData.from_codes(codes, n_cat)
    ok, out = run(
        "CategoricalData.hide_entries",
        data.hide_entries,
        fraction,
        variables=variables,
        min_observed=min_observed,
        random_state=seed,
    )
    if not ok:
        return
    masked, hidden = out
    assert isinstance(min_observed, int) and min_observed >= 0  # B3 is fixed
    r, v, true = hidden.T
    np.testing.assert_array_equal(codes[r, v], true)
    assert np.all(true >= 0) and np.all(masked.codes[r, v] == -1)
    changed = masked.codes != data.codes
    assert changed.sum() == len(hidden)
    if isinstance(min_observed, int) and min_observed >= 0:
        n_before, n_after = data.mask.sum(1), masked.mask.sum(1)
        assert np.all(n_after >= np.minimum(n_before, min_observed))
    again = data.hide_entries(
        fraction, variables=variables, min_observed=min_observed, random_state=seed
    )
    np.testing.assert_array_equal(again[0].codes, masked.codes)
    np.testing.assert_array_equal(again[1], hidden)


@fuzz_test("CategoricalData.train_test_split")
@PROPERTY
@given(
    codes_nc=categorical_codes(max_rows=12),
    fractions=st.one_of(
        st.lists(st.integers(1, 5), min_size=1, max_size=4).map(
            lambda w: [x / sum(w) for x in w]
        ),
        st.floats(0.01, 0.99).map(lambda f: [f]),
        st.lists(st.floats(-0.5, 1.5), min_size=0, max_size=4),
    ),
    seed=SEED,
)
def test_train_test_split(codes_nc, fractions, seed):
    codes, n_cat, _ = codes_nc
    data = CategoricalData.from_codes(codes, n_cat)
    ok, parts = run(
        "CategoricalData.train_test_split",
        data.train_test_split,
        *fractions,
        random_state=seed,
    )
    if not ok:
        return
    assert all(p.n_samples > 0 for p in parts)
    rows = np.concatenate([p.codes for p in parts])
    assert rows.shape == codes.shape
    key = lambda a: a[np.lexsort(a.T[::-1])]  # noqa: E731
    np.testing.assert_array_equal(key(rows), key(codes))
    again = data.train_test_split(*fractions, random_state=seed)
    for a, b in zip(parts, again, strict=True):
        assert a == b


# ------------------------------------------------------------------ marginals

chunk_arg = st.one_of(st.none(), st.integers(-1, 5), st.sampled_from([2.5, True]))


@fuzz_test("pairwise_marginals")
@PROPERTY
@given(codes_nc=categorical_codes(), extra=st.integers(0, 2), chunk=chunk_arg)
def test_pairwise_marginals(codes_nc, extra, chunk):
    codes, n_cat, _ = codes_nc
    n_cat = n_cat + extra
    before = codes.copy()
    ok, m = run("pairwise_marginals", pairwise_marginals, codes, n_cat, chunk_size=chunk)
    np.testing.assert_array_equal(codes, before)
    if not ok:
        return
    joint, counts = brute_pairwise(codes, n_cat)
    np.testing.assert_allclose(m.joint, joint, atol=1e-12)
    np.testing.assert_array_equal(m.counts, counts)
    assert np.all(m.joint >= 0)
    for j in range(n_cat.size):
        for k in range(n_cat.size):
            total = m.pair(j, k).sum()
            assert np.isclose(total, 1.0) if counts[j, k] else total == 0


@fuzz_test("triple_marginals")
@PROPERTY
@given(
    codes_nc=categorical_codes(max_vars=5),
    triples=st.one_of(
        st.none(),
        st.lists(st.lists(st.integers(-1, 5), min_size=2, max_size=4), max_size=3),
    ),
    chunk=chunk_arg,
)
def test_triple_marginals(codes_nc, triples, chunk):
    codes, n_cat, _ = codes_nc
    ok, t = run(
        "triple_marginals", triple_marginals, codes, n_cat, triples, chunk_size=chunk
    )
    if not ok:
        return
    for key in t.triples:
        rows = np.all(codes[:, list(key)] >= 0, axis=1)
        assert t.counts[key] == rows.sum()
        tensor = np.zeros(tuple(n_cat[list(key)]))
        for r in codes[rows][:, list(key)]:
            tensor[tuple(r)] += 1
        if rows.sum():
            tensor /= rows.sum()
        np.testing.assert_allclose(t.tensor(*key), tensor, atol=1e-12)
    if triples is None:
        assert len(t.triples) == len(list(combinations(range(n_cat.size), 3)))


# ------------------------------------------------------------------ fitting

FIT_METHODS = ("em", "squarem", "cnmf-spa", "cnmf-spa-em")


@fuzz_test("LatentClassPMF.fit")
@PROPERTY
@given(
    codes_nc=categorical_codes(max_rows=12, max_vars=4, max_cat=3),
    method=st.sampled_from(FIT_METHODS),
    n_components=st.one_of(st.integers(1, 2), st.integers(0, 4)),
    max_iter=st.integers(1, 5),
    seed=SEED,
)
def test_latent_class_fit(codes_nc, method, n_components, max_iter, seed):
    event(f"method={method}")
    codes, n_cat, _ = codes_nc
    before = codes.copy()
    model = LatentClassPMF(n_components, method, max_iter=max_iter, random_state=seed)
    ok, fitted = run("LatentClassPMF.fit", model.fit, codes, n_categories=n_cat)
    np.testing.assert_array_equal(codes, before)
    if not ok:
        return
    check_params(fitted.weights_, fitted.factors_, n_cat)
    if method != "cnmf-spa":
        check_monotone(fitted.loglik_trace_)
        assert fitted.n_iter_ <= max_iter
    again = LatentClassPMF(n_components, method, max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings():
        # the same 1-5 iteration fit as above, where run() allowed its warning
        warnings.simplefilter("ignore", ConvergenceWarning)
        again.fit(codes, n_categories=n_cat)
    np.testing.assert_array_equal(again.weights_, fitted.weights_)  # bit-identical
    for a, b in zip(again.factors_, fitted.factors_, strict=True):
        np.testing.assert_array_equal(a, b)


@st.composite
def models_and_queries(draw):
    rng = np.random.default_rng(draw(SEED))
    codes, n_cat, _ = draw(categorical_codes(max_rows=8, max_vars=4))
    n_components = draw(st.integers(1, 3))
    sparse = draw(st.booleans())  # exact zeros in the factors, as CNMF-SPA can give
    factors = []
    for i in n_cat:
        a = rng.dirichlet(np.ones(i), size=n_components).T
        if sparse:
            a[rng.random(a.shape) < 0.3] = 0.0
            a[0, a.sum(axis=0) == 0] = 1.0
            a /= a.sum(axis=0)
        factors.append(a)
    model = LatentClassPMF.from_params(rng.dirichlet(np.ones(n_components)), factors)
    model._names = [f"x{j}" for j in range(n_cat.size)]
    query = draw(st.sampled_from(["same", "wider", "bad_code", "floats"]))
    if query == "wider":
        codes = np.column_stack([codes, np.zeros(len(codes), int)])
    elif query == "bad_code":
        codes = codes.copy()
        codes[0, 0] = n_cat[0]
    elif query == "floats":
        codes = codes.astype(float)
    target = draw(st.one_of(st.integers(-1, n_cat.size), st.sampled_from(["x0", "nope"])))
    return model, codes, target, sparse


def _impossible_rows(model, codes):
    """Rows whose observed entries have probability 0 under every class."""
    from bayespmf.pmf import class_log_joint

    with np.errstate(divide="ignore"):
        lj = class_log_joint(
            np.asarray(codes, dtype=np.int64), model.weights_, model.factors_
        )
    return np.all(np.isneginf(lj), axis=1)


@fuzz_test("LatentClassPMF.predict_proba")
@PROPERTY
@given(args=models_and_queries())
def test_predict_proba(args):
    model, codes, target, _ = args
    before = np.array(codes, copy=True)
    ok, proba = run(
        "LatentClassPMF.predict_proba",
        model.predict_proba,
        codes,
        target,
    )
    np.testing.assert_array_equal(codes, before)
    if not ok:
        return
    t = 0 if target == "x0" else target
    assert proba.shape == (len(codes), model.factors_[t].shape[0])
    check_simplex(proba, 1, "predict_proba rows")
    pred = model.predict(codes, target)
    np.testing.assert_array_equal(pred, proba.argmax(axis=1))


@fuzz_test("LatentClassPMF.score")
@PROPERTY
@given(args=models_and_queries())
def test_score(args):
    model, codes, _, _ = args
    ok, score = run("LatentClassPMF.score", model.score, codes)
    if not ok:
        return
    impossible = _impossible_rows(model, codes).any()
    assert np.isfinite(score) or (impossible and score == -np.inf)
    assert score <= 1e-12


@st.composite
def em_args(draw):
    codes, n_cat, _ = draw(categorical_codes(max_rows=10, max_vars=4, max_cat=3))
    n_components = draw(st.integers(1, 5))  # up to F >> I_n
    init_kind = draw(st.sampled_from(["none", "random", "wrong_rank", "unnormalized"]))
    rng = np.random.default_rng(draw(SEED))
    init = None
    if init_kind != "none":
        f = n_components + (init_kind == "wrong_rank")
        init = (
            rng.dirichlet(np.ones(f)),
            [rng.dirichlet(np.ones(i), size=f).T for i in n_cat],
        )
        if init_kind == "unnormalized":
            init = (init[0] * 2, init[1])
    return dict(
        codes=codes,
        n_cat=n_cat,
        n_components=n_components,
        init=init,
        accelerate=draw(st.sampled_from([None, "squarem"])),
        max_iter=draw(st.integers(1, 6)),
        tol=draw(st.sampled_from([0.0, 1e-8, 1e-3])),
        seed=draw(SEED),
    )


@fuzz_test("fit_em")
@PROPERTY
@given(args=em_args())
def test_fit_em(args):
    kw = dict(
        init=args["init"],
        n_categories=args["n_cat"],
        accelerate=args["accelerate"],
        max_iter=args["max_iter"],
        tol=args["tol"],
        random_state=args["seed"],
    )
    before = args["codes"].copy()
    ok, out = run("fit_em", fit_em, args["codes"], args["n_components"], **kw)
    np.testing.assert_array_equal(args["codes"], before)
    if not ok:
        return
    params, info = out
    check_params(params.weights, params.factors, args["n_cat"])
    check_monotone(info.loglik_trace)
    assert 1 <= info.n_iter <= args["max_iter"] and info.n_evals >= info.n_iter
    with warnings.catch_warnings():
        # the same 1-6 iteration fit as above, where run() allowed its warning
        warnings.simplefilter("ignore", ConvergenceWarning)
        again, info2 = fit_em(args["codes"], args["n_components"], **kw)
    np.testing.assert_array_equal(again.weights, params.weights)
    np.testing.assert_array_equal(info2.loglik_trace, info.loglik_trace)


#: Which argument of squarem a case breaks (0-4: none, so ~60% of cases are valid).
SQUAREM_BREAKS = ("none",) * 5 + ("scheme", "tol", "max_evals", "empty_x0", "nan_x0")


@st.composite
def squarem_cases(draw):
    rng = np.random.default_rng(draw(SEED))
    p = draw(st.integers(1, 4))
    a = rng.normal(size=(p, p))
    a *= draw(st.floats(0.0, 0.99)) / max(np.abs(np.linalg.eigvals(a)).max(), 1e-12)
    b = rng.normal(size=p)
    broken = SQUAREM_BREAKS[draw(st.integers(0, len(SQUAREM_BREAKS) - 1))]
    event(f"squarem broken={broken}")
    x0 = {"empty_x0": np.zeros(0), "nan_x0": np.full(p, np.nan)}.get(
        broken, rng.normal(size=p)
    )
    kwargs = {
        "scheme": "SqS4"
        if broken == "scheme"
        else draw(st.sampled_from(["SqS1", "SqS2", "SqS3"])),
        "tol": -1.0 if broken == "tol" else draw(st.sampled_from([1e-10, 1e-6])),
        "max_evals": draw(st.integers(-1, 1))
        if broken == "max_evals"
        else draw(st.integers(2, 60)),
    }
    return a, b, x0, kwargs, broken


@fuzz_test("squarem")
@PROPERTY
@given(case=squarem_cases(), with_objective=st.booleans())
def test_squarem(case, with_objective):
    a, b, x0, kwargs, broken = case
    before = x0.copy()
    x_star = np.linalg.solve(np.eye(len(b)) - a, b)

    def fmap(x):
        return a @ x + b

    objective = (lambda x: float(np.sum((x - x_star) ** 2))) if with_objective else None
    ok, out = run(
        "squarem", squarem, fmap, x0, objective, known_valid=broken == "none", **kwargs
    )
    np.testing.assert_array_equal(x0, before)
    if not ok:
        return
    x, info = out
    assert x.shape == x0.shape and np.all(np.isfinite(x))
    assert info.n_evals <= kwargs["max_evals"] + 2
    if info.converged:
        assert np.linalg.norm(fmap(x) - x) <= max(10 * kwargs["tol"], 1e-6)


@fuzz_test("squarem_pmf_step")
@PROPERTY
@given(
    codes_nc=categorical_codes(max_rows=10, max_vars=4, max_cat=3),
    n_components=st.integers(1, 4),
    seed=SEED,
)
def test_squarem_pmf_step(codes_nc, n_components, seed):
    codes, n_cat, _ = codes_nc
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(n_components))
    a = np.concatenate([rng.dirichlet(np.ones(i), size=n_components).T for i in n_cat])

    def step(w, a):
        return em_step_numpy(codes, n_cat, w, a)

    ok, out = run("squarem_pmf_step", squarem_pmf_step, step, w, a, n_cat, known_valid=True)
    if not ok:
        return
    w1, a1, ll0, info = out
    off = offsets_of(n_cat)
    check_params(w1, [a1[off[n] : off[n + 1]] for n in range(n_cat.size)], n_cat)
    ll1 = step(w1, a1)[2]
    assert np.isfinite(ll0) and ll1 >= ll0 - MONOTONE_RTOL * abs(ll0) - 1e-12
    assert info.n_evals >= 3


# ------------------------------------------------------------------ metrics


@st.composite
def metric_args(draw):
    rng = np.random.default_rng(draw(SEED))
    n_cat = draw(st.lists(st.integers(2, 3), min_size=1, max_size=3))
    n_components = draw(st.integers(1, 3))
    w = rng.dirichlet(np.ones(n_components))
    fs = [rng.dirichlet(np.ones(i), size=n_components).T for i in n_cat]
    perm = rng.permutation(n_components)
    broken = draw(
        st.sampled_from(["none", "none", "nan", "shape", "n_components", "empty"])
    )
    w2, fs2 = w[perm], [f[:, perm] for f in fs]
    if broken == "nan":
        fs2[0] = fs2[0].copy()
        fs2[0][0, 0] = np.nan
    elif broken == "shape":
        fs2 = fs2[:-1] if len(fs2) > 1 else [fs2[0][:1]]
    elif broken == "n_components":
        w2 = np.append(w2, 0.0)
    elif broken == "empty":
        fs2 = []
    return w, fs, w2, fs2, perm, broken


@fuzz_test(
    "metrics.factor_mse",
    "metrics.joint_pmf_relative_error",
    "metrics.match_components",
    "metrics.accuracy",
    "metrics.rmse",
    "metrics.mae",
)
@PROPERTY
@given(args=metric_args(), labels=st.lists(st.integers(0, 3), min_size=0, max_size=6))
def test_metrics(args, labels):
    w, fs, w2, fs2, _, broken = args
    valid = broken == "none"  # a relabelled truth
    ok, mse = run(
        "metrics.factor_mse", metrics.factor_mse, w2, fs2, w, fs, known_valid=valid
    )
    if ok:
        assert np.isfinite(mse) and mse >= 0
        if broken == "none":  # a relabelled truth has zero error
            assert mse < 1e-20
    ok, err = run(
        "metrics.joint_pmf_relative_error",
        metrics.joint_pmf_relative_error,
        (w2, fs2),
        (w, fs),
        known_valid=valid,
    )
    if ok:
        assert np.isfinite(err) and err >= 0
        if broken == "none":
            assert err < 1e-12
    ok, match = run(
        "metrics.match_components", metrics.match_components, fs2, fs, known_valid=valid
    )
    if ok:
        assert sorted(np.asarray(match).tolist()) == list(range(len(w)))
    pred = labels[::-1]
    ok, acc = run("metrics.accuracy", metrics.accuracy, labels, pred)
    if ok:
        assert 0 <= acc <= 1
    ok, r = run("metrics.rmse", metrics.rmse, labels, pred)
    ok2, m = run("metrics.mae", metrics.mae, labels, pred)
    if ok and ok2:
        assert r >= m - 1e-12 >= -1e-12


# ------------------------------------------------------------------ extreme cases


def test_one_observed_entry_per_row():
    rng = np.random.default_rng(0)
    codes = np.full((40, 4), -1)
    codes[np.arange(40), np.arange(40) % 4] = rng.integers(0, 3, 40)
    for method in ("em", "squarem"):
        model = LatentClassPMF(2, method, random_state=0, max_iter=50).fit(
            codes, n_categories=[3] * 4
        )
        check_params(model.weights_, model.factors_, [3] * 4)
        check_monotone(model.loglik_trace_)
    with pytest.raises(DataValidationError, match="co-observed"):
        LatentClassPMF(2, "cnmf-spa", random_state=0).fit(codes, n_categories=[3] * 4)


# boundary fits (factor entries -> 0) converge slowly; 100 iterations check the shape
@pytest.mark.filterwarnings("ignore::bayespmf.ConvergenceWarning")
def test_category_never_observed_and_rank_one():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 2, (30, 3))  # category 2 of every variable never occurs
    for n_components in (1, 2):
        model = LatentClassPMF(n_components, "em", random_state=0, max_iter=100).fit(
            codes, n_categories=[3] * 3
        )
        assert np.all(np.concatenate([a[2] for a in model.factors_]) < 1e-6)
        proba = model.predict_proba(np.array([[2, 2, -1]]), target=2)
        check_simplex(proba, 1, "proba")


def test_rank_much_larger_than_alphabet():
    codes = np.random.default_rng(2).integers(0, 2, (25, 3))
    with pytest.raises(DataValidationError, match="cannot be identified"):
        LatentClassPMF(10, "em").fit(codes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 20 iterations, F >> I_n
        params, info = fit_em(codes, 10, max_iter=20, random_state=0)
    check_params(params.weights, params.factors, [2, 2, 2])
    check_monotone(info.loglik_trace)


# 5-10 iterations on 200 variables: only finiteness is checked, not convergence
@pytest.mark.filterwarnings("ignore::bayespmf.ConvergenceWarning")
def test_underflow_with_200_variables():
    # 200 variables of 100 categories: a row's probability is ~ 100**-200 = 1e-400,
    # below the smallest double (exp(-745)): only log-space code survives
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 100, (30, 200))
    start = init_random([100] * 200, 3, random_state=0)
    params, info = fit_em(codes, 3, init=start, n_categories=[100] * 200, max_iter=10)
    check_monotone(info.loglik_trace)
    assert info.loglik_trace[0] < -745 * len(codes)
    for p in (start, params):
        model = LatentClassPMF.from_params(p.weights, p.factors)
        rows = model.score_samples(codes)
        assert np.all(np.isfinite(rows))
        check_simplex(model.predict_proba(codes, target=5), 1, "proba")
    assert np.all(LatentClassPMF.from_params(*start).score_samples(codes) < -745)
    # and the estimator's own paths on 200 variables with 20% missing
    small = np.minimum(codes, 3)
    small[rng.random(small.shape) < 0.2] = -1
    for method in ("em", "cnmf-spa-em"):
        fitted = LatentClassPMF(3, method, random_state=0, max_iter=5).fit(
            small, n_categories=[4] * 200
        )
        check_params(fitted.weights_, fitted.factors_, [4] * 200)
        check_monotone(fitted.loglik_trace_)


# ------------------------------------------- regressions of the crashes found


def test_b1_many_variables_do_not_overflow():
    # prod(I_n) = 10**400 overflows a float: B1 showed as an OverflowError or an
    # "overflow encountered" RuntimeWarning, so neither may occur here
    codes = np.random.default_rng(0).integers(0, 10, (20, 400))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter=2 on purpose
        model = LatentClassPMF(2, "em", max_iter=2, random_state=0).fit(
            codes, n_categories=[10] * 400
        )
    assert model.weights_.shape == (2,)
    assert np.all(np.isfinite(model.loglik_trace_))


def test_b2_predict_proba_of_an_impossible_row():
    a0 = np.array([[1.0, 1.0], [0.0, 0.0]])  # x0 = 1 has probability 0 in every class
    a1 = np.array([[0.3, 0.6], [0.7, 0.4]])
    model = LatentClassPMF.from_params([0.5, 0.5], [a0, a1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        proba = model.predict_proba(np.array([[1, 0]]), target=1)
    check_simplex(proba, 1, "proba")


def test_b3_hide_entries_validates_min_observed():
    data = CategoricalData.from_codes(np.arange(12).reshape(6, 2) % 3)
    for bad in ("1", None, 1.5, -1):
        with pytest.raises(ValueError, match="min_observed"):
            data.hide_entries(0.5, min_observed=bad, random_state=0)


def test_b4_hide_entries_with_no_variables():
    data = CategoricalData.from_codes([[1, 0], [0, 1]])
    with pytest.raises(DataValidationError, match="variables"):
        data.hide_entries(1.0, variables=[], random_state=0)
