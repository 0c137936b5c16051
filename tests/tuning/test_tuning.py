"""``jaxannot.tuning`` and ``jaxannot tune``: k-fold cross-validation of a grid."""

import dataclasses
import json
import os
import re

import numpy as np
import pytest
from sklearn.model_selection import KFold

from jaxannot import tuning
from jaxannot.annotators import get_method
from jaxannot.cli.app import main
from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate
from jaxannot.tuning.cross_validation import best_mean_index


@pytest.fixture(scope="module")
def synthetic():
    return make_synthetic(seed=0, num_images=120, num_classes=True)


@pytest.fixture(scope="module")
def scene(data_root):
    train, test = load_dataset("scene", data_dir=data_root)
    rows = np.random.default_rng(0).permutation(train.num_images)[:300]
    return train.subset(np.sort(rows)), test


def _partition(held_out, n):
    rows = np.concatenate(held_out)
    return rows.size == n and np.array_equal(np.sort(rows), np.arange(n))


@pytest.mark.parametrize("n, folds, seed", [(10, 2, 0), (37, 5, 3), (300, 3, 1)])
def test_folds_are_sklearn_kfold_with_shuffle(n, folds, seed):
    ours = tuning.kfold_rows(n, folds, seed)
    theirs = [
        test
        for _, test in KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n))
    ]
    assert len(ours) == folds and _partition(ours, n)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


def _with_ids(corpus, first):
    """``corpus`` with an extra view holding each image's id (the features stay the
    first view, so methods told ``view="features"`` ignore it)."""
    ids = np.arange(first, first + corpus.num_images, dtype=np.float32)[:, None]
    views = {**corpus.views, "id": ids}
    return dataclasses.replace(
        corpus, views=views, view_kinds={**corpus.view_kinds, "id": "real"}
    )


def test_folds_partition_the_training_images_only(scene):
    train, test = scene
    train, test = _with_ids(train, 0), _with_ids(test, 10_000)
    corpus = tuning.training_images(train, test)
    assert corpus is train  # the test split is not used
    knn = get_method("knn")
    fitted_on, scored = [], []

    def fit(corpus, **kw):
        fitted_on.append(np.asarray(corpus.view("id"))[:, 0])
        return knn.fit(corpus, **kw)

    def score(fitted, corpus):
        scored.append(np.asarray(corpus.view("id"))[:, 0])
        return knn.score_words(fitted, corpus)

    spy = dataclasses.replace(knn, fit=fit, score_words=score)
    result = tuning.cross_validate(
        spy, corpus, {"k": [1, 10]}, folds=3, fixed={"view": "features"}
    )
    assert result.n_images == 300 and _partition(result.held_out, 300)
    assert len(fitted_on) == len(scored) == 6  # 2 settings x 3 folds
    train_ids = np.asarray(train.view("id"))[:, 0]
    for i, held in enumerate(result.held_out):
        pairs = zip(
            fitted_on[2 * i : 2 * i + 2], scored[2 * i : 2 * i + 2], strict=True
        )
        for fit_ids, score_ids in pairs:
            np.testing.assert_array_equal(score_ids, train_ids[held])
            np.testing.assert_array_equal(np.sort(np.r_[fit_ids, score_ids]), train_ids)
    assert all(len(r.folds) == 3 for r in result.results)


def test_a_dataset_without_split_keeps_out_what_evaluate_tests_on(synthetic):
    corpus = tuning.training_images(synthetic, None, seed=3)
    task = make_task(synthetic, None, protocol="inductive", seed=3)
    np.testing.assert_array_equal(corpus.view(), task.train.view())
    assert corpus.num_images + task.test.num_images == synthetic.num_images


def test_best_setting_matches_a_recomputation_with_kfold(scene):
    train, _ = scene
    grid = {"k": [1, 10]}
    result = tuning.cross_validate("knn", train, grid, folds=3, seed=2)
    means = []
    for k in grid["k"]:
        values = []
        kf = KFold(3, shuffle=True, random_state=2)
        for fit, held in kf.split(np.zeros(train.num_images)):
            task = make_task(train.subset(fit), train.subset(held), seed=2)
            values.append(evaluate("knn", task, hyper={"k": k}, seed=2).metrics["map"])
        means.append(np.mean(values))
    got = [r.mean for r in result.results]
    np.testing.assert_allclose(got, means, rtol=0, atol=1e-12)
    assert result.metric == "map" and result.best_index == int(np.argmax(means))
    assert result.best.params == {"k": grid["k"][int(np.argmax(means))]}


