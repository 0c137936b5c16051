"""The protocol every registered method follows, checked on a tiny synthetic corpus.

For each method: fit, score_words of the right shape and finite, the same scores after
a save/load round trip, embed / predict_labels of the right shape where present.
"""

import numpy as np
import pytest

import jax

from jaxannot.annotators import available_methods, load, save
from jaxannot.data import make_task
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import check_applicable

METHODS = sorted(available_methods())


@pytest.fixture(scope="module")
def task():
    corpus = make_synthetic(seed=0, num_images=120, num_classes=True)
    return make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.25)


@pytest.mark.parametrize("name", METHODS)
def test_method_follows_the_protocol(name, task, tmp_path):
    method = available_methods()[name]
    check_applicable(method, task)
    fitted = method.fit(task.train, rng_key=jax.random.key(0), **method.hyper)
    assert fitted.method == name
    n, w = task.test.num_images, task.train.num_words
    path = tmp_path / f"{name}.npz"
    save(path, fitted)
    loaded = load(path)
    if method.score_words is not None:
        scores = np.asarray(method.score_words(fitted, task.test))
        assert scores.shape == (n, w) and np.all(np.isfinite(scores))
        again = np.asarray(method.score_words(loaded, task.test))
        np.testing.assert_allclose(again, scores, rtol=1e-5, atol=1e-6)
    if method.predict_labels is not None:
        labels = np.asarray(method.predict_labels(loaded, task.test))
        assert labels.shape == (n,)
    if method.embed is not None:
        z = np.asarray(method.embed(loaded, task.test))
        assert z.ndim == 2 and z.shape[0] == n and np.all(np.isfinite(z))


def test_registry_lists_baselines():
    assert {"empirical", "knn"} <= set(METHODS)
