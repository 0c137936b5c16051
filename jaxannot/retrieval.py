r"""Multimodal queries with query time independent of the database size (EMML §4).

A trained structured-output model gives, for every VRep :math:`v`, the word scores
:math:`F_{vj} = f(\mathbf x_v, \mathbf e_j)` (eq. 1). At *indexing time*
(:func:`build_index`) we precompute, blockwise over the database,

- for every VRep its neighbour list: the ``neighbours`` database images most similar to
  it, with their similarities :math:`k(\mathbf x_v, \mathbf x_t)`;
- for every database image its annotation word list (its given words, or its top words
  by the annotation rule below) — the sets :math:`S_j` of §4.3.

Every query then touches only the VReps, a fixed number of neighbour lists and a fixed
number of database rows, so its cost does not grow with the database:

- **annotation** (§4.1): the ``top_vreps`` VReps most similar to the query; word score
  :math:`s_j = \sum_{v \in \text{top}} k(\mathbf x, \mathbf x_v) F_{vj}` (the merge of
  their ranking lists); the top ``top_words`` words.
- **word query** (§4.2): the ``top_vreps`` VReps with the largest :math:`F_{vj}`
  (weights :math:`\omega_j` for several words: :math:`\sum_j \omega_j F_{vj}`); image
  score :math:`\sum_v F_{v\cdot}\, k(\mathbf x_v, \mathbf x_t)` over their neighbour
  lists (duplicates summed); the top ``top_images`` images.
- **image retrieval** (§4.3): annotate the query image (words :math:`A`), word-query
  :math:`A` (the ranked set :math:`T`), keep the images whose annotation shares a word
  with :math:`A` (:math:`S = \cup_{j\in A} S_j`): :math:`R = S \cap T`.
- **multimodal query** (§4.4): a weighted linear combination of the image-retrieval
  scores of some images and the word-query scores of some words, merged.
- **cross-stage inference** (§4.5): two indexes (stages) and a user word-to-word
  ontology table; image→word annotates in stage A and maps the words to stage B,
  word→image maps the words then word-queries stage B, image→image annotates in A,
  maps, and retrieves in B.

Patent notice: the EMML method is the subject of US patent 8,463,053 B1 (related: US
8,923,630 and US 10,007,679).

References
----------
Z. Guo, Z. Zhang, E. P. Xing, C. Faloutsos. Multimodal Data Mining in a Multimedia
Database Based on Structured Max Margin Learning. ACM TKDD 10(3), 2016 (Section 4).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.models.structured_output import KERNELS, kernel_matrix
from jaxannot.types import Array, ArrayLike

__all__ = [
    "RetrievalIndex",
    "build_index",
    "annotation_scores",
    "annotate",
    "word_query",
    "image_retrieval",
    "multimodal_query",
    "ontology_matrix",
    "map_words",
    "cross_stage_annotate",
    "cross_stage_word_query",
    "cross_stage_image_query",
]


class RetrievalIndex(NamedTuple):
    """What queries read: VReps, their word scores and per-VRep neighbour lists.

    Attributes
    ----------
    vrep_features : Float[Array, "vreps dims"]
    vrep_word_scores : Float[Array, "vreps words"]
        :math:`F_{vj}`.
    neighbour_ids : Int[Array, "vreps neighbours"]
        Database rows most similar to each VRep (most similar first).
    neighbour_similarities : Float[Array, "vreps neighbours"]
    image_words : Int[Array, "images annotation_words"]
        Each database image's annotation word ids (``-1`` padding), the sets
        :math:`S_j`.
    neighbour_words : Int[Array, "vreps neighbours annotation_words"]
        ``image_words`` of every neighbour-list entry, copied at indexing time so
        that image retrieval reads only the selected VReps' blocks (its memory
        traffic, not just its arithmetic, is independent of the database size).
    gamma : Float[Array, ""]
        RBF width (unused for the linear kernel).
    """

    vrep_features: Array
    vrep_word_scores: Array
    neighbour_ids: Array
    neighbour_similarities: Array
    image_words: Array
    neighbour_words: Array
    gamma: Array


def _check_kernel(kernel: str) -> None:
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; valid: {', '.join(KERNELS)}")


@functools.partial(jax.jit, static_argnames=("kernel", "k"))
def _merge_block_topk(best_s, best_i, vreps, block, offset, valid, gamma, kernel, k):
    sims = kernel_matrix(vreps, block, kernel, gamma)
    sims = jnp.where(valid[None, :], sims, -jnp.inf)
    ids = offset + jnp.arange(block.shape[0], dtype=jnp.int32)
    all_s = jnp.concatenate([best_s, sims], axis=1)
    all_i = jnp.concatenate([best_i, jnp.broadcast_to(ids, sims.shape)], axis=1)
    top_s, pos = jax.lax.top_k(all_s, k)
    return top_s, jnp.take_along_axis(all_i, pos, axis=1)


@functools.partial(jax.jit, static_argnames=("kernel", "top_vreps", "top_words"))
def _block_annotation_ids(vreps, scores, block, gamma, kernel, top_vreps, top_words):
    s = _merged_word_scores(vreps, scores, block, gamma, kernel, top_vreps)
    return jax.lax.top_k(s, top_words)[1].astype(jnp.int32)


def _pad_rows(x: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[0]
    valid = np.arange(size) < n
    if n == size:
        return x, valid
    pad = np.zeros((size - n,) + x.shape[1:], x.dtype)
    return np.concatenate([x, pad]), valid


def build_index(
    vrep_features: ArrayLike,
    vrep_word_scores: ArrayLike,
    database_features: ArrayLike,
    *,
    database_words: ArrayLike | None = None,
    kernel: str = "rbf",
    gamma: float = 1.0,
    neighbours: int = 50,
    annotation_words: int = 5,
    top_vreps: int = 5,
    block_size: int = 65536,
) -> RetrievalIndex:
    """Index a database for constant-time queries (the indexing-time work of §4.2).

    Parameters
    ----------
    vrep_features : [vreps, dims]
    vrep_word_scores : [vreps, words]
        :math:`F`, e.g. ``EMMLState.scores`` or a fitted model's VRep scores.
    database_features : [images, dims]
        Processed in blocks of ``block_size`` rows (memory ``vreps x block_size``).
    database_words : [images, words], optional
        The database's known words (the sets :math:`S_j`); when absent each image is
        annotated with its top ``annotation_words`` words by :func:`annotation_scores`.
    kernel, gamma : the similarity :math:`k` (same as in training).
    neighbours : int
        Length of every VRep's neighbour list.
    annotation_words : int
        Words kept per database image.
    top_vreps : int
        VReps merged when annotating database images.
    block_size : int

    Returns
    -------
    RetrievalIndex
    """
    _check_kernel(kernel)
    v = jnp.asarray(vrep_features, jnp.float32)
    f = jnp.asarray(vrep_word_scores, jnp.float32)
    x = np.asarray(database_features, np.float32)
    n_img = x.shape[0]
    if v.shape[0] != f.shape[0]:
        raise ValueError(
            f"vrep_features has {v.shape[0]} rows but vrep_word_scores {f.shape[0]}"
        )
    if x.ndim != 2 or x.shape[1] != v.shape[1]:
        raise ValueError(
            f"database_features must be [images, {v.shape[1]}], got {x.shape}"
        )
    if n_img == 0:
        raise ValueError("the database is empty")
    k = min(neighbours, n_img)
    m = min(annotation_words, f.shape[1])
    tv = min(top_vreps, v.shape[0])
    g = jnp.asarray(gamma, jnp.float32)
    bs = min(block_size, n_img)
    best_s = jnp.full((v.shape[0], k), -jnp.inf, jnp.float32)
    best_i = jnp.full((v.shape[0], k), -1, jnp.int32)
    ann = []
    for start in range(0, n_img, bs):
        block, valid = _pad_rows(x[start : start + bs], bs)
        best_s, best_i = _merge_block_topk(
            best_s,
            best_i,
            v,
            jnp.asarray(block),
            start,
            jnp.asarray(valid),
            g,
            kernel,
            k,
        )
        if database_words is None:
            ids = _block_annotation_ids(v, f, jnp.asarray(block), g, kernel, tv, m)
            ann.append(np.asarray(ids)[valid])
    if database_words is None:
        image_words = np.concatenate(ann)
    else:
        image_words = _word_lists(np.asarray(database_words), n_img)
    image_words = jnp.asarray(image_words)
    neighbour_words = image_words[jnp.maximum(best_i, 0)]
    return RetrievalIndex(v, f, best_i, best_s, image_words, neighbour_words, g)


def _word_lists(words: np.ndarray, n_img: int) -> np.ndarray:
    if words.shape[0] != n_img:
        raise ValueError(
            f"database_words has {words.shape[0]} rows but the database {n_img}"
        )
    width = max(int((words > 0).sum(1).max()), 1)
    out = np.full((n_img, width), -1, np.int32)
    for r in range(n_img):
        ids = np.flatnonzero(words[r] > 0)
        out[r, : ids.size] = ids
    return out


def _merged_word_scores(vreps, scores, queries, gamma, kernel, top_vreps):
    sims = kernel_matrix(queries, vreps, kernel, gamma)  # [q, vreps]
    top_s, top_v = jax.lax.top_k(sims, top_vreps)
    return jnp.einsum("qk,qkw->qw", top_s, scores[top_v])


@functools.partial(jax.jit, static_argnames=("kernel", "top_vreps"))
def annotation_scores(
    index: RetrievalIndex,
    queries: ArrayLike,
    *,
    kernel: str = "rbf",
    top_vreps: int = 5,
) -> Array:
    """§4.1 merged word scores ``[queries, words]`` of query images (dense; for
    metrics). Cost O(vreps x dims + top_vreps x words) per query."""
    q = jnp.atleast_2d(jnp.asarray(queries, jnp.float32))
    tv = min(top_vreps, index.vrep_features.shape[0])
    return _merged_word_scores(
        index.vrep_features, index.vrep_word_scores, q, index.gamma, kernel, tv
    )


@functools.partial(jax.jit, static_argnames=("kernel", "top_vreps", "top_words"))
def annotate(
    index: RetrievalIndex,
    queries: ArrayLike,
    *,
    kernel: str = "rbf",
    top_vreps: int = 5,
    top_words: int = 5,
) -> tuple[Array, Array]:
    """§4.1 annotation: the top ``top_words`` word ids and scores of each query image.

    Returns
    -------
    word_ids : Int[Array, "queries top_words"]
    scores : Float[Array, "queries top_words"]
    """
    s = annotation_scores(index, queries, kernel=kernel, top_vreps=top_vreps)
    scores, ids = jax.lax.top_k(s, min(top_words, s.shape[1]))
    return ids.astype(jnp.int32), scores


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
    best, pos = jax.lax.top_k(merged, top)
    return jnp.where(jnp.isfinite(best), ids[pos], -1), best


def _word_query_candidates(index: RetrievalIndex, weights: Array, top_vreps: int):
    vrep_scores = index.vrep_word_scores @ weights  # [vreps]
    top_s, top_v = jax.lax.top_k(vrep_scores, top_vreps)
    ids = index.neighbour_ids[top_v]  # [top_vreps, L]
    scores = top_s[:, None] * index.neighbour_similarities[top_v]
    return ids, scores, top_v


def _weights(word_ids, num_words, dtype=jnp.float32):
    word_ids = jnp.atleast_1d(jnp.asarray(word_ids))
    return jnp.zeros((num_words,), dtype).at[word_ids].add(1.0, mode="drop")


@functools.partial(jax.jit, static_argnames=("top_vreps", "top_images"))
def word_query(
    index: RetrievalIndex,
    word_weights: ArrayLike,
    *,
    top_vreps: int = 5,
    top_images: int = 10,
) -> tuple[Array, Array]:
    """§4.2 word query.

    Parameters
    ----------
    index : RetrievalIndex
    word_weights : Float[Array, "words"]
        Query weights :math:`\\omega` over the vocabulary (one-hot for one word; use
        ``jax.nn.one_hot(j, W)``).
    top_vreps, top_images : int

    Returns
    -------
    image_ids : Int[Array, "top_images"]
        Database rows, best first (``-1`` when fewer candidates exist).
    scores : Float[Array, "top_images"]
    """
    w = jnp.asarray(word_weights, jnp.float32)
    tv = min(top_vreps, index.vrep_features.shape[0])
    ids, scores, _ = _word_query_candidates(index, w, tv)
    return _merge_candidates(ids, scores, min(top_images, ids.size))


def _retrieval_candidates(index, query, kernel, top_vreps, top_words):
    """§4.3 for one query image: T (word query on its annotation) filtered by S."""
    s = _merged_word_scores(
        index.vrep_features,
        index.vrep_word_scores,
        query[None],
        index.gamma,
        kernel,
        top_vreps,
    )[0]
    ann_scores, ann_ids = jax.lax.top_k(s, top_words)
    num_words = index.vrep_word_scores.shape[1]
    weights = jnp.zeros((num_words,), s.dtype).at[ann_ids].set(1.0)
    ids, scores, top_v = _word_query_candidates(index, weights, top_vreps)
    rows = index.neighbour_words[top_v]  # [tv, L, m]: the images' word lists
    in_s = jnp.any((rows[..., None] == ann_ids) & (rows[..., None] >= 0), axis=(-1, -2))
    keep = in_s & (ids >= 0)
    return jnp.where(keep, ids, -1), jnp.where(keep, scores, 0.0)


@functools.partial(
    jax.jit, static_argnames=("kernel", "top_vreps", "top_words", "top_images")
)
def image_retrieval(
    index: RetrievalIndex,
    query: ArrayLike,
    *,
    kernel: str = "rbf",
    top_vreps: int = 5,
    top_words: int = 5,
    top_images: int = 10,
) -> tuple[Array, Array]:
    """§4.3 image retrieval :math:`R = S \\cap T` for one query image ``[dims]``.

    Returns the top ``top_images`` database rows (``-1`` padding) and their scores.
    """
    q = jnp.asarray(query, jnp.float32)
    tv = min(top_vreps, index.vrep_features.shape[0])
    tw = min(top_words, index.vrep_word_scores.shape[1])
    ids, scores = _retrieval_candidates(index, q, kernel, tv, tw)
    return _merge_candidates(ids, scores, min(top_images, ids.size))


@functools.partial(
    jax.jit, static_argnames=("kernel", "top_vreps", "top_words", "top_images")
)
def multimodal_query(
    index: RetrievalIndex,
    images: ArrayLike,
    image_weights: ArrayLike,
    word_weights: ArrayLike,
    *,
    kernel: str = "rbf",
    top_vreps: int = 5,
    top_words: int = 5,
    top_images: int = 10,
) -> tuple[Array, Array]:
    """§4.4 multimodal query: images and words with weights, retrievals merged.

    Parameters
    ----------
    index : RetrievalIndex
    images : Float[Array, "query_images dims"]
    image_weights : Float[Array, "query_images"]
    word_weights : Float[Array, "words"]
        Weights of query words (zero vector for none).

    Returns
    -------
    image_ids, scores : the top ``top_images`` merged results.
    """
    x = jnp.atleast_2d(jnp.asarray(images, jnp.float32))
    a = jnp.asarray(image_weights, jnp.float32)
    tv = min(top_vreps, index.vrep_features.shape[0])
    tw = min(top_words, index.vrep_word_scores.shape[1])
    img_ids, img_scores = jax.vmap(
        lambda q: _retrieval_candidates(index, q, kernel, tv, tw)
    )(x)
    img_scores = img_scores * a[:, None, None]
    w = jnp.asarray(word_weights, jnp.float32)
    w_ids, w_scores, _ = _word_query_candidates(index, w, tv)
    w_scores = jnp.where(jnp.any(w != 0), w_scores, 0.0)
    ids = jnp.concatenate([img_ids.reshape(-1), w_ids.reshape(-1)])
    scores = jnp.concatenate([img_scores.reshape(-1), w_scores.reshape(-1)])
    return _merge_candidates(ids, scores, min(top_images, ids.size))


# ----------------------------------------------------------- cross-stage inference
def ontology_matrix(
    table: Mapping[str, Sequence[str]],
    source_words: Sequence[str],
    target_words: Sequence[str],
) -> np.ndarray:
    """The word-to-word ontology as a 0/1 ``[source_words, target_words]`` matrix.

    ``table`` maps a source-stage word to the target-stage words it corresponds to
    (the hand-made look-up table of §4.5). Unknown names raise ``KeyError`` naming
    them.
    """
    src = {w: i for i, w in enumerate(source_words)}
    dst = {w: i for i, w in enumerate(target_words)}
    out = np.zeros((len(source_words), len(target_words)), np.float32)
    for a, targets in table.items():
        if a not in src:
            raise KeyError(f"ontology word {a!r} is not in the source vocabulary")
        if isinstance(targets, str):
            targets = [targets]
        for b in targets:
            if b not in dst:
                raise KeyError(f"ontology word {b!r} is not in the target vocabulary")
            out[src[a], dst[b]] = 1.0
    return out


def map_words(source_weights: ArrayLike, ontology: ArrayLike) -> Array:
    """Carry word weights ``[..., source_words]`` to the target stage through the
    ontology matrix: :math:`\\omega' = \\omega\\, O`."""
    return jnp.asarray(source_weights, jnp.float32) @ jnp.asarray(ontology, jnp.float32)


def cross_stage_annotate(
    source: RetrievalIndex,
    ontology: ArrayLike,
    queries: ArrayLike,
    *,
    kernel: str = "rbf",
    top_vreps: int = 5,
    top_words: int = 5,
) -> tuple[Array, Array]:
    """Image (stage A) → words (stage B): annotation scores mapped by the ontology."""
    s = annotation_scores(source, queries, kernel=kernel, top_vreps=top_vreps)
    mapped = map_words(s, ontology)
    scores, ids = jax.lax.top_k(mapped, min(top_words, mapped.shape[-1]))
    return ids.astype(jnp.int32), scores


def cross_stage_word_query(
    target: RetrievalIndex,
    ontology: ArrayLike,
    source_word_weights: ArrayLike,
    *,
    top_vreps: int = 5,
    top_images: int = 10,
) -> tuple[Array, Array]:
    """Word (stage A) → images (stage B): map the words, word-query stage B."""
    w = map_words(source_word_weights, ontology)
    return word_query(target, w, top_vreps=top_vreps, top_images=top_images)


def cross_stage_image_query(
    source: RetrievalIndex,
    target: RetrievalIndex,
    ontology: ArrayLike,
    query: ArrayLike,
    *,
    kernel: str = "rbf",
    top_vreps: int = 5,
    top_words: int = 5,
    top_images: int = 10,
) -> tuple[Array, Array]:
    """Image (stage A) → images (stage B): annotate in A, map its top words through
    the ontology, word-query B with the mapped weights (Figure 3 of the paper)."""
    s = annotation_scores(source, query, kernel=kernel, top_vreps=top_vreps)[0]
    top_s, top_ids = jax.lax.top_k(s, min(top_words, s.shape[0]))
    weights = jnp.zeros_like(s).at[top_ids].set(1.0)
    return cross_stage_word_query(
        target, ontology, weights, top_vreps=top_vreps, top_images=top_images
    )
