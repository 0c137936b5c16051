"""The input checks and rankings every metric of :mod:`jaxannot.metrics` shares.

- :func:`_check_pair`, :func:`_check_vector_pair`: ``scores`` and ``truth`` checked
  (shapes, finite values) and ``truth`` read as present where > 0.
- :func:`_rank_positions`, :func:`_top_n`: the words of each image ranked by a stable
  sort of ``-scores`` (ties: lower word index first) and their top ``n``.
- :func:`_tie_groups`, :func:`_precision_recall_curves`: the items of each column
  ranked by decreasing score with the groups of tied scores, from which the per-word
  ranking metrics take expectations over tie orders (:mod:`~jaxannot.metrics.per_word`).

The names are private to the package: the metrics modules import them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__: list[str] = []


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
