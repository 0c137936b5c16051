"""What the mixture declaration of :mod:`.mixture_annotators` reads and returns.

Its data and keyword arguments from a corpus, for a fit (:func:`mix_setup`) or for
new images (:func:`fold_in_args`); the stored params as its site values
(:func:`fitted_values`), its fitted values as :class:`~.mixture_of_unigrams.
MixtureParams` (:func:`to_mixture_params`) and those as the stored params
(:func:`mix_params`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.annotators.base import Fitted
from jaxannot.data.corpus import Corpus
from jaxannot.methods.topic_models import mixture_of_unigrams as mu
from jaxannot.methods.topic_models import visual_words as vw
from jaxannot.methods.topic_models.params import MixUnigramParams

if TYPE_CHECKING:
    from jaxannot.types import Array


def mix_params(params: mu.MixtureParams, phi: Array, edges: dict) -> MixUnigramParams:
    """The stored params of a mixture fit.

    Parameters
    ----------
    params : MixtureParams
        The fitted log mixing weights and log word distributions (text first).
    phi : Array
        The training images' posteriors over the components ``[n, K]``.
    edges : dict
        The real views' bin edges by view name.

    Returns
    -------
    MixUnigramParams
        The text's and the visual views' distributions apart, with ``phi`` and
        the bin edges.
    """
    return MixUnigramParams(
        log_pi=params.log_pi,
        log_beta_text=params.log_betas[0],
        log_beta_visual=tuple(params.log_betas[1:]),
        phi=phi,
        bin_edges=vw.edges_param(edges),
    )


def fitted_values(fitted: Fitted) -> dict:
    """The fitted globals as the declaration's site values: ``pi``, ``beta_0`` (the
    text) and ``beta_v`` (the visual views).

    Parameters
    ----------
    fitted : Fitted
        A fitted mixture.

    Returns
    -------
    dict
        Site name -> its value (probabilities, not logs).
    """
    p = fitted.params
    logs = [p.log_pi, p.log_beta_text, *p.log_beta_visual]
    names = ["pi"] + [f"beta_{v}" for v in range(len(logs) - 1)]
    return {n: jnp.exp(jnp.asarray(x)) for n, x in zip(names, logs, strict=True)}


def fold_in_args(fitted: Fitted, corpus: Corpus) -> tuple[tuple, dict]:
    """The declaration's arguments for new images: their visual words, no text (an
    all-zero text bag adds nothing to the log joint).

    Parameters
    ----------
    fitted : Fitted
        A fitted mixture.
    corpus : Corpus
        The new images.

    Returns
    -------
    tuple of (tuple, dict)
        The model's positional arguments (the bags, text first) and its keyword
        arguments (the topic count and the priors).
    """
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


def mix_setup(
    corpus: Corpus,
    topics: int,
    pi_concentration: float,
    beta_concentration: float,
    text_weight: float,
    views: str,
    bins: int,
) -> tuple[list[str], dict, dict, tuple, dict]:
    """What both mixtures start from: the priors and views checked, the views'
    names, bin edges and hyper entry, the data (text bag first) and the model's
    keyword arguments.

    Parameters
    ----------
    corpus : Corpus
        The training images.
    topics : int
        The mixture's components.
    pi_concentration : float
        The mixing weights' Dirichlet concentration.
    beta_concentration : float
        The word distributions' Dirichlet concentration.
    text_weight : float
        The text bag's counts are multiplied by it.
    views : str
        Which visual views to use (:func:`~.visual_words.fit_views`).
    bins : int
        Bins per real feature.

    Returns
    -------
    tuple of (list, dict, dict, tuple, dict)
        The visual views' names, their bin edges, their hyper-parameter entry,
        the bags (text first, as JAX arrays) and the model's keyword arguments.
    """
    names, edges, views_hyper = vw.fit_views(corpus, topics, views, bins)
    vis = vw.visual(corpus, names, edges)
    # device_put, not jnp.asarray: on the CPU it shares the host arrays (the
    # corpus's views, the text bag) where jnp.asarray copied them (the visual
    # words alone are 240 MB at 1M images)
    text = jax.device_put(vw.text(corpus) * text_weight)
    data = (text,) + tuple(map(jax.device_put, vis))
    kwargs = dict(
        num_topics=int(topics),
        pi_concentration=float(pi_concentration),
        beta_concentration=float(beta_concentration),
    )
    return names, edges, views_hyper, data, kwargs


def to_mixture_params(values: dict, num_views: int) -> mu.MixtureParams:
    """The declaration's fitted site values as :class:`~.mixture_of_unigrams.
    MixtureParams` (logs).

    Parameters
    ----------
    values : dict
        ``pi`` and ``beta_0`` ... ``beta_{num_views - 1}``.
    num_views : int
        The bags, the text's included.

    Returns
    -------
    MixtureParams
        Their logs.
    """
    return mu.MixtureParams(
        jnp.log(values["pi"]),
        tuple(jnp.log(values[f"beta_{v}"]) for v in range(num_views)),
    )
