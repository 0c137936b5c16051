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

import logging

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, register_words_method
from jaxannot.annotators.hyper_spec import (
    uses_defaults,
)
from jaxannot.inference.support import SupportError, check_finite_tree, check_support
from jaxannot.methods.emml.exact import (
    fit_emml_exact,
    mixture_state,
    uncoupled_mixtures,
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
    KERNELS,
    StructuredData,
    default_gamma,
    kernel_matrix,
    kmeans_vreps,
    random_vreps,
)
from jaxannot.methods.emml.working_set import (
    WorkingSetSettings,
    fit_emml,
)
from jaxannot.runtime.memory import check_square_fits

__all__ = [
    "check_emml_support",
    "fit_emml_annotator",
    "score_emml",
    "fit_mbrm_annotator",
    "score_mbrm",
]

#: The least positive float32: the kernel width must be at least this.
_TINY = float(np.finfo(np.float32).tiny)
#: Tolerance of the coefficients' bounds and row sums, in units of ``C`` (float32
#: projections onto the capped simplex are exact to about 1e-6 of ``C``).
SUPPORT_TOLERANCE = 1e-3

_VREP_METHODS = ("kmeans", "random")
_SOLVERS = ("exact", "working_set", "none")
_log = logging.getLogger("jaxannot")


def _observed_words(corpus):
    mask, words = corpus.observed_words()
    words = words[mask]
    if not np.any(words > 0):
        raise ValueError(f"corpus {corpus.name!r} has no observed words")
    return mask, words


