"""The fitted parameters of the ALE family, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`).

``ale`` is the :class:`~jaxannot.methods.ale.eigenfunctions.ALEModel` (PCA and
tabulated eigenfunctions), ``detector`` the per-concept detectors on an embedding and
``fit_scores`` [n, w] their scores of the fit images (w concepts).
"""

from __future__ import annotations

from typing import NamedTuple

from jax.typing import ArrayLike

from jaxannot.methods.ale.eigenfunctions import ALEModel

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

    alpha: ArrayLike | None = None
    coef: ArrayLike | None = None
    intercept: ArrayLike | None = None

    spec = {"alpha": "f[e,w]", "coef": "f[w,e]", "intercept": "f[w]"}


class AleTrain(NamedTuple):
    """What transductive ALE keeps of the fit images to refit when scoring: their
    PCA ``coords`` [n, p], concept ``targets`` [n, w], which are ``labelled`` [n]
    and the fit's key data ``rng_key``."""

    coords: ArrayLike
    targets: ArrayLike
    labelled: ArrayLike
    rng_key: ArrayLike

    spec = {
        "coords": "f[n,p]",
        "targets": "f[n,w]",
        "labelled": "b[n]",
        "rng_key": "u[_]",
    }


class GsfTrain(NamedTuple):
    """What GSF keeps of the fit images: their standardized features ``z`` [n, d],
    ``targets``, ``labelled`` and ``rng_key`` as in :class:`AleTrain`."""

    z: ArrayLike
    targets: ArrayLike
    labelled: ArrayLike
    rng_key: ArrayLike

    spec = {"z": "f[n,d]", "targets": "f[n,w]", "labelled": "b[n]", "rng_key": "u[_]"}


class IaleParams(NamedTuple):
    """``iale-svm``, ``iale-sf``."""

    ale: ALEModel
    detector: Detector
    fit_scores: ArrayLike

    spec = {"ale": ALEModel, "detector": Detector, "fit_scores": "f[n,w]"}


class AleParams(NamedTuple):
    """``ale-svm``, ``ale-sf``: :class:`IaleParams` and the fit images."""

    ale: ALEModel
    detector: Detector
    fit_scores: ArrayLike
    train: AleTrain

    spec = {**IaleParams.spec, "train": AleTrain}


class BsvmParams(NamedTuple):
    """``bsvm``: the features' ``mean`` and ``scale`` [d] and the SVM detectors."""

    mean: ArrayLike
    scale: ArrayLike
    detector: Detector
    fit_scores: ArrayLike

    spec = {
        "mean": "f[d]",
        "scale": "f[d]",
        "detector": Detector,
        "fit_scores": "f[n,w]",
    }


class GsfParams(NamedTuple):
    """``gsf``: the features' ``mean`` and ``scale`` [d] and the fit images (the
    eigenmaps and detectors are computed when scoring)."""

    mean: ArrayLike
    scale: ArrayLike
    train: GsfTrain

    spec = {"mean": "f[d]", "scale": "f[d]", "train": GsfTrain}
