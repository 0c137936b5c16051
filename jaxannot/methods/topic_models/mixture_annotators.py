r"""Topic-model annotators of seed 000: mixture of unigrams (plain and
graph-regularized) here, pLSA-Words and Link-LDA in :mod:`.plsa_words` and
:mod:`.link_lda`.

All four read the feature views of a corpus as visual-word counts (real-valued views
binned per dimension, :mod:`.visual_words`) and its ``words`` as the text bag; images
whose words are hidden contribute their visual words only. Every method works under
both protocols:

- inductive: ``score_words`` folds in new images from their visual words alone
  (``lap-mix-unigram`` also links each new image to its k nearest fit images and
  maximizes its regularized objective with theirs fixed);
- transductive (seed 000's): ``score_fit_corpus`` returns the posteriors the fit
  computed for its own images — for ``lap-mix-unigram`` the graph-regularized ones —
  and annotates with :math:`p(w\mid d) = \sum_k \phi_{dk}\beta^{text}_{kw}`.

``mix-unigram``
    :mod:`jaxannot.methods.topic_models.mixture_of_unigrams` fitted by MAP-EM.
``lap-mix-unigram``
    The same model with the Laplacian-regularized E-step of
    :mod:`jaxannot.inference.lapvar` (``algorithm=lapvar1|lapvar2``) on a k-NN graph of
    the visual view (``neighbors``, ``weight``, ``metric``); ``lam`` is :math:`\lambda`
    on the graph scaled to mean degree 1 (the scale of :class:`~jaxannot.inference.
    lapvar.LapVar1`); a fit whose posteriors collapse warns
    (:class:`~jaxannot.inference.CollapsedFitWarning`). Its regularized EM stops at
    the first iteration that improves the objective by less than
    :data:`LAP_TOLERANCE` (relative; ``iterations`` is the cap; the result's
    ``objective`` trace has one entry per iteration run).
"""

from __future__ import annotations

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import (
    Fitted,
    Method,
    register_words_method,
    show_progress,
)
from jaxannot.annotators.hyper_spec import (
    uses_defaults,
)
from jaxannot.data.corpus import Corpus
from jaxannot.inference import lapvar
from jaxannot.inference.support import check_support
from jaxannot.inference.vem.algorithm import VEM
from jaxannot.inference.vem.fit_warnings import warn_collapsed
from jaxannot.methods.topic_models import mixture_of_unigrams as mu
from jaxannot.methods.topic_models import visual_words as vw
from jaxannot.methods.topic_models.mixture_data import (
    fitted_values,
    fold_in_args,
    mix_params,
    mix_setup,
    to_mixture_params,
)
from jaxannot.methods.topic_models.mixture_graph import (
    fit_graph,
    joined_features,
    lapvar1_estep,
    newton_batch,
)
from jaxannot.methods.topic_models.params import LapMixUnigramParams, MixUnigramParams
from jaxannot.methods.topic_models.readouts import topic_readouts

__all__ = ["LAP_MIX_UNIGRAM", "LAP_TOLERANCE", "MIX_UNIGRAM"]

#: ``lap-mix-unigram``'s regularized EM stops at the first iteration whose objective
#: improves on the best by less than this (relative), about float32's resolution of
#: the objective (2^-23 = 1.2e-7). At 1e-6 the Corel5k fit of
#: benchmarks/results/subsample_figures.json stopped at iteration 38 of 50 (a gain of
#: 5.9e-7) and its word F1@5 moved from 0.0692 to 0.0757; at 1e-7 it runs all 50.
LAP_TOLERANCE = 1e-7


# ------------------------------------------------------- mixture of unigrams
def _mix_visual_phi(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Exact posterior of each image from its visual words alone (the declaration's
    fold-in, :meth:`VEM.posteriors_for`)."""
    args, kwargs = fold_in_args(fitted, corpus)
    return _vem().posteriors_for(fitted_values(fitted), *args, **kwargs)


def _devices():
    """The devices a fit's images are split over: under jax.distributed every
    process's devices, else None (the default device)."""
    return jax.devices() if jax.process_count() > 1 else None


def _vem(estep=None) -> VEM:
    """The mixture's VEM with the closed-form M-step and ``estep``: a new object per
    fit, equal to the last one of the same E-step kind, so it reuses its compiled
    code (nothing shared is mutated)."""
    devices = _devices()
    # MAP under the Dirichlet prior on pi empties the topics the data do not need
    # (topics=50 on a small corpus): expected here, so no warning
    return VEM(
        mu.mixture_of_unigrams,
        local_site="z",
        estep=estep,
        m_step=mu.closed_form_m_step,
        devices=devices,
        warn_empty=False,
    )


def _run_mixture(rng_key, data, kwargs, iterations, estep=None, init=None, tol=0.0):
    """The mixture declaration fitted by VEM (closed-form M-step); it stops at the
    first iteration whose objective improves on the best by less than ``tol``
    (relative; 0 runs every iteration), LapVar2 at 1e-6 (relative) at least."""
    vem = _vem(estep)
    result = vem.run(
        rng_key,
        int(iterations),
        data,
        init_params=init,
        progress_bar=show_progress(),
        tolerance=max(float(tol), 1e-6) if vem.estep.keep_best else float(tol),
        **kwargs,
    )
    # the globals are small: checked on the host (no per-shape op-by-op compiles)
    for site in ["pi"] + [f"beta_{v}" for v in range(len(data))]:
        check_support(
            f"mixture: {site}",
            np.asarray(result.params[site]),
            iteration=len(result.losses),
            simplex_axis=-1,
        )
    return result, to_mixture_params(result.params, len(data))


@uses_defaults("mix-unigram")
def _mix_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics,
    iterations,
    pi_concentration,
    beta_concentration,
    text_weight,
    views,
    bins,
) -> Fitted:
    names, edges, views_hyper, data, kwargs = mix_setup(
        corpus, topics, pi_concentration, beta_concentration, text_weight, views, bins
    )
    result, params = _run_mixture(rng_key, data, kwargs, iterations)
    phi = _vem().posteriors_for(result.params, data, **kwargs)  # under the final M
    objective = (-x for x in result.losses)
    fit = mix_params(params, phi, edges)
    return vw.fitted_with_objective("mix-unigram", fit, views_hyper, objective)


