"""The one-standard-error rules against hand computations (ESL sec. 7.10)."""

import math

import numpy as np
import pytest

from jaxannot.tuning.selection import incumbent_within_one_se, smallest_within_one_se


def _row(value, folds):
    return {"params": {"bins": value}, "folds": folds, "mean": float(np.mean(folds))}


def test_the_smallest_value_within_one_standard_error_of_the_best_score():
    best = [0.80, 0.70, 0.75]
    rows = [
        _row(10, [0.60, 0.55, 0.62]),  # mean 0.59: far below
        _row(20, [0.70, 0.71, 0.72]),  # mean 0.71
        _row(40, best),  # mean 0.75, the best
        _row(80, [0.76, 0.74, 0.74]),  # mean 0.7467
    ]
    # by hand: the best's fold scores 0.80, 0.70, 0.75 have sd 0.05 (ddof 1), so its
    # standard error is 0.05 / sqrt(3) = 0.02887 and the threshold 0.75 - 0.02887
    # = 0.72113: 20 (0.71) is outside, 40 and 80 within
    se = 0.05 / math.sqrt(3)
    assert np.std(best, ddof=1) == pytest.approx(0.05)
    assert 0.71 < 0.75 - se < 0.7467
    assert smallest_within_one_se(rows, "bins", True) == 40
    # a noisier best (sd 0.1, se 0.0577, threshold 0.6923) lets 20 in
    rows[2] = _row(40, [0.85, 0.65, 0.75])
    assert smallest_within_one_se(rows, "bins", True) == 20


def test_the_spread_of_the_best_settings_scores_decides_not_the_paired_gap():
    """Folds of very different difficulty and a constant 0.001 gap: a paired rule
    would keep 10 out (the gap never varies); ESL's rule compares the gap with the
    best score's own standard error (0.1 / sqrt(3)) and takes 10."""
    rows = [_row(10, [0.899, 0.799, 0.699]), _row(20, [0.9, 0.8, 0.7])]
    assert smallest_within_one_se(rows, "bins", True) == 10


def test_lower_is_better_and_nan_settings():
    rows = [
        _row(1, [0.30, 0.31, 0.29]),
        {"params": {"bins": 2}, "folds": [math.nan] * 3, "mean": None},
        _row(4, [0.20, 0.21, 0.19]),
        _row(8, [0.195, 0.215, 0.19]),
    ]
    # the best (lowest) is 4, se 0.01 / sqrt(3): 1 is far outside, 2 has no score
    assert smallest_within_one_se(rows, "bins", False) == 4
    with pytest.raises(ValueError, match="alone"):
        smallest_within_one_se(
            [{"params": {"a": 1, "b": 2}, "folds": [1], "mean": 1}], "a", True
        )


def _opt(value, folds):
    return {
        "params": {"optimizer": value},
        "folds": folds,
        "mean": float(np.mean(folds)),
    }


def test_the_incumbent_stays_unless_beaten_by_more_than_one_standard_error():
    # the best, sgd: folds 0.80, 0.70, 0.75, se 0.05 / sqrt(3) = 0.02887, threshold
    # 0.72113 (by hand, as above): adam (0.73) is within, lbfgs (0.71) is not
    rows = [
        _opt("adam", [0.74, 0.72, 0.73]),
        _opt("sgd", [0.80, 0.70, 0.75]),
        _opt("lbfgs", [0.70, 0.71, 0.72]),
    ]
    assert incumbent_within_one_se(rows, "optimizer", True, "adam") == "adam"
    assert incumbent_within_one_se(rows, "optimizer", True, "lbfgs") == "sgd"
    assert incumbent_within_one_se(rows, "optimizer", True, "sgd") == "sgd"
    # lower is better: the best is lbfgs (0.71, se 0.01 / sqrt(3)); adam is 0.02 off
    assert incumbent_within_one_se(rows, "optimizer", False, "adam") == "lbfgs"
    with pytest.raises(ValueError, match="not in the run"):
        incumbent_within_one_se(rows, "optimizer", True, "rmsprop")


def test_a_joint_run_keeps_todays_combination_unless_beaten_by_one_standard_error():
    def row(lr, opt, folds):
        return {
            "params": {"learning_rate": lr, "optimizer": opt},
            "folds": folds,
            "mean": float(np.mean(folds)),
        }

    # best (0.0025, sgd): folds 0.66, 0.63, 0.67, sd 0.02082, se 0.01202: the
    # threshold 0.65333 - 0.01202 = 0.64131 by hand; (0.01, adam) at 0.6500 is within
    rows = [
        row(0.0025, "sgd", [0.66, 0.63, 0.67]),
        row(0.01, "adam", [0.65, 0.64, 0.66]),
        row(0.01, "sgd", [0.60, 0.61, 0.62]),
    ]
    keys = ["learning_rate", "optimizer"]
    today = {"learning_rate": 0.01, "optimizer": "adam", "other": 3}
    kept = incumbent_within_one_se(rows, keys, True, today)
    assert kept == {"learning_rate": 0.01, "optimizer": "adam"}
    # (0.01, sgd) at 0.61 is outside: the best combination, both keys
    worse = {**today, "optimizer": "sgd"}
    moved = incumbent_within_one_se(rows, keys, True, worse)
    assert moved == {"learning_rate": 0.0025, "optimizer": "sgd"}
    with pytest.raises(ValueError, match="not in the run"):
        incumbent_within_one_se(rows, keys, True, {**today, "learning_rate": 1.0})
    with pytest.raises(ValueError, match="alone"):
        incumbent_within_one_se(rows, ["learning_rate"], True, today)
