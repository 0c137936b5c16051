r"""Link-LDA declared on padded bags: each image's words as ``(ids, counts)`` slots
per view, the form :mod:`.link_lda_svi` fits by SVI (the sites and log density of
:func:`jaxannot.methods.topic_models.link_lda.link_lda` on the dense counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from jaxannot.methods.topic_models.link_lda import to_padded

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = ["bag_log_likelihood", "link_lda_bags", "padded_bags"]

_TINY = 1e-30


def bag_log_likelihood(
    theta: Array,
    betas: Sequence[Array],
    ids_by_view: Sequence[Array],
    counts_by_view: Sequence[Array],
) -> jax.Array:
    r""":math:`\sum_{v,l} n^v_{dl}\log\sum_k\theta_{dk}\beta^v_{k,w_{dl}}` per image,
    over the padded slots ``l`` (ids ``w``, counts ``n``; padding has count 0)."""
    out = 0.0
    for beta, ids, counts in zip(betas, ids_by_view, counts_by_view, strict=True):
        p = jnp.einsum("dk,dlk->dl", theta, beta.T[ids])
        out = out + (counts * jnp.log(jnp.maximum(p, _TINY))).sum(-1)
    return out


def padded_bags(counts_by_view: Sequence) -> tuple[tuple, tuple]:
    """Dense [images, vocab_v] counts as padded ``(ids_by_view, counts_by_view)``
    (:func:`jaxannot.methods.topic_models.link_lda.to_padded`), each width rounded up to
    a power of
    two so that corpora of one size but other bag lengths share the compiled fit."""
    ids_out, counts_out = [], []
    for ids, counts in map(to_padded, counts_by_view):
        pad = ((0, 0), (0, (1 << (ids.shape[1] - 1).bit_length()) - ids.shape[1]))
        ids_out.append(jnp.asarray(np.pad(ids, pad)))
        counts_out.append(jnp.asarray(np.pad(counts, pad)))
    return tuple(ids_out), tuple(counts_out)


def link_lda_bags(
    ids_by_view: Sequence[jax.Array],
    counts_by_view: Sequence[jax.Array],
    *,
    num_topics: int,
    vocab_sizes: Sequence[int],
    alpha: float,
    eta: float,
) -> None:
    """numpyro model of Link-LDA on padded bags (the sites of
    :func:`jaxannot.methods.topic_models.link_lda.link_lda`; its log density equals that
    model's
    on the dense counts)."""
    with numpyro.plate("topic", num_topics):
        betas = [
            numpyro.sample(f"beta_{v}", dist.Dirichlet(jnp.full(size, eta)))
            for v, size in enumerate(vocab_sizes)
        ]
    with numpyro.plate("image", ids_by_view[0].shape[0]):
        theta = numpyro.sample("theta", dist.Dirichlet(jnp.full(num_topics, alpha)))
        numpyro.factor(
            "tokens", bag_log_likelihood(theta, betas, ids_by_view, counts_by_view)
        )
