"""``jax.random``'s uniform and exponential draws, value for value, in one pass.

On CPU, JAX lowers its threefry hash (Salmon et al. 2011) as a loop of five
steps over the whole array of counters: each step reads and writes two arrays of
the draws' size (two of 40 MB a device for the 20M draws of a 1M-image start,
issue 46). :func:`uniform` and :func:`exponential` compute the same hash with its
rounds written out, on counters made in place (an ``iota``): XLA fuses them into
one loop that writes the draws once (the hash alone about three times as fast
on 2 CPU cores), and splits them
over devices as it splits ``jax.random``'s (an ``iota`` is partitioned like any
array). The values are ``jax.random``'s bit for bit under its defaults (a
threefry key, ``jax_threefry_partitionable``, float32, fewer than ``2**32``
draws); any other call is ``jax.random``'s own.

References
----------
J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw. Parallel random numbers: as
easy as 1, 2, 3. SC 2011.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

if TYPE_CHECKING:
    from jax.typing import DTypeLike

    from jaxannot.types import Array, PRNGKey

__all__ = ["exponential", "uniform"]

#: The hash's rotations, its even and odd groups of four rounds.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
#: The key-schedule parity constant of threefry.
_PARITY = np.uint32(0x1BD11BDA)
#: 1.0's float32 bits: the exponent of a float in [1, 2).
_ONE_BITS = np.uint32(0x3F800000)


def _written_out(key: PRNGKey, shape: tuple[int, ...], dtype: DTypeLike) -> bool:
    """Whether :func:`_bits` gives ``jax.random``'s values for this call."""
    return (
        str(jax.random.key_impl(key)) == "threefry2x32"
        and bool(jax.config.jax_threefry_partitionable)
        and jax.dtypes.canonicalize_dtype(dtype) == jnp.float32
        and math.prod(shape) < 2**32
    )


def _bits(key: PRNGKey, shape: tuple[int, ...]) -> Array:
    """``jax.random.bits(key, shape)``: threefry-2x32 of the counters ``(0, i)``
    (``i`` the row-major index), the two words XORed."""
    k1, k2 = jax.random.key_data(key)
    index = lax.broadcasted_iota(jnp.uint32, shape, 0)
    for d in range(1, len(shape)):
        index = index * np.uint32(shape[d]) + lax.broadcasted_iota(jnp.uint32, shape, d)
    schedule = (k1, k2, k1 ^ k2 ^ _PARITY)
    x0, x1 = jnp.zeros(shape, jnp.uint32) + k1, index + k2
    for step in range(5):
        for r in _ROTATIONS[step % 2]:
            x0 = x0 + x1
            x1 = x0 ^ ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r)))
        x0 = x0 + schedule[(step + 1) % 3]
        x1 = x1 + schedule[(step + 2) % 3] + np.uint32(step + 1)
    return x0 ^ x1


def uniform(key: PRNGKey, shape: tuple[int, ...], dtype: DTypeLike = float) -> Array:
    """``jax.random.uniform(key, shape, dtype)``, on [0, 1).

    Parameters
    ----------
    key : PRNGKey
        The draws' key.
    shape : tuple of int
        Their shape.
    dtype : dtype
        Their floating type (float: float32 unless ``jax_enable_x64``).

    Returns
    -------
    jax.Array
        The draws.
    """
    shape = tuple(int(d) for d in shape)
    if not _written_out(key, shape, dtype):
        return jax.random.uniform(key, shape, dtype)
    mantissa = (_bits(key, shape) >> np.uint32(9)) | _ONE_BITS
    return lax.bitcast_convert_type(mantissa, jnp.float32) - jnp.float32(1.0)


def exponential(
    key: PRNGKey, shape: tuple[int, ...], dtype: DTypeLike = float
) -> Array:
    r"""``jax.random.exponential(key, shape, dtype)``: Exponential(1) draws,
    :math:`-\log(1 - u)` of :func:`uniform`'s :math:`u`, as JAX computes them.

    Parameters
    ----------
    key, shape, dtype
        As :func:`uniform` takes them.

    Returns
    -------
    jax.Array
        The draws.
    """
    return -jnp.log1p(-uniform(key, shape, dtype))
