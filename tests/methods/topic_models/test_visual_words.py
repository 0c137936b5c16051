"""Real-valued views binned into visual words for the topic models: the bins against
``np.digitize``, edges learned on the fit corpus only, and a topic model on a corpus
with real features only that beats word frequency."""

import numpy as np
import pytest

import jax

from jaxannot import metrics
from jaxannot.annotators import get_method, load, save
from jaxannot.data import Corpus, make_task
from jaxannot.methods.topic_models import visual_words as vw


def _real_corpus(seed=0, n=240, classes=4, dims=6):
    rng = np.random.default_rng(seed)
    y = rng.integers(classes, size=n)
    centres = rng.normal(scale=3.0, size=(classes, dims))
    x = centres[y] + rng.normal(size=(n, dims))
    words = np.eye(classes, dtype=np.float32)[y]
    return Corpus.from_arrays({"features": x}, words=words, name="real-toy")


def test_bins_match_digitize_and_count_one_token_per_dimension():
    corpus = _real_corpus()
    edges = vw.fit_bin_edges(corpus, ["features"], bins=5)
    e = edges["features"]
    assert e.shape == (6, 4)
    (x,) = vw.visual(corpus, ["features"], edges)
    raw = np.asarray(corpus.views["features"], np.float32)
    assert x.shape == (corpus.num_images, 6 * 5)
    np.testing.assert_array_equal(x.sum(1), 6.0)
    for d in range(6):
        ref = np.digitize(raw[:, d], e[d], right=True)  # edges[i-1] < x <= edges[i]
        got = np.argmax(x[:, d * 5 : (d + 1) * 5], axis=1)
        np.testing.assert_array_equal(got, ref)
    # quantile bins: every bin of every dimension holds about n / bins images
    counts = x.sum(0)
    assert counts.min() >= 0.8 * corpus.num_images / 5


def test_count_views_pass_through_and_real_views_need_edges():
    corpus = _real_corpus()
    with pytest.raises(ValueError, match="no bin edges"):
        vw.visual(corpus, ["features"], None)
    with pytest.raises(ValueError, match="bins must be >= 2"):
        vw.fit_bin_edges(corpus, ["features"], bins=1)
    with pytest.raises(KeyError):
        vw.visual_views(corpus, "nope")
    edges = vw.fit_bin_edges(corpus, ["features"], bins=4)
    with pytest.raises(ValueError, match="dimensions"):
        vw._binned(np.zeros((2, 3), np.float32), edges["features"])


@pytest.mark.parametrize("name", ["mix-unigram", "plsa-words"])
def test_topic_model_on_real_features_beats_frequency(name, tmp_path):
    corpus = _real_corpus(seed=1)
    task = make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.25)
    m = get_method(name)
    hyper = {**m.hyper, "topics": 4, "iterations": 30, "bins": 4}
    fitted = m.fit(task.train, rng_key=jax.random.key(0), **hyper)
    assert fitted.params.bin_edges["features"].shape == (6, 3)
    scores = np.asarray(m.score_words(fitted, task.test))
    freq = np.asarray(task.train.words).sum(0)
    base = metrics.mean_average_precision(
        np.tile(freq, (scores.shape[0], 1)), task.truth_words
    )
    got = metrics.mean_average_precision(scores, task.truth_words)
    assert got > base + 0.3, (got, base)
    save(tmp_path / "m.npz", fitted)
    again = load(tmp_path / "m.npz")
    np.testing.assert_allclose(
        np.asarray(m.score_words(again, task.test)), scores, rtol=1e-5, atol=1e-6
    )
