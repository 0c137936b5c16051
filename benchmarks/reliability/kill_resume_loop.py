"""SIGKILL inside a checkpointed fit's step loop, then resume: is the result the same?

A checkpointed fit (``jaxannot evaluate mix-unigram --dataset emotions --checkpoint
DIR --checkpoint-every 3``, 300 MAP-EM iterations, 4 topics) is started in a fresh
checkpoint folder, which is polled; as soon as the step recorded in its checkpoint
reaches a seeded random target (a multiple of 3 inside the loop) the process is
killed with ``SIGKILL``. The step recorded then says where the kill landed: inside
the loop when ``0 < step < iterations`` (a few more slices may be written between
the poll and the kill). The same command is run again, resumes from the checkpoint
and finishes; its saved model (every array, byte for byte) and its metrics are
compared with those of an uninterrupted run without a checkpoint.

    JAXANNOT_DATA=... nice python -m benchmarks.reliability.kill_resume_loop --trials 24

Writes benchmarks/results/kill_resume_loop.json.
"""

from __future__ import annotations

import collections
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import child_env
from benchmarks.common.records import RESULTS, write_json

OUT = os.path.join(RESULTS, "kill_resume_loop.json")
ITERATIONS = 300
EVERY = 3


def command(folder: str, name: str, checkpoint: bool) -> list[str]:
    argv = [sys.executable, "-m", "jaxannot.cli", "evaluate", "mix-unigram",
            "--dataset", "emotions", "--set", f"iterations={ITERATIONS}",
            "--set", "topics=4", "--seed", "0",
            "--save", os.path.join(folder, f"{name}.npz"),
            "--json", os.path.join(folder, f"{name}.json")]  # fmt: skip
    if checkpoint:
        argv += ["--checkpoint", os.path.join(folder, "state"),
                 "--checkpoint-every", str(EVERY)]  # fmt: skip
    return argv


def finish(argv: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return done


def arrays(path: str) -> dict[str, bytes]:
    with np.load(path, allow_pickle=False) as archive:
        return {k: archive[k].dtype.str.encode() + archive[k].tobytes()
                for k in archive.files}  # fmt: skip


def saved_step(state: str) -> int | None:
    """The step of the loop's checkpoint (None: none written yet)."""
    try:
        with np.load(os.path.join(state, "run-000.npz"), allow_pickle=False) as f:
            return int(json.loads(f["__meta__"].tobytes().decode())["step"])
    except FileNotFoundError:
        return None


def kill_inside(argv: list[str], state: str, target: int) -> dict:
    """Start ``argv``; SIGKILL it as soon as its checkpoint has reached ``target``."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and (saved_step(state) or 0) < target:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return {"returncode": proc.returncode, "step_at_kill": saved_step(state)}


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    os.environ.update(child_env(args.device))  # the commands run
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        finish(command(folder, "reference", False))
        reference = arrays(os.path.join(folder, "reference.npz"))
        with open(os.path.join(folder, "reference.json")) as fh:
            ref_metrics = json.load(fh)["metrics"]
        trials = []
        for i in range(args.trials):
            trial = os.path.join(folder, f"trial{i}")
            os.makedirs(trial)
            argv = command(trial, "resumed", True)
            target = int(rng.integers(1, ITERATIONS // EVERY)) * EVERY
            killed = kill_inside(argv, os.path.join(trial, "state"), target)
            resumed = finish(argv)
            match = re.search(r"step loop 0 resumed at step (\d+)", resumed.stderr)
            with open(os.path.join(trial, "resumed.json")) as fh:
                metrics = json.load(fh)["metrics"]
            step = killed["step_at_kill"]
            trials.append({
                "target_step": target,
                "kill_returncode": killed["returncode"],
                "step_at_kill": step,
                "inside_loop": step is not None and 0 < step < ITERATIONS,
                "resumed_at_step": int(match[1]) if match else None,
                "model_bit_identical": arrays(os.path.join(trial, "resumed.npz"))
                == reference,
                "metrics_equal": metrics == ref_metrics,
            })  # fmt: skip
            print(trials[-1], flush=True)
            write(args, trials)


def write(args, trials: list[dict]) -> None:
    inside = [t for t in trials if t["inside_loop"]]
    payload = {
        "benchmark": "kill_resume_loop",
        "command": "python -m jaxannot.cli evaluate mix-unigram --dataset emotions "
        f"--set iterations={ITERATIONS} --set topics=4 --seed 0 --checkpoint DIR "
        f"--checkpoint-every {EVERY} --save M.npz --json R.json",
        "reference": "the same command without --checkpoint, uninterrupted",
        "kill": "SIGKILL as soon as the checkpoint shows a seeded random target step "
        f"(a multiple of {EVERY} in [{EVERY}, {ITERATIONS - EVERY}], seed {args.seed})",
        "trials": len(trials),
        "kills_inside_loop": len(inside),
        "steps_at_kill": sorted(t["step_at_kill"] or 0 for t in trials),
        "inside_and_bit_identical": sum(
            t["model_bit_identical"] and t["metrics_equal"] for t in inside
        ),
        "all_bit_identical": all(
            t["model_bit_identical"] and t["metrics_equal"] for t in trials
        ),
        "kill_returncodes": dict(
            collections.Counter(str(t["kill_returncode"]) for t in trials)
        ),
        "per_trial": trials,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    write_json(args.out, payload, indent=2)


if __name__ == "__main__":
    main()
