"""Data parallelism over the image axis: a one-axis device mesh, padding, placement.

The fits that sum per-image terms (the E-step's posteriors, the M-step's sufficient
statistics, the objective) run data-parallel when several devices are visible: the
image axis of every per-image array is split over a one-axis mesh (axis name
``"images"``), the global parameters are replicated, and under ``jit`` XLA's GSPMD
partitioner inserts the cross-device reductions of the sums over images.

``jax.device_put`` with ``NamedSharding(mesh, P("images"))`` refuses an axis that the
device count does not divide, so the image axis is padded (:func:`pad_images`) with
copies of the last image that carry weight 0 (:func:`image_weights`): every
per-image term is multiplied by its weight, so a padded image changes no result.

Examples
--------
>>> mesh = image_mesh()  # doctest: +SKIP
>>> n_pad = pad_images(15, mesh.size)  # 16 on two devices
>>> counts, weights = shard_images((pad_axis0(x, n_pad), image_weights(15, n_pad)),
...                                mesh, n_pad)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from jaxannot.types import Array, ArrayLike

__all__ = [
    "AXIS",
    "image_mesh",
    "pad_images",
    "pad_axis0",
    "image_weights",
    "image_sharding",
    "replicated",
    "shard_images",
    "join",
    "put",
    "gather",
]

#: Name of the mesh axis the images are split over.
AXIS = "images"


def image_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-axis mesh (axis ``"images"``) over ``devices``.

    Parameters
    ----------
    devices : sequence of jax.Device, optional
        Default: every device of the default backend (``jax.devices()``).

    Returns
    -------
    jax.sharding.Mesh
    """
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("image_mesh needs at least one device")
    return Mesh(np.asarray(devices), (AXIS,))


def pad_images(n: int, num_devices: int, multiple: int = 1) -> int:
    """The padded size of an image axis of ``n``: the smallest multiple of
    ``num_devices * multiple`` that is ``>= n`` (at least one per device).

    Parameters
    ----------
    n : int
        Number of real images.
    num_devices : int
    multiple : int
        Each device's share is also a multiple of this (e.g. an E-step chunk).

    Returns
    -------
    int
    """
    if n < 0 or num_devices < 1 or multiple < 1:
        raise ValueError(
            f"need n >= 0, num_devices >= 1, multiple >= 1; got {n}, "
            f"{num_devices}, {multiple}"
        )
    block = num_devices * multiple
    return max(block, -(-n // block) * block)


def pad_axis0(x: ArrayLike, size: int) -> np.ndarray:
    """``x`` (host copy) padded along axis 0 to ``size`` rows by repeating its last
    row (a valid value for any distribution, so padded images' log densities stay
    finite; their weight 0 removes them)."""
    x = np.asarray(x)
    if x.shape[0] > size:
        raise ValueError(f"cannot pad {x.shape[0]} rows down to {size}")
    if x.shape[0] == size:
        return x
    if x.shape[0] == 0:
        raise ValueError("cannot pad an empty image axis")
    return np.pad(x, [(0, size - x.shape[0])] + [(0, 0)] * (x.ndim - 1), mode="edge")


def image_weights(n: int, size: int, dtype: DTypeLike = np.float32) -> np.ndarray:
    """Weights of a padded image axis: 1 for the ``n`` real images, 0 after."""
    return (np.arange(size) < n).astype(dtype)


def image_sharding(mesh: Mesh) -> NamedSharding:
    """Axis 0 split over the mesh's ``"images"`` axis, the rest replicated."""
    return NamedSharding(mesh, P(AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole array."""
    return NamedSharding(mesh, P())


def join(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Join a multi-process run (``jax.distributed.initialize``) before any JAX
    computation; CPU processes exchange through gloo collectives.

    Then every process runs the same program on the same data, and a data-parallel
    fit (``VEM(..., devices=jax.devices())``) splits the images over the devices of
    all processes. On a cluster manager JAX detects (SLURM, ...) the arguments can be
    left out; on plain machines give the first process's ``host:port``, the number
    of processes and this one's rank, e.g. ``join("10.0.0.1:1234", 2, 0)`` on the
    first machine and ``join("10.0.0.1:1234", 2, 1)`` on the second.
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address, num_processes, process_id)


def put(tree: Any, where: NamedSharding) -> Any:
    """``jax.device_put(tree, where)`` that also works when the mesh spans several
    processes (``jax.distributed``): each process then builds its own shards of
    every leaf from the host copy it holds (every process holds the same values),
    PRNG keys through their raw key data."""
    if jax.process_count() == 1:
        return jax.device_put(tree, where)

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return jax.device_put(x, where)  # already global: a resharding
        if jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key):
            data = one(jax.random.key_data(x))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, where, lambda i: host[i])

    return jax.tree_util.tree_map(one, tree)


def gather(x: Array) -> Array:
    """``x`` whole on this process: itself when this process holds all of it, its
    local copy when it is replicated, else the pieces of every process gathered
    (``jax.distributed`` runs)."""
    if getattr(x, "is_fully_addressable", True):
        return x
    if x.is_fully_replicated:  # a fresh (uncommitted) copy, usable with any layout
        return jnp.asarray(np.asarray(x.addressable_data(0)))
    from jax.experimental import multihost_utils

    return jnp.asarray(multihost_utils.process_allgather(x, tiled=True))


def shard_images(tree: Any, mesh: Mesh, axis_size: int) -> Any:
    """Place a pytree on the mesh: leaves whose leading axis is the (padded) image
    axis, of size ``axis_size``, are split over the devices; the rest replicated.

    Parameters
    ----------
    tree : pytree of arrays
    mesh : jax.sharding.Mesh
        From :func:`image_mesh`.
    axis_size : int
        The padded number of images, a multiple of ``mesh.size``
        (:func:`pad_images`).

    Returns
    -------
    pytree of jax.Array
    """
    if axis_size % mesh.size:
        raise ValueError(
            f"the image axis ({axis_size}) must be a multiple of the device count "
            f"({mesh.size}): pad it with pad_images"
        )
    split, whole = image_sharding(mesh), replicated(mesh)

    def place(x):
        per_image = np.ndim(x) >= 1 and np.shape(x)[0] == axis_size
        return put(x, split if per_image else whole)

    return jax.tree_util.tree_map(place, tree)
