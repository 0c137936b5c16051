"""numpyro SVI loops compiled once per configuration, compared by value.

numpyro's ``SVI.run`` jits a fresh closure at every call, so every fit compiles its
loop again (12 to 33 s for one ``LaplacianELBO`` fit of 600 images where the steps
themselves take about a second). :class:`SVIProgram` is the static argument of
the loops here: it holds an initialized ``SVI`` and the arguments' non-array
values, and compares by a key of their *values*
(:func:`~jaxannot.runtime.static_key.value_key`): the model and guide (a function
by its code and closure, an autoguide object by identity), the optimizer (by its
functions, hence by its optax transformation's hyper-parameters), the loss
(:func:`loss_key`: a :class:`~jaxannot.inference.LaplacianELBO` by its base,
sites, graph content, distance, scale and sweeps, not its weights) and the
arguments' structure and non-array leaves. The weights, the SVI state and the
array arguments are dynamic: a second fit of the same shapes, at any weight,
compiles nothing.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING

import numpy as np

import jax
from numpyro.infer import SVI

from jaxannot.runtime import progress
from jaxannot.runtime.static_key import array_key, value_key

if TYPE_CHECKING:
    from numpyro.infer.elbo import ELBO
    from numpyro.infer.svi import SVIState

    from jaxannot.types import Array

__all__ = [
    "ArgsProgram",
    "SVIProgram",
    "SVIStep",
    "loss_key",
    "object_key",
    "run_steps",
    "with_lams",
]


def object_key(obj: object) -> Hashable:
    """``value_key`` of an object by its attributes (numpyro's ELBOs and optimizers
    do not define ``==``): its type and :func:`vars` item by item.

    Parameters
    ----------
    obj : object
        An ELBO, an optimizer or any value.

    Returns
    -------
    Hashable
        Its key.
    """
    if hasattr(obj, "__dict__"):
        return (type(obj), value_key(dict(vars(obj))))
    return value_key(obj)


def loss_key(loss: ELBO) -> Hashable:
    """The key of a loss, its weights aside: a ``LaplacianELBO`` (anything with
    ``lams`` and ``graph``) by its base (as read when it was built: ``base_key``),
    site names, graph content, distance, scale and sweeps; another ELBO by
    :func:`object_key`.

    Parameters
    ----------
    loss : ELBO
        A numpyro ELBO or a ``LaplacianELBO``.

    Returns
    -------
    Hashable
        Its key.
    """
    if not hasattr(loss, "lams"):
        return object_key(loss)
    graph = loss.graph
    return (
        type(loss),
        loss.base_key,
        tuple(sorted(loss.lams)),
        tuple(array_key(a) for a in (graph.senders, graph.receivers, graph.weights)),
        int(graph.num_nodes),
        loss.distance,
        float(loss.unit),
        loss.sweeps,
    )


def with_lams(loss: ELBO, lams: Mapping) -> ELBO:
    """A copy of a ``LaplacianELBO`` with the weights ``lams`` (site -> number or
    traced scalar); the graph's tables are shared.

    Parameters
    ----------
    loss : LaplacianELBO
        The loss to copy.
    lams : Mapping
        Site -> weight.

    Returns
    -------
    LaplacianELBO
        The copy.
    """
    new = copy.copy(loss)
    new.lams = dict(lams)
    return new


def _is_array(leaf) -> bool:
    return isinstance(leaf, jax.Array | np.ndarray)


class ArgsProgram:
    """The static part of a compiled function of a model's arguments: their
    structure and non-array leaves, and ``key`` (what else its code depends on),
    compared by value; the arrays are its dynamic arguments (:meth:`dynamic`).

    Parameters
    ----------
    args : tuple
        The positional arguments the program is compiled for.
    kwargs : dict
        Its keyword arguments.
    key : Hashable
        The key of the rest of the static part (the model, the guide, a site).
    """

    def __init__(self, args: tuple, kwargs: dict, key: Hashable = ()):
        leaves, self.treedef = jax.tree.flatten((tuple(args), dict(kwargs)))
        self.static = tuple(None if _is_array(leaf) else leaf for leaf in leaves)
        self.key = (
            key,
            self.treedef,
            tuple(None if s is None else value_key(s) for s in self.static),
        )

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def dynamic(self, args: tuple, kwargs: dict) -> list:
        """The array leaves of ``(args, kwargs)``, the program's dynamic arguments.

        Parameters
        ----------
        args : tuple
            Positional arguments of the model.
        kwargs : dict
            Its keyword arguments.

        Returns
        -------
        list
            Their array leaves.
        """
        leaves = jax.tree.leaves((tuple(args), dict(kwargs)))
        return [leaf for leaf in leaves if _is_array(leaf)]

    def join(self, dynamic: list) -> tuple[tuple, dict]:
        """``(args, kwargs)`` from :meth:`dynamic`'s arrays and the static leaves.

        Parameters
        ----------
        dynamic : list
            Arrays as :meth:`dynamic` returns them.

        Returns
        -------
        tuple of (tuple, dict)
            ``(args, kwargs)``.
        """
        arrays = iter(dynamic)
        leaves = [next(arrays) if s is None else s for s in self.static]
        return jax.tree.unflatten(self.treedef, leaves)


class SVIProgram(ArgsProgram):
    """The static argument of a compiled SVI loop (module docstring).

    Parameters
    ----------
    svi : numpyro.infer.SVI
        Initialized (``svi.init`` ran: its ``constrain_fn`` is set).
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    extra : Hashable
        What else the loop's code depends on (a site name, a plate).
    """

    def __init__(self, svi: SVI, args: tuple, kwargs: dict, extra: Hashable = ()):
        key = (
            value_key(svi.model),
            value_key(svi.guide),
            object_key(svi.optim),
            loss_key(svi.loss),
            extra,
        )
        super().__init__(args, kwargs, key)
        self.svi = svi

    def svi_at(self, lams: Mapping) -> SVI:
        """The initialized ``SVI`` with its loss at the weights ``lams``.

        Parameters
        ----------
        lams : Mapping
            Site -> weight.

        Returns
        -------
        SVI
            A copy of the program's SVI.
        """
        svi = copy.copy(self.svi)
        svi.loss = with_lams(svi.loss, lams)
        return svi


@dataclasses.dataclass(frozen=True)
class SVIStep:
    """One SVI update as the runner's ``step(t, state, data) -> (state, loss)``
    (:func:`~jaxannot.runtime.progress.run_steps`), ``data = (lams, dynamic)``;
    equal for equal programs, so a new one per fit reuses the compiled loop.

    Parameters
    ----------
    program : SVIProgram
        The SVI and the arguments' static part.
    """

    program: SVIProgram

    def __call__(self, t: Array, state: SVIState, data: tuple) -> tuple:
        """``svi.update`` at the weights and arrays of ``data`` (``t`` unused: the
        SVI state carries its own key).

        Parameters
        ----------
        t : jax.Array
            The step's index (unused).
        state : numpyro.infer.svi.SVIState
            The state entering the step.
        data : tuple
            ``(lams, dynamic)``: site -> weight, ``program.dynamic(args, kwargs)``.

        Returns
        -------
        tuple of (SVIState, jax.Array)
            The state after the update and the loss before it.
        """
        del t
        lams, dynamic = data
        args, kwargs = self.program.join(dynamic)
        return self.program.svi_at(lams).update(state, *args, **kwargs)


def run_steps(
    program: SVIProgram, num_steps: int, state: SVIState, lams: dict, dynamic: list
) -> tuple[SVIState, np.ndarray]:
    """``num_steps`` SVI updates through the library's runner
    (:func:`~jaxannot.runtime.progress.run_steps`, :class:`SVIStep`): one compiled
    loop per program for any number of steps, checkpointed inside a
    :func:`~jaxannot.runtime.checkpoint.checkpointing` block.

    Parameters
    ----------
    program : SVIProgram
        The SVI and the arguments' static part.
    num_steps : int
        At least 1.
    state : numpyro.infer.svi.SVIState
        The state entering the first step.
    lams : dict
        Site -> weight (float32 scalars).
    dynamic : list
        ``program.dynamic(args, kwargs)``.

    Returns
    -------
    state : SVIState
        After the last step.
    losses : np.ndarray [num_steps]
        The loss before each step (as ``SVI.run`` records them).
    """
    return progress.run_steps(
        SVIStep(program),
        state,
        num_steps,
        progress_bar=False,
        desc="SVI",
        data=(lams, dynamic),
    )
