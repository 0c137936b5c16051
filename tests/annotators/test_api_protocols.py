"""The protocol every registered method follows, checked on a tiny synthetic corpus.

For each method: its declared parameters, fit, score_words of the right shape and
finite (in [0, 1] where it declares them probabilities), the same scores after a
save/load round trip (the parameters rebuilt as the declared NamedTuple), a saved
array of the wrong dtype or shape or with a NaN refused naming its field, embed /
predict_labels of the right shape where present; `tune`'s cross-validation; and
compile once: a second fit on *another* corpus of the same shapes (a different
synthetic sample, another key) triggers no XLA backend compile (the kernels are
built once per setting, nothing closes over per-call arrays, and data-dependent
sizes such as a k-NN graph's edge count or its colour classes are padded to
buckets), and a third fit, of the first corpus with the first key, gives the first
fit's figures bit for bit: same seed, same machine, same figures.

The tests of one method run together and on one shape of data (120 images: 90 to fit,
30 to score), so each compiles the method's programs once for all of them.
"""

import re

import numpy as np
import pytest

import jax

from jaxannot.annotators import available_methods, load, save
from jaxannot.annotators.persistence import DictOf, MethodParams, TupleOf
from jaxannot.annotators.typed_params import spec_of
from jaxannot.data import make_task
from jaxannot.data.archive import read_archive, write_archive
from jaxannot.data.errors import DataFormatError
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import check_applicable, evaluate
from jaxannot.runtime import programs

METHODS = sorted(available_methods())
#: Settings cheaper than the defaults, where the defaults make these tests slow (each
#: method is fitted 8 times here: the protocol, four folds, three evaluations): the
#: ensemble fuses two cheap bases over two folds (its default bases, TagProp among
#: them, would be fitted four times per fit); the others run fewer iterations, steps
#: or epochs, and the topic models fewer topics. Every setting takes the code path of
#: the defaults (same algorithm, inference and options), so the checks are the same.
CHEAPER = {
    "ensemble": {"bases": "knn,empirical", "folds": 2},
    "lap-mix-unigram": {"topics": 10, "iterations": 5, "warm_start": 3},
    "lap-link-lda": {"topics": 10, "steps": 100, "fold_in_inner": 10},
    "tagprop": {"steps": 50},
    "mmh": {
        "iterations": 2,
        "inner_steps": 5,
        "pretrain_steps": 10,
        "svm_epochs": 10,
        "final_svm_epochs": 30,
    },
    "mmh-regression": {"topics": 40, "final_svm_epochs": 30},
    "mix-unigram": {"topics": 20, "iterations": 10},
    "link-lda": {"topics": 10, "iterations": 5, "fold_in_inner": 10},
    "plsa-words": {"topics": 10, "iterations": 10, "fold_in_iterations": 10},
    "twh": {"steps": 30},
    "dwh": {"topics": 40},
    "dwh-svm": {"steps": 60, "svm_epochs": 30},
    "emml": {"exact_sweeps": 300, "max_iterations": 30},
    "svm": {"svm_epochs": 100},
    "ale-svm": {"max_epochs": 100},
    "sfsls": {"iterations": 5},
}


@pytest.fixture(scope="module", params=METHODS)
def name(request):
    """A registered method's name. Module-scoped, so pytest runs every test of one
    method before the next method's: its tune test reuses the programs its protocol
    test compiled. No compiled program is released while its tests run (the budget
    of :mod:`jaxannot.runtime.programs`, crossed by the methods together, dropped
    them between its tests, and the next test compiled them again): only between two
    methods, when over the budget (the next method may reuse programs of this one's,
    so they are not released otherwise)."""
    with programs.keep_programs():
        yield request.param
    programs.release_if_over_budget()


@pytest.fixture(scope="module")
def corpus():
    return make_synthetic(seed=0, num_images=120, num_classes=True)


def _task(corpus, seed):
    return make_task(corpus, None, protocol="inductive", seed=seed, test_fraction=0.25)


@pytest.fixture(scope="module")
def task(corpus):
    return _task(corpus, 0)


@pytest.fixture(scope="module")
def other_task():
    """Another sample of the same shapes as ``task``."""
    return _task(make_synthetic(seed=1, num_images=120, num_classes=True), 1)


def test_the_two_tasks_differ_in_data_only(task, other_task):
    for a, b in ((task.train, other_task.train), (task.test, other_task.test)):
        assert a.words.shape == b.words.shape
        assert a.view("blobs").shape == b.view("blobs").shape
        assert (a.view("blobs") != b.view("blobs")).any()
    assert (task.train.words != other_task.train.words).any()


