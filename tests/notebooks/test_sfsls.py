"""The seed-003 notebook's cross-validation never sees a run's test images, a
dataset's tables are reused only from a run of the same configuration, and its small
mode executes end to end (nbclient, fresh kernel) on the real scene data."""

import importlib.util
import json
import pathlib

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from jaxannot.data.corpus import Corpus

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def notebook():
    spec = importlib.util.spec_from_file_location(
        "seed003_sfsls", ROOT / "notebooks" / "seed003_sfsls.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pool(n=400, d=6, c=3, seed=0):
    """Synthetic concepts; feature 0 is the image's index (to trace the rows used)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    w = rng.normal(size=(d, c))
    y = (x @ w + 0.3 * rng.normal(size=(n, c)) > 0.5).astype(np.float32)
    x[:, 0] = np.arange(n)
    return Corpus.from_arrays({"f": x}, words=y, name="synthetic")


def test_cv_uses_only_the_runs_labelled_training_images(notebook, monkeypatch):
    pool = _pool()
    real = notebook.get_method
    fitted_on, scored, scores_of = [], [], []

    class Spy:
        def __init__(self, name):
            self.m = real(name)
            self.hyper = self.m.hyper

        def fit(self, corpus, **kw):
            ids = corpus.features()[:, 0].astype(int)
            fitted_on.append((set(ids), set(ids[np.asarray(corpus.word_mask)])))
            return self.m.fit(corpus, **kw)

        def score_words(self, fitted, corpus):
            scores = np.asarray(self.m.score_words(fitted, corpus))
            scored.append(set(corpus.features()[:, 0].astype(int)))
            scores_of.append((corpus.features()[:, 0].astype(int), scores))
            return scores

    monkeypatch.setattr(notebook, "get_method", Spy)
    seed, train_size, folds = 3, 1000, 3
    value = notebook.cv_once(pool, "fsnm", {"ridge": 1.0}, seed, train_size, folds)
    # the value is the mean over folds of the held-out MAP: recomputed with sklearn
    truth = np.asarray(pool.words)
    maps = []
    for ids, scores in scores_of:
        y = truth[ids]
        assert len(np.unique(scores)) == scores.size  # no ties: sklearn's AP applies
        cols = [w for w in range(y.shape[1]) if y[:, w].any()]
        maps.append(
            np.mean([average_precision_score(y[:, w], scores[:, w]) for w in cols])
        )
    assert value == pytest.approx(np.mean(maps), abs=1e-12)
    train, test = notebook.split(pool, train_size, seed)
    train_ids = set(train.features()[:, 0].astype(int))
    test_ids = set(test.features()[:, 0].astype(int))
    assert len(test_ids) == 160 and not train_ids & test_ids
    task = notebook.make_task(
        train, test, labelled_fraction=notebook.TUNE_FRACTION, seed=seed
    )
    labelled = set(train.features()[np.asarray(task.train.word_mask), 0].astype(int))
    assert len(fitted_on) == folds and len(scored) == folds
    for (ids, observed), held in zip(fitted_on, scored, strict=True):
        assert ids == train_ids  # the whole training set, never a test image
        assert held <= labelled and not held & observed  # held-out words hidden
        assert observed | held == labelled
    assert set().union(*scored) == labelled  # the folds cover the labelled images


def test_reuse_only_a_complete_run_of_the_same_configuration(notebook, tmp_path):
    args = notebook.parse_args(["--small", "--reuse-dir", str(tmp_path)])
    config = notebook.configuration(args)
    assert notebook.reused("scene", config, args) is None  # no file
    entry = {"table1": {"0.1/sfsls": [0.5, 0.0]}, "runs_done": 1, "seconds": 60.0}
    path = tmp_path / "sfsls_scene.json"
    # measured alone (`--datasets scene`): the dataset list does not matter
    saved = dict(config, datasets="scene")
    path.write_text(json.dumps({"config": saved, "scene": entry}))
    assert notebook.reused("scene", config, args) == entry
    # an interrupted run, or any other setting, is measured again
    path.write_text(json.dumps({"config": saved, "scene": dict(entry, runs_done=0)}))
    assert notebook.reused("scene", config, args) is None
    other = dict(saved, folds=5)
    path.write_text(json.dumps({"config": other, "scene": entry}))
    assert notebook.reused("scene", config, args) is None
    # without --reuse-dir nothing is read
    args = notebook.parse_args(["--small"])
    assert notebook.reused("scene", config, args) is None


def test_notebook_small(tmp_path, execute_notebook):
    result_path = tmp_path / "sfsls.json"
    nb, pngs, out = execute_notebook("seed003_sfsls", f"--small --out {result_path}")
    # MAP vs labelled fraction, the p sweep, with vs without unlabelled images
    assert len(pngs) == 3
    assert "Table 1" in out and "| 10% |" in out
    full = json.loads(result_path.read_text())
    result = full["scene"]
    # 6 scene concepts: random scores give MAP ≈ base rate ≈ 0.18. In the small mode
    # (seed 0, 180 training images, 18 labelled) the three selectors measured 0.42
    # (SFSLS), 0.45 (SFSS), 0.49 (FSNM).
    assert set(result["table1"]) == {"0.1/sfsls", "0.1/sfss", "0.1/fsnm"}
    for key, (mean, _) in result["table1"].items():
        assert 0.35 < mean <= 1.0, (key, mean)
    # every setting comes from the grid, chosen by CV in the one run
    cv = result["cv"]["0"]
    grid = full["config"]["grid"]
    for method in ("sfsls", "sfss", "fsnm"):
        for key, value in cv[method]["hyper"].items():
            assert value in np.atleast_1d(grid[method][key]), (method, key, value)
        assert 0.18 < cv[method]["cv_map"] <= 1.0
    # Table 2: p chosen by CV reports the test MAP of that p's fit
    assert set(result["table2"]) == {"0.5", "1.0", "cv", "cv_p"}
    (p,) = result["table2"]["cv_p"]
    assert result["table2"]["cv"][0] == pytest.approx(result["table2"][str(p)][0])
    assert cv[f"sfsls/p={p}"]["cv_map"] == max(
        cv[f"sfsls/p={q}"]["cv_map"] for q in (0.5, 1.0)
    )
    # Fig. 1's "all" columns are Table 1's runs
    fig1 = result["fig1"]
    assert fig1["0.1/sfss/all"] == result["table1"]["0.1/sfss"]
    assert cv["sfsls/labelled-only"]["hyper"]["use_unlabelled"] is False
