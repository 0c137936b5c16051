"""What the mixture declaration of :mod:`.mixture_annotators` reads and returns.

Its data and keyword arguments from a corpus, for a fit (:func:`_mix_setup`) or for
new images (:func:`_fold_in_args`); the stored params as its site values
(:func:`_fitted_values`), its fitted values as :class:`~.mixture_of_unigrams.
MixtureParams` (:func:`_to_mixture_params`) and those as the stored params
(:func:`_mix_params`).
"""

from __future__ import annotations

import numpy as np

import jax.numpy as jnp

from jaxannot.annotators.base import Fitted
from jaxannot.data.corpus import Corpus
from jaxannot.methods.topic_models import mixture_of_unigrams as mu
from jaxannot.methods.topic_models import visual_words as vw
from jaxannot.methods.topic_models.params import MixUnigramParams


def _mix_params(params: mu.MixtureParams, phi, edges) -> MixUnigramParams:
    return MixUnigramParams(
        log_pi=params.log_pi,
        log_beta_text=params.log_betas[0],
        log_beta_visual=tuple(params.log_betas[1:]),
        phi=phi,
        bin_edges=vw.edges_param(edges),
    )


def _fitted_values(fitted: Fitted) -> dict:
    """The fitted globals as the declaration's site values: ``pi``, ``beta_0`` (the
    text) and ``beta_v`` (the visual views)."""
    p = fitted.params
    logs = [p.log_pi, p.log_beta_text, *p.log_beta_visual]
    names = ["pi"] + [f"beta_{v}" for v in range(len(logs) - 1)]
    return {n: jnp.exp(jnp.asarray(x)) for n, x in zip(names, logs, strict=True)}


def _fold_in_args(fitted: Fitted, corpus: Corpus) -> tuple[tuple, dict]:
    """The declaration's arguments for new images: their visual words, no text (an
    all-zero text bag adds nothing to the log joint)."""
    vis = tuple(map(jnp.asarray, vw.fitted_visual(fitted, corpus)))
    words = np.shape(fitted.params.log_beta_text)[1]
    text = jnp.zeros((corpus.num_images, words), jnp.float32)
    h = fitted.hyper
    kwargs = dict(
        num_topics=int(h["topics"]),
        pi_concentration=float(h["pi_concentration"]),
        beta_concentration=float(h["beta_concentration"]),
    )
    return ((text,) + vis,), kwargs


def _mix_setup(
    corpus, topics, pi_concentration, beta_concentration, text_weight, views, bins
):
    """What both mixtures start from: the priors and views checked, the views'
    names, bin edges and hyper entry, the data (text bag first) and the model's
    keyword arguments."""
    mu.check_priors(pi_concentration, beta_concentration)
    names, edges, views_hyper = vw.fit_views(corpus, topics, views, bins)
    vis = vw.visual(corpus, names, edges)
    text = jnp.asarray(vw.text(corpus) * text_weight)
    data = (text,) + tuple(map(jnp.asarray, vis))
    kwargs = dict(
        num_topics=int(topics),
        pi_concentration=float(pi_concentration),
        beta_concentration=float(beta_concentration),
    )
    return names, edges, views_hyper, data, kwargs


def _to_mixture_params(values: dict, num_views: int) -> mu.MixtureParams:
    return mu.MixtureParams(
        jnp.log(values["pi"]),
        tuple(jnp.log(values[f"beta_{v}"]) for v in range(num_views)),
    )
