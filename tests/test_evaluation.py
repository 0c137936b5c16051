import numpy as np
import pytest

from jaxannot.annotators import Method
from jaxannot.data import Corpus, make_task
from jaxannot.evaluation import evaluate


def _task(num_words: int):
    rng = np.random.default_rng(0)
    corpus = Corpus.from_arrays(
        {"x": rng.normal(size=(20, 3)).astype(np.float32)},
        words=(rng.random((20, num_words)) < 0.5).astype(np.float32),
    )
    return make_task(corpus, None, protocol="inductive", seed=0)


def _never_fitted(corpus, *, rng_key):
    raise AssertionError("fitted although the dataset is refused")


PROBE = Method("probe", _never_fitted, score_words=lambda fitted, corpus: None)


def test_fewer_words_than_the_metrics_rank_is_refused_before_the_fit():
    with pytest.raises(ValueError, match=r"has 4 word\(s\) .* need at least 5"):
        evaluate(PROBE, _task(4))
    with pytest.raises(AssertionError, match="fitted although"):  # 4 are enough
        evaluate(PROBE, _task(4), n=4)
    with pytest.raises(AssertionError, match="fitted although"):
        evaluate(PROBE, _task(5))
