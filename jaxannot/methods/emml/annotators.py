"""Annotators ``emml`` (structured max-margin, Guo et al. 2016) and ``mbrm`` (Feng
et al. 2004).

``emml``: VReps (k-means centroids of a feature view with their members' majority
words, or random annotated images), an RBF or linear kernel, and the working-set dual
solver :func:`jaxannot.methods.emml.working_set.fit_emml`. Word scores of an image are
eq. (1),
:math:`f(\\mathbf x, \\mathbf e_j) = \\sum_v k(\\mathbf x, \\mathbf x_v) B_{vj}`
(``top_vreps = 0``), or the §4.1 merge of the ``top_vreps`` most similar VReps' word
rankings (``top_vreps > 0``), as :func:`jaxannot.retrieval.annotation_scores` does.

``mbrm``: the multiple-Bernoulli relevance model (:mod:`jaxannot.methods.emml.mbrm`).

Patent notice: the EMML method is the subject of US patent 8,463,053 B1 (related: US
8,923,630 and US 10,007,679).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, register_words_method
from jaxannot.annotators.hyper_spec import (
    uses_defaults,
)
from jaxannot.methods.emml.dual_solves import (
    solve_mixtures,
    solve_working_set,
    warn_unconverged,
)
from jaxannot.methods.emml.fit_checks import (
    check_emml_support,
    check_kernel_memory,
)
from jaxannot.methods.emml.mbrm import (
    MBRMParams,
    fit_mbrm,
    mbrm_word_probabilities,
    region_log_kernel,
    select_bandwidth,
)
from jaxannot.methods.emml.params import EmmlParams
from jaxannot.methods.emml.structured_output import (
    StructuredData,
    default_gamma,
    kernel_matrix,
    kmeans_vreps,
    random_vreps,
)
from jaxannot.methods.emml.working_set import (
    WorkingSetSettings,
)

if TYPE_CHECKING:
    from jaxannot.data.corpus import Corpus
    from jaxannot.types import PRNGKey

__all__ = [
    "check_emml_support",
    "fit_emml_annotator",
    "score_emml",
    "fit_mbrm_annotator",
    "score_mbrm",
]


def _observed_words(corpus):
    mask, words = corpus.observed_words()
    words = words[mask]
    if not np.any(words > 0):
        raise ValueError(f"corpus {corpus.name!r} has no observed words")
    return mask, words


@uses_defaults("emml")
def fit_emml_annotator(
    corpus: Corpus,
    *,
    rng_key: PRNGKey,
    vreps: int,
    vrep_method: str,
    word_rule: str,
    kernel: str,
    gamma: float,
    gamma_scale: float,
    c: float,
    tolerance: float,
    capacity: int,
    violators_per_vrep: int,
    max_iterations: int,
    max_sweeps: int,
    top_vreps: int,
    view: str,
    solver: str,
    exact_sweeps: int,
) -> Fitted:
    """Fit EMML on the observed words of ``corpus``.

    Parameters
    ----------
    vreps : int
        Number of VReps.
    vrep_method : {"kmeans", "random"}
    word_rule : {"majority", "union"}
        Words of a k-means VRep.
    kernel : {"rbf", "linear"}
    gamma : float
        RBF width; ``0`` means ``gamma_scale / median squared distance``.
    c, tolerance
        :math:`C` and the KKT tolerance (loss units).
    solver : {"exact", "working_set"}
        ``"exact"``: the dual over per-VRep mixtures, no cap on how many outputs a
        VRep uses (:func:`jaxannot.methods.emml.exact.fit_emml_exact`: projected
        gradient steps, then block sweeps, at most ``exact_sweeps`` of the two
        together). ``"working_set"``: Algorithm 1
        (:func:`jaxannot.methods.emml.working_set.fit_emml`) with the
        :class:`~jaxannot.methods.emml.working_set.WorkingSetSettings` ``capacity,
        violators_per_vrep, max_iterations, max_sweeps``, whose answer is the
        capacity-restricted optimum when slots overflow; its ties among wrong
        words are broken at random from ``rng_key``. ``"none"``: no solve, the
        dual's optimum for a diagonal kernel
        (:func:`jaxannot.methods.emml.exact.uncoupled_mixtures`, :math:`B = Y -
        \\frac{r}{W - r}(1 - Y)` at :math:`C = 1`), the baseline the solve must beat.
    top_vreps : int
        ``0``: eq. (1) scores; ``> 0``: §4.1 merge of the nearest VReps.
    view : str
        Feature view (default: the corpus's primary view).

    ``info["converged"]`` says whether the solver's KKT conditions hold to
    ``tolerance``; an unconverged fit of a solver also logs a warning on the
    ``"jaxannot"`` logger. ``solver="none"`` runs no solver: its ``converged`` is
    ``None``, and ``info["kkt_holds"]`` with its KKT violation and duality gap under
    the kernel say how far its point is from the optimum (no warning).
    """
    x = corpus.features(view or corpus.primary_view)
    mask, words = _observed_words(corpus)
    x_obs = x[mask]
    check_kernel_memory(min(vreps, x_obs.shape[0]))
    v = _vreps(rng_key, x_obs, words, vreps, vrep_method, word_rule)
    g = float(gamma) if gamma > 0 else gamma_scale * default_gamma(x_obs)
    k = kernel_matrix(v.features, v.features, kernel, g)
    data = StructuredData(k, v.words)
    if solver in ("exact", "none"):
        state, converged, solver_info = solve_mixtures(
            data, solver, c, tolerance, exact_sweeps
        )
    else:
        settings = WorkingSetSettings(
            capacity, max_iterations, max_sweeps, violators_per_vrep
        )
        state, converged, solver_info = solve_working_set(
            data, c, tolerance, jax.random.fold_in(rng_key, 1), settings
        )
    if solver == "none":
        solver_info["kkt_holds"], converged = converged, None
    elif not converged:
        warn_unconverged(solver, tolerance, solver_info)
    params = EmmlParams(
        vrep_features=np.asarray(v.features),
        vrep_words=np.asarray(v.words),
        coefficients=np.asarray(state.coefficients),
        vrep_word_scores=np.asarray(state.scores),
        gamma=np.asarray(g, np.float32),
    )
    last = solver_info.get("iterations", solver_info.get("sweeps"))
    check_emml_support(params, c, "closed form" if solver == "none" else last)
    info = {
        "solver": solver,
        "converged": converged,
        "dual_objective": float(state.objective),
        **solver_info,
    }
    return Fitted("emml", params, {}, info)


def _vreps(rng_key, x_obs, words, vreps: int, vrep_method: str, word_rule: str):
    """The VReps of the observed images (k-means or a random sample)."""
    if vrep_method == "kmeans":
        return kmeans_vreps(rng_key, x_obs, words, vreps, word_rule=word_rule)
    return random_vreps(rng_key, x_obs, words, vreps)


def _query_features(fitted: Fitted, corpus, dims: int) -> np.ndarray:
    """The fitted model's view of ``corpus``; ``ValueError`` unless it has ``dims``
    columns, as the model's."""
    x = corpus.features(fitted.hyper.get("view", "") or corpus.primary_view)
    if x.shape[1] != dims:
        raise ValueError(
            f"corpus view has {x.shape[1]} dims but the model was fitted on {dims}"
        )
    return x


def score_emml(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Word scores ``[images, words]`` (eq. 1, or the §4.1 merge when
    ``top_vreps > 0``)."""
    p, h = fitted.params, fitted.hyper
    v = jnp.asarray(p.vrep_features)
    x = jnp.asarray(_query_features(fitted, corpus, v.shape[1]))
    rows = kernel_matrix(x, v, h["kernel"], float(p.gamma))
    top = int(h.get("top_vreps", 0))
    if top <= 0:
        return rows @ jnp.asarray(p.coefficients)
    sims, idx = jax.lax.top_k(rows, min(top, v.shape[0]))
    return jnp.einsum("qk,qkw->qw", sims, jnp.asarray(p.vrep_word_scores)[idx])


@uses_defaults("mbrm")
def fit_mbrm_annotator(
    corpus: Corpus,
    *,
    rng_key: PRNGKey,
    bandwidth: float,
    smoothing: float,
    view: str,
    kernel: str,
    folds: int,
    select_metric: str,
) -> Fitted:
    """Fit MBRM: keep the annotated images' features and Bernoulli word model.

    ``kernel = "auto"`` uses ``"regions"`` (each blob a region) for a bag view and
    ``"gaussian"`` (the global feature vector) otherwise. ``bandwidth = 0`` chooses
    :math:`\\beta` by ``folds``-fold cross-validation of ``select_metric``
    (``"word_f1@5"``: the per-image top-5 ranking the issue is about, or ``"map"``:
    images ranked per word) on the annotated images of ``corpus`` only
    (:func:`jaxannot.methods.emml.mbrm.select_bandwidth`); the choice and its validation
    scores are in ``info``. ``smoothing = 0`` picks :math:`\\mu = 9N`
    (:func:`~jaxannot.methods.emml.mbrm.fit_mbrm`).
    """
    del rng_key  # deterministic
    name = view or corpus.primary_view
    x = corpus.features(name)
    if kernel == "auto":
        kernel = "regions" if corpus.view_kinds.get(name) == "bag" else "gaussian"
    mask, words = _observed_words(corpus)
    mu = smoothing if smoothing > 0 else None
    info = {}
    beta = bandwidth
    if beta <= 0:
        beta, info = select_bandwidth(
            x[mask],
            words,
            kernel=kernel,
            smoothing=mu,
            folds=int(folds),
            metric=select_metric,
        )
    params = fit_mbrm(x[mask], words, bandwidth=beta, smoothing=mu, kernel=kernel)
    return Fitted(
        "mbrm",
        MBRMParams(*map(np.asarray, params[:3])),  # the region kernel is rebuilt
        {"kernel": kernel},  # "auto" resolved
        {
            "bandwidth_used": float(params.bandwidth),
            "bandwidth_chosen_by": "given" if bandwidth > 0 else f"{folds}-fold CV",
            "kernel": kernel,
            "train_images": int(mask.sum()),
            **info,
        },
    )


def score_mbrm(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """:math:`P(w \\mid \\mathbf x)` for every image of ``corpus``."""
    p = fitted.params
    kernel = fitted.hyper.get("kernel", "gaussian")
    table = None
    if kernel == "regions":  # rebuilt from the blob counts (not stored)
        table = jnp.asarray(region_log_kernel(p.features, float(p.bandwidth)))
    params = MBRMParams(*map(jnp.asarray, p[:3]), table)
    x = _query_features(fitted, corpus, params.features.shape[1])
    return mbrm_word_probabilities(params, x)


register_words_method(
    "emml",
    fit_emml_annotator,
    "EMML structured max-margin annotation (Guo et al. 2016; US 8,463,053)",
    params=EmmlParams,
    monotone={"objective_trace": "decreases"},  # the dual, exact or working set
    score_words=score_emml,
    estimator_name="EMML",
    queries=("word", "image", "multimodal"),
)

register_words_method(
    "mbrm",
    fit_mbrm_annotator,
    "Multiple-Bernoulli relevance model (Feng, Manmatha, Lavrenko 2004)",
    params=MBRMParams,
    score_words=score_mbrm,
    estimator_name="MBRM",
    score_meaning="p(word | image) of the multiple-Bernoulli relevance model",
    non_negative=lambda hyper: hyper.get("kernel") == "regions",
)
