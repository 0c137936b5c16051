"""Keys that compare static configuration by value, not by identity.

A compiled program is looked up by its static arguments' ``==`` and ``hash``. Python
functions, ``functools.partial`` objects and optax transformations (named tuples of
two closures) compare by identity, so a model defined inside a function, a
``functools.partial(model, k=3)`` or an ``optax.adam(0.05)`` built for every fit
would compile the same program again each time. :func:`value_key` gives such an
object a hashable key that is equal whenever the two objects run the same code on
equal bound values (a function's code, defaults and closure cells, a partial's
function and arguments, the items of tuples, lists and dicts, the content of
arrays); what it cannot read by value (an unhashable object of another kind, a
tracer) it keys by identity, which is never wrong, only slower.

The key is read when it is computed: a closure over a list that is changed later
keeps the key of its earlier content.
"""

from __future__ import annotations

import functools
import hashlib
import types
from collections.abc import Hashable
from typing import Any

import numpy as np

import jax

__all__ = ["Identity", "array_key", "value_key"]

_SCALARS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))
_EMPTY_CELL = object()


class Identity:
    """A key that equals only the key of the same object (``is``)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj  # held: its id is not reused while the key lives

    def __eq__(self, other) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"Identity({type(self.obj).__name__} at {id(self.obj):#x})"


def array_key(x: object) -> Hashable:
    """``("array", dtype, shape, sha1 of the bytes)`` of a concrete array; an
    :class:`Identity` for a tracer."""
    if isinstance(x, jax.core.Tracer):
        return Identity(x)
    a = np.asarray(x)
    if a.dtype == object:
        return Identity(x)
    digest = hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()
    return ("array", str(a.dtype), a.shape, digest)


def value_key(obj: Any) -> Hashable:
    """A hashable key of ``obj``, equal for objects a traced program cannot tell
    apart.

    Parameters
    ----------
    obj : object
        A function, ``functools.partial``, bound method, optax transformation,
        tuple / list / dict of them, array, scalar or any other object.

    Returns
    -------
    Hashable
        Scalars with their type (``1``, ``1.0`` and ``True`` trace differently);
        functions as their module, qualified name, code object, defaults and
        closure cells' keys; partials as their function's and arguments' keys;
        bound methods as their function's and instance's keys; containers item by
        item; arrays by dtype, shape and content hash; other hashable objects as
        themselves (their own ``==``); anything else by identity.

    Examples
    --------
    >>> import optax
    >>> value_key(optax.adam(0.05)) == value_key(optax.adam(0.05))
    True
    >>> value_key(optax.adam(0.05)) == value_key(optax.adam(0.1))
    False
    """
    return _key(obj, set())


def _key(obj: Any, active: set[int]) -> Hashable:
    if isinstance(obj, _SCALARS) or isinstance(obj, np.generic | np.dtype):
        return (type(obj), obj)
    if id(obj) in active:  # a cycle (a recursive closure): identity breaks it
        return Identity(obj)
    active.add(id(obj))
    try:
        return _compound(obj, active)
    finally:
        active.discard(id(obj))


def _compound(obj: Any, active: set[int]) -> Hashable:
    if isinstance(obj, types.FunctionType):
        cells = ()
        if obj.__closure__:
            cells = tuple(_key(_cell(c), active) for c in obj.__closure__)
        return (
            "function",
            obj.__module__,
            obj.__qualname__,
            obj.__code__,
            _key(obj.__defaults__, active),
            _key(obj.__kwdefaults__, active),
            cells,
        )
    if isinstance(obj, functools.partial):
        return (
            "partial",
            type(obj),
            _key(obj.func, active),
            _key(obj.args, active),
            _key(obj.keywords, active),
        )
    if isinstance(obj, types.MethodType):
        return ("method", _key(obj.__func__, active), _key(obj.__self__, active))
    if isinstance(obj, tuple | list):  # named tuples keep their type
        return (type(obj), tuple(_key(v, active) for v in obj))
    if isinstance(obj, dict):
        return (
            type(obj),
            tuple((_key(k, active), _key(v, active)) for k, v in obj.items()),
        )
    if isinstance(obj, np.ndarray | jax.Array):
        return array_key(obj)
    if obj is _EMPTY_CELL:
        return "empty cell"
    try:
        hash(obj)
    except TypeError:
        return Identity(obj)
    return obj


def _cell(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet filled
        return _EMPTY_CELL
