r"""Synthetic corpora sampled from the multimodal mixture of unigrams.

Generative process (one topic per image shared by all its modalities):

.. math::

    \pi &\sim \text{given (uniform by default)}, \qquad
    z_d \sim \text{Cat}(\pi), \\
    \text{blob tokens of image } d &\sim \text{Mult}(N_b, \beta^{b}_{z_d}), \qquad
    \text{words of image } d \sim \text{Mult}(N_w, \beta^{w}_{z_d}),

and, optionally, a real view :math:`x_d \sim \mathcal N(\mu_{z_d}, I)`. Each topic
owns a block of roughly ``V / K`` vocabulary entries that receive ``1 - leak`` of its
mass (a Dirichlet draw inside the block); the remaining ``leak`` is spread uniformly.
Topic distributions are therefore concentrated and mostly disjoint, so a method that
learns the blob-word association can recover the words of an image from its blobs.

Sampling is plain numpy, seeded by ``seed`` (a few milliseconds at default sizes).

References
----------
K. Nigam, A. McCallum, S. Thrun, T. Mitchell, "Text Classification from Labeled and
Unlabeled Documents using EM", Machine Learning 39:103-134, 2000 (mixture of unigrams);
K. Barnard, P. Duygulu, D. Forsyth, N. de Freitas, D. Blei, M. Jordan, "Matching Words
and Pictures", JMLR 3:1107-1135, 2003 (multimodal mixtures for annotation).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxannot.data.corpus import Corpus

__all__ = ["SyntheticTruth", "make_synthetic", "block_topics"]


class SyntheticTruth(NamedTuple):
    """Ground truth of a synthetic corpus.

    Attributes
    ----------
    topics : int32 [images]
        Topic :math:`z_d` of each image.
    topic_weights : float [topics]
        Mixing weights :math:`\\pi`.
    blob_topics : float [topics, blob_vocab]
        :math:`\\beta^b`, rows sum to 1.
    word_topics : float [topics, word_vocab]
        :math:`\\beta^w`, rows sum to 1.
    feature_means : float [topics, real_dims]
        :math:`\\mu_k` of the optional real view (``[topics, 0]`` when absent).
    """

    topics: np.ndarray
    topic_weights: np.ndarray
    blob_topics: np.ndarray
    word_topics: np.ndarray
    feature_means: np.ndarray


def block_topics(
    rng: np.random.Generator, num_topics: int, vocab: int, leak: float, alpha: float
) -> np.ndarray:
    """Concentrated, mostly disjoint topic-word distributions ``[topics, vocab]``.

    Topic ``k`` puts ``1 - leak`` of its mass on the ``k``-th of ``num_topics``
    contiguous vocabulary blocks (``Dirichlet(alpha)`` inside it) and ``leak / vocab``
    on every entry.
    """
    blocks = np.array_split(np.arange(vocab), num_topics)
    beta = np.full((num_topics, vocab), leak / vocab)
    for k, block in enumerate(blocks):
        beta[k, block] += (1.0 - leak) * rng.dirichlet(np.full(block.size, alpha))
    return beta / beta.sum(1, keepdims=True)


#: Images whose counts are drawn at a time (memory O(chunk x vocab) beyond the result).
_CHUNK = 65536


def _counts(
    rng: np.random.Generator, draws: int, beta: np.ndarray, z: np.ndarray
) -> np.ndarray:
    """Count vectors ``Mult(draws, beta[z_d])`` of every image, float32 ``[images,
    vocab]``: the draws of one ``rng.multinomial`` call per image, in image order,
    made a chunk of images per call (the same numbers, without a Python loop per
    image or an int64 copy of the whole matrix)."""
    out = np.empty((z.size, beta.shape[1]), np.float32)
    for start in range(0, z.size, _CHUNK):
        stop = start + _CHUNK
        out[start:stop] = rng.multinomial(draws, beta[z[start:stop]])
    return out


#: The arguments of :func:`make_synthetic` that must be positive integers.
_SIZES = (
    "num_images",
    "num_topics",
    "blob_vocab",
    "word_vocab",
    "tokens_per_image",
    "words_per_image",
)


def make_synthetic(
    seed: int = 0,
    *,
    num_images: int = 300,
    num_topics: int = 5,
    blob_vocab: int = 60,
    word_vocab: int = 40,
    tokens_per_image: int = 12,
    words_per_image: int = 3,
    num_classes: int | bool | None = None,
    real_dims: int = 0,
    leak: float = 0.1,
    concentration: float = 1.0,
    topic_weights: np.ndarray | None = None,
    binary_words: bool = False,
    return_truth: bool = False,
) -> Corpus | tuple[Corpus, SyntheticTruth]:
    """Sample a corpus from the multimodal mixture of unigrams (module docstring).

    Parameters
    ----------
    seed : int
        Seed of the numpy generator (same seed, same corpus).
    num_images, num_topics, blob_vocab, word_vocab : int
        Sizes. Each vocabulary must have at least ``num_topics`` entries.
    tokens_per_image : int
        :math:`N_b`, blob tokens drawn per image (the ``"blobs"`` bag view).
    words_per_image : int
        :math:`N_w`, word draws per image.
    num_classes : int or bool, optional
        When given, ``labels = topic mod num_classes`` (so ``num_classes ==
        num_topics`` gives the topic itself) and ``class_names`` ``"0".."C-1"``;
        ``True`` means ``num_topics`` (labels = topics), ``None``/``False`` no labels.
    real_dims : int
        When > 0, adds a ``"features"`` real view :math:`x_d \\sim N(\\mu_{z_d}, I)`
        with :math:`\\mu_k \\sim N(0, 3^2 I)`.
    leak : float in [0, 1)
        Mass of each topic spread uniformly over the vocabulary.
    concentration : float
        Dirichlet parameter inside a topic's block (smaller: peakier topics).
    topic_weights : array [topics], optional
        :math:`\\pi` (default uniform).
    binary_words : bool
        Clip word counts to presence (0/1).
    return_truth : bool
        Also return the :class:`SyntheticTruth`.

    Returns
    -------
    Corpus, or (Corpus, SyntheticTruth)
        Views ``{"blobs": bag [images, blob_vocab]}`` (+ ``"features"``), ``words``
        ``[images, word_vocab]`` float32 counts, all observed; ``name="synthetic"``.

    Examples
    --------
    >>> c, truth = make_synthetic(0, num_images=20, return_truth=True)
    >>> c.view("blobs").shape, c.words.shape, truth.topics.shape
    ((20, 60), (20, 40), (20,))
    """
    arguments = locals()  # first statement: only the arguments are bound
    num_classes = _checked_classes(arguments)
    rng = np.random.default_rng(seed)
    pi = _topic_weights(topic_weights, num_topics)
    beta_b = block_topics(rng, num_topics, blob_vocab, leak, concentration)
    beta_w = block_topics(rng, num_topics, word_vocab, leak, concentration)
    z = rng.choice(num_topics, size=num_images, p=pi).astype(np.int32)
    blobs = _counts(rng, tokens_per_image, beta_b, z)
    words = _counts(rng, words_per_image, beta_w, z)
    if binary_words:
        words = np.minimum(words, 1)
    views = {"blobs": blobs}
    kinds = {"blobs": "bag"}
    means = rng.normal(0.0, 3.0, size=(num_topics, real_dims))
    if real_dims:
        x = means[z] + rng.normal(size=(num_images, real_dims))
        views["features"] = x.astype(np.float32)
        kinds["features"] = "real"
    labels = class_names = None
    if num_classes is not None:
        labels = (z % num_classes).astype(np.int32)
        class_names = tuple(str(i) for i in range(num_classes))
    corpus = Corpus.from_arrays(
        views,
        view_kinds=kinds,
        words=words.astype(np.float32),
        labels=labels,
        word_names=tuple(f"word{i}" for i in range(word_vocab)),
        class_names=class_names,
        name="synthetic",
    )
    if not return_truth:
        return corpus
    return corpus, SyntheticTruth(z, pi, beta_b, beta_w, means)


def _checked_classes(arguments: dict) -> int | None:
    """Check :func:`make_synthetic`'s ``arguments`` (ValueError naming the bad one)
    and return its number of classes (``True``: ``num_topics``; ``False``: None)."""
    for key in _SIZES:
        value = arguments[key]
        if int(value) != value or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
    num_topics, num_classes = arguments["num_topics"], arguments["num_classes"]
    blob_vocab, word_vocab = arguments["blob_vocab"], arguments["word_vocab"]
    if blob_vocab < num_topics or word_vocab < num_topics:
        raise ValueError(
            f"blob_vocab ({blob_vocab}) and word_vocab ({word_vocab}) must be >= "
            f"num_topics ({num_topics})"
        )
    if num_classes is True:
        num_classes = num_topics
    elif num_classes is False:
        num_classes = None
    if num_classes is not None and not 1 <= num_classes <= num_topics:
        raise ValueError(f"num_classes must be in [1, num_topics={num_topics}]")
    leak, concentration = arguments["leak"], arguments["concentration"]
    if not 0.0 <= leak < 1.0 or concentration <= 0 or arguments["real_dims"] < 0:
        raise ValueError("need 0 <= leak < 1, concentration > 0, real_dims >= 0")
    return num_classes


def _topic_weights(topic_weights, num_topics: int) -> np.ndarray:
    """:math:`\\pi`: uniform by default, else ``topic_weights`` normalised
    (ValueError unless ``[num_topics]`` non-negative with a positive sum)."""
    if topic_weights is None:
        return np.full(num_topics, 1.0 / num_topics)
    pi = np.asarray(topic_weights, dtype=np.float64)
    if pi.shape != (num_topics,) or np.any(pi < 0) or pi.sum() <= 0:
        raise ValueError(f"topic_weights must be [num_topics={num_topics}] >= 0")
    return pi / pi.sum()
