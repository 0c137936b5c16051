"""Every default of every registered method comes from ``hyper_defaults.toml`` with
its origin; a cross-validated one equals the winner of its committed record."""

import inspect
import json
import pathlib

import pytest

from jaxannot.annotators import available_methods
from jaxannot.annotators.base import Fitted
from jaxannot.annotators.hyper_spec import (
    DEFAULTS,
    fit_defaults,
    method_defaults,
    spec_for,
    uses_defaults,
)
from jaxannot.annotators.hyper_tables import load_defaults
from jaxannot.tuning.selection import incumbent_within_one_se, smallest_within_one_se

METHODS = available_methods()
RECORDS = pathlib.Path(__file__).parents[2] / "benchmarks" / "results" / "defaults_cv"


def _record(method: str, dataset: str) -> dict:
    path = RECORDS / f"{method}_{dataset}.json"
    assert path.exists(), f"{method}: no record {path.name}"
    return json.loads(path.read_text())


def test_every_method_takes_its_defaults_from_the_table_in_its_order():
    for name, method in METHODS.items():
        table = method_defaults(name) if method.hyper else {}
        assert list(method.hyper.items()) == list(table.items()), name
    assert set(DEFAULTS) <= set(METHODS), set(DEFAULTS) - set(METHODS)


def test_every_default_has_the_type_of_its_spec():
    for name, table in DEFAULTS.items():
        for key, default in table.items():
            spec = spec_for(name, key)
            assert type(default.value) is spec.type, (name, key)
            assert spec.problem(default.value) is None, (name, key)


def test_every_cross_validated_default_is_the_winner_of_its_record():
    checked = 0
    for name, table in DEFAULTS.items():
        for key, default in table.items():
            if default.origin != "cv":
                continue
            owner = default.record_method or name
            record = _record(owner, default.record)
            assert record["method"] == owner
            assert owner in METHODS and key in DEFAULTS[owner], (name, key)
            runs = [r for r in record["runs"] if key in r["grid"]]
            assert runs, f"{name}.{key}: not in the grid of {default.record}'s record"
            run = runs[-1]
            assert run["split"] == "train" and run["folds"] >= 2
            if default.rule == "smallest_within_1se":
                chosen = smallest_within_one_se(
                    run["results"], key, run["higher_is_better"]
                )
                assert chosen == default.value, (name, key, chosen)
            elif default.rule == "incumbent_within_1se":
                chosen = incumbent_within_one_se(
                    run["results"],
                    sorted(run["grid"]),
                    run["higher_is_better"],
                    run["defaults_at_run"],
                )[key]
                assert chosen == default.value, (name, key, chosen)
            else:
                assert run["best"]["params"][key] == default.value, (name, key)
            assert len(run["grid"][key]) >= 2, (name, key)
            checked += 1
    assert checked > 0


def _deciding_run(name: str, key: str, default) -> tuple[str, dict]:
    owner = default.record_method or name
    runs = [r for r in _record(owner, default.record)["runs"] if key in r["grid"]]
    return owner, runs[-1]


def _stale(owner: str, key: str, run: dict) -> dict:
    """The settings ``run`` held that differ from today's defaults of ``owner`` (its
    grid keys aside; ``data`` settings such as a target view are the dataset's; a
    setting the key requires, ``Default.requires``, at its required value)."""
    held = {**run["defaults_at_run"], **run["fixed"]}
    table = DEFAULTS[owner]
    want = {k: d.value for k, d in table.items()} | dict(table[key].requires)
    return {
        k: (v, want[k])
        for k, v in held.items()
        if k in table
        and k not in run["grid"]
        and table[k].origin != "data"
        and v != want[k]
    }


def _tune_metric(method) -> str:
    """The metric ``jaxannot tune`` uses by default on a dataset with classes."""
    if method.response is not None:
        return "rmse"
    if method.predict_labels is not None:
        return "classification_accuracy"
    return "map"


def test_every_cross_validated_default_was_chosen_at_todays_other_defaults():
    stale, checked = {}, 0
    for name, table in DEFAULTS.items():
        for key, default in table.items():
            if default.origin != "cv":
                continue
            owner, run = _deciding_run(name, key, default)
            # a metric to select by is recorded by the metric it names
            metric = default.value if key == "select_metric" else None
            assert run["metric"] == (metric or _tune_metric(METHODS[owner])), (
                name,
                key,
            )
            differs = _stale(owner, key, run)
            if differs:
                stale[(name, key)] = differs
            checked += 1
    assert checked > 100
    # none: the records are a fixed point of the coordinate search
    assert not stale, stale


