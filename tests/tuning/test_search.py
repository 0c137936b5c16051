"""``jaxannot.tuning.search`` and ``jaxannot tune --search``: a TPE search over a
space, each trial cross-validated on the folds of ``cross_validate``."""

import dataclasses
import importlib.util
import json
import math
import re
import sys

import numpy as np
import pytest

from jaxannot import tuning
from jaxannot.annotators import get_method
from jaxannot.cli.app import main
from jaxannot.data.synthetic import make_synthetic

needs_optuna = pytest.mark.skipif(
    importlib.util.find_spec("optuna") is None,
    reason="optuna not installed (jaxannot[search])",
)


@pytest.fixture(scope="module")
def corpus():
    synthetic = make_synthetic(seed=0, num_images=120, num_classes=True)
    return tuning.training_images(synthetic, None)


def _flipped_knn():
    """knn whose word scores are negated under ``metric=euclidean``: that value
    ranks the true words last, far worse than ``cosine`` on every fold."""
    knn = get_method("knn")

    def score(fitted, corpus):
        scores = knn.score_words(fitted, corpus)
        return -scores if fitted.hyper["metric"] == "euclidean" else scores

    return dataclasses.replace(knn, score_words=score)


def _key(params):
    return tuple(sorted(params.items()))


@needs_optuna
def test_every_setting_scores_its_cross_validation_and_the_best_is_the_grids(corpus):
    grid = {"k": [3, 9, 27], "weight": ["heat", "uniform"]}
    reference = tuning.cross_validate("knn", corpus, grid, folds=3, seed=1)
    by_setting = {_key(r.params): r for r in reference.results}
    result = tuning.search("knn", corpus, grid, folds=3, trials=24, seed=1, prune=False)
    assert len(result.trials) == 24 and all(
        t.state == "complete" for t in result.trials
    )
    assert {_key(t.params) for t in result.trials} == set(by_setting)  # all 6 drawn
    for t in result.trials:
        ref = by_setting[_key(t.params)]
        np.testing.assert_allclose(t.folds, ref.folds, rtol=0, atol=1e-12)
        assert t.mean == pytest.approx(ref.mean, abs=1e-12)
    for a, b in zip(result.held_out, reference.held_out, strict=True):
        np.testing.assert_array_equal(a, b)  # the same folds
    assert result.best.params == reference.best.params
    assert result.best.mean == pytest.approx(reference.best.mean, abs=1e-12)
    # a setting drawn again is looked up, not refitted
    seen = set()
    for t in result.trials:
        assert t.reused_folds == (3 if _key(t.params) in seen else 0)
        seen.add(_key(t.params))


def _trace(result):
    return [(t.params, t.state, t.folds) for t in result.trials]


@needs_optuna
def test_the_same_seed_gives_the_same_trials(corpus):
    space = ["k=1:60", "weight=heat,uniform"]
    runs = [
        tuning.search("knn", corpus, space, folds=2, trials=4, seed=s)
        for s in (4, 4, 5)
    ]
    assert _trace(runs[0]) == _trace(runs[1])
    assert [t.params for t in runs[0].trials] != [t.params for t in runs[2].trials]
    assert all(1 <= t.params["k"] <= 60 for r in runs for t in r.trials)
    assert all(isinstance(t.params["k"], int) for t in runs[0].trials)


@needs_optuna
def test_a_clearly_worse_value_is_pruned_with_its_partial_folds_kept(corpus):
    method = _flipped_knn()
    grid = {"metric": ["cosine", "euclidean"]}
    reference = tuning.cross_validate(method, corpus, grid, folds=3, seed=0)
    ref = {r.params["metric"]: r.folds for r in reference.results}
    assert np.mean(ref["euclidean"]) < 0.5 * np.mean(ref["cosine"])  # clearly worse
    result = tuning.search(method, corpus, grid, folds=3, trials=14, seed=0)
    pruned = [t for t in result.trials if t.state == "pruned"]
    assert pruned and all(t.params == {"metric": "euclidean"} for t in pruned)
    for t in pruned:
        assert 1 <= len(t.folds) < 3
        np.testing.assert_allclose(t.folds, ref["euclidean"][: len(t.folds)], atol=0)
    # no trial is pruned before PRUNE_AFTER trials completed
    first = result.trials.index(pruned[0])
    done = [t for t in result.trials[:first] if t.state == "complete"]
    assert len(done) >= tuning.hyper_search.PRUNE_AFTER
    assert result.best.params == {"metric": "cosine"}
    written = json.loads(json.dumps(result.as_json(), allow_nan=False))
    row = written["trials"][pruned[0].number - 1]
    assert row["state"] == "pruned" and len(row["folds"]) == len(pruned[0].folds)
    assert written["counts"]["pruned"] == len(pruned)
    unpruned = tuning.search(method, corpus, grid, folds=3, trials=14, prune=False)
    assert all(t.state == "complete" for t in unpruned.trials)