def test_transductive_folds_follow_the_evaluate_protocol(synthetic):
    """Every fold fits on all images (training + unlabelled), labels 25% of them among
    the training images outside the fold, scores the unlabelled training images."""
    corpus = tuning.training_images(synthetic, None, seed=1)
    others = tuning.unlabelled_images(synthetic, None, seed=1)
    corpus, others = _with_ids(corpus, 0), _with_ids(others, 1000)
    assert others.word_mask.sum() == 0 and np.all(np.asarray(others.words) == 0)
    n_train, n_all = corpus.num_images, corpus.num_images + others.num_images
    knn = get_method("knn")
    seen = []

    def spy(fit_corpus, **kw):
        seen.append(fit_corpus)
        return knn.fit(fit_corpus, **kw)

    method = dataclasses.replace(knn, fit=spy)
    held_out = tuning.kfold_rows(n_train, 3, 0)
    tasks = list(
        tuning.fold_tasks(
            corpus, held_out, protocol="transductive", unlabelled=others, seed=0
        )
    )
    result = tuning.cross_validate(
        method, corpus, {"k": [3]}, folds=3, protocol="transductive", unlabelled=others
    )
    ids = np.r_[np.arange(n_train), 1000 + np.arange(others.num_images)]
    words = np.asarray(corpus.words)
    for f, (task, fitted_on) in enumerate(zip(tasks, seen, strict=True)):
        mask = np.asarray(task.train.word_mask)
        np.testing.assert_array_equal(np.asarray(fitted_on.view("id"))[:, 0], ids)
        np.testing.assert_array_equal(fitted_on.word_mask, mask)
        assert mask.sum() == round(0.25 * n_all)  # labelled share of ALL images
        labelled = np.flatnonzero(mask)
        assert labelled.max() < n_train  # never an unlabelled image's words
        assert not np.isin(labelled, held_out[f]).any()  # nor the fold's
        np.testing.assert_array_equal(
            np.asarray(task.train.words)[labelled], words[labelled]
        )
        hidden = np.setdiff1d(np.arange(n_train), labelled)
        np.testing.assert_array_equal(task.eval_rows, hidden)
        np.testing.assert_array_equal(task.truth_words, words[hidden])
        value = evaluate(knn, task, hyper={"k": 3}).metrics["map"]
        assert result.results[0].folds[f] == pytest.approx(value, abs=1e-12)
    # the folds draw different labelled images
    assert not np.array_equal(tasks[0].train.word_mask, tasks[1].train.word_mask)


def test_transductive_tune_never_reads_the_unlabelled_images_words(synthetic):
    is_test = np.arange(synthetic.num_images) >= 80
    corpus, test = synthetic.subset(~is_test), synthetic.subset(is_test)
    assert np.asarray(test.word_mask).all()  # given with their words
    rng = np.random.default_rng(0)
    scrambled = dataclasses.replace(
        test,
        words=rng.permutation(np.asarray(test.words), axis=1),
        labels=rng.permutation(np.asarray(test.labels)),
    )

    def tune(unlabelled):
        return tuning.cross_validate(
            "knn",
            corpus,
            {"k": [3, 9]},
            folds=3,
            protocol="transductive",
            unlabelled=unlabelled,
        )

    runs = [tune(test), tune(scrambled)]
    for a, b in zip(runs[0].results, runs[1].results, strict=True):
        assert a.folds == b.folds and a.fold_metrics == b.fold_metrics
    # ... yet the unlabelled images take part in the fit (as neighbours)
    alone = tune(None)
    assert [r.folds for r in alone.results] != [r.folds for r in runs[0].results]


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"labelled_fraction": 1.0}, "labelled fraction in (0, 1)"),
        ({"labelled_fraction": 0.9}, "lower --labelled-fraction or raise --folds"),
    ],
)
def test_transductive_tune_refuses_an_impossible_labelled_fraction(
    synthetic, kwargs, needle
):
    with pytest.raises(ValueError, match=re.escape(needle)):
        tuning.cross_validate(
            "knn", synthetic, {"k": [3]}, folds=3, protocol="transductive", **kwargs
        )
    with pytest.raises(ValueError, match="only take part in the transductive"):
        next(tuning.fold_tasks(synthetic, [np.arange(3)], unlabelled=synthetic))


