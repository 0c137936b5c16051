"""Every annotation method at its defaults against the ``empirical`` baseline.

For each dataset the registered methods that score words are fitted with their default
hyper-parameters (no ``--set``), on the dataset's own train/test split under the
inductive protocol, seed 0, and measured with the library's annotation metrics. The
table answers one question a new user asks first: does the method, as shipped, beat
ranking words by their training frequency? (Corel5k: word F1@5 and MAP; scene: MAP.)

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m tools.defaults_vs_empirical \\
        --dataset corel5k --json benchmarks/results/defaults_vs_empirical_corel5k.json

Every method runs in its own process (one failure or memory blow-up loses one row);
the JSON is rewritten after each method so an interrupted run keeps what it measured.
``--device`` reaches those processes as ``JAX_PLATFORMS``; this process itself never
starts a JAX backend (the device record comes from a child too).
"""

from __future__ import annotations

import json
import os
import platform
import sys

from benchmarks.common.cli import script_parser
from benchmarks.common.device import child_device_record
from benchmarks.common.method_runs import run_one
from benchmarks.common.records import write_json
from jaxannot.annotators import available_methods, get_method


def annotation_methods() -> list[str]:
    return sorted(
        name for name in available_methods() if get_method(name).score_words is not None
    )


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--dataset", default="corel5k")
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", required=True)
    parser.add_argument(
        "--info",
        nargs="*",
        default=[],
        help="keys of each fit's info kept in its row, where it has them (ensemble: "
        "chosen cv_seconds bases_seconds)",
    )
    args = parser.parse_args()
    device = child_device_record(args.device)  # checks --device, in a child

    methods = args.methods or annotation_methods()
    report = {
        "dataset": args.dataset,
        "protocol": "inductive (the dataset's split), defaults, seed 0",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "device": device,
        "command": f"python -m tools.defaults_vs_empirical --dataset {args.dataset}",
        "results": {},
    }
    if os.path.exists(args.json):
        with open(args.json) as fh:
            previous = json.load(fh)
        report["results"] = previous.get("results", {})
        if "note" in previous:  # how the earlier rows were made
            report["note"] = previous["note"]
    for method in methods:
        print(f"{method} on {args.dataset} ...", file=sys.stderr, flush=True)
        row = run_one(method, args.dataset, args.timeout, args.device)
        keep = {
            k: row[k]
            for k in (
                "metrics",
                "params",
                "fit_seconds",
                "predict_seconds",
                "wall_seconds",
                "error",
            )
            if k in row
        }
        info = {k: row["info"][k] for k in args.info if k in row.get("info", {})}
        if info:
            keep["info"] = info
        report["results"][method] = keep
        print(json.dumps(keep.get("metrics", keep)), file=sys.stderr, flush=True)
        write_json(args.json, report, sort_keys=True)
    base = report["results"].get("empirical", {}).get("metrics", {})
    print(f"{'method':18s} {'word F1@5':>10s} {'MAP':>8s}  beats empirical")
    for method, row in sorted(report["results"].items()):
        m = row.get("metrics")
        if m is None:
            print(f"{method:18s} {row.get('error')}")
            continue
        wins = [
            key
            for key in ("word_f1@5", "map")
            if key in m and key in base and m[key] > base[key]
        ]
        print(
            f"{method:18s} {m.get('word_f1@5', float('nan')):10.4f} "
            f"{m.get('map', float('nan')):8.4f}  {','.join(wins)}"
        )


if __name__ == "__main__":
    main()
