"""Ctrl-C during a fit, hundreds of times: how does ``jaxannot`` exit?

Each run starts ``python -m jaxannot.cli evaluate METHOD --dataset DIR`` (knn unless
``--method``) on a small Mulan
folder (the first ``--train`` / ``--test`` rows of emotions, so a run is mostly jax's
start-up and the fit's compiles), waits for the ``fitting on`` progress line, sleeps a
seeded uniform delay in ``[0, window]`` (``window``: the time from that line to the
exit of an uninterrupted run, measured on the second of two runs, once the compilation
cache is warm) and sends ``SIGINT``. The expected exit
is status 130 with the one line ``jaxannot: interrupted``, or status 0 when the run had
already finished. Anything else (139 = ``SIGSEGV``, a traceback) is a failure; its
stderr tail is kept.

    JAXANNOT_DATA=... nice python -m benchmarks.reliability.interrupt_loop \\
        --runs 500 --workers 3

(``--window-fraction 0.5``: delays in the first half of that window, so that every
signal lands inside the fit rather than after it; ``--method dwh --set steps=1500``: a
fit of a few seconds, so that the signals land in its step loop.)

(``--workers``: commands run side by side, each signalled on its own schedule.)

Writes benchmarks/results/interrupt_loop.json (rewritten every 25 runs, so a run
stopped early still leaves its figures).
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import child_env
from benchmarks.common.records import RESULTS, write_json

OUT = os.path.join(RESULTS, "interrupt_loop.json")
TRIGGER = "fitting on"


def small_emotions(folder: str, train: int, test: int) -> None:
    """The first ``train`` / ``test`` rows of emotions as a Mulan folder."""
    source = os.path.join(os.environ["JAXANNOT_DATA"], "emotions")
    for part, rows in (("train", train), ("test", test)):
        with open(os.path.join(source, f"emotions-{part}.arff")) as fh:
            lines = fh.read().splitlines()
        data = next(i for i, line in enumerate(lines) if line.lower() == "@data")
        kept = lines[: data + 1] + lines[data + 1 : data + 1 + rows]
        with open(os.path.join(folder, f"small-{part}.arff"), "w") as fh:
            fh.write("\n".join(kept) + "\n")
    with open(os.path.join(source, "emotions.xml")) as src:
        with open(os.path.join(folder, "small.xml"), "w") as dst:
            dst.write(src.read())


def one_run(argv: list[str], delay: float | None) -> dict:
    """Start the command; ``delay`` seconds after its trigger line send SIGINT
    (``None``: let it finish). Returns its exit status, stderr and timings."""
    began = time.monotonic()
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)  # fmt: skip
    head = []
    for line in proc.stderr:
        head.append(line)
        if TRIGGER in line:
            break
    triggered = time.monotonic()
    if delay is not None:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        err += "\n(killed after 300 s)"
    ended = time.monotonic()
    return {
        "returncode": proc.returncode,
        "stderr": "".join(head) + err,
        "after_trigger_s": ended - triggered,
        "total_s": ended - began,
    }


def verdict(run: dict) -> str:
    err = run["stderr"]
    if "Traceback" in err:
        return "traceback"
    if run["returncode"] == 130 and err.endswith("jaxannot: interrupted\n"):
        return "interrupted"
    if run["returncode"] == 0 and "jaxannot: interrupted" not in err:
        return "finished"
    return "other"


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--train", type=int, default=120)
    parser.add_argument("--test", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", default="knn")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a hyper-parameter (a longer fit)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=1, help="runs at a time")
    parser.add_argument("--window-fraction", type=float, default=1.0,
                        help="delays drawn in [0, fraction * window]: below 1, "
                        "every interrupt lands inside the fit")  # fmt: skip
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    os.environ.update(child_env(args.device))  # the commands run
    # a shell starts a background job with SIGINT ignored, and the commands would
    # inherit that: give them the default disposition (Ctrl-C ends them)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        small_emotions(folder, args.train, args.test)
        argv = [sys.executable, "-m", "jaxannot.cli", "evaluate", args.method,
                *[f"--set={kv}" for kv in args.set], "--dataset", folder]  # fmt: skip
        one_run(argv, None)  # fills the compilation cache: later runs start warm
        calibration = one_run(argv, None)
        assert calibration["returncode"] == 0, calibration["stderr"]
        window = args.window_fraction * calibration["after_trigger_s"]
        delays = rng.uniform(0.0, window, args.runs)
        runs = []
        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
            jobs = [pool.submit(one_run, argv, float(d)) for d in delays]
            for job, delay in zip(jobs, delays, strict=True):
                runs.append({**job.result(), "delay_s": float(delay)})
                if len(runs) % 25 == 0 or len(runs) == args.runs:
                    write(args, argv, window, calibration, runs)
                    print(f"{len(runs)} runs: {summary(runs)}", flush=True)


def summary(runs: list[dict]) -> dict:
    codes = collections.Counter(str(r["returncode"]) for r in runs)
    verdicts = collections.Counter(verdict(r) for r in runs)
    in_fit = sum(verdict(r) == "interrupted" and "fitted in" not in r["stderr"]
                 for r in runs)  # fmt: skip
    return {
        "returncodes": dict(sorted(codes.items())),
        "verdicts": dict(verdicts),
        "interrupted_inside_the_fit": in_fit,
    }


def write(args, argv, window, calibration, runs) -> None:
    bad = [r for r in runs if verdict(r) in ("traceback", "other")]
    payload = {
        "benchmark": "interrupt_loop",
        "command": " ".join(["python", "-m", "jaxannot.cli", *argv[3:-1], "SMALL"]),
        "interrupted_inside_the_fit_means": "ended 'interrupted' (130) with the "
        "'fitting on' line and without the 'fitted in' line on stderr",
        "dataset": f"emotions, first {args.train} train / {args.test} test rows",
        "sigint_delay": f"uniform [0, {window:.2f}] s after the '{TRIGGER}' line "
        f"({args.window_fraction} x the uninterrupted run's time from that line to its "
        f"exit, {calibration['after_trigger_s']:.2f} s), seed {args.seed}",
        "runs": len(runs),
        "runs_at_a_time": args.workers,
        **summary(runs),
        "calibration_total_s": round(calibration["total_s"], 2),
        "mean_run_s": round(float(np.mean([r["total_s"] for r in runs])), 2),
        "failures": [
            {
                "index": runs.index(r),
                "returncode": r["returncode"],
                "delay_s": round(r["delay_s"], 3),
                "stderr_tail": r["stderr"][-2000:],
            }
            for r in bad
        ],  # fmt: skip
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    write_json(args.out, payload, indent=2)


if __name__ == "__main__":
    main()
