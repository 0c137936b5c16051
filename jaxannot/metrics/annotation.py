r"""The annotation metrics of the five papers, defined once (numpy in, floats out).

Conventions
-----------
- ``scores`` is ``[images, words]`` (higher = more relevant), ``truth`` the matching 0/1
  (or count; any value > 0 counts as present) ground-truth matrix.
- **Ties.** Two conventions, chosen per metric and stated in its docstring.

  * Rankings of the *words of an image* (Accuracy, Complete Length, the @N metrics,
    :func:`topn_precision_recall`) and :func:`precision_at_k` are a stable sort of
    ``-scores``: among equal scores the lower index comes first. This is what the
    published baselines use (seed 000's empirical-frequency Corel5k numbers are
    reproduced with it), and it keeps these metrics deterministic for constant
    scores, but a tie can favour a word by its position in the vocabulary.
  * Rankings of the *images for a word* (AP / MAP, iAP / MiAP) never depend on the
    order of tied items. AP is the exact **expectation over all orders of the tied
    items** (McSherry & Najork, 2008; closed form in :func:`average_precision`).
    iAP reads precision and recall only after a whole group of tied items (the
    points every tie order shares, those of
    ``sklearn.metrics.precision_recall_curve``), which is the iAP of the *least
    favourable* tie order; the expectation over tie orders of its maximum has no
    cheap closed form.

- Images with no true word are skipped by per-image annotation metrics; words with no
  positive image are skipped by per-word ranking metrics (AP, iAP). When nothing is
  left to average a ``ValueError`` is raised.

References
----------
- Seed 000 (graph-regularized VI for image annotation): Accuracy and Complete Length,
  after Monay & Gatica-Perez (2004) and Zhang et al. (2005).
- Chen, Zhu, Sun, Xing, "Large-Margin Predictive Latent Subspace Learning for Multiview
  Data Analysis", TPAMI 2012 (seed 001): F1@N, pairwise average KL of Sec. 5.2.
- Duygulu et al. (2002); Feng, Manmatha, Lavrenko, "Multiple Bernoulli relevance models
  for image and video annotation", CVPR 2004: per-word P/R@5 and N+ on Corel5k.
- Mantziou, Papadopoulos, Kompatsiaris, IJMIR 2015 (seed 002): iAP, MiAP, P@100.
- Guo, Zhang, Xing, Faloutsos, ACM TKDD 2016 (seed 004): top-2..top-50 precision/recall.
- Manning, Raghavan, Schütze, "Introduction to Information Retrieval", 2008, Sec. 8.4
  (11-point interpolated average precision).
- McSherry, Najork, "Computing Information Retrieval Performance Measures Efficiently
  in the Presence of Tied Scores", ECIR 2008 (AP averaged over the orders of ties).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "annotation_accuracy",
    "complete_length",
    "image_prf_at_n",
    "word_prf_at_n",
    "average_precision",
    "mean_average_precision",
    "interpolated_average_precision",
    "mean_interpolated_average_precision",
    "precision_at_k",
    "topn_precision_recall",
    "classification_accuracy",
    "error_rate",
    "r2_score",
    "root_mean_squared_error",
    "pairwise_symmetric_kl",
    "annotation_report",
    "regression_report",
    "KL_EPS",
]

#: Floor on probabilities before logs in :func:`pairwise_symmetric_kl` (a topic with
#: zero mass in one class gives a large finite KL instead of inf).
KL_EPS = 1e-12


# --------------------------------------------------------------------------- helpers
def _check_pair(scores, truth):
    scores = np.asarray(scores, dtype=np.float64)
    truth = np.asarray(truth)
    if scores.ndim != 2 or truth.ndim != 2:
        raise ValueError(
            f"scores and truth must be 2-D [images, words], got shapes {scores.shape} "
            f"and {truth.shape}"
        )
    if scores.shape != truth.shape:
        raise ValueError(
            f"scores and truth shapes differ: {scores.shape} vs {truth.shape}"
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contain NaN or inf")
    if truth.dtype.kind not in "biuf" or not np.all(np.isfinite(truth)):
        raise ValueError("truth must be a finite numeric or boolean matrix")
    return scores, truth > 0


def _check_vector_pair(s, y):
    s, y = np.asarray(s, dtype=np.float64), np.asarray(y)
    if s.ndim != 1 or s.shape != y.shape:
        raise ValueError(
            f"scores and labels must be 1-D of equal length, got {s.shape} and "
            f"{y.shape}"
        )
    return s[:, None], y[:, None]


def _rank_positions(scores):
    """0-based rank of every word in its row (ties: lower word index first)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(scores.shape[1])[None, :], axis=1)
    return ranks


