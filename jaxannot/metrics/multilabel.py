r"""The multi-label learning metrics of scikit-learn (numpy in, floats out).

Ranking metrics read the scores of the words (labels) of each image; bipartition
metrics read a 0/1 prediction of its words, made from the scores by
:func:`top_k_bipartition` or :func:`threshold_bipartition`. Inputs are those of
:mod:`jaxannot.metrics.annotation`: ``scores`` ``[images, words]`` (higher = more
relevant) and ``truth`` (any value > 0 counts as present).

Conventions (those of ``sklearn.metrics``, each equal to it in the tests)
------------------------------------------------------------------------
- **Ties in the ranking metrics** are counted against the prediction: a word tied
  with a true word counts as ranked above it (label-ranking AP, coverage), and a
  tied (true, false) pair counts as wrongly ordered (ranking loss), as in
  ``label_ranking_average_precision_score``, ``coverage_error`` and
  ``label_ranking_loss``. One-error takes the top word by ``argmax`` (the lowest
  index among tied scores), the tie rule of the per-image word rankings of
  :mod:`jaxannot.metrics.annotation`.
- **Images without a true word** are kept in every mean and score as a perfect
  ranking: label-ranking AP 1, ranking loss 0, coverage 0, one-error 0 (and so does
  an image whose every word is true, for label-ranking AP and ranking loss), as
  scikit-learn does.
- **Empty sets in the bipartition metrics** (no predicted word for a precision, no
  true word for a recall, neither for an F1) give 0, scikit-learn's
  ``zero_division=0`` (what its default ``"warn"`` returns). Macro averages run over
  every word, example averages over every image. F1 is
  :math:`2\,tp / (2\,tp + fp + fn)`.
- **Coverage** is 1-based, scikit-learn's ``coverage_error``: how many top-ranked
  words cover every true word. Schapire & Singer (2000), Zhang & Zhou (2007) and
  Mulan report it 0-based, which is this value minus the fraction of images with a
  true word.

References
----------
- Schapire, Singer, "BoosTexter: A boosting-based system for text categorization",
  Machine Learning 2000 (one-error, coverage, ranking loss, average precision).
- Zhang, Zhou, "ML-KNN: A lazy learning approach to multi-label learning",
  Pattern Recognition 2007; "A review on multi-label learning algorithms", IEEE TKDE
  2014 (example- and label-based bipartition metrics).
- Tsoumakas, Katakis, Vlahavas, "Mining multi-label data", Data Mining and
  Knowledge Discovery Handbook, 2010 (Mulan's definitions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from jaxannot.metrics.ranking import check_pair, rank_positions, tie_groups

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "BIPARTITION_METRICS",
    "MULTILABEL_METRICS",
    "RANKING_METRICS",
    "bipartition_k",
    "bipartition_report",
    "coverage",
    "hamming_loss",
    "label_ranking_average_precision",
    "multilabel_report",
    "one_error",
    "prf",
    "ranking_loss",
    "ranking_report",
    "threshold_bipartition",
    "top_k_bipartition",
]

#: Keys of :func:`ranking_report`.
RANKING_METRICS = ("lrap", "ranking_loss", "coverage", "one_error")
#: Keys of :func:`bipartition_report`.
BIPARTITION_METRICS = tuple(
    f"{avg}_{m}"
    for avg in ("micro", "macro", "example")
    for m in ("f1", "precision", "recall")
) + ("hamming_loss",)
#: Keys of :func:`multilabel_report`.
MULTILABEL_METRICS = RANKING_METRICS + BIPARTITION_METRICS


# ------------------------------------------------------------------- ranking metrics
def _row_groups(scores, truth):
    """:func:`~jaxannot.metrics.ranking._tie_groups` of the words of each image
    (arrays ``[words, images]``, the words of each image by decreasing score)."""
    return tie_groups(scores.T, truth.T)


def _lrap(g, n_words):
    ahead = np.take_along_axis(g.hits, g.end, axis=0)  # true words scored >= this
    per_word = np.where(g.rel > 0, ahead / (g.end + 1), 0.0)
    ap = per_word.sum(axis=0) / np.maximum(g.npos, 1)
    return np.where((g.npos == 0) | (g.npos == n_words), 1.0, ap)


def _ranking_loss(g, n_words):
    before = np.take_along_axis(g.hits - g.rel, g.start, axis=0)  # true words above
    wrong = np.where(g.rel > 0, 0.0, g.npos - before).sum(axis=0)
    pairs = g.npos * (n_words - g.npos)
    return np.where(pairs > 0, wrong / np.maximum(pairs, 1), 0.0)


def _coverage(g):
    return np.max(np.where(g.rel > 0, g.end + 1, 0), axis=0)


def _one_error(scores, truth):
    top = np.argmax(scores, axis=1)
    return truth.any(axis=1) & ~truth[np.arange(len(truth)), top]


def label_ranking_average_precision(scores: ArrayLike, truth: ArrayLike) -> float:
    r"""Label-ranking average precision (Schapire & Singer's average precision).

    .. math:: \mathrm{LRAP} = \frac1N \sum_i \frac{1}{|T_i|} \sum_{j \in T_i}
              \frac{|\{k \in T_i : s_{ik} \ge s_{ij}\}|}{|\{k : s_{ik} \ge s_{ij}\}|}

    with :math:`T_i` the true words of image ``i``; an image with no true word, or
    with every word true, scores 1. Equals
    ``sklearn.metrics.label_ranking_average_precision_score``. Higher is better.

    Examples
    --------
    >>> label_ranking_average_precision([[0.9, 0.5, 0.1]], [[0, 1, 1]])
    0.5833333333333333
    """
    scores, truth = check_pair(scores, truth)
    return float(_lrap(_row_groups(scores, truth), scores.shape[1]).mean())


def ranking_loss(scores: ArrayLike, truth: ArrayLike) -> float:
    r"""Fraction of (true, false) word pairs ranked wrongly; ties count as wrong.

    .. math:: \mathrm{RL} = \frac1N \sum_i
              \frac{|\{(j, k) \in T_i \times \bar T_i : s_{ij} \le s_{ik}\}|}
              {|T_i|\,|\bar T_i|}

    (0 for an image whose words are all true or all false). Equals
    ``sklearn.metrics.label_ranking_loss``. Lower is better.

    Examples
    --------
    >>> ranking_loss([[0.9, 0.5, 0.5]], [[0, 1, 0]])  # 0.9 > 0.5 and a tie: 2 of 2
    1.0
    """
    scores, truth = check_pair(scores, truth)
    return float(_ranking_loss(_row_groups(scores, truth), scores.shape[1]).mean())


def coverage(scores: ArrayLike, truth: ArrayLike) -> float:
    r"""How many top-ranked words cover every true word, 1-based; ties count against.

    .. math:: \mathrm{Cov} = \frac1N \sum_i \max_{j \in T_i}
              |\{k : s_{ik} \ge s_{ij}\}|

    (0 for an image with no true word). Equals ``sklearn.metrics.coverage_error``.
    The 0-based coverage of Schapire & Singer, Zhang & Zhou and Mulan is this minus
    the fraction of images with a true word. Lower is better.

    Examples
    --------
    >>> coverage([[0.9, 0.5, 0.1], [0.2, 0.2, 0.3]], [[0, 1, 0], [1, 0, 0]])
    2.5
    """
    scores, truth = check_pair(scores, truth)
    return float(_coverage(_row_groups(scores, truth)).mean())


def one_error(scores: ArrayLike, truth: ArrayLike) -> float:
    r"""Fraction of images whose top-scored word is not one of their true words.

    .. math:: \mathrm{OE} = \frac1N \sum_i [\,T_i \neq \emptyset \ \wedge\
              \arg\max_k s_{ik} \notin T_i\,]

    The top word of tied scores is the lowest index (``numpy.argmax``); an image
    with no true word counts as no error, as the other ranking metrics count it as a
    perfect ranking. Lower is better.

    Examples
    --------
    >>> one_error([[0.9, 0.5], [0.5, 0.5], [0.1, 0.2]], [[0, 1], [1, 0], [0, 0]])
    0.3333333333333333
    """
    scores, truth = check_pair(scores, truth)
    return float(_one_error(scores, truth).mean())


#: entries of the [images, words] blocks the ranking metrics sort at a time (each
#: image's words are ranked on their own)
BLOCK_ENTRIES = 1 << 21


def _per_image_ranking(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """LRAP, ranking loss and coverage of every image, ``[3, images]``."""
    g = _row_groups(scores, truth)
    n_words = scores.shape[1]
    return np.stack([_lrap(g, n_words), _ranking_loss(g, n_words), _coverage(g)])


def ranking_report(scores: ArrayLike, truth: ArrayLike) -> dict:
    """The four ranking metrics (keys :data:`RANKING_METRICS`), one sort shared,
    on blocks of at most :data:`BLOCK_ENTRIES` entries: the same values without
    the sort's ``[words, images]`` 64-bit arrays (order, relevance, hits, group
    starts and ends) of every image at once, 320 MB each at 1M images of 40
    words."""
    scores, truth = check_pair(scores, truth)
    rows = max(1, BLOCK_ENTRIES // max(scores.shape[1], 1))
    per_image = np.concatenate(
        [
            _per_image_ranking(scores[i : i + rows], truth[i : i + rows])
            for i in range(0, scores.shape[0], rows)
        ],
        axis=1,
    )
    return {
        "lrap": float(per_image[0].mean()),
        "ranking_loss": float(per_image[1].mean()),
        "coverage": float(per_image[2].mean()),
        "one_error": float(_one_error(scores, truth).mean()),
    }


# ----------------------------------------------------------------- the bipartition
def bipartition_k(train_truth: ArrayLike) -> int:
    r"""The top-k rule's ``k``: the mean number of true words of the training images
    (label cardinality), rounded half up, at least 1.

    .. math:: k = \max\big(1, \lfloor \tfrac1N \textstyle\sum_i |T_i| + \tfrac12
              \rfloor\big)

    Examples
    --------
    >>> bipartition_k([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 1, 1]])  # mean 2.0
    2
    """
    truth = np.asarray(train_truth)
    if truth.ndim != 2 or truth.shape[0] == 0 or truth.shape[1] == 0:
        raise ValueError(
            f"train_truth must be a non-empty [images, words] matrix, got shape "
            f"{truth.shape}"
        )
    mean = float(np.mean(np.sum(truth > 0, axis=1)))
    return int(min(truth.shape[1], max(1, np.floor(mean + 0.5))))


def top_k_bipartition(scores: ArrayLike, k: int) -> np.ndarray:
    """Boolean ``[images, words]``: the ``k`` top-scored words of each image (ties:
    the lower word index first, as the per-image @N metrics)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D [images, words], got {scores.shape}")
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= scores.shape[1]:
        raise ValueError(
            f"k must be an integer in [1, {scores.shape[1]}] (number of words), "
            f"got {k!r}"
        )
    return rank_positions(scores) < k


