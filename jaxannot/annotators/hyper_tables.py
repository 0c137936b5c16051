"""The hyper-parameter specs and defaults of every registered method, read from
``hyper_specs.toml`` and ``hyper_defaults.toml``.

The specs are data: ``hyper_specs.toml`` next to this module describes each name
once (its header says how). :data:`SHARED` holds the names that mean the same
wherever they appear; :data:`SPECIFIC` the ``(method, name)`` pairs whose meaning
depends on the method. :data:`DEFAULTS` holds every method's defaults and where each
comes from (``hyper_defaults.toml``: a value and an origin per ``(method, name)``).
A malformed entry fails at import with the file and the entry named, so a broken
table never reaches a user.
"""

from __future__ import annotations

import tomllib
from importlib import resources

from jaxannot.annotators._hyper_types import Default, HyperSpec

__all__ = ["SHARED", "SPECIFIC", "DEFAULTS", "load_tables", "load_defaults"]

_FILE = "hyper_specs.toml"
_DEFAULTS_FILE = "hyper_defaults.toml"
_DEFAULT_KEYS = {
    "value",
    "origin",
    "record",
    "record_method",
    "note",
    "rule",
    "requires",
}
_TYPES = {"bool": bool, "int": int, "float": float, "str": str}
_KEYS = {"help", "type", "ge", "gt", "le", "lt", "choices", "comma_list"}
_INT_CEILING = 2**31 - 1  # the largest int32: jax's integers without x64


def _spec(entry: dict, where: str) -> HyperSpec:
    """One :class:`HyperSpec` from its TOML table (``where`` names it in errors)."""
    unknown = set(entry) - _KEYS
    if unknown or entry.get("type") not in _TYPES or "help" not in entry:
        raise ValueError(
            f"{_FILE}: {where}: needs `help` and a `type` in {sorted(_TYPES)}, "
            f"may have {sorted(_KEYS - {'help', 'type'})}; got {sorted(entry)}"
        )
    if ("ge" in entry and "gt" in entry) or ("le" in entry and "lt" in entry):
        raise ValueError(f"{_FILE}: {where}: two lower or two upper bounds")
    high = entry.get("lt", entry.get("le"))
    if entry["type"] == "int" and (high is None or high > _INT_CEILING):
        raise ValueError(
            f"{_FILE}: {where}: an int needs an upper bound `le` (or `lt`) of at most "
            f"{_INT_CEILING}: past it jax's 32-bit integers overflow; got {high}"
        )
    choices = entry.get("choices")
    try:
        return HyperSpec(
            entry["help"],
            _TYPES[entry["type"]],
            low=entry.get("gt", entry.get("ge")),
            high=entry.get("lt", entry.get("le")),
            low_inclusive="gt" not in entry,
            high_inclusive="lt" not in entry,
            choices=None if choices is None else tuple(choices),
            comma_list=bool(entry.get("comma_list", False)),
        )
    except ValueError as err:
        raise ValueError(f"{_FILE}: {where}: {err}") from None


def load_tables(
    text: str,
) -> tuple[dict[str, HyperSpec], dict[tuple[str, str], HyperSpec]]:
    """Parse the spec tables from the text of a ``hyper_specs.toml``.

    Returns
    -------
    shared : dict
        ``name -> HyperSpec``.
    specific : dict
        ``(method, name) -> HyperSpec``; a pair described twice is a ``ValueError``.
    """
    data = tomllib.loads(text)
    shared = {
        name: _spec(entry, f"[shared.{name}]")
        for name, entry in data.get("shared", {}).items()
    }
    specific: dict[tuple[str, str], HyperSpec] = {}
    for i, group in enumerate(data.get("method_group", [])):
        for name, entry in group.get("params", {}).items():
            where = f"method_group {i + 1} ({group.get('methods')}), {name}"
            spec = _spec(entry, where)
            for method in group.get("methods", ()):
                if (method, name) in specific:
                    raise ValueError(
                        f"{_FILE}: hyper-parameter {(method, name)} is described twice"
                    )
                specific[method, name] = spec
    return shared, specific


def load_defaults(text: str) -> dict[str, dict[str, Default]]:
    """Parse the defaults from the text of a ``hyper_defaults.toml``.

    Returns
    -------
    dict
        ``method -> {name -> Default}``, in the file's order.
    """
    out: dict[str, dict[str, Default]] = {}
    for method, table in tomllib.loads(text).items():
        out[method] = {}
        for name, entry in table.items():
            where = f"{_DEFAULTS_FILE}: [{method}] {name}"
            if not isinstance(entry, dict) or not {"value", "origin"} <= set(entry):
                raise ValueError(f"{where}: needs a table with `value` and `origin`")
            if set(entry) - _DEFAULT_KEYS:
                raise ValueError(
                    f"{where}: unknown keys {sorted(set(entry) - _DEFAULT_KEYS)}; "
                    f"valid: {sorted(_DEFAULT_KEYS)}"
                )
            requires = entry.get("requires", {})
            if not isinstance(requires, dict):
                raise ValueError(f"{where}: `requires` is a table of settings")
            try:
                out[method][name] = Default(
                    **{**entry, "requires": tuple(requires.items())}
                )
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
    return out


def _read(name: str) -> str:
    return resources.files("jaxannot.annotators").joinpath(name).read_text("utf-8")


#: Names that mean the same in every method that has them (unless :data:`SPECIFIC`
#: describes them for a method); and the ``(method, name)`` specs, which override them.
SHARED, SPECIFIC = load_tables(_read(_FILE))

#: Every method's defaults: ``method -> {name -> Default}``.
DEFAULTS = load_defaults(_read(_DEFAULTS_FILE))
