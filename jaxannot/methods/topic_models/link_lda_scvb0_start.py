r"""SCVB0's start: topic-word counts on images far apart, and the choice among
several starts.

:func:`initial_counts` runs a farthest-first traversal (Gonzalez 1985): among at
most ``sample`` random images with tokens, a random first, then each time the image
farthest from its nearest pick so far, in squared Hellinger distance summed over
the views (one minus the Bhattacharyya coefficient, from the image's non-zeros).
Topic :math:`k` starts at half its image's word frequencies, half the corpus's, and
each word's corpus count is split over the topics in proportion to them times a
:math:`U(0.5, 1)` draw (apart even when two picks are alike), per view
:math:`[V_v, K]`. :func:`best_start` runs every start a few passes and keeps the
one whose last pass predicts its tokens best
(:func:`~jaxannot.methods.topic_models.link_lda_scvb0.fit_scvb0`).

References
----------
T. F. Gonzalez. Clustering to minimize the maximum intercluster distance.
Theoretical Computer Science 38, 1985.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["best_start", "initial_counts"]

_TINY = 1e-30


def initial_counts(
    rng_key: jax.Array,
    ids: Sequence[jax.Array],
    cnts: Sequence[jax.Array],
    vocab_sizes: Sequence[int],
    num_topics: int,
    sample: int = 10_000,
) -> tuple[jax.Array, ...]:
    """Topic-word counts started on ``num_topics`` images far apart (module
    docstring).

    Parameters
    ----------
    rng_key : PRNGKey
        Draws the sample, the first pick and the split of the corpus's counts.
    ids, cnts : sequence of [images, L_v] arrays
        Per view, each image's word ids and their counts (padded bags,
        :func:`~jaxannot.methods.topic_models.link_lda_bags.sparse_bags`).
    vocab_sizes : sequence of int
        Per view, its vocabulary's size :math:`V_v`.
    num_topics : int
        :math:`K`, the picks.
    sample : int
        At most this many random images (with tokens) to pick from.

    Returns
    -------
    tuple of jax.Array
        Per view, the topic-word counts ``[V_v, K]`` (zeros without tokens).
    """
    k_sample, k_first, k_split = jax.random.split(rng_key, 3)
    lengths = sum(c.sum(1) for c in cnts)
    real = int((lengths > 0).sum())
    if real == 0:  # no tokens: nothing to split
        return tuple(jnp.zeros((v, num_topics)) for v in vocab_sizes)
    rows = jax.random.choice(
        k_sample,
        lengths.shape[0],
        (min(sample, real),),
        replace=False,
        p=(lengths > 0) / real,
    )
    totals = [
        jax.ops.segment_sum(c.reshape(-1), i.reshape(-1), v)
        for i, c, v in zip(ids, cnts, vocab_sizes, strict=True)
    ]
    s_ids = [i[rows] for i in ids]
    s_p = [c[rows] / jnp.maximum(c[rows].sum(1, keepdims=True), 1.0) for c in cnts]

    def profile(r):
        return [
            0.5 * jnp.zeros(v).at[i[r]].add(p[r]) + 0.5 * t / t.sum()
            for i, p, v, t in zip(s_ids, s_p, vocab_sizes, totals, strict=True)
        ]

    def distance(q):
        # 1 - Bhattacharyya coefficient per view, from the image's non-zeros
        return sum(
            1.0 - jnp.sqrt(p * qv[i]).sum(1)
            for i, p, qv in zip(s_ids, s_p, q, strict=True)
        )

    seeds = [profile(jax.random.randint(k_first, (), 0, rows.shape[0]))]
    nearest = distance(seeds[0])
    for _ in range(num_topics - 1):
        seeds.append(profile(jnp.argmax(nearest)))
        nearest = jnp.minimum(nearest, distance(seeds[-1]))
    keys = jax.random.split(k_split, len(totals))
    out = []
    for v, (key, t) in enumerate(zip(keys, totals, strict=True)):
        u = jax.random.uniform(key, (t.shape[0], num_topics), minval=0.5, maxval=1.0)
        q = jnp.stack([seed[v] for seed in seeds], 1) * u  # [V_v, K]
        out.append(t[:, None] * q / jnp.maximum(q.sum(1, keepdims=True), _TINY))
    return tuple(out)


def best_start(
    run: Callable,
    counts_of: Callable[[int], tuple],
    restarts: int,
    shape: tuple[int, int],
    select_after: int,
) -> tuple[int, tuple, Any]:
    """``select_after`` passes from each start; the one whose last pass predicts
    its tokens best.

    Parameters
    ----------
    run : callable
        ``run(carry, start, passes, desc) -> (carry, info)``: ``passes`` SCVB0
        passes from ``carry`` in the order of start ``start``; ``info.objective``
        per pass.
    counts_of : callable
        ``counts_of(start)``: start ``start``'s topic-word counts
        (:func:`initial_counts`), made when its turn comes.
    restarts : int
        The starts, ``0 .. restarts - 1``.
    shape : tuple of int
        ``(rows, K)`` of the image counts, which start at 0: the images padded to
        whole minibatches, and the topics.
    select_after : int
        Passes of every start before the choice.

    Returns
    -------
    chosen : int
        The chosen start.
    carry : tuple
        Its loop carry after those passes.
    info
        Its per-pass info.
    """
    n_dk = jnp.zeros(shape, jnp.float32)
    best = None
    for start in range(restarts):
        tried = run(
            (counts_of(start), n_dk, jnp.int32(0)),
            start,
            select_after,
            f"scvb0 start {start + 1}/{restarts}",
        )
        score = float(tried[1].objective[-1])
        if best is None or score > best[0]:
            best = (score, start, tried)
    _, chosen, (carry, info) = best
    return chosen, carry, info
