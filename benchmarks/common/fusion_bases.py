"""The base methods' out-of-fold and test scores of the fusion study, and their
cache (``benchmarks.claims.fusion_study``, ``benchmarks.claims.ensemble_per_word``,
``benchmarks.claims.two_pass_knn_probe``)."""

from __future__ import annotations

import os
import time

import numpy as np

import jax

from jaxannot import metrics
from jaxannot.annotators.base import get_method
from jaxannot.annotators.hyper_values import parse_hyper
from jaxannot.data.protocols import kfold_rows
from jaxannot.methods.ensemble.fusion import as_distribution
from jaxannot.tuning.folds import fold_tasks


def parse_base(spec: str) -> tuple[str, dict]:
    """``name:key=value:...`` -> the method name and its typed overrides."""
    name, *pairs = spec.split(":")
    return name, dict(parse_hyper(get_method(name), pairs))


def measure(scores, truth, k: int) -> dict:
    """Both metric families of ``jaxannot evaluate`` for one score matrix."""
    out = metrics.annotation_report(scores, truth, n=5)
    out.update(metrics.multilabel_report(scores, truth, k))
    return {key: float(v) for key, v in out.items()}


def base_scores(bases, fit_corpus, score_corpus, seed: int):
    """Each base fitted on ``fit_corpus``: its distributions and raw scores on
    ``score_corpus``, and its fit-and-score CPU seconds."""
    parts, raws, seconds = [], [], []
    for name, hyper in bases:
        method = get_method(name)
        start = time.process_time()
        fitted = method.fit(fit_corpus, rng_key=jax.random.key(seed), **hyper)
        scores = np.asarray(method.score_words(fitted, score_corpus))
        seconds.append(time.process_time() - start)
        parts.append(as_distribution(scores, method.score_meaning is not None))
        raws.append(scores)
    return parts, raws, seconds


def fit_bases(bases, corpus, task, folds: int, seed: int):
    """Out-of-fold distributions and raw scores of every base on the training
    images, the same on the test images after a fit on all training images, and the
    CPU seconds of each fit."""
    words = np.asarray(corpus.words)
    held = kfold_rows(corpus.num_images, folds, seed=seed)
    oof = [np.zeros(words.shape) for _ in bases]
    oof_raw = [np.zeros(words.shape) for _ in bases]
    fold_seconds = []
    for rows, fold in zip(held, fold_tasks(corpus, held, seed=seed), strict=True):
        parts, raws, seconds = base_scores(bases, fold.train, fold.test, seed)
        for store, store_raw, p, r in zip(oof, oof_raw, parts, raws, strict=True):
            store[rows] = p
            store_raw[rows] = r
        fold_seconds.append(seconds)
        print(f"fold of {len(rows)} images: {[round(t, 1) for t in seconds]} s")
    parts, raws, full_seconds = base_scores(bases, task.train, task.test, seed)
    return oof, oof_raw, parts, raws, fold_seconds, full_seconds


def save_cache(path, key: str, cached) -> None:
    """Write :func:`fit_bases`'s result to ``path`` (an .npz, atomically)."""
    if path is None:
        return
    oof, oof_raw, parts, raws, fold_seconds, full_seconds = cached
    arrays = {
        "key": np.array(key),
        "fold_seconds": np.array(fold_seconds),
        "full_seconds": np.array(full_seconds),
    }
    for name, group in (
        ("oof", oof),
        ("oof_raw", oof_raw),
        ("parts", parts),
        ("raws", raws),
    ):
        for i, a in enumerate(group):
            arrays[f"{name}{i}"] = a
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def load_cache(path, key: str):
    """:func:`fit_bases`'s result from ``path``, or None when absent or made for
    other bases, folds or seed."""
    if path is None or not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as z:
        if str(z["key"]) != key:
            return None
        n = len(z["full_seconds"])
        groups = [
            [z[f"{name}{i}"] for i in range(n)]
            for name in ("oof", "oof_raw", "parts", "raws")
        ]
        return (*groups, z["fold_seconds"].tolist(), z["full_seconds"].tolist())
