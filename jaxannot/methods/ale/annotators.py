"""Concept detectors on Approximate Laplacian Eigenmaps (seed 002) and their baselines.

Registered methods (the words of a corpus are its concepts; ``score_words`` returns one
detector score per concept):

``iale-svm`` / ``iale-sf``
    Inductive ALE (§3.4): PCA, histograms and eigenfunctions are computed once from the
    images ``fit`` sees (labelled and unlabelled); new images are projected onto the
    stored eigenfunctions by eq. (8) in batches of ``batch_size``; the detectors are a
    linear SVM on ``U`` (dual coordinate descent, :mod:`jaxannot.solvers.linear_svm`)
    or the smooth function of eq. (7) (:mod:`jaxannot.methods.ale.smooth_function`).
``ale-svm`` / ``ale-sf``
    Transductive ALE: the eigenfunctions are recomputed from the fit images *and* the
    images being scored together (the PCA rotation is the fit images'), then the
    detectors are retrained on the labelled fit images. ``fit`` therefore keeps the
    fit images' PCA coordinates.
``bsvm``
    Baseline linear SVM on the raw (standardized, concatenated) features.
``gsf``
    Graph Structure Features (Mantziou et al. ref. [28]): exact Laplacian eigenmaps —
    the ``eigenvectors`` smallest non-trivial eigenvectors of the normalized Laplacian
    of a symmetric ``k``-NN heat-kernel graph over the fit and scored images — followed
    by the linear SVM. Dense ``O(n³)``; refuses more than ``max_images`` images.

All features are the concatenation of the corpus's views, standardized with the fit
images' mean and standard deviation (ALE does this inside its PCA). Labels are the
observed rows of ``corpus.words`` (``word_mask``); without words, one-hot class labels.

References
----------
Mantziou, E., Papadopoulos, S. and Kompatsiaris, Y., "Learning to detect concepts with
Approximate Laplacian Eigenmaps in large-scale and online settings", IJMIR 2015.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, register_words_method
from jaxannot.annotators.hyper_spec import uses_defaults
from jaxannot.data.preprocessing import standardize
from jaxannot.methods.ale.detectors import (
    DETECTORS,
    concept_targets,
    detector_scores,
    last_iteration,
    raw_key_data,
    train_detector,
)
from jaxannot.methods.ale.eigenfunctions import PCAModel, ale_embed
from jaxannot.methods.ale.fitted_model import (
    ale_from_params,
    ale_to_params,
    check_fitted_support,
    fit_ale_model,
)
from jaxannot.methods.ale.params import (
    AleParams,
    AleTrain,
    BsvmParams,
    GsfParams,
    GsfTrain,
    IaleParams,
)

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus
    from jaxannot.types import PRNGKey

__all__ = [
    "check_fitted_support",
    "concept_targets",
    "fit_iale",
    "fit_ale_transductive",
    "fit_bsvm",
    "fit_gsf",
    "DETECTORS",
]


# ------------------------------------------------------------------- IALE / ALE
def fit_iale(corpus: Corpus, rng_key: PRNGKey, detector: str, hyper: dict) -> Fitted:
    """Eigenfunctions from every image of ``corpus``; detectors (``"svm"`` or
    ``"sf"``) on its labelled ones, with the hyper-parameters ``hyper`` of
    ``iale-DETECTOR``."""
    y, labelled = concept_targets(corpus)
    x = corpus.features()
    model = fit_ale_model(x, hyper)
    u = ale_embed(model, x, batch_size=int(hyper["batch_size"]))
    det, info = train_detector(
        u, y, labelled, model.eigenfunctions.eigenvalues, hyper, rng_key, detector
    )
    params = IaleParams(ale_to_params(model), det, detector_scores(u, det))
    info.update(num_eigenvectors=int(u.shape[1]), num_labelled=int(labelled.sum()))
    check_fitted_support(f"iale-{detector}", params, last_iteration(info))
    return Fitted(f"iale-{detector}", params, hyper, info)


def _iale_embed(fitted: Fitted, corpus) -> np.ndarray:
    model = ale_from_params(fitted.params.ale)
    return ale_embed(
        model, corpus.features(), batch_size=int(fitted.hyper["batch_size"])
    )


def _iale_scores(fitted: Fitted, corpus) -> np.ndarray:
    return detector_scores(_iale_embed(fitted, corpus), fitted.params.detector)


def fit_ale_transductive(
    corpus: Corpus, rng_key: PRNGKey, detector: str, hyper: dict
) -> Fitted:
    """As :func:`fit_iale`, keeping the fit images' PCA coordinates and labels so that
    scoring can recompute the eigenfunctions over fit + scored images."""
    fitted = fit_iale(corpus, rng_key, detector, hyper)
    model = ale_from_params(fitted.params.ale)
    x = corpus.features()
    y, labelled = concept_targets(corpus)
    coords = (x - model.pca.mean) @ model.pca.components
    train = AleTrain(coords.astype(np.float32), y, labelled, raw_key_data(rng_key))
    params = AleParams(*fitted.params, train=train)
    check_fitted_support(f"ale-{detector}", params, last_iteration(fitted.info))
    return Fitted(f"ale-{detector}", params, fitted.hyper, fitted.info)


def _ale_scores(fitted: Fitted, corpus) -> np.ndarray:
    """Recompute histograms / eigenfunctions on fit + scored images, retrain, score."""
    hyper = fitted.hyper
    detector = fitted.method.split("-", 1)[1]
    stored = ale_from_params(fitted.params.ale)
    train = fitted.params.train
    new = (corpus.features() - stored.pca.mean) @ stored.pca.components
    coords = np.concatenate([np.asarray(train.coords), new]).astype(np.float32)
    n_train, dims = len(train.coords), coords.shape[1]
    identity = PCAModel(
        np.zeros(dims, np.float32),
        np.eye(dims, dtype=np.float32),
        np.asarray(stored.pca.variances),
        coords.shape[0],
    )
    model = fit_ale_model(coords, hyper, pca=identity)
    u = ale_embed(model, coords, batch_size=int(hyper["batch_size"]))
    y = np.concatenate(
        [
            np.asarray(train.targets),
            np.zeros((len(new),) + train.targets.shape[1:], np.float32),
        ]
    )
    labelled = np.concatenate(
        [np.asarray(train.labelled, bool), np.zeros(len(new), bool)]
    )
    key = jax.random.wrap_key_data(jnp.asarray(train.rng_key))
    det, _ = train_detector(
        u, y, labelled, model.eigenfunctions.eigenvalues, hyper, key, detector
    )
    return detector_scores(u[n_train:], det)


def _fit_scores(fitted: Fitted) -> np.ndarray:
    return np.asarray(fitted.params.fit_scores)


# ------------------------------------------------------------------------- BSVM
@uses_defaults("bsvm")
def fit_bsvm(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """Linear SVM (dual CD) on the standardized raw features of the labelled images."""
    y, labelled = concept_targets(corpus)
    x = corpus.features()
    z, mean, scale = standardize(x)
    det, info = train_detector(z, y, labelled, None, hyper, rng_key, "svm")
    params = BsvmParams(mean, scale, det, detector_scores(z, det))
    check_fitted_support("bsvm", params, last_iteration(info))
    return Fitted("bsvm", params, hyper, info)


def _bsvm_scores(fitted: Fitted, corpus) -> np.ndarray:
    p = fitted.params
    z = (corpus.features() - np.asarray(p.mean)) / np.asarray(p.scale)
    return detector_scores(z, p.detector)


# -------------------------------------------------------------------------- GSF
def laplacian_eigenmaps(x: np.ndarray, num_eigenvectors: int, k: int) -> np.ndarray:
    r"""Exact Laplacian eigenmaps of a symmetric ``k``-NN heat-kernel graph.

    The ``num_eigenvectors`` eigenvectors of the normalized Laplacian
    :math:`I − D^{-1/2} W D^{-1/2}` (eq. 3) after the trivial one, mapped back by
    :math:`D^{-1/2}` (the random-walk eigenvectors) and scaled to unit mean square.
    """
    from jaxannot.graph import knn_graph, to_scipy

    n = x.shape[0]
    graph = knn_graph(jnp.asarray(x), min(k, n - 1), weight="heat")
    w = np.asarray(to_scipy(graph).toarray(), np.float64)
    degree = w.sum(1)
    inv_sqrt = 1.0 / np.sqrt(np.maximum(degree, 1e-12))
    normalized = np.eye(n) - inv_sqrt[:, None] * w * inv_sqrt[None, :]
    count = min(num_eigenvectors + 1, n)
    import scipy.linalg

    _, vectors = scipy.linalg.eigh(normalized, subset_by_index=(0, count - 1))
    u = inv_sqrt[:, None] * vectors[:, 1:]
    return (u / np.sqrt((u**2).mean(0, keepdims=True))).astype(np.float32)


@uses_defaults("gsf")
def fit_gsf(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
    """Keep the standardized fit images; the eigenmaps are computed when scoring."""
    if corpus.num_images > int(hyper["max_images"]):
        raise ValueError(
            f"gsf computes exact Laplacian eigenmaps (dense O(n^3)) and is limited to "
            f"max_images={hyper['max_images']} images, got {corpus.num_images}; "
            "use ale-svm / iale-svm for larger corpora"
        )
    y, labelled = concept_targets(corpus)
    x = corpus.features()
    z, mean, scale = standardize(x)
    params = GsfParams(mean, scale, GsfTrain(z, y, labelled, raw_key_data(rng_key)))
    check_fitted_support("gsf", params, "standardization")
    return Fitted("gsf", params, hyper, {})


def _gsf_scores_of(fitted: Fitted, z_new: np.ndarray) -> np.ndarray:
    hyper, train = fitted.hyper, fitted.params.train
    z_train = np.asarray(train.z)
    total = len(z_train) + len(z_new)
    if total > int(hyper["max_images"]):
        raise ValueError(
            f"gsf is limited to max_images={hyper['max_images']} fit + scored images, "
            f"got {total}"
        )
    z = np.concatenate([z_train, z_new]).astype(np.float32)
    u = laplacian_eigenmaps(z, int(hyper["eigenvectors"]), int(hyper["k"]))
    n_train = len(z_train)
    y, labelled = np.asarray(train.targets), np.asarray(train.labelled, bool)
    key = jax.random.wrap_key_data(jnp.asarray(train.rng_key))
    det, _ = train_detector(u[:n_train], y, labelled, None, hyper, key, "svm")
    return detector_scores(u[n_train:] if len(z_new) else u, det)


def _gsf_fit_scores(fitted: Fitted) -> np.ndarray:
    """Scores of the fit images (eigenmaps of the fit images alone), on demand."""
    z = np.asarray(fitted.params.train.z)
    return _gsf_scores_of(fitted, np.zeros((0, z.shape[1]), np.float32))


def _gsf_scores(fitted: Fitted, corpus) -> np.ndarray:
    p = fitted.params
    z = (corpus.features() - np.asarray(p.mean)) / np.asarray(p.scale)
    return _gsf_scores_of(fitted, z.astype(np.float32))


# --------------------------------------------------------------------- registry
def _ale_fit(name: str, fit: Callable[..., Fitted]) -> Callable[..., Fitted]:
    """The fit of ALE or IALE method ``name``: ``fit`` (:func:`fit_iale` or
    :func:`fit_ale_transductive`) with the detector ``name`` ends with and the
    hyper-parameters of ``name``'s table."""
    detector = name.split("-")[1]

    @uses_defaults(name)
    def fit_method(corpus: Corpus, *, rng_key: PRNGKey, hyper: dict) -> Fitted:
        """``fit`` with the method's detector and hyper-parameters."""
        return fit(corpus, rng_key, detector, hyper)

    return fit_method


