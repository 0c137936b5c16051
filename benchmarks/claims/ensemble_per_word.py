"""The trade-off of ``ensemble``'s per-word annotation rule over its parameter.

``ensemble`` keeps its fused ranking and lets per-word thresholds choose the first
``per_word`` words of each image (:mod:`jaxannot.methods.ensemble.words`); its fit
chooses ``per_word`` by cross-validation. This script measures every ``per_word``
(0 to 5) on the same bases' scores, on the training images (out-of-fold, thresholds
cross-fitted, as the fit sees them) and on the test images (bases fitted on every
training image, thresholds on every training image's out-of-fold scores): the curve
of the per-word metrics (word F1@5, N+@5) against the ranking ones (LRAP, MAP).

The fusion itself (weights, rule, beta) is chosen as ``ensemble`` chooses it
(:func:`jaxannot.methods.ensemble.fusion.choose` on map and lrap over the
out-of-fold scores), or given (``--weights W... --rule R --beta B``: the setting the
registered ``ensemble`` chose, ``info.chosen`` of its row in
``defaults_vs_empirical_DATASET.json``, without the search's cost). The bases'
scores come from ``benchmarks/claims/fusion_study.py``'s cache (made here when
absent: same bases, folds and seed)::

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.claims.ensemble_per_word \\
        --dataset corel5k \\
        --bases tagprop tagprop:balance=none:boosting=false lap-mix-unigram knn \\
        --fuse tagprop:balance=none:boosting=false lap-mix-unigram knn \\
        --weights 0.25 0.5 0.25 --rule reweight --beta 0.25 --cache corel5k_bases.npz \\
        --json benchmarks/results/ensemble_per_word_corel5k.json

``--fuse`` names the bases fused (``ensemble``'s default ones above); the others of
``--bases`` are measured beside them (TagProp at its defaults: the best single
method on the per-word metrics).

Nothing is chosen on the test images: the test rows are measured for every
``per_word`` so the curve can be read beside the one the fit sees.
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from benchmarks.common.fusion_bases import fit_bases, load_cache, parse_base, save_cache
from jaxannot.cli.files import write_json
from jaxannot.data.datasets import load_dataset
from jaxannot.data.protocols import make_task
from jaxannot.methods.ensemble import words
from jaxannot.methods.ensemble.fusion import choose, fused_scores, measure
from jaxannot.tuning.folds import training_images

TARGETS = ["map", "lrap", "word_f1@5", "n_plus@5"]


def curve(ranking, ratios, truth) -> list[dict]:
    """Every ``per_word`` setting's metrics on one set of images."""
    return [
        {"per_word": h, **measure(words.with_head(ranking, ratios, h), truth, TARGETS)}
        for h in words.PER_WORD
    ]


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--dataset", default="corel5k")
    parser.add_argument("--bases", nargs="+", required=True)
    parser.add_argument("--fuse", nargs="+", default=None, help="among --bases")
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--step", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    parser.add_argument("--weights", type=float, nargs="+", default=None)
    parser.add_argument("--rule", default="reweight")
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--cache", default=None, help="fusion_study.py's --cache")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    use_device(args.device)
    fuse = args.fuse or args.bases
    if not set(fuse) <= set(args.bases):
        parser.error(f"--fuse {fuse} must be among --bases {args.bases}")

    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    corpus = training_images(train, test, seed=args.seed)
    task = make_task(train, test, protocol="inductive", seed=args.seed)
    key = f"{args.dataset}|{'|'.join(args.bases)}|{args.folds}|{args.seed}"
    cached = load_cache(args.cache, key)
    if cached is None:
        bases = [parse_base(spec) for spec in args.bases]
        cached = fit_bases(bases, corpus, task, args.folds, args.seed)
        save_cache(args.cache, key, cached)
    oof_all, oof_raw, parts_all, raws, fold_seconds, full_seconds = cached
    used = [args.bases.index(spec) for spec in fuse]
    oof, parts = [oof_all[i] for i in used], [parts_all[i] for i in used]

    truth = (np.asarray(corpus.words) > 0).astype(np.float64)
    test_truth = (np.asarray(task.truth_words) > 0).astype(np.float64)
    prior = truth.mean(0) + 1.0 / truth.shape[0]
    if args.weights is None:
        settings, best, _ = choose(
            oof, [oof_raw[i] for i in used], truth, prior, ["map", "lrap"], args.step
        )
        chosen = settings[best]
    else:
        ranking = fused_scores(oof, args.weights, prior, args.rule, args.beta)
        chosen = {
            "weights": args.weights,
            "rule": args.rule,
            "beta": args.beta,
            "metrics": measure(ranking, truth, ["map", "lrap"]),
            "given": True,
        }
    weights, rule, beta = chosen["weights"], chosen["rule"], chosen["beta"]
    mixture = sum(w * p for w, p in zip(weights, oof, strict=True))
    test_mixture = sum(w * p for w, p in zip(weights, parts, strict=True))
    train_rows = curve(
        fused_scores(oof, weights, prior, rule, beta),
        words.cross_fitted_ratios(mixture, truth, args.folds),
        truth,
    )
    test_rows = curve(
        fused_scores(parts, weights, prior, rule, beta),
        test_mixture / words.thresholds(mixture, truth),
        test_truth,
    )
    for a, b in zip(train_rows, test_rows, strict=True):
        print(f"per_word {a['per_word']}: training folds {a}  test {b}")
    report = {
        "command": "python -m benchmarks.claims.ensemble_per_word --dataset "
        f"{args.dataset} --bases {' '.join(args.bases)} --fuse {' '.join(fuse)} "
        f"--folds {args.folds} --step {args.step} --seed {args.seed}"
        + (
            f" --weights {' '.join(map(str, args.weights))} --rule {args.rule} "
            f"--beta {args.beta}"
            if args.weights
            else ""
        ),
        "dataset": args.dataset,
        "bases": args.bases,
        "fused": fuse,
        "fusion": {k: chosen[k] for k in ("weights", "rule", "beta", "metrics")}
        | {"given": args.weights is not None},
        "training_folds": train_rows,
        "test": test_rows,
        "bases_test": {
            spec: measure(r, test_truth, TARGETS)
            for spec, r in zip(args.bases, raws, strict=True)
        },
        "bases_training_folds": {
            spec: measure(r, truth, TARGETS)
            for spec, r in zip(args.bases, oof_raw, strict=True)
        },
        "cpu_seconds": {"folds": fold_seconds, "full_fit": full_seconds},
    }
    write_json(args.json, report)


if __name__ == "__main__":
    main()
