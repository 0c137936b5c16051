"""One parse, one check (issue 30, point 3): a hyper-parameter is parsed and
checked once, where it enters (the CLI, a library call), into a read-only
:class:`~jaxannot.annotators.Hyper` that the later layers take as it is."""

import collections
import copy
import json

import numpy as np
import pytest

from jaxannot import tuning
from jaxannot.annotators import (
    Hyper,
    get_method,
    hyper_spec,
    hyper_values,
    parse_hyper,
)
from jaxannot.cli.app import main
from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate


@pytest.fixture
def checks(monkeypatch):
    """Every (method, key, value) that ``check_hyper`` is asked about, counted:
    by the parse and by a fit (its decorator checks what it is given directly)."""
    seen = collections.Counter()
    real = hyper_values.check_hyper

    def counting(method, key, value):
        seen[method, key, repr(value)] += 1
        return real(method, key, value)

    monkeypatch.setattr(hyper_values, "check_hyper", counting)
    monkeypatch.setattr(hyper_spec, "check_hyper", counting)
    return seen


@pytest.fixture(scope="module")
def task():
    corpus = make_synthetic(seed=0, num_images=60)
    return make_task(corpus, None, protocol="inductive", seed=0)


@pytest.fixture(scope="module")
def emotions(data_root):
    """The CLI tests' dataset as `jaxannot evaluate` makes its task (the library
    tests reuse the knn programs the CLI tests compiled)."""
    return make_task(*load_dataset("emotions", data_dir=data_root))


def test_cli_evaluate_checks_each_value_once(data_root, checks, capsys):
    argv = ["evaluate", "knn", "--dataset", "emotions", "--data-dir", str(data_root)]
    assert main([*argv, "--set", "k=3"]) == 0
    assert "knn" in capsys.readouterr().out
    knn = get_method("knn")
    assert sorted(key for _, key, _ in checks) == sorted(knn.hyper)
    assert set(checks.values()) == {1}  # not again in evaluate
    assert checks["knn", "k", "3"] == 1


def test_cli_tune_checks_each_value_once(data_root, checks, capsys):
    argv = ["tune", "knn", "--dataset", "emotions", "--data-dir", str(data_root)]
    argv += ["--grid", "k=2,3", "--set", "metric=euclidean", "--folds", "2"]
    assert main(argv) == 0
    assert "best: --set k=3 --set metric=euclidean" in capsys.readouterr().out
    # the grid's two values, the fixed value and the other defaults: each once,
    # however many settings and folds there are
    assert checks["knn", "k", "2"] == checks["knn", "k", "3"] == 1
    assert checks["knn", "metric", "'euclidean'"] == 1
    assert set(checks.values()) == {1}


def test_evaluate_takes_parsed_values_as_they_are(emotions, checks):
    knn = get_method("knn")
    hyper = parse_hyper(knn, ["k=3"])
    checks.clear()
    result = evaluate(knn, emotions, hyper=hyper)
    assert not checks  # nothing parsed or checked again
    assert result.params == {**knn.hyper, "k": 3}
    # a plain mapping from a library call is parsed there, once
    evaluate(knn, emotions, hyper={"k": 3})
    assert set(checks.values()) == {1} and len(checks) == len(knn.hyper)


def test_a_direct_fit_checks_the_values_it_is_given_once(emotions, checks):
    knn = get_method("knn")
    knn.fit(emotions.train, rng_key=None, k=3, metric="euclidean")
    assert dict(checks) == {("knn", "k", "3"): 1, ("knn", "metric", "'euclidean'"): 1}
    # fit_parsed takes parse_hyper's values for this method only
    with pytest.raises(TypeError, match="takes a Hyper"):
        hyper_values.fit_parsed(knn, emotions.train, rng_key=None, hyper={"k": 3})
    other = parse_hyper(get_method("tagprop"), [])
    with pytest.raises(ValueError, match="given to method 'knn'"):
        hyper_values.fit_parsed(knn, emotions.train, rng_key=None, hyper=other)


def test_cross_validate_takes_a_parsed_grid_and_fixed_values_as_they_are(
    emotions, checks
):
    knn = get_method("knn")
    grid = tuning.parse_grid(knn, ["k=2,3"])
    fixed = tuning.resolve_fixed(knn, grid, ["metric=euclidean"])
    assert isinstance(grid, tuning.Grid) and isinstance(fixed, Hyper)
    checks.clear()
    result = tuning.cross_validate(knn, emotions.train, grid, folds=2, fixed=fixed)
    assert not checks
    assert [r.hyper["k"] for r in result.results] == [2, 3]
    assert result.fixed == {"metric": "euclidean"}


def test_hyper_is_read_only_and_knows_its_method():
    knn = get_method("knn")
    hyper = parse_hyper(knn, ["metric=euclidean", "k=4"])
    assert hyper.method == "knn" and hyper.given == ("metric", "k")
    assert parse_hyper(knn, hyper) is hyper
    with pytest.raises(TypeError, match="read-only"):
        hyper["k"] = 0
    with pytest.raises(TypeError, match="read-only"):
        hyper.update(k=0)
    assert hyper["k"] == 4
    with pytest.raises(ValueError, match="of method 'knn' given to method 'tagprop'"):
        parse_hyper(get_method("tagprop"), hyper)
    twin = copy.deepcopy(hyper)
    assert twin == hyper and twin.given == hyper.given and twin.method == "knn"
    assert json.loads(json.dumps(hyper)) == dict(hyper)
    grid = tuning.parse_grid(knn, ["k=2,3"])
    with pytest.raises(TypeError, match="read-only"):
        grid["k"] = [1]


def test_a_refit_with_other_values_leaves_no_state_behind(task):
    """lap-mix-unigram's lam reaches the E-step of each fit's own VEM: fitting
    lam = 0, then lam = 50, then lam = 0 again gives the first fit again."""
    method = get_method("lap-mix-unigram")
    small = {"topics": 3, "iterations": 3, "warm_start": 1, "neighbors": 4}

    def fit(lam):
        hyper = parse_hyper(method, {**small, "lam": lam})
        return evaluate(method, task, hyper=hyper, seed=1).fitted

    first, other, again = fit(0.0), fit(50.0), fit(0.0)
    assert not np.allclose(first.params.phi, other.params.phi)
    np.testing.assert_array_equal(first.params.phi, again.params.phi)
