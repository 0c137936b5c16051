r"""Closed-form M-steps that read the posteriors through sums over the images.

Most closed forms (the mixtures' MAP updates) are a function of sums over images
of per-image statistics, :math:`\theta = f\big(\sum_i s(\phi_i, x_i)\big)`:
:class:`SummedMStep` declares the two parts. On one device it is called as one
function. Split over devices (:class:`~jaxannot.inference.vem.layout.Shards`),
:func:`closed_form_on` computes each device's sums on its own block of images
(``shard_map``) and adds them across devices (``psum``); a plain closed form is
left to GSPMD, which cannot split a loop over blocks of the image axis (the
mixture of unigrams' scatter of token statistics ran replicated, 3.6x slower than
on one device, on 2 CPU devices, issue 46).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
from jax import lax
from jax.sharding import PartitionSpec as P

from jaxannot.inference.vem.layout import Shards
from jaxannot.runtime import sharding

if TYPE_CHECKING:
    from jaxannot.inference.vem.layout import Whole
    from jaxannot.types import Array, ArrayTree

__all__ = ["SummedMStep", "closed_form_on"]


class SummedMStep(NamedTuple):
    r"""A closed-form M-step :math:`\theta = f\big(\sum_i s(\phi_i, x_i)\big)`,
    passed as ``VEM(..., m_step=SummedMStep(statistics, finish))``.

    Attributes
    ----------
    statistics : callable
        ``statistics(phi, *args, **kwargs)``: the sums over the images of ``phi``
        (and of the model's arguments ``args`` / ``kwargs``, their per-image arrays
        holding the same images) of the per-image statistics, a pytree; an image
        whose row of ``phi`` is 0 must add nothing.
    finish : callable
        ``finish(sums, **kwargs)``: the global values (site -> constrained value)
        from the sums and the model's keyword arguments.
    """

    statistics: Callable[..., ArrayTree]
    finish: Callable[..., dict]

    def __call__(self, phi: Array, *args: Any, **kwargs: Any) -> dict:
        """The M-step on every image: ``finish(statistics(phi, ...), **kwargs)``.

        Parameters
        ----------
        phi : jax.Array [images, K]
            The posteriors.
        *args, **kwargs
            The model's arguments.

        Returns
        -------
        dict
            Site -> global value.
        """
        return self.finish(self.statistics(phi, *args, **kwargs), **kwargs)


def closed_form_on(
    layout: Whole | Shards, fn: Callable[..., dict], phi: Array, dynamic: tuple
) -> dict:
    """The closed-form M-step ``fn`` at the posteriors ``layout`` keeps
    (:meth:`~jaxannot.inference.vem.layout.Layout.statistics`: a padded image's
    row 0): a :class:`SummedMStep` on images split over devices is summed on each
    device's block (``shard_map``) and the sums added across devices (``psum``);
    any other ``fn`` is called on every image (split: under GSPMD).

    Parameters
    ----------
    layout : Whole or Shards
        The fit's layout.
    fn : callable
        ``fn(phi, *args, **kwargs)`` -> site -> value.
    phi : jax.Array [images, K]
        The posteriors, placed for ``layout``.
    dynamic : tuple
        The model's array arguments, placed for ``layout``.

    Returns
    -------
    dict
        Site -> global value.
    """
    phi = layout.statistics(phi)
    args, kwargs = layout.join(dynamic)
    if not (isinstance(layout, Shards) and isinstance(fn, SummedMStep)):
        return fn(phi, *args, **kwargs)

    def block(phi, *leaves):
        args, kwargs = layout.local.join(leaves)
        return lax.psum(fn.statistics(phi, *args, **kwargs), sharding.AXIS)

    specs = tuple(P(sharding.AXIS) if p else P() for p in layout.per_image)
    sums = jax.shard_map(
        block,
        mesh=layout.mesh,
        in_specs=(P(sharding.AXIS), *specs),
        out_specs=P(),
        # the statistics' loops carry arrays that the replication checker types
        # apart (replicated start, per-device body); the specs above are exact
        check_vma=False,
    )(phi, *dynamic)
    return fn.finish(sums, **kwargs)
