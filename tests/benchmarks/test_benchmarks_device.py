"""``benchmarks/common/device.py``: the ``--device`` argument of the benchmark scripts.

The platform choice is process-wide in JAX, so everything that selects one runs in a
child process started at the repository root (as ``python -m benchmarks.PURPOSE.NAME``
runs).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_add_device_argument_parses_the_choices(benchmark_script):
    device = benchmark_script("benchmarks.common.device")
    parser = argparse.ArgumentParser()
    device.add_device_argument(parser)
    assert parser.parse_args([]).device == "auto"
    for name in ("auto", "cpu", "gpu", "tpu"):
        assert parser.parse_args(["--device", name]).device == name
    with pytest.raises(SystemExit):
        parser.parse_args(["--device", "quantum"])
    assert "platform" in parser.format_help()


def test_child_env_sets_jax_platforms(benchmark_script):
    device = benchmark_script("benchmarks.common.device")
    assert device.child_env("gpu", {"A": "1"}) == {"A": "1", "JAX_PLATFORMS": "gpu"}
    assert device.child_env("auto", {"JAX_PLATFORMS": "cpu"}) == {
        "JAX_PLATFORMS": "cpu"
    }
    assert "JAX_PLATFORMS" not in device.child_env("auto", {})


def test_use_device_cpu_records_the_cpu_backend():
    proc = _python(
        "import json\n"
        "from benchmarks.common.device import device_record, use_device\n"
        "use_device('cpu')\n"
        "print(json.dumps(device_record()))\n"
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["backend"] == "cpu"
    assert record["device_kind"] == "cpu"
    assert record["devices"] and all(isinstance(d, str) for d in record["devices"])
    assert set(record) == {
        "backend",
        "devices",
        "device_kind",
        "jax",
        "platform",
        "cpus",
    }


def test_unavailable_device_exits_with_a_clear_message():
    proc = _python(
        "from benchmarks.common.device import use_device\nuse_device('tpu')\n"
    )
    if proc.returncode == 0:
        pytest.skip("this machine has a TPU")
    assert "--device tpu: no TPU backend (jax.devices() lists: cpu" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_benchmark_help_lists_device():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale.query_time", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--device {auto,cpu,gpu,tpu}" in proc.stdout


def test_script_parser_describes_the_first_paragraph_with_or_without_device():
    from benchmarks.common.cli import script_parser

    doc = "A tool that\nreads records.\n\nMore text.\n"
    with_device = script_parser(doc)
    assert with_device.description == "A tool that reads records."
    assert with_device.parse_args([]).device == "auto"
    without = script_parser(doc, device=False)
    assert without.description == "A tool that reads records."
    assert "device" not in vars(without.parse_args([]))
