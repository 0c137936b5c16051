"""The space of a hyper-parameter search (:func:`jaxannot.tuning.search`): numeric
ranges and lists of values, parsed and checked against the method's specs once,
before any fit (:func:`parse_space`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jaxannot.annotators.base import Method, get_method
from jaxannot.annotators.hyper_spec import spec_for
from jaxannot.annotators.hyper_values import Checked, check_hyper, check_key
from jaxannot.tuning.grid import parse_grid

__all__ = ["Range", "Space", "parse_space"]

_FLAG = "--space"
_FORMS = "KEY=LO:HI, KEY=LO:HI:log or KEY=V1,V2,..."


@dataclasses.dataclass(frozen=True)
class Range:
    """A numeric range to sample from, ``low`` and ``high`` both included.

    Parameters
    ----------
    low, high : int or float
        The bounds, ``low < high``; their type (that of the hyper-parameter's
        spec) decides whether integers or reals are drawn.
    log : bool
        Draw on a log scale (uniform in ``log x``; needs ``low > 0``): for a scale
        parameter such as a cost ``c`` or a step size.
    """

    low: int | float
    high: int | float
    log: bool = False

    def as_json(self) -> dict[str, Any]:
        kind = "int" if isinstance(self.low, int) else "float"
        return {"low": self.low, "high": self.high, "log": self.log, "type": kind}


class Space(Checked):
    """What a search draws from, ``{key: Range or [typed values]}``, parsed and
    checked once by :func:`parse_space` (read-only)."""

    __slots__ = ()

    def as_json(self) -> dict[str, Any]:
        """Each range as ``{"low", "high", "log", "type"}``, each list as it is."""
        return {
            k: v.as_json() if isinstance(v, Range) else list(v) for k, v in self.items()
        }


def parse_space(
    method: str | Method, specs: Sequence[str] | Mapping[str, Range | Sequence[Any]]
) -> Space:
    """Parse ``--space`` strings (or a mapping) into a checked :class:`Space`.

    Parameters
    ----------
    method : str or Method
        Decides the valid keys, the types and the valid values (its hyper specs,
        ``jaxannot methods``).
    specs : list of str, mapping or Space
        ``"KEY=LO:HI"`` (a range of the hyper-parameter's type, int or float),
        ``"KEY=LO:HI:log"`` (the same on a log scale, e.g. ``"c=1e-4:10:log"``) or
        ``"KEY=V1,V2,..."`` (values, parsed like ``--grid``:
        :func:`~jaxannot.tuning.parse_grid`); a mapping gives a :class:`Range` or a
        list of values per key. A :class:`Space` of ``method`` is returned as it is.

    Returns
    -------
    Space
        In the order given.

    Raises
    ------
    KeyError
        An unknown hyper-parameter (the message lists the valid ones).
    ValueError
        A malformed spec, a key given twice, a range of a non-numeric
        hyper-parameter, ``LO >= HI``, a bound outside the hyper-parameter's valid
        values, a log range with ``LO <= 0``; the message names the key and the
        valid values.
    """
    if isinstance(method, str):
        method = get_method(method)
    if isinstance(specs, Space) and specs.method == method.name:
        return specs
    items = list(specs.items()) if isinstance(specs, Mapping) else _split(specs)
    if not items:
        raise ValueError(f"{_FLAG} is empty: give at least one {_FORMS}")
    space: dict[str, Any] = {}
    for key, value in items:
        check_key(method, key)
        if key in space:
            raise ValueError(f"{_FLAG} {key} is given twice; give it once")
        space[key] = _parse_entry(method, key, value)
    return Space(method.name, space)


def _split(specs: Sequence[str]) -> list[tuple[str, str]]:
    """``KEY=TEXT`` strings as ``(key, text)``."""
    items = []
    for text in specs:
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{_FLAG} expects {_FORMS}, got {text!r}")
        items.append((key.strip(), value.strip()))
    return items


def _parse_entry(method: Method, key: str, value: Any) -> Range | list:
    """One key's range or list of values, checked."""
    if isinstance(value, Range):
        return _check_range(method, key, value)
    if isinstance(value, str) and ":" in value:
        return _check_range(method, key, _parse_range(method, key, value))
    if isinstance(value, str):  # "v1,v2": parsed as --grid parses it
        return parse_grid(method, [f"{key}={value}"], flag=_FLAG)[key]
    return parse_grid(method, {key: list(value)}, flag=_FLAG)[key]


def _range_type(method: Method, key: str) -> type:
    """int or float: the type of ``key``'s spec (of its default when it has none);
    ``ValueError`` for another type."""
    spec = spec_for(method.name, key)
    kind = spec.type if spec is not None else type(method.hyper[key])
    if kind not in (int, float):
        valid = spec.valid() if spec is not None else kind.__name__
        raise ValueError(
            f"{_FLAG} {key}: a range LO:HI needs an int or float hyper-parameter; "
            f"{key} is {valid}: list its values as {key}=V1,V2"
        )
    return kind


def _parse_range(method: Method, key: str, text: str) -> Range:
    """``LO:HI`` or ``LO:HI:log`` as a :class:`Range` of ``key``'s type."""
    parts = [p.strip() for p in text.split(":")]
    log = len(parts) == 3 and parts[2] == "log"
    if len(parts) not in (2, 3) or (len(parts) == 3 and not log):
        raise ValueError(
            f"{_FLAG} {key}={text}: a range is LO:HI or LO:HI:log (a log scale)"
        )
    kind = _range_type(method, key)
    bounds = []
    for part in parts[:2]:
        try:
            bounds.append(kind(part))
        except ValueError:
            raise ValueError(
                f"{_FLAG} {key}={text}: bound {part!r} is not an {kind.__name__}"
                if kind is int
                else f"{_FLAG} {key}={text}: bound {part!r} is not a float"
            ) from None
    return Range(bounds[0], bounds[1], log)


def _check_range(method: Method, key: str, rng: Range) -> Range:
    """``rng`` with bounds of ``key``'s type, each valid for ``key``, ``low < high``
    and ``low > 0`` on a log scale; ``ValueError`` naming the key and the valid
    values otherwise."""
    kind = _range_type(method, key)
    low, high = rng.low, rng.high
    if kind is float:  # an int bound of a float hyper-parameter
        low, high = float(low), float(high)
    where = f"{_FLAG} {key}={low}:{high}{':log' if rng.log else ''}"
    for bound in (low, high):
        try:
            check_hyper(method.name, key, bound)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if not isinstance(bound, kind) or isinstance(bound, bool):
            raise ValueError(f"{where}: bound {bound!r} is not an {kind.__name__}")
    if not low < high:
        raise ValueError(
            f"{where}: LO must be below HI (for a single value, give {key}=V)"
        )
    if rng.log and low <= 0:
        raise ValueError(f"{where}: a log scale needs LO > 0, got {low}")
    return Range(low, high, rng.log)
