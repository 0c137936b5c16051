"""MMH beyond classification: annotation (seed 001 §4.4) and regression (§4.2)."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot import tuning
from jaxannot.annotators import get_method, load, save
from jaxannot.data import Corpus, make_task
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate
from jaxannot.methods.harmoniums.mmh_steps import with_offset

#: A short schedule; the V-steps' epoch budget that of the final V-step (300), so
#: that one compiled SVM (SVR) serves both.
SMALL = {
    "topics": 8,
    "iterations": 3,
    "inner_steps": 20,
    "pretrain_steps": 40,
    "svm_epochs": 300,
}


@pytest.fixture(scope="module")
def task():
    corpus = make_synthetic(seed=1, num_images=150, num_classes=True)
    return make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.3)


@pytest.fixture(scope="module")
def annotated(task):
    """mmh at :data:`SMALL` evaluated on ``task`` (fitted once for the file)."""
    return evaluate("mmh", task, hyper=SMALL)


def test_mmh_annotates_by_mean_field_and_beats_word_frequency(
    task, annotated, tmp_path
):
    # words != one-hot classes, so words_wing="auto" adds the tag wing (Flickr set-up)
    res = annotated
    emp = evaluate("empirical", task)
    assert res.fitted.info["words_wing"]
    assert res.metrics["map"] > emp.metrics["map"]
    assert res.metrics["f1@5"] > emp.metrics["f1@5"]
    assert res.metrics["classification_accuracy"] > 0.5  # 5 classes; chance 0.2
    m = get_method("mmh")
    save(tmp_path / "mmh.npz", res.fitted)
    again = load(tmp_path / "mmh.npz")
    np.testing.assert_allclose(
        m.score_words(again, task.test), m.score_words(res.fitted, task.test), 1e-5
    )


def test_mmh_words_wing_does_not_enter_the_prediction_rule(task, annotated):
    m, fitted = get_method("mmh"), annotated.fitted
    p = fitted.params.harmonium
    assert len(p.weights) == 2  # blobs + words
    blobs = (np.asarray(task.test.views["blobs"]) > 0).astype(np.float32)
    h = p.hidden_bias + blobs @ p.weights[0]  # features only, words free
    np.testing.assert_allclose(m.embed(fitted, task.test), h, rtol=1e-4, atol=1e-4)
    scores = (
        np.asarray(with_offset(jnp.asarray(h))) @ np.asarray(fitted.params.predictor).T
    )
    np.testing.assert_array_equal(m.predict_labels(fitted, task.test), scores.argmax(1))
    # one mean-field sweep from the clamped features: E[x] = sigmoid(b + W E[h])
    one = m.score_words(_with(fitted, annotate_sweeps=1), task.test)
    manual = 1 / (1 + np.exp(-(p.visible_bias[1] + h @ p.weights[1].T)))
    np.testing.assert_allclose(one, manual, rtol=1e-4, atol=1e-5)


def _with(fitted, **hyper):
    import dataclasses

    return dataclasses.replace(fitted, hyper={**fitted.hyper, **hyper})


@pytest.fixture(scope="module")
def word_classes():
    """60 images of 3 classes, one real view, the words the one-hot classes, and mmh
    at :data:`SMALL` (its default ``svm_step="p1"``) fitted on them."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 60)
    x = (rng.normal(0, 1, (3, 4))[y] + rng.normal(0, 0.5, (60, 4))).astype(np.float32)
    corpus = Corpus.from_arrays(
        {"x": x}, view_kinds={"x": "real"}, words=np.eye(3)[y], labels=y
    )
    m = get_method("mmh")
    return corpus, m.fit(corpus, rng_key=jax.random.key(0), **{**m.hyper, **SMALL})


def test_mmh_without_tags_scores_word_classes(word_classes):
    corpus, fitted = word_classes
    m = get_method("mmh")
    assert not fitted.info["words_wing"]  # words are the one-hot classes
    np.testing.assert_array_equal(
        np.argmax(m.score_words(fitted, corpus), 1), m.predict_labels(fitted, corpus)
    )
    with pytest.raises(ValueError, match="words_wing"):
        m.fit(corpus, rng_key=jax.random.key(0), words_wing="maybe")


def _regression_corpus(rng, n=80):
    hidden = rng.normal(0, 1, (n, 3))
    real = hidden @ rng.normal(0, 1, (3, 6)) + 0.3 * rng.normal(0, 1, (n, 6))
    target = hidden @ np.array([1.0, -0.5, 0.25]) + 0.1 * rng.normal(0, 1, n)
    views = {"x": real.astype(np.float32), "t": target[:, None].astype(np.float32)}
    return Corpus.from_arrays(views, view_kinds={"x": "real", "t": "real"})


@pytest.fixture(scope="module")
def regression():
    """The training (90) and test (30) images of a 120-image regression corpus."""
    corpus = _regression_corpus(np.random.default_rng(0), n=120)
    return corpus.subset(np.arange(90)), corpus.subset(np.arange(90, 120))


