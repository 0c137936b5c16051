"""The hyper-parameter specs of every registered method, read from ``hyper_specs.toml``.

The specs are data: ``hyper_specs.toml`` next to this module describes each name
once (its header says how). :data:`SHARED` holds the names that mean the same
wherever they appear; :data:`SPECIFIC` the ``(method, name)`` pairs whose meaning
depends on the method. A malformed entry fails at import with the file and the entry
named, so a broken table never reaches a user.
"""

from __future__ import annotations

import tomllib
from importlib import resources

from jaxannot.annotators._hyper_types import HyperSpec

__all__ = ["SHARED", "SPECIFIC", "load_tables"]

_FILE = "hyper_specs.toml"
_TYPES = {"bool": bool, "int": int, "float": float, "str": str}
_KEYS = {"help", "type", "ge", "gt", "le", "lt", "choices", "comma_list"}


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


#: Names that mean the same in every method that has them (unless :data:`SPECIFIC`
#: describes them for a method); and the ``(method, name)`` specs, which override them.
SHARED, SPECIFIC = load_tables(
    resources.files("jaxannot.annotators").joinpath(_FILE).read_text(encoding="utf-8")
)
