"""Saving and loading fitted models, and the declared parameters a load checks.

A method's fitted parameters are a :class:`~typing.NamedTuple` (its
:attr:`~jaxannot.annotators.base.Method.params`) that declares its arrays in a class
attribute ``spec``: field name to one of

``"KIND[DIMS]"``
    One array: ``KIND`` the numpy dtype kinds allowed (``f`` float, ``i`` signed,
    ``u`` unsigned, ``b`` bool), ``DIMS`` comma-separated dimension names; equal
    names must have equal sizes across the model, ``_`` is any size. E.g.
    ``"f[n,d]"``, ``"iu[n,m]"``, ``"f[]"`` (a scalar).
:class:`TupleOf` ``(entry)``
    A tuple of any length, each entry as ``entry`` (e.g. one array per view).
:class:`DictOf` ``(entry)``
    A dict from names (data, e.g. view names) to entries as ``entry``.
a NamedTuple type
    A nested group of parameters, with its own ``spec``.
:class:`MethodParams` ``()``
    A dict from base specifications (a registered method's name, optionally followed
    by ``:key=value`` overrides) to the params of that method, each checked against
    its own declaration (a composite method such as ``ensemble``).

A field whose default is ``None`` may be absent; an absent tuple or dict without a
default is empty (it was saved empty). Dimension names bound inside a
:class:`TupleOf` / :class:`DictOf` entry are that entry's own (the views of a model
have vocabularies of different sizes); names bound outside hold inside.

:func:`save` writes the arrays by their ``/``-joined field paths (``log_betas/0``,
``latent/alpha``, ``bin_edges/features``) through ``_asdict()``; :func:`load` rebuilds
the method's NamedTuple from them and checks every array against the declaration
and for NaN / infinite values, naming the file and the field of the first that does
not fit. A model saved before parameters were NamedTuples has the same paths and
loads unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from jaxannot.annotators.base import Fitted, Method, get_method
from jaxannot.annotators.hyper_values import check_hyper
from jaxannot.data.archive import read_archive, write_archive
from jaxannot.data.errors import DataFormatError

__all__ = [
    "DictOf",
    "MethodParams",
    "TupleOf",
    "flatten_params",
    "load",
    "load_scorer",
    "params_from_arrays",
    "save",
]

_FORMAT_VERSION = 1
_REMEDY = "save the model again (jaxannot evaluate ... --save)"


@dataclasses.dataclass(frozen=True)
class TupleOf:
    """Declares a field holding a tuple of entries, each as ``entry`` (a spec)."""

    entry: Any


@dataclasses.dataclass(frozen=True)
class DictOf:
    """Declares a field holding a dict from names to entries as ``entry`` (a spec)."""

    entry: Any


@dataclasses.dataclass(frozen=True)
class MethodParams:
    """Declares a field holding a dict from base specifications (``name`` or
    ``name:key=value:...``) to the params of registered method ``name``."""


_EMPTY = {TupleOf: tuple, DictOf: dict, MethodParams: dict}


def _params_of_base(base: str, path: str) -> type:
    """The declared params NamedTuple of the method that base spec ``base`` names."""
    declared = _declared_params(base.partition(":")[0])
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
    as :func:`flatten_params` gives them) and checked against its ``spec``.

    Raises
    ------
    ValueError
        Naming the first field that is missing, unexpected, or of another kind,
        rank or size (NaN and infinite values are :func:`load`'s to refuse).
    """
    for key in flat:
        if not all(key.split("/")):
            raise ValueError(f"parameter name {key!r} has an empty part")
    return _build(cls, dict(flat), "", {})


def _spec_of(cls: type) -> Mapping[str, Any]:
    spec = getattr(cls, "spec", None)
    fields = getattr(cls, "_fields", None)
    if fields is None or not isinstance(spec, Mapping) or set(spec) != set(fields):
        raise TypeError(
            f"{cls.__name__} must be a NamedTuple whose class attribute 'spec' "
            f"declares each of its fields, got spec {spec!r} for fields {fields!r}"
        )
    return spec


def _group(flat: Mapping[str, np.ndarray]) -> dict[str, dict]:
    """``flat`` grouped by the first part of each key (``""``: the array itself)."""
    groups: dict[str, dict] = {}
    for key, value in flat.items():
        head, _, rest = key.partition("/")
        groups.setdefault(head, {})[rest] = value
    return groups


def _build(cls: type, flat: Mapping[str, np.ndarray], prefix: str, sizes: dict):
    spec = _spec_of(cls)
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


def _unflatten_params(flat: Mapping[str, np.ndarray]) -> dict:
    """The nested dict of ``/``-joined key paths (the parameters of a method that
    declares none); ``ValueError`` when a path has an empty part or lies inside
    another array (``a`` and ``a/b``: ``a`` comes first in sorted order)."""
    out: dict = {}
    for path in sorted(flat):
        node = out
        *parents, leaf = path.split("/")
        if not all(parents) or not leaf:
            raise ValueError(f"parameter name {path!r} has an empty part")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"parameter {path!r} is inside the array {p!r}")
        node[leaf] = flat[path]
    return out


