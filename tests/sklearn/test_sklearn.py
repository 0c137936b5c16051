"""jaxannot.sklearn: estimators generated from the registry, scorers,
GridSearchCV and Pipeline on real data (scene)."""

import importlib
import inspect
import sys

import numpy as np
import pytest

import jax

pytest.importorskip("sklearn")

from sklearn.base import clone, is_classifier, is_regressor
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import KBinsDiscretizer, StandardScaler

import jaxannot.sklearn as js
import jaxannot.sklearn.base as jsb
from jaxannot import metrics
from jaxannot.annotators import available_methods, get_method
from jaxannot.data import load_dataset

# ------------------------------------------------------------------ fixtures
N_TRAIN = 300


@pytest.fixture(scope="module")
def scene(data_root):
    """300 random training images of scene (real features in [0, 1], 6 words) and
    200 test images."""
    train, test = load_dataset("scene", data_dir=data_root)
    rng = np.random.default_rng(0)
    rows = rng.permutation(train.num_images)[:N_TRAIN]
    test_rows = rng.permutation(test.num_images)[:200]
    return (
        np.asarray(train.features("features"))[rows],
        np.asarray(train.words)[rows],
        np.asarray(test.features("features"))[test_rows],
        np.asarray(test.words)[test_rows],
        np.asarray(train.word_names),
    )


# ------------------------------------------------------- classes and params
def test_every_method_has_an_estimator_class_with_its_defaults():
    methods = available_methods()
    assert set(jsb.ESTIMATORS) == {
        n for n, m in methods.items() if m.score_words or m.predict_labels
    }
    for name, cls in jsb.ESTIMATORS.items():
        method = methods[name]
        assert getattr(js, cls.__name__) is cls and cls.__module__ == "jaxannot.sklearn"
        est = cls()
        params = est.get_params()
        expected = {
            **jsb.sklearn_hyper(method),
            "view_kind": jsb.default_view_kind(name),
        }
        assert "warm_start" not in params  # sklearn's meaning differs (RENAMED)
        expected["random_state"] = None
        if method.predict_labels is None:
            expected["n_words"] = 5
            assert isinstance(est, jsb.AnnotatorEstimator)
        elif jsb.is_regressor_method(method):  # y is the response it names
            for key in ("target_view", "target_column"):
                del expected[key]
            assert isinstance(est, jsb.RegressorEstimator) and is_regressor(est)
        else:
            assert isinstance(est, jsb.ClassifierEstimator)
            assert is_classifier(est)
        assert params == expected, name
        # clone / set_params round trip
        changed = {k: v for k, v in params.items() if isinstance(v, int | float)}
        changed = {k: type(v)(v * 2 + 1) for k, v in changed.items()}
        twin = clone(est.set_params(**changed))
        assert twin.get_params() == {**params, **changed}
        assert "Parameters" in cls.__doc__
    assert js.Knn.__name__ == "Knn" and js.TagProp is jsb.ESTIMATORS["tagprop"]
    assert set(jsb.ESTIMATORS["mmh"]().get_params()) >= {"c1", "c2", "topics"}


def test_the_package_exports_the_concrete_estimators_only():
    from sklearn.base import BaseEstimator

    concrete = {cls.__name__ for cls in jsb.ESTIMATORS.values()}
    assert set(js.__all__) == concrete and len(js.__all__) == len(concrete)
    # dir()-based discovery finds no base, by-name estimator or table
    found = {
        name
        for name in dir(js)
        if isinstance(getattr(js, name), type)
        and issubclass(getattr(js, name), BaseEstimator)
    }
    assert found == concrete
    for moved in (
        "Annotator",
        "AnnotatorEstimator",
        "Classifier",
        "ClassifierEstimator",
        "Method",
        "ESTIMATORS",
        "RENAMED",
    ):
        assert not hasattr(js, moved), moved
    assert js.scorer is not None and callable(js.scorer_names)


def test_constructor_rejects_unknown_keywords_and_positional_arguments():
    with pytest.raises(TypeError, match="unexpected keyword argument 'kk'"):
        js.Knn(kk=3)
    with pytest.raises(TypeError):
        js.Knn(3)
    assert list(inspect.signature(js.Knn).parameters)[:4] == [
        "k",
        "view",
        "metric",
        "weight",
    ]


