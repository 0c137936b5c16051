"""The one-standard-error rule against a hand computation."""

import math

import numpy as np
import pytest

from jaxannot.tuning.selection import smallest_within_one_se


def _row(value, folds):
    return {"params": {"bins": value}, "folds": folds, "mean": float(np.mean(folds))}


def test_the_smallest_value_within_one_paired_standard_error_of_the_best():
    best = [0.80, 0.70, 0.75]
    rows = [
        _row(10, [0.70, 0.60, 0.66]),  # far below
        _row(20, [0.797, 0.695, 0.749]),  # d = (-.003, -.005, -.001)
        _row(40, best),
        _row(80, [0.799, 0.701, 0.749]),  # d = (-.001, .001, -.001)
    ]
    # by hand: value 20's mean difference -0.003, its paired sd 0.002, se 0.002/√3
    d = np.array([-0.003, -0.005, -0.001])
    assert d.mean() < -d.std(ddof=1) / math.sqrt(3)  # 20 is outside
    assert smallest_within_one_se(rows, "bins", True) == 40
    # a larger spread of the paired differences lets 20 in
    rows[1] = _row(20, [0.797, 0.690, 0.759])
    assert smallest_within_one_se(rows, "bins", True) == 20


def test_fold_difficulty_shared_by_every_value_is_not_noise():
    """Folds of very different difficulty, a constant 0.001 gap: the unpaired
    spread (0.05) would call 10 a tie, the paired one does not."""
    rows = [_row(10, [0.899, 0.799, 0.699]), _row(20, [0.9, 0.8, 0.7])]
    assert smallest_within_one_se(rows, "bins", True) == 20


def test_lower_is_better_and_nan_settings():
    rows = [
        _row(1, [0.30, 0.31, 0.29]),
        {"params": {"bins": 2}, "folds": [math.nan] * 3, "mean": None},
        _row(4, [0.20, 0.21, 0.19]),
    ]
    assert smallest_within_one_se(rows, "bins", False) == 4
    with pytest.raises(ValueError, match="alone"):
        smallest_within_one_se(
            [{"params": {"a": 1, "b": 2}, "folds": [1], "mean": 1}], "a", True
        )
