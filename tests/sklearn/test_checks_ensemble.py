"""scikit-learn's estimator checks for the Ensemble: every check of
``parametrize_with_checks`` (tests/sklearn/conftest.py parametrizes them)."""

FAMILY = "ensemble"


def test_sklearn_checks(estimator, check):
    check(estimator)
