"""scikit-learn's estimator checks for EMML and MBRM: every check of
``parametrize_with_checks`` (tests/sklearn/conftest.py parametrizes them)."""

FAMILY = "emml"


def test_sklearn_checks(estimator, check):
    check(estimator)
