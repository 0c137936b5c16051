r"""The annotation metrics of the five papers, defined once (numpy in, floats out).

The per-image metrics (Accuracy, Complete Length, P/R/F1@N, top-N precision/recall)
are in :mod:`~jaxannot.metrics.per_image`, the per-word ones (P/R/F1@N per word, AP,
MAP, iAP, MiAP, P@k) in :mod:`~jaxannot.metrics.per_word`; this module holds the
classification and regression metrics, the pairwise KL of seed 001 and the reports
that gather them.

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
- Chen, Zhu, Sun, Xing, "Large-Margin Predictive Latent Subspace Learning for Multiview
  Data Analysis", TPAMI 2012 (seed 001): pairwise average KL of Sec. 5.2.
- The papers of the per-image and per-word metrics (seeds 000, 001, 002, 004; Feng et
  al. 2004; Manning et al. 2008; McSherry & Najork 2008) are cited in
  :mod:`~jaxannot.metrics.per_image` and :mod:`~jaxannot.metrics.per_word`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from jaxannot.metrics.per_image import (
    accuracy_of_ranks,
    complete_length_of_ranks,
    image_prf_of_ranks,
)
from jaxannot.metrics.per_word import (
    mean_average_precision,
    mean_interpolated_average_precision,
    word_prf_of_ranks,
)
from jaxannot.metrics.ranking import check_pair, rank_positions

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
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


def classification_accuracy(pred: ArrayLike, y: ArrayLike) -> float:
    """Fraction of ``pred == y`` (pass only evaluated images: no -1 filtering)."""
    pred, y = _check_labels(pred, y)
    return float(np.mean(pred == y))


def error_rate(pred: ArrayLike, y: ArrayLike) -> float:
    """``1 - classification_accuracy(pred, y)``."""
    return 1.0 - classification_accuracy(pred, y)


def r2_score(pred: ArrayLike, y: ArrayLike) -> float:
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


def root_mean_squared_error(pred: ArrayLike, y: ArrayLike) -> float:
    r""":math:`\sqrt{\tfrac1n \sum_i (y_i - \hat y_i)^2}` (predictions first, like
    :func:`r2_score`); non-finite values raise ``ValueError``."""
    pred, y = _check_real(pred, y)
    return float(np.sqrt(np.mean((y - pred) ** 2)))


def pairwise_symmetric_kl(topic_dists: ArrayLike, labels: ArrayLike) -> float:
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
def annotation_report(scores: ArrayLike, truth: ArrayLike, n: int = 5) -> dict:
    """All annotation metrics of the evaluation CLI in one dict.

    Keys (with ``n`` = 5 by default): ``accuracy``, ``complete_length``, ``f1@n``,
    ``precision@n``, ``recall@n`` (per image, :func:`image_prf_at_n`),
    ``word_precision@n``, ``word_recall@n``, ``word_f1@n``, ``n_plus@n``
    (:func:`word_prf_at_n`), ``map`` (images ranked per word), ``miap``.
    """
    scores, truth = check_pair(scores, truth)
    ranks = rank_positions(scores)  # one ranking of the words, shared
    p, r, f1 = image_prf_of_ranks(ranks, truth, n)
    words = word_prf_of_ranks(ranks, truth, n)
    return {
        "accuracy": accuracy_of_ranks(ranks, truth),
        "complete_length": complete_length_of_ranks(ranks, truth),
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


def regression_report(pred: ArrayLike, y: ArrayLike) -> dict:
    """The regression metrics of the evaluation CLI: ``rmse``
    (:func:`root_mean_squared_error`) and ``r2`` (:func:`r2_score`; NaN when ``y``
    is constant, where R² is undefined)."""
    rmse = root_mean_squared_error(pred, y)
    try:
        r2 = r2_score(pred, y)
    except ValueError:  # constant truth: R^2 undefined (non-finite values raised above)
        r2 = float("nan")
    return {"rmse": rmse, "r2": r2}