def test_complete_length_is_minimised(synthetic):
    grid = {"k": [1, 4, 60]}
    cl = tuning.cross_validate(
        "knn", synthetic, grid, folds=3, metric="complete_length"
    )
    means = [r.mean for r in cl.results]
    assert len(set(means)) == 3  # the check below is not vacuous
    assert not cl.higher_is_better and cl.best_index == int(np.argmin(means))
    mp = tuning.cross_validate("knn", synthetic, grid, folds=3, metric="map")
    assert mp.higher_is_better
    assert mp.best_index == int(np.argmax([r.mean for r in mp.results]))
    assert best_mean_index([np.nan, 2.0, 1.0], False) == 2
    assert best_mean_index([1.0, 1.0, np.nan], True) == 0  # first among equals


def test_default_metric_and_unknown_metric(synthetic):
    knn = get_method("knn")
    assert tuning.default_metric(knn, synthetic) == "map"
    classifier = dataclasses.replace(
        knn,
        name="knn-classifier",
        predict_labels=lambda f, c: np.argmax(knn.score_words(f, c), axis=1),
    )
    no_classes = dataclasses.replace(synthetic, labels=None, class_names=())
    assert tuning.default_metric(classifier, synthetic) == "classification_accuracy"
    assert tuning.default_metric(classifier, no_classes) == "map"
    assert "classification_accuracy" not in tuning.available_metrics(knn, no_classes)
    with pytest.raises(ValueError, match="valid metrics: accuracy, complete_length"):
        tuning.cross_validate(knn, synthetic, {"k": [1]}, folds=2, metric="nope")


@pytest.mark.parametrize(
    "specs, needle",
    [
        (["k"], "expects key=v1,v2"),
        (["k="], "empty value"),
        (["k=1,,2"], "empty value"),
        (["=1"], "no hyper-parameter name"),
        (["k=1", "k=2"], "given twice"),
        (["k=1,01"], "twice"),
        (["kk=1"], "valid: k, view, metric, weight"),
        (["k=x"], "expects int"),
    ],
)
def test_malformed_grids(specs, needle):
    with pytest.raises((ValueError, KeyError), match=needle):
        tuning.parse_grid("knn", specs)


def test_grid_values_are_typed_and_the_product_is_ordered(synthetic):
    grid = tuning.parse_grid("knn", ["k=2,3", "weight=heat,uniform"])
    assert grid == {"k": [2, 3], "weight": ["heat", "uniform"]}
    result = tuning.cross_validate(
        "knn", synthetic, grid, folds=2, fixed=["metric=euclidean"], progress=True
    )
    assert [r.params for r in result.results] == [
        {"k": 2, "weight": "heat"},
        {"k": 2, "weight": "uniform"},
        {"k": 3, "weight": "heat"},
        {"k": 3, "weight": "uniform"},
    ]
    assert all(r.hyper["metric"] == "euclidean" for r in result.results)
    assert result.set_flags()[-1] == "metric=euclidean"
    with pytest.raises(ValueError, match="both in --grid and --set"):
        tuning.cross_validate("knn", synthetic, grid, folds=2, fixed={"k": 4})


def test_a_comma_list_value_joins_its_items_with_plus_in_a_grid():
    grid = tuning.parse_grid(
        "tagprop", ["distances=cosine,cosine+idf", "metric=cosine,euclidean"]
    )
    assert grid == {
        "distances": ["cosine", "cosine,idf"],
        "metric": ["cosine", "euclidean"],
    }
    with pytest.raises(ValueError, match="'cos' is not a valid choice"):
        tuning.parse_grid("tagprop", ["distances=cosine+cos"])
    with pytest.raises(ValueError, match="not a valid choice"):  # no list elsewhere
        tuning.parse_grid("knn", ["metric=cosine+euclidean"])


