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


@pytest.mark.parametrize("name", METHODS)
def test_tune_cross_validates_every_method(name, task):
    # `jaxannot tune` works on every method: two folds of the training images, one
    # grid axis (the method's first hyper-parameter at its default, if it has one),
    # scored by the method's default metric; every fold gives a finite score
    from jaxannot import tuning

    method = available_methods()[name]
    grid = {k: [v] for k, v in list(method.hyper.items())[:1]}  # empirical: none
    result = tuning.cross_validate(name, task.train, grid, folds=2, seed=0)
    assert result.metric == tuning.default_metric(name, task.train)
    assert len(result.results) == 1 and len(result.best.folds) == 2
    assert np.all(np.isfinite(result.best.folds)), result.best.folds
