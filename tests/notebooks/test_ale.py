"""The seed 002 notebook runs end to end in its small mode on the real data."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_notebook_small(data_root):
    env = {**os.environ, "JAXANNOT_DATA": str(data_root), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "notebooks" / "seed002_ale.py"), "--small"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "**scene**" in out
    assert "§4.2.5" in out
    miap = _table(out, "**scene** — miap vs labelled training images")
    assert set(miap) == {"ALE-SVM", "IALE-SVM", "ALE-SF", "IALE-SF", "BSVM", "GSF"}
    # 6 scene concepts: a random ranking scores MiAP ≈ the base rate (≈ 18 %). In the
    # small mode (150 labelled images, seed 0) every method measured 42.2–69.9 with
    # the cross-validated defaults, and the smooth-function detectors beat the SVM on
    # the same eigenfunctions (ALE-SF 64.3 vs ALE-SVM 42.2, IALE-SF 63.0 vs IALE-SVM
    # 42.6: the SVMs' C, chosen on all 1211 training images, is small for 150); with
    # the earlier λ = 100, C = 5, bandwidth 0.25: 63.1 vs 50.8, 63.8 vs 56.0.
    for label, (value,) in miap.items():
        assert value > 40.0, (label, value)
    assert miap["ALE-SF"][0] > miap["ALE-SVM"][0] + 5.0, miap
    assert miap["IALE-SF"][0] > miap["IALE-SVM"][0] + 3.0, miap


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
