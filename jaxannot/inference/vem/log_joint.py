"""The log joint of a declaration's trace, and a VEM call's array and static leaves.

:func:`per_image_log_density` and :func:`out_of_plate_log_density` sum a trace's log
densities per image and outside the plate; :func:`split_leaves` / :meth:`Setup.join`
separate a call's array arguments (traced) from the rest (static, part of the compile
key), which :class:`Setup` keeps with the run's structure and chunks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.vem.declaration import Structure, is_array_leaf, unwrap_leaf
from jaxannot.inference.vem.enumeration import site_in_plate

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = [
    "Setup",
    "out_of_plate_log_density",
    "per_image_log_density",
    "site_log_prob",
    "split_leaves",
]


def site_log_prob(site: dict, rescale: Array | float) -> jax.Array:
    """A sample site's log densities over its whole batch shape, masked and scaled.

    A site under ``handlers.mask`` counts 0 where its mask is False; one under
    ``handlers.scale`` (or a subsampled plate) counts ``scale * rescale`` times.

    Parameters
    ----------
    site : dict
        A sample site of a numpyro trace.
    rescale : jax.Array or float
        The factor applied on top of the site's own scale.

    Returns
    -------
    jax.Array
        :math:`\\log p(x \\mid \\cdot)` per element of the site's batch shape.
    """
    lp = site["fn"].log_prob(site["value"])
    lp = jnp.broadcast_to(lp, jnp.broadcast_shapes(lp.shape, site["fn"].batch_shape))
    if site.get("mask") is not None:  # numpyro.handlers.mask: 0 where False
        lp = jnp.where(jnp.broadcast_to(site["mask"], lp.shape), lp, 0.0)
    if site.get("scale") is not None:
        lp = lp * (site["scale"] * rescale)
    return lp


def per_image_log_density(
    trace: dict, plate: str, image_dim: int, rescale: Array | float, size: int
) -> jax.Array:
    """Sum of the in-plate sites' log densities per image, [size].

    Parameters
    ----------
    trace : dict
        A numpyro trace of the model on ``size`` images.
    plate : str
        The item plate.
    image_dim : int
        The plate's dim.
    rescale : jax.Array or float
        The factor on top of each site's scale (:func:`site_log_prob`).
    size : int
        The images of the trace.

    Returns
    -------
    jax.Array [size]
        :math:`\\sum_s \\log p_s` over the sites in the plate, per image.
    """
    total = jnp.zeros(size)
    for site in trace.values():
        if site["type"] != "sample" or not site_in_plate(site, plate):
            continue
        lp = site_log_prob(site, rescale)
        axis = lp.ndim + image_dim
        lp = jnp.moveaxis(lp, axis, 0)
        total = total + lp.reshape(lp.shape[0], -1).sum(-1)
    return total


def out_of_plate_log_density(trace: dict, plate: str) -> jax.Array:
    """Sum of the log densities of the sites outside the plate (priors, factors).

    Parameters
    ----------
    trace : dict
        A numpyro trace of the model.
    plate : str
        The item plate.

    Returns
    -------
    jax.Array
        The sum, a scalar.
    """
    total = jnp.float32(0.0)
    for site in trace.values():
        if site["type"] != "sample" or site_in_plate(site, plate):
            continue
        lp = site["fn"].log_prob(site["value"])
        if site.get("scale") is not None:
            lp = lp * site["scale"]
        total = total + lp.sum()
    return total


class Setup(NamedTuple):
    """Static per-shape configuration of one VEM run (hashable: part of the
    compile key; equal for calls of equal structure and static arguments).

    Parameters
    ----------
    structure : Structure
        What a trace of the model tells VEM.
    subsamples : bool
        Whether the model reads its data through the plate's indices.
    chunk : int
        Images per chunk of the log joint.
    num_chunks : int
        Chunks that cover the images.
    treedef : PyTreeDef
        The structure of the call's ``(args, kwargs)``.
    static_leaves : tuple
        Its leaves, None in place of the array ones.
    is_dynamic : tuple of bool
        Which leaves are arrays (traced).
    """

    structure: Structure
    subsamples: bool
    chunk: int
    num_chunks: int
    treedef: Any
    static_leaves: tuple
    is_dynamic: tuple

    def join(self, dynamic: tuple, unwrap: bool = True) -> tuple[tuple, dict]:
        """The call's ``(args, kwargs)`` from its static and ``dynamic`` leaves.

        Parameters
        ----------
        dynamic : tuple
            The array leaves, in order.
        unwrap : bool
            The arrays the model reads by value as given (True), or as
            :class:`~jaxannot.inference.vem.declaration._Concrete` (False: to set
            up another call on them).

        Returns
        -------
        tuple of (tuple, dict)
            The model's positional and keyword arguments.
        """
        it = iter(dynamic)
        leaves = [
            next(it) if d else (unwrap_leaf(s) if unwrap else s)
            for s, d in zip(self.static_leaves, self.is_dynamic, strict=True)
        ]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


def _on_device(x) -> jax.Array:
    """``x`` as a JAX array; a NumPy array by ``jax.device_put``, which compiles
    nothing (``jnp.asarray`` compiles a small program per NumPy shape)."""
    return jax.device_put(x) if isinstance(x, np.ndarray) else jnp.asarray(x)


def split_leaves(args: tuple, kwargs: dict) -> tuple[Any, tuple, tuple, tuple]:
    """A call's leaves split into arrays (traced) and the rest (static).

    Parameters
    ----------
    args : tuple
        The positional arguments whose leaves are split.
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    tuple of (PyTreeDef, tuple, tuple of bool, tuple)
        The structure of ``(args, kwargs)``, its leaves with None in place of the
        arrays, which leaves are arrays, and the arrays on the device.
    """
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    is_dynamic = tuple(is_array_leaf(x) for x in leaves)
    static = tuple(None if d else x for x, d in zip(leaves, is_dynamic, strict=True))
    dynamic = tuple(_on_device(x) for x, d in zip(leaves, is_dynamic, strict=True) if d)
    return treedef, static, is_dynamic, dynamic