def test_mmh_regression_v_step_is_the_linear_svr_of_the_latent_features(regression):
    # iterations=0: the fit ends with one V-step (P2's V-part) on the features after
    # the CD pre-training; it must reach the minimum that sklearn's LinearSVR (which
    # regularizes its intercept like a unit feature, seed 001 footnote 3) finds for
    # (1/2)||V||^2 + (C2/C1) sum_d max(0, |y_d - V [h_d, 1]| - eps).
    from sklearn.svm import LinearSVR

    corpus = regression[0]  # the training images of the fits below: their shapes
    m = get_method("mmh-regression")
    hyper = {**m.hyper, "topics": 4, "iterations": 0, "pretrain_steps": 40}
    hyper.update(target_view="t", c1=1.0, c2=2.0, epsilon=0.1, final_svm_epochs=5000)
    fitted = m.fit(corpus, rng_key=jax.random.key(0), **hyper)
    h = np.asarray(m.embed(fitted, corpus), np.float64)
    t = corpus.views["t"][:, 0].astype(np.float64)
    y = (t - fitted.info["target_mean"]) / fitted.info["target_std"]
    v = np.asarray(fitted.params.predictor, np.float64)

    def objective(w, b):
        loss = np.maximum(0, np.abs(y - h @ w - b) - 0.1)
        return 0.5 * (w @ w + b * b) + 2.0 * loss.sum()

    ref = LinearSVR(
        C=2.0, epsilon=0.1, intercept_scaling=1.0, tol=1e-10, max_iter=200000,
        dual=True, loss="epsilon_insensitive",
    ).fit(h, y)  # fmt: skip
    ours, theirs = objective(v[:-1], v[-1]), objective(ref.coef_, ref.intercept_[0])
    assert ours <= theirs * (1 + 1e-4)
    assert ours >= theirs * (1 - 1e-3)
    assert fitted.info["svr_gap"][-1] <= 1e-4  # converged
    pred = np.asarray(m.predict_labels(fitted, corpus))
    mean, std = fitted.info["target_mean"], fitted.info["target_std"]
    by_hand = mean + std * (h @ v[:-1] + v[-1])
    np.testing.assert_allclose(pred, by_hand, rtol=1e-4, atol=1e-4)


def test_mmh_regression_learns_and_round_trips(regression, tmp_path):
    train, test = regression
    m = get_method("mmh-regression")
    fitted = m.fit(
        train,
        rng_key=jax.random.key(0),
        **{**m.hyper, **SMALL, "topics": 4, "target_view": "t"},
    )
    pred = np.asarray(m.predict_labels(fitted, test))
    truth = test.views["t"][:, 0]
    r2 = 1 - np.sum((pred - truth) ** 2) / np.sum((truth - truth.mean()) ** 2)
    assert r2 > 0.7  # the target is linear in the latent factors the view carries
    save(tmp_path / "r.npz", fitted)
    np.testing.assert_allclose(m.predict_labels(load(tmp_path / "r.npz"), test), pred)
    with pytest.raises(ValueError, match="not a real view"):
        m.fit(train, rng_key=jax.random.key(0), target_view="nope")
    with pytest.raises(ValueError, match="needs class labels"):
        m.fit(train, rng_key=jax.random.key(0))


def test_mmh_svm_step_option(word_classes):
    corpus, p1 = word_classes
    y = corpus.labels
    assert p1.hyper["svm_step"] == "p1"
    m = get_method("mmh")
    standardized = m.fit(
        corpus,
        rng_key=jax.random.key(0),
        **{**m.hyper, **SMALL, "svm_step": "standardized"},
    )
    for fitted in (p1, standardized):
        assert np.mean(np.asarray(m.predict_labels(fitted, corpus)) == y) > 0.8
    with pytest.raises(ValueError, match="svm_step"):
        m.fit(corpus, rng_key=jax.random.key(0), svm_step="raw")


def test_evaluate_scores_a_regressor_by_rmse_and_r2(regression):
    """evaluate reports the regression metrics of mmh-regression's predictions
    against its response (sklearn's figures), not a classification accuracy; tune
    minimises rmse by default."""
    from sklearn.metrics import mean_squared_error, r2_score

    task = make_task(*regression)
    hyper = {**SMALL, "topics": 4, "target_view": "t"}
    result = evaluate("mmh-regression", task, hyper=hyper, seed=0)
    assert set(result.metrics) == {"rmse", "r2"}
    pred = np.asarray(
        get_method("mmh-regression").predict_labels(result.fitted, task.test)
    )
    truth = task.test.views["t"][:, 0]
    assert result.metrics["rmse"] == pytest.approx(
        np.sqrt(mean_squared_error(truth, pred)), rel=1e-6
    )
    assert result.metrics["r2"] == pytest.approx(r2_score(truth, pred), abs=1e-6)
    assert tuning.default_metric("mmh-regression", task.train) == "rmse"
    assert tuning.available_metrics("mmh-regression", task.train) == ["rmse", "r2"]
    assert "rmse" in tuning.LOWER_IS_BETTER
