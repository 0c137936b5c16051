"""Baseline annotators: word frequency (``empirical``) and k-NN transfer (``knn``).

``empirical``
    Scores every word by its relative frequency in the observed training words,
    the same for every image: ``s(w | d) = Σ_i y_iw / Σ_i Σ_v y_iv`` over observed
    images ``i``. It is the floor every annotation method must beat.
``knn``
    Similarity-weighted label transfer (Makadia, Pavlovic, Kumar, "A new baseline for
    image annotation", ECCV 2008, in its simplest form): the ``k`` nearest observed
    training images ``N_k(d)`` of an image ``d`` in a feature view vote for their words,

    .. math:: s(w \\mid d) = \\frac{\\sum_{j \\in N_k(d)} a_{dj} y_{jw}}
                                   {\\sum_{j \\in N_k(d)} a_{dj}}
              + \\epsilon\\, p_{\\mathrm{emp}}(w),

    with heat-kernel affinities ``a_dj = exp(-δ²_dj / 2t²)`` or uniform votes. The
    width ``t`` is learned with the training images: the mean distance from a
    training image to its ``k`` nearest other training images (over at most
    ``WIDTH_SAMPLE`` evenly spaced training images, so fitting stays cheap on large
    sets). An image's scores therefore depend on it and the training images alone,
    never on the other images scored with it. The tiny ``ε p_emp`` term (ε = 1e-6,
    far below any vote) only orders the words no neighbour carries by their
    frequency, so complete rankings stay meaningful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, database_and_queries, register_words_method
from jaxannot.annotators.hyper_spec import (
    uses_defaults,
)
from jaxannot.data.corpus import Corpus
from jaxannot.graph import knn_search
from jaxannot.inference.support import check_finite_tree, check_support
from jaxannot.methods.baselines.params import EmpiricalParams, KnnParams

if TYPE_CHECKING:
    from jaxannot.types import ArrayTree

__all__ = ["EMPIRICAL", "KNN", "WIDTH_SAMPLE", "check_fitted_support", "heat_width"]

_BACKOFF = (
    1e-6  # weight of the frequency prior that only breaks ties between unvoted words
)
#: At most this many training images estimate knn's heat-kernel width (the mean of
#: 2000 x k neighbour distances; on Corel5k it is within 0.2% of the mean over all
#: 4500 training images).
WIDTH_SAMPLE = 2000


def _observed_words(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    mask, words = corpus.observed_words()
    return mask, words[mask]


def _frequencies(words: np.ndarray) -> np.ndarray:
    total = words.sum()
    if total <= 0:
        raise ValueError("the observed training words are all zero")
    return (words.sum(axis=0) / total).astype(np.float32)


def check_fitted_support(name: str, params: ArrayTree) -> None:
    """Raise :class:`~jaxannot.inference.support.SupportError` unless the fitted
    ``params`` of ``empirical`` or ``knn`` lie in their support: every floating
    array finite, the word ``frequency`` a distribution (non-negative, summing to 1
    within 1e-3) and knn's heat-kernel ``width`` non-negative (0 when every sampled
    neighbour is a twin, e.g. a single feature with repeated values: the vote floors
    it at 1e-12).

    Parameters
    ----------
    name : str
        The method, for the message.
    params : EmpiricalParams or KnnParams
        Its fitted params (closed form: no iterations).
    """
    check_finite_tree(name, params, iteration="closed form")
    check_support(
        f"{name}: frequency",
        params.frequency,
        iteration="closed form",
        simplex_axis=-1,
    )
    width = getattr(params, "width", None)
    if width is not None:
        check_support(f"{name}: width", width, iteration="closed form")


# ------------------------------------------------------------------ empirical
def _empirical_fit(corpus: Corpus, *, rng_key=None) -> Fitted:
    del rng_key  # deterministic
    _, words = _observed_words(corpus)
    params = EmpiricalParams(_frequencies(words))
    check_fitted_support("empirical", params)
    return Fitted("empirical", params)


def _empirical_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    freq = np.asarray(fitted.params.frequency)
    return np.broadcast_to(freq, (corpus.num_images, freq.shape[0])).copy()


EMPIRICAL = register_words_method(
    "empirical",
    _empirical_fit,
    "word frequency in the training words (same ranking for every image)",
    score_words=_empirical_score,
    params=EmpiricalParams,
    score_meaning="relative frequency of the word in the training words",
)


# ------------------------------------------------------------------------ knn
@uses_defaults("knn")
def _knn_fit(
    corpus: Corpus,
    *,
    rng_key=None,
    k: int,
    view: str,
    metric: str,
    weight: str,
) -> Fitted:
    del rng_key  # deterministic
    rows, words = _observed_words(corpus)
    features = corpus.features(view)[rows]
    width = None
    if weight == "heat":
        width = np.float32(heat_width(features, k, metric))
    params = KnnParams(features, words, _frequencies(words), width)
    check_fitted_support("knn", params)
    return Fitted("knn", params)


def heat_width(features: np.ndarray, k: int, metric: str) -> float:
    """knn's heat-kernel width: the mean distance from each training image to its
    ``min(k, n - 1)`` nearest other training images (module docstring).

    Parameters
    ----------
    features : array [n, dims]
        The training images' features.
    k : int
        Neighbours per image.
    metric : {"cosine", "euclidean"}

    Returns
    -------
    float
        The width (1 when there is no other training image: one neighbour's vote
        does not depend on it).
    """
    features = np.asarray(features, np.float32)
    n = features.shape[0]
    k = min(int(k), n - 1)
    if k < 1:
        return 1.0
    rows = np.unique(np.linspace(0, n - 1, min(n, WIDTH_SAMPLE)).round().astype(int))
    idx, dist = knn_search(features[rows], features, k + 1, metric=metric)
    idx, dist = np.asarray(idx), np.asarray(dist)
    own = idx == rows[:, None]  # the image itself, found at distance 0
    keep = ~own
    keep[~own.any(axis=1), -1] = False  # itself hidden by exact twins: drop the last
    return float(dist[keep].mean())


@jax.jit
def _vote(indices, distances, words, frequency, width, heat):
    width = jnp.maximum(width, 1e-12)
    affinity = jnp.where(heat, jnp.exp(-(distances**2) / (2 * width**2)), 1.0)
    affinity = jnp.maximum(affinity, 1e-30)  # far neighbours still vote, however little
    votes = jnp.einsum("qk,qkw->qw", affinity, words[indices])
    return votes / affinity.sum(axis=1, keepdims=True) + _BACKOFF * frequency


def _knn_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    hyper, params = fitted.hyper, fitted.params
    database, queries = database_and_queries(fitted, corpus)
    k = min(int(hyper["k"]), database.shape[0])
    indices, distances = knn_search(queries, database, k, metric=hyper["metric"])
    heat = hyper["weight"] == "heat"
    width = 1.0
    if heat:  # a model saved before widths were stored: the same width, computed now
        width = params.width
        if width is None:
            width = heat_width(database, int(hyper["k"]), hyper["metric"])
    scores = _vote(
        indices,
        distances,
        jnp.asarray(params.words),
        jnp.asarray(params.frequency),
        jnp.asarray(width, jnp.float32),
        heat,
    )
    return np.asarray(scores)


KNN = register_words_method(
    "knn",
    _knn_fit,
    "similarity-weighted word transfer from the k nearest training images",
    score_words=_knn_score,
    params=KnnParams,
    score_meaning="similarity-weighted fraction of the k neighbours carrying the word",
)