def test_method_follows_the_protocol(name, task, tmp_path):
    method = available_methods()[name]
    check_applicable(method, task)
    hyper = {**method.hyper, **CHEAPER.get(name, {})}
    fitted = method.fit(task.train, rng_key=jax.random.key(0), **hyper)
    assert fitted.method == name
    n, w = task.test.num_images, task.train.num_words
    path = tmp_path / f"{name}.npz"
    save(path, fitted)
    loaded = load(path)
    assert type(fitted.params) is method.params is type(loaded.params)
    _assert_misfits_refused(path)
    if method.score_words is not None:
        scores = np.asarray(method.score_words(fitted, task.test))
        assert scores.shape == (n, w) and np.all(np.isfinite(scores))
        if method.score_meaning is not None:  # probabilities: its predict_proba
            assert scores.min() >= 0.0 and scores.max() <= 1.0 + 1e-6, name
        again = np.asarray(method.score_words(loaded, task.test))
        np.testing.assert_allclose(again, scores, rtol=1e-5, atol=1e-6)
    if method.predict_labels is not None:
        labels = np.asarray(method.predict_labels(loaded, task.test))
        assert labels.shape == (n,)
    if method.embed is not None:
        z = np.asarray(method.embed(loaded, task.test))
        assert z.ndim == 2 and z.shape[0] == n and np.all(np.isfinite(z))


def _assert_misfits_refused(path):
    """Each float array of the model at ``path`` with NaN, integers or an extra axis
    in its place is refused by load, naming the file and the array's field."""
    archive = read_archive(path, "model")
    bad_path = path.with_name("bad.npz")
    for key, value in sorted(archive.arrays.items()):
        if value.dtype.kind != "f" or value.size == 0:
            continue
        for bad in (np.full_like(value, np.nan), value.astype(np.int32), value[None]):
            write_archive(bad_path, {**archive.arrays, key: bad}, meta=archive.meta)
            pattern = re.escape("bad.npz") + ".*" + re.escape(repr(key))
            with pytest.raises(DataFormatError, match=pattern):
                load(bad_path)


_ARRAY_SPEC = re.compile(r"[fiub]+\[(\w+(,\w+)*)?\]")


def _assert_declared(params_type, seen=()):
    """``params_type`` is a NamedTuple whose ``spec`` declares each field as an
    array, a tuple or dict of entries, a NamedTuple declared in turn, or the params
    of registered methods (:class:`MethodParams`: each declared by its method)."""
    assert params_type not in seen
    fields = getattr(params_type, "_fields", None)
    assert fields is not None, f"{params_type!r} is not a NamedTuple"
    assert set(spec_of(params_type)) == set(fields), params_type
    for spec in spec_of(params_type).values():
        while isinstance(spec, TupleOf | DictOf):
            spec = spec.entry
        if isinstance(spec, str):
            assert _ARRAY_SPEC.fullmatch(spec), (params_type, spec)
        elif not isinstance(spec, MethodParams):
            _assert_declared(spec, (*seen, params_type))


def test_method_declares_its_parameters(name):
    _assert_declared(available_methods()[name].params)


def test_registry_lists_baselines():
    assert {"empirical", "knn"} <= set(METHODS)


def test_tune_cross_validates_every_method(name, corpus):
    # `jaxannot tune` works on every method: four folds of the 120 images, one grid
    # axis (the method's first hyper-parameter at its value in CHEAPER, else at its
    # default, if it has one that a grid can list: not an empty string), scored by
    # the method's default metric;
    # every fold gives a finite score. Each fold fits 90 images and scores 30, the
    # shapes of the protocol test's task, so the folds run the programs that test
    # compiled (compiling is ~95 % of a fold's time here)
    from jaxannot import tuning

    method = available_methods()[name]
    hyper = {**method.hyper, **CHEAPER.get(name, {})}
    listable = [(k, [v]) for k, v in hyper.items() if v != ""]
    grid = dict(listable[:1])  # empirical: none
    fixed = {k: v for k, v in CHEAPER.get(name, {}).items() if k not in grid}
    result = tuning.cross_validate(name, corpus, grid, folds=4, seed=0, fixed=fixed)
    assert result.metric == tuning.default_metric(name, corpus)
    assert len(result.results) == 1 and len(result.best.folds) == 4
    assert np.all(np.isfinite(result.best.folds)), result.best.folds


def test_a_second_fit_on_other_data_compiles_nothing(
    name, task, other_task, count_compiles, without_clock
):
    hyper = CHEAPER.get(name)
    first = evaluate(name, task, hyper=hyper, seed=0)
    with count_compiles() as counter:
        second = evaluate(name, other_task, hyper=hyper, seed=1)
    assert counter.count == 0, f"{name}: {counter.count} backend compiles"
    assert second.metrics.keys() == first.metrics.keys()
    again = evaluate(name, task, hyper=hyper, seed=0)
    assert without_clock(again.as_json()) == without_clock(first.as_json()), name
