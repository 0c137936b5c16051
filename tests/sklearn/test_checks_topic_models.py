"""scikit-learn's estimator checks for the topic models (MixUnigram, LapMixUnigram,
PLSAWords, LinkLDA, LapLinkLDA): every check of ``parametrize_with_checks``
(tests/sklearn/conftest.py parametrizes them)."""

FAMILY = "topic_models"


def test_sklearn_checks(estimator, check):
    check(estimator)