def test_generic_annotator_get_set_params_and_clone():
    est = jsb.Annotator("knn", k=3, n_words=2)
    params = est.get_params()
    assert params == {
        "method": "knn",
        "n_words": 2,
        "view_kind": None,
        "random_state": None,
        **get_method("knn").hyper,
        "k": 3,
    }
    twin = clone(est)
    assert twin.get_params() == params and twin is not est
    # method first: the new method's hyper-parameters are valid in the same call
    est.set_params(method="tagprop", neighbors=7)
    assert est.get_params()["neighbors"] == 7 and "steps" in est.get_params()
    with pytest.raises(ValueError, match="Invalid parameter 'nope'"):
        est.set_params(nope=1)
    assert jsb.Classifier("svm", c1=2.0).get_params()["c1"] == 2.0
    text = repr(jsb.Annotator("knn", k=3, n_words=2))
    assert text == "Annotator('knn', n_words=2, k=3)"
    assert repr(js.Knn(k=3)) == "Knn(k=3)"


def test_generic_annotator_refuses_wrong_method_kind_and_stray_hyper(scene):
    X, Y, *_ = scene
    with pytest.raises(ValueError, match="is a classifier.*Classifier"):
        jsb.Annotator("svm").fit(X, Y)
    with pytest.raises(ValueError, match="is an annotator"):
        jsb.Classifier("knn").fit(X, Y.argmax(1))
    with pytest.raises(ValueError, match=r"\['kk'\] are not hyper-parameters"):
        jsb.Annotator("knn", kk=3).fit(X, Y)
    # another method's hyper-parameter (left by a grid over methods) is ignored
    stale = jsb.Annotator("knn", neighbors=3).fit(X, Y)
    assert "neighbors" not in stale.get_params()
    with pytest.raises(KeyError, match="unknown method 'nope'"):
        jsb.Annotator("nope").fit(X, Y)


# ------------------------------------------------------------------ scorers
def test_scorers_match_the_library_metrics(scene):
    X, Y, Xt, Yt, _ = scene
    est = js.Knn(k=10).fit(X, Y)
    scores = est.decision_function(Xt)
    assert js.scorer("map")(est, Xt, Yt) == pytest.approx(
        metrics.mean_average_precision(scores, Yt)
    )
    assert js.scorer("word_f1@2")(est, Xt, Yt) == pytest.approx(
        metrics.word_prf_at_n(scores, Yt, 2)["f1"]
    )
    assert js.scorer("recall@3")(est, Xt, Yt) == pytest.approx(
        metrics.image_prf_at_n(scores, Yt, 3)[1]
    )
    # lower is better: sklearn's sign convention
    assert js.scorer("complete_length")(est, Xt, Yt) == pytest.approx(
        -metrics.complete_length(scores, Yt)
    )
    assert est.score(Xt, Yt) == pytest.approx(js.scorer("map")(est, Xt, Yt))
    report = metrics.annotation_report(scores, Yt, n=5)
    for name in js.scorer_names(5):
        sign = -1 if name == "complete_length" else 1
        assert js.scorer(name)(est, Xt, Yt) == pytest.approx(sign * report[name])


@pytest.mark.parametrize("name", ["nope", "word_f1", "f1@0", "map@5", "f1@x", 3])
def test_unknown_scorer_names_are_refused_with_the_valid_ones(name):
    with pytest.raises(ValueError, match="valid") as err:
        js.scorer(name)
    if isinstance(name, str) and name != "f1@0":
        assert "word_f1@N" in str(err.value) and "map" in str(err.value)