@uses_defaults("emml")
def fit_emml_annotator(
    corpus,
    *,
    rng_key,
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
    positive = (c, tolerance, vreps, capacity, exact_sweeps)
    _check_settings(vrep_method, kernel, solver, positive)
    x = corpus.features(view or corpus.primary_view)
    mask, words = _observed_words(corpus)
    x_obs = x[mask]
    _check_kernel_memory(min(vreps, x_obs.shape[0]))
    v = _vreps(rng_key, x_obs, words, vreps, vrep_method, word_rule)
    g = float(gamma) if gamma > 0 else gamma_scale * default_gamma(x_obs)
    k = kernel_matrix(v.features, v.features, kernel, g)
    data = StructuredData(k, v.words)
    if solver in ("exact", "none"):
        state, converged, solver_info = _solve_mixtures(
            data, solver, c, tolerance, exact_sweeps
        )
    else:
        settings = WorkingSetSettings(
            capacity, max_iterations, max_sweeps, violators_per_vrep
        )
        state, converged, solver_info = _solve_working_set(
            data, c, tolerance, jax.random.fold_in(rng_key, 1), settings
        )
    if solver == "none":
        solver_info["kkt_holds"], converged = converged, None
    elif not converged:
        _warn_unconverged(solver, tolerance, solver_info)
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


def check_emml_support(params: EmmlParams, c: float, iteration: int | str) -> None:
    r"""Raise :class:`~jaxannot.inference.support.SupportError` unless EMML's fitted
    ``params`` lie in their support.

    Every floating array must be finite and the kernel width ``gamma`` positive. The
    coefficients :math:`B_i = C\mathbf y_i - \mathbf u_i` of a mixture
    :math:`\mathbf u_i` of the capped simplex :math:`\{0 \le \mathbf u \le C,
    \sum_w u_w = r_i C\}` (both solvers' duals): a VRep's word entries must lie in
    :math:`[0, C]`, its other entries in :math:`[-C, 0]` and each row sum to 0, all
    within ``SUPPORT_TOLERANCE`` of ``C`` (times :math:`\max(r_i, 1)` for the sums).

    Parameters
    ----------
    params : EmmlParams
        The fitted params.
    c : float
        The fit's :math:`C`.
    iteration : int or str
        The solver's last iteration or sweep, for the message.
    """
    check_finite_tree("emml", params, iteration=iteration)
    check_support("emml: gamma", params.gamma, iteration=iteration, lower=_TINY)
    words = np.asarray(params.vrep_words) > 0
    coef = np.asarray(params.coefficients, np.float64)
    tol = SUPPORT_TOLERANCE * float(c)
    check_support(
        "emml: coefficients (signed + on a VRep's words, - on the others)",
        np.where(words, coef, -coef),
        iteration=iteration,
        lower=-tol,
        upper=float(c) + tol,
    )
    off = np.abs(coef.sum(1)) / np.maximum(words.sum(1), 1)
    if off.size and float(off.max()) > tol:
        raise SupportError(
            f"emml: coefficients left their support at iteration {iteration}: a "
            f"VRep's row sums to {float(off.max()):.3g} times its word count, not 0 "
            f"(tolerance {tol:.3g})"
        )


def _vreps(rng_key, x_obs, words, vreps: int, vrep_method: str, word_rule: str):
    """The VReps of the observed images (k-means or a random sample)."""
    if vrep_method == "kmeans":
        return kmeans_vreps(rng_key, x_obs, words, vreps, word_rule=word_rule)
    return random_vreps(rng_key, x_obs, words, vreps)


def _warn_unconverged(solver: str, tolerance: float, solver_info: dict) -> None:
    _log.warning(
        "emml (%s solver) stopped before convergence: the KKT conditions do not "
        "hold to tolerance %g (info: %s); the scores come from an inexact dual",
        solver,
        tolerance,
        {k: x for k, x in solver_info.items() if k != "objective_trace"},
    )


def _check_settings(vrep_method, kernel, solver, positive):
    """``ValueError`` naming the first of EMML's choices that is invalid, or the
    settings that must be positive when one of ``positive`` (``c, tolerance, vreps,
    capacity, exact_sweeps``) is not."""
    if vrep_method not in _VREP_METHODS:
        raise ValueError(
            f"unknown vrep_method {vrep_method!r}; valid: {', '.join(_VREP_METHODS)}"
        )
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; valid: {', '.join(KERNELS)}")
    if solver not in _SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; valid: {', '.join(_SOLVERS)}")
    if any(value <= 0 for value in positive):
        raise ValueError(
            "c, tolerance, vreps, capacity and exact_sweeps must be positive"
        )


def _solve_mixtures(data: StructuredData, solver: str, c, tolerance, sweeps_cap):
    """The dual over per-VRep mixtures: solved (``"exact"``) or at its
    diagonal-kernel optimum (``"none"``); ``(state, converged, info)``."""
    if solver == "exact":
        state, trace = fit_emml_exact(data, c, tolerance, max_sweeps=sweeps_cap)
    else:
        u = uncoupled_mixtures(data.words, c, jnp.diag(data.kernel))
        state, trace = mixture_state(data, u, c, tolerance), np.zeros(0)
    sweeps = int(state.sweeps)
    passes = int(state.gradient_steps) + sweeps
    wrong = np.asarray(data.words) <= 0
    support = (np.asarray(state.mixtures) > 0) & wrong
    info = {
        "gradient_steps": int(state.gradient_steps),
        "sweeps": sweeps,
        "max_violation": float(state.max_violation),
        "duality_gap": float(state.duality_gap),
        "wrong_words_pushed_down_mean": float(support.sum(1).mean()),
        "wrong_words_pushed_down_max": int(support.sum(1).max()),
        "objective_trace": [float(o) for o in np.asarray(trace)[:passes]],
    }
    return state, bool(state.converged), info


def _solve_working_set(data: StructuredData, c, tolerance, tie_key, settings):
    """Algorithm 1 (working sets); ``(state, converged, info)``."""
    state, hist = fit_emml(data, c, tolerance, tie_key=tie_key, settings=settings)
    iterations = int(state.iteration)
    last = iterations - 1
    converged = (
        int(hist.num_added[last]) == 0
        and float(hist.subproblem_gap[last]) <= tolerance
        and int(state.overflow) == 0
    )
    info = {
        "iterations": iterations,
        "active_constraints": int(np.asarray(state.working_set.active).sum()),
        "constraints_added": int(state.total_added),
        "overflow": int(state.overflow),
        "objective_trace": [float(o) for o in np.asarray(hist.objective)[:iterations]],
    }
    return state, converged, info


#: Float32 V x V arrays the exact solve holds at its peak (the kernel, its padded
#: copy and the solver's temporaries: 3.6 at 2000 VReps by XLA's memory analysis).
KERNEL_COPIES = 4


def _check_kernel_memory(num_vreps: int) -> None:
    """Refuse a VRep count whose kernel and dual (``KERNEL_COPIES`` float32 arrays
    of V x V) cannot fit: XLA's CPU client hangs on a failed allocation rather
    than raising."""
    check_square_fits(num_vreps, KERNEL_COPIES * 4, "vreps", " VReps")


def _query_features(fitted: Fitted, corpus, dims: int) -> np.ndarray:
    """The fitted model's view of ``corpus``; ``ValueError`` unless it has ``dims``
    columns, as the model's."""
    x = corpus.features(fitted.hyper.get("view", "") or corpus.primary_view)
    if x.shape[1] != dims:
        raise ValueError(
            f"corpus view has {x.shape[1]} dims but the model was fitted on {dims}"
        )
    return x


def score_emml(fitted: Fitted, corpus) -> jax.Array:
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
    corpus,
    *,
    rng_key,
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


def score_mbrm(fitted: Fitted, corpus) -> jax.Array:
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
