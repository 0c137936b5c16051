"""Every default of every registered method comes from ``hyper_defaults.toml`` with
its origin; a cross-validated one equals the winner of its committed record."""

import dataclasses
import inspect
import json
import pathlib

import numpy as np
import pytest

from jaxannot.annotators import available_methods, hyper_spec
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


@pytest.fixture(scope="module")
def guard(benchmark_script):
    return benchmark_script("tools.defaults_guard")


@pytest.fixture(scope="module")
def splits(guard, data_root):
    return guard.Splits(data_root)


def _cv_defaults():
    """``(name, key, default, owner, record)`` of every cross-validated default."""
    for name, table in DEFAULTS.items():
        for key, default in table.items():
            if default.origin == "cv":
                owner = default.record_method or name
                yield name, key, default, owner, _record(owner, default.record)


def test_every_cross_validated_default_is_the_winner_of_its_record(guard):
    checked = 0
    for name, key, default, owner, record in _cv_defaults():
        assert record["method"] == owner
        assert owner in METHODS and key in DEFAULTS[owner], (name, key)
        runs = [r for r in record["runs"] if key in r["grid"]]
        assert runs, f"{name}.{key}: not in the grid of {default.record}'s record"
        run = runs[-1]
        assert run["folds"] >= 2
        chosen, _ = guard.decided_value(record, key, default.rule)
        assert chosen == default.value, (name, key, chosen)
        # on a dataset without a split: one run inside each evaluation seed's
        # training part, the default the value most of them choose
        assert not guard.nested_problems(name, key, default, record)
        assert len(run["grid"][key]) >= 2, (name, key)
        if record["dataset"] in guard.NO_SPLIT:
            pass  # per seed, read by the same rule (guard.decided_value)
        elif default.rule == "smallest_within_1se":
            assert chosen == smallest_within_one_se(
                run["results"], key, run["higher_is_better"]
            )
        elif default.rule == "incumbent_within_1se":
            kept = incumbent_within_one_se(
                run["results"],
                sorted(run["grid"]),
                run["higher_is_better"],
                run["defaults_at_run"],
            )
            assert chosen == kept[key]
        else:
            assert chosen == run["best"]["params"][key]
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


def test_every_record_is_a_training_split_cross_validation_of_its_method(guard, splits):
    """The leakage guard on every committed run: ``n_images``, the training rows
    and fingerprint, the labelled counts, recomputed from the split it names."""
    paths = sorted(RECORDS.glob("*.json"))
    assert paths
    problems, with_rows = [], 0
    for path in paths:
        record = json.loads(path.read_text())
        name = record["method"]
        assert path.name == f"{name}_{record['dataset']}.json"
        for run in record["runs"]:
            assert run["method"] == name and run["dataset"] == record["dataset"]
            problems += guard.run_problems(run, splits)
            with_rows += run.get("train_rows") is not None
            assert set(run["grid"]) <= set(DEFAULTS[name]), path.name
            rows = {json.dumps(r["params"], sort_keys=True): r for r in run["results"]}
            winner = rows[json.dumps(run["best"]["params"], sort_keys=True)]
            sign = 1 if run["higher_is_better"] else -1
            best = max(
                sign * r["mean"] for r in run["results"] if r["mean"] is not None
            )
            assert sign * winner["mean"] == best == sign * run["best"]["mean"]
    assert not problems, problems
    assert with_rows >= 15  # 3sources' bag model: 3 methods x 5 seeds


def _doctored(run: dict, **changes) -> dict:
    return {**json.loads(json.dumps(run)), **changes}


def _run_at(owner: str, dataset: str, key: str, seed: int) -> dict:
    runs = [r for r in _record(owner, dataset)["runs"] if key in r["grid"]]
    return [r for r in runs if r["seed"] == seed][-1]


