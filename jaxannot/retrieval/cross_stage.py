r"""Cross-stage inference (EMML §4.5): queries across two indexes (stages) joined by a
user word-to-word ontology table.

A :class:`CrossStage` holds the two stages and the ontology matrix. Image→word
annotates in stage A and maps the words to stage B; word→image maps the words, then
word-queries stage B; image→image annotates in A, maps, and retrieves in B.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

import jax.numpy as jnp

from jaxannot.retrieval.index import DEFAULT_OPTIONS, QueryOptions, RetrievalIndex
from jaxannot.retrieval.queries import (
    annotation_scores,
    annotation_weights,
    best_words,
    word_query,
)
from jaxannot.types import Array, ArrayLike

__all__ = [
    "CrossStage",
    "ontology_matrix",
    "map_words",
    "cross_stage_annotate",
    "cross_stage_word_query",
    "cross_stage_image_query",
]


@dataclasses.dataclass(frozen=True)
class CrossStage:
    """Two stages (indexes) and the ontology from the first's words to the second's.

    Each stage's queries use its own index's kernel. Built with the ontology checked
    against both vocabularies (``ValueError`` on a shape mismatch).

    Attributes
    ----------
    source : RetrievalIndex
        Stage A: query images are annotated in it, query words are its words.
    target : RetrievalIndex
        Stage B: its words are returned, its database images retrieved.
    ontology : Float[Array, "source_words target_words"]
        The word-to-word table as a 0/1 matrix (:func:`ontology_matrix`).
    """

    source: RetrievalIndex
    target: RetrievalIndex
    ontology: Array

    def __post_init__(self) -> None:
        ontology = jnp.asarray(self.ontology, jnp.float32)
        words = (
            self.source.vrep_word_scores.shape[1],
            self.target.vrep_word_scores.shape[1],
        )
        if ontology.shape != words:
            raise ValueError(
                f"the ontology must be [source words, target words] = {list(words)}, "
                f"got {list(ontology.shape)}"
            )
        object.__setattr__(self, "ontology", ontology)


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
    stages: CrossStage, images: ArrayLike, *, options: QueryOptions = DEFAULT_OPTIONS
) -> tuple[Array, Array]:
    """Image (stage A) → words (stage B): the annotation scores of query images
    ``[queries, dims]`` in the source stage, mapped by the ontology; the top
    ``options.top_words`` target-stage word ids and scores."""
    s = annotation_scores(stages.source, images, options=options)
    return best_words(map_words(s, stages.ontology), options.top_words)


def cross_stage_word_query(
    stages: CrossStage,
    word_weights: ArrayLike,
    *,
    options: QueryOptions = DEFAULT_OPTIONS,
) -> tuple[Array, Array]:
    """Word (stage A) → images (stage B): map the source-stage word weights
    ``[source_words]``, word-query the target stage (§4.2)."""
    w = map_words(word_weights, stages.ontology)
    return word_query(stages.target, w, options=options)


def cross_stage_image_query(
    stages: CrossStage, query: ArrayLike, *, options: QueryOptions = DEFAULT_OPTIONS
) -> tuple[Array, Array]:
    """Image (stage A) → images (stage B): annotate one query image ``[dims]`` in the
    source stage, map its top ``options.top_words`` words through the ontology,
    word-query the target stage with the mapped weights (Figure 3 of the paper)."""
    weights, _ = annotation_weights(stages.source, query, options)
    return cross_stage_word_query(stages, weights, options=options)
