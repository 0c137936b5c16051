r"""A numpyro declaration as :class:`~jaxannot.inference.vem.algorithm.VEM` and its
helpers read it: the pieces of the objective, nothing about how it is optimized.

:class:`DeclaredModel` bundles the model with its discrete per-image site, its image
plate and the chunk size, and gives a call's static set-up and its chunks (the
objective's pieces on a call are
:class:`~jaxannot.inference.vem.model_call.ModelCall`'s). It is hashable (a static
argument of compiled functions): the VEM's layouts, start, M-step and Laplace
draws take it instead of the ``VEM`` object. It compares its model by value
(:func:`~jaxannot.runtime.static_key.value_key`): a ``functools.partial`` or a
closure of the same code with equal bound values is the same declaration, and
shares its compiled programs.

Within :func:`reusing_setups` (the held-out path of ``lam="auto"``: many fits of
one data), :meth:`DeclaredModel.setup` and what goes through :func:`reused` answer
a second call on the same argument objects from the first, without tracing the
model again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, TypeVar

import numpy as np

import jax
import jax.numpy as jnp

from jaxannot.inference.vem.declaration import (
    DeclarationError,
    Structure,
    abstract_trace,
    read_by_value,
)
from jaxannot.inference.vem.enumeration import site_in_plate
from jaxannot.inference.vem.log_joint import Setup, split_leaves
from jaxannot.runtime.static_key import value_key

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = [
    "CHUNK_SIZE",
    "ONE_CHUNK",
    "DeclaredModel",
    "chunk_for",
    "read_subsamples",
    "reused",
    "reusing_setups",
]

T = TypeVar("T")

#: Images per chunk of the log joint where ``chunk_size`` is None and the fit is
#: not small (:func:`chunk_for`).
CHUNK_SIZE = 1024

#: Where ``chunk_size`` is None, a fit whose array arguments hold at most this many
#: elements, times the local site's K values, runs its log joint in one chunk
#: (:func:`chunk_for`): 4 MiB of float32.
ONE_CHUNK = 2**20

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
    chunk_size : int or None
        Images per chunk of the log joint; None: :func:`chunk_for`'s choice.

    Notes
    -----
    Two declarations are equal when their models have equal
    :func:`~jaxannot.runtime.static_key.value_key` (same code, equal defaults,
    closure values and partial arguments) and their other fields are equal.
    """

    model: Callable
    local_site: str = "z"
    plate: str = "image"
    chunk_size: int | None = None

    def _key(self) -> tuple:
        return (value_key(self.model), self.local_site, self.plate, self.chunk_size)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def setup(self, args: tuple, kwargs: dict) -> tuple[Setup, tuple]:
        """The static set-up of a call on ``args`` (structure, chunking, the
        arguments' static leaves) and its traced array leaves. Arrays the model
        reads by value (a size as ``int(np.max(x)) + 1``) are static leaves, keyed
        on their content. Within :func:`reusing_setups`, a second call on the same
        argument objects returns the first's answer.

        Parameters
        ----------
        args : tuple
            The call's positional arguments (data and sizes).
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        tuple of (Setup, tuple)
            The set-up and the array leaves.
        """
        return reused(("setup", self), args, kwargs, lambda: self._setup(args, kwargs))

    def _setup(self, args: tuple, kwargs: dict) -> tuple[Setup, tuple]:
        structure, args, kwargs = read_by_value(
            self.model, self.local_site, self.plate, args, kwargs
        )
        treedef, static, is_dynamic, dynamic = split_leaves(args, kwargs)
        n = structure.num_images
        chunk = chunk_for(self.chunk_size, n, structure.num_values, dynamic)
        subsamples, error = read_subsamples(
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
        setup = Setup(
            structure, subsamples, chunk, -(-n // chunk), treedef, static, is_dynamic
        )
        return setup, dynamic

    def small_substitutions(self, setup: Setup) -> dict:
        """Plate indices for traces that need only the out-of-plate sites.

        Parameters
        ----------
        setup : Setup
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

    def chunk_indices(self, setup: Setup) -> tuple[Array, Array]:
        """The image indices of each chunk and which of them are real images.

        Parameters
        ----------
        setup : Setup
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


def chunk_for(
    chunk_size: int | None, num_images: int, num_values: int, arrays: tuple
) -> int:
    """The images per chunk of a fit's log joint: ``chunk_size``, or where it is
    None, every image in one chunk for a small fit (its array arguments hold at
    most :data:`ONE_CHUNK` elements times ``num_values``) and :data:`CHUNK_SIZE`
    otherwise; at most ``num_images``.

    A small fit's time is mostly compiling, and a log joint of several chunks is a
    loop in every compiled program that evaluates it (the E-step, each derivative
    of the M-step and of the start): issue 43's 2000-item Bernoulli mixture
    compiles its EM loop in about a third less CPU time in one chunk than in two.
    A large fit keeps one chunk's work in memory at a time.

    Parameters
    ----------
    chunk_size : int or None
        The fit's ``chunk_size``.
    num_images : int
        The plate's size.
    num_values : int
        The local site's number of values K.
    arrays : tuple
        The model's array arguments.

    Returns
    -------
    int
        Images per chunk.
    """
    if chunk_size is None:
        size = sum(math.prod(np.shape(a)) for a in arrays)
        small = size * num_values <= ONE_CHUNK
        chunk_size = num_images if small else CHUNK_SIZE
    return min(chunk_size, num_images)


def read_subsamples(
    model: Callable,
    plate: str,
    local_site: str,
    structure: Structure,
    args: tuple,
    kwargs: dict,
) -> tuple[bool, Exception | None]:
    """Whether the model's observed in-plate sites follow the plate's indices (the
    model reads its data through them, so a chunk of images can be traced alone).

    Parameters
    ----------
    model : callable
        The numpyro model.
    plate : str
        Its item plate.
    local_site : str
        Its local site.
    structure : Structure
        Its structure.
    args : tuple
        The positional arguments of the trial trace (on two images).
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    tuple of (bool, Exception or None)
        Whether they do, and the error a trace on two images' indices raised
        (None if it ran).
    """
    dim = structure.image_dim

    def read(trace):
        observed = [
            v
            for v in trace.values()
            if v["type"] == "sample" and v["is_observed"] and site_in_plate(v, plate)
        ]
        return all(
            jnp.shape(v["value"])[dim - len(v["fn"].event_shape)] == 2 for v in observed
        )

    try:
        substitutions = {
            plate: np.arange(2, dtype=np.int32),
            local_site: structure.local_value(2),
        }
        return abstract_trace(model, substitutions, args, kwargs, read), None
    except (ValueError, TypeError, IndexError) as error:
        return False, error
