r"""One call of a declared model, as :class:`~jaxannot.inference.vem.algorithm.VEM`
evaluates it.

:class:`ModelCall` holds what every piece of the objective reads together: the
:class:`~jaxannot.inference.vem.declared.DeclaredModel` (the model, its local site,
plate and chunk size), the call's static set-up and the model's arguments. It
gives the *local log joint* :math:`a_{ik} = \log p(x_i, z_i = k \mid \theta)`
(chunk by chunk or for every image), the *log prior* :math:`\log p(\theta)` of
the global sites and each global site's support bijection. It is built inside a
compiled function from its static parts (the declaration and set-up, static
arguments) and the traced array leaves (:meth:`ModelCall.join`); it is not itself
an argument of a compiled function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax import lax
from numpyro import handlers
from numpyro.distributions.transforms import biject_to

from jaxannot.inference.vem.declaration import site_support, trace_model
from jaxannot.inference.vem.enumeration import base_distribution, first_value_of
from jaxannot.inference.vem.joint_enumeration import collapsed_log_joint
from jaxannot.inference.vem.local_map import profile_log_joint
from jaxannot.inference.vem.log_joint import (
    Setup,
    out_of_plate_log_density,
    per_image_log_density,
)

if TYPE_CHECKING:
    from numpyro.distributions.transforms import Transform

    from jaxannot.inference.vem.declared import DeclaredModel
    from jaxannot.types import Array

__all__ = ["ModelCall", "trace_without_draws"]


def trace_without_draws(
    model: Callable, substitutions: dict, args: tuple, kwargs: dict
) -> dict:
    """:func:`~jaxannot.inference.vem.declaration.trace_model` with the latent
    sites not in ``substitutions`` at a fixed value
    (:func:`~jaxannot.inference.vem.enumeration.first_value_of`) instead of seeded
    draws: no random draw is traced into a compiled program where the trace is read
    for its distributions and supports only. An improper prior keeps
    ``trace_model``'s ``init_to_uniform`` value.

    Parameters
    ----------
    model, substitutions, args, kwargs
        As :func:`~jaxannot.inference.vem.declaration.trace_model` takes them.

    Returns
    -------
    dict
        The trace, site name -> site.
    """

    def any_value(msg):
        if (
            msg["type"] != "sample"
            or msg["is_observed"]
            or msg["name"] in substitutions
        ):
            return None
        if type(base_distribution(msg["fn"])).sample is dist.Distribution.sample:
            return None
        shape = tuple(msg["kwargs"].get("sample_shape") or ()) + msg["fn"].shape()
        return first_value_of(msg["fn"], shape)

    return trace_model(
        handlers.substitute(model, substitute_fn=any_value), substitutions, args, kwargs
    )


class ModelCall(NamedTuple):
    """A declared model, its static set-up and the arguments of one call.

    Parameters
    ----------
    declared : DeclaredModel
        The model, its local site, image plate and chunk size.
    setup : Setup
        The call's static set-up (structure, chunking, static leaves).
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    """

    declared: DeclaredModel
    setup: Setup
    args: tuple
    kwargs: dict

    @classmethod
    def join(cls, declared: DeclaredModel, setup: Setup, dynamic: tuple) -> ModelCall:
        """The call whose array arguments are ``dynamic`` (the traced leaves).

        Parameters
        ----------
        declared : DeclaredModel
            The model.
        setup : Setup
            The static set-up (the other leaves and the arguments' structure).
        dynamic : tuple
            The model's array arguments.

        Returns
        -------
        ModelCall
            The call.
        """
        return cls(declared, setup, *setup.join(dynamic))

    def trace(self, substitutions: dict[str, Any]) -> dict:
        """The model's trace on the call's arguments with ``substitutions``.

        Parameters
        ----------
        substitutions : dict
            Site or plate -> the value to substitute.

        Returns
        -------
        dict
            numpyro's trace.
        """
        return trace_model(self.declared.model, substitutions, self.args, self.kwargs)

    def substitutions(
        self, values: dict[str, Array], idx: Array, local: Any
    ) -> dict[str, Any]:
        """``values`` with the image plate at ``idx`` and the local site at ``local``.

        Parameters
        ----------
        values : dict
            Site -> global value.
        idx : jax.Array [chunk]
            The images.
        local : int or jax.Array
            The local site's value (a scalar is broadcast over the plate).

        Returns
        -------
        dict
            Site or plate -> the value to substitute.
        """
        subs = dict(values)
        subs[self.declared.plate] = idx
        subs[self.declared.local_site] = local
        return subs

    def log_joint_chunk(self, values: dict[str, Array], idx: Array) -> Array:
        """:math:`a_{ik}` for the images ``idx`` [chunk] -> [chunk, K], the other
        enumerated sites summed out
        (:mod:`~jaxannot.inference.vem.joint_enumeration`), the real-valued ones
        at their local MAP (:mod:`~jaxannot.inference.vem.local_map`).

        Parameters
        ----------
        values : dict
            Site -> global value.
        idx : jax.Array [chunk]
            The images of the chunk.

        Returns
        -------
        jax.Array [chunk, K]
            The log joints.
        """
        s = self.setup.structure
        if s.enumerated.continuous:
            return profile_log_joint(self, values, idx)
        if s.enumerated:
            return collapsed_log_joint(self, values, idx)
        rescale = idx.shape[0] / s.num_images
        plate = self.declared.plate

        def at(k):  # k: a scalar, broadcast over the plate
            trace = self.trace(self.substitutions(values, idx, k))
            return per_image_log_density(
                trace, plate, s.image_dim, rescale, idx.shape[0]
            )

        return jax.vmap(at, out_axes=1)(jnp.arange(s.num_values))

    def log_joint(self, values: dict[str, Array]) -> Array:
        """:math:`a` for every image, [N, K] (chunked with ``lax.map``).

        Parameters
        ----------
        values : dict
            Site -> global value.

        Returns
        -------
        jax.Array [N, K]
            The log joints.
        """
        chunks, _ = self.declared.chunk_indices(self.setup)
        chunk = functools.partial(self.log_joint_chunk, values)
        if chunks.shape[0] == 1:  # no loop: one of a single step compiles slower
            out = chunk(chunks[0])[None]
        else:
            out = lax.map(chunk, chunks)
        return out.reshape(-1, out.shape[-1])[: self.setup.structure.num_images]

    def log_prior(self, values: dict[str, Array]) -> Array:
        """:math:`\\log p(\\theta)`, the declared densities at the global values.

        Evaluated without numpyro's support check: an M-step's values lie on their
        supports up to float32 rounding (a simplex row of a few hundred entries
        may sum to 1 + 2e-6, past the check's 1e-6), which the check would turn
        into an objective of -inf.

        Parameters
        ----------
        values : dict
            Site -> global value (those of the sites outside the plate are read).

        Returns
        -------
        jax.Array
            The scalar log prior.
        """
        subs = dict(values)
        subs.update(self.declared.small_substitutions(self.setup))
        with numpyro.validation_enabled(False):
            return out_of_plate_log_density(self.trace(subs), self.declared.plate)

    def transforms(self) -> dict[str, Transform]:
        """The transform from unconstrained coordinates onto each global site's
        support.

        Returns
        -------
        dict
            Site -> ``biject_to`` of its support.
        """
        subs = self.declared.small_substitutions(self.setup)
        trace = trace_without_draws(self.declared.model, subs, self.args, self.kwargs)
        return {
            k: biject_to(site_support(trace[k])) for k in self.setup.structure.globals_
        }