def test_the_split_guard_fails_on_planted_faults(guard, splits):
    run = _run_at("mmh", "3sources", "bag_model", 1)
    assert guard.run_problems(run, splits) == []
    corpus, rows, test_rows = splits.training("3sources", 1)
    assert run["train_rows"] == rows.tolist() and len(test_rows) == 51

    def fails(doctored, match):
        problems = guard.run_problems(doctored, splits)
        assert any(match in p for p in problems), problems

    # a test image of the seed in place of a training image
    leaked = sorted([*run["train_rows"][1:], int(test_rows[0])])
    fails(_doctored(run, train_rows=leaked), "test images of seed 1 in the CV")
    # the training part of another seed, with its fingerprint (seed 0's images)
    seed0 = splits.training("3sources", 0)
    other = _doctored(
        run,
        train_rows=seed0[1].tolist(),
        train_fingerprint=guard.corpus_fingerprint(seed0[0]),
    )
    fails(other, "test images of seed 1")
    fails(other, "the fingerprint is not that of the training images")
    # every image (the test split too) cross-validated, as a count
    fails(_doctored(run, n_images=169), "n_images 169, but the training split has 118")
    scene = _run_at("sfsls", "scene", "lam", 0)
    assert guard.run_problems(scene, splits) == []
    fails(_doctored(scene, n_images=1211 + 1196), "n_images 2407")
    # every fit image labelled while the record says 10 %
    fails(_doctored(scene, labelled_fraction=None), "labels [807, 807, 808]")
    fails(_doctored(scene, n_labelled=[807, 807, 808]), "n_labelled [807")
    fails(_doctored(scene, split="test"), "split 'test'")
    fails(_doctored(scene, split_seed=1), "split seed 1")


def test_the_split_guard_covers_the_ensembles_record(guard, splits):
    """The ensemble's record (``tools/ensemble_defaults_cv.py``, its base fits
    shared between settings) names Corel5k's training split like any other; a test
    image planted in its images fails it."""
    run = _run_at("ensemble", "corel5k", "targets", 0)
    assert guard.run_problems(run, splits) == []
    assert run["command"].startswith("python -m tools.ensemble_defaults_cv")
    train, test = splits.dataset("corel5k")

    def swap(tested, trained):
        return np.concatenate([np.asarray(tested)[:1], np.asarray(trained)[1:]])

    # the first training image replaced by the first test image
    planted = dataclasses.replace(
        train,
        views={k: swap(test.views[k], v) for k, v in train.views.items()},
        words=swap(test.words, train.words),
        word_mask=swap(test.word_mask, train.word_mask),
    )
    problems = guard.run_problems(
        _doctored(run, train_fingerprint=guard.corpus_fingerprint(planted)), splits
    )
    assert any("the fingerprint is not that" in p for p in problems), problems
    problems = guard.run_problems(_doctored(run, n_images=4501), splits)
    assert any("n_images 4501, but the training split has 4500" in p for p in problems)


def test_the_guard_recomputes_the_split_jaxannot_evaluate_uses(guard, splits):
    from jaxannot.data import make_task

    for name, seed in (("3sources", 3), ("mfeat", 0)):
        train, test = splits.dataset(name)
        task = make_task(train, test, protocol="inductive", seed=seed)
        corpus, rows, test_rows = splits.training(name, seed)
        fingerprint = guard.corpus_fingerprint
        assert fingerprint(train.subset(rows)) == fingerprint(task.train)
        assert fingerprint(corpus) == fingerprint(task.train)
        assert len(rows) + len(test_rows) == train.num_images
    for name in {*guard.NO_SPLIT, "scene", "corel5k", "wikipedia"}:
        assert (splits.dataset(name)[1] is None) == (name in guard.NO_SPLIT), name


def _deciding_runs(key: str, default, record: dict, guard) -> list:
    runs = [r for r in record["runs"] if key in r["grid"]]
    if record["dataset"] in guard.NO_SPLIT:
        return list(guard.runs_by_seed(record, key).values())
    return runs[-1:]


def test_every_default_is_decided_at_its_methods_labelled_fraction(guard):
    """sfsls, sfss and fsnm are evaluated with 10 % of the images labelled; every
    key of theirs is decided so (their lam and subspace were decided with every
    image labelled until issue 42)."""
    problems, at_tenth = [], 0
    for _name, key, default, owner, record in _cv_defaults():
        for run in _deciding_runs(key, default, record, guard):
            problems += guard.protocol_problems(owner, key, run)
            at_tenth += run["labelled_fraction"] == 0.1
    assert not problems, problems
    semi = [
        k
        for m in guard.LABELLED_FRACTION
        for k, d in DEFAULTS[m].items()
        if d.origin == "cv"
    ]
    assert at_tenth == len(semi) == 16
    lam = _run_at("sfsls", "scene", "lam", 0)
    assert guard.protocol_problems("sfsls", "lam", lam) == []
    planted = guard.protocol_problems(
        "sfsls", "lam", {**lam, "labelled_fraction": None}
    )
    assert planted == [
        "sfsls.lam: decided at labelled fraction None, its protocol is 0.1"
    ]
    knn = _run_at("knn", "corel5k", "k", 0)
    assert guard.protocol_problems("knn", "k", {**knn, "labelled_fraction": 0.1})


