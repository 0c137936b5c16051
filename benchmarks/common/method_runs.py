"""One registered method at its defaults, evaluated in a child process
(``tools.defaults_vs_empirical``, ``benchmarks.claims.emml_vs_mbrm``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks.common.device import child_env


def run_one(
    method: str,
    dataset: str,
    timeout: float,
    device: str = "auto",
    settings: tuple[str, ...] = (),
) -> dict:
    """``jaxannot evaluate METHOD --dataset D [--set K=V ...]`` in a child process: its
    ``--json`` result with ``wall_seconds``, or ``{"error": ...}``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [
            sys.executable,
            "-m",
            "jaxannot.cli",
            "evaluate",
            method,
            "--dataset",
            dataset,
            "--json",
            out,
            *(f"--set={kv}" for kv in settings),
        ]
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=child_env(device),
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        wall = time.perf_counter() - start
        if proc.returncode != 0 or not os.path.exists(out):
            return {"error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
        with open(out) as fh:
            result = json.load(fh)
    result["wall_seconds"] = wall
    return result
