"""The leading methods at their defaults on a seeded subsample, and how far their
figures move when the arithmetic's order changes.

Figures small enough for ``tests/benchmarks/test_results.py`` to re-run (seconds each):
each registered method of ``--methods`` at its default hyper-parameters, fitted on
``--train`` training images and measured on ``--test`` test images of ``--dataset``,
both drawn without replacement by ``numpy.random.default_rng(--seed)`` and kept in their
dataset order; the inductive protocol, seed ``--seed`` for the fit; the metrics of
:func:`jaxannot.evaluation.evaluate`, the driver of ``jaxannot evaluate``.

A stored figure is the output of float32 optimisers and reductions, so another CPU
can move it: XLA picks its vector width and threading from the processor, and a
different summation order changes the last bits of a sum, which an iterative fit can
carry into its last digits. ``--spread`` measures that on this machine: the same run
is repeated in a child process under each of :data:`VARIANTS` (XLA limited to older
instruction sets, so narrower vectors and no FMA; XLA and BLAS on one thread and one
core), and the record keeps, per method and variant, the absolute difference of each
metric that moved. ``tests/benchmarks/test_results.py`` compares a re-run with the
stored figures at a tolerance written beside the test, which must be at least the spread
measured here.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m tools.subsample_figures --spread \\
        --json benchmarks/results/subsample_figures.json

They are regression figures, not measures of the methods: a few hundred images are
far from the sizes their defaults were cross-validated for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import root_env, script_command, write_json
from jaxannot.data import Task, make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.evaluation import evaluate

#: The methods whose figures are stored: the leading method of each metric family on
#: Corel5k and the structured-output pair of the EMML paper.
METHODS = ("tagprop", "lap-mix-unigram", "emml", "mbrm")

#: How the arithmetic's order is changed for ``--spread``: environment variables of a
#: child process (``XLA_FLAGS`` is appended to the parent's) and the CPUs it may use.
VARIANTS = {
    "xla_isa_sse4_2": {"env": {"XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2"}},
    "xla_isa_avx": {"env": {"XLA_FLAGS": "--xla_cpu_max_isa=AVX"}},
    "one_thread": {
        "env": {
            "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
            "intra_op_parallelism_threads=1",
            "OPENBLAS_NUM_THREADS": "1",
        },
        "cpus": [0],
    },
}


def subsample_task(
    dataset: str, n_train: int, n_test: int, seed: int, data_dir=None
) -> Task:
    """The inductive task of ``n_train`` training and ``n_test`` test images of
    ``dataset``, drawn without replacement by ``default_rng(seed)`` (training rows
    first), each kept in dataset order."""
    train, test = load_dataset(dataset, data_dir=data_dir)
    for name, n, corpus in (("--train", n_train, train), ("--test", n_test, test)):
        if not 1 < n <= corpus.num_images:
            raise SystemExit(f"{name} must be in 2..{corpus.num_images}, got {n}")
    rng = np.random.default_rng(seed)
    train_rows = np.sort(rng.choice(train.num_images, n_train, replace=False))
    test_rows = np.sort(rng.choice(test.num_images, n_test, replace=False))
    return make_task(
        train.subset(train_rows),
        test.subset(test_rows),
        protocol="inductive",
        seed=seed,
    )


def run(method: str, task: Task, seed: int) -> dict:
    """``method`` at its defaults on ``task``: the result as ``jaxannot evaluate
    --json`` writes it, through JSON as the record holds it (tuples become lists,
    numbers stay exact)."""
    result = evaluate(method, task, seed=seed).as_json()
    return json.loads(json.dumps(result))


def differences(stored: dict, other: dict) -> dict[str, float]:
    """The absolute difference of each metric of ``stored`` from ``other``'s (``inf``
    where ``other`` lacks it), for the metrics that differ."""
    out = {}
    for name, value in sorted(stored.items()):
        diff = abs(value - other[name]) if name in other else float("inf")
        if diff:
            out[name] = diff
    return out


def largest_relative_difference(stored: dict, spread: dict[str, float]) -> float:
    """The largest of ``spread``'s differences relative to the stored value
    (``|a - b| / |a|``; a metric stored as 0 counts its absolute difference)."""
    return (
        max(
            (diff / abs(stored[name]) if stored[name] else diff)
            for name, diff in spread.items()
        )
        if spread
        else 0.0
    )


def _runs(args: argparse.Namespace, methods: list[str]) -> dict:
    task = subsample_task(args.dataset, args.train, args.test, args.seed, args.data_dir)
    return {m: run(m, task, args.seed) for m in methods}


def _variant_metrics(args: argparse.Namespace, methods: list[str], name: str) -> dict:
    """The metrics of each method re-run in a child process under variant ``name``."""
    variant = VARIANTS[name]
    env = dict(os.environ)
    for key, value in variant["env"].items():
        env[key] = (
            f"{env.get(key, '')} {value}".strip() if key == "XLA_FLAGS" else value
        )
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "metrics.json")
        command = [
            *script_command(__spec__.name),
            "--child",
            out,
            "--methods",
            ",".join(methods),
            "--dataset",
            args.dataset,
            "--train",
            str(args.train),
            "--test",
            str(args.test),
            "--seed",
            str(args.seed),
        ]
        if args.data_dir:
            command += ["--data-dir", args.data_dir]
        cpus = variant.get("cpus")
        if cpus:  # util-linux's taskset: no fork of this (threaded) process
            command = ["taskset", "-c", ",".join(map(str, cpus)), *command]
        subprocess.run(command, env=root_env(env), check=True)
        with open(out) as fh:
            return json.load(fh)


def main(argv: list[str] | None = None) -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--dataset", default="corel5k")
    parser.add_argument("--train", type=int, default=400)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    parser.add_argument("--spread", action="store_true", help="measure VARIANTS")
    parser.add_argument("--json", help="where to write the record")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    use_device(args.device)
    methods = args.methods.split(",")

    results = _runs(args, methods)
    if args.child:
        with open(args.child, "w") as fh:
            json.dump({m: r["metrics"] for m, r in results.items()}, fh)
        return
    if not args.json:
        parser.error("--json is required")
    spread = {m: {} for m in methods}
    if args.spread:
        for name in VARIANTS:
            metrics = _variant_metrics(args, methods, name)
            for m in methods:
                spread[m][name] = differences(results[m]["metrics"], metrics[m])
    report = {
        "command": "python -m tools.subsample_figures "
        + ("--spread " if args.spread else "")
        + f"--methods {args.methods} --dataset {args.dataset} --train {args.train} "
        f"--test {args.test} --seed {args.seed}",
        "dataset": args.dataset,
        "n_train": args.train,
        "n_test": args.test,
        "seed": args.seed,
        "protocol": "inductive, defaults; rows drawn by numpy default_rng(seed), "
        "training rows first, each in dataset order",
        "variants": VARIANTS if args.spread else {},
        "device": device_record(),
        "results": {
            m: {
                **{k: r[k] for k in ("params", "metrics", "bipartition", "info")},
                "fit_seconds": r["fit_seconds"],
                "spread": spread[m],
            }
            for m, r in results.items()
        },
    }
    write_json(args.json, report, sort_keys=True)
    for m, r in results.items():
        worst = max(
            (largest_relative_difference(r["metrics"], d) for d in spread[m].values()),
            default=float("nan"),
        )
        print(
            f"{m} on {args.train}/{args.test} {args.dataset} images: MAP "
            f"{r['metrics']['map']:.4f}  word F1@5 {r['metrics']['word_f1@5']:.4f}  "
            f"largest relative spread {worst:.2e}"
        )


if __name__ == "__main__":
    main()
