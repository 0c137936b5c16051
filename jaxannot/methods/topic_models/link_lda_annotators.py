r"""Link-LDA (Erosheva et al. 2004), the multi-view LDA baseline of seed 000.

:mod:`jaxannot.methods.topic_models.link_lda`: per-image topic proportions shared by the
text bag
and the visual views (real-valued views binned per dimension, :mod:`.visual_words`).
Fitted by collapsed variational Bayes, zeroth order (``inference="cvb0"``, the
default): up to ``stochastic_above`` images batch CVB0,
:func:`jaxannot.methods.topic_models.link_lda_cvb0.fit_cvb0` (``iterations`` updates
of every responsibility in ``blocks`` blocks of images); from that size on, SCVB0,
:func:`jaxannot.methods.topic_models.link_lda_scvb0.fit_scvb0` (``passes`` passes,
0 for about 100 minibatch updates,
over random minibatches of ``batch`` images, no per-token state: the large-corpus
path, ``benchmarks/peers/link_lda_vs_peers.py``); or by batch variational Bayes
(``inference="vb"``: :func:`jaxannot.methods.topic_models.link_lda_vb.fit_vb`,
``iterations`` passes of
``inner`` E-step updates). CVB0's schedule (24 updates, 16 blocks) is the one
``benchmarks/peers/link_lda_vs_peers.py`` chose on the training split; it reaches a
lower held-out perplexity than batch VB on Corel5k in a fraction of the time
(``docs/topic_models.md``). Either fit yields the same pair ``λ^v = n^v_kw + η``,
``γ = n_dk + α``, so new images are folded in from their visual words by the same VB
fold-in.

``lap-link-lda`` is the same model fitted by numpyro's SVI
(:mod:`jaxannot.methods.topic_models.link_lda_svi`: a point estimate of every β^v, a
logistic-normal q(θ_d)) with :class:`jaxannot.inference.LaplacianELBO`'s penalty
``lam`` Σ_ij S_ij ‖q_i − q_j‖² on a k-NN graph of the images' visual words
(``neighbors``, ``weight``, ``metric``, built as ``lap-mix-unigram`` builds its
graph); ``lam = 0`` is plain SVI. New images are folded in from their visual words
by the VB update with the fitted β̂.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, register_words_method, show_progress
from jaxannot.annotators.hyper_spec import (
    uses_defaults,
)
from jaxannot.data.corpus import Corpus
from jaxannot.inference.support import check_support
from jaxannot.methods.topic_models import link_lda as ll
from jaxannot.methods.topic_models import link_lda_cvb0 as cvb0
from jaxannot.methods.topic_models import link_lda_scvb0 as scvb0
from jaxannot.methods.topic_models import link_lda_svi as svi
from jaxannot.methods.topic_models import link_lda_vb as llvb
from jaxannot.methods.topic_models import visual_words as vw
from jaxannot.methods.topic_models.link_lda_bags import padded_bags
from jaxannot.methods.topic_models.mixture_graph import fit_graph, joined_features
from jaxannot.methods.topic_models.params import LapLinkLdaParams, LinkLdaParams
from jaxannot.methods.topic_models.readouts import topic_readouts

__all__ = ["LINK_LDA", "LAP_LINK_LDA", "INFERENCE"]

#: The fits of :func:`_lda_fit`'s ``inference`` hyper-parameter.
INFERENCE = ("cvb0", "vb")


@uses_defaults("link-lda")
def _lda_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics,
    inference,
    iterations,
    blocks,
    stochastic_above,
    passes,
    batch,
    inner,
    fold_in_inner,
    alpha,
    eta,
    views,
    bins,
) -> Fitted:
    names, edges, views_hyper = vw.fit_views(corpus, topics, views, bins)
    data = (vw.text(corpus),) + vw.visual(corpus, names, edges)
    prior = ll.LDAPrior(alpha=alpha, eta=eta)
    if inference == "cvb0" and corpus.num_images >= int(stochastic_above):
        fit = functools.partial(
            scvb0.fit_scvb0,
            num_passes=int(passes) or "auto",
            batch_size=int(batch),
            progress_bar=show_progress(),
        )
    elif inference == "cvb0":
        fit = functools.partial(
            cvb0.fit_cvb0, num_iterations=int(iterations), num_blocks=int(blocks)
        )
    else:
        fit = functools.partial(
            llvb.fit_vb, num_iterations=int(iterations), num_inner=int(inner)
        )
    state, objective = fit(rng_key, data, int(topics), prior=prior)
    # refresh the fit images' posteriors under the final λ (warm start)
    gamma = llvb.fold_in(
        state.lambdas,
        data,
        jnp.float32(alpha),
        num_inner=int(fold_in_inner),
        gamma0=state.gamma,
    )
    site = f"link-lda {inference}"  # bounds as the fit's float32 priors
    low_eta, low_alpha = float(np.float32(eta)), float(np.float32(alpha))
    for v, lam in enumerate(state.lambdas):
        check_support(f"{site}: lambdas[{v}]", lam, iteration=iterations, lower=low_eta)
    check_support(f"{site}: gamma", gamma, iteration="fold-in", lower=low_alpha)
    params = LinkLdaParams(
        state.lambdas[0], tuple(state.lambdas[1:]), gamma, vw.edges_param(edges)
    )
    return vw.fitted_with_objective("link-lda", params, views_hyper, objective)


def _fold_in_new(
    fitted: Fitted,
    corpus: Corpus,
    fold_in: Callable[..., jax.Array],
    words: Sequence[np.ndarray],
) -> jax.Array:
    """γ of new images from their visual words alone (an empty text bag) by
    ``fold_in`` (:func:`.link_lda_vb.fold_in` or :func:`.link_lda_svi.fold_in`) under
    the fitted topic-word parameters ``words`` (text first), with the fit's ``alpha``
    and ``fold_in_inner``."""
    words = tuple(map(jnp.asarray, words))
    text = np.zeros((corpus.num_images, words[0].shape[1]), np.float32)
    return fold_in(
        words,
        (text,) + vw.fitted_visual(fitted, corpus),
        jnp.float32(fitted.hyper["alpha"]),
        num_inner=int(fitted.hyper["fold_in_inner"]),
    )


def _normalized(gamma: jax.Array) -> jax.Array:
    return gamma / gamma.sum(-1, keepdims=True)


def _lda_theta(fitted: Fitted, corpus: Corpus) -> jax.Array:
    p = fitted.params
    words = (p.lambda_text, *p.lambda_visual)
    return _normalized(_fold_in_new(fitted, corpus, llvb.fold_in, words))


LINK_LDA = register_words_method(
    "link-lda",
    _lda_fit,
    "Link-LDA: per-image topic proportions shared by the views, "
    "collapsed (CVB0) or batch variational Bayes (Erosheva et al. 2004)",
    params=LinkLdaParams,
    estimator_name="LinkLDA",
    score_meaning="p(word | image) of Link-LDA (a row sums to 1)",
    **topic_readouts(
        _lda_theta,
        lambda p: _normalized(jnp.asarray(p.gamma)),
        lambda theta, p: theta @ ll.topic_word(jnp.asarray(p.lambda_text)),
    ),
)


# ------------------------------------------------ graph-regularized Link-LDA (SVI)
@uses_defaults("lap-link-lda")
def _lap_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics,
    lam,
    neighbors,
    weight,
    metric,
    steps,
    learning_rate,
    fold_in_inner,
    alpha,
    eta,
    views,
    bins,
) -> Fitted:
    from jaxannot.graph import pad_edges

    settings_of = functools.partial(
        svi.SVISettings,
        num_topics=int(topics),
        alpha=float(alpha),
        eta=float(eta),
        lam=float(lam),
        learning_rate=float(learning_rate),
    )
    settings_of(vocab_sizes=()).check()
    names, edges, views_hyper = vw.fit_views(corpus, topics, views, bins)
    vis = vw.visual(corpus, names, edges)
    data = (vw.text(corpus),) + vis
    graph, _ = fit_graph(joined_features(vis), neighbors, metric, weight)
    # a symmetrized k-NN graph has at most 2 n k directed edges: one compiled fit
    k = min(int(neighbors), corpus.num_images - 1)
    graph = pad_edges(graph, 2 * k * corpus.num_images)
    ids, cnts = padded_bags(data)
    fit = svi.fit_svi(
        rng_key,
        ids,
        cnts,
        graph,
        settings_of(vocab_sizes=tuple(int(d.shape[1]) for d in data)),
        num_steps=int(steps),
        progress_bar=show_progress(),
    )
    for site, value in [(f"betas[{v}]", b) for v, b in enumerate(fit.betas)] + [
        ("theta", fit.theta)
    ]:
        check_support(
            f"lap-link-lda: {site}", value, iteration=int(steps), simplex_axis=-1
        )
    params = LapLinkLdaParams(
        fit.betas[0], tuple(fit.betas[1:]), fit.theta, vw.edges_param(edges)
    )
    objective = (-x for x in fit.losses)
    return vw.fitted_with_objective("lap-link-lda", params, views_hyper, objective)


def _lap_theta(fitted: Fitted, corpus: Corpus) -> jax.Array:
    """θ of new images by the VB fold-in of their visual words under the fitted
    β̂ (per image: a batch of one gives the same rows)."""
    p = fitted.params
    return _normalized(
        _fold_in_new(fitted, corpus, svi.fold_in, (p.beta_text, *p.beta_visual))
    )


LAP_LINK_LDA = register_words_method(
    "lap-link-lda",
    _lap_fit,
    "graph-regularized Link-LDA: SVI with a Laplacian penalty on the images' topic "
    "proportions over a k-NN graph of their visual words (LaplacianELBO)",
    params=LapLinkLdaParams,
    estimator_name="LapLinkLDA",
    score_meaning="p(word | image) of Link-LDA fitted by SVI (a row sums to 1)",
    **topic_readouts(
        _lap_theta,
        lambda p: jnp.asarray(p.theta),
        lambda theta, p: theta @ jnp.asarray(p.beta_text),
    ),
)
