"""End-to-end scale run: ``lap-mix-unigram`` (transductive, 10-NN graph) on N images.

Each synthetic image has 20 visual tokens (a 60-blob vocabulary) and 5 words (a
40-word vocabulary) drawn from a 20-topic multimodal mixture of unigrams
(:func:`jaxannot.data.synthetic.make_synthetic`); a quarter of the images keep their
words (the transductive protocol of seed 000). The whole method runs as a user runs
it — :func:`jaxannot.evaluation.evaluate`, graph construction included (the k-NN
search is the library's default for the corpus size: exact below the approximate
index's threshold, approximate above it) — and the JSON records

``{"objective", "seconds", "peak_rss_mb", "processes", ...}``: the final EM objective
(the regularized lower bound the fit maximizes), the wall time of the fit, the peak
resident memory of the process, and the number of processes; ``cpu_seconds`` (the
process's, whole run), ``iterations_run`` (the
regularized EM stops early at its tolerance, ``--iterations`` is the cap),
``load_average`` (1, 5 and 15 minutes, at the end) and ``--note``'s text. With
``--processes P`` the script starts P local processes joined by ``jax.distributed``
(``jaxannot.runtime.sharding.join``); each splits the images over the devices of
all of them, and the first writes the JSON (its own peak RSS).

    python -m benchmarks.scale.scale --images 1000000 \\
        --json benchmarks/results/scale_1m.json
    python -m benchmarks.scale.scale --images 20000 --json -     # a quick check
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import socket
import subprocess
import sys
import time

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import root_env, script_command, write_json


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def cpu_seconds() -> float:
    """User + system CPU time of the process so far (corpus, fit and metrics)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _launch(args, argv) -> None:
    """Run the benchmark as ``--processes`` local processes joined by
    ``jax.distributed`` (each splits the images over all processes' devices)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    argv = list(sys.argv[1:] if argv is None else argv)
    procs = [
        subprocess.Popen(
            script_command(__spec__.name, *argv, "--coordinator", address)
            + ["--rank", str(rank)],
            env=root_env(),
        )
        for rank in range(args.processes)
    ]
    codes = [proc.wait() for proc in procs]
    if any(codes):
        sys.exit(f"a worker process failed (exit codes {codes})")


def main(argv=None) -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--images", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--warm-start", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True, help="the record (- : stdout)")
    parser.add_argument("--note", default="", help="free text stored in the JSON")
    parser.add_argument("--coordinator", help=argparse.SUPPRESS)  # set for workers
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be >= 1")
    if args.processes > 1 and args.coordinator is None:
        return _launch(args, argv)
    if args.processes > 1:
        from jaxannot.runtime import sharding

        sharding.join(args.coordinator, args.processes, args.rank)
    use_device(args.device)

    from jaxannot.data import make_task
    from jaxannot.data.synthetic import make_synthetic
    from jaxannot.evaluation import evaluate

    start = time.perf_counter()
    corpus = make_synthetic(
        seed=args.seed,
        num_images=args.images,
        num_topics=20,
        blob_vocab=60,
        word_vocab=40,
        tokens_per_image=20,
        words_per_image=5,
    )
    task = make_task(corpus, None, protocol="transductive", seed=args.seed)
    data_seconds = time.perf_counter() - start
    hyper = {
        "topics": args.topics,
        "neighbors": 10,
        "iterations": args.iterations,
        "warm_start": args.warm_start,
    }
    result = evaluate("lap-mix-unigram", task, hyper=hyper, seed=args.seed)
    objective = result.fitted.info["objective"]
    out = {
        "command": "python -m benchmarks.scale.scale "
        f"--images {args.images} --processes {args.processes} --topics {args.topics} "
        f"--iterations {args.iterations} --warm-start {args.warm_start} "
        f"--seed {args.seed}",
        "method": "lap-mix-unigram",
        "protocol": "transductive",
        "images": args.images,
        "hyper": hyper,
        "objective": objective[-1],
        "objective_trace": objective,
        "iterations_run": len(objective),
        "seconds": result.fit_seconds,
        "predict_seconds": result.predict_seconds,
        "data_seconds": data_seconds,
        "peak_rss_mb": peak_rss_mb(),
        "processes": args.processes,
        "metrics": result.metrics,
        "machine": {"platform": platform.platform()},
        "device": device_record(),
        "cpu_seconds": cpu_seconds(),
        "load_average": list(os.getloadavg()),  # 1, 5, 15 min, at the end
    }
    if args.note:
        out["note"] = args.note
    if args.rank != 0:
        return None  # every process holds the same fit; the first one writes it
    write_json(args.json, out)
    if args.json != "-":
        print(
            f"{args.images} images: {out['seconds']:.1f} s fit, "
            f"{out['peak_rss_mb']:.0f} MB peak RSS, objective {out['objective']:.6g}"
        )


if __name__ == "__main__":
    main()
