"""A probe of two-pass kNN's first pass (2PKNN, Verma & Jawahar 2012) on Corel5k.

For each word w and image I, the score is the sum of ``exp(-d(I, J) / sigma)`` over
the ``K1`` training images J labelled w nearest to I (cosine distance of the blob
counts): every word gets the same number of neighbours, so rare words compete with
frequent ones, as TagProp's word-specific sigmoids make them. Measured on a held-out
third of Corel5k's *training* images (``default_rng(seed)``, the rest fit), beside
TagProp at its defaults on the same rows, for the grid ``K1 x sigma`` — a probe of
whether the idea is worth a registered method, not a tuned result.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.claims.two_pass_knn_probe \\
        --json benchmarks/results/two_pass_knn_probe.json
"""

from __future__ import annotations

import json
import os

import numpy as np

import jax

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from benchmarks.common.fusion_bases import measure
from benchmarks.common.records import write_json
from jaxannot.annotators.base import get_method
from jaxannot.data.datasets import load_dataset

TARGETS = ("word_f1@5", "n_plus@5", "map", "lrap", "example_f1")


def first_pass_scores(d: np.ndarray, y: np.ndarray, k1: int, sigma: float):
    """``[queries, words]``: per word, the heat-kernel sum over the ``k1`` nearest
    images carrying it (``d`` the query-to-training distances, ``y`` 0/1 words)."""
    out = np.zeros((d.shape[0], y.shape[1]))
    for w in range(y.shape[1]):
        positives = np.flatnonzero(y[:, w])
        if positives.size == 0:
            continue
        k = min(k1, positives.size)
        nearest = np.partition(d[:, positives], k - 1, axis=1)[:, :k]
        out[:, w] = np.exp(-nearest / sigma).sum(1)
    return out


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--k1", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--sigma", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    use_device(args.device)

    train, _ = load_dataset("corel5k", data_dir=args.data_dir)
    order = np.random.default_rng(args.seed).permutation(train.num_images)
    held = np.sort(order[: train.num_images // 3])
    fit = np.sort(order[train.num_images // 3 :])
    x = np.asarray(train.view(), np.float64)
    x /= np.linalg.norm(x, axis=1, keepdims=True) + 1e-12
    y = (np.asarray(train.words) > 0).astype(np.float64)
    k = int(round(y[fit].sum(1).mean()))
    distances = 1.0 - x[held] @ x[fit].T

    tagprop = get_method("tagprop")
    fitted = tagprop.fit(
        train.subset(fit), rng_key=jax.random.key(args.seed), **tagprop.hyper
    )
    scores = np.asarray(tagprop.score_words(fitted, train.subset(held)))
    rows = [{"method": "tagprop", **_pick(measure(scores, y[held], k))}]
    for k1 in args.k1:
        for sigma in args.sigma:
            got = measure(first_pass_scores(distances, y[fit], k1, sigma), y[held], k)
            rows.append(
                {"method": "2pknn-first-pass", "k1": k1, "sigma": sigma, **_pick(got)}
            )
    for row in rows:
        print(json.dumps(row))
    report = {
        "command": "python -m benchmarks.claims.two_pass_knn_probe",
        "rows_fit": int(fit.size),
        "rows_held_out": int(held.size),
        "bipartition_k": k,
        "seed": args.seed,
        "results": rows,
    }
    write_json(args.json, report)


def _pick(got: dict) -> dict:
    return {m: got[m] for m in TARGETS}


if __name__ == "__main__":
    main()
