"""The exact EMML solver's sweep time against its score-update block size.

``fit_emml_exact`` visits the VReps one at a time (block Gauss--Seidel). With
``block = 1`` every visit updates all N rows of the scores F (a memory-bound
rank-one update of an N x W array); with ``block = B`` only the block's rows follow
each visit and the other rows take the block's steps in one matrix product. The
iterates are the same up to rounding; this script measures the time.

The problem is emml's at its defaults on Corel5k's training images: ``--vreps``
random annotated images as VReps (the annotator's ``random_vreps``, seed 0), RBF
kernel with gamma = ``--gamma-scale`` / median squared distance, C = ``--c``. Each
block size runs a fixed number of sweeps (``--sweeps``, with a tolerance of 0 so that
no run stops early); compile time (``lower().compile()``) is recorded apart from the
timed runs (median of ``--repeats``). The objectives after the sweeps are recorded,
with their largest relative difference from ``block = 1``.
Writes benchmarks/results/emml_exact_blocks.json.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.scale.emml_exact_blocks \\
        --vreps 2000 3000 --blocks 1 16 64 256 --sweeps 10
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.emml_problem import corel5k_problem
from benchmarks.common.records import RESULTS, write_json
from jaxannot.methods.emml.exact import fit_emml_exact

INF = float("inf")


def time_blocks(data, c, blocks, sweeps, repeats):
    rows = []
    for block in blocks:
        t0 = time.perf_counter()
        compiled = fit_emml_exact.lower(  # sweeps only: no gradient phase
            data, c, 0.0, max_sweeps=sweeps, block=block, handoff=INF
        ).compile()
        compile_seconds = time.perf_counter() - t0
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            state, _ = compiled(data, c, 0.0, handoff=INF)
            state.objective.block_until_ready()
            times.append(time.perf_counter() - t0)
        rows.append(
            {
                "block": block,
                "compile_seconds": compile_seconds,
                "seconds": statistics.median(times),
                "seconds_all": times,
                "seconds_per_sweep": statistics.median(times) / sweeps,
                "sweeps": int(state.sweeps),
                "objective": float(state.objective),
            }
        )
        print(
            f"  block {block:4d}: {rows[-1]['seconds_per_sweep'] * 1e3:8.1f} ms/sweep"
            f" (compile {compile_seconds:.1f} s),"
            f" objective {rows[-1]['objective']:.6g}",
            flush=True,
        )
    base = rows[0]
    for row in rows:
        row["speedup_vs_first"] = base["seconds"] / row["seconds"]
        row["objective_rel_diff_vs_first"] = abs(
            row["objective"] - base["objective"]
        ) / abs(base["objective"])
    return rows


def main(argv=None):
    ap = script_parser(__doc__)
    ap.add_argument("--vreps", type=int, nargs="+", default=[2000, 3000])
    ap.add_argument("--blocks", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gamma-scale", type=float, default=2.0)
    ap.add_argument("--c", type=float, default=2.0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=os.path.join(RESULTS, "emml_exact_blocks.json"))
    args = ap.parse_args(argv)
    use_device(args.device)
    result = {
        "what": "fit_emml_exact seconds per sweep against its score-update block size",
        "dataset": "corel5k (training images)",
        "gamma_scale": args.gamma_scale,
        "c": args.c,
        "sweeps": args.sweeps,
        "repeats": args.repeats,
        "runs": [],
    }
    for n in args.vreps:
        data = corel5k_problem(n, args.gamma_scale, args.data_dir)
        print(f"{n} VReps, {data.words.shape[1]} words", flush=True)
        rows = time_blocks(data, args.c, args.blocks, args.sweeps, args.repeats)
        result["runs"].append({"vreps": n, "blocks": rows})
    result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["device"] = device_record()
    result["command"] = "python -m benchmarks.scale.emml_exact_blocks " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    write_json(args.out, result, indent=2)
    print(f"-> {args.out}")
    return result


if __name__ == "__main__":
    main()
