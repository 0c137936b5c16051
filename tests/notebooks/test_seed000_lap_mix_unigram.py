"""The seed-000 notebook: its grid search, and its small mode on real Corel5k rows
(executed end to end with nbclient in a fresh kernel)."""

import ast
import importlib.util
import json
import math
import pathlib
import re

import numpy as np

NOTEBOOK = (
    pathlib.Path(__file__).resolve().parents[2]
    / "notebooks"
    / "seed000_lap_mix_unigram.py"
)


def _notebook_module():
    spec = importlib.util.spec_from_file_location("seed000_notebook", NOTEBOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_coordinate_search_extends_past_a_winning_edge():
    nb = _notebook_module()
    calls = []

    def evaluate(p):
        calls.append(dict(p))
        # optimum at K = 130 (beyond the grid's 100) and lam = 0.05 (below 0.3)
        acc = -((p["topics"] - 130) ** 2) / 1e4 - abs(math.log(p["lam"] / 0.05))
        return dict(accuracy=acc, complete_length=0.0)

    axes = {"lam": [0.3, 1, 3, 10], "neighbors": [5], "topics": [10, 20, 50, 100]}
    point, grids, evaluations, edges = nb.coordinate_search(
        evaluate, axes, {"lam": 3, "neighbors": 5, "topics": 20}
    )
    # K grows 100 -> 150 (x1.5), lam shrinks 0.3 -> 0.1 -> 0.0333 -> 0.0111 (/3)
    assert point == {"lam": 0.0333333, "neighbors": 5, "topics": 150}, point
    assert grids["topics"] == [10, 20, 50, 100, 150, 225]
    assert grids["lam"][:3] == [0.0111111, 0.0333333, 0.1]
    assert grids["neighbors"] == [5]  # a single value is held fixed
    assert edges == []  # every chosen value is inside its grid
    assert all(c["neighbors"] == 5 for c in calls)
    distinct = {tuple(sorted(c.items())) for c in calls}
    assert len(calls) == len(evaluations) == len(distinct)  # no point evaluated twice

    # with no room to extend, a winning edge is reported
    _, _, _, edges = nb.coordinate_search(
        evaluate, axes, {"lam": 3, "neighbors": 5, "topics": 20}, max_extend=0
    )
    assert set(edges) == {"lam", "topics"}


def test_notebook_small_mode(tmp_path, execute_notebook):
    out = tmp_path / "result.json"
    nb, pngs, text = execute_notebook("seed000_lap_mix_unigram", f"--small --out {out}")
    # accuracy vs K, complete length vs K
    assert len(pngs) == 2
    assert "| lap-mix-unigram |" in text
    payload = json.loads(out.read_text())

    # tuning and reporting corpora are disjoint and cover the 400 small-mode images:
    # the first 300 and the tuning corpus's 100 from image 310 on
    split = payload["split"]
    tune_ids, report_ids = set(split["tuning_images"]), set(split["reporting_images"])
    assert split["disjoint"] and not tune_ids & report_ids
    assert (len(tune_ids), len(report_ids)) == (200, 200)
    assert tune_ids | report_ids == set(range(300)) | set(range(310, 410))
    assert set(range(300, 410)) & report_ids == set()

    final = payload["final"]
    assert set(final) == {
        "empirical",
        "mix-unigram",
        "plsa-words",
        "link-lda",
        "lap-mix-unigram",
    }
    # every tuning run used the tuning seeds and the reported runs the settings
    # chosen there, on seeds 0, 1
    assert {r["seed"] for r in payload["tuning_runs"]} == {100}
    for name, row in final.items():
        assert row["settings"] == payload["tuning"][name]["chosen"]
        assert row["seeds"] == 2 and len(row["accuracy_per_seed"]) == 2
        assert np.isclose(row["accuracy_mean"], np.mean(row["accuracy_per_seed"]))
    assert final["lap-mix-unigram"]["settings"] == {
        "lam": 1.0,
        "neighbors": 5,
        "topics": 4,
    }
    # LapMixUnigram beats the empirical word prior it is compared with; measured in
    # the small mode (200 reporting images): accuracy 0.364 vs 0.280, complete
    # length 32.2 vs 34.1
    lap, emp = final["lap-mix-unigram"], final["empirical"]
    assert lap["accuracy_mean"] > emp["accuracy_mean"] + 0.05, (lap, emp)
    assert lap["complete_length_mean"] < emp["complete_length_mean"] - 1.0, (lap, emp)
    # and the plain mixture it regularizes (0.265 / 35.0)
    mix = final["mix-unigram"]
    assert lap["accuracy_mean"] > mix["accuracy_mean"] + 0.05, (lap, mix)
    assert lap["complete_length_mean"] < mix["complete_length_mean"], (lap, mix)
    _check_printed_results(text, final)


def _check_printed_results(text, final):
    """The curves printed for the figures and the example annotations."""
    # one K (4) per topic model, in [0, 1] and a complete length within the 374-word
    # vocabulary
    curves = {
        name: ast.literal_eval(pts)
        for name, pts in re.findall(r"^([\w-]+): K, accuracy, CL (\[.*\])$", text, re.M)
    }
    assert set(curves) == set(final)
    for name, pts in curves.items():
        for k, acc, cl in pts:
            assert k == (0 if name == "empirical" else 4)
            assert 0.0 < acc < 1.0 and 1.0 <= cl <= 374.0, (name, pts)
    # the example annotations: 8 predicted images, truth and top-5 words of both
    # methods; the re-fit reproduces the reported run of subset 0
    rows = re.findall(r"^\| #(\d+) \| (.+?) \| (.+?) \| (.+?) \|$", text, re.M)
    assert len(rows) == 8, text[-3000:]
    for _, truth, lap_words, mix_words in rows:
        assert truth and len(lap_words.split(", ")) == 5
        assert len(mix_words.split(", ")) == 5
    refits = re.findall(r"re-fit accuracy ([\d.]+) .*reported run: ([\d.]+)", text)
    assert len(refits) == 2
    for refit, reported in refits:
        assert abs(float(refit) - float(reported)) < 1e-3
