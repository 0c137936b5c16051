"""The cheap stored figures of ``benchmarks/results`` re-run and compared.

Each test recomputes one recorded row the way its benchmark script made it and checks
every metric the JSON stores, and the hyper-parameters it was made with, against the
recomputation. The figures are read from the JSON files (never copied here), so the
tests hold against whichever run is committed, and fail when a committed row no longer
comes out of the code.

- ``defaults_vs_empirical_{scene,corel5k}.json``: ``jaxannot evaluate METHOD
  --dataset D`` at the defaults, seed 0 (``benchmarks/defaults_vs_empirical.py``);
  here the same calls as ``cmd_evaluate`` (``load_dataset``, ``make_task``,
  ``evaluate``) in this process. The cheap rows only: the ``empirical`` and ``knn``
  baselines and the ``plsa-words`` topic model on scene.
- ``tagprop_subsample.json``: ``benchmarks/tagprop_subsample.py``, through its own
  functions.
"""

import json
import math
import pathlib

import pytest

from jaxannot.annotators import get_method, parse_hyper
from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.evaluation import evaluate

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

#: Tolerance of the ``empirical`` rows: bit-identical. Its scores are the training
#: word counts (integers, exact in float32), so its ranking is the same on every
#: machine, and the metrics are the same numpy code on the same ranking.
COUNT_TOLERANCE = 0.0

#: Absolute tolerance of the rows of methods with floating-point scores (knn,
#: plsa-words, tagprop). Their fits and scores are deterministic: on the machine that
#: recorded them the rows come back bit-identical. Every stored metric is a function
#: of the test images' rankings of the words (ties averaged), so float32 noise in the
#: scores that leaves the rankings alone changes nothing, and a changed ranking
#: moves a metric by a whole step (most by 1e-4 or more). 1e-9 only absorbs float64
#: rounding in the metrics' means (~1e-16 relative), which another numpy build's
#: summation order could change; it is five places below the tables' four decimals.
SCORE_TOLERANCE = 1e-9

#: The cheap rows of defaults_vs_empirical_{dataset}.json that are re-run, and the
#: tolerance of each: seconds apiece on 2 CPU cores (plsa-words: about 10 s).
DEFAULT_ROWS = [
    ("scene", "empirical", COUNT_TOLERANCE),
    ("corel5k", "empirical", COUNT_TOLERANCE),
    ("scene", "knn", SCORE_TOLERANCE),
    ("corel5k", "knn", SCORE_TOLERANCE),
    ("scene", "plsa-words", SCORE_TOLERANCE),
]


def _stored_row(path: pathlib.Path, method: str) -> dict:
    row = json.loads(path.read_text())["results"].get(method)
    assert row is not None and "metrics" in row, f"{path.name} has no {method} row"
    assert row["metrics"], f"{path.name}: the {method} row stores no metrics"
    return row


def metric_mismatches(stored: dict, recomputed: dict, tolerance: float) -> list:
    """The stored metrics that the recomputation does not reproduce within
    ``tolerance`` (absolute), as ``(name, stored, recomputed)``; a metric the
    recomputation lacks counts as a mismatch."""
    bad = []
    for name, value in sorted(stored.items()):
        got = recomputed.get(name)
        if got is None or not math.isclose(got, value, rel_tol=0.0, abs_tol=tolerance):
            bad.append((name, value, got))
    return bad


def _jsonable(params: dict) -> dict:
    return json.loads(json.dumps(params))


@pytest.fixture(scope="module")
def tasks(data_root):
    """``jaxannot evaluate --dataset D``'s task: the dataset's own split, the
    inductive protocol, seed 0 (built once per dataset)."""
    cache = {}

    def task(dataset):
        if dataset not in cache:
            train, test = load_dataset(dataset, data_dir=data_root)
            cache[dataset] = make_task(
                train, test, protocol="inductive", labelled_fraction=None, seed=0
            )
        return cache[dataset]

    return task


