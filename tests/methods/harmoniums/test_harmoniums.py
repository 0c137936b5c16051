"""The harmonium methods through the registry: fit, predict, save/load, errors."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.annotators import get_method, load, save
from jaxannot.data import Corpus, make_task
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate
from jaxannot.inference.support import SupportError
from jaxannot.methods.harmoniums import classifier_annotators as ca
from jaxannot.methods.harmoniums.dwh_annotators import check_fitted_support
from jaxannot.methods.harmoniums.mmh_steps import with_offset

FAST = {"topics": 6, "steps": 60}


@pytest.fixture(scope="module")
def task():
    corpus = make_synthetic(seed=0, num_images=120, num_classes=True)
    return make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.25)


def _two_view_classes(rng, n=90, t=3):
    """A real view and a bag view, both informative about the class."""
    y = rng.integers(0, t, n)
    real = rng.normal(0, 1, (t, 5))[y] + rng.normal(0, 1, (n, 5))
    bag = rng.poisson(3 * rng.random((t, 12))[y])
    return Corpus.from_arrays(
        {"real": real.astype(np.float32), "bag": bag.astype(np.float32)},
        view_kinds={"real": "real", "bag": "bag"},
        labels=y,
    )


#: Hyper-parameters of the classifier fits, shared so that every fit on
#: :func:`two_view` reuses the compiled programs of the first.
CLASSIFIERS = {
    "dwh-svm": FAST,
    "twh": FAST,
    # the V-steps' epoch budget that of the final V-step: one compiled SVM for both
    "mmh": {
        "topics": 6,
        "iterations": 3,
        "inner_steps": 10,
        "pretrain_steps": 20,
        "svm_epochs": 300,
    },
    "svm": {},
}


@pytest.fixture(scope="module")
def two_view():
    """The training (60) and test (30) images of :func:`_two_view_classes`."""
    corpus = _two_view_classes(np.random.default_rng(0))
    return corpus.subset(np.arange(60)), corpus.subset(np.arange(60, 90))


@pytest.fixture(scope="module")
def classifiers(two_view):
    """Each of :data:`CLASSIFIERS` fitted once on the training images."""
    train, _ = two_view
    return {
        name: get_method(name).fit(
            train, rng_key=jax.random.key(0), **{**get_method(name).hyper, **hyper}
        )
        for name, hyper in CLASSIFIERS.items()
    }


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_classifiers_round_trip_and_learn(name, two_view, classifiers, tmp_path):
    _, test = two_view
    method, fitted = get_method(name), classifiers[name]
    pred = np.asarray(method.predict_labels(fitted, test))
    save(tmp_path / "m.npz", fitted)
    again = np.asarray(method.predict_labels(load(tmp_path / "m.npz"), test))
    np.testing.assert_array_equal(pred, again)
    assert np.mean(pred == test.labels) > 0.6  # 3 separable classes; chance is 1/3
    if method.embed is not None:
        z = np.asarray(method.embed(fitted, test))
        assert z.shape == (30, 6) and np.all(np.isfinite(z))


def test_mmh_prediction_is_one_linear_pass(two_view, classifiers):
    _, corpus = two_view
    m, fitted = get_method("mmh"), classifiers["mmh"]
    params = fitted.params.harmonium
    real = (corpus.views["real"] - fitted.params.scaling["real"].mean) / (
        fitted.params.scaling["real"].std
    )
    bag = (corpus.views["bag"] > 0).astype(np.float32)
    h = params.hidden_bias + real @ params.weights[0] + bag @ params.weights[1]
    by_hand = np.argmax(
        np.asarray(with_offset(jnp.asarray(h))) @ np.asarray(fitted.params.predictor).T,
        1,
    )
    np.testing.assert_array_equal(m.predict_labels(fitted, corpus), by_hand)
    np.testing.assert_allclose(m.embed(fitted, corpus), h, rtol=1e-4, atol=1e-4)


def test_dwh_annotates_better_than_word_frequency(task, tmp_path):
    dwh = evaluate("dwh", task, hyper={"topics": 10, "steps": 150})
    emp = evaluate("empirical", task)
    assert dwh.metrics["f1@5"] > emp.metrics["f1@5"]
    assert dwh.metrics["map"] > emp.metrics["map"]
    m = get_method("dwh")
    save(tmp_path / "dwh.npz", dwh.fitted)
    np.testing.assert_allclose(
        m.score_words(load(tmp_path / "dwh.npz"), task.test),
        m.score_words(dwh.fitted, task.test),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("name", ["mmh", "twh", "dwh-svm", "svm"])
def test_supervised_methods_need_labels(name, task):
    no_labels = Corpus.from_arrays(
        dict(task.train.views), view_kinds=task.train.view_kinds, words=task.train.words
    )
    with pytest.raises(ValueError, match="needs class labels"):
        get_method(name).fit(no_labels, rng_key=jax.random.key(0))


def test_bad_hyper_raises(task):
    with pytest.raises(ValueError, match="valid"):
        get_method("dwh").fit(
            task.train, rng_key=jax.random.key(0), bag_model="poisson"
        )
    with pytest.raises(
        ValueError, match="optimizer='rprop' is invalid.*one of adam, sgd, lbfgs"
    ):
        get_method("dwh").fit(task.train, rng_key=jax.random.key(0), optimizer="rprop")


@pytest.mark.parametrize(
    ("name", "optimizer", "rate"),
    [
        # twh and dwh-svm share the CD loop and its end-of-fit check: one optimizer
        # each; mmh diverges inside its own alternation: both
        ("twh", "sgd", 1e6),
        ("dwh-svm", "lbfgs", 100.0),
        ("mmh", "sgd", 1e6),
        ("mmh", "lbfgs", 100.0),
    ],
)
def test_a_diverged_fit_is_an_error_naming_the_step_size(
    name, optimizer, rate, two_view
):
    """A learning rate that sends the parameters to inf/NaN raises (an SVM on NaN
    features returned garbage or an IndexError before), naming what to change."""
    method = get_method(name)
    hyper = {**method.hyper, **CLASSIFIERS[name]}
    hyper.update(optimizer=optimizer, learning_rate=rate)
    with pytest.raises(FloatingPointError, match="training diverged") as err:
        method.fit(two_view[0], rng_key=jax.random.key(0), **hyper)
    message = str(err.value)
    assert message.startswith(f"{name}: ") and f"learning_rate={rate}" in message
    assert "optimizer='adam'" in message
    if name != "mmh":  # mmh stops inside its alternation; the others at the end-of-fit
        assert isinstance(err.value, SupportError)  # check, which names the array
        assert "['harmonium'].visible_bias[0] left its support" in message


@pytest.mark.parametrize("name", ["svm", "dwh-svm"])
def test_a_read_out_off_its_support_is_an_error_naming_it(name, two_view, monkeypatch):
    """The read-out SVM is trained after the harmonium's own check: an SVM that ends
    with a NaN weight (planted here) is refused by the end-of-fit support check."""
    real = ca._labels_svm

    def nan_svm(*args, **kwargs):
        state = real(*args, **kwargs)
        return state._replace(weights=state.weights.at[0, 0].set(jnp.nan))

    monkeypatch.setattr(ca, "_labels_svm", nan_svm)
    method = get_method(name)
    with pytest.raises(SupportError, match=r"\.predictor left its support"):
        method.fit(
            two_view[0],
            rng_key=jax.random.key(0),
            **{**method.hyper, **CLASSIFIERS[name]},
        )


def test_a_scaling_without_spread_is_off_its_support(classifiers):
    """The check the fits run refuses a real view's scaling std that is not positive
    (the views are divided by it) and passes the fitted one."""
    fitted = classifiers["svm"]
    check_fitted_support("svm", fitted.params, 1)
    scaling = fitted.params.scaling["real"]
    zero = scaling._replace(std=np.zeros_like(scaling.std))
    bad = fitted.params._replace(scaling={"real": zero})
    with pytest.raises(SupportError, match=r"svm: scaling\['real'\].std left its"):
        check_fitted_support("svm", bad, 1)
