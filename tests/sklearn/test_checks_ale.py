"""scikit-learn's estimator checks for the ALE family (ALESF, ALESVM, IALESF, IALESVM)
and its baselines BSVM and GSF: every check of ``parametrize_with_checks``
(tests/sklearn/conftest.py parametrizes them)."""

FAMILY = "ale"


def test_sklearn_checks(estimator, check):
    check(estimator)
