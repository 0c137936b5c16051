"""The exact EMML solver with and without its projected-gradient phase.

``fit_emml_exact`` runs spectral projected-gradient steps until the KKT violation is
at most ``handoff``, then block sweeps until it is at most the tolerance
(``handoff = inf``: sweeps only, the solver before the gradient phase). Both phases
cost one product with the kernel per step or sweep and share the cap
``--max-sweeps``. On emml's problem at its defaults on Corel5k's training images
(the annotator's ``random_vreps``, seed 0; RBF kernel with gamma = ``--gamma-scale``
/ median squared distance; C = ``--c``; tolerance 1e-3) each ``--handoffs`` value is
compiled, then run once: wall seconds, process CPU seconds (the machine is shared),
gradient steps, sweeps, KKT violation, duality gap and dual objective.
Writes benchmarks/results/emml_exact_solver.json.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.scale.emml_exact_solver \\
        --vreps 500 3000 --handoffs 0.02 inf
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.emml_problem import corel5k_problem
from benchmarks.common.records import RESULTS, write_json
from jaxannot.methods.emml.exact import fit_emml_exact


def time_solver(data, c, tolerance, handoff, max_sweeps):
    """One compiled run of ``fit_emml_exact`` at ``handoff``."""
    t0 = time.perf_counter()
    compiled = fit_emml_exact.lower(
        data, c, tolerance, max_sweeps=max_sweeps, handoff=handoff
    ).compile()
    compile_seconds = time.perf_counter() - t0
    t0, cpu0 = time.perf_counter(), time.process_time()
    state, _ = compiled(data, c, tolerance, handoff=handoff)
    state.objective.block_until_ready()
    return {
        "handoff": handoff if math.isfinite(handoff) else "inf",
        "compile_seconds": compile_seconds,
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - cpu0,
        "gradient_steps": int(state.gradient_steps),
        "sweeps": int(state.sweeps),
        "converged": bool(state.converged),
        "max_violation": float(state.max_violation),
        "duality_gap": float(state.duality_gap),
        "objective": float(state.objective),
    }


def main(argv=None):
    ap = script_parser(__doc__)
    ap.add_argument("--vreps", type=int, nargs="+", default=[500, 3000])
    ap.add_argument("--handoffs", type=float, nargs="+", default=[0.02, float("inf")])
    ap.add_argument("--max-sweeps", type=int, default=3000)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--gamma-scale", type=float, default=2.0)
    ap.add_argument("--c", type=float, default=2.0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=os.path.join(RESULTS, "emml_exact_solver.json"))
    args = ap.parse_args(argv)
    use_device(args.device)
    result = {
        "what": "fit_emml_exact with and without (handoff inf) its gradient phase",
        "dataset": "corel5k (training images)",
        "gamma_scale": args.gamma_scale,
        "c": args.c,
        "tolerance": args.tolerance,
        "max_sweeps": args.max_sweeps,
        "runs": [],
        "device": device_record(),
        "command": "python -m benchmarks.scale.emml_exact_solver "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    for n in args.vreps:
        data = corel5k_problem(n, args.gamma_scale, args.data_dir)
        for handoff in args.handoffs:
            row = time_solver(data, args.c, args.tolerance, handoff, args.max_sweeps)
            row["vreps"] = n
            result["runs"].append(row)
            print(json.dumps(row), flush=True)
            _write(args.out, result)  # after every run: a long one may be stopped
    print(f"-> {args.out}")
    return result


def _write(path, result):
    write_json(path, result, indent=2)


if __name__ == "__main__":
    main()
