r"""MBRM: the multiple-Bernoulli relevance model (Feng, Manmatha & Lavrenko 2004).

Every training image :math:`J` is a "relevance" component. Given a query image with
features :math:`\mathbf x` (one global feature vector per image here),

.. math::

    P(J \mid \mathbf x) \propto P(J)\, \mathcal N(\mathbf x; \mathbf x_J, \beta I),
    \qquad P(w \mid \mathbf x) = \sum_J P(J \mid \mathbf x)\, P_V(w \mid J),

with a uniform :math:`P(J)`, a Gaussian kernel density of bandwidth :math:`\beta`, and
the smoothed multiple-Bernoulli word model

.. math::

    P_V(w \mid J) = \frac{\mu\, \delta_{w,J} + N_w}{\mu + N},

where :math:`\delta_{w,J} = 1` when :math:`w` annotates :math:`J`, :math:`N_w` is the
number of training images annotated with :math:`w` and :math:`N` the number of training
images. Annotation ranks words by :math:`P(w \mid \mathbf x)`. A word query ranks the
database images by :math:`P(w \mid \mathbf x_t)`, i.e. the annotation probabilities of
every database image: the cost of a query grows linearly with the database (the point
of comparison of EMML §5.3).

References
----------
S. L. Feng, R. Manmatha, V. Lavrenko. Multiple Bernoulli relevance models for image and
video annotation. CVPR 2004.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.types import Array, ArrayLike

__all__ = [
    "MBRMParams",
    "fit_mbrm",
    "default_bandwidth",
    "mbrm_word_probabilities",
    "mbrm_word_query",
]


class MBRMParams(NamedTuple):
    """The relevance model: training features, Bernoulli word model, bandwidth.

    Attributes
    ----------
    features : Float[Array, "train dims"]
    word_probabilities : Float[Array, "train words"]
        :math:`P_V(w \\mid J)`.
    bandwidth : Float[Array, ""]
        Kernel variance :math:`\\beta`.
    """

    features: Array
    word_probabilities: Array
    bandwidth: Array


def default_bandwidth(features: ArrayLike, neighbours: int = 10) -> float:
    """:math:`\\beta` = mean squared distance to the ``neighbours``-th nearest training
    image over a sample of at most 500 images (a local scale, so the density is
    dominated by near neighbours), floored at 1e-6."""
    x = np.asarray(features, np.float64)
    sample = x[:500]
    d2 = ((sample**2).sum(1)[:, None] + (x**2).sum(1)[None] - 2 * sample @ x.T).clip(0)
    k = min(neighbours, x.shape[0] - 1)
    if k < 1:
        return 1.0
    kth = np.sort(d2, axis=1)[:, k]
    return float(max(kth.mean(), 1e-6))


def fit_mbrm(
    features: ArrayLike,
    words: ArrayLike,
    *,
    bandwidth: float | None = None,
    smoothing: float | None = None,
) -> MBRMParams:
    """Build the relevance model from annotated training images.

    Parameters
    ----------
    features : [train, dims]
    words : [train, words]
        Counts or 0/1 (binarized).
    bandwidth : float, optional
        :math:`\\beta` (default :func:`default_bandwidth`).
    smoothing : float, optional
        :math:`\\mu > 0` of the Bernoulli model. The own annotation of :math:`J` gets
        weight :math:`\\mu / (\\mu + N)`; the default :math:`\\mu = 9N` gives it 0.9
        (with :math:`\\mu \\ll N` the model collapses to the word prior).
    """
    x = np.asarray(features, np.float32)
    y = (np.asarray(words) > 0).astype(np.float32)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"features have {x.shape[0]} rows but words {y.shape[0]}")
    n = x.shape[0]
    if smoothing is None:
        smoothing = 9.0 * n
    if smoothing <= 0:
        raise ValueError(f"smoothing must be > 0, got {smoothing}")
    counts = y.sum(0)
    probs = (smoothing * y + counts[None]) / (smoothing + n)
    beta = default_bandwidth(x) if bandwidth is None else float(bandwidth)
    if beta <= 0:
        raise ValueError(f"bandwidth must be > 0, got {beta}")
    return MBRMParams(
        jnp.asarray(x), jnp.asarray(probs, jnp.float32), jnp.asarray(beta, jnp.float32)
    )


def _log_weights(train, queries, beta):
    d2 = (
        (queries**2).sum(1)[:, None]
        + (train**2).sum(1)[None, :]
        - 2.0 * queries @ train.T
    )
    return -jnp.maximum(d2, 0.0) / (2.0 * beta)


@functools.partial(jax.jit, static_argnames=("block_size",))
def mbrm_word_probabilities(
    params: MBRMParams, queries: ArrayLike, block_size: int = 8192
) -> Array:
    """:math:`P(w \\mid \\mathbf x)` for each query ``[queries, words]``.

    A streaming log-sum-exp over blocks of ``block_size`` training images keeps memory
    at ``queries x block_size``; the cost is linear in the number of training images.
    """
    q = jnp.atleast_2d(jnp.asarray(queries, jnp.float32))
    x, p = params.features, params.word_probabilities
    n = x.shape[0]
    bs = min(block_size, n)
    nb = -(-n // bs)
    pad = nb * bs - n
    xb = jnp.concatenate([x, jnp.zeros((pad, x.shape[1]), x.dtype)]).reshape(nb, bs, -1)
    pb = jnp.concatenate([p, jnp.zeros((pad, p.shape[1]), p.dtype)]).reshape(nb, bs, -1)
    valid = (jnp.arange(nb * bs) < n).reshape(nb, bs)

    def body(carry, blk):
        m, acc, z = carry
        xk, pk, vk = blk
        lw = jnp.where(vk[None], _log_weights(xk, q, params.bandwidth), -jnp.inf)
        m_new = jnp.maximum(m, lw.max(1))
        scale = jnp.exp(m - m_new)
        w = jnp.exp(lw - m_new[:, None])
        return (m_new, acc * scale[:, None] + w @ pk, z * scale + w.sum(1)), None

    init = (
        jnp.full((q.shape[0],), -jnp.inf, jnp.float32),
        jnp.zeros((q.shape[0], p.shape[1]), jnp.float32),
        jnp.zeros((q.shape[0],), jnp.float32),
    )
    (_, acc, z), _ = jax.lax.scan(body, init, (xb, pb, valid))
    return acc / z[:, None]


def mbrm_word_query(
    params: MBRMParams,
    database_features: ArrayLike,
    word_weights: ArrayLike,
    *,
    top_images: int = 10,
    block_size: int = 8192,
) -> tuple[Array, Array]:
    """Rank the database images by :math:`\\sum_w \\omega_w P(w \\mid \\mathbf x_t)`.

    Annotates every database image (cost linear in the database and the training set)
    and returns the top ``top_images`` rows and their scores.
    """
    probs = mbrm_word_probabilities(params, database_features, block_size)
    scores = probs @ jnp.asarray(word_weights, jnp.float32)
    best, ids = jax.lax.top_k(scores, min(top_images, scores.shape[0]))
    return ids.astype(jnp.int32), best