def test_the_nested_guard_fails_on_planted_faults(guard):
    """3sources has no split: its bag model is decided inside each seed's 70 %."""
    default = DEFAULTS["mmh"]["bag_model"]
    record = _record("mmh", "3sources")
    assert guard.nested_problems("mmh", "bag_model", default, record) == []
    value, choices = guard.decided_value(record, "bag_model", default.rule)
    assert sorted(choices) == [0, 1, 2, 3, 4] and value == default.value
    # one seed-0 run (the protocol before issue 42): seeds 1-4 test on its images
    seed0 = {**record, "runs": [guard.runs_by_seed(record, "bag_model")[0]]}
    problems = guard.nested_problems("mmh", "bag_model", default, seed0)
    assert any("seeds [1, 2, 3, 4]" in p for p in problems), problems
    # a registered default that is not what most seeds chose
    other = next(v for v in ("bernoulli", "softmax") if v != default.value)
    wrong = dataclasses.replace(default, value=other)
    problems = guard.nested_problems("mmh", "bag_model", wrong, record)
    assert any("majority" in p for p in problems), problems


def test_seeded_evaluations_hold_their_own_seeds_choice(guard):
    """mmh_claim's 3sources runs hold the bag model chosen inside their own seed's
    training part, never a choice made on another seed's (whose training part
    holds this seed's test images)."""
    claim = RECORDS.parent / "mmh_claim.json"
    runs = json.loads(claim.read_text())["runs"]
    assert guard.evaluation_problems(runs) == []
    nested = [r for r in runs if r["dataset"] == "3sources" and r.get("nested")]
    assert {(r["method"], r["seed"]) for r in nested} == {
        (m, s) for m in ("mmh", "twh", "dwh-svm") for s in range(5)
    }
    # planted: a run at seed s holding the value another seed's CV chose
    record = _record("twh", "3sources")
    rule = DEFAULTS["twh"]["bag_model"].rule
    run = next(r for r in nested if r["method"] == "twh")
    want = guard.seed_choice(record, "bag_model", rule, run["seed"])
    other = next(v for v in ("bernoulli", "softmax") if v != want)
    planted = {**run, "settings": {**run["settings"], "bag_model": other}}
    problems = guard.evaluation_problems([planted])
    assert problems and "training part chose" in problems[0], problems
    # planted: a seed the record has no cross-validation at
    problems = guard.evaluation_problems([{**run, "seed": 7}])
    assert problems and "no cross-validation inside seed 7" in problems[0]


def test_fit_signatures_show_the_table_defaults():
    from jaxannot.methods.baselines import annotators as baselines
    from jaxannot.methods.emml import annotators as emml

    assert fit_defaults(baselines._knn_fit) == method_defaults("knn")
    assert fit_defaults(emml.fit_emml_annotator) == method_defaults("emml")
    sig = inspect.signature(emml.fit_emml_annotator)
    assert (
        sig.parameters["gamma_scale"].default == method_defaults("emml")["gamma_scale"]
    )


def test_every_fit_lists_its_hyper_parameters_and_refuses_an_unknown_one():
    """Issue 45, point 2: every registered fit's signature is its table's names with
    their defaults (keyword-only), and an unknown keyword is a TypeError naming it,
    before anything is fitted (``corpus=None``)."""
    for name, method in METHODS.items():
        params = inspect.signature(method.fit).parameters
        hyper = {
            n: p.default
            for n, p in params.items()
            if p.kind is p.KEYWORD_ONLY and n != "rng_key"
        }
        assert list(hyper.items()) == list(method.hyper.items()), name
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), name
        with pytest.raises(TypeError, match="'no_such_setting'"):
            method.fit(None, rng_key=None, no_such_setting=1)
    # sfss is sfsls at p = 1: p is not one of its settings
    with pytest.raises(TypeError, match="'p'"):
        METHODS["sfss"].fit(None, rng_key=None, p=0.5)