def _top_n(ranks, n):
    """Boolean [images, words]: the n top-ranked words of each image."""
    if not 1 <= n <= ranks.shape[1]:
        raise ValueError(
            f"n must be in [1, {ranks.shape[1]}] (number of words), got {n}"
        )
    return ranks < n


def _checked_ranks(scores, truth):
    """``(ranks, truth)``: the checked pair, with the scores as per-image ranks."""
    scores, truth = _check_pair(scores, truth)
    return _rank_positions(scores), truth


def _rows_with_truth(truth):
    r = truth.sum(axis=1)
    keep = r > 0
    if not keep.any():
        raise ValueError("no image has a true word; the metric is undefined")
    return r, keep


def _ranked_columns(scores, truth):
    """Per column, the truth sorted by decreasing score (ties: lower row first)."""
    order = np.argsort(-scores, axis=0, kind="stable")
    return np.take_along_axis(truth, order, axis=0)


class _TieGroups(NamedTuple):
    """Every column ranked by decreasing score, with its groups of tied scores.

    All arrays are ``[items, columns]`` in ranked order; ``start`` and ``end`` are the
    0-based ranks of the first and last item of the tie group of each rank.
    """

    rel: np.ndarray
    hits: np.ndarray
    start: np.ndarray
    end: np.ndarray
    npos: np.ndarray


def _tie_groups(scores, truth) -> _TieGroups:
    order = np.argsort(-scores, axis=0, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=0)
    rel = np.take_along_axis(truth, order, axis=0).astype(np.float64)
    n = len(ranked)
    rank = np.broadcast_to(np.arange(n)[:, None], ranked.shape)
    first = np.ones(ranked.shape, dtype=bool)
    first[1:] = ranked[1:] != ranked[:-1]
    last = np.ones(ranked.shape, dtype=bool)
    last[:-1] = first[1:]
    start = np.maximum.accumulate(np.where(first, rank, 0), axis=0)
    end = np.minimum.accumulate(np.where(last, rank, n - 1)[::-1], axis=0)[::-1]
    return _TieGroups(rel, np.cumsum(rel, axis=0), start, end, truth.sum(axis=0))


def _precision_recall_curves(scores, truth):
    """Precision and recall after each rank, for every column: [images, words] each,
    with ``at_end``: True where the rank closes a group of tied scores."""
    groups = _tie_groups(scores, truth)
    precision = groups.hits / np.arange(1, len(groups.rel) + 1)[:, None]
    recall = groups.hits / np.maximum(groups.npos, 1)[None, :]
    at_end = groups.end == np.arange(len(groups.rel))[:, None]
    return at_end, precision, recall, groups.npos


# ------------------------------------------------------------- per-image annotation
def annotation_accuracy(scores, truth) -> float:
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
    return _accuracy(*_checked_ranks(scores, truth))


def _accuracy(ranks, truth):
    r, keep = _rows_with_truth(truth)
    correct = np.sum(truth & (ranks < r[:, None]), axis=1)
    return float(np.mean(correct[keep] / r[keep]))


def complete_length(scores, truth) -> float:
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
    return _complete_length(*_checked_ranks(scores, truth))


def _complete_length(ranks, truth):
    _, keep = _rows_with_truth(truth)
    worst = np.max(np.where(truth, ranks + 1, 0), axis=1)
    return float(np.mean(worst[keep]))


def image_prf_at_n(scores, truth, n: int) -> tuple[float, float, float]:
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
    return _image_prf(*_checked_ranks(scores, truth), n)


def _image_prf(ranks, truth, n):
    r, keep = _rows_with_truth(truth)
    c = np.sum(_top_n(ranks, n) & truth, axis=1).astype(np.float64)
    p = c / n
    rec = c / np.maximum(r, 1)
    f1 = np.where(c > 0, 2 * p * rec / np.where(c > 0, p + rec, 1.0), 0.0)
    return float(p[keep].mean()), float(rec[keep].mean()), float(f1[keep].mean())


def word_prf_at_n(scores, truth, n: int) -> dict:
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
    return _word_prf(*_checked_ranks(scores, truth), n)


def _word_prf(ranks, truth, n):
    pred = _top_n(ranks, n)
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


# ------------------------------------------------------------------ ranking metrics
def _ap_columns(scores, truth):
    """Expected AP of every column over the orders of its tied scores (and the
    positives per column)."""
    rel, hits, start, end, npos = _tie_groups(scores, truth)
    rank = np.arange(len(rel))[:, None]
    before = np.take_along_axis(hits - rel, start, axis=0)  # positives above the group
    p = np.take_along_axis(hits, end, axis=0) - before  # positives in the group
    m = end - start + 1  # group size
    j = rank - start  # 0-based place in the group
    # a positive at place j: probability p/m; its expected predecessors in the group
    # among the other j places: j (p-1)/(m-1) (hypergeometric; 0 when m = 1)
    expected = (p / m) * (before + 1 + j * (p - 1) / np.maximum(m - 1, 1)) / (rank + 1)
    return np.sum(expected, axis=0) / np.maximum(npos, 1), npos


