"""scikit-learn's estimator checks for the harmoniums (DWH, DWHSVM, TWH, MMH,
MmhRegression) and SVM: every check of ``parametrize_with_checks``
(tests/sklearn/conftest.py parametrizes them)."""

FAMILY = "harmoniums"


def test_sklearn_checks(estimator, check):
    check(estimator)
