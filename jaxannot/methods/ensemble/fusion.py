r"""The fusion rule of ``ensemble`` and its choice by cross-validation (numpy).

Each base's scores become a distribution over words per image,
:math:`P_b(w \mid I)` (:func:`as_distribution`); the fusion is
:math:`F = \sum_b \omega_b P_b` with weights on a simplex grid, and an annotation
rule of two kinds (:func:`fused_scores`), :math:`\hat p(w)` a word's training
frequency plus :math:`1/N`:

- ``reweight``: :math:`S = F / \hat p(w)^\beta` (rarer words climb each image's list;
  the likelihood ratio at :math:`\beta = 1`);
- ``head``: the top :data:`HEAD` words of :math:`F / \hat p(w)^\beta` head the list
  (the annotation), the rest follow in the order of :math:`F`.

A setting is scored on out-of-fold scores by the worst ratio, over the target
metrics, of its metric to the best base's (:func:`choose`): above 1 it leads every
base on every target. The study behind it is ``benchmarks/claims/fusion_study.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from jaxannot import metrics

__all__ = [
    "BETAS",
    "HEAD",
    "RULES",
    "TARGETS",
    "as_distribution",
    "candidates",
    "choose",
    "fused_scores",
    "measure",
    "setting_metrics",
]

#: The annotation rules (module docstring).
RULES = ("reweight", "head")
#: The frequency exponents β tried with each rule (``head`` skips 0: its head
#: would be F's own top words).
BETAS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: The length of the ``head`` rule's annotation.
HEAD = 5
#: The metrics a setting may be chosen on.
TARGETS = ("map", "lrap", "word_f1@5", "n_plus@5")


def as_distribution(scores: np.ndarray, probabilities: bool) -> np.ndarray:
    """Each row of ``scores`` as a distribution over words.

    Parameters
    ----------
    scores : array [images, words]
        A base's scores.
    probabilities : bool
        Whether they are probabilities (clipped at 0 and divided by their row sum);
        otherwise the row softmax of the row-standardized scores.

    Returns
    -------
    ndarray [images, words]
        Rows summing to 1 (uniform where a row of probabilities is all zero).
    """
    s = np.asarray(scores, np.float64)
    if probabilities:
        p = np.clip(s, 0.0, None)
    else:
        z = (s - s.mean(1, keepdims=True)) / (s.std(1, keepdims=True) + 1e-12)
        p = np.exp(z - z.max(1, keepdims=True))
    total = p.sum(1, keepdims=True)
    uniform = np.full_like(p, 1.0 / p.shape[1])
    return np.where(total > 0, p / np.where(total > 0, total, 1.0), uniform)


def fused_scores(
    parts: Sequence[np.ndarray],
    weights: Sequence[float],
    prior: np.ndarray,
    rule: str,
    beta: float,
) -> np.ndarray:
    """The scores of one fusion setting (module docstring).

    Parameters
    ----------
    parts : sequence of arrays [images, words]
        Each base's distributions (:func:`as_distribution`).
    weights : sequence of float
        One weight per base (summing to 1).
    prior : array [words]
        :math:`\\hat p(w)`, positive.
    rule : {"reweight", "head"}
    beta : float
        The frequency exponent.

    Returns
    -------
    ndarray [images, words]
        ``reweight``: :math:`F / \\hat p^\\beta`. ``head``: F, its head words raised
        to 2 plus their reweighted score over the row's largest (in [2, 3]); each
        image's scores depend on it alone.
    """
    f = sum(w * p for w, p in zip(weights, parts, strict=True) if w > 0)
    boosted = f / np.asarray(prior, np.float64) ** beta
    if rule == "reweight":
        return boosted
    head = np.argsort(-boosted, axis=1, kind="stable")[:, :HEAD]
    top = np.take_along_axis(boosted, head, 1)
    out = np.array(f, np.float64)
    np.put_along_axis(out, head, 2.0 + top / np.maximum(top[:, :1], 1e-300), 1)
    return out


def candidates(num_bases: int, step: float) -> list[dict]:
    """Every setting the fit chooses among: weights on the simplex grid of ``step``
    (each a multiple of it, summing to 1) times the rules and exponents.

    Returns
    -------
    list of dict
        ``{"weights": [...], "rule": ..., "beta": ...}``, in a fixed order.
    """
    units = round(1 / step)
    grid = [
        [c / units for c in cut] + [(units - sum(cut)) / units]
        for cut in itertools.product(range(units + 1), repeat=num_bases - 1)
        if sum(cut) <= units
    ]
    return [
        {"weights": weights, "rule": rule, "beta": beta}
        for weights in grid
        for rule in RULES
        for beta in BETAS
        if not (rule == "head" and beta == 0)
    ]


def measure(scores: np.ndarray, truth: np.ndarray, targets: Sequence[str]) -> dict:
    """The target metrics of ``scores`` against the 0/1 ``truth`` (those of
    ``jaxannot evaluate``; ``word_f1@5`` and ``n_plus@5`` at five words)."""
    out = {}
    if "map" in targets:
        out["map"] = metrics.mean_average_precision(scores, truth)
    if "lrap" in targets:
        out["lrap"] = metrics.label_ranking_average_precision(scores, truth)
    if {"word_f1@5", "n_plus@5"} & set(targets):
        words = metrics.word_prf_at_n(scores, truth, 5)
        out["word_f1@5"], out["n_plus@5"] = words["f1"], words["n_plus"]
    return {m: float(out[m]) for m in targets}


def setting_metrics(
    parts: Sequence[np.ndarray],
    setting: dict,
    prior: np.ndarray,
    truth: np.ndarray,
    targets: Sequence[str],
) -> dict:
    """The target metrics of one setting of :func:`candidates` (its ``weights``,
    ``rule`` and ``beta``): :func:`measure` of its :func:`fused_scores`."""
    scores = fused_scores(
        parts, setting["weights"], prior, setting["rule"], setting["beta"]
    )
    return measure(scores, truth, targets)


def choose(
    parts: Sequence[np.ndarray],
    raws: Sequence[np.ndarray],
    truth: np.ndarray,
    prior: np.ndarray,
    targets: Sequence[str],
    step: float,
) -> tuple[list[dict], int, dict]:
    """Score every setting of :func:`candidates` on out-of-fold scores.

    Parameters
    ----------
    parts, raws : sequences of arrays [images, words]
        Each base's out-of-fold distributions and raw scores.
    truth : array [images, words]
        The held-out images' words (0/1).
    prior : array [words]
    targets : sequence of str
        Among :data:`TARGETS`.
    step : float
        The weight grid's step.

    Returns
    -------
    settings : list of dict
        Every candidate with its ``metrics`` and ``score``: the worst ratio over
        ``targets`` of its metric to the best base's (the latter at least 1e-12).
    chosen : int
        The index of the first setting of the largest score.
    base_best : dict
        The best base's metric on each target.
    """
    per_base = [measure(r, truth, targets) for r in raws]
    base_best = {m: max(max(b[m] for b in per_base), 1e-12) for m in targets}
    settings = []
    for setting in candidates(len(parts), step):
        got = setting_metrics(parts, setting, prior, truth, targets)
        score = min(got[m] / base_best[m] for m in targets)
        settings.append({**setting, "metrics": got, "score": score})
    chosen = int(np.argmax([s["score"] for s in settings]))
    return settings, chosen, base_best
