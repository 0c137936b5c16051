"""Record the cross-validation the ``ensemble``'s defaults come from, each base's
fits shared between the settings of the grid, and the per-word trade-off on the
training folds.

Two grids (``--grid``), each a run of the record (the last run over a key decides its
default):

- ``targets``: ``map,lrap`` (the fused ranking) against
  ``map,lrap,word_f1@5,n_plus@5`` (the per-word rule, its ``per_word`` chosen by the
  fit's own inner CV). Both choose the fusion on the same ranking targets (``map``,
  ``lrap``), so on one outer fold their fits differ only in ``per_word``.
- ``bases-step``: the default bases and each pair of them, times ``step`` of 0.5,
  0.25 and 0.125. A base's fits do not depend on the other bases, and a pair's or a
  coarser step's fusion settings are among those of the three at the finest step.

Nearly all of an ensemble fit's cost is its bases' fits, the inner folds' and the
final ones. The record is made as every other method's
(:func:`defaults_record.run_record`: :func:`jaxannot.tuning.cross_validate` on the
training images, the same fields for ``defaults_guard.py``) with each base's fits
and out-of-fold scores memoized by (base specification, the images' fingerprint,
folds, rng key), and each fusion setting's metrics by the distributions and weights
it sums (:func:`shared_base_fits`): a fold's other settings take them.
``tests/methods/ensemble/test_ensemble.py`` checks on a small corpus that records so
made equal those of separate fits.

A ``targets`` run adds ``per_word_curve``: every outer fold's fit with the per-word
targets scored on its held-out images at each ``per_word`` of 0 to 5 (word F1@5 and
N+@5 against MAP and LRAP on the training folds), with that fit's own inner table
and choice. Each run adds ``shared_fits``, the memo's counts.

    OPENBLAS_NUM_THREADS=1 nice -n 19 .venv/bin/python -m \\
        tools.ensemble_defaults_cv --dataset corel5k --grid bases-step \\
        --data-dir DATA
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import jax

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from jaxannot.annotators.base import Fitted, get_method
from jaxannot.methods.ensemble import annotator, fusion
from jaxannot.methods.ensemble.fusion import TARGETS, measure
from jaxannot.methods.ensemble.words import PER_WORD
from jaxannot.tuning import scoring
from jaxannot.tuning.folds import corpus_fingerprint
from tools import defaults_record

os.environ.setdefault("TQDM_DISABLE", "1")

#: The settings of ``targets`` cross-validated.
TARGET_SETTINGS = ("map,lrap", "map,lrap,word_f1@5,n_plus@5")
#: The settings of ``step`` cross-validated (each divides 1; every finer grid holds
#: the coarser ones' weightings).
STEPS = (0.5, 0.25, 0.125)


def grids(default_bases: str) -> dict[str, dict]:
    """The grids this script cross-validates, by name: ``targets``
    (:data:`TARGET_SETTINGS`) and ``bases-step``, the default bases and each pair of
    them (in their order) times :data:`STEPS`."""
    specs = [s.strip() for s in default_bases.split(",") if s.strip()]
    pairs = [",".join(p) for p in itertools.combinations(specs, 2)]
    return {
        "targets": {"targets": list(TARGET_SETTINGS)},
        "bases-step": {"bases": [default_bases, *pairs], "step": list(STEPS)},
    }


def _key_data(rest) -> list:
    """``rest`` with each rng key as its key data's bytes."""
    return [
        np.asarray(jax.random.key_data(r)).tobytes() if isinstance(r, jax.Array) else r
        for r in rest
    ]


