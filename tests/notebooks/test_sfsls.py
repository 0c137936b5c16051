"""The seed-003 notebook: end to end in --small mode on the real scene data, and its
cross-validation never sees a run's test images."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

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


def test_notebook_small(data_root, tmp_path):
    out = tmp_path / "sfsls.json"
    env = dict(
        os.environ,
        JAXANNOT_DATA=str(data_root),
        JAX_PLATFORMS="cpu",
        OPENBLAS_NUM_THREADS="1",
    )
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "notebooks" / "seed003_sfsls.py"),
            "--small",
            "--data-dir",
            str(data_root),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Table 1" in proc.stdout and "| 10% |" in proc.stdout
    full = json.loads(out.read_text())
    result = full["scene"]
    # 6 scene concepts: random scores give MAP ≈ base rate ≈ 0.18. In the small mode
    # (seed 0, 180 training images, 18 labelled) the three selectors measured 0.44
    # (SFSLS), 0.44 (SFSS), 0.50 (FSNM).
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
    fitted_on, scored = [], []

    class Spy:
        def __init__(self, name):
            self.m = real(name)
            self.hyper = self.m.hyper

        def fit(self, corpus, **kw):
            ids = corpus.features()[:, 0].astype(int)
            fitted_on.append((set(ids), set(ids[np.asarray(corpus.word_mask)])))
            return self.m.fit(corpus, **kw)

        def score_words(self, fitted, corpus):
            scored.append(set(corpus.features()[:, 0].astype(int)))
            return self.m.score_words(fitted, corpus)

    monkeypatch.setattr(notebook, "get_method", Spy)
    seed, train_size, folds = 3, 1000, 3
    value = notebook.cv_once(pool, "fsnm", {"ridge": 1.0}, seed, train_size, folds)
    assert 0.0 < value <= 1.0
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
