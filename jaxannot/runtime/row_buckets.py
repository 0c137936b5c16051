r"""Row buckets: one compiled program for fits of nearby row counts.

A compiled program is specialised to its shapes, so a fit on 60 rows (a CV fold)
and one on 120 (the final fit) compile every training loop twice. The harmonium
training programs (contrastive divergence, the Crammer–Singer SVM, the max-margin
alternation) instead take their rows padded to a **row bucket**: the next multiple of
:data:`ROW_BUCKET` rows,

.. math::

    N(n) = \lceil n / 128 \rceil \cdot 128,

with a 0/1 mask :math:`m_d = [d < n]` of the real rows. The programs are exact on
the padded rows: masked sums divided by the real count :math:`n = \sum_d m_d`,
padded rows at cost 0 in the SVMs, visiting orders and minibatches drawn over the
real rows only (:func:`masked_permutation`). 128 puts the fold and the final fit of a
small cross-validation (up to 128 rows) in one bucket, and costs at most 127 padded
rows (under 10 % of the work from 1,280 rows on).

jax's ``threefry`` draws are prefix-stable (``bits(k, (N,))[:n] == bits(k, (n,))``),
so a padded draw gives the real rows the numbers the unpadded one gives them.
"""

from __future__ import annotations

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.types import Array, ArrayTree, PRNGKey

__all__ = [
    "ROW_BUCKET",
    "bucket_rows",
    "pad_rows",
    "pad_to_bucket",
    "row_mask",
    "masked_permutation",
]

#: Rows are padded to the next multiple of this many.
ROW_BUCKET = 128


def bucket_rows(n: int, bucket: int | None = ROW_BUCKET) -> int:
    """The padded row count :math:`\\lceil n / b \\rceil b` (``n`` when ``bucket`` is
    None or 0: no padding).

    Parameters
    ----------
    n : int
        Real rows.
    bucket : int, optional
        The bucket's width :math:`b`.

    Returns
    -------
    int
        The bucket's row count.
    """
    if not bucket:
        return n
    return max(1, -(-n // bucket)) * bucket


def pad_rows(tree: ArrayTree, size: int, edge: bool = False) -> ArrayTree:
    """Every leaf of ``tree`` with its leading axis padded to ``size`` rows: zeros,
    or with ``edge`` copies of the last row (values any model takes without an
    overflow; the mask leaves them out). Concrete arrays are padded on the host and
    put on the device as they are, so a new row count compiles nothing; traced ones
    are padded with ``jnp``.

    Parameters
    ----------
    tree : pytree
        Arrays with a leading row axis.
    size : int
        Rows after padding (at least the leaves' rows).
    edge : bool
        Pad with copies of the last row instead of zeros.

    Returns
    -------
    pytree
        The padded arrays (jax arrays).
    """
    mode = "edge" if edge else "constant"

    def pad(a):
        widths = [(0, size - a.shape[0])] + [(0, 0)] * (a.ndim - 1)
        if isinstance(a, jax.core.Tracer):
            return jnp.pad(a, widths, mode=mode)
        # device_put, not jnp.asarray: the latter compiles a copy per shape
        return jax.device_put(np.pad(np.asarray(a), widths, mode=mode))

    return jax.tree.map(pad, tree)


def pad_to_bucket(tree: ArrayTree, edge: bool = True) -> tuple[ArrayTree, Array]:
    """``(padded, mask)``: the leaves of ``tree`` (a common leading row axis of
    :math:`n` rows) padded to :func:`bucket_rows` ``(n)`` rows (:func:`pad_rows`,
    copies of the last row unless ``edge`` is False) and :func:`row_mask`."""
    n = jax.tree.leaves(tree)[0].shape[0]
    size = bucket_rows(n)
    return pad_rows(tree, size, edge), row_mask(n, size)


def row_mask(n: int, size: int) -> Array:
    """``[size]`` float32 mask: 1 on the first ``n`` rows, 0 on the padded ones."""
    return jnp.asarray((np.arange(size) < n).astype(np.float32))


def masked_permutation(rng_key: PRNGKey, mask: Array) -> Array:
    """A random order of the rows whose ``mask`` is 1, then the others.

    The real rows (``mask`` 1, the first :math:`n`) come first, in the order
    ``jax.random.permutation(rng_key, n)`` puts them whenever ``n`` and
    ``mask.shape[0]`` take the same number of sort rounds (both at most 1,625 or
    both above it: jax sorts by random 32-bit keys, in more rounds for more rows);
    the padded rows follow in their own order.

    Parameters
    ----------
    rng_key : PRNGKey
        The key ``jax.random.permutation`` would take.
    mask : [N] array
        1 on the real rows (a prefix), 0 on the padded ones.

    Returns
    -------
    [N] int32 array
        Row indices.
    """
    size = mask.shape[0]
    order = jnp.arange(size)
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    top = jnp.uint32(np.iinfo(np.uint32).max)
    for _ in range(rounds):
        rng_key, subkey = jax.random.split(rng_key)
        keys = jax.random.bits(subkey, (size,), jnp.uint32)
        # positions past the real rows keep the padded indices (sorted last before)
        keys = jnp.where(jnp.arange(size) < jnp.sum(mask > 0), keys, top)
        _, order = jax.lax.sort_key_val(keys, order)
    return order