def test_every_record_is_a_training_split_cross_validation_of_its_method():
    paths = sorted(RECORDS.glob("*.json"))
    assert paths
    for path in paths:
        record = json.loads(path.read_text())
        name = record["method"]
        assert path.name == f"{name}_{record['dataset']}.json"
        for run in record["runs"]:
            assert run["split"] == "train" and run["method"] == name
            assert set(run["grid"]) <= set(DEFAULTS[name]), path.name
            rows = {json.dumps(r["params"], sort_keys=True): r for r in run["results"]}
            winner = rows[json.dumps(run["best"]["params"], sort_keys=True)]
            sign = 1 if run["higher_is_better"] else -1
            best = max(
                sign * r["mean"] for r in run["results"] if r["mean"] is not None
            )
            assert sign * winner["mean"] == best == sign * run["best"]["mean"]


def test_fit_signatures_show_the_table_defaults():
    from jaxannot.methods.baselines import annotators as baselines
    from jaxannot.methods.emml import annotators as emml

    assert fit_defaults(baselines._knn_fit) == method_defaults("knn")
    assert fit_defaults(emml.fit_emml_annotator) == method_defaults("emml")
    sig = inspect.signature(emml.fit_emml_annotator)
    assert (
        sig.parameters["gamma_scale"].default == method_defaults("emml")["gamma_scale"]
    )


def test_uses_defaults_fills_records_and_refuses_a_second_default(monkeypatch):
    table = load_defaults(
        '[toy]\na = { value = 2, origin = "solver" }\n'
        'b = { value = "x", origin = "untuned", note = "none" }\n'
    )
    monkeypatch.setitem(DEFAULTS, "toy", table["toy"])

    @uses_defaults("toy")
    def fit(corpus, *, rng_key, a, b):
        return Fitted("toy", {}, {"seen": [a, b]})

    fitted = fit(None, rng_key=None, b="y")
    assert fitted.hyper == {"a": 2, "b": "y", "seen": [2, "y"]}
    assert fit_defaults(fit) == {"a": 2, "b": "x"}
    with pytest.raises(TypeError, match="without defaults of their own"):

        @uses_defaults("toy")
        def own(corpus, *, rng_key, a=3, b):
            pass

    with pytest.raises(TypeError, match="must be the hyper_defaults.toml names"):

        @uses_defaults("toy")
        def other(corpus, *, rng_key, a, c):
            pass


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[m]\nk = 1\n", r"\[m\] k: needs a table with `value` and `origin`"),
        ('[m]\nk = { value = 1, origin = "guess" }\n', "unknown origin 'guess'"),
        ('[m]\nk = { value = 1, origin = "cv" }\n', "record"),
        ('[m]\nk = { value = 1, origin = "paper" }\n', "needs a note"),
        ('[m]\nk = { value = 1, origin = "solver", why = 2 }\n', "unknown keys"),
        ('[m]\nk = { value = 1, origin = "cv", record = "d", rule = "x" }\n', "rule"),
        (
            '[m]\nk = { value = 1, origin = "solver", rule = "smallest_within_1se" }\n',
            "only with",
        ),
        ('[m]\nk = { value = 1, origin = "solver", requires = { a = 2 } }\n', "only"),
        (
            '[m]\nk = { value = 1, origin = "cv", record = "d", requires = 2 }\n',
            "table",
        ),
    ],
)
def test_malformed_defaults_name_the_entry(text, match):
    with pytest.raises(ValueError, match=match) as err:
        load_defaults(text)
    assert "hyper_defaults.toml" in str(err.value)


def test_a_default_from_another_methods_record_names_that_record():
    from jaxannot.annotators._hyper_types import Default

    shared = DEFAULTS["mmh-regression"]["bag_model"]
    assert shared.record_method == "mmh"
    assert "defaults_cv/mmh_3sources.json" in shared.describe("mmh-regression")
    with pytest.raises(ValueError, match="only with origin = 'cv'"):
        Default("x", "untuned", record_method="mmh", note="why")
    with pytest.raises(ValueError, match="needs a note"):
        Default("x", "cv", record="3sources", record_method="mmh")
    with pytest.raises(ValueError, match="unknown keys"):
        load_defaults('[toy]\na = { value = 1, origin = "solver", from = "x" }\n')
