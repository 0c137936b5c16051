"""Time and memory of hostile files: what the unguarded parsers cost, what the
guards cost.

- A nominal ARFF attribute missing its closing brace: liac-arff's own decoder (what
  ``parse_arff`` ran before its linear-time check) against ``parse_arff`` now, at a
  growing number of values.
- A "zip bomb" ``.npz`` (a 255 KiB file whose one entry inflates to 256 MiB of zeros):
  numpy's reader (``np.load``, as unbounded as the archive reader was) against
  ``read_archive``, which refuses it from the sizes the zip directory declares.
  Each reader runs in a child process, whose peak resident memory is recorded.

Run ``python benchmarks/hostile_files.py``; writes
``benchmarks/results/hostile_files.json``. CPU only, no JAX.
"""

from __future__ import annotations

import json
import pathlib
import platform
import subprocess
import sys
import tempfile
import time
import zipfile

import arff as liac_arff
import numpy as np

from jaxannot.data.arff import parse_arff
from jaxannot.data.errors import DataFormatError

RESULTS = pathlib.Path(__file__).parent / "results" / "hostile_files.json"


def _nominal_without_brace(values: int) -> str:
    listed = ",".join(f"v{i}" for i in range(values))
    return f"@relation r\n@attribute g {{{listed}\n@data\nv0\n"


def _seconds(call) -> float:
    start = time.perf_counter()
    try:
        call()
    except (DataFormatError, liac_arff.ArffException):
        pass
    return time.perf_counter() - start


def arff_rows() -> list[dict]:
    rows = []
    for values in (14, 16, 18, 20):
        text = _nominal_without_brace(values)
        decoder = liac_arff.ArffDecoder()
        rows.append(
            {
                "values": values,
                "liac_arff_s": _seconds(lambda d=decoder, t=text: d.decode(t)),
                "parse_arff_s": _seconds(lambda t=text: parse_arff(t)),
            }
        )
    return rows


_CHILD = """
import resource, sys, time
import numpy as np
from jaxannot.data.archive import read_archive
from jaxannot.data.errors import DataFormatError
start = time.perf_counter()
try:
    if sys.argv[1] == "numpy":
        with np.load(sys.argv[2]) as z:
            z["w"]
        outcome = "read"
    else:
        read_archive(sys.argv[2], "feature archive")
        outcome = "read"
except DataFormatError:
    outcome = "refused"
seconds = time.perf_counter() - start
print(outcome, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bomb_rows(folder: pathlib.Path) -> list[dict]:
    path = folder / "bomb.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("w.npy", "w", force_zip64=True) as fh:
            header = {"descr": "|u1", "fortran_order": False, "shape": (2**28,)}
            np.lib.format.write_array_header_1_0(fh, header)
            for _ in range(16):
                fh.write(bytes(2**24))
    rows = []
    for reader in ("numpy", "read_archive"):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, reader, str(path)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        outcome, seconds, rss_kib = out.stdout.split()
        rows.append(
            {
                "reader": reader,
                "file_bytes": path.stat().st_size,
                "declared_bytes": 2**28,
                "outcome": outcome,
                "seconds": float(seconds),
                "peak_rss_mib": int(rss_kib) / 1024,
            }
        )
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result = {
            "machine": platform.processor() or platform.machine(),
            "arff_nominal_without_brace": arff_rows(),
            "zip_bomb": bomb_rows(pathlib.Path(tmp)),
        }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