def save(path: str | os.PathLike, fitted: Fitted) -> None:
    """Save ``fitted`` to ``path`` (an ``.npz`` archive with a JSON header), atomically.

    The arrays go into the archive by their ``/``-joined field paths
    (:func:`flatten_params`); the method name, hyper-parameters and info go into the
    JSON header. The file is written to a temporary name in the same folder, synced
    to disk and renamed, so a crash never leaves a half-written model; it ends with a
    checksum that :func:`load` checks (:mod:`jaxannot.data.archive`).
    """
    flat = flatten_params(fitted.params)
    meta = {
        "format": "jaxannot.fitted",
        "version": _FORMAT_VERSION,
        "method": fitted.method,
        "hyper": fitted.hyper,
        "info": fitted.info,
        "keys": sorted(flat),
    }
    write_archive(path, flat, meta=meta)


def _declared_params(method: str) -> type | None:
    """The params NamedTuple of registered method ``method``; None when it is not
    registered or declares none (its parameters then load as nested dicts)."""
    try:
        return get_method(method).params
    except KeyError:
        return None


def _checked_header(path, meta, fail: Callable[[str], DataFormatError]) -> str:
    """The method named by the header ``meta`` of the model at ``path``, after
    checking the header's format, version and fields."""
    if meta is None:
        raise fail("not a jaxannot model (no JSON header)")
    if meta.get("format") != "jaxannot.fitted":
        raise fail("not a jaxannot model (its header has another format)")
    version = meta.get("version")
    if type(version) is not int or not 1 <= version <= _FORMAT_VERSION:
        raise DataFormatError(
            path,
            f"model file format version {version!r}; this jaxannot reads versions 1 "
            f"to {_FORMAT_VERSION} (save it again with this version)",
        )
    method = meta.get("method")
    if not isinstance(method, str) or not method:
        raise fail("its header names no method")
    for field in ("hyper", "info"):
        if not isinstance(meta.get(field, {}), dict):
            raise fail(f"its header's {field!r} is not a JSON object")
    return method


def load(path: str | os.PathLike) -> Fitted:
    """Load a model written by :func:`save` (never unpickles anything).

    A registered method's parameters come back as its params NamedTuple, every
    array checked against the declaration (module docstring); those of a method
    that is not registered or declares none as nested dicts.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    DataFormatError
        The file is damaged (truncated, altered: its checksum does not match), is
        not a jaxannot model, or holds an array that is NaN / infinite or does not
        fit its method's declaration: the one-line message names the file, the
        field and the problem.
    """
    archive = read_archive(path, "jaxannot model", remedy=_REMEDY)
    meta = archive.meta

    def fail(problem: str) -> DataFormatError:
        return DataFormatError(path, f"{problem}; {_REMEDY}")

    method = _checked_header(path, meta, fail)
    keys = meta.get("keys", sorted(archive.arrays))
    if not isinstance(keys, list) or sorted(keys) != sorted(archive.arrays):
        raise fail("its header lists other parameters than the archive holds")
    for key, value in sorted(archive.arrays.items()):
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise fail(f"its parameter {key!r} holds NaN or infinite values")
    declared = _declared_params(method)
    try:
        if declared is None:
            params = _unflatten_params(archive.arrays)
        else:
            params = params_from_arrays(declared, archive.arrays)
    except ValueError as err:
        raise fail(f"its parameters do not fit method {method!r}: {err}") from None
    return Fitted(
        method=method,
        params=params,
        hyper=meta.get("hyper", {}),
        info=meta.get("info", {}),
    )


def load_scorer(path: str | os.PathLike) -> tuple[Fitted, Method]:
    """A saved model and its registered method, ready for ``score_words``.

    :func:`load` (which checks the parameters against the method's declaration),
    then :func:`get_method`, then the model's hyper-parameters are checked: every
    one the method has must be there with a valid value. The method's scoring is
    wrapped so that parameters that do not fit a method declaring none (a missing
    or misshapen array) raise a ``DataFormatError`` naming the file rather than an
    error from deep inside the method.

    Returns
    -------
    fitted : Fitted
    method : Method
        The registered method, its ``score_words`` wrapped as above.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    DataFormatError
        What :func:`load` raises, a method that is not registered (the message
        lists the valid names), a missing or invalid hyper-parameter.
    """
    fitted = load(path)
    try:
        method = get_method(fitted.method)
    except KeyError as err:
        raise DataFormatError(path, f"saved by an {err.args[0]}") from None
    for key in method.hyper:
        if key not in fitted.hyper:
            raise DataFormatError(
                path, f"lacks the {method.name} hyper-parameter {key!r}; {_REMEDY}"
            )
        try:
            check_hyper(method.name, key, fitted.hyper[key])
        except ValueError as err:
            raise DataFormatError(path, f"{err}; {_REMEDY}") from None
    if method.score_words is None:
        return fitted, method
    score_words = method.score_words

    def checked_score_words(fitted: Fitted, corpus):
        try:
            return score_words(fitted, corpus)
        except (KeyError, IndexError, TypeError) as err:
            what = f"no parameter {err}" if isinstance(err, KeyError) else str(err)
            raise DataFormatError(
                path,
                f"its parameters do not fit method {method.name!r} "
                f"({' '.join(what.split())[:160]}); {_REMEDY}",
            ) from None

    return fitted, dataclasses.replace(method, score_words=checked_score_words)
