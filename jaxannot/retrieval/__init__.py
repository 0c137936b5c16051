r"""Multimodal queries with query time independent of the database size (EMML §4).

A trained structured-output model gives, for every VRep :math:`v`, the word scores
:math:`F_{vj} = f(\mathbf x_v, \mathbf e_j)` (eq. 1). At *indexing time*
(:func:`build_index`) we precompute, blockwise over the database,

- for every VRep its neighbour list: the ``neighbours`` database images most similar to
  it, with their similarities :math:`k(\mathbf x_v, \mathbf x_t)`;
- for every database image its annotation word list (its given words, or its top words
  by the annotation rule below) — the sets :math:`S_j` of §4.3.

Every query then touches only the VReps, a fixed number of neighbour lists and a fixed
number of database rows, so its cost does not grow with the database. The sizes
``top_vreps``, ``top_words`` and ``top_images`` below are the fields of
:class:`QueryOptions`, passed as ``options=`` to every query; the similarity
:math:`k` is the one the index was built with (``RetrievalIndex.kernel``):

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
  ontology table, held by a :class:`CrossStage`; image→word annotates in stage A and
  maps the words to stage B, word→image maps the words then word-queries stage B,
  image→image annotates in A, maps, and retrieves in B.

Modules: :mod:`~jaxannot.retrieval.index` (the index and the options),
:mod:`~jaxannot.retrieval.queries` (§4.1–§4.4), :mod:`~jaxannot.retrieval.cross_stage`
(§4.5); everything is importable from ``jaxannot.retrieval``.

Patent notice: the EMML method is the subject of US patent 8,463,053 B1 (related: US
8,923,630 and US 10,007,679).

References
----------
Z. Guo, Z. Zhang, E. P. Xing, C. Faloutsos. Multimodal Data Mining in a Multimedia
Database Based on Structured Max Margin Learning. ACM TKDD 10(3), 2016 (Section 4).
"""

from jaxannot.retrieval import cross_stage, index, queries
from jaxannot.retrieval.cross_stage import *  # noqa: F403 (its __all__, below)
from jaxannot.retrieval.index import *  # noqa: F403
from jaxannot.retrieval.queries import *  # noqa: F403

__all__ = [*index.__all__, *queries.__all__, *cross_stage.__all__]
