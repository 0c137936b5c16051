"""The seed 002 notebook executes end to end (nbclient, fresh kernel) in its small
mode on the real data: its figures, tables and eigenfunctions."""

import ast
import re


def test_notebook_small(execute_notebook):
    nb, pngs, out = execute_notebook("seed002_ale")
    # MiAP vs labelled images, §4.2.5 unlabelled effect, the eigenfunctions
    assert len(pngs) == 3
    assert "**scene**" in out
    assert "§4.2.5" in out
    miap = _table(out, "**scene** — miap vs labelled training images")
    assert set(miap) == {"ALE-SVM", "IALE-SVM", "ALE-SF", "IALE-SF", "BSVM", "GSF"}
    # 6 scene concepts: a random ranking scores MiAP ≈ the base rate (≈ 18 %). In the
    # small mode (150 labelled images, seed 0) every method measured 39.9–69.9 at the
    # defaults iterated on scene's training images, and the smooth-function detectors
    # beat the SVM on the same eigenfunctions (ALE-SF 62.2 vs ALE-SVM 40.0, IALE-SF
    # 63.1 vs IALE-SVM 39.9: the SVMs' C and bandwidth, chosen on all 1211 training
    # images, suit 150 poorly; BSVM 69.9, GSF 67.4); before that iteration (bandwidth
    # 0.1 / 0.05 for the SVMs) 60.2 vs 42.2, 60.6 vs 42.6; with the earlier λ = 100,
    # C = 5, bandwidth 0.25: 63.1 vs 50.8, 63.8 vs 56.0. Every method must stay well
    # above the random ranking.
    for label, (value,) in miap.items():
        assert value > 30.0, (label, value)
    assert miap["ALE-SF"][0] > miap["ALE-SVM"][0] + 5.0, miap
    assert miap["IALE-SF"][0] > miap["IALE-SVM"][0] + 3.0, miap
    line = re.search(r"eigenfunctions: dims (\[.*?\]) eigenvalues (\[.*?\])", out)
    dims, eigenvalues = map(ast.literal_eval, line.groups())
    # the 8 smoothest of 40 eigenfunctions over pca=10 dimensions, σ ascending
    assert len(dims) == len(eigenvalues) == 8
    assert all(0 <= d < 10 for d in dims)
    # ascending and non-negative up to float32 round-off: at the default 4 bins per
    # dimension the bins are far apart for the kernel width, a dimension's graph is
    # nearly disconnected and its second eigenvalue is about 0 (measured -1.6e-8);
    # the constant eigenfunction itself (exactly 0) is dropped by position
    assert eigenvalues == sorted(eigenvalues) and eigenvalues[0] > -1e-6
    assert len(set(dims)) > 1  # not all on one principal dimension


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
