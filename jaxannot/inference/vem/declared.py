r"""A numpyro declaration as :class:`~jaxannot.inference.vem.algorithm.VEM` and its
helpers
read it: the pieces of the objective, nothing about how it is optimized.

:class:`DeclaredModel` bundles the model with its discrete per-image site, its image
plate and the chunk size, and gives the *local log joint*
:math:`a_{ik} = \log p(x_i, z_i = k \mid \theta)` (chunk by chunk), the *log prior*
:math:`\log p(\theta)` of the global sites and each global site's support
bijection. It is hashable (a static argument of compiled functions): the VEM's
layouts, start, M-step and Laplace draws take it instead of the ``VEM`` object. It
compares its model by value (:func:`~jaxannot.runtime.static_key.value_key`): a
``functools.partial`` or a closure of the same code with equal bound values is the
same declaration, and shares its compiled programs.

Within :func:`reusing_setups` (the held-out path of ``lam="auto"``: many fits of
one data), :meth:`DeclaredModel.setup` and what goes through :func:`reused` answer
a second call on the same argument objects from the first, without tracing the
model again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, TypeVar

import numpy as np

import jax
import jax.numpy as jnp
import numpyro
from jax import lax
from numpyro.distributions.transforms import biject_to

from jaxannot.inference.vem.declaration import (
    DeclarationError,
    _read_by_value,
    _subsamples,
    _support,
    _trace,
)
from jaxannot.inference.vem.joint_enumeration import collapsed_log_joint
from jaxannot.inference.vem.local_map import profile_log_joint
from jaxannot.inference.vem.log_joint import (
    _out_of_plate,
    _per_image,
    _Setup,
    _split_leaves,
)
from jaxannot.runtime.static_key import value_key

if TYPE_CHECKING:
    from numpyro.distributions.transforms import Transform

    from jaxannot.types import Array

__all__ = ["DeclaredModel", "reused", "reusing_setups"]

T = TypeVar("T")

#: The caches of the active :func:`reusing_setups` blocks, innermost last.
_REUSE: list = []


@contextlib.contextmanager
def reusing_setups() -> Iterator[None]:
    """A block in which :func:`reused` answers repeated calls from a cache (dropped
    when the block ends).

    Returns
    -------
    contextlib.AbstractContextManager
        The block (it yields nothing).
    """
    _REUSE.append({})
    try:
        yield
    finally:
        _REUSE.pop()


def reused(owner: Hashable, args: tuple, kwargs: dict, compute: Callable[[], T]) -> T:
    """``compute()``, or within :func:`reusing_setups` its first answer for
    ``owner`` on the same argument objects.

    Parameters
    ----------
    owner : hashable
        What is computed, and of what (e.g. ``("setup", declaration)``).
    args, kwargs : tuple, dict
        The call's arguments: their leaves are compared by identity and kept alive
        while the block lasts, so that no other object takes their ids.
    compute : callable
        Computes the answer, with no arguments.

    Returns
    -------
    object
        ``compute()``'s answer, computed once per block for equal keys.
    """
    if not _REUSE:
        return compute()
    leaves, treedef = jax.tree.flatten((args, kwargs))
    key = (owner, treedef, tuple(map(id, leaves)))
    cache = _REUSE[-1]
    if key not in cache:
        cache[key] = (leaves, compute())
    return cache[key][1]


@dataclasses.dataclass(frozen=True, eq=False)
class DeclaredModel:
    """A declaration with one discrete per-image site, as the VEM helpers read it.

    Parameters
    ----------
    model : callable
        The numpyro model.
    local_site : str
        Its discrete per-image site.
    plate : str
        Its image plate.
    chunk_size : int
        Images per chunk of the log joint.

    Notes
    -----
    Two declarations are equal when their models have equal
    :func:`~jaxannot.runtime.static_key.value_key` (same code, equal defaults,
    closure values and partial arguments) and their other fields are equal.
    """

    model: Callable
    local_site: str = "z"
    plate: str = "image"
    chunk_size: int = 1024

    def _key(self) -> tuple:
        return (value_key(self.model), self.local_site, self.plate, self.chunk_size)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def setup(self, args: tuple, kwargs: dict) -> tuple[_Setup, tuple]:
        """The static set-up of a call on ``args`` (structure, chunking, the
        arguments' static leaves) and its traced array leaves. Arrays the model
        reads by value (a size as ``int(np.max(x)) + 1``) are static leaves, keyed
        on their content. Within :func:`reusing_setups`, a second call on the same
        argument objects returns the first's answer.

        Parameters
        ----------
        args : tuple
            The model's positional arguments.
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        tuple of (_Setup, tuple)
            The set-up and the array leaves.
        """
        return reused(("setup", self), args, kwargs, lambda: self._setup(args, kwargs))

    def _setup(self, args: tuple, kwargs: dict) -> tuple[_Setup, tuple]:
        structure, args, kwargs = _read_by_value(
            self.model, self.local_site, self.plate, args, kwargs
        )
        treedef, static, is_dynamic, dynamic = _split_leaves(args, kwargs)
        n = structure.num_images
        chunk = min(self.chunk_size, n)
        subsamples, error = _subsamples(
            self.model, self.plate, self.local_site, structure, args, kwargs
        )
        if chunk < n and not subsamples:
            raised = (
                ""
                if error is None
                else f" (on two images' indices the model raised "
                f"{type(error).__name__}: {error})"
            )
            raise DeclarationError(
                f"the model does not read its data through plate {self.plate!r}'s "
                f"indices{raised}, so VEM cannot process its {n} images in chunks "
                f"of {chunk}: use numpyro.subsample(x, event_dim=...) inside the "
                f"plate, or pass chunk_size >= {n}"
            ) from error
        setup = _Setup(
            structure, subsamples, chunk, -(-n // chunk), treedef, static, is_dynamic
        )
        return setup, dynamic

    def small_substitutions(self, setup: _Setup) -> dict:
        """Plate indices for traces that need only the out-of-plate sites.

        Parameters
        ----------
        setup : _Setup
            The static set-up.

        Returns
        -------
        dict
            Plate and local site -> the values to substitute.
        """
        s = setup.structure
        n = 1 if setup.subsamples else s.num_images
        return {
            self.plate: np.arange(n, dtype=np.int32),
            self.local_site: s.local_value(n),
        }

    def chunk_indices(self, setup: _Setup) -> tuple[Array, Array]:
        """The image indices of each chunk and which of them are real images.

        Parameters
        ----------
        setup : _Setup
            The static set-up (its chunk size).

        Returns
        -------
        tuple of (jax.Array, jax.Array)
            Indices [chunks, chunk] (0 for padding) and their validity (bool, alike).
        """
        n, chunk = setup.structure.num_images, setup.chunk
        idx = np.arange(setup.num_chunks * chunk)
        valid = idx < n
        return jnp.asarray(np.where(valid, idx, 0).reshape(-1, chunk)), jnp.asarray(
            valid.reshape(-1, chunk)
        )

    def log_joint_chunk(
        self,
        setup: _Setup,
        values: dict[str, Array],
        idx: Array,
        args: tuple,
        kwargs: dict,
    ) -> Array:
        """:math:`a_{ik}` for the images ``idx`` [chunk] -> [chunk, K], the other
        enumerated sites summed out
        (:mod:`~jaxannot.inference.vem.joint_enumeration`), the real-valued ones
        at their local MAP (:mod:`~jaxannot.inference.vem.local_map`).

        Parameters
        ----------
        setup : _Setup
            The static set-up.
        values : dict
            Site -> global value.
        idx : jax.Array [chunk]
            The images.
        args : tuple
            The model's positional arguments.
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        jax.Array [chunk, K]
            The log joints.
        """
        s = setup.structure
        if s.enumerated.continuous:
            return profile_log_joint(self, setup, values, idx, args, kwargs)
        if s.enumerated:
            return collapsed_log_joint(self, setup, values, idx, args, kwargs)
        rescale = idx.shape[0] / s.num_images

        def at(k):
            subs = dict(values)
            subs[self.plate] = idx
            subs[self.local_site] = k  # a scalar: broadcast over the plate
            trace = _trace(self.model, subs, args, kwargs)
            return _per_image(trace, self.plate, s.image_dim, rescale, idx.shape[0])

        return jax.vmap(at, out_axes=1)(jnp.arange(s.num_values))

    def log_joint(
        self, setup: _Setup, values: dict[str, Array], args: tuple, kwargs: dict
    ) -> Array:
        """:math:`a` for every image, [N, K] (chunked with ``lax.map``).

        Parameters
        ----------
        setup : _Setup
            The static set-up.
        values : dict
            Site -> global value.
        args : tuple
            The model's positional arguments.
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        jax.Array [N, K]
            The log joints.
        """
        chunks, _ = self.chunk_indices(setup)
        chunk = functools.partial(self.log_joint_chunk, setup, values)
        if chunks.shape[0] == 1:  # no loop: one of a single step compiles slower
            out = chunk(chunks[0], args, kwargs)[None]
        else:
            out = lax.map(lambda idx: chunk(idx, args, kwargs), chunks)
        return out.reshape(-1, out.shape[-1])[: setup.structure.num_images]

    def log_prior(
        self, setup: _Setup, values: dict[str, Array], args: tuple, kwargs: dict
    ) -> Array:
        """:math:`\\log p(\\theta)`, the declared densities at the global values.

        Evaluated without numpyro's support check: an M-step's values lie on their
        supports up to float32 rounding (a simplex row of a few hundred entries
        may sum to 1 + 2e-6, past the check's 1e-6), which the check would turn
        into an objective of -inf.

        Parameters
        ----------
        setup : _Setup
            The static set-up.
        values : dict
            Site -> global value.
        args : tuple
            The model's positional arguments.
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        jax.Array
            The scalar log prior.
        """
        subs = dict(values)
        subs.update(self.small_substitutions(setup))
        with numpyro.validation_enabled(False):
            trace = _trace(self.model, subs, args, kwargs)
            return _out_of_plate(trace, self.plate)

    def transforms(
        self, setup: _Setup, args: tuple, kwargs: dict
    ) -> dict[str, Transform]:
        """The transform from unconstrained coordinates onto each global site's support.

        Parameters
        ----------
        setup : _Setup
            The static set-up.
        args : tuple
            The model's positional arguments.
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        dict
            Site -> ``biject_to`` of its support.
        """
        trace = _trace(self.model, self.small_substitutions(setup), args, kwargs)
        return {k: biject_to(_support(trace[k])) for k in setup.structure.globals_}
