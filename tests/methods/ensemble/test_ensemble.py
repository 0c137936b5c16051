"""``ensemble``: save/load, no test image in any fold (with planted leaks that the
check catches), and the choice of the best setting of its own table, checked against
a brute-force evaluation on the same folds. Cheap bases (two kNN settings, two
folds, a weight grid of 0.5) keep it to seconds."""

import dataclasses

import numpy as np
import pytest

import jax

from jaxannot import metrics
from jaxannot.annotators import get_method, load, save
from jaxannot.data import make_task
from jaxannot.data.protocols import kfold_rows
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate
from jaxannot.methods.ensemble import annotator, words

CHEAP = {"bases": "knn:k=3,knn:k=12", "folds": 2, "step": 0.5}


@pytest.fixture(scope="module")
def task():
    """A synthetic task whose images carry their row number in a view ``ids``."""
    corpus = make_synthetic(seed=0, num_images=80)
    ids = np.arange(corpus.num_images, dtype=np.float32)[:, None]
    corpus = dataclasses.replace(
        corpus,
        views={**corpus.views, "ids": ids},
        view_kinds={**corpus.view_kinds, "ids": "real"},
    )
    return make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.25)


def _ids(corpus) -> set[int]:
    return {int(i) for i in np.asarray(corpus.views["ids"])[:, 0]}


def _fit(corpus, targets="map,lrap"):
    method = get_method("ensemble")
    hyper = {**method.hyper, **CHEAP, "targets": targets}
    return method.fit(corpus, rng_key=jax.random.key(0), **hyper)


def test_save_load_round_trip_gives_identical_scores(task, tmp_path):
    method = get_method("ensemble")
    fitted = _fit(task.train)
    path = tmp_path / "ensemble.npz"
    save(path, fitted)
    loaded = load(path)
    assert sorted(loaded.params.bases) == ["knn:k=12", "knn:k=3"]
    assert type(loaded.params.bases["knn:k=3"]) is get_method("knn").params
    assert loaded.info["chosen"] == fitted.info["chosen"]
    # no per-word metric among its targets: the fused ranking alone
    assert [r["per_word"] for r in fitted.info["per_word"]] == [0]
    np.testing.assert_array_equal(
        method.score_words(loaded, task.test), method.score_words(fitted, task.test)
    )


def _recording(monkeypatch, log: list):
    """Make every base fit and score of ``ensemble`` append ``("fit" | "score",
    image ids)`` to ``log``."""
    real_get = annotator.get_method

    def get(name):
        base = real_get(name)

        def fit(corpus, **kwargs):
            log.append(("fit", _ids(corpus)))
            return base.fit(corpus, **kwargs)

        def score(fitted, corpus):
            log.append(("score", _ids(corpus)))
            return base.score_words(fitted, corpus)

        return dataclasses.replace(base, fit=fit, score_words=score)

    monkeypatch.setattr(annotator, "get_method", get)


def _leaks(log: list, test_ids: set[int], train_ids: set[int]) -> list[str]:
    """What the cross-validation of a fit logged by :func:`_recording` did wrong:
    a test image given to a base fit, or a held-out image scored by a base fitted on
    it; and whether every training image was scored out of fold."""
    problems, fitted_on, scored = [], None, set()
    for kind, ids in log:
        if kind == "fit":
            fitted_on = ids
            if ids & test_ids:
                problems.append(f"test images {sorted(ids & test_ids)} in a fit")
        elif fitted_on != train_ids:  # a fold's held-out images
            if ids & fitted_on:
                problems.append(f"images {sorted(ids & fitted_on)} scored in-fold")
            scored |= ids
    if scored != train_ids:
        problems.append("not every training image was scored out of fold")
    return problems


