"""Time and memory of hostile files: what the unguarded parsers cost, what the
guards cost, and every hostile input of issue 44 through the command line.

- A nominal ARFF attribute missing its closing brace: liac-arff's own decoder (what
  ``parse_arff`` ran before its linear-time check) against ``parse_arff`` now, at a
  growing number of values.
- A "zip bomb" ``.npz`` (a 255 KiB file whose one entry inflates to 256 MiB of zeros):
  numpy's reader (``np.load``, as unbounded as the archive reader was) against
  ``read_archive``, which refuses it from the sizes the zip directory declares.
  Each reader runs in a child process, whose peak resident memory is recorded.
- ``cases``: the catalogue of ``benchmarks/common/hostile_cases.py`` -- malformed
  ARFF and label XML, huge declared shapes, zip bombs, damaged MAT v5 and v7.3 files
  (external links and storage, deep groups, fan-out), photo folders with link
  loops, a FIFO and 1100 nested folders, hostile photo datasets, tags CSVs with
  escape and control characters, damaged checkpoints, outputs that are symbolic or
  hard links of an input. Each runs the command a user would (``python -m
  jaxannot.cli ...``) in a child process with a 30 s limit; recorded: exit status,
  seconds, the child's peak resident memory, a traceback or a raw control
  character on stderr, whether stderr names the hostile file, and every input
  entry that changed. ``summary`` gathers them against the issue's acceptance
  (0 tracebacks, 0 hangs, peak memory <= 1.5 GB for inputs under 20 MB, no input
  changed).

Run ``python -m benchmarks.reliability.hostile_files`` (``--only NAME`` runs the
cases whose name holds NAME, and writes nothing); writes
``benchmarks/results/hostile_files.json`` atomically. CPU only (the CLI's children
run with ``JAX_PLATFORMS=cpu``).
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

from benchmarks.common.cli import script_parser
from benchmarks.common.hostile_cases import CASES, KINDS, remove_tree, run_case
from benchmarks.common.records import RESULTS, write_json
from jaxannot.data.arff import parse_arff
from jaxannot.data.errors import DataFormatError

RESULTS = RESULTS / "hostile_files.json"


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


#: the acceptance of issue 44
LIMITS = {"seconds": 30.0, "peak_mb": 1536.0, "input_mb": 20.0}


def case_rows(folder: pathlib.Path, only: str | None = None) -> list[dict]:
    """Every case of the catalogue (those whose name holds ``only``), each built
    and run in a folder of its own under ``folder``."""
    rows = []
    for case in CASES:
        if only is None or only in case.name:
            rows.append(run_case(case, folder / case.name, LIMITS["seconds"]))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def summary(rows: list[dict]) -> dict:
    """The cases against the acceptance: counts of tracebacks, hangs, changed
    inputs, raw control characters and unnamed inputs; the largest seconds, peak
    memory and input; ``passed``."""
    out = {
        "n_cases": len(rows),
        "kinds": sorted({r["kind"] for r in rows}),
        "tracebacks": sum(r["traceback"] for r in rows),
        "hangs": sum(r["hung"] for r in rows),
        "inputs_changed": sum(bool(r["inputs_changed"]) for r in rows),
        "raw_control_chars": sum(r["raw_control_chars"] for r in rows),
        "inputs_not_named": sum(not r["names_input"] for r in rows),
        "exit_codes": {
            str(c): sum(r["exit_code"] == c for r in rows)
            for c in sorted({r["exit_code"] for r in rows}, key=str)
        },
        "max_seconds": max((r["seconds"] for r in rows), default=0.0),
        "max_peak_mb": max(
            (r["peak_rss_mb"] for r in rows if r["peak_rss_mb"] is not None),
            default=0.0,
        ),
        "max_input_mb": max((r["input_mb"] for r in rows), default=0.0),
        "limits": LIMITS,
    }
    out["passed"] = (
        out["tracebacks"] == out["hangs"] == out["inputs_changed"] == 0
        and out["max_seconds"] <= LIMITS["seconds"]
        and out["max_input_mb"] < LIMITS["input_mb"]
        and out["max_peak_mb"] <= LIMITS["peak_mb"]
        and set(out["kinds"]) == set(KINDS)
    )
    return out


def main() -> None:
    parser = script_parser(
        __doc__,
        "not honoured: the cases run the command line with JAX_PLATFORMS=cpu (the "
        "limits are CPU figures) and the parser timings use no JAX",
    )
    parser.add_argument("--only", default=None, help="run only cases holding this")
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="jaxannot-hostile-"))
    try:
        rows = case_rows(tmp, args.only)
        if args.only is not None:
            print(json.dumps(summary(rows), indent=2))
            return
        result = {
            "machine": platform.processor() or platform.machine(),
            "arff_nominal_without_brace": arff_rows(),
            "zip_bomb": bomb_rows(tmp),
            "cases": rows,
            "summary": summary(rows),
        }
    finally:
        remove_tree(tmp)  # a tree 1100 folders deep: not shutil.rmtree
    write_json(RESULTS, result, indent=2)
    print(json.dumps(result["summary"], indent=2))


if __name__ == "__main__":
    main()