@pytest.mark.parametrize("folds", [1, 121])
def test_bad_fold_counts(synthetic, folds):
    with pytest.raises(ValueError, match="--folds"):
        tuning.cross_validate("knn", synthetic, {"k": [1]}, folds=folds)


# ------------------------------------------------------------------------ CLI
def test_cli_tune_writes_the_documented_json(data_root, tmp_path, capsys):
    out = tmp_path / "tune.json"
    argv = ["tune", "knn", "--dataset", "scene", "--data-dir", str(data_root)]
    argv += ["--grid", "k=1,10", "--folds", "2", "--set", "weight=uniform"]
    assert main([*argv, "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert {
        "method",
        "dataset",
        "folds",
        "metric",
        "grid",
        "fixed",
        "results",
        "best",
    } <= set(payload)
    assert (payload["method"], payload["dataset"], payload["folds"]) == (
        "knn",
        "scene",
        2,
    )
    assert payload["metric"] == "map" and payload["grid"] == {"k": [1, 10]}
    assert payload["fixed"] == {"weight": "uniform"}
    assert payload["n_images"] == 1211  # the training split of scene, not its test
    import jax

    assert payload["platform"] == {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "cpus": os.cpu_count(),
    }
    for r in payload["results"]:
        assert set(r) == {
            "params",
            "mean",
            "sd",
            "folds",
            "metrics_mean",
            "unconverged_folds",
        }
        assert r["unconverged_folds"] == []  # knn has no solver
        assert len(r["folds"]) == 2 and r["mean"] == pytest.approx(np.mean(r["folds"]))
        assert r["sd"] == pytest.approx(np.std(r["folds"], ddof=1))
        assert r["metrics_mean"]["map"] == pytest.approx(r["mean"])
    best = max(payload["results"], key=lambda r: r["mean"])
    assert payload["best"]["params"] == best["params"]
    assert payload["best"]["hyper"]["weight"] == "uniform"
    stdout = capsys.readouterr().out
    k = best["params"]["k"]
    assert f"best: --set k={k} --set weight=uniform" in stdout
    assert "map mean ± sd" in stdout


def test_cli_tune_transductive_fits_on_the_test_images_without_their_words(
    data_root, tmp_path, monkeypatch
):
    seen = {}
    real = tuning.cross_validate

    def spy(method, corpus, grid, **kwargs):
        seen.update(kwargs, n_train=corpus.num_images)
        return real(method, corpus, grid, **kwargs)

    monkeypatch.setattr(tuning, "cross_validate", spy)
    out = tmp_path / "tune.json"
    argv = ["tune", "knn", "--dataset", "scene", "--data-dir", str(data_root)]
    argv += ["--grid", "k=1,10", "--folds", "2", "--protocol", "transductive"]
    assert main([*argv, "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["protocol"] == "transductive" and payload["n_images"] == 1211
    others = seen["unlabelled"]
    assert seen["n_train"] == 1211 and others.num_images == 1196  # scene's test split
    assert not np.asarray(others.word_mask).any()
    assert not np.asarray(others.words).any()


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["nope", "--grid", "k=1"], "valid methods: "),
        (["knn", "--grid", "kk=1"], "valid: k,"),
        (["knn", "--grid", "k"], "expects key=v1,v2"),
        (["knn", "--grid", "k=1,"], "empty value"),
        (["knn", "--grid", "k=1", "--grid", "k=2"], "given twice"),
        (["knn", "--grid", "k=1", "--set", "k=2"], "both in --grid and --set"),
        (["knn", "--grid", "k=1", "--folds", "1"], "--folds must be >= 2"),
        (["knn", "--grid", "k=1", "--folds", "1212"], "more than the 1211"),
        (["knn", "--grid", "k=1", "--metric", "nope"], "valid metrics: accuracy"),
    ],
)
def test_cli_tune_user_errors_are_one_line(extra, needle, data_root, capsys):
    method, *rest = extra
    argv = ["tune", method, "--dataset", "scene", "--data-dir", str(data_root), *rest]
    assert main(argv) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert needle in last and last.startswith("jaxannot: error:")
    assert "Traceback" not in err