@pytest.mark.parametrize("dataset", ["corel5k", "scene", "emotions", "yeast", "enron"])
def test_every_stored_default_row_was_made_at_todays_defaults(dataset):
    """The tables say "at the defaults": each row's model settings are today's
    (settings that follow the data, ``origin = "data"``, resolve per corpus)."""
    from jaxannot.annotators.hyper_spec import DEFAULTS

    path = RESULTS / f"defaults_vs_empirical_{dataset}.json"
    stale = {}
    for method, row in json.loads(path.read_text())["results"].items():
        table = DEFAULTS.get(method, {})
        differs = {
            k: (v, table[k].value)
            for k, v in row.get("params", {}).items()
            if k in table and table[k].origin != "data" and v != table[k].value
        }
        if differs:
            stale[method] = differs
    assert not stale, f"{path.name}: rows made at other defaults: {stale}"


@pytest.mark.parametrize(
    ("dataset", "method", "tolerance"),
    DEFAULT_ROWS,
    ids=[f"{d}-{m}" for d, m, _ in DEFAULT_ROWS],
)
def test_defaults_vs_empirical_row_reproduces(tasks, dataset, method, tolerance):
    row = _stored_row(RESULTS / f"defaults_vs_empirical_{dataset}.json", method)
    hyper = parse_hyper(get_method(method), [])  # the defaults, as the CLI parses
    result = evaluate(method, tasks(dataset), hyper=hyper, seed=0)

    # made at today's defaults (otherwise the row is stale: re-run it)
    assert _jsonable(result.params) == row["params"]
    assert metric_mismatches(row["metrics"], result.metrics, tolerance) == []


@pytest.fixture(scope="module")
def tagprop_subsample(benchmark_script):
    return benchmark_script("tagprop_subsample")


def test_tagprop_subsample_reproduces(tagprop_subsample, data_root):
    stored = json.loads((RESULTS / "tagprop_subsample.json").read_text())
    assert stored["metrics"], "tagprop_subsample.json stores no metrics"
    task = tagprop_subsample.subsample_task(
        stored["dataset"],
        stored["n_train"],
        stored["n_test"],
        stored["seed"],
        data_root,
    )
    result = tagprop_subsample.run(task, stored["seed"])

    assert result["params"] == stored["params"]
    assert result["bipartition"] == stored["bipartition"]
    assert (
        metric_mismatches(stored["metrics"], result["metrics"], SCORE_TOLERANCE) == []
    )


def test_a_changed_figure_is_a_mismatch():
    stored = {"map": 0.5, "n_plus@5": 6.0, "word_f1@5": 0.25}
    assert metric_mismatches(stored, dict(stored), 0.0) == []
    assert metric_mismatches(stored, {**stored, "map": 0.5 + 1e-8}, 1e-9) == [
        ("map", 0.5, 0.5 + 1e-8)
    ]
    assert metric_mismatches(stored, {**stored, "map": 0.5 + 1e-10}, 1e-9) == []
    assert metric_mismatches(stored, {"map": 0.5, "n_plus@5": 6.0}, 1e-9) == [
        ("word_f1@5", 0.25, None)
    ]


def test_emml_figures_come_from_converged_solves():
    """EMML's exact dual solve at its defaults reached KKT <= 1e-3 (its tolerance) in
    every stored figure: the EMML vs MBRM full fits, and every fold of every setting
    of each run that decides one of its defaults (``defaults_cv/emml_corel5k.json``);
    a solve stopped at its sweep cap would be a figure of an unconverged model."""
    from jaxannot.annotators.hyper_spec import DEFAULTS

    stored = json.loads((RESULTS / "emml_vs_mbrm.json").read_text())["results"]
    for dataset, rows in stored.items():
        info = rows["emml"]["info"]
        assert info["converged"] and info["max_violation"] <= 1e-3, dataset
    record = json.loads((RESULTS / "defaults_cv" / "emml_corel5k.json").read_text())
    for key, default in DEFAULTS["emml"].items():
        if default.origin != "cv":
            continue
        run = [r for r in record["runs"] if key in r["grid"]][-1]
        for row in run["results"]:
            assert row["unconverged_folds"] == [], (key, row["params"])
