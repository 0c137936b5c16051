r"""The per-word annotation rule of ``ensemble`` (numpy).

Per-word metrics (word F1@5, N+@5) reward annotating each word, rare ones too, on
the images where it is likeliest; per-image ranking metrics (LRAP) reward putting
each image's likeliest words first. The rule keeps the fused ranking and lets a
per-word decision choose the first ``per_word`` words of each image's list (its
annotation):

- each word gets a threshold :math:`t_w` on the fused distribution
  :math:`F = \sum_b \omega_b P_b`, the one of the largest F1 of "annotate :math:`w`
  where :math:`F_{iw} \ge t_w`" on the training images' out-of-fold scores
  (:func:`thresholds`);
- an image's head is its first ``per_word`` words, in the fused ranking's order,
  among those above their thresholds (:math:`F_{iw} \\ge t_w`), placed first; the
  rest follow in the fused ranking's order (:func:`with_head`). A word is so
  annotated only where its own threshold says so.

``per_word = 0`` is the fused ranking itself; ``per_word = 5`` makes the five-word
annotation wholly per-word. The rule trades per-image ranking for the per-word
metrics, so it is tried only when the fit's targets name one of them. Which
``per_word`` is kept is chosen by cross-validation
(:func:`choose_per_word`), on the ratios of thresholds fitted on the other folds
(:func:`cross_fitted_ratios`), so a threshold never scores the images that set it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from jaxannot.data.protocols import kfold_rows

__all__ = [
    "PER_WORD",
    "PER_WORD_TARGETS",
    "choose_per_word",
    "cross_fitted_ratios",
    "thresholds",
    "with_head",
]

#: The head lengths tried: 0 (the fused ranking) to the annotation's five words.
PER_WORD = (0, 1, 2, 3, 4, 5)
#: The per-word metrics the rule is chosen for.
PER_WORD_TARGETS = ("word_f1@5", "n_plus@5")
#: The smallest threshold (its inverse the largest).
FLOOR = 1e-9


def thresholds(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Each word's F1-optimal threshold on ``scores``.

    Parameters
    ----------
    scores : array [images, words]
        Out-of-fold scores (larger: likelier).
    truth : array [images, words]
        0/1 words of the same images.

    Returns
    -------
    ndarray [words]
        For each word the score of its last annotated image at the cut of the
        largest F1 (the first such cut), clipped to [1e-9, 1e9] (float32 and int32 can
        store it); 1e9 for a word no image has (never annotated first).
    """
    s = np.asarray(scores, np.float64)
    y = np.asarray(truth, np.float64)
    order = np.argsort(-s, axis=0, kind="stable")
    ranked = np.take_along_axis(s, order, 0)
    hits = np.cumsum(np.take_along_axis(y, order, 0), 0)
    positives = y.sum(0)
    f1 = 2 * hits / (np.arange(1, len(y) + 1)[:, None] + positives)
    cut = ranked[np.argmax(f1, 0), np.arange(y.shape[1])]
    return np.where(positives > 0, np.clip(cut, FLOOR, 1 / FLOOR), 1 / FLOOR)


def cross_fitted_ratios(
    scores: np.ndarray, truth: np.ndarray, folds: int
) -> np.ndarray:
    """``scores / t`` with each fold's thresholds fitted on the other folds.

    Parameters
    ----------
    scores, truth : arrays [images, words]
        Out-of-fold scores and the images' 0/1 words.
    folds : int
        Folds of the images (:func:`~jaxannot.data.protocols.kfold_rows`, seed 1:
        not the folds that made the scores).

    Returns
    -------
    ndarray [images, words]
    """
    s = np.asarray(scores, np.float64)
    out = np.zeros_like(s)
    for rows in kfold_rows(len(s), folds, seed=1):
        held = np.zeros(len(s), dtype=bool)
        held[rows] = True
        out[rows] = s[rows] / thresholds(s[~held], np.asarray(truth)[~held])
    return out


def with_head(ranking: np.ndarray, ratios: np.ndarray, head: int) -> np.ndarray:
    """``ranking`` with each image's first ``head`` words above their thresholds
    (``ratios >= 1``), in the ranking's order, placed first.

    Parameters
    ----------
    ranking : array [images, words]
        The fused scores (non-negative).
    ratios : array [images, words]
        Scores over their word's threshold.
    head : int
        At most this many words lead each image (0: ``ranking`` itself); an image with
        fewer words above their thresholds has only those lead.

    Returns
    -------
    ndarray [images, words]
        Every score through :math:`x \\mapsto x / (1 + x)` (into [0, 1), every
        order kept), the leading words' plus 2: first in their image, and for one
        word ordered across images by the ranking.
    """
    r = np.asarray(ranking, np.float64)
    if head == 0:
        return r
    out = r / (1.0 + r)
    passed = np.asarray(ratios) >= 1.0
    top = np.argsort(-np.where(passed, out, -1.0), axis=1, kind="stable")[:, :head]
    lead = np.take_along_axis(passed, top, 1)
    np.put_along_axis(out, top, np.take_along_axis(out, top, 1) + 2.0 * lead, 1)
    return out


def choose_per_word(
    ranking: np.ndarray,
    ratios: np.ndarray,
    measure: Callable[[np.ndarray, Sequence[str]], dict],
    targets: Sequence[str],
    base_best: dict,
) -> tuple[list[dict], int]:
    """Score every head length of :data:`PER_WORD` on out-of-fold scores; only 0
    (the fused ranking) when ``targets`` names no per-word metric of
    :data:`PER_WORD_TARGETS` (the rule trades ranking for those alone).

    Parameters
    ----------
    ranking, ratios : arrays [images, words]
        The chosen fusion's out-of-fold scores and cross-fitted ratios.
    measure : callable
        ``measure(scores, targets)`` -> ``{metric: value}``.
    targets : sequence of str
    base_best : dict
        The best base's out-of-fold metric on each target.

    Returns
    -------
    settings : list of dict
        ``{"per_word", "metrics", "score"}`` for each length, the score the worst ratio
        over ``targets`` to ``base_best``.
    chosen : int
        The index of the first setting of the largest score.
    """
    settings = []
    for head in PER_WORD if set(targets) & set(PER_WORD_TARGETS) else (0,):
        got = measure(with_head(ranking, ratios, head), targets)
        score = min(got[m] / base_best[m] for m in targets)
        settings.append({"per_word": head, "metrics": got, "score": score})
    return settings, int(np.argmax([s["score"] for s in settings]))
