r"""Per-word annotation and ranking metrics: how well each word's images are found.

``scores`` is ``[images, words]`` (higher = more relevant), ``truth`` the matching 0/1
(or count; any value > 0 counts as present) ground-truth matrix.

- :func:`word_prf_at_n` annotates each image with its ``n`` top words (a stable sort
  of ``-scores``: among equal scores the lower word index first) and scores each word.
- The rankings of the *images for a word* (AP / MAP, iAP / MiAP) never depend on the
  order of tied items. AP is the exact **expectation over all orders of the tied
  items** (McSherry & Najork, 2008; closed form in :func:`average_precision`). iAP
  reads precision and recall only after a whole group of tied items (the points every
  tie order shares, those of ``sklearn.metrics.precision_recall_curve``), which is the
  iAP of the *least favourable* tie order; the expectation over tie orders of its
  maximum has no cheap closed form. :func:`precision_at_k` is a stable sort of
  ``-scores`` (ties: lower index first).

Words with no positive image are skipped by AP and iAP; when nothing is left to
average a ``ValueError`` is raised.

References
----------
- Duygulu et al. (2002); Feng, Manmatha, Lavrenko, "Multiple Bernoulli relevance models
  for image and video annotation", CVPR 2004: per-word P/R@5 and N+ on Corel5k.
- Mantziou, Papadopoulos, Kompatsiaris, IJMIR 2015 (seed 002): iAP, MiAP, P@100.
- Manning, Raghavan, Schütze, "Introduction to Information Retrieval", 2008, Sec. 8.4
  (11-point interpolated average precision).
- McSherry, Najork, "Computing Information Retrieval Performance Measures Efficiently
  in the Presence of Tied Scores", ECIR 2008 (AP averaged over the orders of ties).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from jaxannot.metrics.ranking import (
    check_pair,
    check_vector_pair,
    checked_ranks,
    precision_recall_curves,
    ranked_columns,
    tie_groups,
    top_n,
)

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "word_prf_at_n",
    "word_prf_of_ranks",
    "average_precision",
    "mean_average_precision",
    "interpolated_average_precision",
    "mean_interpolated_average_precision",
    "precision_at_k",
]


def word_prf_at_n(scores: ArrayLike, truth: ArrayLike, n: int) -> dict:
    r"""Per-word precision, recall, F1 and N+ of top-``n`` annotation (Corel5k style).

    Every image is annotated with its ``n`` best-ranked words. For word ``w``:
    :math:`P_w` = correct annotations with ``w`` / images annotated with ``w``
    (0 when ``w`` is never predicted), :math:`R_w` = correct annotations with ``w`` /
    images whose truth has ``w``. ``precision`` and ``recall`` are the means of
    :math:`P_w, R_w` over the words with at least one true image;
    ``f1 = 2 P R / (P + R)`` of those two means (0 when both are 0); ``n_plus`` =
    number of words with :math:`R_w > 0`.

    Returns
    -------
    dict with keys ``precision``, ``recall``, ``f1`` (float) and ``n_plus`` (int)
    """
    return word_prf_of_ranks(*checked_ranks(scores, truth), n)


def word_prf_of_ranks(ranks: np.ndarray, truth: np.ndarray, n: int) -> dict:
    """:func:`word_prf_at_n` on checked ranks (for reports that rank once).

    Parameters
    ----------
    ranks, truth
        As :func:`~jaxannot.metrics.per_image.accuracy_of_ranks` takes them.
    n : int
        The words annotated per image (the ``n`` best-ranked).

    Returns
    -------
    dict
        ``precision``, ``recall``, ``f1`` and ``n_plus``.
    """
    pred = top_n(ranks, n)
    correct = np.sum(pred & truth, axis=0).astype(np.float64)
    npred = pred.sum(axis=0)
    ntrue = truth.sum(axis=0)
    words = ntrue > 0
    if not words.any():
        raise ValueError("no word occurs in the ground truth; the metric is undefined")
    p_w = np.where(npred > 0, correct / np.maximum(npred, 1), 0.0)
    r_w = correct / np.maximum(ntrue, 1)
    p, r = float(p_w[words].mean()), float(r_w[words].mean())
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return {
        "precision": p,
        "recall": r,
        "f1": float(f1),
        "n_plus": int(np.sum(r_w > 0)),
    }


#: entries of the [images, words] blocks MAP and MiAP rank at a time (each block of
#: words is ranked on its own: the words' rankings are independent)
BLOCK_ENTRIES = 1 << 21


def _by_words(columns, scores, truth, *args):
    """``columns(scores, truth, *args)`` (a per-word value and the positives per
    word) on blocks of at most ``BLOCK_ENTRIES`` entries, joined: the same result
    without ``[images, words]`` float64 temporaries of every word at once."""
    width = max(1, BLOCK_ENTRIES // max(scores.shape[0], 1))
    parts = [
        columns(scores[:, w : w + width], truth[:, w : w + width], *args)
        for w in range(0, scores.shape[1], width)
    ]
    return tuple(np.concatenate(x) for x in zip(*parts, strict=True))


def _ap_columns(scores, truth):
    """Expected AP of every column over the orders of its tied scores (and the
    positives per column)."""
    rel, hits, start, end, npos = tie_groups(scores, truth)
    rank = np.arange(len(rel))[:, None]
    before = np.take_along_axis(hits - rel, start, axis=0)  # positives above the group
    p = np.take_along_axis(hits, end, axis=0) - before  # positives in the group
    m = end - start + 1  # group size
    j = rank - start  # 0-based place in the group
    # a positive at place j: probability p/m; its expected predecessors in the group
    # among the other j places: j (p-1)/(m-1) (hypergeometric; 0 when m = 1)
    expected = (p / m) * (before + 1 + j * (p - 1) / np.maximum(m - 1, 1)) / (rank + 1)
    return np.sum(expected, axis=0) / np.maximum(npos, 1), npos


def average_precision(s: ArrayLike, y: ArrayLike) -> float:
    r"""Non-interpolated average precision, averaged over the orders of tied scores.

    For one ranking by decreasing ``s``,
    :math:`AP = \frac{1}{|Y|}\sum_{k: y_{(k)}=1} \mathrm{Prec}@k`. Tied scores leave
    the ranking open; the result is the exact mean of AP over all orders of the tied
    items (each order equally likely). For a tie group that follows ``b`` items with
    ``h`` positives and holds ``m`` items with ``p`` positives, its place ``j``
    (1-based) holds a positive with probability ``p/m``, preceded on average by
    ``(j-1)(p-1)/(m-1)`` of the group's other positives, so the group adds

    .. math:: \frac{1}{|Y|} \sum_{j=1}^{m} \frac{p}{m}
              \frac{h + 1 + (j-1)\frac{p-1}{m-1}}{b + j}

    (McSherry & Najork, 2008); without ties this is the usual AP. Cost: one sort.

    Relation to scikit-learn: without tied scores this equals
    ``sklearn.metrics.average_precision_score``. With ties they differ:
    scikit-learn makes each tie group one threshold, crediting all its ``p``
    positives with the precision ``(h + p)/(b + m)`` at its end (:math:`\sum_n (R_n -
    R_{n-1}) P_n`), which is not the average over tie orders.

    Raises
    ------
    ValueError
        If ``y`` has no positive.

    Examples
    --------
    >>> average_precision([1.0, 1.0], [1, 0])  # orders +- (AP 1) and -+ (AP 1/2)
    0.75
    """
    s, y = check_vector_pair(s, y)
    scores, truth = check_pair(s, y)
    if not truth.any():
        raise ValueError("average precision needs at least one positive label")
    return float(_ap_columns(scores, truth)[0][0])


def mean_average_precision(scores: ArrayLike, truth: ArrayLike) -> float:
    r"""MAP over words: mean of :func:`average_precision` of each word column.

    For word ``w`` the images are ranked by ``scores[:, w]`` (tied images: the mean
    over their orders); words without a positive image are skipped.
    """
    scores, truth = check_pair(scores, truth)
    ap, npos = _by_words(_ap_columns, scores, truth)
    if not np.any(npos > 0):
        raise ValueError("no word column has a positive image; MAP is undefined")
    return float(ap[npos > 0].mean())


def _iap_columns(scores, truth, origin: bool):
    at_end, precision, recall, npos = precision_recall_curves(scores, truth)
    if origin:  # vl_pr's rank-0 point: recall 0, precision 1 by convention
        precision = np.vstack([np.ones((1, precision.shape[1])), precision])
        recall = np.vstack([np.zeros((1, recall.shape[1])), recall])
        at_end = np.vstack([np.ones((1, at_end.shape[1]), dtype=bool), at_end])
    # max precision over group ends whose recall >= level (0 if none): 11 x words.
    # The 1e-12 slack makes recall 3/10 count for the level 0.30000000000000004.
    best = np.stack(
        [
            np.max(np.where(at_end & (recall >= level - 1e-12), precision, 0.0), axis=0)
            for level in np.linspace(0.0, 1.0, 11)
        ]
    )
    return best.mean(axis=0), npos


def interpolated_average_precision(
    s: ArrayLike, y: ArrayLike, *, origin: bool = False
) -> float:
    r"""11-point interpolated AP (TREC; seed 002's iAP).

    .. math:: iAP = \frac{1}{11}\sum_{\rho \in \{0, 0.1, \ldots, 1\}}
              \max_{k : R@k \ge \rho} P@k

    over the ranks ``k = 1..n`` of the ranking by decreasing ``s``; the max of an
    empty set is 0. Tied scores: only the ranks ``k`` that close a group of tied
    items count (the points of ``sklearn.metrics.precision_recall_curve``, the same
    for every order of the ties). That is the iAP of the least favourable tie order
    (its positives last in each group), a lower bound of the mean over tie orders;
    without ties it is the plain iAP.

    Parameters
    ----------
    s, y : arrays [items]
        Scores and 0/1 relevance.
    origin : bool
        Also use the rank-0 point (recall 0, precision 1) as VLFeat's ``vl_pr`` does
        (seed 002 computes MiAP with ``vl_pr``); this only sets the level-0 term to 1.
        Default False: the ranks 1..n only (TREC ``trec_eval``).
    """
    s, y = check_vector_pair(s, y)
    scores, truth = check_pair(s, y)
    if not truth.any():
        raise ValueError("interpolated AP needs at least one positive label")
    return float(_iap_columns(scores, truth, origin)[0][0])


def mean_interpolated_average_precision(
    scores: ArrayLike, truth: ArrayLike, *, origin: bool = False
) -> float:
    """MiAP: mean of :func:`interpolated_average_precision` (same ``origin``) over the
    concept columns with a positive image (seed 002); images ranked per concept."""
    scores, truth = check_pair(scores, truth)
    iap, npos = _by_words(_iap_columns, scores, truth, origin)
    if not np.any(npos > 0):
        raise ValueError("no concept column has a positive image; MiAP is undefined")
    return float(iap[npos > 0].mean())


def precision_at_k(s: ArrayLike, y: ArrayLike, k: int) -> float:
    """Fraction of positives among the ``k`` top-scored items (ties: lower index
    first, like the per-image @N metrics)."""
    s, y = check_vector_pair(s, y)
    scores, truth = check_pair(s, y)
    if not 1 <= k <= len(scores):
        raise ValueError(f"k must be in [1, {len(scores)}], got {k}")
    return float(ranked_columns(scores, truth)[:k, 0].mean())