def test_no_test_image_enters_a_fold_and_planted_leaks_are_caught(task, monkeypatch):
    train_ids, test_ids = _ids(task.train), _ids(task.test)
    assert train_ids and test_ids and not train_ids & test_ids
    log: list = []
    _recording(monkeypatch, log)
    evaluate("ensemble", task, hyper=CHEAP, seed=0)
    fits = [ids for kind, ids in log if kind == "fit"]
    assert len(fits) == 2 * (CHEAP["folds"] + 1)  # two bases: each fold, then all
    assert _leaks(log, test_ids, train_ids) == []

    # planted: the cross-validation run on every image, the test images included
    log.clear()
    train, test = task.train, task.test
    whole = dataclasses.replace(
        train,
        views={k: np.concatenate([train.views[k], test.views[k]]) for k in train.views},
        words=np.concatenate([train.words, task.truth_words]).astype(np.float32),
        word_mask=np.ones(train.num_images + test.num_images, bool),
        labels=None,
    )
    _fit(whole)
    assert any("test images" in p for p in _leaks(log, test_ids, train_ids))

    # planted: each base scoring the images it was fitted on (no held-out fold)
    def in_sample(bases, corpus, folds, rng_key):
        fitted = annotator._fit_bases(bases, corpus, rng_key)
        return annotator._parts_and_raws(fitted, corpus)

    monkeypatch.setattr(annotator, "_out_of_fold", in_sample)
    log.clear()
    _fit(task.train)
    leaks = _leaks(log, test_ids, train_ids)
    assert leaks and not any("test images" in p for p in leaks)


def _reference_scores(parts, weights, prior, rule, beta):
    """The fusion rule written image by image (fusion's docstring)."""
    f = sum(w * p for w, p in zip(weights, parts, strict=True))
    out = np.empty_like(f)
    for i, row in enumerate(f):
        boosted = row / prior**beta
        if rule == "reweight":
            out[i] = boosted
            continue
        out[i] = row
        head = np.argsort(-boosted, kind="stable")[:5]
        out[i, head] = 2.0 + boosted[head] / boosted[head].max()
    return out


def test_cv_chooses_the_best_setting_of_its_table(task):
    targets = ["map", "lrap", "word_f1@5"]
    fitted = _fit(task.train, ",".join(targets))
    table = fitted.info["candidates"]
    # 3 weightings of two bases at step 0.5, times 5 reweight + 4 head exponents
    assert len(table) == 3 * 9

    # brute force on the same folds: each base fitted on the other fold by hand
    train = task.train
    truth = (np.asarray(train.words) > 0).astype(float)
    prior = truth.mean(0) + 1.0 / len(truth)
    parts, raws = [], []
    for spec in ("knn:k=3", "knn:k=12"):
        knn = get_method("knn")
        hyper = {**knn.hyper, "k": int(spec.split("=")[1])}
        raw = np.zeros(truth.shape)
        for rows in kfold_rows(train.num_images, 2, seed=0):
            held = np.isin(np.arange(train.num_images), rows)
            model = knn.fit(train.subset(~held), rng_key=None, **hyper)
            raw[rows] = knn.score_words(model, train.subset(held))
        raws.append(raw)
        parts.append(raw / raw.sum(1, keepdims=True))  # probabilities: normalized

    def figures(scores):
        words = metrics.word_prf_at_n(scores, truth, 5)
        return {
            "map": metrics.mean_average_precision(scores, truth),
            "lrap": metrics.label_ranking_average_precision(scores, truth),
            "word_f1@5": words["f1"],
        }

    best_base = {m: max(figures(r)[m] for r in raws) for m in targets}
    brute = []
    for row in table:
        got = figures(_reference_scores(parts, row["weights"], prior, row["rule"],
                                        row["beta"]))  # fmt: skip
        for m in ("map", "lrap"):
            assert got[m] == pytest.approx(row["metrics"][m], abs=1e-9), (row, m)
        # the fusion on the ranking metrics among the targets
        brute.append(min(got[m] / best_base[m] for m in ("map", "lrap")))
    assert fitted.info["base_best"] == pytest.approx(best_base, abs=1e-12)
    best = int(np.argmax(brute))
    chosen = dict(fitted.info["chosen"])
    per_word = chosen.pop("per_word")
    assert chosen == table[best]
    assert brute[best] == pytest.approx(max(r["score"] for r in table), abs=1e-12)
    # the choice matters: the table's settings differ in their score
    assert max(brute) > min(brute) + 1e-3

    # the per-word rule on the chosen fusion: thresholds fitted on the other folds
    # (seed 1) by brute force, each head length re-measured
    mixture = sum(w * p for w, p in zip(chosen["weights"], parts, strict=True))
    ranking = _reference_scores(parts, chosen["weights"], prior, chosen["rule"],
                                chosen["beta"])  # fmt: skip
    ratios = np.zeros(truth.shape)
    for rows in kfold_rows(train.num_images, 2, seed=1):
        held = np.isin(np.arange(train.num_images), rows)
        cut = [_best_cut(mixture[~held, w], truth[~held, w]) for w in range(len(prior))]
        ratios[rows] = mixture[rows] / np.array(cut)
    rows = fitted.info["per_word"]
    assert [r["per_word"] for r in rows] == list(words.PER_WORD)
    scores = []
    for row in rows:
        got = figures(_reference_head(ranking, ratios, row["per_word"]))
        for m in targets:
            assert got[m] == pytest.approx(row["metrics"][m], abs=1e-9), (row, m)
        scores.append(min(got[m] / best_base[m] for m in targets))
    assert per_word == rows[int(np.argmax(scores))]["per_word"]
    assert max(scores) > min(scores) + 1e-3, scores


