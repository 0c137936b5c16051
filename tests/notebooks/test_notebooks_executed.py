"""The paired notebooks (`notebooks/*.ipynb`) execute in a fresh `python3` kernel
with nbclient in their small mode (`JAXANNOT_NOTEBOOK_ARGS=--small`) on the real
data: the figures are in the outputs as PNGs and the key numbers are computed.

Under CI=true a missing data folder fails (the `data_root` fixture)."""

import ast
import base64
import importlib.util
import json
import pathlib
import re

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("nbexec", HERE / "nbexec.py")
nbexec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbexec)

# generous: the small modes take well under a minute of CPU, but the kernel start and
# JAX compilation on a loaded 2-core machine can take several
CELL_TIMEOUT = 900
PNG = b"\x89PNG\r\n\x1a\n"


def run(name, data_root, args="--small"):
    nb = nbexec.execute(
        nbexec.NOTEBOOKS / f"{name}.ipynb",
        args,
        timeout=CELL_TIMEOUT,
        env={"JAXANNOT_DATA": str(data_root), "OPENBLAS_NUM_THREADS": "1"},
    )
    pngs = [base64.b64decode(p) for p in nbexec.images(nb)]
    assert all(p.startswith(PNG) for p in pngs)
    assert not nbexec.machine_paths(nb)
    return nb, pngs, nbexec.texts(nb)


def _table(out: str, title: str) -> dict[str, list[float]]:
    """The rows of the markdown table printed after ``title``: label -> values."""
    lines = out[out.index(title) :].splitlines()[1:]
    start = next(i for i, line in enumerate(lines) if line.startswith("| method"))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = [float(c.strip("*")) for c in cells[1:]]
    return rows


def test_seed002_ale_notebook(data_root):
    nb, pngs, out = run("seed002_ale", data_root)
    # MiAP vs labelled images, §4.2.5 unlabelled effect, the eigenfunctions
    assert len(pngs) == 3
    miap = _table(out, "**scene** — miap vs labelled training images")
    assert set(miap) == {"ALE-SVM", "IALE-SVM", "ALE-SF", "IALE-SF", "BSVM", "GSF"}
    # the small-mode figures of tests/notebooks/test_ale.py (same seeds, same rows)
    assert miap["ALE-SF"][0] > miap["ALE-SVM"][0] + 5.0, miap
    assert all(v > 40.0 for (v,) in miap.values()), miap
    line = re.search(r"eigenfunctions: dims (\[.*?\]) eigenvalues (\[.*?\])", out)
    dims, eigenvalues = map(ast.literal_eval, line.groups())
    # the 8 smoothest of 40 eigenfunctions over pca=10 dimensions, σ ascending
    assert len(dims) == len(eigenvalues) == 8
    assert all(0 <= d < 10 for d in dims)
    assert eigenvalues == sorted(eigenvalues) and eigenvalues[0] > 0
    assert len(set(dims)) > 1  # not all on one principal dimension


def test_seed004_emml_notebook(data_root):
    nb, pngs, out = run("seed004_emml", data_root)
    # precision/recall vs N for corel5k and scene, query time vs database size
    assert len(pngs) == 3
    assert "| emml |" in out and "| mbrm |" in out
    f1 = {
        m.group(1): ast.literal_eval(m.group(2))
        for m in re.finditer(r"(\w+): word F1@5 (\{.*?\})", out)
    }
    assert set(f1) == {"corel5k", "scene"}
    # scene: both retrieval-style annotators beat the empirical word prior
    # (small mode, seed 0: EMML 0.375, MBRM 0.458, empirical 0.274)
    for m in ("emml", "mbrm"):
        assert f1["scene"][m] > f1["scene"]["empirical"] + 0.05, f1
    # the query-time figure's data: EMML's annotation time flat, MBRM's growing
    pattern = r"(\d+) images: EMML annotation [\d.]+ ms, MBRM ([\d.]+)"
    times = dict(re.findall(pattern, out))
    assert len(times) == 4
    assert float(times["1000000"]) > 100 * float(times["1000"])


def test_modelling_notebook(data_root, tmp_path):
    result_path = tmp_path / "modelling.json"
    nb, pngs, out = run("modelling", data_root, f"--small --out {result_path}")
    # objective traces, posterior comparison
    assert len(pngs) == 2
    result = json.loads(result_path.read_text())
    fits = ["VEM", "VEM + LapVar1", "VEM + MaxMargin", "SVI + LaplacianELBO"]
    assert max(result[name]["tag_map"] for name in fits) > 0.3
    assert result["VEM + MaxMargin"]["class_accuracy"] > 0.5
    # the traces printed for the figure: 3 restarts + 2 chosen VEM fits (15 EM
    # iterations each in small mode) and the SVI fit (150 steps)
    steps = dict(re.findall(r"^(.+?)\s+(\d+) steps, final", out, re.M))
    assert len(steps) == 6, steps
    assert sorted(int(v) for v in steps.values()) == [15] * 5 + [150]


