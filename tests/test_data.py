import warnings

import numpy as np
import pandas as pd
import pytest

from bayespmf import CategoricalData, DataValidationError
from bayespmf._validation import as_codes, check_float, check_int, check_random_state


def small_codes():
    return np.array([[0, 2, 1], [1, -1, 0], [-1, 0, 1], [1, 1, -1]])


def test_from_codes_basic_and_read_only():
    codes = small_codes()
    before = codes.copy()
    data = CategoricalData.from_codes(codes, n_categories=[2, 3, 2])
    assert data.shape == (4, 3)
    assert data.n_categories.tolist() == [2, 3, 2]
    assert data.names == ["x0", "x1", "x2"]
    assert data.categories[1] == ["0", "1", "2"]
    np.testing.assert_array_equal(data.mask, codes >= 0)
    assert data.missing_fraction == pytest.approx(3 / 12)
    with pytest.raises(ValueError):
        data.codes[0, 0] = 1
    codes[0, 0] = 1  # the container holds a copy
    assert data.codes[0, 0] == 0
    np.testing.assert_array_equal(before[1:], codes[1:])


def test_from_codes_infers_alphabet():
    data = CategoricalData.from_codes([[0, 1], [1, 2]])
    assert data.n_categories.tolist() == [2, 3]


def test_scalar_n_categories_broadcasts():
    assert CategoricalData.from_codes([[0, 1]], 4).n_categories.tolist() == [4, 4]


@pytest.mark.parametrize(
    ("codes", "kwargs", "match"),
    [
        (np.zeros(3, dtype=int), {}, "ndim=1"),
        (np.zeros((0, 3), dtype=int), {}, "empty"),
        (np.zeros((2, 0), dtype=int), {}, "empty"),
        (np.array([[0, np.nan]]), {"n_categories": 2}, "NaN"),
        (np.array([[0.5, 1.0]]), {"n_categories": 2}, "non-integer"),
        (np.array([["a", "b"]]), {}, "dtype"),
        (np.array([[0, 3]]), {"n_categories": [2, 3]}, "code 3 at row 0, variable 1"),
        (np.array([[0, -2]]), {"n_categories": 3}, "code -2"),
        (np.array([[0, 1]]), {"n_categories": [1, 3]}, "at least 2 categories"),
        (np.array([[0, 1]]), {"n_categories": [2, 2, 2]}, "one per"),
        (np.array([[0, 0], [0, 1]]), {}, r"Variable\(s\) \[0\]"),
    ],
)
def test_from_codes_errors(codes, kwargs, match):
    with pytest.raises(DataValidationError, match=match):
        CategoricalData.from_codes(codes, **kwargs)


def test_names_and_categories_errors():
    with pytest.raises(DataValidationError, match="one entry per variable"):
        CategoricalData.from_codes([[0, 1]], 2, names=["a"])
    with pytest.raises(DataValidationError, match="must be unique"):
        CategoricalData.from_codes([[0, 1]], 2, names=["a", "a"])
    with pytest.raises(DataValidationError, match="one list of labels"):
        CategoricalData.from_codes([[0, 1]], 2, categories=[["a", "b"], ["c"]])


def test_as_codes_row_and_column_checks():
    codes = np.array([[0, -1], [-1, -1]])
    with pytest.raises(DataValidationError, match="never observed"):
        as_codes(codes, [2, 2])
    as_codes(codes, [2, 2], allow_empty_columns=True)
    with pytest.raises(DataValidationError, match="every entry missing"):
        as_codes(np.array([[0, 1], [-1, -1]]), [2, 2], allow_empty_rows=False)
    data = CategoricalData.from_codes([[0, 1]], 2)
    with pytest.raises(DataValidationError, match="disagrees"):
        as_codes(data, [3, 3])


def test_from_pandas_roundtrip_and_labels():
    df = pd.DataFrame(
        {
            "colour": ["red", None, "blue", "red"],
            "size": pd.Categorical(["S", "M", np.nan, "S"], categories=["S", "M", "L"]),
            "flag": [True, False, True, np.nan],
            "n": [1, 2, 2, 1],
        }
    )
    before = df.copy()
    data = CategoricalData.from_pandas(df)
    pd.testing.assert_frame_equal(df, before)
    assert data.names == ["colour", "size", "flag", "n"]
    assert data.categories[0] == ["blue", "red"]
    assert data.categories[1] == ["S", "M", "L"]  # declared order, unused level kept
    assert data.codes[:, 0].tolist() == [1, -1, 0, 1]
    assert data.codes[:, 1].tolist() == [0, 1, -1, 0]
    assert data.codes[:, 2].tolist() == [1, 0, 1, -1]
    back = data.to_pandas()
    assert back["colour"].tolist()[:1] == ["red"] and pd.isna(back["colour"][1])
    assert CategoricalData.from_pandas(back) == data