def _best_cut(scores, truth):
    """The threshold of the largest F1 of "score >= t" over every score of a word
    (the first, from the top, of equal F1); 1e9 for a word without positives."""
    if truth.sum() == 0:
        return 1e9
    f1 = [2 * truth[scores >= t].sum() / ((scores >= t).sum() + truth.sum())
          for t in np.sort(scores)[::-1]]  # fmt: skip
    return max(np.sort(scores)[::-1][int(np.argmax(f1))], 1e-9)


def _reference_head(ranking, ratios, head):
    """The per-word rule written image by image and word by word (its docstring):
    x / (1 + x) of the ranking, plus 2 for the first ``head`` words of the ranking
    among those whose ratio is at least 1."""
    if head == 0:
        return ranking
    out = np.empty_like(ranking)
    for i in range(len(ranking)):
        order = np.argsort(-ranking[i], kind="stable")
        first = [w for w in order if ratios[i, w] >= 1][:head]
        for w in range(ranking.shape[1]):
            x = ranking[i, w]
            out[i, w] = x / (1 + x) + (2 if w in first else 0)
    return out


def test_thresholds_are_each_words_best_f1_cut():
    rng = np.random.default_rng(0)
    scores = rng.random((40, 5))
    truth = (rng.random((40, 5)) < scores * 0.6).astype(float)
    truth[:, 4] = 0
    expected = [_best_cut(scores[:, w], truth[:, w]) for w in range(5)]
    np.testing.assert_allclose(words.thresholds(scores, truth), expected)


def test_the_head_leads_each_image_and_keeps_the_orders_below_it():
    rng = np.random.default_rng(1)
    ranking, ratios = rng.random((6, 9)) * 4, rng.random((6, 9)) * 2
    ratios[0] = 0.5  # no word above its threshold: the ranking alone
    np.testing.assert_array_equal(words.with_head(ranking, ratios, 0), ranking)
    for head in (1, 3):
        got = words.with_head(ranking, ratios, head)
        for i in range(6):  # the head: words above threshold, by ranking; the rest
            order = list(np.argsort(-ranking[i]))
            first = [w for w in order if ratios[i, w] >= 1][:head]
            rest = [w for w in order if w not in first]
            assert list(np.argsort(-got[i])) == first + rest
        assert list(np.argsort(-got[0])) == list(np.argsort(-ranking[0]))
        # a word's images outside every head keep the ranking's order
        lead = got >= 2
        for w in range(9):
            below = ~lead[:, w]
            np.testing.assert_array_equal(
                np.argsort(-got[below, w]), np.argsort(-ranking[below, w])
            )


