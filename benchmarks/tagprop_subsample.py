"""``tagprop`` at its defaults on a seeded subsample of a dataset's own split.

A figure small enough to be re-run by ``tests/test_results.py`` (seconds): the
registered ``tagprop`` method, its default hyper-parameters (``neighbors`` is clipped
to the subsample's images less one by the method itself), fitted on ``--train``
training images and measured on ``--test`` test images, both drawn without replacement
by ``numpy.random.default_rng(--seed)`` and kept in their dataset order; the inductive
protocol, seed ``--seed`` for the fit; the metrics of
:func:`jaxannot.evaluation.evaluate`, the driver of ``jaxannot evaluate``.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/tagprop_subsample.py \\
        --dataset corel5k --train 400 --test 200 \\
        --json benchmarks/results/tagprop_subsample.json

It is a regression figure, not a measure of TagProp: a few hundred images are far
from the sizes its defaults were cross-validated for.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
from _device import add_device_argument, device_record, use_device

from jaxannot.data import Task, make_task
from jaxannot.data.datasets import load_dataset
from jaxannot.evaluation import evaluate

METHOD = "tagprop"


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


def run(task: Task, seed: int) -> dict:
    """``tagprop`` at its defaults on ``task``: the result as ``jaxannot evaluate
    --json`` writes it."""
    result = evaluate(METHOD, task, seed=seed).as_json()
    # through JSON, as the record holds it (tuples become lists, numbers stay exact)
    return json.loads(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="corel5k")
    parser.add_argument("--train", type=int, default=400)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    parser.add_argument("--json", required=True)
    add_device_argument(parser)
    args = parser.parse_args()
    use_device(args.device)

    task = subsample_task(args.dataset, args.train, args.test, args.seed, args.data_dir)
    result = run(task, args.seed)
    report = {
        "command": "python benchmarks/tagprop_subsample.py --dataset "
        f"{args.dataset} --train {args.train} --test {args.test} --seed {args.seed}",
        "method": METHOD,
        "dataset": args.dataset,
        "n_train": args.train,
        "n_test": args.test,
        "seed": args.seed,
        "protocol": "inductive, defaults; rows drawn by numpy default_rng(seed), "
        "training rows first, each in dataset order",
        "device": device_record(),
        **{k: result[k] for k in ("params", "metrics", "bipartition", "info")},
        "fit_seconds": result["fit_seconds"],
    }
    tmp = args.json + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(report, fh, indent=1, sort_keys=True)
    os.replace(tmp, args.json)
    m = result["metrics"]
    print(
        f"tagprop on {args.train}/{args.test} {args.dataset} images: "
        f"word F1@5 {m['word_f1@5']:.4f}  N+@5 {m['n_plus@5']:.0f}  MAP {m['map']:.4f}"
    )


if __name__ == "__main__":
    main()