def _mixture_words(phi: jax.Array, params: MixUnigramParams) -> jax.Array:
    return mu.predict_words(phi, jnp.asarray(params.log_beta_text))


def _register_mixture(name: str, fit, phi_of, params: type, summary: str) -> Method:
    """Register a mixture-of-unigrams method whose posteriors of new images are
    ``phi_of(fitted, corpus)`` (its embedding; the words follow from them) and whose
    fitted parameters are a ``params``."""
    return register_words_method(
        name,
        fit,
        summary,
        params=params,
        monotone={"objective": "increases"},  # EM; LapVar's regularized bound
        score_meaning="p(word | image) under the mixture (a row sums to 1 over words)",
        **topic_readouts(phi_of, lambda p: jnp.asarray(p.phi), _mixture_words),
    )


MIX_UNIGRAM = _register_mixture(
    "mix-unigram",
    _mix_fit,
    _mix_visual_phi,
    MixUnigramParams,
    "multimodal mixture of unigrams, MAP-EM (Nigam et al. 2000)",
)


# ----------------------------------------------- Laplacian mixture of unigrams
@uses_defaults("lap-mix-unigram")
def _lap_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics,
    lam,
    neighbors,
    weight,
    metric,
    algorithm,
    iterations,
    warm_start,
    sweeps,
    newton_steps,
    gamma,
    smoothing_steps,
    schedule,
    pi_concentration,
    beta_concentration,
    text_weight,
    views,
    bins,
) -> Fitted:
    from jaxannot.graph import mean_degree

    names, edges, views_hyper, data, kwargs = mix_setup(
        corpus, topics, pi_concentration, beta_concentration, text_weight, views, bins
    )
    feats = joined_features(vw.visual(corpus, names, edges))
    graph, t = fit_graph(feats, neighbors, metric, weight)
    if algorithm == "lapvar1":
        estep = lapvar1_estep(graph, lam, sweeps, newton_steps, schedule)
    else:
        estep = lapvar.LapVar2(
            graph,
            lam,
            gamma=gamma,
            smoothing=int(smoothing_steps),
            heldout_check=False,
        )
    warm_key, run_key = jax.random.split(rng_key)
    init = None
    if int(warm_start) > 0:  # plain EM first: the regularized EM refines its optimum
        warm, _ = _run_mixture(warm_key, data, kwargs, warm_start)
        init = {k: v for k, v in warm.params.items() if k != "terms"}
    result, params = _run_mixture(
        run_key, data, kwargs, iterations, estep, init, LAP_TOLERANCE
    )
    warn_collapsed(result.posteriors, "lap-mix-unigram's fit")
    objective = -result.losses[~np.isnan(result.losses)]
    fit = mix_params(params, result.posteriors, edges)
    lap_params = LapMixUnigramParams(
        *fit[:4],
        graph_features=feats,
        heat_width=np.float32(t),
        bin_edges=fit.bin_edges,
        # lam is on the scale of the fit graph's mean degree (LapVar1); a new image
        # joins that graph, so its update uses lam / mean degree as well
        graph_mean_degree=np.float32(mean_degree(graph)),
    )
    return vw.fitted_with_objective(
        "lap-mix-unigram", lap_params, views_hyper, objective
    )


def _lap_phi_new(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """Regularized posteriors of new images linked to their k nearest fit images."""
    from jaxannot.graph import edge_weights, knn_search

    h, p = fitted.hyper, fitted.params
    vis_np = vw.fitted_visual(fitted, corpus)
    args, kwargs = fold_in_args(fitted, corpus)
    a = _vem().local_log_joint(fitted_values(fitted), *args, **kwargs)
    train = np.asarray(p.graph_features)
    k = min(int(h["neighbors"]), train.shape[0])
    q = joined_features(vis_np)
    idx, dist = knn_search(q, train, k, metric=h["metric"])
    w = edge_weights(q, train, idx, dist, weight=h["weight"], t=float(p.heat_width))
    w = jnp.asarray(w, jnp.float32)
    phi_train = jnp.asarray(p.phi)
    m = jnp.einsum("qk,qkt->qt", w, phi_train[jnp.asarray(idx)])
    d = w.sum(1)
    # fits saved before lam was scaled by the mean degree lack it (raw lam)
    degree = 1.0 if p.graph_mean_degree is None else float(p.graph_mean_degree)
    lam = float(h["lam"]) / degree
    return newton_batch(jax.nn.softmax(a, -1), a, m, d, jnp.float32(lam))


LAP_MIX_UNIGRAM = _register_mixture(
    "lap-mix-unigram",
    _lap_fit,
    _lap_phi_new,
    LapMixUnigramParams,
    "LapMixUnigram: mixture of unigrams + Laplacian-regularized VI "
    "(LapVar1/LapVar2, seed 000)",
)
