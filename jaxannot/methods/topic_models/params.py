"""The fitted parameters of the topic models, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`).

Every one keeps the text distribution apart from the visual ones (one per visual view
in a tuple, each with its own vocabulary), the posteriors of the fit images, and
``bin_edges``: the quantile edges ``[dims, bins - 1]`` of each real-valued view by
view name (None when every view holds counts; :mod:`.visual_words`).
"""

from __future__ import annotations

from typing import NamedTuple

from jax.typing import ArrayLike

from jaxannot.annotators.persistence import DictOf, TupleOf

__all__ = [
    "LapLinkLdaParams",
    "LapMixUnigramParams",
    "LinkLdaParams",
    "MixUnigramParams",
    "PlsaWordsParams",
]

_EDGES = DictOf("f[_,_]")


class MixUnigramParams(NamedTuple):
    """``mix-unigram``: log mixing weights ``log_pi`` [k], log word distributions
    ``log_beta_text`` [k, w] and ``log_beta_visual`` (per view [k, v]), posteriors
    ``phi`` [n, k] of the fit images."""

    log_pi: ArrayLike
    log_beta_text: ArrayLike
    log_beta_visual: tuple
    phi: ArrayLike
    bin_edges: dict | None = None

    spec = {
        "log_pi": "f[k]",
        "log_beta_text": "f[k,w]",
        "log_beta_visual": TupleOf("f[k,_]"),
        "phi": "f[n,k]",
        "bin_edges": _EDGES,
    }


class LapMixUnigramParams(NamedTuple):
    """``lap-mix-unigram``: :class:`MixUnigramParams`'s fields (``phi`` the regularized
    posteriors) and the fit graph new images join: the fit images' visual words
    ``graph_features`` [n, g], the heat-kernel width ``heat_width`` and the graph's
    mean degree ``graph_mean_degree`` (None in models saved before ``lam`` was
    scaled by it)."""

    log_pi: ArrayLike
    log_beta_text: ArrayLike
    log_beta_visual: tuple
    phi: ArrayLike
    graph_features: ArrayLike
    heat_width: ArrayLike
    bin_edges: dict | None = None
    graph_mean_degree: ArrayLike | None = None

    spec = {
        **MixUnigramParams.spec,
        "graph_features": "f[n,g]",
        "heat_width": "f[]",
        "graph_mean_degree": "f[]",
    }


class PlsaWordsParams(NamedTuple):
    """``plsa-words``: ``beta_text`` [k, w] = P(w|z), ``beta_visual`` [k, v] over the
    concatenated visual words, ``theta`` [n, k] = P(z|d) of the fit images."""

    beta_text: ArrayLike
    beta_visual: ArrayLike
    theta: ArrayLike
    bin_edges: dict | None = None

    spec = {
        "beta_text": "f[k,w]",
        "beta_visual": "f[k,v]",
        "theta": "f[n,k]",
        "bin_edges": _EDGES,
    }


class LinkLdaParams(NamedTuple):
    """``link-lda``: topic-word Dirichlet parameters ``lambda_text`` [k, w] and
    ``lambda_visual`` (per view [k, v]), the fit images' ``gamma`` [n, k]."""

    lambda_text: ArrayLike
    lambda_visual: tuple
    gamma: ArrayLike
    bin_edges: dict | None = None

    spec = {
        "lambda_text": "f[k,w]",
        "lambda_visual": TupleOf("f[k,_]"),
        "gamma": "f[n,k]",
        "bin_edges": _EDGES,
    }


class LapLinkLdaParams(NamedTuple):
    """``lap-link-lda``: MAP topic-word distributions ``beta_text`` [k, w] and
    ``beta_visual`` (per view [k, v]), the fit images' ``theta`` [n, k]."""

    beta_text: ArrayLike
    beta_visual: tuple
    theta: ArrayLike
    bin_edges: dict | None = None

    spec = {
        "beta_text": "f[k,w]",
        "beta_visual": TupleOf("f[k,_]"),
        "theta": "f[n,k]",
        "bin_edges": _EDGES,
    }