@needs_optuna
def test_a_diverged_trial_fails_and_never_wins(corpus):
    space = {"learning_rate": [1e6, 0.01]}
    fixed = {"optimizer": "sgd", "topics": 4, "steps": 20}
    result = tuning.search("twh", corpus, space, folds=2, trials=4, fixed=fixed)
    failed = [t for t in result.trials if t.state == "failed"]
    assert failed and all(t.params["learning_rate"] == 1e6 for t in failed)
    assert all(len(t.folds) == 1 and math.isnan(t.folds[0]) for t in failed)
    assert result.best.params == {"learning_rate": 0.01}
    assert math.isfinite(result.best.mean)
    written = json.loads(json.dumps(result.as_json(), allow_nan=False))  # no NaN
    assert written["trials"][failed[0].number - 1]["folds"] == [None]


@needs_optuna
def test_the_budget_is_recorded_and_a_timeout_stops_the_search(corpus):
    result = tuning.search("knn", corpus, ["k=1:9"], trials=3, timeout=1e-9)
    assert result.budget.trials_run == 0 and result.trials == []
    assert result.best is None and result.budget.trials == 3
    assert result.as_json()["budget"]["timeout"] == 1e-9
    full = tuning.search("knn", corpus, ["k=1:9"], trials=3)
    assert full.budget.trials_run == len(full.trials) == 3
    assert full.budget.seconds >= sum(t.seconds for t in full.trials)


@needs_optuna
def test_a_float_log_range_draws_floats_inside_it():
    space = tuning.parse_space("ale-svm", ["c=1e-4:10:log", "bins=4:200"])
    assert space["c"] == tuning.Range(1e-4, 10.0, log=True)
    assert space["bins"] == tuning.Range(4, 200)
    assert space.as_json()["c"] == {
        "low": 1e-4,
        "high": 10.0,
        "log": True,
        "type": "float",
    }
    assert tuning.parse_space("ale-svm", {"clip": tuning.Range(0, 0.4)})["clip"] == (
        tuning.Range(0.0, 0.4)
    )
    import optuna

    sampler = optuna.samplers.TPESampler(seed=0)
    dist = tuning.hyper_search._distributions(optuna, space)
    study = optuna.create_study(sampler=sampler)
    for _ in range(20):
        trial = study.ask(dist)
        assert 1e-4 <= trial.params["c"] <= 10 and isinstance(trial.params["c"], float)
        study.tell(trial, 0.0)


@needs_optuna
@pytest.mark.parametrize(
    "specs, error, needle",
    [
        (["kk=1:3"], KeyError, "valid: k, view, metric, weight"),
        (["k=9:3"], ValueError, "--space k=9:3: LO must be below HI"),
        (["k=0:10"], ValueError, "k=0 is invalid (out of range); valid: int in [1, "),
        (["k=1:2000000"], ValueError, "valid: int in [1, 1000000]"),
        (["k=1.5:3"], ValueError, "--space k=1.5:3: bound '1.5' is not an int"),
        (["k=1:10:lg"], ValueError, "a range is LO:HI or LO:HI:log"),
        (["weight=1:2"], ValueError, "weight is one of heat, uniform"),
        (["weight=heat,hot"], ValueError, "'hot' is not a valid choice"),
        (["k=1:3", "k=4"], ValueError, "--space k is given twice"),
        (["k"], ValueError, "--space expects KEY=LO:HI"),
        ([], ValueError, "--space is empty"),
    ],
)
def test_a_bad_space_is_refused_before_any_fit(corpus, specs, error, needle):
    knn = get_method("knn")

    def never(*args, **kwargs):
        raise AssertionError("fitted before checking the space")

    with pytest.raises(error, match=re.escape(needle)):
        tuning.search(dataclasses.replace(knn, fit=never), corpus, specs, trials=2)


