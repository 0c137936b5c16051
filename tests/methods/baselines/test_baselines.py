import dataclasses

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

import jax

from jaxannot.annotators import get_method, load, save
from jaxannot.data import Corpus, make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.evaluation import evaluate
from jaxannot.inference.support import SupportError
from jaxannot.methods.baselines import annotators as baseline_annotators


def _corpus(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return Corpus.from_arrays(
        {"x": rng.normal(size=(n, 5)).astype(np.float32)},
        words=(rng.random((n, 7)) < 0.3).astype(np.float32),
    )


def test_empirical_is_the_training_word_frequency():
    c = _corpus()
    m = get_method("empirical")
    fitted = m.fit(c, rng_key=jax.random.key(0))
    scores = m.score_words(fitted, _corpus(3, seed=1))
    expected = c.words.sum(0) / c.words.sum()
    np.testing.assert_allclose(scores, np.tile(expected, (3, 1)), rtol=1e-6)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_knn_matches_a_brute_force_vote(metric):
    train, test = _corpus(), _corpus(6, seed=1)
    m = get_method("knn")
    fitted = m.fit(train, rng_key=jax.random.key(0), k=4, metric=metric, weight="heat")
    scores = m.score_words(fitted, test)
    nn = NearestNeighbors(n_neighbors=4, metric=metric).fit(train.views["x"])
    dist, idx = nn.kneighbors(test.views["x"])
    # the width: mean distance of a training image to its 4 nearest other ones
    t = nn.kneighbors(n_neighbors=4)[0].mean()
    a = np.exp(-(dist**2) / (2 * t**2))
    expected = np.einsum("qk,qkw->qw", a, train.words[idx]) / a.sum(1, keepdims=True)
    np.testing.assert_allclose(scores, expected, atol=2e-5)


@pytest.mark.parametrize("weight", ["heat", "uniform"])
def test_knn_scores_an_image_alike_alone_and_in_any_batch(weight):
    train, test = _corpus(), _corpus(10, seed=1)
    m = get_method("knn")
    fitted = m.fit(train, rng_key=None, k=4, weight=weight)
    together = m.score_words(fitted, test)
    for i in (0, 7):
        alone = m.score_words(fitted, test.subset(np.array([i])))
        np.testing.assert_allclose(alone[0], together[i], rtol=1e-6)


def test_knn_width_sample_and_twins():
    from jaxannot.methods.baselines.annotators import WIDTH_SAMPLE, heat_width

    x = np.random.default_rng(0).normal(size=(WIDTH_SAMPLE + 500, 3))
    nn = NearestNeighbors(n_neighbors=3).fit(x)
    exact = nn.kneighbors(n_neighbors=3)[0].mean()
    assert heat_width(x, 3, "euclidean") == pytest.approx(exact, rel=0.02)
    twins = np.array([[0.0, 0.0]] * 4 + [[3.0, 4.0]])
    # rows 0-3 (four twins): two others at 0 each, row 3 too although its 3 nearest
    # are rows 0, 1, 2 (ties by index); row 4: two at 5. Mean (8 x 0 + 2 x 5) / 10
    assert heat_width(twins, 2, "euclidean") == pytest.approx(1.0)
    assert heat_width(x[:1], 3, "euclidean") == 1.0  # no other image: unused


def test_knn_model_saved_without_a_width_scores_as_before(tmp_path):
    train, test = _corpus(), _corpus(6, seed=1)
    m = get_method("knn")
    fitted = m.fit(train, rng_key=None, k=3)
    old = dataclasses.replace(fitted, params=fitted.params._replace(width=None))
    save(tmp_path / "old.npz", old)
    np.testing.assert_allclose(
        m.score_words(load(tmp_path / "old.npz"), test), m.score_words(fitted, test)
    )


def test_knn_save_load_gives_the_same_scores(tmp_path):
    train, test = _corpus(), _corpus(6, seed=1)
    m = get_method("knn")
    fitted = m.fit(train, rng_key=jax.random.key(0), k=3)
    save(tmp_path / "knn.npz", fitted)
    np.testing.assert_allclose(
        m.score_words(load(tmp_path / "knn.npz"), test), m.score_words(fitted, test)
    )


def test_knn_rejects_bad_hyper_and_shapes():
    m = get_method("knn")
    with pytest.raises(ValueError, match="valid"):
        m.fit(_corpus(), rng_key=None, metric="manhattan")
    fitted = m.fit(_corpus(), rng_key=None)
    other = Corpus.from_arrays({"x": np.ones((2, 3))})
    with pytest.raises(ValueError, match="3 feature dimensions"):
        m.score_words(fitted, other)


def test_corel5k_empirical_reference_and_knn_beats_it(data_root):
    train, test = load_dataset("corel5k", data_dir=data_root)
    task = make_task(train, test, protocol="inductive")
    emp = evaluate("empirical", task).metrics
    # independent computation: the training word frequencies, ties by word index
    freq = train.words.sum(0)
    order = np.lexsort((np.arange(freq.size), -freq))
    truth = test.words > 0
    acc, cl = [], []
    for y in truth:
        r = int(y.sum())
        if r:
            acc.append(y[order[:r]].mean())
            cl.append(np.flatnonzero(y[order]).max() + 1)
    assert emp["accuracy"] == pytest.approx(np.mean(acc), abs=1e-9)
    assert emp["complete_length"] == pytest.approx(np.mean(cl), abs=1e-9)
    assert round(emp["accuracy"], 4) == 0.1912
    assert round(emp["complete_length"], 2) == 121.55
    knn = evaluate("knn", task).metrics
    for key in (
        "accuracy",
        "f1@5",
        "precision@5",
        "recall@5",
        "word_precision@5",
        "word_recall@5",
        "word_f1@5",
        "n_plus@5",
        "map",
        "miap",
    ):
        assert knn[key] > emp[key], key
    assert knn["complete_length"] < emp["complete_length"]


@pytest.mark.parametrize(
    ("name", "target", "fault", "match"),
    [
        ("empirical", "_frequencies", "doubled", r"empirical: frequency .* sum is 1 "),
        ("knn", "_frequencies", "negative", r"knn: frequency .* minimum -0.1 is below"),
        ("knn", "heat_width", "nan", r"knn: .width left its support"),
        ("knn", "heat_width", "negative", r"knn: width .* minimum -1 is below"),
    ],
)
def test_a_fit_off_its_support_is_an_error_naming_it(
    name, target, fault, match, monkeypatch
):
    """A word frequency that is not a distribution or a heat-kernel width that is not
    positive (planted in the step that computes it) is refused at the end of the fit."""
    real = getattr(baseline_annotators, target)

    def faulty(*args, **kwargs):
        value = np.asarray(real(*args, **kwargs), np.float32)
        if fault == "doubled":
            return 2.0 * value
        if fault == "nan":
            return np.float32(np.nan)
        if target == "heat_width":
            return np.float32(-1.0)
        shifted = np.full_like(value, 1.1 / (value.size - 1))  # sums to 1 with -0.1
        shifted[0] = -0.1
        return shifted

    monkeypatch.setattr(baseline_annotators, target, faulty)
    with pytest.raises(SupportError, match=match):
        get_method(name).fit(_corpus(), rng_key=None)