def test_cli_tune_unknown_dataset(data_root, capsys):
    argv = ["tune", "knn", "--dataset", "nope", "--grid", "k=1"]
    assert main([*argv, "--data-dir", str(data_root)]) == 2
    assert "valid names" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["missing-folder/out.json", "a-file/out.json", "."])
def test_cli_tune_unwritable_json_fails_before_fitting(
    where, data_root, tmp_path, monkeypatch, capsys
):
    (tmp_path / "a-file").write_text("")

    def fail(*args, **kwargs):
        raise AssertionError("loaded or fitted before checking --json")

    monkeypatch.setattr(tuning, "cross_validate", fail)
    monkeypatch.setattr("jaxannot.data.datasets.load_dataset", fail)
    argv = ["tune", "knn", "--dataset", "scene", "--data-dir", str(data_root)]
    code = main([*argv, "--grid", "k=1", "--json", str(tmp_path / where)])
    err = capsys.readouterr().err
    assert code == 2 and "cannot write" in err and "Traceback" not in err


def test_a_diverged_setting_scores_nan_and_never_wins(synthetic, caplog):
    """A setting whose fit raises FloatingPointError scores NaN on each fold with a
    warning naming it; the grid goes on and the finite setting wins."""
    grid = {"optimizer": ["sgd"], "learning_rate": [1e6, 0.01]}
    fixed = {"topics": 4, "steps": 20}
    with caplog.at_level("WARNING", logger="jaxannot.tuning"):
        result = tuning.cross_validate(
            "twh", synthetic, grid, folds=2, fixed=fixed, seed=0
        )
    diverged, finite = result.results
    assert np.isnan(diverged.mean) and diverged.metrics_mean == {}
    assert np.isfinite(finite.mean) and result.best.params["learning_rate"] == 0.01
    warned = [r.getMessage() for r in caplog.records if "diverged" in r.getMessage()]
    assert len(warned) == 2 and "1000000.0" in warned[0], warned
    written = json.loads(json.dumps(result.as_json(), allow_nan=False))  # no NaN
    assert written["results"][0]["mean"] is None
    assert written["results"][0]["folds"] == [None, None]
    assert "nan ± nan" in result.table() and "*" in result.table().splitlines()[-1]


def test_folds_whose_solver_stopped_early_are_named(synthetic):
    """emml's exact solve capped at one sweep reports ``converged: false`` on every
    fold; with room to converge, on none (the tune JSON carries both). No solve
    (``solver=none``) has nothing to converge: not named, though its point is not
    the optimum."""
    train = tuning.training_images(synthetic, None)
    result = tuning.cross_validate(
        "emml",
        train,
        {"solver": ["exact", "none"], "exact_sweeps": [1, 3000]},
        folds=2,
        fixed={"vreps": 20, "tolerance": 1e-3},
    )
    by = {(r.params["solver"], r.params["exact_sweeps"]): r for r in result.results}
    assert by["exact", 1].unconverged_folds == [1, 2]
    assert by["exact", 3000].unconverged_folds == []
    assert by["none", 1].unconverged_folds == by["none", 3000].unconverged_folds == []
    rows = result.as_json()["results"]
    assert sorted(map(len, (r["unconverged_folds"] for r in rows))) == [0, 0, 0, 2]


def test_cli_tune_warns_about_folds_whose_solver_stopped_early(
    data_root, tmp_path, capsys
):
    argv = ["tune", "emml", "--dataset", "scene", "--data-dir", str(data_root)]
    argv += ["--grid", "exact_sweeps=1", "--set", "vreps=30", "--folds", "2"]
    argv += ["--set", "tolerance=1e-6", "--json", str(tmp_path / "t.json")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "exact_sweeps=1: the solver stopped before converging on fold(s) 1, 2" in err
    payload = json.loads((tmp_path / "t.json").read_text())
    assert payload["results"][0]["unconverged_folds"] == [1, 2]
