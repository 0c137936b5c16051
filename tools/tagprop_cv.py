"""Cross-validation of the ``tagprop`` defaults on the Corel5k *training* split only.

The 4500 training images are cut into 3 folds (seed 0); every configuration is fitted
on two folds with the registered ``tagprop`` method and scored on the third, and the
three validation figures are averaged. The test split is never loaded for choosing.
Selection rule: the best mean word F1@5 (the acceptance metric most sensitive to the
readout); N+@5 and MAP are reported beside it.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m tools.tagprop_cv \\
        --data-dir DATA --json benchmarks/results/tagprop_cv.json

About 15 minutes on 2 shared CPU cores.
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

import jax

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import write_json
from jaxannot import metrics
from jaxannot.annotators import get_method
from jaxannot.data.datasets import load_dataset

os.environ.setdefault("TQDM_DISABLE", "1")  # no MAP progress bars in the log

#: The previous defaults first, then the grid (every entry overrides the defaults).
OLD_DEFAULTS = {
    "neighbors": 200,
    "balance": "global",
    "steps": 300,
    "learning_rate": 0.05,
}
GRID = [
    {"label": "old defaults", **OLD_DEFAULTS},
    {"neighbors": 200, "balance": "none", "steps": 500, "learning_rate": 0.1},
    *(
        {"neighbors": k, "balance": b, "steps": 500, "learning_rate": 0.1}
        for k in (200, 400)
        for b in ("global", "word")
    ),
    {"neighbors": 800, "balance": "word", "steps": 500, "learning_rate": 0.1},
]


def cross_validate(train, config: dict, folds: list[np.ndarray]) -> dict:
    method = get_method("tagprop")
    hyper = {k: v for k, v in config.items() if k != "label"}
    per_fold = []
    for f, val in enumerate(folds):
        fit_rows = np.setdiff1d(np.arange(train.num_images), val)
        start = time.perf_counter()
        fitted = method.fit(train.subset(fit_rows), rng_key=jax.random.key(0), **hyper)
        seconds = time.perf_counter() - start
        scores = method.score_words(fitted, train.subset(val))
        truth = np.asarray(train.words)[val] > 0
        report = metrics.annotation_report(scores, truth)
        per_fold.append(
            {
                "fold": f,
                "word_f1@5": report["word_f1@5"],
                "n_plus@5": report["n_plus@5"],
                "map": report["map"],
                "fit_seconds": seconds,
                "final_loss": fitted.info["final_loss"],
            }
        )
    mean = {
        k: float(np.mean([r[k] for r in per_fold]))
        for k in ("word_f1@5", "n_plus@5", "map", "fit_seconds")
    }
    return {"config": config, "mean": mean, "folds": per_fold}


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--folds", type=int, default=3)
    args = parser.parse_args()
    use_device(args.device)

    train, _ = load_dataset("corel5k", data_dir=args.data_dir)
    perm = np.random.default_rng(0).permutation(train.num_images)
    folds = np.array_split(perm, args.folds)
    results = []
    for config in GRID:
        row = cross_validate(train, config, folds)
        results.append(row)
        m = row["mean"]
        print(
            f"{json.dumps({k: v for k, v in config.items() if k != 'label'})}: "
            f"word F1@5 {m['word_f1@5']:.4f}  N+@5 {m['n_plus@5']:.1f}  "
            f"MAP {m['map']:.4f}  fit {m['fit_seconds']:.1f} s",
            flush=True,
        )
    best = max(results, key=lambda r: r["mean"]["word_f1@5"])
    out = {
        "protocol": f"{args.folds}-fold CV on the Corel5k training split (seed 0)",
        "selection": "best mean word F1@5",
        "chosen": best["config"],
        "results": results,
        "machine": platform.platform(),
        "jax": jax.__version__,
        "device": device_record(),
    }
    write_json(args.json, out, indent=2)
    print("chosen:", best["config"])


if __name__ == "__main__":
    main()
