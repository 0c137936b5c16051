r"""pLSA-Words (Monay & Gatica-Perez 2004), a topic-model baseline of seed 000.

:mod:`jaxannot.methods.topic_models.plsa_words` in two stages on the annotated images —
pLSA topics
defined by the words, then the visual-word distributions with :math:`P(z\mid d)` held
fixed — and fold-in of every other image from its visual words (real-valued views
binned per dimension, :mod:`.visual_words`). Under the transductive protocol the
annotated images keep their text topics.
"""

from __future__ import annotations

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted, register_words_method
from jaxannot.annotators.hyper_spec import (
    uses_defaults,
)
from jaxannot.data.corpus import Corpus
from jaxannot.methods.topic_models import plsa_words as pw
from jaxannot.methods.topic_models import visual_words as vw
from jaxannot.methods.topic_models.params import PlsaWordsParams

__all__ = ["PLSA_WORDS"]


@uses_defaults("plsa-words")
def _plsa_fit(
    corpus: Corpus,
    *,
    rng_key,
    topics,
    iterations,
    fold_in_iterations,
    smoothing,
    views,
    bins,
) -> Fitted:
    names, edges, views_hyper = vw.fit_views(corpus, topics, views, bins)
    text = vw.text(corpus)
    vis = np.concatenate(vw.visual(corpus, names, edges), axis=1)
    mask = np.asarray(corpus.word_mask, bool)
    state, objectives = pw.fit_plsa_words(
        rng_key,
        text[mask],
        vis[mask],
        int(topics),
        num_iterations=int(iterations),
        smoothing=smoothing,
    )
    theta, _ = pw.fold_in(state.betas[1], vis, num_iterations=int(fold_in_iterations))
    theta = np.asarray(theta).copy()
    theta[mask] = np.asarray(state.theta)  # annotated images keep their text topics
    params = PlsaWordsParams(
        state.betas[0], state.betas[1], theta, vw.edges_param(edges)
    )
    return Fitted(
        "plsa-words",
        params,
        views_hyper,
        {
            "objective_text": [float(x) for x in objectives["text"]],
            "objective_visual": [float(x) for x in objectives["visual"]],
        },
    )


def _plsa_theta(fitted: Fitted, corpus: Corpus) -> jax.Array:
    vis = np.concatenate(
        vw.fitted_visual(fitted, corpus),
        axis=1,
    )
    theta, _ = pw.fold_in(
        jnp.asarray(fitted.params.beta_visual),
        vis,
        num_iterations=int(fitted.hyper["fold_in_iterations"]),
    )
    return theta


def _plsa_score(fitted: Fitted, corpus: Corpus) -> np.ndarray:
    return np.asarray(
        _plsa_theta(fitted, corpus) @ jnp.asarray(fitted.params.beta_text)
    )


def _plsa_score_fit(fitted: Fitted) -> np.ndarray:
    return np.asarray(fitted.params.theta) @ np.asarray(fitted.params.beta_text)


PLSA_WORDS = register_words_method(
    "plsa-words",
    _plsa_fit,
    "pLSA-Words: text-defined pLSA topics, visual fold-in (Monay & Gatica-Perez 2004)",
    params=PlsaWordsParams,
    monotone={"objective_text": "increases", "objective_visual": "increases"},
    score_words=_plsa_score,
    score_fit_corpus=_plsa_score_fit,
    embed=lambda f, c: np.asarray(_plsa_theta(f, c)),
    estimator_name="PLSAWords",
    input_kind="bag",
    score_meaning="p(word | image) of pLSA-Words (a row sums to 1)",
)
