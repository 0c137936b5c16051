"""Record the cross-validation the ``ensemble``'s defaults come from, its bases' fits
shared between the settings of the grid, and the per-word trade-off on the training
folds.

The grid is ``targets``: ``map,lrap`` (the fused ranking) against
``map,lrap,word_f1@5,n_plus@5`` (the per-word rule, its ``per_word`` chosen by the
fit's own inner CV). Both choose the fusion on the same ranking targets (``map``,
``lrap``), so on one outer fold their fits differ only in ``per_word``: their bases'
fits, the inner folds' and the final ones (nearly all of an ensemble fit's cost), are
the same computation. The record is made as every other method's
(:func:`defaults_cv.run_record`: :func:`jaxannot.tuning.cross_validate` on the
training images, the same fields for ``defaults_guard.py``) with the ensemble's base
fits and out-of-fold scores memoized by (base specifications, the images'
fingerprint, folds, rng key) (:func:`shared_base_fits`): the second setting of a fold
takes the first's. ``tests/annotators/test_ensemble.py`` checks on a small corpus
that the record so made equals that of separate fits.

Each run adds ``per_word_curve``: every outer fold's fit with the per-word targets
scored on its held-out images at each ``per_word`` of 0 to 5 (word F1@5 and N+@5
against MAP and LRAP on the training folds), with that fit's own inner table and
choice; and ``shared_fits``, the memo's counts.

    OPENBLAS_NUM_THREADS=1 nice -n 19 .venv/bin/python \\
        benchmarks/ensemble_defaults_cv.py --dataset corel5k --data-dir DATA
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import defaults_cv
import numpy as np

import jax

from jaxannot.annotators.base import Fitted, get_method
from jaxannot.methods.ensemble import annotator
from jaxannot.methods.ensemble.fusion import TARGETS, measure
from jaxannot.methods.ensemble.words import PER_WORD
from jaxannot.tuning import scoring
from jaxannot.tuning.folds import corpus_fingerprint

os.environ.setdefault("TQDM_DISABLE", "1")

#: The settings of ``targets`` cross-validated.
TARGET_SETTINGS = ("map,lrap", "map,lrap,word_f1@5,n_plus@5")


def _key(bases, corpus, *rest) -> tuple:
    """The memo key: base specifications, the images' fingerprint, the rest (folds,
    the rng key's data)."""
    data = [
        np.asarray(jax.random.key_data(r)).tobytes() if isinstance(r, jax.Array) else r
        for r in rest
    ]
    return (tuple(bases), corpus_fingerprint(corpus), *data)


@contextlib.contextmanager
def shared_base_fits() -> Iterator[dict]:
    """Inside it, the ensemble's base fits and out-of-fold scores are computed once
    per (bases, images, folds, rng key) and reused after.

    Returns
    -------
    dict
        ``{"computed": n, "reused": m}``, counted as the fits run (base-set fits and
        out-of-fold score sets).
    """
    counts = {"computed": 0, "reused": 0}
    memo: dict = {}
    fit_bases, out_of_fold = annotator._fit_bases, annotator._out_of_fold

    def cached(function):
        def run(bases, corpus, *rest):
            key = (function.__name__, *_key(bases, corpus, *rest))
            counts["reused" if key in memo else "computed"] += 1
            if key not in memo:
                memo[key] = function(bases, corpus, *rest)
            return memo[key]

        return run

    annotator._fit_bases = cached(fit_bases)
    annotator._out_of_fold = cached(out_of_fold)
    try:
        yield counts
    finally:
        annotator._fit_bases, annotator._out_of_fold = fit_bases, out_of_fold


@contextlib.contextmanager
def kept_fits(log: list) -> Iterator[None]:
    """Inside it, every cross-validation fold's task and evaluation are appended to
    ``log`` (the fitted model with them)."""
    evaluate = scoring.evaluate

    def run(method, task, **kwargs):
        result = evaluate(method, task, **kwargs)
        log.append((task, result))
        return result

    scoring.evaluate = run
    try:
        yield
    finally:
        scoring.evaluate = evaluate


def at_per_word(fitted: Fitted, per_word: int) -> Fitted:
    """``fitted`` with its annotation rule's ``per_word`` set to ``per_word``."""
    chosen = {**fitted.info["chosen"], "per_word": per_word}
    return Fitted(
        fitted.method, fitted.params, fitted.hyper, {**fitted.info, "chosen": chosen}
    )


def per_word_curve(log: list) -> list[dict]:
    """For each fold's fit with the per-word targets: its held-out metrics at every
    ``per_word`` of :data:`PER_WORD`, its inner table and its choice.

    Raises
    ------
    AssertionError
        The curve at the fit's own choice differs from what the cross-validation
        measured of it (the curve's metrics are those of ``jaxannot evaluate``).
    """
    method = get_method("ensemble")
    out = []
    for task, result in log:
        fitted = result.fitted
        if fitted.hyper["targets"] != TARGET_SETTINGS[1]:
            continue
        chosen = int(fitted.info["chosen"]["per_word"])
        rows = []
        for head in PER_WORD:
            scores = np.asarray(
                method.score_words(at_per_word(fitted, head), task.test)
            )
            got = measure(scores[task.eval_rows], task.truth_words, TARGETS)
            if head == chosen:
                for m in TARGETS:
                    assert abs(got[m] - result.metrics[m]) < 1e-9, (m, got, result)
            rows.append({"per_word": head, "metrics": got})
        out.append(
            {
                "n_test": len(task.eval_rows),
                "chosen": chosen,
                "held_out": rows,
                "inner": fitted.info["per_word"],
                "fusion": {
                    k: fitted.info["chosen"][k] for k in ("weights", "rule", "beta")
                },
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="corel5k")
    p.add_argument("--folds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", help="key=value held fixed")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", type=Path, default=defaults_cv.RESULTS)
    args = p.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--data-dir" in argv:
        i = argv.index("--data-dir")
        del argv[i : i + 2]
    args.method, args.grid = "ensemble", {"targets": list(TARGET_SETTINGS)}
    args.metric, args.labelled_fraction, args.argv = None, None, argv
    start, log = time.perf_counter(), []
    with shared_base_fits() as counts, kept_fits(log):
        run = defaults_cv.run_record(args)
        curve = per_word_curve(log)
    run["command"] = "python benchmarks/ensemble_defaults_cv.py " + " ".join(
        shlex.quote(a) for a in argv
    )
    run["shared_fits"] = counts
    run["per_word_curve"] = curve
    path = defaults_cv.record_path("ensemble", args.dataset, args.out)
    defaults_cv.save_run(path, "ensemble", args.dataset, run)
    w = run["best"]
    print(
        f"ensemble {args.dataset}: winner {w['params']} {run['metric']} "
        f"{w['mean']:.4f} ± {w['sd']:.4f}; per_word chosen "
        f"{[c['chosen'] for c in curve]}; shared {counts}; "
        f"{time.perf_counter() - start:.0f} s -> {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