# ---------------------------------------------------------------- fit / predict
def test_predict_marks_the_top_n_words_and_proba_equals_scores(scene):
    X, Y, Xt, _, names = scene
    est = js.Knn(k=10, n_words=2).fit(X, Y)
    scores = est.decision_function(Xt)
    pred = est.predict(Xt)
    assert pred.shape == scores.shape == (len(Xt), 6)
    assert set(np.unique(pred)) <= {0, 1} and np.all(pred.sum(1) == 2)
    best = np.argsort(-scores, axis=1, kind="stable")[:, :2]
    assert np.all(np.take_along_axis(pred, best, 1) == 1)
    np.testing.assert_array_equal(est.predict_proba(Xt), scores)
    assert est.n_features_in_ == X.shape[1] and est.n_outputs_ == 6
    np.testing.assert_array_equal(est.classes_, np.arange(6))
    # ties (empirical: the same scores for every image) go to the lower word index
    emp = js.Empirical(n_words=9).fit(X, np.ones_like(Y))
    assert np.all(emp.predict(Xt) == 1)  # n_words above the vocabulary: every word
    with pytest.raises(ValueError, match="n_words must be a positive integer"):
        js.Knn(n_words=0).fit(X, Y).predict(Xt)
    # methods whose scores are not probabilities have no predict_proba
    assert not hasattr(js.BSVM(), "predict_proba")
    assert not hasattr(js.TagProp(), "embed")
    assert hasattr(js.LapMixUnigram(), "embed") and not hasattr(js.Knn(), "embed")


def test_mbrm_clips_its_annotation_length_to_the_words():
    # a one-word problem: the bandwidth's cross-validation ranks the top
    # min(5, words) words (it raised "n must be in [1, 1] ... got 5")
    rng = np.random.default_rng(0)
    X, Y = rng.random((24, 3)), (rng.random((24, 1)) > 0.5).astype(int)
    est = js.MBRM(folds=2).fit(X, Y)
    assert est.predict(X).shape == (24, 1) and np.all(est.predict(X) == 1)
    assert est.fitted_.info["bandwidth_chosen_by"] == "2-fold CV"


def test_fit_validates_y(scene):
    X, Y, *_ = scene
    with pytest.raises(ValueError, match="2-D .*MultiLabelBinarizer"):
        js.Knn().fit(X, Y.argmax(1))
    with pytest.raises(ValueError, match="non-negative"):
        js.Knn().fit(X, -Y)
    with pytest.raises(ValueError, match="requires y"):
        js.Knn().fit(X, None)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        js.Knn().fit(X, Y[:-1])


def test_dict_of_views_is_a_multi_view_corpus(scene):
    X, Y, Xt, _, _ = scene
    views = {"colour": X[:, :150], "texture": X[:, 150:]}
    est = js.Knn(k=10).fit(views, Y)
    assert est.view_names_ == ("colour", "texture") and est.n_features_in_ == 294
    # knn's default view "" is all views side by side: the same as the array
    np.testing.assert_allclose(
        est.decision_function({"colour": Xt[:, :150], "texture": Xt[:, 150:]}),
        js.Knn(k=10).fit(X, Y).decision_function(Xt),
        rtol=1e-6,
    )
    one_view = js.Knn(k=10, view="colour").fit(views, Y)
    np.testing.assert_allclose(
        one_view.decision_function({"colour": Xt[:, :150], "texture": Xt[:, 150:]}),
        js.Knn(k=10).fit(X[:, :150], Y).decision_function(Xt[:, :150]),
        rtol=1e-6,
    )
    with pytest.raises(ValueError, match="views"):
        est.decision_function({"colour": Xt[:, :150]})
    with pytest.raises(ValueError, match="dict of views"):
        est.decision_function(Xt)
    with pytest.raises(ValueError, match="no entry for the views"):
        js.Knn(view_kind={"colour": "real"}).fit(views, Y)


def test_topic_models_need_counts_and_say_how_to_get_them(scene):
    X, Y, *_ = scene
    with pytest.raises(ValueError, match="KBinsDiscretizer"):
        js.MixUnigram().fit(X, Y)
    with pytest.raises(ValueError, match="Negative values"):
        js.MixUnigram().fit(X - 1.0, Y)
    with pytest.raises(ValueError, match="Negative values"):
        js.TagProp().fit(X - 1.0, Y)  # its base distances need x >= 0


