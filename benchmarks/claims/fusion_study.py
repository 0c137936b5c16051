"""Can a fusion of the registered methods lead both metric families at once?

Issue 33 asks for one method that beats every other on the per-word annotation
metrics (word F1@5, N+@5, MAP) *and* the per-image ones (label-ranking AP,
example-F1). On Corel5k the two families have different leaders (TagProp; the
Laplacian mixture of unigrams). This study measures the obvious candidate, a score
fusion learned on the training images only:

1. Out-of-fold scores: the training images are cut into ``--folds`` folds
   (:func:`jaxannot.data.protocols.kfold_rows`); every base method, at its defaults
   (plus the overrides written ``name:key=value``), is fitted on the other folds and
   scores the held-out one. Each base's scores become a distribution over words per
   image, :math:`P_b(w \\mid I)`: probabilities clipped at 0 and divided by their row
   sum; scores without a probability meaning (margins) through a row softmax of the
   row-standardized scores.
2. The fusion :math:`F = \\sum_b \\omega_b P_b` (weights on a simplex grid of step
   ``--step``) and an annotation rule of two kinds:

   - ``reweight``: :math:`S = F / \\hat p(w)^\\beta`, :math:`\\hat p(w)` the word's
     training frequency plus :math:`1/N` (rarer words climb each image's list; the
     likelihood ratio at :math:`\\beta = 1`);
   - ``head``: the top five words of :math:`F / \\hat p(w)^\\beta` are the head of the
     list (the annotation), the rest follow in the order of :math:`F`.

   Every setting is scored on the out-of-fold scores; the one chosen maximizes
   :math:`\\min_m \\text{metric}_m(S) / \\max_b \\text{metric}_m(P_b)` over the
   target metrics ``--targets`` (the worst ratio to the best base: above 1 means it
   leads every base on every target).
3. Every base is fitted on all training images and scores the test images (the
   figures of ``jaxannot evaluate BASE --dataset D``); the chosen fusion is applied
   and measured beside them.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.claims.fusion_study --dataset corel5k \\
        --bases tagprop tagprop:balance=none:boosting=false lap-mix-unigram knn \\
        mix-unigram --json benchmarks/results/fusion_study_corel5k.json

Nothing is chosen on the test images; the test figures of every base and of the
fusion come from one run.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from benchmarks.common.fusion_bases import (
    fit_bases,
    load_cache,
    measure,
    parse_base,
    save_cache,
)
from benchmarks.common.records import write_json
from jaxannot import metrics
from jaxannot.data.datasets import load_dataset
from jaxannot.data.protocols import make_task
from jaxannot.tuning.folds import training_images

RULES = ("reweight", "head")
HEAD = 5


def fused_scores(parts, weights, prior, rule: str, beta: float) -> np.ndarray:
    """The score matrix of one fusion setting (module docstring, step 2).

    The study's own: its ``head`` rule divides by the whole matrix's largest head
    score, as when its records were made; the registered ``ensemble``
    (:func:`jaxannot.methods.ensemble.fusion.fused_scores`) divides each image by its
    own, so that an image's scores do not depend on the others scored with it."""
    f = sum(w * p for w, p in zip(weights, parts, strict=True) if w > 0)
    boosted = f / prior**beta
    if rule == "reweight":
        return boosted
    head = np.argsort(-boosted, axis=1, kind="stable")[:, :HEAD]
    out = f.copy()
    top = np.take_along_axis(boosted, head, 1)
    np.put_along_axis(out, head, 2.0 + top / top.max(), 1)
    return out


def simplex(n: int, step: float):
    """Weights on the simplex grid of ``step`` (each a multiple of it, sum 1)."""
    units = round(1 / step)
    for cut in itertools.product(range(units + 1), repeat=n - 1):
        if sum(cut) <= units:
            yield tuple(c / units for c in cut) + ((units - sum(cut)) / units,)


