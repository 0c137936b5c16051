"""The retrieval index (built once, at indexing time) and the options of every query.

:func:`build_index` does the database-size work of §4.2 blockwise; the
:class:`RetrievalIndex` it returns records the kernel it was built with, so every
query compares images with the same similarity. :class:`QueryOptions` holds the
constants that fix a query's cost (§4.1–§4.5).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.methods.emml.structured_output import KERNELS, kernel_matrix
from jaxannot.types import Array, ArrayLike

__all__ = ["QueryOptions", "DEFAULT_OPTIONS", "RetrievalIndex", "build_index"]


@dataclasses.dataclass(frozen=True)
class QueryOptions:
    """The sizes that bound a query's work (EMML §4), whatever the database size.

    Validated when built: every field is an integer >= 1 (``TypeError`` /
    ``ValueError`` otherwise). Values larger than what the index holds are clipped
    to it (e.g. ``top_vreps`` to the number of VReps). Hashable, so the jitted
    queries take it as a static argument.

    Attributes
    ----------
    top_vreps : int
        VReps whose ranking or neighbour lists are merged: the VReps most similar to
        a query image (annotation, §4.1), or with the largest scores for the query
        words (word query, §4.2).
    top_words : int
        Words kept by an annotation: the words returned (§4.1), the set :math:`A`
        of a query image in image retrieval (§4.3–§4.4), the stage-A words mapped
        to stage B in cross-stage inference (§4.5).
    top_images : int
        Database images returned by word queries, image retrieval and multimodal
        queries (§4.2–§4.5), best first.
    """

    top_vreps: int = 5
    top_words: int = 5
    top_images: int = 10

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(
                    f"QueryOptions.{field.name} must be an integer, got {value!r}"
                )
            if value < 1:
                raise ValueError(f"QueryOptions.{field.name} must be >= 1, got {value}")
            object.__setattr__(self, field.name, int(value))


DEFAULT_OPTIONS = QueryOptions()


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RetrievalIndex:
    """What queries read: VReps, their word scores and per-VRep neighbour lists.

    A pytree whose arrays are its leaves and whose ``kernel`` is static metadata,
    so an index can be passed to (or closed over by) jitted and vmapped functions.

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
    kernel : str
        The similarity :math:`k` the index was built with (one of
        :data:`jaxannot.methods.emml.structured_output.KERNELS`); queries use it too.
    """

    vrep_features: Array
    vrep_word_scores: Array
    neighbour_ids: Array
    neighbour_similarities: Array
    image_words: Array
    neighbour_words: Array
    gamma: Array
    kernel: str = dataclasses.field(metadata={"static": True})


def merged_word_scores(
    vreps: Array,
    scores: Array,
    queries: Array,
    gamma: float,
    kernel: str,
    top_vreps: int,
) -> Array:
    """§4.1 word scores ``[queries, words]``: the ``top_vreps`` VReps most similar
    to each query, their score rows weighted by the similarity and summed."""
    sims = kernel_matrix(queries, vreps, kernel, gamma)  # [q, vreps]
    top_s, top_v = jax.lax.top_k(sims, min(top_vreps, vreps.shape[0]))
    return jnp.einsum("qk,qkw->qw", top_s, scores[top_v])


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
    s = merged_word_scores(vreps, scores, block, gamma, kernel, top_vreps)
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
    kernel: str = "rbf",
    gamma: float = 1.0,
    database_words: ArrayLike | None = None,
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
    kernel, gamma : the similarity :math:`k` (same as in training); the index keeps
        both, and every query on it uses them.
    database_words : [images, words], optional
        The database's known words (the sets :math:`S_j`); when absent each image is
        annotated with its top ``annotation_words`` words by the §4.1 rule.
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
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; valid: {', '.join(KERNELS)}")
    v = jnp.asarray(vrep_features, jnp.float32)
    f = jnp.asarray(vrep_word_scores, jnp.float32)
    x = np.asarray(database_features, np.float32)
    _check_shapes(v, f, x)
    n_img = x.shape[0]
    k = min(neighbours, n_img)
    m = min(annotation_words, f.shape[1])
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
            ids = _block_annotation_ids(
                v, f, jnp.asarray(block), g, kernel, top_vreps, m
            )
            ann.append(np.asarray(ids)[valid])
    if database_words is None:
        image_words = np.concatenate(ann)
    else:
        image_words = _word_lists(np.asarray(database_words), n_img)
    image_words = jnp.asarray(image_words)
    neighbour_words = image_words[jnp.maximum(best_i, 0)]
    return RetrievalIndex(
        v, f, best_i, best_s, image_words, neighbour_words, g, kernel=kernel
    )


def _check_shapes(v, f, x) -> None:
    """ValueError unless the VReps' features ``v`` and word scores ``f`` have one row
    per VRep and the database ``x`` is a non-empty ``[images, dims]`` of theirs."""
    if v.shape[0] != f.shape[0]:
        raise ValueError(
            f"vrep_features has {v.shape[0]} rows but vrep_word_scores {f.shape[0]}"
        )
    if x.ndim != 2 or x.shape[1] != v.shape[1]:
        raise ValueError(
            f"database_features must be [images, {v.shape[1]}], got {x.shape}"
        )
    if x.shape[0] == 0:
        raise ValueError("the database is empty")


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
