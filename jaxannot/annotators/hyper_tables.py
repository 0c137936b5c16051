"""The hyper-parameter specs and defaults of every registered method, read from
``hyper_specs.toml`` and ``hyper_defaults.toml``.

The specs are data. ``hyper_specs.toml`` next to this module holds those several
methods share (its header says how): :data:`SHARED`, the names that mean the same
wherever they appear, and the method groups, names whose meaning is the same in the
two or more methods a group lists. ``hyper_defaults.toml`` holds every method's
defaults and where each comes from (a value and an origin per ``(method, name)``:
:data:`DEFAULTS`) and, in the same entry, the spec of a name of that method alone.
:data:`SPECIFIC` joins the ``(method, name)`` specs of both files; a pair described
in both fails. A malformed entry fails at import with the file and the entry named,
so a broken table never reaches a user.
"""

from __future__ import annotations

import tomllib
from importlib import resources

from jaxannot.annotators._hyper_types import Default, HyperSpec

__all__ = [
    "SHARED",
    "SPECIFIC",
    "DEFAULTS",
    "load_tables",
    "load_declarations",
    "load_defaults",
    "merged_specs",
]

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


def _spec(entry: dict, where: str, file: str = _FILE) -> HyperSpec:
    """One :class:`HyperSpec` from its TOML table (``file`` and ``where`` name it in
    errors)."""
    where = f"{file}: {where}"
    unknown = set(entry) - _KEYS
    if unknown or entry.get("type") not in _TYPES or "help" not in entry:
        raise ValueError(
            f"{where}: needs `help` and a `type` in {sorted(_TYPES)}, "
            f"may have {sorted(_KEYS - {'help', 'type'})}; got {sorted(entry)}"
        )
    if ("ge" in entry and "gt" in entry) or ("le" in entry and "lt" in entry):
        raise ValueError(f"{where}: two lower or two upper bounds")
    high = entry.get("lt", entry.get("le"))
    if entry["type"] == "int" and (high is None or high > _INT_CEILING):
        raise ValueError(
            f"{where}: an int needs an upper bound `le` (or `lt`) of at most "
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
        raise ValueError(f"{where}: {err}") from None


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


def load_declarations(
    text: str,
) -> tuple[dict[str, dict[str, Default]], dict[tuple[str, str], HyperSpec]]:
    """Parse the declarations of a ``hyper_defaults.toml``: every method's defaults
    and the specs its entries carry (``help``, ``type`` and a range or choices, as
    in ``hyper_specs.toml``, beside ``value`` and ``origin``).

    Returns
    -------
    defaults : dict
        ``method -> {name -> Default}``, in the file's order.
    specs : dict
        ``(method, name) -> HyperSpec`` of the entries that carry one.
    """
    out: dict[str, dict[str, Default]] = {}
    specs: dict[tuple[str, str], HyperSpec] = {}
    for method, table in tomllib.loads(text).items():
        out[method] = {}
        for name, entry in table.items():
            where = f"{_DEFAULTS_FILE}: [{method}] {name}"
            if not isinstance(entry, dict) or not {"value", "origin"} <= set(entry):
                raise ValueError(f"{where}: needs a table with `value` and `origin`")
            unknown = set(entry) - _DEFAULT_KEYS - _KEYS
            if unknown:
                raise ValueError(
                    f"{where}: unknown keys {sorted(unknown)}; valid: "
                    f"{sorted(_DEFAULT_KEYS)} and a spec's {sorted(_KEYS)}"
                )
            spec = {k: v for k, v in entry.items() if k in _KEYS}
            if spec:
                specs[method, name] = _spec(spec, f"[{method}] {name}", _DEFAULTS_FILE)
            default = {k: v for k, v in entry.items() if k in _DEFAULT_KEYS}
            requires = default.get("requires", {})
            if not isinstance(requires, dict):
                raise ValueError(f"{where}: `requires` is a table of settings")
            try:
                out[method][name] = Default(
                    **{**default, "requires": tuple(requires.items())}
                )
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
    return out, specs


def load_defaults(text: str) -> dict[str, dict[str, Default]]:
    """The defaults of a ``hyper_defaults.toml`` (:func:`load_declarations`).

    Returns
    -------
    dict
        ``method -> {name -> Default}``, in the file's order.
    """
    return load_declarations(text)[0]


def merged_specs(
    groups: dict[tuple[str, str], HyperSpec], inline: dict[tuple[str, str], HyperSpec]
) -> dict[tuple[str, str], HyperSpec]:
    """The ``(method, name)`` specs of ``hyper_specs.toml``'s method groups and of
    ``hyper_defaults.toml``'s entries; a pair described in both is a ``ValueError``.

    Returns
    -------
    dict
        ``(method, name) -> HyperSpec``.
    """
    twice = sorted(set(groups) & set(inline))
    if twice:
        raise ValueError(
            f"{_FILE} and {_DEFAULTS_FILE} both describe {twice}: keep one spec"
        )
    return {**groups, **inline}


def _read(name: str) -> str:
    return resources.files("jaxannot.annotators").joinpath(name).read_text("utf-8")


#: Every method's defaults, ``method -> {name -> Default}``, and the specs its
#: entries carry.
DEFAULTS, _INLINE = load_declarations(_read(_DEFAULTS_FILE))

#: Names that mean the same in every method that has them (unless :data:`SPECIFIC`
#: describes them for a method); and the ``(method, name)`` specs (the method groups
#: of ``hyper_specs.toml`` and the entries of ``hyper_defaults.toml``), which
#: override them.
SHARED, _GROUPS = load_tables(_read(_FILE))
SPECIFIC = merged_specs(_GROUPS, _INLINE)
