"""The input checks and rankings every metric of :mod:`jaxannot.metrics` shares.

- :func:`check_pair`, :func:`check_vector_pair`: ``scores`` and ``truth`` checked
  (shapes, finite values) and ``truth`` read as present where > 0;
  :func:`checked_ranks`, :func:`rows_with_truth`: the checked pair as ranks, and the
  images the per-image metrics average over.
- :func:`rank_positions`, :func:`top_n`: the words of each image ranked by a stable
  sort of ``-scores`` (ties: lower word index first) and their top ``n``.
- :func:`tie_groups`, :func:`precision_recall_curves`, :func:`ranked_columns`: the
  items of each column ranked by decreasing score with the groups of tied scores, from
  which the per-word ranking metrics take expectations over tie orders
  (:mod:`~jaxannot.metrics.per_word`).

They are the package's internal API: the metrics modules import them, and
:mod:`jaxannot.metrics` does not export them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike

__all__ = [
    "TieGroups",
    "check_pair",
    "check_vector_pair",
    "checked_ranks",
    "precision_recall_curves",
    "rank_positions",
    "ranked_columns",
    "rows_with_truth",
    "tie_groups",
    "top_n",
]


def check_pair(scores: ArrayLike, truth: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``scores`` and ``truth`` checked: 2-D ``[images, words]`` of equal shapes,
    finite, ``truth`` numeric or boolean.

    Parameters
    ----------
    scores : array_like [images, words]
        The scores.
    truth : array_like [images, words]
        The ground truth (a word is present where > 0).

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        The scores as float64 and the truth as bool.

    Raises
    ------
    ValueError
        When a check fails, naming it.
    """
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


def check_vector_pair(s: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """One column's scores and labels checked (1-D, equal lengths) and made columns.

    Parameters
    ----------
    s : array_like [items]
        The scores.
    y : array_like [items]
        The labels.

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        ``s`` as float64 ``[items, 1]`` and ``y`` as ``[items, 1]``.

    Raises
    ------
    ValueError
        When they are not 1-D of equal length.
    """
    s, y = np.asarray(s, dtype=np.float64), np.asarray(y)
    if s.ndim != 1 or s.shape != y.shape:
        raise ValueError(
            f"scores and labels must be 1-D of equal length, got {s.shape} and "
            f"{y.shape}"
        )
    return s[:, None], y[:, None]


def rank_positions(scores: np.ndarray) -> np.ndarray:
    """0-based rank of every word in its row (ties: lower word index first).

    Parameters
    ----------
    scores : numpy.ndarray [images, words]
        The scores.

    Returns
    -------
    numpy.ndarray [images, words]
        The rank of each word by decreasing score (a stable sort of ``-scores``).
    """
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(scores.shape[1])[None, :], axis=1)
    return ranks


def top_n(ranks: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` top-ranked words of each image.

    Parameters
    ----------
    ranks : numpy.ndarray [images, words]
        0-based ranks (:func:`rank_positions`).
    n : int
        The words kept, in ``[1, words]``.

    Returns
    -------
    numpy.ndarray [images, words]
        Boolean, True for the ``n`` best-ranked words of each row.

    Raises
    ------
    ValueError
        When ``n`` is out of range.
    """
    if not 1 <= n <= ranks.shape[1]:
        raise ValueError(
            f"n must be in [1, {ranks.shape[1]}] (number of words), got {n}"
        )
    return ranks < n


def checked_ranks(scores: ArrayLike, truth: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The checked pair (:func:`check_pair`), with the scores as per-image ranks.

    Parameters
    ----------
    scores : array_like [images, words]
        The scores.
    truth : array_like [images, words]
        The ground truth.

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        ``(ranks, truth)``: :func:`rank_positions` of the scores and the boolean
        truth.
    """
    scores, truth = check_pair(scores, truth)
    return rank_positions(scores), truth


def rows_with_truth(truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The number of true words :math:`r_i` of each image, and the images with at
    least one (:math:`I^+`, which the per-image metrics average over).

    Parameters
    ----------
    truth : numpy.ndarray [images, words]
        The boolean ground truth.

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        ``r`` [images] and ``keep`` [images], boolean.

    Raises
    ------
    ValueError
        When no image has a true word.
    """
    r = truth.sum(axis=1)
    keep = r > 0
    if not keep.any():
        raise ValueError("no image has a true word; the metric is undefined")
    return r, keep


def ranked_columns(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per column, the truth sorted by decreasing score (ties: lower row first).

    Parameters
    ----------
    scores : numpy.ndarray [items, columns]
        The scores.
    truth : numpy.ndarray [items, columns]
        The ground truth.

    Returns
    -------
    numpy.ndarray [items, columns]
        ``truth`` in each column's ranked order.
    """
    order = np.argsort(-scores, axis=0, kind="stable")
    return np.take_along_axis(truth, order, axis=0)


class TieGroups(NamedTuple):
    """Every column ranked by decreasing score, with its groups of tied scores.

    All arrays are ``[items, columns]`` in ranked order; ``start`` and ``end`` are the
    0-based ranks of the first and last item of the tie group of each rank.

    Parameters
    ----------
    rel : numpy.ndarray [items, columns]
        The relevance (truth) of each rank, float64.
    hits : numpy.ndarray [items, columns]
        The relevant items up to each rank (cumulative ``rel``).
    start : numpy.ndarray [items, columns]
        The first rank of each rank's tie group.
    end : numpy.ndarray [items, columns]
        Its last rank.
    npos : numpy.ndarray [columns]
        The relevant items of each column.
    """

    rel: np.ndarray
    hits: np.ndarray
    start: np.ndarray
    end: np.ndarray
    npos: np.ndarray


def tie_groups(scores: np.ndarray, truth: np.ndarray) -> TieGroups:
    """Every column ranked by decreasing score, with its groups of tied scores.

    Parameters
    ----------
    scores, truth
        As :func:`ranked_columns` takes them.

    Returns
    -------
    TieGroups
        The ranked relevance, hits and tie groups.
    """
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
    return TieGroups(rel, np.cumsum(rel, axis=0), start, end, truth.sum(axis=0))


def precision_recall_curves(
    scores: np.ndarray, truth: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Precision and recall after each rank, for every column.

    Parameters
    ----------
    scores, truth : numpy.ndarray [images, words]
        The scores and the ground truth.

    Returns
    -------
    tuple of numpy.ndarray
        ``(at_end, precision, recall, npos)``: ``at_end`` True where the rank closes
        a group of tied scores, the precision :math:`h_k / k` and recall
        :math:`h_k / n^+` after the ``k`` first ranks ([images, words] each), and
        the positives :math:`n^+` per column.
    """
    groups = tie_groups(scores, truth)
    precision = groups.hits / np.arange(1, len(groups.rel) + 1)[:, None]
    recall = groups.hits / np.maximum(groups.npos, 1)[None, :]
    at_end = groups.end == np.arange(len(groups.rel))[:, None]
    return at_end, precision, recall, groups.npos
