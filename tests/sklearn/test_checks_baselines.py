"""scikit-learn's estimator checks for Empirical, Knn (both weights) and TagProp: every
check of ``parametrize_with_checks`` (tests/sklearn/conftest.py parametrizes them)."""

FAMILY = "baselines"


def test_sklearn_checks(estimator, check):
    check(estimator)