def threshold_bipartition(scores: ArrayLike, threshold: float) -> np.ndarray:
    """Boolean ``[images, words]``: the words scored at least ``threshold`` (an image
    may get none)."""
    scores = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be finite, got {threshold!r}")
    return scores >= threshold


def _counts(pred, truth, axis):
    tp = np.sum(pred & truth, axis=axis).astype(np.float64)
    return tp, np.sum(pred, axis=axis), np.sum(truth, axis=axis)


def _ratio(num, den):
    """``num / den``, 0 where ``den`` is 0 (scikit-learn's ``zero_division=0``)."""
    return np.where(den > 0, num / np.maximum(den, 1), 0.0)


def prf(pred: ArrayLike, truth: ArrayLike, average: str) -> tuple[float, float, float]:
    r"""Precision, recall and F1 of a 0/1 word prediction.

    With :math:`tp, |P|, |T|` the true positives, predicted and true words counted
    over everything (``"micro"``), per word (``"macro"``, then averaged over all
    words) or per image (``"example"``, averaged over all images):
    :math:`P = tp/|P|`, :math:`R = tp/|T|`, :math:`F_1 = 2tp/(|P|+|T|)`, each 0 when
    its denominator is. Equals ``sklearn.metrics.precision_recall_fscore_support``
    with ``average="micro"``, ``"macro"``, ``"samples"`` and ``zero_division=0``.

    Returns
    -------
    (precision, recall, f1) : tuple of float
    """
    pred, truth = check_pair(pred, truth)
    pred = pred > 0
    axes = {"micro": None, "macro": 0, "example": 1}
    if average not in axes:
        raise ValueError(f"average must be one of {list(axes)}, got {average!r}")
    tp, npred, ntrue = _counts(pred, truth, axes[average])
    p, r, f = _ratio(tp, npred), _ratio(tp, ntrue), _ratio(2 * tp, npred + ntrue)
    return float(np.mean(p)), float(np.mean(r)), float(np.mean(f))


