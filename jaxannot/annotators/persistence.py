"""Saving and loading fitted models.

:func:`save` writes the arrays by their ``/``-joined field paths (``log_betas/0``,
``latent/alpha``, ``bin_edges/features``) through ``_asdict()``; :func:`load` rebuilds
the method's params NamedTuple from them and checks every array against the
declaration its field annotations make (:mod:`jaxannot.annotators.typed_params`)
and for NaN / infinite values, naming the file and the field of the first that does
not fit. A model saved before parameters were NamedTuples has the same paths and
loads unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping

import numpy as np

from jaxannot.annotators.base import Fitted, Method, get_method
from jaxannot.annotators.hyper_values import check_hyper
from jaxannot.annotators.typed_params import (
    DictOf,
    MethodParams,
    TupleOf,
    declared_params,
    flatten_params,
    params_from_arrays,
    spec_of,
)
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
    "spec_of",
]

_FORMAT_VERSION = 1
_REMEDY = "save the model again (jaxannot evaluate ... --save)"


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
    array checked against the declaration its annotations make
    (:mod:`~jaxannot.annotators.typed_params`); those of a method that is not
    registered or declares none as nested dicts.

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
    declared = declared_params(method)
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
