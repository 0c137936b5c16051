"""EMML against MBRM with both read off the same metric.

EMML's defaults were cross-validated by MAP on Corel5k's training images
(``benchmarks/results/defaults_cv/emml_corel5k.json``); MBRM chooses its kernel
bandwidth by 3-fold CV on the training images by the metric ``select_metric`` (its
default: word F1@5). This runs, on each dataset's own split (seed 0, inductive),
EMML at its defaults and MBRM with ``select_metric`` = ``word_f1@5`` and ``map``,
each as ``jaxannot evaluate`` in its own process, and records every metric of each,
so the comparison at matched tuning (both by MAP) stands beside the default one:

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.claims.emml_vs_mbrm \\
        --datasets corel5k scene --json benchmarks/results/emml_vs_mbrm.json
"""

from __future__ import annotations

import os
import platform

from benchmarks.common.cli import script_parser
from benchmarks.common.device import child_device_record
from benchmarks.common.method_runs import run_one
from benchmarks.common.records import write_json

RUNS = (
    ("emml", ()),
    ("mbrm", ("select_metric=word_f1@5",)),
    ("mbrm", ("select_metric=map",)),
)


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--datasets", nargs="+", default=["corel5k", "scene"])
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    report = {
        "benchmark": "emml_vs_mbrm",
        "protocol": "inductive (the dataset's split), seed 0; EMML at its defaults "
        "(tuned by MAP), MBRM's bandwidth by 3-fold CV on the training images by "
        "select_metric",
        "command": "python -m benchmarks.claims.emml_vs_mbrm --datasets "
        + " ".join(args.datasets),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "device": child_device_record(args.device),
        "results": {},
    }
    for dataset in args.datasets:
        rows = report["results"].setdefault(dataset, {})
        for method, settings in RUNS:
            label = method + "".join(f" {kv}" for kv in settings)
            print(f"{label} on {dataset} ...", flush=True)
            rows[label] = run_one(method, dataset, args.timeout, args.device, settings)
            write_json(args.json, report, indent=2)


if __name__ == "__main__":
    main()