def search(parts, raws, truth, prior, k, targets, step, betas):
    """Every fusion setting's out-of-fold metrics and the chosen one (the best base
    on each target is measured on the bases' own scores)."""
    base_best = {m: max(measure(r, truth, k)[m] for r in raws) for m in targets}
    rows = []
    for weights in simplex(len(parts), step):
        for rule in RULES:
            for beta in betas:
                if rule == "head" and beta == 0:
                    continue  # the head of F is F's own top five
                got = measure(fused_scores(parts, weights, prior, rule, beta), truth, k)
                worst = min(got[m] / base_best[m] for m in targets)
                rows.append(
                    {
                        "weights": weights,
                        "rule": rule,
                        "beta": beta,
                        "metrics": {m: got[m] for m in targets},
                        "worst_ratio": worst,
                    }
                )
    best = max(rows, key=lambda r: r["worst_ratio"])
    return rows, best, base_best


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--dataset", default="corel5k")
    parser.add_argument("--bases", nargs="+", required=True)
    parser.add_argument(
        "--targets",
        nargs="+",
        default=["word_f1@5", "n_plus@5", "map", "lrap", "example_f1"],
    )
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--step", type=float, default=0.25)
    parser.add_argument(
        "--betas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0]
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("JAXANNOT_DATA"))
    parser.add_argument(
        "--also",
        nargs="*",
        default=[],
        help="a subset of --targets: the setting best on it alone is measured too",
    )
    parser.add_argument(
        "--cache",
        default=None,
        help="an .npz of the bases' out-of-fold and test scores: read when it "
        "exists (same bases, folds and seed), written otherwise",
    )
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    use_device(args.device)
    if not set(args.also) <= set(args.targets):
        parser.error(f"--also {args.also} must be among --targets {args.targets}")

    bases = [parse_base(spec) for spec in args.bases]
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    corpus = training_images(train, test, seed=args.seed)
    task = make_task(train, test, protocol="inductive", seed=args.seed)
    words = np.asarray(corpus.words, np.float64)
    prior = (words > 0).mean(0) + 1.0 / words.shape[0]
    k = metrics.bipartition_k(words)

    key = f"{args.dataset}|{'|'.join(args.bases)}|{args.folds}|{args.seed}"
    cached = load_cache(args.cache, key)
    if cached is None:
        cached = fit_bases(bases, corpus, task, args.folds, args.seed)
        save_cache(args.cache, key, cached)
    oof, oof_raw, parts, raws, fold_seconds, full_seconds = cached
    rows, best, base_best = search(
        oof, oof_raw, words, prior, k, args.targets, args.step, args.betas
    )
    print(f"chosen on the training folds: {best}", flush=True)

    truth = np.asarray(task.truth_words, np.float64)
    test_bases = {
        spec: measure(p, truth, k) for spec, p in zip(args.bases, raws, strict=True)
    }
    fused = fused_scores(parts, best["weights"], prior, best["rule"], best["beta"])
    test_fusion = measure(fused, truth, k)
    tested = [*test_bases.items(), ("fusion", test_fusion)]
    also = None
    if args.also:
        ratio = {m: base_best[m] for m in args.also}
        chosen = max(rows, key=lambda r: min(r["metrics"][m] / ratio[m] for m in ratio))
        got = measure(
            fused_scores(
                parts, chosen["weights"], prior, chosen["rule"], chosen["beta"]
            ),
            truth,
            k,
        )
        also = {"targets": args.also, "chosen": chosen, "test": got}
        tested.append((f"fusion on {','.join(args.also)}", got))
    for spec, got in tested:
        print(f"{spec:40s} " + "  ".join(f"{m} {got[m]:.4f}" for m in args.targets))

    report = {
        "command": "python -m benchmarks.claims.fusion_study --dataset "
        f"{args.dataset} --bases {' '.join(args.bases)} --folds {args.folds} "
        f"--step {args.step} --seed {args.seed} --targets {' '.join(args.targets)}"
        + (f" --also {' '.join(args.also)}" if args.also else ""),
        "dataset": args.dataset,
        "bases": args.bases,
        "targets": args.targets,
        "bipartition_k": k,
        "folds": args.folds,
        "selection": "max over settings of min over targets of the out-of-fold "
        "metric over the best base's out-of-fold metric",
        "cv": {"base_best": base_best, "chosen": best, "settings": rows},
        "test": {"bases": test_bases, "fusion": test_fusion},
        "also": also,
        "cpu_seconds": {"folds": fold_seconds, "full_fit": full_seconds},
    }
    write_json(args.json, report)


if __name__ == "__main__":
    main()