def test_the_defaults_record_with_shared_base_fits_equals_separate_fits(
    task, benchmark_script
):
    """``tools/ensemble_defaults_cv.py`` shares the base fits of the ``targets``
    settings of a fold: the cross-validation is that of separate fits, and its
    per-word curve at each fit's choice is what the cross-validation measured."""
    from jaxannot.tuning import cross_validate

    record = benchmark_script("tools.ensemble_defaults_cv")

    def run(*targets):
        grid = {"targets": list(targets)}
        return cross_validate("ensemble", task.train, grid, folds=2, fixed=CHEAP)

    log: list = []
    with record.shared_base_fits() as counts, record.kept_fits(log):
        shared = run(*record.TARGET_SETTINGS)
        curve = record.per_word_curve(log)
    # per outer fold and base: the inner folds' and the final fits, the out-of-fold
    # set (the first setting), both taken by the second; the fusion settings (three
    # weightings of two bases, nine rules) of the first, taken by the second
    assert counts == {
        "computed": 2 * 2 * (CHEAP["folds"] + 2),
        "reused": 2 * 2 * 2,
        "settings_computed": 2 * 27,
        "settings_reused": 2 * 27,
    }
    # the second setting, which took the first's fits, fitted on its own
    separate = run(record.TARGET_SETTINGS[1]).results[0]
    assert separate.params == shared.results[1].params
    assert separate.folds == shared.results[1].folds
    assert separate.fold_metrics == shared.results[1].fold_metrics
    assert len(curve) == 2
    for fold, row in enumerate(curve):
        assert [r["per_word"] for r in row["held_out"]] == list(words.PER_WORD)
        measured = shared.results[1].fold_metrics[fold]
        at_choice = row["held_out"][row["chosen"]]["metrics"]
        assert at_choice == pytest.approx({m: measured[m] for m in at_choice})


def test_a_grid_over_bases_and_step_shares_each_bases_fits(task, benchmark_script):
    """Over ``bases`` (three bases and a pair of them) times ``step``, each base is
    fitted once per outer fold and every fusion setting measured once (a pair's and
    a coarser step's are among the three's finest): the cross-validation is that of
    separate fits."""
    from jaxannot.tuning import cross_validate

    record = benchmark_script("tools.ensemble_defaults_cv")
    grid = {
        "bases": ["knn:k=3,knn:k=12,knn:k=30", "knn:k=3,knn:k=30"],
        "step": [0.5, 0.25],
    }
    fixed = {"folds": 2}

    def run(grid):
        return cross_validate("ensemble", task.train, grid, folds=2, fixed=fixed)

    with record.shared_base_fits() as counts:
        shared = run(grid)
    # per outer fold: each of three bases' two inner fits, its final fit and its
    # out-of-fold set once; the other settings take them (four settings: 6 + 4
    # out-of-fold sets and final fits of which 3 + 3 computed)
    assert counts["computed"] == 2 * 3 * (2 + 2)
    assert counts["reused"] == 2 * (2 * 6 + 2 * 4 - 2 * 3)
    # per outer fold: the 15 weightings of three bases at step 0.25, nine rules each
    assert counts["settings_computed"] == 2 * 15 * 9
    assert counts["settings_reused"] == 2 * (6 + 5 + 3) * 9
    assert len(shared.results) == 4
    for setting in shared.results:
        separate = run({k: [v] for k, v in setting.params.items()}).results[0]
        assert separate.params == setting.params
        assert separate.folds == setting.folds
        assert separate.fold_metrics == setting.fold_metrics