@pytest.mark.parametrize(
    ("method", "key", "value"),
    [  # one per check a fit made by hand before its spec did it for every path
        ("knn", "k", 0),
        ("knn", "metric", "manhattan"),
        ("sfss", "neighbors", 0),
        ("fsnm", "selected", 1.5),
        ("mmh", "words_wing", "maybe"),
        ("iale-sf", "lam", 0.0),
        ("lap-mix-unigram", "lam", -1.0),
        ("lap-mix-unigram", "algorithm", "lapvar3"),
        ("mix-unigram", "pi_concentration", 0.5),
        ("link-lda", "inference", "gibbs"),
        ("emml", "solver", "cplex"),
        ("tagprop", "balance", True),
        ("tagprop", "distances", "cosine,"),
        ("ensemble", "targets", "map,auc"),
        ("ensemble", "step", 0.0),
    ],
)
def test_a_direct_fit_checks_what_it_is_given(method, key, value):
    """``get_method(name).fit(...)`` called directly refuses an invalid value with
    the spec's message (the same as ``--set``'s), before anything is fitted."""
    with pytest.raises(ValueError, match=f"method '{method}': hyper-parameter {key}="):
        METHODS[method].fit(None, rng_key=None, **{key: value})


def _toy(monkeypatch):
    table = load_defaults(
        '[toy]\ntopics = { value = 2, origin = "solver" }\n'
        'view = { value = "", origin = "data" }\n'
    )
    monkeypatch.setitem(DEFAULTS, "toy", table["toy"])


def test_uses_defaults_hands_over_the_values_as_a_whole_and_fixed_ones(monkeypatch):
    _toy(monkeypatch)
    seen = []

    @uses_defaults("toy", p=1.0)
    def whole(corpus, *, rng_key, hyper):
        seen.append(hyper)
        return Fitted("toy", {}, {"extra": 1})

    assert list(inspect.signature(whole).parameters) == [
        "corpus",
        "rng_key",
        "topics",
        "view",
    ]
    fitted = whole(None, rng_key=None, view="all")
    assert seen == [{"p": 1.0, "topics": 2, "view": "all"}]
    assert fitted.hyper == {"p": 1.0, "topics": 2, "view": "all", "extra": 1}
    with pytest.raises(ValueError, match=r"hyper-parameter topics=0 is invalid"):
        whole(None, rng_key=None, topics=0)
    assert len(seen) == 1  # refused before the fit ran

    @uses_defaults("toy", p=1.0)
    def named(corpus, *, rng_key, p, topics, view):
        return Fitted("toy", {}, {"seen": [p, topics, view]})

    assert fit_defaults(named) == {"topics": 2, "view": ""}
    assert named(None, rng_key=None).hyper["seen"] == [1.0, 2, ""]
    with pytest.raises(TypeError, match="'p'"):
        named(None, rng_key=None, p=0.5)
    with pytest.raises(TypeError, match="fixed"):
        uses_defaults("toy", topics=3)


def test_checked_values_are_not_checked_again_but_inner_fits_check_theirs(
    monkeypatch,
):
    _toy(monkeypatch)
    checked = []
    real = hyper_spec.check_hyper
    monkeypatch.setattr(
        hyper_spec,
        "check_hyper",
        lambda method, key, value: checked.append(key) or real(method, key, value),
    )

    @uses_defaults("toy")
    def inner(corpus, *, rng_key, topics, view):
        return Fitted("toy", {}, {})

    @uses_defaults("toy")
    def outer(corpus, *, rng_key, topics, view):
        inner(None, rng_key=None, topics=topics + 1)
        return Fitted("toy", {}, {})

    outer(None, rng_key=None, topics=3)
    assert checked == ["topics", "topics"]  # outer's value, then inner's
    checked.clear()
    with hyper_spec.checked_values("toy"):
        outer(None, rng_key=None, topics=3, view="all")
    assert checked == ["topics"]  # inner's only
    checked.clear()
    with hyper_spec.checked_values("another"):
        outer(None, rng_key=None, topics=3)
    assert checked == ["topics", "topics"]


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