def average_precision(s, y) -> float:
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
    s, y = _check_vector_pair(s, y)
    scores, truth = _check_pair(s, y)
    if not truth.any():
        raise ValueError("average precision needs at least one positive label")
    return float(_ap_columns(scores, truth)[0][0])


def mean_average_precision(scores, truth) -> float:
    r"""MAP over words: mean of :func:`average_precision` of each word column.

    For word ``w`` the images are ranked by ``scores[:, w]`` (tied images: the mean
    over their orders); words without a positive image are skipped.
    """
    scores, truth = _check_pair(scores, truth)
    ap, npos = _ap_columns(scores, truth)
    if not np.any(npos > 0):
        raise ValueError("no word column has a positive image; MAP is undefined")
    return float(ap[npos > 0].mean())


def _iap_columns(scores, truth, origin: bool):
    at_end, precision, recall, npos = _precision_recall_curves(scores, truth)
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


def interpolated_average_precision(s, y, *, origin: bool = False) -> float:
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
    s, y = _check_vector_pair(s, y)
    scores, truth = _check_pair(s, y)
    if not truth.any():
        raise ValueError("interpolated AP needs at least one positive label")
    return float(_iap_columns(scores, truth, origin)[0][0])


def mean_interpolated_average_precision(
    scores, truth, *, origin: bool = False
) -> float:
    """MiAP: mean of :func:`interpolated_average_precision` (same ``origin``) over the
    concept columns with a positive image (seed 002); images ranked per concept."""
    scores, truth = _check_pair(scores, truth)
    iap, npos = _iap_columns(scores, truth, origin)
    if not np.any(npos > 0):
        raise ValueError("no concept column has a positive image; MiAP is undefined")
    return float(iap[npos > 0].mean())


def precision_at_k(s, y, k: int) -> float:
    """Fraction of positives among the ``k`` top-scored items (ties: lower index
    first, like the per-image @N metrics)."""
    s, y = _check_vector_pair(s, y)
    scores, truth = _check_pair(s, y)
    if not 1 <= k <= len(scores):
        raise ValueError(f"k must be in [1, {len(scores)}], got {k}")
    return float(_ranked_columns(scores, truth)[:k, 0].mean())


def topn_precision_recall(scores, truth, ns=range(2, 51)):
    r"""Precision and recall of top-n annotation for each n (seed 004's curves).

    For each ``n`` in ``ns``: the per-image precision and recall of
    :func:`image_prf_at_n`, averaged over images with a true word.

    Returns
    -------
    precision, recall : float arrays [len(ns)]
    """
    ns = [int(n) for n in ns]
    scores, truth = _check_pair(scores, truth)
    r, keep = _rows_with_truth(truth)
    ranks = _rank_positions(scores)
    hit_rank = np.where(truth, ranks, scores.shape[1])  # rank of each true word
    p, rec = [], []
    for n in ns:
        if not 1 <= n <= scores.shape[1]:
            raise ValueError(f"every n must be in [1, {scores.shape[1]}], got {n}")
        c = np.sum(hit_rank < n, axis=1)[keep]
        p.append(np.mean(c / n))
        rec.append(np.mean(c / r[keep]))
    return np.asarray(p), np.asarray(rec)


# ------------------------------------------------------- classification / regression
def _check_labels(pred, y):
    pred, y = np.asarray(pred), np.asarray(y)
    if pred.ndim != 1 or pred.shape != y.shape:
        raise ValueError(
            f"pred and y must be 1-D of equal length, got {pred.shape} and {y.shape}"
        )
    if len(y) == 0:
        raise ValueError("empty prediction")
    return pred, y


def _check_real(pred, y):
    """:func:`_check_labels` for real values: float64, and ``ValueError`` on NaN/inf."""
    pred, y = _check_labels(pred, y)
    pred, y = pred.astype(np.float64), y.astype(np.float64)
    if not (np.all(np.isfinite(pred)) and np.all(np.isfinite(y))):
        raise ValueError("pred and y must be finite")
    return pred, y


def classification_accuracy(pred, y) -> float:
    """Fraction of ``pred == y`` (pass only evaluated images: no -1 filtering)."""
    pred, y = _check_labels(pred, y)
    return float(np.mean(pred == y))


def error_rate(pred, y) -> float:
    """``1 - classification_accuracy(pred, y)``."""
    return 1.0 - classification_accuracy(pred, y)