@pytest.mark.parametrize(
    "method, specs, needle",
    [
        (
            "ale-svm",
            ["c=0:10:log"],
            "c=0.0 is invalid (out of range); valid: float > 0",
        ),
        ("ale-svm", ["clip=0:0.5"], "valid: float in [0, 0.5)"),
        ("twh", ["weight_decay=0:1:log"], "a log scale needs LO > 0, got 0.0"),
    ],
)
def test_float_ranges_are_checked_against_the_spec(method, specs, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        tuning.parse_space(method, specs)


@needs_optuna
@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"trials": 0}, "--trials must be an int >= 1"),
        ({"timeout": -1.0}, "--timeout must be a number of seconds > 0"),
        ({"fixed": {"k": 3}}, "both in --space and --set"),
    ],
)
def test_a_bad_budget_or_a_key_also_fixed_is_refused(corpus, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        tuning.search("knn", corpus, ["k=1:5"], **{"trials": 2, **kwargs})


# ------------------------------------------------------------------------ CLI
@needs_optuna
def test_cli_search_writes_every_trial(data_root, tmp_path, capsys):
    out = tmp_path / "search.json"
    argv = ["tune", "knn", "--dataset", "emotions", "--data-dir", str(data_root)]
    argv += ["--search", "--space", "k=1:40", "--space", "weight=heat,uniform"]
    argv += ["--trials", "5", "--set", "metric=cosine", "--json", str(out)]
    assert main(argv) == 0
    payload = json.loads(out.read_text())
    assert payload["budget"]["trials"] == payload["budget"]["trials_run"] == 5
    assert [t["number"] for t in payload["trials"]] == list(range(1, 6))
    assert payload["space"]["k"] == {"low": 1, "high": 40, "log": False, "type": "int"}
    assert payload["fixed"] == {"metric": "cosine"} and payload["folds"] == 3
    assert payload["n_images"] == 391  # emotions' training split
    for t in payload["trials"]:
        assert {"number", "state", "params", "mean", "folds", "seconds"} <= set(t)
        assert t["state"] in ("complete", "pruned", "failed")
        assert t["mean"] == pytest.approx(np.mean(t["folds"]))
    complete = [t for t in payload["trials"] if t["state"] == "complete"]
    assert all(len(t["folds"]) == 3 for t in complete)
    best = max(complete, key=lambda t: t["mean"])
    assert payload["best"]["params"] == best["params"]
    stdout, stderr = capsys.readouterr()
    k, weight = best["params"]["k"], best["params"]["weight"]
    assert f"best: --set k={k} --set weight={weight} --set metric=cosine" in stdout
    assert "5 of 5 trial(s) run" in stdout
    progress = [line for line in stderr.splitlines() if "trial " in line]
    assert len(progress) == 5 and progress[-1].startswith("jaxannot: trial 5/5: k=")


@needs_optuna
@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--grid", "k=1", "--search", "--space", "k=1:3"], "exclude each other"),
        (["--search", "--trials", "3"], "--search needs --space"),
        (["--search", "--space", "k=1:3"], "--search needs --trials"),
        (["--grid", "k=1", "--space", "k=1:3"], "--space goes with --search"),
        (["--grid", "k=1", "--trials", "3"], "--trials goes with --search"),
        ([], "give --grid KEY=V1,V2,..."),
        (["--search", "--space", "k=0:3", "--trials", "3"], "valid: int in [1,"),
        (["--search", "--space", "kk=1:3", "--trials", "3"], "valid: k, view,"),
        (["--search", "--space", "k=1:3", "--trials", "0"], "--trials must be >= 1"),
        (["--search", "--space", "k=1:3", "--trials", "2", "--timeout", "0"], "> 0"),
    ],
)
def test_cli_search_user_errors_are_one_line(extra, needle, data_root, capsys):
    argv = ["tune", "knn", "--dataset", "emotions", "--data-dir", str(data_root)]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert needle in last and last.startswith("jaxannot: error:"), err
    assert "Traceback" not in err


def test_without_optuna_the_search_names_the_extra(corpus, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` fails
    argv = ["tune", "knn", "--dataset", "emotions", "--search", "--space", "k=1:3"]
    assert main([*argv, "--trials", "2"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        "jaxannot: error: the hyper-parameter search needs optuna; install it with: "
        "pip install 'jaxannot[search]'"
    )
    with pytest.raises(ImportError, match=r"pip install 'jaxannot\[search\]'"):
        tuning.search("knn", corpus, ["k=1:3"], trials=2)
    # the grid needs no optuna
    assert tuning.cross_validate("knn", corpus, {"k": [3]}, folds=2).best.mean > 0
