r"""Per-image annotation metrics: how well each image's ranked words match its truth.

``scores`` is ``[images, words]`` (higher = more relevant), ``truth`` the matching 0/1
(or count; any value > 0 counts as present) ground-truth matrix. The words of an
image are ranked by a stable sort of ``-scores``: among equal scores the lower index
comes first. This is what the published baselines use (seed 000's
empirical-frequency Corel5k numbers are reproduced with it), and it keeps these
metrics deterministic for constant scores, but a tie can favour a word by its
position in the vocabulary. Images with no true word are skipped; when none is left a
``ValueError`` is raised.

References
----------
- Seed 000 (graph-regularized VI for image annotation): Accuracy and Complete Length,
  after Monay & Gatica-Perez (2004) and Zhang et al. (2005).
- Chen, Zhu, Sun, Xing, "Large-Margin Predictive Latent Subspace Learning for Multiview
  Data Analysis", TPAMI 2012 (seed 001): F1@N.
- Guo, Zhang, Xing, Faloutsos, ACM TKDD 2016 (seed 004): top-2..top-50 precision/recall.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from jaxannot.metrics.ranking import (
    check_pair,
    checked_ranks,
    rank_positions,
    rows_with_truth,
    top_n,
)

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "accuracy_of_ranks",
    "annotation_accuracy",
    "complete_length",
    "complete_length_of_ranks",
    "image_prf_at_n",
    "image_prf_of_ranks",
    "topn_precision_recall",
]


def annotation_accuracy(scores: ArrayLike, truth: ArrayLike) -> float:
    r"""Seed 000 Accuracy: predict as many words as the image has, fraction correct.

    .. math:: \mathrm{Acc} = \frac{1}{|I^+|} \sum_{i \in I^+}
              \frac{|\mathrm{top}_{r_i}(s_i) \cap T_i|}{r_i}

    with :math:`T_i` the true words of image ``i``, :math:`r_i = |T_i|`,
    :math:`I^+ = \{i : r_i > 0\}` and :math:`\mathrm{top}_r` the ``r`` best-ranked
    words (ties by lower word index).

    Parameters
    ----------
    scores : array [images, words]
    truth : array [images, words]

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> annotation_accuracy([[3.0, 2.0, 1.0]], [[1, 0, 1]])
    0.5
    """
    return accuracy_of_ranks(*checked_ranks(scores, truth))


def accuracy_of_ranks(ranks: np.ndarray, truth: np.ndarray) -> float:
    """:func:`annotation_accuracy` on checked ranks (for reports that rank once).

    Parameters
    ----------
    ranks, truth : numpy.ndarray [images, words]
        What :func:`~jaxannot.metrics.ranking.checked_ranks` returns: the 0-based
        per-image ranks and the boolean ground truth.

    Returns
    -------
    float
        The accuracy.
    """
    r, keep = rows_with_truth(truth)
    correct = np.sum(truth & (ranks < r[:, None]), axis=1)
    return float(np.mean(correct[keep] / r[keep]))


def complete_length(scores: ArrayLike, truth: ArrayLike) -> float:
    r"""Seed 000 Complete Length: top words needed to cover all the true words.

    .. math:: \mathrm{CL} = \frac{1}{|I^+|} \sum_{i \in I^+}
              \max_{w \in T_i} \mathrm{rank}_i(w)

    with 1-based ranks (ties by lower word index). Lower is better; the minimum is the
    mean number of true words.

    Examples
    --------
    >>> complete_length([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]], [[1, 0, 1], [0, 1, 0]])
    2.5
    """
    return complete_length_of_ranks(*checked_ranks(scores, truth))


def complete_length_of_ranks(ranks: np.ndarray, truth: np.ndarray) -> float:
    """:func:`complete_length` from the ranks of one check.

    Parameters
    ----------
    ranks, truth
        As :func:`accuracy_of_ranks` takes them.

    Returns
    -------
    float
        The complete length.
    """
    _, keep = rows_with_truth(truth)
    worst = np.max(np.where(truth, ranks + 1, 0), axis=1)
    return float(np.mean(worst[keep]))


def image_prf_at_n(
    scores: ArrayLike, truth: ArrayLike, n: int
) -> tuple[float, float, float]:
    r"""Per-image precision, recall and F1 of the top-``n`` words (seed 001's F1@N).

    Every image is annotated with its ``n`` best-ranked words :math:`A_i`; with
    :math:`c_i = |A_i \cap T_i|`: :math:`P_i = c_i / n`, :math:`R_i = c_i / r_i`,
    :math:`F_i = 2 P_i R_i / (P_i + R_i)` (0 when :math:`c_i = 0`). The three are
    averaged over the images with at least one true word (F1 is the mean of the
    per-image F1, not the F1 of the mean P and R).

    Returns
    -------
    (precision, recall, f1) : tuple of float
    """
    return image_prf_of_ranks(*checked_ranks(scores, truth), n)


def image_prf_of_ranks(
    ranks: np.ndarray, truth: np.ndarray, n: int
) -> tuple[float, float, float]:
    """:func:`image_prf_at_n` on checked ranks, for a report that ranks once.

    Parameters
    ----------
    ranks, truth
        As :func:`accuracy_of_ranks` takes them.
    n : int
        The words annotated per image.

    Returns
    -------
    (precision, recall, f1) : tuple of float
    """
    r, keep = rows_with_truth(truth)
    c = np.sum(top_n(ranks, n) & truth, axis=1).astype(np.float64)
    p = c / n
    rec = c / np.maximum(r, 1)
    f1 = np.where(c > 0, 2 * p * rec / np.where(c > 0, p + rec, 1.0), 0.0)
    return float(p[keep].mean()), float(rec[keep].mean()), float(f1[keep].mean())


def topn_precision_recall(
    scores: ArrayLike, truth: ArrayLike, ns: Iterable[int] = range(2, 51)
) -> tuple[np.ndarray, np.ndarray]:
    r"""Precision and recall of top-n annotation for each n (seed 004's curves).

    For each ``n`` in ``ns``: the per-image precision and recall of
    :func:`image_prf_at_n`, averaged over images with a true word.

    Returns
    -------
    precision, recall : float arrays [len(ns)]
    """
    ns = [int(n) for n in ns]
    scores, truth = check_pair(scores, truth)
    r, keep = rows_with_truth(truth)
    ranks = rank_positions(scores)
    hit_rank = np.where(truth, ranks, scores.shape[1])  # rank of each true word
    p, rec = [], []
    for n in ns:
        if not 1 <= n <= scores.shape[1]:
            raise ValueError(f"every n must be in [1, {scores.shape[1]}], got {n}")
        c = np.sum(hit_rank < n, axis=1)[keep]
        p.append(np.mean(c / n))
        rec.append(np.mean(c / r[keep]))
    return np.asarray(p), np.asarray(rec)
