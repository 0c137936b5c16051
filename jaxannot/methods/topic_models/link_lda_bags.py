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

__all__ = ["bag_log_likelihood", "link_lda_bags", "padded_bags", "sparse_bags"]

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


def _csr_bags(view: object, v: int) -> tuple[np.ndarray, np.ndarray, int]:
    """One view as ``(ids, counts)`` [images, width] from its non-zeros (the width
    the longest bag rounded up to 8), with the checks of
    :func:`~jaxannot.methods.topic_models.link_lda.check_counts`."""
    import scipy.sparse as sp

    shape = view.shape if sp.issparse(view) else np.shape(view)
    if len(shape) != 2:
        raise ValueError(f"view {v}: counts must be [images, vocab], got {shape}")
    matrix = sp.csr_matrix(view, dtype=np.float32)  # dense or sparse in
    matrix.eliminate_zeros()
    if not np.all(np.isfinite(matrix.data)):
        raise ValueError(f"view {v}: counts contain NaN or infinite values")
    if np.any(matrix.data < 0):
        raise ValueError(f"view {v}: counts must be >= 0")
    nnz = np.diff(matrix.indptr)
    width = max(-(-int(nnz.max(initial=0)) // 8) * 8, 8)
    slot = np.arange(matrix.nnz) - np.repeat(matrix.indptr[:-1], nnz)
    rows = np.repeat(np.arange(matrix.shape[0]), nnz)
    ids = np.zeros((matrix.shape[0], width), np.int32)
    counts = np.zeros((matrix.shape[0], width), np.float32)
    ids[rows, slot] = matrix.indices
    counts[rows, slot] = matrix.data
    return ids, counts, int(matrix.shape[1])


def sparse_bags(
    counts_by_view: Sequence,
) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...], tuple[int, ...]]:
    """Each view's non-zero counts as padded bags, from dense arrays or
    ``scipy.sparse`` matrices (a corpus too large to hold densely).

    Parameters
    ----------
    counts_by_view : sequence
        Each view's counts ``[images, vocab_v]``, dense or sparse.

    Returns
    -------
    ids_by_view, counts_by_view : tuple of jax.Array
        ``[images, width_v]`` per view (the longest bag rounded up to 8; empty slots
        id 0, count 0).
    vocab_sizes : tuple of int

    Raises
    ------
    ValueError
        No view, a view not 2-D, not finite or with a negative count, or views
        with different image counts.
    """
    if not counts_by_view:
        raise ValueError("counts_by_view must hold at least one view")
    bags = [_csr_bags(view, v) for v, view in enumerate(counts_by_view)]
    if len({b[0].shape[0] for b in bags}) > 1:
        shapes = [(b[0].shape[0], b[2]) for b in bags]
        raise ValueError(f"every view needs the same number of images, got {shapes}")
    return (
        tuple(jnp.asarray(b[0]) for b in bags),
        tuple(jnp.asarray(b[1]) for b in bags),
        tuple(b[2] for b in bags),
    )


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
