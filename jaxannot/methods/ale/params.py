"""The fitted parameters of the ALE family, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`).

``ale`` is the :class:`~jaxannot.methods.ale.eigenfunctions.ALEModel` (PCA and
tabulated eigenfunctions), ``detector`` the per-concept detectors on an embedding and
``fit_scores`` [n, w] their scores of the fit images (w concepts).
"""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Bool, Float, UInt

from jaxannot.methods.ale.eigenfunctions import ALEModel
from jaxannot.types import Array

__all__ = [
    "AleParams",
    "AleTrain",
    "BsvmParams",
    "Detector",
    "GsfParams",
    "GsfTrain",
    "IaleParams",
]


class Detector(NamedTuple):
    """One detector per concept on an embedding: the smooth function's ``alpha``
    [e, w] (eq. 7) or the linear SVM's ``coef`` [w, e] and ``intercept`` [w]."""

    alpha: Float[Array, "e w"] | None = None
    coef: Float[Array, "w e"] | None = None
    intercept: Float[Array, " w"] | None = None


class AleTrain(NamedTuple):
    """What transductive ALE keeps of the fit images to refit when scoring: their
    PCA ``coords`` [n, p], concept ``targets`` [n, w], which are ``labelled`` [n]
    and the fit's key data ``rng_key``."""

    coords: Float[Array, "n p"]
    targets: Float[Array, "n w"]
    labelled: Bool[Array, " n"]
    rng_key: UInt[Array, " _"]


class GsfTrain(NamedTuple):
    """What GSF keeps of the fit images: their standardized features ``z`` [n, d],
    ``targets``, ``labelled`` and ``rng_key`` as in :class:`AleTrain`."""

    z: Float[Array, "n d"]
    targets: Float[Array, "n w"]
    labelled: Bool[Array, " n"]
    rng_key: UInt[Array, " _"]


class IaleParams(NamedTuple):
    """``iale-svm``, ``iale-sf``."""

    ale: ALEModel
    detector: Detector
    fit_scores: Float[Array, "n w"]


class AleParams(NamedTuple):
    """``ale-svm``, ``ale-sf``: :class:`IaleParams` and the fit images."""

    ale: ALEModel
    detector: Detector
    fit_scores: Float[Array, "n w"]
    train: AleTrain


class BsvmParams(NamedTuple):
    """``bsvm``: the features' ``mean`` and ``scale`` [d] and the SVM detectors."""

    mean: Float[Array, " d"]
    scale: Float[Array, " d"]
    detector: Detector
    fit_scores: Float[Array, "n w"]


class GsfParams(NamedTuple):
    """``gsf``: the features' ``mean`` and ``scale`` [d] and the fit images (the
    eigenmaps and detectors are computed when scoring)."""

    mean: Float[Array, " d"]
    scale: Float[Array, " d"]
    train: GsfTrain