def test_from_pandas_errors():
    with pytest.raises(DataValidationError, match=r"pandas\.DataFrame"):
        CategoricalData.from_pandas(np.zeros((2, 2)))
    with pytest.raises(DataValidationError, match="empty"):
        CategoricalData.from_pandas(pd.DataFrame())
    with pytest.raises(DataValidationError, match=r"Column 'c'.*1 distinct"):
        CategoricalData.from_pandas(pd.DataFrame({"c": ["a", "a"], "d": ["x", "y"]}))


def test_dropna_rows_in_from_pandas():
    df = pd.DataFrame({"a": ["x", None, "y"], "b": ["u", None, "v"]})
    assert CategoricalData.from_pandas(df, dropna_rows=True).n_samples == 2
    assert CategoricalData.from_pandas(df).n_samples == 3


def test_subsetting_and_variables():
    data = CategoricalData.from_codes(small_codes(), [2, 3, 2], names=["a", "b", "c"])
    assert data[[0, 2]].codes.tolist() == [[0, 2, 1], [-1, 0, 1]]
    assert data[np.array([True, False, False, True])].n_samples == 2
    assert data[1].n_samples == 1
    sel = data.select_variables(["c", 0])
    assert sel.names == ["c", "a"] and sel.n_categories.tolist() == [2, 2]
    with pytest.raises(DataValidationError, match="Did you mean 'b'"):
        data.index_of("bb")
    with pytest.raises(DataValidationError, match="out of range"):
        data.index_of(5)
    with pytest.raises(DataValidationError, match="rows only"):
        data[0, 1]
    with pytest.raises(DataValidationError, match="empty"):
        data[np.zeros(4, dtype=bool)]


def test_train_test_split_partition(rng):
    codes = rng.integers(0, 3, size=(101, 4))
    data = CategoricalData.from_codes(codes, 3)
    parts = data.train_test_split(0.5, 0.2, 0.3, random_state=1)
    sizes = [p.n_samples for p in parts]
    assert sum(sizes) == 101
    assert all(abs(n - f * 101) <= 1 for n, f in zip(sizes, (0.5, 0.2, 0.3), strict=True))
    stacked = np.vstack([p.codes for p in parts])
    # the parts partition the rows: same multiset of rows
    assert sorted(map(tuple, stacked)) == sorted(map(tuple, codes))
    again = data.train_test_split(0.5, 0.2, 0.3, random_state=1)
    assert all(a == b for a, b in zip(parts, again, strict=True))
    other = data.train_test_split(0.5, 0.2, 0.3, random_state=2)
    assert parts[0] != other[0]
    with pytest.raises(DataValidationError, match="sum to 1"):
        data.train_test_split(0.5, 0.2)
    with pytest.raises(ValueError, match="fractions"):
        data.train_test_split(0.0, 1.0)


def test_hide_entries(rng):
    codes = rng.integers(0, 4, size=(200, 6))
    codes[rng.random(codes.shape) < 0.3] = -1
    data = CategoricalData.from_codes(codes, 4)
    masked, hidden = data.hide_entries(0.2, min_observed=2, random_state=3)
    n_obs = int(data.mask.sum())
    eligible = int(np.minimum(data.mask.sum(1), 6).sum())
    assert hidden.shape[0] == round(0.2 * eligible) and eligible == n_obs
    np.testing.assert_array_equal(hidden[:, 2], codes[hidden[:, 0], hidden[:, 1]])
    assert np.all(masked.codes[hidden[:, 0], hidden[:, 1]] == -1)
    assert int(masked.mask.sum()) == n_obs - hidden.shape[0]
    rows_before = data.mask.sum(1)
    assert np.all(masked.mask.sum(1) >= np.minimum(rows_before, 2))
    _m2, h2 = data.hide_entries(0.2, min_observed=2, random_state=3)
    np.testing.assert_array_equal(hidden, h2)
    _only, h3 = data.hide_entries(0.5, variables=[1], random_state=0)
    assert set(h3[:, 1].tolist()) == {1}
    with pytest.raises(ValueError, match="fraction"):
        data.hide_entries(1.5)
    with pytest.raises(DataValidationError, match="Cannot hide"):
        data.hide_entries(1.0, min_observed=6)