def test_random_state_is_the_jax_seed():
    data = lambda key: jax.random.key_data(key).tolist()
    assert data(js.Knn(random_state=3)._random_key()) == data(jax.random.key(3))
    a, b = (js.Knn(random_state=np.random.RandomState(1))._random_key() for _ in "ab")
    assert data(a) == data(b)
    c, d = (js.Knn()._random_key() for _ in "cd")
    assert data(c) != data(d)  # None: a fresh seed each fit


def test_refits_on_the_same_shape_do_not_recompile(scene, count_compiles):
    X, Y, Xt, _, _ = scene
    js.Knn(k=10).fit(X[:200], Y[:200]).decision_function(Xt[:100])
    with count_compiles() as counter:
        est = js.Knn(k=10).fit(X[100:], Y[100:])  # other images, same shapes
        est.predict(Xt[100:200])
    assert counter.count == 0


# ------------------------------------------------- GridSearchCV and Pipeline
def _cv_means(make, X, Y, score, folds):
    """Mean test score over ``folds`` computed without sklearn's search."""
    out = []
    for train, test in folds.split(X):
        est = make().fit(X[train], Y[train])
        out.append(score(est.decision_function(X[test]), Y[test]))
    return float(np.mean(out))


def test_grid_search_picks_what_the_library_scorer_prefers(scene):
    X, Y, Xt, Yt, _ = scene
    folds = KFold(3, shuffle=True, random_state=0)
    grid = {"k": [1, 40]}
    search = GridSearchCV(js.Knn(), grid, scoring=js.scorer("map"), cv=folds)
    search.fit(X, Y)
    expected = [
        _cv_means(lambda k=k: js.Knn(k=k), X, Y, metrics.mean_average_precision, folds)
        for k in grid["k"]
    ]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected)
    assert search.best_params_ == {"k": grid["k"][int(np.argmax(expected))]}
    assert expected[0] != expected[1]  # the grid really discriminates
    assert search.best_estimator_.k == search.best_params_["k"]
    assert search.score(Xt, Yt) == pytest.approx(
        metrics.mean_average_precision(search.decision_function(Xt), Yt)
    )


def test_grid_search_over_methods_with_the_generic_annotator(scene):
    X, Y, *_ = scene
    folds = KFold(3, shuffle=True, random_state=0)
    grid = [{"method": ["empirical"]}, {"method": ["knn"], "k": [20]}]
    search = GridSearchCV(
        jsb.Annotator("knn"), grid, scoring=js.scorer("word_f1@2"), cv=folds
    ).fit(X, Y)
    f1 = lambda s, y: metrics.word_prf_at_n(s, y, 2)["f1"]
    expected = [
        _cv_means(lambda: js.Empirical(), X, Y, f1, folds),
        _cv_means(lambda: js.Knn(k=20), X, Y, f1, folds),
    ]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected)
    best = int(np.argmax(expected))
    assert search.best_params_["method"] == ["empirical", "knn"][best]


def test_pipeline_with_a_scaler_and_a_grid_over_its_steps(scene):
    X, Y, Xt, Yt, _ = scene
    pipe = make_pipeline(StandardScaler(), js.Knn(k=10, metric="euclidean"))
    pipe.fit(X, Y)
    scaler = StandardScaler().fit(X)
    alone = js.Knn(k=10, metric="euclidean").fit(scaler.transform(X), Y)
    np.testing.assert_allclose(
        pipe.decision_function(Xt), alone.decision_function(scaler.transform(Xt))
    )
    np.testing.assert_array_equal(pipe.predict(Xt), alone.predict(scaler.transform(Xt)))
    search = GridSearchCV(
        pipe, {"knn__k": [2, 30]}, scoring=js.scorer("miap"), cv=3
    ).fit(X, Y)
    means = search.cv_results_["mean_test_score"]
    assert search.best_params_["knn__k"] == [2, 30][int(np.argmax(means))]