@contextlib.contextmanager
def shared_base_fits() -> Iterator[dict]:
    """Inside it, each base's fits and out-of-fold scores are computed once per
    (base specification, images, folds, rng key) and reused after, whatever the
    other bases of the ensemble; and each fusion setting's metrics once per (its
    bases' out-of-fold distributions, their positive weights, rule, β, targets).

    The latter is exact: :func:`~jaxannot.methods.ensemble.fusion.fused_scores`
    sums the positive weights' distributions alone, in the bases' order, so a
    setting of a pair of bases is the same computation as that of the three with
    the third weighted 0, and a step's weightings are among those of every finer
    step dividing it. The distributions are the memo's own arrays (kept alive by it),
    so their ``id`` names them; one set of them comes from one corpus, whose truth
    and prior the key's prior digest confirms.

    Returns
    -------
    dict
        ``{"computed": n, "reused": m}``, counted as the fits run (base fits and
        base out-of-fold score sets), and ``settings_computed`` /
        ``settings_reused`` for the fusion settings' metrics.
    """
    counts = {"computed": 0, "reused": 0, "settings_computed": 0, "settings_reused": 0}
    memo: dict = {}
    fit_base, out_of_fold = annotator._fit_base, annotator._base_out_of_fold
    setting_metrics = fusion.setting_metrics

    def cached(function):
        def run(spec, base, corpus, *rest):
            key = (function.__name__, spec, corpus_fingerprint(corpus))
            key += tuple(_key_data(rest))
            counts["reused" if key in memo else "computed"] += 1
            if key not in memo:
                memo[key] = function(spec, base, corpus, *rest)
            return memo[key]

        return run

    def metrics(parts, setting, prior, truth, targets):
        used = [
            (id(p), w) for p, w in zip(parts, setting["weights"], strict=True) if w > 0
        ]
        key = (
            "setting",
            tuple(used),
            setting["rule"],
            setting["beta"],
            tuple(targets),
            hashlib.sha256(np.asarray(prior).tobytes()).hexdigest(),
        )
        counts["settings_reused" if key in memo else "settings_computed"] += 1
        if key not in memo:
            memo[key] = setting_metrics(parts, setting, prior, truth, targets)
        return dict(memo[key])

    annotator._fit_base = cached(fit_base)
    annotator._base_out_of_fold = cached(out_of_fold)
    fusion.setting_metrics = metrics
    try:
        yield counts
    finally:
        annotator._fit_base, annotator._base_out_of_fold = fit_base, out_of_fold
        fusion.setting_metrics = setting_metrics


@contextlib.contextmanager
def kept_fits(log: list) -> Iterator[None]:
    """Inside it, every cross-validation fold's task and evaluation are appended to
    ``log`` (the fitted model with them)."""
    evaluate = scoring.evaluate

    def run(method, task, **kwargs):
        result = evaluate(method, task, **kwargs)
        log.append((task, result))
        hyper = {k: result.fitted.hyper[k] for k in ("bases", "step", "targets")}
        print(f"fold {len(log)}: {hyper} map {result.metrics['map']:.4f}", flush=True)
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
    p = script_parser(__doc__)
    p.add_argument("--dataset", default="corel5k")
    p.add_argument("--grid", choices=("targets", "bases-step"), default="targets")
    p.add_argument("--folds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", help="key=value held fixed")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", type=Path, default=defaults_record.RESULTS)
    args = p.parse_args(argv)
    use_device(args.device)
    argv = list(sys.argv[1:] if argv is None else argv)
    for local in ("--data-dir", "--out"):  # this machine's paths
        if local in argv:
            i = argv.index(local)
            del argv[i : i + 2]
    method = get_method("ensemble")
    args.method, args.grid = "ensemble", grids(method.hyper["bases"])[args.grid]
    args.metric, args.labelled_fraction, args.argv = None, None, argv
    start, log = time.perf_counter(), []
    with shared_base_fits() as counts, kept_fits(log):
        run = defaults_record.run_record(args)
        curve = per_word_curve(log)
    run["command"] = "python -m tools.ensemble_defaults_cv " + " ".join(
        shlex.quote(a) for a in argv
    )
    run["shared_fits"] = counts
    if curve:
        run["per_word_curve"] = curve
    path = defaults_record.record_path("ensemble", args.dataset, args.out)
    defaults_record.save_run(path, "ensemble", args.dataset, run)
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
