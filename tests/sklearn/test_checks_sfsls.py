"""scikit-learn's estimator checks for SFSLS, SFSS and FSNM: every check of
``parametrize_with_checks`` (tests/sklearn/conftest.py parametrizes them)."""

FAMILY = "sfsls"


def test_sklearn_checks(estimator, check):
    check(estimator)
