"""The fitted parameters of the baselines, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`)."""

from __future__ import annotations

from typing import NamedTuple

from jax.typing import ArrayLike

__all__ = ["EmpiricalParams", "KnnParams", "TagPropLatent", "TagPropParams"]


class EmpiricalParams(NamedTuple):
    """``frequency`` [w]: each word's share of the observed training words."""

    frequency: ArrayLike

    spec = {"frequency": "f[w]"}


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

    features: ArrayLike
    words: ArrayLike
    frequency: ArrayLike
    width: ArrayLike | None = None

    spec = {
        "features": "f[n,d]",
        "words": "fb[n,w]",
        "frequency": "f[w]",
        "width": "f[]",
    }


class TagPropLatent(NamedTuple):
    """TagProp's MAP sites (those of its variant): word sigmoid ``alpha``, ``beta``
    [w]; rank weights ``gamma`` [k]; distance weights ``theta`` [s]."""

    alpha: ArrayLike | None = None
    beta: ArrayLike | None = None
    gamma: ArrayLike | None = None
    theta: ArrayLike | None = None

    spec = {"alpha": "f[w]", "beta": "f[w]", "gamma": "f[k]", "theta": "f[s]"}


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

    features: ArrayLike
    word_ids: ArrayLike
    word_mask: ArrayLike
    idf: ArrayLike
    distance_scale: ArrayLike
    latent: TagPropLatent

    spec = {
        "features": "f[n,d]",
        "word_ids": "iu[n,m]",
        "word_mask": "fb[n,m]",
        "idf": "f[d]",
        "distance_scale": "f[s]",
        "latent": TagPropLatent,
    }