def r2_score(pred, y) -> float:
    r"""Coefficient of determination :math:`1 - \sum (y - \hat y)^2 / \sum (y -
    \bar y)^2`.

    Note the argument order: predictions first, like :func:`classification_accuracy`
    (``sklearn.metrics.r2_score(y, pred)`` takes the truth first). Constant ``y``
    raises ``ValueError`` (R² undefined).
    """
    pred, y = _check_real(pred, y)
    ss_tot = np.sum((y - y.mean()) ** 2)
    if ss_tot == 0:
        raise ValueError("y is constant; R^2 is undefined")
    return float(1.0 - np.sum((y - pred) ** 2) / ss_tot)


def root_mean_squared_error(pred, y) -> float:
    r""":math:`\sqrt{\tfrac1n \sum_i (y_i - \hat y_i)^2}` (predictions first, like
    :func:`r2_score`); non-finite values raise ``ValueError``."""
    pred, y = _check_real(pred, y)
    return float(np.sqrt(np.mean((y - pred) ** 2)))


def pairwise_symmetric_kl(topic_dists, labels) -> float:
    r"""Seed 001 Sec. 5.2: mean symmetric KL between class-mean topic distributions.

    Each row of ``topic_dists`` (non-negative, e.g. :math:`E[H]` turned into a
    distribution by the caller) is normalised to sum to 1; :math:`p_c` is the mean of
    the rows of class ``c`` (images with label ``-1`` are ignored). The score is

    .. math:: \frac{1}{\binom{C}{2}} \sum_{a < b} \tfrac12
              \big(KL(p_a \| p_b) + KL(p_b \| p_a)\big)

    over the ``C`` classes present, with logs of :math:`\max(p, 10^{-12})`.
    Larger = more discriminative latent representations.
    """
    x = np.asarray(topic_dists, dtype=np.float64)
    labels = np.asarray(labels)
    if x.ndim != 2 or labels.shape != (x.shape[0],):
        raise ValueError(
            f"topic_dists must be [images, topics] and labels [images], got "
            f"{x.shape} and {labels.shape}"
        )
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError(
            "topic_dists must be finite and non-negative (turn E[H] into a "
            "distribution first, e.g. with a softmax)"
        )
    sums = x.sum(axis=1, keepdims=True)
    if np.any(sums[labels >= 0] <= 0):
        raise ValueError("a row of topic_dists sums to 0 and cannot be normalised")
    classes = np.unique(labels[labels >= 0])
    if len(classes) < 2:
        raise ValueError("pairwise KL needs at least two classes")
    p = x / np.where(sums > 0, sums, 1.0)
    means = np.stack([p[labels == c].mean(axis=0) for c in classes])
    logs = np.log(np.maximum(means, KL_EPS))
    # symmetric KL(a||b)+KL(b||a) = sum_k (p_a - p_b)(log p_a - log p_b)
    diff = means[:, None, :] - means[None, :, :]
    sym = np.sum(diff * (logs[:, None, :] - logs[None, :, :]), axis=2)
    iu = np.triu_indices(len(classes), k=1)
    return float(np.mean(0.5 * sym[iu]))


# ------------------------------------------------------------------------ the report
def annotation_report(scores, truth, n: int = 5) -> dict:
    """All annotation metrics of the evaluation CLI in one dict.

    Keys (with ``n`` = 5 by default): ``accuracy``, ``complete_length``, ``f1@n``,
    ``precision@n``, ``recall@n`` (per image, :func:`image_prf_at_n`),
    ``word_precision@n``, ``word_recall@n``, ``word_f1@n``, ``n_plus@n``
    (:func:`word_prf_at_n`), ``map`` (images ranked per word), ``miap``.
    """
    scores, truth = _check_pair(scores, truth)
    ranks = _rank_positions(scores)  # one ranking of the words, shared
    p, r, f1 = _image_prf(ranks, truth, n)
    words = _word_prf(ranks, truth, n)
    return {
        "accuracy": _accuracy(ranks, truth),
        "complete_length": _complete_length(ranks, truth),
        f"f1@{n}": f1,
        f"precision@{n}": p,
        f"recall@{n}": r,
        f"word_precision@{n}": words["precision"],
        f"word_recall@{n}": words["recall"],
        f"word_f1@{n}": words["f1"],
        f"n_plus@{n}": words["n_plus"],
        "map": mean_average_precision(scores, truth),
        "miap": mean_interpolated_average_precision(scores, truth),
    }


def regression_report(pred, y) -> dict:
    """The regression metrics of the evaluation CLI: ``rmse``
    (:func:`root_mean_squared_error`) and ``r2`` (:func:`r2_score`; NaN when ``y``
    is constant, where R² is undefined)."""
    rmse = root_mean_squared_error(pred, y)
    try:
        r2 = r2_score(pred, y)
    except ValueError:  # constant truth: R^2 undefined (non-finite values raised above)
        r2 = float("nan")
    return {"rmse": rmse, "r2": r2}