def test_pipeline_quantizes_real_features_for_a_topic_model(scene):
    X, Y, Xt, Yt, _ = scene
    pipe = make_pipeline(
        KBinsDiscretizer(n_bins=3, encode="onehot-dense", quantile_method="linear"),
        js.LapMixUnigram(
            topics=4, iterations=3, warm_start_iterations=2, random_state=0
        ),
    ).fit(X, Y)
    proba = pipe.predict_proba(Xt)
    assert proba.shape == (len(Xt), 6)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-4)  # p(w | d)
    assert pipe.predict(Xt).sum(1).tolist() == [5] * len(Xt)
    theta = pipe[-1].embed(pipe[0].transform(Xt))
    assert theta.shape == (len(Xt), 4)
    # it learned something: better than ranking words by frequency
    emp = js.Empirical().fit(X, Y)
    assert pipe.score(Xt, Yt) > emp.score(Xt, Yt)


# ---------------------------------------------------------------- classifiers
def test_classifier_predicts_the_given_labels(scene):
    X, Y, Xt, Yt, names = scene
    y, yt = names[Y.argmax(1)], names[Yt.argmax(1)]
    est = js.SVM(svm_epochs=100, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.classes_, np.unique(y))
    assert len(est.classes_) == 6
    pred = est.predict(Xt)
    assert pred.dtype == y.dtype and set(pred) <= set(est.classes_)
    chance = np.max(np.unique(yt, return_counts=True)[1]) / len(yt)
    assert est.score(Xt, yt) > chance + 0.2
    scores = est.decision_function(Xt)
    np.testing.assert_array_equal(est.classes_[scores.argmax(1)], pred)
    # the same seed: random_state=None draws a new one per fit (sklearn's convention)
    generic = jsb.Classifier("svm", svm_epochs=100, random_state=0).fit(X, y)
    np.testing.assert_array_equal(generic.predict(Xt), pred)
    with pytest.raises(ValueError, match="at least 2 classes"):
        js.SVM().fit(X, np.zeros(len(X)))


# sklearn's own checks: tests/sklearn/test_checks_<family>.py (conftest.py)


# ------------------------------------------------------------ optional import
def test_missing_sklearn_gives_an_install_hint(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("jaxannot.sklearn")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(ImportError, match=r"pip install 'jaxannot\[sklearn\]'"):
        importlib.import_module("jaxannot.sklearn")
    # the rest of the package does not need it
    importlib.reload(importlib.import_module("jaxannot"))


def test_regressor_fits_the_method_on_y_as_its_target_view():
    """MmhRegression's fit and predictions are those of the method fitted on a corpus
    whose real view ``t`` is the response (``--set target_view=t``): the same
    figures, to the bit, and an R² well above the mean's on held-out rows."""
    from sklearn.datasets import make_regression

    from jaxannot.data import Corpus

    X, y = make_regression(120, 5, noise=1.0, random_state=0)
    small = dict(iterations=1, inner_steps=1, svm_epochs=5)  # 640 hidden units
    est = js.MmhRegression(**small, final_svm_epochs=50, random_state=0)
    est.fit(X[:90], y[:90])
    assert is_regressor(est) and "target_view" not in est.get_params()
    method = get_method("mmh-regression")
    train = Corpus.from_arrays(
        {"features": X[:90], "t": y[:90, None]},
        view_kinds={"features": "real", "t": "real"},
        name="direct",
    )
    hyper = dict(method.hyper, **small, final_svm_epochs=50, target_view="t")
    fitted = method.fit(train, rng_key=jax.random.key(0), **hyper)
    test = Corpus.from_arrays({"features": X[90:]}, view_kinds={"features": "real"})
    direct = np.asarray(method.predict_labels(fitted, test), np.float64)
    np.testing.assert_array_equal(est.predict(X[90:]), direct)
    assert est.score(X[90:], y[90:]) > 0.5
    for views in (X, {"a": X[:, :2], "b": X[:, 2:]}):
        nan_y = np.where(np.arange(120) == 3, np.nan, y)
        with pytest.raises(ValueError, match="y contains NaN"):
            js.MmhRegression(**small).fit(views, nan_y)
    with pytest.raises(ValueError, match="the name the response y takes"):
        js.MmhRegression(**small).fit({"_sklearn_target": X}, y)
    with pytest.raises(ValueError, match="is a regressor"):
        jsb.Classifier("mmh-regression").fit(X, y)
