"""How many EM iterations the generic M-step needs, by optax steps per M-step.

The toy of ``benchmarks/scale/first_fit.py`` (a Gaussian mixture, 2000 images x 2
features, K = 6, the generic M-step with ``adam(0.05)``; ``conjugate=False``, since
the closed form of its Dirichlet weights and the Newton step of its Normal means
would leave no optax step to count) fitted by :class:`jaxannot.inference.VEM` for
``--iterations`` EM iterations at each ``m_steps`` from the same starts
(``--seeds``). The reference is the highest final objective of any run; each run
reports the first EM iteration whose objective is within ``--nats`` of it
(``null``: never), its final objective and its seconds per EM iteration (a second
fit, compile excluded). This is how ``VEM``'s default ``m_steps`` was chosen.

Writes ``benchmarks/results/m_steps.json``.

    python -m benchmarks.scale.m_steps
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import RESULTS, write_json
from benchmarks.common.toys import gaussian_toy

RESULTS = RESULTS


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--m-steps", type=int, nargs="+", default=[1, 2, 5, 10])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--nats", type=float, default=10.0)
    parser.add_argument("--out", default=str(RESULTS / "m_steps.json"))
    args = parser.parse_args(argv)
    use_device(args.device)
    import jax

    from jaxannot.inference import VEM

    model, x = gaussian_toy()
    runs = []
    for m in args.m_steps:
        vem = VEM(model, "z", m_steps=m, conjugate=False, warn_empty=False)
        for seed in range(args.seeds):
            key = jax.random.key(seed)
            fit = vem.run(key, args.iterations, x, k=6, progress_bar=False)
            start = time.perf_counter()
            again = vem.run(key, args.iterations, x, k=6, progress_bar=False)
            jax.block_until_ready(again.posteriors)
            seconds = time.perf_counter() - start
            runs.append(
                {
                    "m_steps": m,
                    "seed": seed,
                    "objective": (-np.asarray(fit.losses, np.float64)).tolist(),
                    "seconds_per_iteration": seconds / args.iterations,
                }
            )
    best = max(r["objective"][-1] for r in runs)
    for r in runs:
        close = np.flatnonzero(np.asarray(r["objective"]) >= best - args.nats)
        r["iterations_to_within"] = int(close[0]) + 1 if close.size else None
        r["final_objective"] = r["objective"][-1]
    summary = {}
    for m in args.m_steps:
        mine = [r for r in runs if r["m_steps"] == m]
        reached = [r["iterations_to_within"] for r in mine]
        summary[str(m)] = {
            "iterations_to_within": reached,
            "median_iterations": (
                float(np.median(reached))
                if all(v is not None for v in reached)
                else None
            ),
            "seconds_per_iteration": float(
                np.median([r["seconds_per_iteration"] for r in mine])
            ),
        }
    record = {
        "command": "python -m benchmarks.scale.m_steps "
        + " ".join(argv or sys.argv[1:]),
        "toy": "Gaussian mixture, 2000 images x 2 features, K = 6, adam(0.05)",
        "nats": args.nats,
        "best_final_objective": best,
        "summary": summary,
        "runs": runs,
        "device": device_record(),
        "loadavg": os.getloadavg(),
    }
    write_json(args.out, record)
    print(json.dumps({k: v for k, v in record.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