def test_seed000_lap_mix_unigram_notebook(data_root, tmp_path):
    result_path = tmp_path / "seed000.json"
    nb, pngs, out = run(
        "seed000_lap_mix_unigram", data_root, f"--small --out {result_path}"
    )
    # accuracy vs K, complete length vs K
    assert len(pngs) == 2
    result = json.loads(result_path.read_text())
    final = result["final"]
    assert set(final) == {
        "empirical",
        "mix-unigram",
        "plsa-words",
        "link-lda",
        "lap-mix-unigram",
    }
    # the small-mode figures of tests/notebooks/test_seed000_lap_mix_unigram.py
    # (200 reporting images): LapMixUnigram 0.426 / 31.0, mix-unigram 0.297 / 32.9
    lap, mix = final["lap-mix-unigram"], final["mix-unigram"]
    assert lap["accuracy_mean"] > mix["accuracy_mean"] + 0.05, (lap, mix)
    assert lap["complete_length_mean"] < mix["complete_length_mean"], (lap, mix)
    # the curves printed for the figures: one K (4) per topic model, in [0, 1] and
    # a complete length within the 374-word vocabulary
    curves = {
        name: ast.literal_eval(pts)
        for name, pts in re.findall(r"^([\w-]+): K, accuracy, CL (\[.*\])$", out, re.M)
    }
    assert set(curves) == set(final)
    for name, pts in curves.items():
        for k, acc, cl in pts:
            assert k == (0 if name == "empirical" else 4)
            assert 0.0 < acc < 1.0 and 1.0 <= cl <= 374.0, (name, pts)
    # the example annotations: 8 predicted images, truth and top-5 words of both
    # methods; the re-fit reproduces the reported run of subset 0
    rows = re.findall(r"^\| #(\d+) \| (.+?) \| (.+?) \| (.+?) \|$", out, re.M)
    assert len(rows) == 8, out[-3000:]
    for _, truth, lap_words, mix_words in rows:
        assert truth and len(lap_words.split(", ")) == 5
        assert len(mix_words.split(", ")) == 5
    refits = re.findall(r"re-fit accuracy ([\d.]+) .*reported run: ([\d.]+)", out)
    assert len(refits) == 2
    for refit, reported in refits:
        assert abs(float(refit) - float(reported)) < 1e-3


def test_seed001_harmoniums_notebook(data_root, tmp_path):
    result_path = tmp_path / "harmoniums.json"
    nb, pngs, out = run("seed001_harmoniums", data_root, f"--small --out {result_path}")
    # accuracy vs K, precision-recall (retrieval + annotation), t-SNE latent maps
    assert len(pngs) == 3
    result = json.loads(result_path.read_text())
    assert set(result["classification"]) == {"wikipedia", "mfeat"}
    for ds, r in result["classification"].items():
        # the rows of the latent models (the svm row has no K, AP or KL)
        section = out[out.index(f"**{ds}** — test accuracy at the CV-chosen K") :]
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
    # the small-mode figures of tests/notebooks/test_harmoniums.py: on mfeat (chance
    # 0.1) MMH 0.875, retrieval AP about 0.6; the raw-feature SVM above the latent ones
    mfeat = result["classification"]["mfeat"]
    assert mfeat["accuracy_mean"]["mmh"] > 0.5, mfeat["accuracy_mean"]
    assert mfeat["latent"]["mmh"]["retrieval_ap"] > 0.3, mfeat["latent"]
    assert mfeat["svm_mean"] > max(mfeat["accuracy_mean"].values())
    # the accuracy-vs-K curves printed for the figure are the JSON's CV accuracies
    curves = {
        (ds, m): ast.literal_eval(pts)
        for ds, m, pts in re.findall(
            r"^(\w+) ([\w-]+): K, CV accuracy (\[.*\])$", out, re.M
        )
    }
    assert len(curves) == 6, curves
    for (ds, m), pts in curves.items():
        cv = result["classification"][ds]["cv_accuracy_mean"][m]
        assert [k for k, _ in pts] == [3, 4]
        assert all(abs(v - cv[str(k)]) < 1e-4 for k, v in pts), (ds, m, pts)
    # retrieval PR: 11 interpolated precisions, non-increasing in recall, in [0, 1]
    pr = re.findall(
        r"^(\w+) retrieval ([\w-]+): interpolated precision \[([^\]]*)\]", out, re.M
    )
    assert len(pr) == 6
    for _, _, values in pr:
        p = [float(v) for v in values.split()]
        assert len(p) == 11 and all(0.0 <= v <= 1.0 for v in p)
        assert all(a >= b - 1e-9 for a, b in zip(p, p[1:], strict=False)), p
    # annotation PR: top-N words, N = 1..20; recall grows with N
    ann = dict(
        re.findall(
            r"^corel5k annotation (\w+): N=1\.\.20 recall \[([^\]]*)\]", out, re.M
        )
    )
    assert set(ann) == {"dwh", "empirical"}
    for values in ann.values():
        r = [float(v) for v in values.split()]
        assert len(r) == 20 and r == sorted(r) and 0.0 < r[-1] <= 1.0
    maps = re.findall(r"^(\w+) latent map ([\w-]+): 40 test images, t-SNE$", out, re.M)
    assert len(maps) == 6


def test_seed003_sfsls_notebook(data_root, tmp_path):
    result_path = tmp_path / "sfsls.json"
    nb, pngs, out = run("seed003_sfsls", data_root, f"--small --out {result_path}")
    # MAP vs labelled fraction, the p sweep, with vs without unlabelled images
    assert len(pngs) == 3
    assert "Table 1" in out and "| 10% |" in out
    full = json.loads(result_path.read_text())
    result = full["scene"]
    # 6 scene concepts: random scores give MAP ≈ base rate ≈ 0.18. In the small mode
    # (seed 0, 180 training images, 18 labelled) the three selectors measured 0.45
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
