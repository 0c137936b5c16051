"""The fitted parameters of the topic models, declared for saving and loading
(:mod:`jaxannot.annotators.persistence`).

Every one keeps the text distribution apart from the visual ones (one per visual view
in a tuple, each with its own vocabulary), the posteriors of the fit images, and
``bin_edges``: the quantile edges ``[dims, bins - 1]`` of each real-valued view by
view name (None when every view holds counts; :mod:`.visual_words`).
"""

from __future__ import annotations

from typing import NamedTuple

from jaxtyping import Float

from jaxannot.types import Array

__all__ = [
    "LapLinkLdaParams",
    "LapMixUnigramParams",
    "LinkLdaParams",
    "MixUnigramParams",
    "PlsaWordsParams",
]


class MixUnigramParams(NamedTuple):
    """``mix-unigram``: log mixing weights ``log_pi`` [k], log word distributions
    ``log_beta_text`` [k, w] and ``log_beta_visual`` (per view [k, v]), posteriors
    ``phi`` [n, k] of the fit images."""

    log_pi: Float[Array, " k"]
    log_beta_text: Float[Array, "k w"]
    log_beta_visual: tuple[Float[Array, "k _"], ...]
    phi: Float[Array, "n k"]
    bin_edges: dict[str, Float[Array, "_ _"]] | None = None


class LapMixUnigramParams(NamedTuple):
    """``lap-mix-unigram``: :class:`MixUnigramParams`'s fields (``phi`` the regularized
    posteriors) and the fit graph new images join: the fit images' visual words
    ``graph_features`` [n, g], the heat-kernel width ``heat_width`` and the graph's
    mean degree ``graph_mean_degree`` (None in models saved before ``lam`` was
    scaled by it)."""

    log_pi: Float[Array, " k"]
    log_beta_text: Float[Array, "k w"]
    log_beta_visual: tuple[Float[Array, "k _"], ...]
    phi: Float[Array, "n k"]
    graph_features: Float[Array, "n g"]
    heat_width: Float[Array, ""]
    bin_edges: dict[str, Float[Array, "_ _"]] | None = None
    graph_mean_degree: Float[Array, ""] | None = None


class PlsaWordsParams(NamedTuple):
    """``plsa-words``: ``beta_text`` [k, w] = P(w|z), ``beta_visual`` [k, v] over the
    concatenated visual words, ``theta`` [n, k] = P(z|d) of the fit images."""

    beta_text: Float[Array, "k w"]
    beta_visual: Float[Array, "k v"]
    theta: Float[Array, "n k"]
    bin_edges: dict[str, Float[Array, "_ _"]] | None = None


class LinkLdaParams(NamedTuple):
    """``link-lda``: topic-word Dirichlet parameters ``lambda_text`` [k, w] and
    ``lambda_visual`` (per view [k, v]), the fit images' ``gamma`` [n, k]."""

    lambda_text: Float[Array, "k w"]
    lambda_visual: tuple[Float[Array, "k _"], ...]
    gamma: Float[Array, "n k"]
    bin_edges: dict[str, Float[Array, "_ _"]] | None = None


class LapLinkLdaParams(NamedTuple):
    """``lap-link-lda``: MAP topic-word distributions ``beta_text`` [k, w] and
    ``beta_visual`` (per view [k, v]), the fit images' ``theta`` [n, k]."""

    beta_text: Float[Array, "k w"]
    beta_visual: tuple[Float[Array, "k _"], ...]
    theta: Float[Array, "n k"]
    bin_edges: dict[str, Float[Array, "_ _"]] | None = None
