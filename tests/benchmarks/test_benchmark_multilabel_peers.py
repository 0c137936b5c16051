"""``benchmarks/peers/multilabel_peers.py``: ML-kNN against a brute-force Zhang & Zhou,
the grid that grows past an edge optimum, and a whole run on a tiny corpus."""

import json

import numpy as np
import pytest

from jaxannot import metrics
from jaxannot.data import Corpus, make_task


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("benchmarks.peers.multilabel_peers")


def _brute_mlknn(x, y, x_test, k, s=1.0):
    """Zhang & Zhou (2007), Fig. 1, with loops and a full distance matrix."""
    m, q = y.shape
    d = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    neighbours = [np.argsort(row)[:k] for row in d]
    out = np.zeros((len(x_test), q))
    for l in range(q):
        prior = (s + y[:, l].sum()) / (2 * s + m)
        c1, c0 = np.zeros(k + 1), np.zeros(k + 1)
        for i in range(m):
            delta = y[neighbours[i], l].sum()
            (c1 if y[i, l] else c0)[delta] += 1
        for t, z in enumerate(x_test):
            near = np.argsort(((x - z) ** 2).sum(-1))[:k]
            j = int(y[near, l].sum())
            on = prior * (s + c1[j]) / (s * (k + 1) + c1.sum())
            off = (1 - prior) * (s + c0[j]) / (s * (k + 1) + c0.sum())
            out[t, l] = on / (on + off)
    return out


def test_ml_knn_equals_a_brute_force_zhang_zhou(bench):
    rng = np.random.default_rng(0)
    x, x_test = rng.normal(size=(30, 4)), rng.normal(size=(7, 4))
    y = (rng.random((30, 5)) < 0.4).astype(int)
    y[:, 4] = 0  # a word no training image has
    for k in (1, 3, 6):
        model = bench.MLkNN(k=k).fit(x, y)
        expected = _brute_mlknn(x, y, x_test, k)
        np.testing.assert_allclose(model.predict_proba(x_test), expected, atol=1e-12)
        np.testing.assert_array_equal(model.predict(x_test), expected > 0.5)
    with pytest.raises(ValueError, match="k must be in"):
        bench.MLkNN(k=30).fit(x, y)


def test_the_grid_grows_past_an_edge_optimum(bench):
    peak = 1e-3  # best C, below the grid
    seen = []

    def score(setting):
        seen.append(setting["C"])
        return -abs(np.log10(setting["C"] / peak)), None

    grid = [{"C": c} for c in (0.1, 1.0, 10.0)]
    best, _, table, edge = bench.search(score, grid, "C", extend=3)
    assert best == {"C": pytest.approx(1e-3)} and not edge
    assert seen == pytest.approx([0.1, 1.0, 10.0, 0.01, 1e-3, 1e-4])
    assert [row["setting"]["C"] for row in table] == sorted(seen)
    best, _, _, edge = bench.search(score, grid, "C", extend=1)  # stops at 0.01
    assert best == {"C": pytest.approx(0.01)} and edge
    # k cannot go below 1: the search stops there, still at the edge
    best, _, _, edge = bench.search(
        lambda s: (-s["k"], None), [{"k": 1}, {"k": 2}], "k", extend=2
    )
    assert best == {"k": 1} and edge


@pytest.mark.parametrize("varying", [1, 3])
def test_forest_scores_words_constant_in_training_by_their_constant(bench, varying):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(40, 3))
    y = np.zeros((40, 6), dtype=int)
    y[:, 1] = 1  # every image
    y[:, 2 : 2 + varying] = x[:, :varying] > 0  # words 0 and 5: none
    forest = bench.Forest(trees=30, oob=True).fit(x, y)
    for scores in (forest.scores(x[:7]), forest.oob_scores()):
        assert np.all(scores[:, [0, 5]] == 0) and np.all(scores[:, 1] == 1)
    reference = bench.RandomForestClassifier(
        n_estimators=30, random_state=0, n_jobs=1
    ).fit(x, y[:, 2] if varying == 1 else y[:, 2 : 2 + varying])
    proba = reference.predict_proba(x[:7])
    proba = proba if isinstance(proba, list) else [proba]
    np.testing.assert_allclose(
        forest.scores(x[:7])[:, 2 : 2 + varying],
        np.column_stack([p[:, 1] for p in proba]),
    )
    assert (
        bench.metrics.label_ranking_average_precision(*bench._oob_scores(forest, y))
        > 0.5
    )


def test_a_run_on_a_tiny_corpus_scores_every_learner(bench, tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 5))
    words = (x[:, :4] + 0.5 * rng.normal(size=(60, 4)) > 0.3).astype(np.float32)
    corpus = Corpus.from_arrays({"x": x}, words=words, view_kinds={"x": "real"})
    task = make_task(corpus, None, protocol="inductive", seed=0)
    args = bench.parse_args(
        ["--dataset", "-", "--json", "-", "--logreg-c", "0.1,1", "--svm-c", "0.1,1",
         "--knn-k", "3,5", "--leaf", "1,3", "--trees", "20", "--extend", "0"]
    )  # fmt: skip
    out = bench.run(task, args, log=lambda s: None)
    assert set(out["learners"]) == set(bench.LEARNERS)
    y = np.asarray(task.train.words) > 0
    assert out["bipartition"] == {"rule": "top-k", "k": metrics.bipartition_k(y)}
    truth = np.asarray(task.truth_words)
    for name, rec in out["learners"].items():
        assert set(metrics.MULTILABEL_METRICS) <= set(rec["metrics"]), name
        assert set(rec["native"]) == set(metrics.BIPARTITION_METRICS)
        assert rec["fit_seconds"] > 0 and rec["predict_seconds"] > 0
        assert 0.5 < rec["metrics"]["lrap"] <= 1.0  # the words follow x: learnable
    for name in ("br_logreg", "classifier_chain"):  # C by CV, like its siblings
        rec = out["learners"][name]
        assert rec["selection"] == "3-fold CV label-ranking AP", name
        assert [row["setting"] for row in rec["table"]] == rec["grid"], name
    # the chain's scores come back in the vocabulary's order, not the chain's
    model = bench.make_learner("classifier_chain", {"C": 1.0}, order=[3, 2, 1, 0])
    model.fit(x, words.astype(int))
    chain_order = words[:, [3, 2, 1, 0]]  # the columns if left in the chain's order
    lrap = metrics.label_ranking_average_precision
    assert lrap(bench.scores_of(model, x), words) > lrap(
        bench.scores_of(model, x), chain_order
    )
    assert out["complete"]
    saved = []
    args.learners = ["ml_knn", "br_logreg"]
    bench.run(task, args, log=lambda s: None, save=lambda o: saved.append(
        (list(o["learners"]), o["complete"])))  # fmt: skip
    assert saved == [(["ml_knn"], False), (["ml_knn", "br_logreg"], True)]
    path = tmp_path / "peers.json"
    bench.write_json(path, out)
    assert json.loads(path.read_text())["n_test"] == len(truth)


def test_unknown_learners_are_refused(bench, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--dataset", "x", "--json", "y", "--learners", "svm"])
    assert "unknown learners ['svm']" in capsys.readouterr().err