def hamming_loss(pred: ArrayLike, truth: ArrayLike) -> float:
    """Fraction of (image, word) cells predicted wrongly (``sklearn.metrics.
    hamming_loss``). Lower is better."""
    pred, truth = check_pair(pred, truth)
    return float(np.mean((pred > 0) != truth))


def bipartition_report(pred: ArrayLike, truth: ArrayLike) -> dict:
    """Micro, macro and example precision/recall/F1 and the Hamming loss of a 0/1
    prediction (keys :data:`BIPARTITION_METRICS`)."""
    out = {}
    for average in ("micro", "macro", "example"):
        p, r, f = prf(pred, truth, average)
        out.update(
            {f"{average}_f1": f, f"{average}_precision": p, f"{average}_recall": r}
        )
    out["hamming_loss"] = hamming_loss(pred, truth)
    return out


def multilabel_report(scores: ArrayLike, truth: ArrayLike, k: int) -> dict:
    """:func:`ranking_report` of ``scores`` and :func:`bipartition_report` of their
    :func:`top_k_bipartition` with ``k`` words per image (keys
    :data:`MULTILABEL_METRICS`; ``k`` from :func:`bipartition_k` of the training
    words in :func:`jaxannot.evaluation.evaluate`)."""
    scores, truth = check_pair(scores, truth)
    return {
        **ranking_report(scores, truth),
        **bipartition_report(top_k_bipartition(scores, k), truth),
    }
