r"""Single-stage queries on a :class:`~jaxannot.retrieval.index.RetrievalIndex`
(EMML §4.1–§4.4).

Each reads the VReps, ``options.top_vreps`` neighbour lists and their word lists,
never the database itself, and uses the kernel the index was built with.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxannot.retrieval.index import (
    DEFAULT_OPTIONS,
    QueryOptions,
    RetrievalIndex,
    merged_word_scores,
)
from jaxannot.types import Array, ArrayLike

__all__ = [
    "annotation_scores",
    "annotate",
    "word_query",
    "image_retrieval",
    "multimodal_query",
]

# the queries are jitted with their (hashable) options static
_jit_with_options = functools.partial(jax.jit, static_argnames=("options",))


def best_words(scores: Array, top_words: int) -> tuple[Array, Array]:
    """The ``top_words`` best word ids (int32) and their scores along the last axis."""
    best, ids = jax.lax.top_k(scores, min(top_words, scores.shape[-1]))
    return ids.astype(jnp.int32), best


@_jit_with_options
def annotation_scores(
    index: RetrievalIndex, images: ArrayLike, *, options: QueryOptions = DEFAULT_OPTIONS
) -> Array:
    """§4.1 merged word scores ``[queries, words]`` of query images ``[queries, dims]``
    (dense; for metrics): ``options.top_vreps`` VReps merged. Cost
    O(vreps x dims + top_vreps x words) per query."""
    q = jnp.atleast_2d(jnp.asarray(images, jnp.float32))
    return merged_word_scores(
        index.vrep_features,
        index.vrep_word_scores,
        q,
        index.gamma,
        index.kernel,
        options.top_vreps,
    )


@_jit_with_options
def annotate(
    index: RetrievalIndex, images: ArrayLike, *, options: QueryOptions = DEFAULT_OPTIONS
) -> tuple[Array, Array]:
    """§4.1 annotation: the top ``options.top_words`` words of each query image
    (``images``: ``[queries, dims]``).

    Returns
    -------
    word_ids : Int[Array, "queries top_words"]
    scores : Float[Array, "queries top_words"]
    """
    s = annotation_scores(index, images, options=options)
    return best_words(s, options.top_words)


def annotation_weights(
    index: RetrievalIndex, query: ArrayLike, options: QueryOptions
) -> tuple[Array, Array]:
    """The annotation :math:`A` of one query image ``[dims]`` as 0/1 weights over the
    vocabulary, and its word ids (the first step of §4.3 and §4.5)."""
    s = annotation_scores(index, query, options=options)[0]
    ids, _ = best_words(s, options.top_words)
    return jnp.zeros_like(s).at[ids].set(1.0), ids


def _merge_candidates(ids: Array, scores: Array, top: int) -> tuple[Array, Array]:
    """Sum the scores of duplicate ids (``-1`` ignored) and keep the best ``top``."""
    ids = ids.reshape(-1)
    scores = jnp.where(ids >= 0, scores.reshape(-1), 0.0)
    order = jnp.argsort(ids)
    ids, scores = ids[order], scores[order]
    start = jnp.concatenate([jnp.ones((1,), bool), ids[1:] != ids[:-1]])
    seg = jnp.cumsum(start) - 1
    sums = jax.ops.segment_sum(scores, seg, num_segments=ids.shape[0])
    merged = jnp.where(start & (ids >= 0), sums[seg], -jnp.inf)
    best, pos = jax.lax.top_k(merged, min(top, ids.shape[0]))
    return jnp.where(jnp.isfinite(best), ids[pos], -1), best


def _word_query_candidates(index: RetrievalIndex, weights: Array, top_vreps: int):
    vrep_scores = index.vrep_word_scores @ weights  # [vreps]
    top_s, top_v = jax.lax.top_k(vrep_scores, min(top_vreps, vrep_scores.shape[0]))
    ids = index.neighbour_ids[top_v]  # [top_vreps, L]
    scores = top_s[:, None] * index.neighbour_similarities[top_v]
    return ids, scores, top_v


@_jit_with_options
def word_query(
    index: RetrievalIndex,
    word_weights: ArrayLike,
    *,
    options: QueryOptions = DEFAULT_OPTIONS,
) -> tuple[Array, Array]:
    """§4.2 word query: the neighbour lists of the ``options.top_vreps`` VReps that
    score the words highest, merged.

    Parameters
    ----------
    index : RetrievalIndex
    word_weights : Float[Array, "words"]
        Query weights :math:`\\omega` over the vocabulary (one-hot for one word; use
        ``jax.nn.one_hot(j, W)``).
    options : QueryOptions
        ``top_vreps`` and ``top_images`` are used.

    Returns
    -------
    image_ids : Int[Array, "top_images"]
        Database rows, best first (``-1`` when fewer candidates exist).
    scores : Float[Array, "top_images"]
    """
    w = jnp.asarray(word_weights, jnp.float32)
    ids, scores, _ = _word_query_candidates(index, w, options.top_vreps)
    return _merge_candidates(ids, scores, options.top_images)


def _retrieval_candidates(index: RetrievalIndex, query: Array, options: QueryOptions):
    """§4.3 for one query image: T (word query on its annotation) filtered by S."""
    weights, ann_ids = annotation_weights(index, query, options)
    ids, scores, top_v = _word_query_candidates(index, weights, options.top_vreps)
    rows = index.neighbour_words[top_v]  # [tv, L, m]: the images' word lists
    in_s = jnp.any((rows[..., None] == ann_ids) & (rows[..., None] >= 0), axis=(-1, -2))
    keep = in_s & (ids >= 0)
    return jnp.where(keep, ids, -1), jnp.where(keep, scores, 0.0)


@_jit_with_options
def image_retrieval(
    index: RetrievalIndex, query: ArrayLike, *, options: QueryOptions = DEFAULT_OPTIONS
) -> tuple[Array, Array]:
    """§4.3 image retrieval :math:`R = S \\cap T` for one query image ``[dims]``.

    Returns the top ``options.top_images`` database rows (``-1`` padding) and their
    scores; the query's annotation :math:`A` has ``options.top_words`` words.
    """
    q = jnp.asarray(query, jnp.float32)
    ids, scores = _retrieval_candidates(index, q, options)
    return _merge_candidates(ids, scores, options.top_images)


@_jit_with_options
def multimodal_query(
    index: RetrievalIndex,
    images: ArrayLike,
    image_weights: ArrayLike,
    word_weights: ArrayLike,
    *,
    options: QueryOptions = DEFAULT_OPTIONS,
) -> tuple[Array, Array]:
    """§4.4 multimodal query: images and words with weights, retrievals merged.

    Parameters
    ----------
    index : RetrievalIndex
    images : Float[Array, "query_images dims"]
    image_weights : Float[Array, "query_images"]
    word_weights : Float[Array, "words"]
        Weights of query words (zero vector for none).
    options : QueryOptions

    Returns
    -------
    image_ids, scores : the top ``options.top_images`` merged results.
    """
    x = jnp.atleast_2d(jnp.asarray(images, jnp.float32))
    a = jnp.asarray(image_weights, jnp.float32)
    img_ids, img_scores = jax.vmap(lambda q: _retrieval_candidates(index, q, options))(
        x
    )
    img_scores = img_scores * a[:, None, None]
    w = jnp.asarray(word_weights, jnp.float32)
    w_ids, w_scores, _ = _word_query_candidates(index, w, options.top_vreps)
    w_scores = jnp.where(jnp.any(w != 0), w_scores, 0.0)
    ids = jnp.concatenate([img_ids.reshape(-1), w_ids.reshape(-1)])
    scores = jnp.concatenate([img_scores.reshape(-1), w_scores.reshape(-1)])
    return _merge_candidates(ids, scores, options.top_images)
