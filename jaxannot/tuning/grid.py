"""The settings of a cross-validation: a grid of hyper-parameter values and the
values held fixed, each parsed and checked once (:class:`Grid`,
:class:`~jaxannot.annotators.Hyper`)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from jaxannot.annotators.base import Method, get_method
from jaxannot.annotators.hyper_spec import spec_for
from jaxannot.annotators.hyper_values import Checked, Hyper, parse_hyper, parse_value

__all__ = ["Grid", "parse_grid", "resolve_fixed"]


class Grid(Checked):
    """Values of hyper-parameters to try, ``{key: [typed values]}``, parsed and
    checked once by :func:`parse_grid` (read-only); every combination of them is a
    setting (:meth:`settings`)."""

    __slots__ = ()

    def settings(self, fixed: Hyper) -> list[Hyper]:
        """Every combination of the grid's values (Cartesian product, in order) over
        ``fixed``, as the method's checked hyper-parameters (nothing is parsed
        again: the grid's values and ``fixed`` are checked already)."""
        if fixed.method != self.method:
            raise ValueError(
                f"fixed hyper-parameters of {fixed.method!r} for a grid of "
                f"{self.method!r}"
            )
        keys = list(self)
        combos = itertools.product(*self.values())
        return [
            Hyper(self.method, {**fixed, **dict(zip(keys, combo, strict=True))},
                  given=(*fixed.given, *keys))
            for combo in combos
        ]  # fmt: skip


def _grid_items(
    method: Method, specs: Sequence[str], flag: str
) -> list[tuple[str, list]]:
    """``--grid key=v1,v2`` strings as ``(key, [value strings])``."""
    items = []
    for text in specs:
        if "=" not in text:
            raise ValueError(f"{flag} expects key=v1,v2,..., got {text!r}")
        key, values = text.split("=", 1)
        key = key.strip()
        if not key:
            raise ValueError(f"{flag} {text!r} has no hyper-parameter name")
        spec = spec_for(method.name, key)
        values = [v.strip() for v in values.split(",")]
        if spec is not None and spec.comma_list:  # a list value: a+b means "a,b"
            values = [v.replace("+", ",") for v in values]
        items.append((key, values))
    return items


def parse_grid(
    method: str | Method,
    specs: Sequence[str] | Mapping[str, Sequence[Any]],
    flag: str = "--grid",
) -> Grid:
    """Parse ``--grid key=v1,v2`` strings (or a mapping) into typed value lists.

    Parameters
    ----------
    method : str or Method
        Decides the valid keys and the value types (those of its defaults, as
        :func:`~jaxannot.annotators.parse_hyper` parses ``--set``).
    specs : list of ``"key=v1,v2,..."``, mapping ``{key: [values]}`` or Grid
        A value of a comma-list hyper-parameter (tagprop's ``distances``) joins
        its items with ``+``: ``distances=cosine,cosine+idf`` is two settings. A
        :class:`Grid` of ``method`` is returned as it is (parsed already).
    flag : str
        The option the messages name (``--space`` parses its lists of values here).

    Returns
    -------
    Grid
        ``{key: [typed values]}`` in the order given, each value checked once.

    Raises
    ------
    ValueError
        A spec without ``=``, an empty value, a key given twice, a value listed twice.
    KeyError
        An unknown hyper-parameter (the message lists the valid ones).
    """
    if isinstance(method, str):
        method = get_method(method)
    if isinstance(specs, Grid) and specs.method == method.name:
        return specs
    if isinstance(specs, Mapping):
        items = [(k, list(v)) for k, v in specs.items()]
    else:
        items = _grid_items(method, specs, flag)
    grid: dict[str, list] = {}
    for key, values in items:
        if key in grid:
            raise ValueError(f"{flag} {key} is given twice; list its values once")
        if not values or any(isinstance(v, str) and not v for v in values):
            raise ValueError(f"{flag} {key} has an empty value (expected {key}=v1,v2)")
        typed = [parse_value(method, key, v) for v in values]
        for i, v in enumerate(typed):
            if v in typed[:i]:
                raise ValueError(f"{flag} {key} lists the value {v!r} twice")
        grid[key] = typed
    return Grid(method.name, grid)


def resolve_fixed(
    method: str | Method,
    grid: Mapping[str, Any],
    fixed: Hyper | Mapping[str, Any] | Sequence[str] | None,
    flag: str = "--grid",
) -> Hyper:
    """The method's hyper-parameters with the fixed ones (``--set``) parsed to their
    types (:func:`~jaxannot.annotators.parse_hyper`; a :class:`Hyper` is taken as
    it is): its ``given`` are the fixed keys, in the order given. ``ValueError``
    when one of them is also a key of ``grid`` (the option ``flag``: ``--grid``
    or ``--space``)."""
    if isinstance(method, str):
        method = get_method(method)
    hyper = parse_hyper(method, fixed if fixed is not None else [])
    both = [k for k in hyper.given if k in grid]
    if both:
        raise ValueError(
            f"hyper-parameter {both[0]!r} is both in {flag} and --set; give it once"
        )
    return hyper