def _register_ale(name: str, fit, scores, params: type, summary: str) -> None:
    """Register ALE or IALE (``fit``, its ``scores`` and ``params``) with the detector
    its ``name`` ends with (``"svm"`` or ``"sf"``)."""
    prefix, detector = name.split("-")
    register_words_method(
        name,
        _ale_fit(name, fit),
        summary,
        params=params,
        score_words=scores,
        score_fit_corpus=_fit_scores,
        embed=_iale_embed,
        estimator_name=f"{prefix}{detector}".upper(),
    )


_register_ale(
    "iale-svm",
    fit_iale,
    _iale_scores,
    IaleParams,
    "Inductive approximate Laplacian eigenmaps + linear SVM (seed 002)",
)
_register_ale(
    "ale-svm",
    fit_ale_transductive,
    _ale_scores,
    AleParams,
    "Transductive approx. Laplacian eigenmaps + linear SVM (seed 002)",
)
_register_ale(
    "iale-sf",
    fit_iale,
    _iale_scores,
    IaleParams,
    "Inductive approximate Laplacian eigenmaps + smooth function (eq. 7) (seed 002)",
)
_register_ale(
    "ale-sf",
    fit_ale_transductive,
    _ale_scores,
    AleParams,
    "Transductive approx. Laplacian eigenmaps + smooth function (eq. 7) (seed 002)",
)
register_words_method(
    "bsvm",
    fit_bsvm,
    "Baseline linear SVM (dual coordinate descent) on raw features",
    params=BsvmParams,
    score_words=_bsvm_scores,
    score_fit_corpus=_fit_scores,
    estimator_name="BSVM",
)
register_words_method(
    "gsf",
    fit_gsf,
    "Exact Laplacian eigenmaps of a k-NN graph + linear SVM (small n)",
    params=GsfParams,
    score_words=_gsf_scores,
    score_fit_corpus=_gsf_fit_scores,
    estimator_name="GSF",
)
