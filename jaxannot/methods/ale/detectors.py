"""The concept detectors of the ALE-family methods (:mod:`.annotators`).

The targets they learn (:func:`concept_targets`: the observed words, or one-hot
class labels), their training on an embedding (:func:`train_detector`: the linear
SVM or the smooth function of eq. 7), their scores and the detector names
(:data:`DETECTORS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.methods.ale import smooth_function
from jaxannot.methods.ale.params import Detector
from jaxannot.solvers import linear_svm

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus

__all__ = [
    "DETECTORS",
    "concept_targets",
    "raw_key_data",
    "train_detector",
    "last_iteration",
    "detector_scores",
]

DETECTORS = ("svm", "sf")


def concept_targets(corpus: Corpus) -> tuple[np.ndarray, np.ndarray]:
    """``(y [n, K] in {0, 1}, labelled bool [n])`` from words or class labels."""
    if corpus.words is not None:
        y = (np.asarray(corpus.words) > 0).astype(np.float32)
        labelled = np.asarray(corpus.word_mask, bool)
    elif corpus.labels is not None:
        labels = np.asarray(corpus.labels)
        k = max(corpus.num_classes, int(labels.max()) + 1)
        labelled = labels >= 0
        y = np.zeros((len(labels), k), np.float32)
        y[labelled, labels[labelled]] = 1.0
    else:
        raise ValueError("concept detectors need words or labels in the corpus")
    if not labelled.any():
        raise ValueError("the corpus has no labelled image to train detectors on")
    return y, labelled


def raw_key_data(rng_key: jax.Array) -> np.ndarray:
    """The raw data of a key, typed (``jax.random.key``) or legacy ``uint32``.

    Parameters
    ----------
    rng_key : jax.Array
        A random key.

    Returns
    -------
    numpy.ndarray
        Its ``uint32`` words, on the host.
    """
    if jnp.issubdtype(rng_key.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(rng_key))
    return np.asarray(rng_key)


def train_detector(
    u: np.ndarray,
    y: np.ndarray,
    labelled: np.ndarray,
    eigenvalues: np.ndarray,
    hyper: Mapping[str, Any],
    rng_key: jax.Array,
    detector: str,
) -> tuple[Detector, dict]:
    """Detectors on ``u`` (SVM ``coef, intercept`` or SF ``alpha``) and info.

    Parameters
    ----------
    u : numpy.ndarray
        The images' embedding ``[n, d]`` (the eigenfunctions' values).
    y : numpy.ndarray
        The concept targets ``[n, K]`` in {0, 1} (:func:`concept_targets`).
    labelled : numpy.ndarray
        Bool ``[n]``: the images whose targets are known.
    eigenvalues : numpy.ndarray
        The eigenvalues ``[d]`` of the embedding's eigenfunctions (the smooth
        function's penalty).
    hyper : Mapping
        The method's hyper-parameters (``lam`` for the smooth function; ``c``,
        ``loss``, ``tol``, ``max_epochs`` for the SVM).
    rng_key : jax.Array
        The SVM's key.
    detector : str
        ``"sf"`` or ``"svm"``.

    Returns
    -------
    tuple of (Detector, dict)
        The detectors and the info (``svm_epochs`` for the SVM).
    """
    if detector == "sf":
        # U's columns have mean square 1 (not unit norm), so fᵀ L f = n αᵀ Σ α for
        # f = U α over the n images the eigenfunctions describe: eq. (7) with n Σ
        sigma = np.asarray(eigenvalues) * u.shape[0]
        alpha = smooth_function.fit_smooth_function(
            u, y, sigma, lam=float(hyper["lam"]), labelled=labelled
        )
        return Detector(alpha=np.asarray(alpha)), {}
    coef, intercept, info = linear_svm.fit_linear_svm(
        u[labelled],
        y[labelled],
        rng_key=rng_key,
        c=float(hyper["c"]),
        loss=str(hyper["loss"]),
        tol=float(hyper["tol"]),
        max_epochs=int(hyper["max_epochs"]),
    )
    detector = Detector(coef=np.asarray(coef), intercept=np.asarray(intercept))
    return detector, {"svm_epochs": info["epochs"]}


def last_iteration(info: dict) -> str:
    """What ended the fit, for a support error: the SVM's epochs or the closed form
    (the smooth function).

    Parameters
    ----------
    info : dict
        The fit's info (:func:`train_detector`'s).

    Returns
    -------
    str
        The iteration to name in the error.
    """
    if "svm_epochs" in info:
        return f"{info['svm_epochs']} (svm epochs)"
    return "closed form"


def detector_scores(u: np.ndarray, detector: Detector) -> np.ndarray:
    """The concept scores of the images embedded as ``u``.

    Parameters
    ----------
    u : numpy.ndarray
        The images' embedding ``[n, d]``.
    detector : Detector
        Trained by :func:`train_detector` (smooth function or SVM).

    Returns
    -------
    numpy.ndarray
        Scores ``[n, K]``, higher for a likelier concept.
    """
    if detector.alpha is not None:
        return np.asarray(smooth_function.smooth_scores(u, detector.alpha))
    return np.asarray(
        linear_svm.decision_function(u, detector.coef, detector.intercept)
    )
