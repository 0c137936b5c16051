r"""Link-LDA (Erosheva et al. 2004), the multi-view LDA baseline of seed 000.

:mod:`jaxannot.models.link_lda`: per-image topic proportions shared by the text bag
and the visual views (real-valued views binned per dimension, :mod:`.visual_words`).
Fitted by collapsed variational Bayes (``inference="cvb0"``, the default:
:func:`jaxannot.models.link_lda_cvb0.fit_cvb0`, ``iterations`` updates of every
responsibility in ``blocks`` blocks of images) or by batch variational Bayes
(``inference="vb"``: :func:`jaxannot.models.link_lda.fit_vb`, ``iterations`` passes of
``inner`` E-step updates). CVB0's schedule (24 updates, 16 blocks) is the one
``benchmarks/link_lda_vs_peers.py`` chose on the training split; it reaches a lower
held-out perplexity than batch VB on Corel5k in a fraction of the time
(``docs/topic_models.md``). Either fit yields the same pair ``λ^v = n^v_kw + η``,
``γ = n_dk + α``, so new images are folded in from their visual words by the same VB
fold-in.
"""

from __future__ import annotations

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators import visual_words as vw
from jaxannot.annotators.base import Fitted
from jaxannot.annotators.hyper_spec import (
    register_words_method,
    uses_defaults,
)
from jaxannot.data.corpus import Corpus
from jaxannot.models import link_lda as ll
from jaxannot.models import link_lda_cvb0 as cvb0

__all__ = ["LINK_LDA", "INFERENCE"]

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
    inner,
    fold_in_inner,
    alpha,
    eta,
    views,
    bins,
) -> Fitted:
    if inference not in INFERENCE:
        raise ValueError(
            f"unknown inference {inference!r}; valid: {', '.join(INFERENCE)}"
        )
    names, edges, views_hyper = vw.fit_views(corpus, topics, views, bins)
    data = (vw.text(corpus),) + vw.visual(corpus, names, edges)
    prior = ll.LDAPrior(alpha=alpha, eta=eta)
    if inference == "cvb0":
        state, objective = cvb0.fit_cvb0(
            rng_key,
            data,
            int(topics),
            prior=prior,
            num_iterations=int(iterations),
            num_blocks=int(blocks),
        )
    else:
        state, objective = ll.fit_vb(
            rng_key,
            data,
            int(topics),
            num_iterations=int(iterations),
            num_inner=int(inner),
            prior=prior,
        )
    # refresh the fit images' posteriors under the final λ (warm start)
    gamma = ll.fold_in(
        state.lambdas,
        data,
        jnp.float32(alpha),
        num_inner=int(fold_in_inner),
        gamma0=state.gamma,
    )
    params = {
        "lambda_text": state.lambdas[0],
        "lambda_visual": {str(i): lam for i, lam in enumerate(state.lambdas[1:])},
        "gamma": gamma,
    }
    params.update(vw.edges_param(edges))
    return Fitted(
        "link-lda",
        params,
        views_hyper,
        {"objective": [float(x) for x in objective]},
    )


def _lda_gamma(fitted: Fitted, corpus: Corpus) -> jax.Array:
    p = fitted.params
    vis = vw.fitted_visual(fitted, corpus)
    lambdas = (jnp.asarray(p["lambda_text"]),) + tuple(
        jnp.asarray(p["lambda_visual"][str(i)]) for i in range(len(vis))
    )
    text = np.zeros((corpus.num_images, lambdas[0].shape[1]), np.float32)
    return ll.fold_in(
        lambdas,
        (text,) + vis,
        jnp.float32(fitted.hyper["alpha"]),
        num_inner=int(fitted.hyper["fold_in_inner"]),
    )


def _lda_words(gamma, lambda_text) -> np.ndarray:
    theta = gamma / gamma.sum(-1, keepdims=True)
    return np.asarray(theta @ ll.topic_word(jnp.asarray(lambda_text)))


def _lda_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    return _lda_words(_lda_gamma(fitted, corpus), fitted.params["lambda_text"])


def _lda_score_fit(fitted: Fitted) -> np.ndarray:
    return _lda_words(jnp.asarray(fitted.params["gamma"]), fitted.params["lambda_text"])


def _lda_embed(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    g = _lda_gamma(fitted, corpus)
    return np.asarray(g / g.sum(-1, keepdims=True))


LINK_LDA = register_words_method(
    "link-lda",
    _lda_fit,
    "Link-LDA: per-image topic proportions shared by the views, "
    "collapsed (CVB0) or batch variational Bayes (Erosheva et al. 2004)",
    score_words=_lda_score,
    score_fit_corpus=_lda_score_fit,
    embed=_lda_embed,
)
