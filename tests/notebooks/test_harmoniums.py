"""The seed 001 notebook executes end to end (nbclient, fresh kernel) in --small mode
on the real data: its figures, tables, printed curves and JSON."""

import ast
import importlib.util
import json
import pathlib
import re

import numpy as np
import pytest
from sklearn.metrics import f1_score

from jaxannot.data import make_task
from jaxannot.data.datasets import load_dataset

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _empirical_reference(data_root, random_order_map):
    """F1@n (n = 3..7) and MAP of the word-frequency baseline on the notebook's small
    Corel5k rows, by sklearn. Every image gets the n most frequent training words
    (equal counts: lower index); the baseline's scores tie over all images, so its
    AP is the mean over random orders of the images (4000 drawn)."""
    spec = importlib.util.spec_from_file_location(
        "seed001_harmoniums", ROOT / "notebooks" / "seed001_harmoniums.py"
    )
    notebook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(notebook)
    train, test = load_dataset("corel5k", data_dir=data_root)
    task = make_task(train, test, protocol="inductive", seed=0)
    task = notebook.shrink(task, notebook.SMALL["rows"])
    truth = np.asarray(task.truth_words) > 0
    order = np.argsort(-np.asarray(task.train.words).sum(0), kind="stable")
    keep = truth.any(1)
    out = {}
    for n in range(3, 8):
        pred = np.zeros_like(truth)
        pred[:, order[:n]] = True
        out[f"f1@{n}"] = f1_score(truth[keep], pred[keep], average="samples")
    out["map"] = random_order_map(truth)
    return out


def test_notebook_small(data_root, tmp_path, random_order_map, execute_notebook):
    out = tmp_path / "harmoniums.json"
    nb, pngs, text = execute_notebook("seed001_harmoniums", f"--small --out {out}")
    # accuracy vs K, precision-recall (retrieval + annotation), t-SNE latent maps
    assert len(pngs) == 3
    assert "| topics |" in text and "F1@5" in text
    res = json.loads(out.read_text())
    # the small mode classifies mfeat alone (wikipedia runs the same code in full
    # mode): its 10 balanced classes let the checks below say the latent spaces work
    assert set(res["classification"]) == {"mfeat"}
    for ds in ("mfeat",):
        r = res["classification"][ds]
        for m in ("mmh", "twh", "dwh-svm"):
            runs = r["accuracy_runs"][m]
            assert r["accuracy_mean"][m] == pytest.approx(np.mean(runs), abs=1e-12)
            # accuracies on the 40 scored test rows: multiples of 1/40
            np.testing.assert_allclose(
                np.round(np.multiply(runs, 40)), np.multiply(runs, 40), atol=1e-9
            )
            assert r["latent"][m]["pairwise_kl"] > 0.0  # the class means differ
            # K is chosen by CV on the 120 training images only, never the test rows
            cv = r["cv"][m]
            assert cv["n_images"] == 120 and cv["folds"] == 2
            assert r["chosen_topics"][m] == cv["best"]["params"]["topics"]
            assert set(r["cv_accuracy_mean"][m]) == {"3", "4"}
        assert r["svm_mean"] > 0.3  # even 120 training images beat chance (0.1) by far
        # the printed rows of the latent models (the svm row has no K, AP or KL)
        section = text[text.index(f"**{ds}** — test accuracy at the CV-chosen K") :]
        row = r"^\| (twh|dwh-svm|mmh) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$"
        table = {
            m: [float(v) for v in values]
            for m, *values in re.findall(row, section, re.M)[:3]
        }
        assert set(table) == {"twh", "dwh-svm", "mmh"}, table
        for m, (k, acc, ap, kl) in table.items():
            assert k == r["chosen_topics"][m] and k in (3, 4)
            assert abs(acc - r["accuracy_mean"][m]) < 1e-4
            assert 0.0 < ap <= 1.0 and kl >= 0.0
    # On mfeat (10 balanced digit classes: chance accuracy and retrieval AP 0.1) the
    # 3/4-topic latent spaces carry the class: measured accuracy 0.675 (MMH; 0.70 at
    # XLA's default optimization level, see conftest.FAST_COMPILE), 0.375 (DWH-SVM),
    # 0.70 (TWH, 20 CD steps); retrieval AP 0.62-0.72; the SVM 1.0.
    mfeat = res["classification"]["mfeat"]
    for m in ("mmh", "twh", "dwh-svm"):
        assert mfeat["accuracy_mean"][m] > 0.2, (m, mfeat["accuracy_mean"])
        assert mfeat["latent"][m]["retrieval_ap"] > 0.3, (m, mfeat["latent"][m])
    assert mfeat["accuracy_mean"]["mmh"] > 0.5, mfeat["accuracy_mean"]
    # the raw-feature SVM on the same images bounds them from above
    assert mfeat["svm_mean"] > max(mfeat["accuracy_mean"].values())
    assert {"dwh", "empirical", "cv"} == set(res["annotation"])
    assert res["annotation"]["cv"]["n_images"] == 120
    # the annotation metrics, checked on the baseline whose scores are known
    ref = _empirical_reference(data_root, random_order_map)
    got = res["annotation"]["empirical"]
    for n in range(3, 8):
        assert got[f"f1@{n}"] == pytest.approx(ref[f"f1@{n}"], abs=1e-12)
    # Monte Carlo over 4000 orders (measured 0.12895 vs the exact mean 0.12884)
    assert got["map"] == pytest.approx(ref["map"], abs=0.003)
    _check_printed_curves(text, res)


def _check_printed_curves(text, res):
    """The curves printed for the figures: accuracy vs K (the JSON's CV accuracies),
    retrieval and annotation precision-recall, the t-SNE latent maps."""
    curves = {
        (ds, m): ast.literal_eval(pts)
        for ds, m, pts in re.findall(
            r"^(\w+) ([\w-]+): K, CV accuracy (\[.*\])$", text, re.M
        )
    }
    assert len(curves) == 3, curves
    for (ds, m), pts in curves.items():
        cv = res["classification"][ds]["cv_accuracy_mean"][m]
        assert [k for k, _ in pts] == [3, 4]
        assert all(abs(v - cv[str(k)]) < 1e-4 for k, v in pts), (ds, m, pts)
    # retrieval PR: 11 interpolated precisions, non-increasing in recall, in [0, 1]
    pr = re.findall(
        r"^(\w+) retrieval ([\w-]+): interpolated precision \[([^\]]*)\]", text, re.M
    )
    assert len(pr) == 3
    for _, _, values in pr:
        p = [float(v) for v in values.split()]
        assert len(p) == 11 and all(0.0 <= v <= 1.0 for v in p)
        assert all(a >= b - 1e-9 for a, b in zip(p, p[1:], strict=False)), p
    # annotation PR: top-N words, N = 1..20; recall grows with N
    ann = dict(
        re.findall(
            r"^corel5k annotation (\w+): N=1\.\.20 recall \[([^\]]*)\]", text, re.M
        )
    )
    assert set(ann) == {"dwh", "empirical"}
    for values in ann.values():
        r = [float(v) for v in values.split()]
        assert len(r) == 20 and r == sorted(r) and 0.0 < r[-1] <= 1.0
    maps = re.findall(r"^(\w+) latent map ([\w-]+): 40 test images, t-SNE$", text, re.M)
    assert len(maps) == 3
