"""A topic-model annotator's read-outs, from its topic proportions.

A topic model's embedding of an image is its topic proportions θ (the mixtures'
posteriors φ), and its word scores follow from them and the fitted parameters:
:func:`topic_readouts` builds ``score_words``, ``score_fit_corpus`` and ``embed``
from those maps, for the mixtures of unigrams and the Link-LDAs to register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import jax

from jaxannot.annotators.base import Fitted
from jaxannot.data.corpus import Corpus

__all__ = ["topic_readouts"]


def topic_readouts(
    theta_of: Callable[[Fitted, Corpus], jax.Array],
    fit_theta: Callable[[Any], jax.Array],
    words_of: Callable[[jax.Array, Any], jax.Array],
) -> dict[str, Any]:
    """The protocol functions of a topic model that reads ``X`` as visual-word
    counts, for :func:`~jaxannot.annotators.base.register_words_method`.

    Parameters
    ----------
    theta_of : callable
        ``theta_of(fitted, corpus)``: the topic proportions of the corpus's images
        (the method's ``embed``).
    fit_theta : callable
        ``fit_theta(params)``: those of the fit images, from the fitted parameters.
    words_of : callable
        ``words_of(theta, params)``: p(word | image) [images, words] of images with
        topic proportions ``theta``.

    Returns
    -------
    dict
        ``score_words``, ``score_fit_corpus``, ``embed`` and ``input_kind="bag"``.
    """

    def score_words(fitted: Fitted, corpus: Corpus) -> np.ndarray:
        return np.asarray(words_of(theta_of(fitted, corpus), fitted.params))

    def score_fit_corpus(fitted: Fitted) -> np.ndarray:
        return np.asarray(words_of(fit_theta(fitted.params), fitted.params))

    def embed(fitted: Fitted, corpus: Corpus) -> np.ndarray:
        return np.asarray(theta_of(fitted, corpus))

    return {
        "score_words": score_words,
        "score_fit_corpus": score_fit_corpus,
        "embed": embed,
        "input_kind": "bag",
    }
