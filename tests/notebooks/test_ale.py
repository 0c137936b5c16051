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
    for label in ("ALE-SVM", "IALE-SVM", "ALE-SF", "IALE-SF", "BSVM", "GSF"):
        assert f"| {label} |" in out
    assert "**scene**" in out
    assert "§4.2.5" in out
