"""The fitted parameters of the baselines, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`)."""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Bool, Float, Integer

from jaxannot.types import Array

__all__ = ["EmpiricalParams", "KnnParams", "TagPropLatent", "TagPropParams"]


class EmpiricalParams(NamedTuple):
    """``frequency`` [w]: each word's share of the observed training words."""

    frequency: Float[Array, " w"]


class KnnParams(NamedTuple):
    """The observed training images kNN votes from.

    Attributes
    ----------
    features : [n, d]
        Their features in the fitted view.
    words : [n, w]
        Their words.
    frequency : [w]
        Word frequencies (the tie-breaking prior).
    width : [] or None
        The heat-kernel width (None under uniform votes, or a model saved before
        widths were stored: computed when scoring).
    """

    features: Float[Array, "n d"]
    words: Float[Array, "n w"] | Bool[Array, "n w"]
    frequency: Float[Array, " w"]
    width: Float[Array, ""] | None = None


class TagPropLatent(NamedTuple):
    """TagProp's MAP sites (those of its variant): word sigmoid ``alpha``, ``beta``
    [w]; rank weights ``gamma`` [k]; distance weights ``theta`` [s]."""

    alpha: Float[Array, " w"] | None = None
    beta: Float[Array, " w"] | None = None
    gamma: Float[Array, " k"] | None = None
    theta: Float[Array, " s"] | None = None


class TagPropParams(NamedTuple):
    """The training images TagProp transfers from and its learned weights.

    Attributes
    ----------
    features : [n, d]
    word_ids, word_mask : [n, m]
        Each image's words as padded lists.
    idf : [d]
        Inverse document frequencies of the features.
    distance_scale : [s]
        What each base distance was divided by.
    latent : TagPropLatent
    """

    features: Float[Array, "n d"]
    word_ids: Integer[Array, "n m"]
    word_mask: Float[Array, "n m"] | Bool[Array, "n m"]
    idf: Float[Array, " d"]
    distance_scale: Float[Array, " s"]
    latent: TagPropLatent
