"""Tests of bayespmf._validation: 1-based codes, data objects, one-way imports."""

import ast
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayespmf._validation as validation
from bayespmf import CategoricalData, DataValidationError
from bayespmf._validation import as_codes, check_zero_based

#: poLCA codes every variable 1..K; here K = 2, 3, 2 with one missing entry.
POLCA_CODES = np.array([[1, 1, 2], [2, 3, 1], [1, 2, -1], [2, 1, 1], [1, 3, 2]])
#: The same data coded from 0 (the fix the error message gives).
ZERO_BASED = np.where(POLCA_CODES > 0, POLCA_CODES - 1, -1)


def test_as_codes_refuses_one_based_codes_by_argument_name():
    with pytest.raises(
        DataValidationError, match=r"'data' looks 1-based: code 0 never occurs"
    ):
        as_codes(POLCA_CODES)
    with pytest.raises(DataValidationError, match=r"^'train' looks 1-based.*\[1, 1, 1\]"):
        as_codes(POLCA_CODES, name="train")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, np.float64, bool])
def test_one_based_check_for_every_integer_like_dtype(dtype):
    # no missing entries (uint8 and bool cannot hold -1); bool: every column all True
    codes = np.ones((3, 2), dtype=bool) if dtype is bool else POLCA_CODES[[0, 1, 3, 4]]
    with pytest.raises(DataValidationError, match="1-based"):
        as_codes(codes.astype(dtype))


def test_as_codes_fixes_and_explicit_alphabet():
    codes, n_cat = as_codes(ZERO_BASED)
    assert n_cat.tolist() == [2, 3, 2] and codes[2, 2] == -1
    codes, n_cat = as_codes(POLCA_CODES, [3, 4, 3])  # 0 declared: no check
    assert n_cat.tolist() == [3, 4, 3]
    np.testing.assert_array_equal(codes, POLCA_CODES)


def test_some_variables_without_zero_pass_silently():
    codes = POLCA_CODES.copy()
    codes[0, 1] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, n_cat = as_codes(codes)
    assert n_cat.tolist() == [3, 4, 3]


def test_check_zero_based_lists_at_most_ten_minima():
    check_zero_based([0, 1, 1])
    check_zero_based([])
    with pytest.raises(
        DataValidationError, match=r"\[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, \.\.\.\]"
    ):
        check_zero_based(np.full(12, 2), "codes")


# ------------------------------------------------------- data objects without a circle


def test_validation_imports_nothing_from_bayespmf():
    """Issue 14: data.py imports _validation, so _validation must not import data."""
    tree = ast.parse(Path(validation.__file__).read_text())
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert not [m for m in imported if m and m.startswith("bayespmf")], imported


def test_categorical_data_is_passed_through_unchanged():
    data = CategoricalData.from_codes(ZERO_BASED)
    codes, n_cat = as_codes(data)
    assert codes is data.codes and n_cat is data.n_categories
    codes, n_cat = as_codes(data, [2, 3, 2])
    assert codes is data.codes
    with pytest.raises(
        DataValidationError,
        match=r"'n_categories' \(\[3, 3, 3\]\) disagrees with the CategoricalData "
        r"passed as 'data'",
    ):
        as_codes(data, [3, 3, 3])


class _Duck:
    """An object with the attributes of a data object, but mutable arrays."""

    def __init__(self, codes, n_categories):
        self.codes = np.asarray(codes)
        self.n_categories = np.asarray(n_categories)


def test_other_objects_with_codes_are_checked_and_copied():
    duck = _Duck(ZERO_BASED, [2, 3, 2])
    codes, n_cat = as_codes(duck)
    assert codes is not duck.codes and not codes.flags.writeable
    np.testing.assert_array_equal(codes, duck.codes)
    assert n_cat.tolist() == [2, 3, 2]
    with pytest.raises(DataValidationError, match=r"code 2 at row 1, variable 0"):
        as_codes(_Duck(POLCA_CODES, [2, 3, 3]), name="data")
