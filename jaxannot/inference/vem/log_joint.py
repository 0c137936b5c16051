"""The log joint of a declaration's trace, and a VEM call's array and static leaves.

:func:`_per_image` and :func:`_out_of_plate` sum a trace's log densities per image and
outside the plate; :func:`_split_leaves` / :meth:`Setup.join` separate a call's
array arguments (traced) from the rest (static, part of the compile key), which
:class:`Setup` keeps with the run's structure and chunks.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.vem.declaration import (
    Structure,
    _in_plate,
    _is_array,
    _unwrap_leaf,
)

__all__ = ["Setup"]


def _site_log_prob(site, rescale) -> jax.Array:
    """A sample site's log densities over its whole batch shape, masked and scaled."""
    lp = site["fn"].log_prob(site["value"])
    lp = jnp.broadcast_to(lp, jnp.broadcast_shapes(lp.shape, site["fn"].batch_shape))
    if site.get("mask") is not None:  # numpyro.handlers.mask: 0 where False
        lp = jnp.where(jnp.broadcast_to(site["mask"], lp.shape), lp, 0.0)
    if site.get("scale") is not None:
        lp = lp * (site["scale"] * rescale)
    return lp


def _per_image(trace, plate, image_dim, rescale, size) -> jax.Array:
    """Sum of the in-plate sites' log densities per image, [size]."""
    total = jnp.zeros(size)
    for site in trace.values():
        if site["type"] != "sample" or not _in_plate(site, plate):
            continue
        lp = _site_log_prob(site, rescale)
        axis = lp.ndim + image_dim
        lp = jnp.moveaxis(lp, axis, 0)
        total = total + lp.reshape(lp.shape[0], -1).sum(-1)
    return total


def _out_of_plate(trace, plate) -> jax.Array:
    """Sum of the log densities of the sites outside the plate (priors, factors)."""
    total = jnp.float32(0.0)
    for site in trace.values():
        if site["type"] != "sample" or _in_plate(site, plate):
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
            next(it) if d else (_unwrap_leaf(s) if unwrap else s)
            for s, d in zip(self.static_leaves, self.is_dynamic, strict=True)
        ]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


def _on_device(x) -> jax.Array:
    """``x`` as a JAX array; a NumPy array by ``jax.device_put``, which compiles
    nothing (``jnp.asarray`` compiles a small program per NumPy shape)."""
    return jax.device_put(x) if isinstance(x, np.ndarray) else jnp.asarray(x)


def _split_leaves(args, kwargs):
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    is_dynamic = tuple(_is_array(x) for x in leaves)
    static = tuple(None if d else x for x, d in zip(leaves, is_dynamic, strict=True))
    dynamic = tuple(_on_device(x) for x, d in zip(leaves, is_dynamic, strict=True) if d)
    return treedef, static, is_dynamic, dynamic