def test_summary_and_repr():
    data = CategoricalData.from_codes(small_codes(), [2, 3, 2], names=["a", "b", "c"])
    s = data.summary()
    assert s.loc["a", "n_observed"] == 3 and s.loc["a", "mode"] == "1"
    assert "n_samples=4" in repr(data)


def test_helpers():
    assert isinstance(check_random_state(None), np.random.Generator)
    g = np.random.default_rng(0)
    assert check_random_state(g) is g
    a = check_random_state(5).random(3)
    np.testing.assert_array_equal(a, check_random_state(5).random(3))
    with pytest.raises(ValueError, match="random_state"):
        check_random_state(np.random.RandomState(0))
    with pytest.raises(ValueError, match="random_state"):
        check_random_state(-1)
    with pytest.raises(
        ValueError, match=r"'n_components' parameter of X must be an int >= 1. Got 0"
    ):
        check_int(0, "n_components", owner="X", low=1)
    with pytest.raises(ValueError, match="must be an int"):
        check_int(True, "n_components")
    with pytest.raises(ValueError, match="tol"):
        check_float(float("nan"), "tol")
    with pytest.raises(ValueError, match="tol"):
        check_float(0.0, "tol", low=0.0, low_open=True)


# ------------------------------------------------------------ 1-based codes (issue 11)

#: A poLCA-style matrix: four variables coded 1..K (K = 2, 3, 2, 4), no missing.
POLCA_CODES = np.array(
    [
        [1, 1, 2, 4],
        [2, 3, 1, 1],
        [1, 2, 2, 2],
        [2, 1, 1, 3],
        [2, 3, 2, 1],
        [1, 2, 1, 4],
    ]
)


def test_one_based_codes_are_refused_with_the_fix():
    with pytest.raises(DataValidationError, match=r"'codes' looks 1-based") as info:
        CategoricalData.from_codes(POLCA_CODES)
    msg = str(info.value)
    assert "smallest observed code per variable: [1, 1, 1, 1]" in msg
    assert "codes - 1" in msg
    assert "CategoricalData.from_pandas" in msg
    assert "pass 'n_categories' explicitly" in msg
    # the constructor takes the same path
    with pytest.raises(DataValidationError, match="1-based"):
        CategoricalData(POLCA_CODES)


def test_one_based_codes_with_missing_entries():
    codes = POLCA_CODES.copy()
    codes[0, 0] = codes[1, 1] = -1  # -1 is missing, not a code below 1
    with pytest.raises(DataValidationError, match=r"per variable: \[1, 1, 1, 1\]"):
        CategoricalData.from_codes(codes)
    codes[:, 1] = np.where(codes[:, 1] > 0, codes[:, 1] + 1, -1)  # variable 1 starts at 2
    with pytest.raises(DataValidationError, match=r"per variable: \[1, 2, 1, 1\]"):
        CategoricalData.from_codes(codes)


def test_the_suggested_fixes_work():
    shifted = CategoricalData.from_codes(POLCA_CODES - 1)
    assert shifted.n_categories.tolist() == [2, 3, 2, 4]
    with_missing = POLCA_CODES.copy()
    with_missing[2, 3] = -1
    fixed = CategoricalData.from_codes(np.where(with_missing > 0, with_missing - 1, -1))
    assert fixed.codes[2, 3] == -1 and fixed.n_categories.tolist() == [2, 3, 2, 4]
    labelled = CategoricalData.from_pandas(pd.DataFrame(POLCA_CODES))
    np.testing.assert_array_equal(labelled.codes, POLCA_CODES - 1)
    assert labelled.categories[3] == ["1", "2", "3", "4"]
    # 0 declared as a real (unused) category: explicit n_categories, no check
    declared = CategoricalData.from_codes(POLCA_CODES, n_categories=[3, 4, 3, 5])
    assert declared.n_categories.tolist() == [3, 4, 3, 5]
    np.testing.assert_array_equal(declared.codes, POLCA_CODES)


def test_zero_missing_from_only_some_variables_passes_silently():
    codes = POLCA_CODES.copy()
    codes[:, 2] -= 1  # variable 2 uses 0; 0 never occurs in the others (unused)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = CategoricalData.from_codes(codes)
    assert data.n_categories.tolist() == [3, 4, 2, 5]


def test_subsets_keep_their_alphabet():
    # row subsets in which no variable happens to use 0 keep the parent's n_categories
    data = CategoricalData.from_codes(np.vstack([[0, 0, 0, 0], POLCA_CODES]))
    assert data[1:].n_categories.tolist() == [3, 4, 3, 5]
    assert data.select_variables([1, 3])[1:].n_categories.tolist() == [4, 5]
