"""Typed parameters: the declaration of a method's fitted arrays, and its checks.

A method's fitted parameters are a :class:`~typing.NamedTuple` (its
:attr:`~jaxannot.annotators.base.Method.params`) whose field annotations declare its
arrays; :func:`spec_of` reads them (``typing.get_type_hints``) into the spec a load
checks. A field is annotated with one of

a jaxtyping array type, e.g. ``Float[Array, "n d"]``
    One array: the dtype class gives the numpy dtype kinds allowed (``Float`` ``f``,
    ``Int`` ``i``, ``UInt`` ``u``, ``Integer`` ``iu``, ``Bool`` ``b``; a union such
    as ``Float[Array, "n w"] | Bool[Array, "n w"]`` allows each member's), the
    dimension string names the dimensions; equal names must have equal sizes across
    the model, ``_`` is any size, ``""`` is a scalar (one dimension is written with
    a leading space, ``" n"``, which linters do not read as a forward reference).
    Its spec is ``"KIND[DIMS]"`` (``"f[n,d]"``, ``"fb[n,w]"``, ``"iu[n,m]"``,
    ``"f[]"``).
``tuple[ENTRY, ...]``
    A tuple of any length, each entry as ``ENTRY`` (e.g. one array per view); its
    spec is :class:`TupleOf` ``(entry)``.
``dict[str, ENTRY]``
    A dict from names (data, e.g. view names) to entries as ``ENTRY``; its spec is
    :class:`DictOf` ``(entry)``.
a NamedTuple type
    A nested group of parameters, with its own annotations.
``Annotated[dict[str, Any], MethodParams()]``
    A dict from base specifications (a registered method's name, optionally followed
    by ``:key=value`` overrides) to the params of that method, each checked against
    its own declaration (a composite method such as ``ensemble``).

Any of these may be ``... | None``. A field whose default is ``None`` may be absent;
an absent tuple or dict without a default is empty (it was saved empty). Dimension
names bound inside a tuple or dict entry are that entry's own (the views of a model
have vocabularies of different sizes); names bound outside hold inside. The values
themselves are whatever arrays the method holds (a loaded model's are numpy arrays):
the annotations declare, they are not checked at run time.

:func:`flatten_params` gives a NamedTuple's arrays by their ``/``-joined field paths
and :func:`params_from_arrays` rebuilds it from them, checking each array against
the declaration (:mod:`jaxannot.annotators.persistence` saves and loads them).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from jaxtyping import AbstractArray

from jaxannot.annotators.base import get_method

__all__ = [
    "DictOf",
    "MethodParams",
    "TupleOf",
    "declared_params",
    "flatten_params",
    "params_from_arrays",
    "spec_of",
]


@dataclasses.dataclass(frozen=True)
class TupleOf:
    """The spec of a field annotated ``tuple[ENTRY, ...]``: a tuple of entries, each
    as ``entry`` (the spec of ``ENTRY``)."""

    entry: Any


@dataclasses.dataclass(frozen=True)
class DictOf:
    """The spec of a field annotated ``dict[str, ENTRY]``: a dict from names to
    entries as ``entry`` (the spec of ``ENTRY``)."""

    entry: Any


@dataclasses.dataclass(frozen=True)
class MethodParams:
    """Marks a field annotated ``Annotated[dict[str, Any], MethodParams()]`` (and is
    its spec): a dict from base specifications (``name`` or ``name:key=value:...``)
    to the params of registered method ``name``."""


_EMPTY = {TupleOf: tuple, DictOf: dict, MethodParams: dict}


def _params_of_base(base: str, path: str) -> type:
    """The declared params NamedTuple of the method that base spec ``base`` names."""
    declared = declared_params(base.partition(":")[0])
    if declared is None:
        raise ValueError(f"{path!r} names no registered method with declared params")
    return declared


def flatten_params(params: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """The arrays of ``params`` by ``/``-joined path: a NamedTuple by field name
    (through ``_asdict()``, ``None`` fields left out), a tuple by position, a dict by
    key; ``ValueError`` for a key holding ``/``."""
    if hasattr(params, "_asdict"):
        items = [(k, v) for k, v in params._asdict().items() if v is not None]
    elif isinstance(params, Mapping):
        items = list(params.items())
    elif isinstance(params, tuple | list):
        items = [(str(i), v) for i, v in enumerate(params)]
    else:
        return {prefix.rstrip("/"): np.asarray(params)}
    out: dict[str, np.ndarray] = {}
    for key, value in items:
        if "/" in key or not key:
            raise ValueError(f"parameter names may not be empty or hold '/': {key!r}")
        out.update(flatten_params(value, f"{prefix}{key}/"))
    return out


def params_from_arrays(cls: type, flat: Mapping[str, np.ndarray]) -> Any:
    """The NamedTuple ``cls`` rebuilt from the arrays ``flat`` (by ``/``-joined path,
    as :func:`flatten_params` gives them) and checked against its annotations
    (:func:`spec_of`).

    Raises
    ------
    ValueError
        Naming the first field that is missing, unexpected, or of another kind,
        rank or size (NaN and infinite values are
        :func:`~jaxannot.annotators.persistence.load`'s to refuse).
    """
    for key in flat:
        if not all(key.split("/")):
            raise ValueError(f"parameter name {key!r} has an empty part")
    return _build(cls, dict(flat), "", {})


@functools.cache
def spec_of(cls: type) -> Mapping[str, Any]:
    """The spec of the params NamedTuple ``cls``, derived from its field annotations
    (module docstring): field name to ``"KIND[DIMS]"``, :class:`TupleOf`,
    :class:`DictOf`, a NamedTuple type or :class:`MethodParams`, in field order
    (read-only: it is cached per type).

    Raises
    ------
    TypeError
        ``cls`` is not a NamedTuple, or the annotation of one of its fields (named)
        declares none of the above.
    """
    fields = getattr(cls, "_fields", None)
    if fields is None:
        raise TypeError(f"{cls!r} must be a NamedTuple of declared parameters")
    hints = typing.get_type_hints(cls, include_extras=True)
    spec = {}
    for field in fields:
        try:
            spec[field] = _spec_of_hint(hints.get(field, Any))
        except TypeError as err:
            raise TypeError(
                f"{cls.__name__}.{field} declares no parameter: {err}"
            ) from None
    return types.MappingProxyType(spec)


_KINDS = {"float": "f", "bfloat": "f", "int": "i", "uint": "u", "bool": "b"}


def _spec_of_hint(hint: Any) -> Any:
    """The spec of one field annotation ``hint`` (:func:`spec_of`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated and any(isinstance(a, MethodParams) for a in args[1:]):
        return MethodParams()
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return _spec_of_hint(members[0])
        return _array_spec(members, hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return TupleOf(_spec_of_hint(args[0]))
    if origin is dict and len(args) == 2 and args[0] is str:
        return DictOf(_spec_of_hint(args[1]))
    if isinstance(hint, type) and hasattr(hint, "_fields"):
        return hint
    return _array_spec([hint], hint)


def _array_spec(members: list, hint: Any) -> str:
    """``"KIND[DIMS]"`` of jaxtyping array types ``members`` with equal dimensions
    (the kinds of each, in ``fiub`` order)."""
    if not all(isinstance(m, type) and issubclass(m, AbstractArray) for m in members):
        raise TypeError(f"{hint!r} is not a jaxtyping array, tuple, dict or NamedTuple")
    dims = {tuple(m.dim_str.split()) for m in members}
    names = next(iter(dims))
    if len(dims) != 1 or not all(n == "_" or n.isidentifier() for n in names):
        raise TypeError(f"{hint!r} should name its dimensions alike, by plain names")
    found = set()
    for member in members:
        for dtype in member.dtypes if isinstance(member.dtypes, tuple) else ("",):
            prefix = re.match(r"[a-z]*", dtype).group()
            if prefix not in _KINDS:
                raise TypeError(f"{hint!r} holds dtypes beyond float, int and bool")
            found.add(_KINDS[prefix])
    return "".join(k for k in "fiub" if k in found) + f"[{','.join(names)}]"


def _group(flat: Mapping[str, np.ndarray]) -> dict[str, dict]:
    """``flat`` grouped by the first part of each key (``""``: the array itself)."""
    groups: dict[str, dict] = {}
    for key, value in flat.items():
        head, _, rest = key.partition("/")
        groups.setdefault(head, {})[rest] = value
    return groups


def _build(cls: type, flat: Mapping[str, np.ndarray], prefix: str, sizes: dict):
    spec = spec_of(cls)
    groups = _group(flat)
    unexpected = sorted(set(groups) - set(spec))
    if unexpected:
        raise ValueError(f"unexpected parameter {prefix + unexpected[0]!r}")
    values = {}
    arrays_first = sorted(spec, key=lambda f: not isinstance(spec[f], str))
    for field in arrays_first:
        path = prefix + field
        if field in groups:
            values[field] = _entry(spec[field], groups[field], path, sizes)
        elif isinstance(spec[field], TupleOf | DictOf | MethodParams):  # saved empty
            empty = _EMPTY[type(spec[field])]()
            values[field] = cls._field_defaults.get(field, empty)
        elif field not in cls._field_defaults:
            raise ValueError(f"no parameter {path!r}")
    return cls(**values)


def _entry(spec: Any, group: dict, path: str, sizes: dict):
    if isinstance(spec, str):
        if set(group) != {""}:
            raise ValueError(f"{path!r} should be one array, not a group of arrays")
        return _checked_array(spec, group[""], path, sizes)
    if "" in group:
        raise ValueError(f"{path!r} should be a group of arrays, not one array")
    entries = _group(group)
    if isinstance(spec, MethodParams):  # each base's dimensions are its own
        return {
            n: _build(_params_of_base(n, f"{path}/{n}"), entries[n], f"{path}/{n}/", {})
            for n in sorted(entries)
        }
    if not isinstance(spec, TupleOf | DictOf):
        return _build(spec, group, path + "/", sizes)
    names = sorted(entries)
    if isinstance(spec, TupleOf):
        names = [str(i) for i in range(len(entries))]
        if sorted(entries) != sorted(names):
            raise ValueError(
                f"{path!r} should number its entries 0 to {len(names) - 1}"
            )
    built = [
        (n, _entry(spec.entry, entries[n], f"{path}/{n}", dict(sizes))) for n in names
    ]
    if isinstance(spec, TupleOf):
        return tuple(value for _, value in built)
    return dict(built)


def _checked_array(spec: str, value: np.ndarray, path: str, sizes: dict) -> np.ndarray:
    kinds, _, dims = spec.partition("[")
    names = [d for d in dims.rstrip("]").split(",") if d]
    if value.dtype.kind not in kinds:
        raise ValueError(f"{path!r} holds {value.dtype} values, not kind {kinds!r}")
    if value.ndim != len(names):
        raise ValueError(f"{path!r} has shape {value.shape}, not [{dims}")
    for name, size in zip(names, value.shape, strict=True):
        if name == "_":
            continue
        seen, where = sizes.setdefault(name, (size, path))
        if seen != size:
            raise ValueError(
                f"{path!r} has shape {value.shape}: its {name} is {size}, "
                f"{where!r} gives {seen}"
            )
    return value


def declared_params(method: str) -> type | None:
    """The params NamedTuple of registered method ``method``; None when it is not
    registered or declares none (its parameters then load as nested dicts)."""
    try:
        return get_method(method).params
    except KeyError:
        return None
