"""Every registered method describes itself (issue 30, point 2): the fields of
:class:`~jaxannot.annotators.Method` that the sklearn wrappers and ``jaxannot query``
read, instead of tables keyed by method name."""

import pytest

from jaxannot.annotators import Fitted, Method, available_methods
from jaxannot.annotators.base import INPUT_KINDS, QUERY_KINDS
from jaxannot.annotators.discovery import method_modules

METHODS = available_methods()

#: The fields of ``params`` in which a method that answers queries keeps its index
#: (:attr:`Method.queries`).
QUERY_INDEX = {"vrep_features", "vrep_word_scores", "gamma"}


def test_the_registry_is_what_the_methods_package_registers():
    assert set(METHODS) == set(method_modules())


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_declares_its_description(name):
    m = METHODS[name]
    assert m.estimator_name.isidentifier()
    # the estimator is the method's name, its dashes dropped ("ale-sf" -> "ALESF")
    assert m.estimator_name.lower() == name.replace("-", "").lower()
    assert m.input_kind in INPUT_KINDS
    # a bag method reads its views as visual words (quantile bins of real ones)
    assert (m.input_kind == "bag") == ("views" in m.hyper)
    assert (m.input_kind == "bag") == ("bin_edges" in m.params._fields)
    assert m.score_meaning is None or (
        isinstance(m.score_meaning, str) and m.score_meaning.strip()
    )
    if m.score_meaning is not None:
        assert m.score_words is not None  # predict_proba gives the word scores
    assert m.class_scores is None or callable(m.class_scores)
    # a classifier of class labels scores its classes; nothing else does
    assert (m.class_scores is not None) == ("labels" in m.needs)
    if m.class_scores is not None:
        assert m.predict_labels is not None  # only a classifier has class scores
    assert isinstance(m.non_negative, bool) or callable(m.non_negative)
    assert isinstance(m.needs_non_negative(dict(m.hyper)), bool)
    assert set(m.queries) <= set(QUERY_KINDS)
    assert bool(m.queries) == (QUERY_INDEX <= set(m.params._fields))


def test_estimator_names_are_unique():
    names = [m.estimator_name for m in METHODS.values()]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize(
    "name, hyper, expected",
    [
        # TagProp: distance-based weights over base distances other than cosine
        ("tagprop", {"variant": "distance", "distances": "cosine"}, False),
        ("tagprop", {"variant": "distance", "distances": "cosine, idf"}, True),
        ("tagprop", {"variant": "distance", "distances": " cosine "}, False),
        ("tagprop", {"variant": "rank", "distances": "euclidean"}, False),
        # MBRM: only the regions kernel
        ("mbrm", {"kernel": "regions"}, True),
        ("mbrm", {"kernel": "gaussian"}, False),
        ("knn", {}, False),
        ("link-lda", {}, False),  # bag views are non-negative by their kind
    ],
)
def test_non_negativity_follows_the_hyper_parameters(name, hyper, expected):
    m = METHODS[name]
    assert m.needs_non_negative({**m.hyper, **hyper}) is expected


def test_defaults_and_checks_of_the_fields():
    def fit(corpus, *, rng_key):
        return Fitted("my-own_method", {})

    m = Method("my-own_method", fit)
    assert m.estimator_name == "MyOwnMethod" and m.input_kind == "real"
    assert m.score_meaning is None and m.class_scores is None and m.queries == ()
    assert not m.needs_non_negative({})
    rule = Method("x", fit, non_negative=lambda h: h["k"] > 1)
    assert rule.needs_non_negative({"k": 2}) and not rule.needs_non_negative({"k": 1})
    with pytest.raises(ValueError, match="input_kind 'counts'"):
        Method("x", fit, input_kind="counts")
    with pytest.raises(ValueError, match="unknown queries"):
        Method("x", fit, queries=("sketch",))


def test_the_sklearn_wrappers_read_the_methods_not_tables():
    js = pytest.importorskip("jaxannot.sklearn")
    jsb = pytest.importorskip("jaxannot.sklearn.base")
    for table in ("CLASS_NAMES", "BAG_METHODS", "PROBABILITY_METHODS"):
        assert not hasattr(js, table)
    for name, cls in jsb.ESTIMATORS.items():
        m = METHODS[name]
        assert cls.__name__ == m.estimator_name
        est = cls()
        assert hasattr(est, "predict_proba") == (m.score_meaning is not None)
        if m.predict_labels is not None:
            assert hasattr(est, "decision_function") == (m.class_scores is not None)
        assert est.view_kind == m.input_kind
    tagprop = js.TagProp(variant="distance", distances="cosine,idf", view_kind="real")
    assert tagprop._needs_non_negative()
    assert not tagprop.set_params(distances="cosine")._needs_non_negative()


def test_an_estimator_of_an_unknown_method_still_has_tags_until_fit():
    jsb = pytest.importorskip("jaxannot.sklearn.base")
    est = jsb.Annotator(method="no-such-method")
    assert not hasattr(est, "predict_proba")  # no KeyError from the description
    assert not est.__sklearn_tags__().input_tags.positive_only
    assert est._view_kind_param() == "real"
    with pytest.raises(KeyError, match="unknown method 'no-such-method'"):
        est.fit([[0.0], [1.0]], [[0, 1], [1, 0]])


def test_query_asks_the_method_which_queries_it_answers(data_root, tmp_path, capsys):
    from jaxannot.cli.app import main

    model = tmp_path / "knn.npz"
    data = ["--dataset", "emotions", "--data-dir", str(data_root)]
    assert main(["evaluate", "knn", *data, "--save", str(model)]) == 0
    assert main(["query", str(model), "annotate", *data, "--top", "2"]) == 0
    capsys.readouterr()
    assert main(["query", str(model), "word", *data, "--word", "amazed-suprised"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "jaxannot: error: word queries need a model of a method that answers them "
        "(emml), got 'knn'"
    )
