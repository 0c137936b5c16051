"""Which module of :mod:`jaxannot.methods` registers which method, read off the
modules' source without importing them.

The families are the packages of :mod:`jaxannot.methods` and their modules are found
with :mod:`pkgutil`; each module's source is parsed (:mod:`ast`) for its registration
calls, whose method name is a string literal:

- ``register_words_method("knn", ...)``, ``Method(name="dwh", ...)`` or
  ``Method("x", ...)`` (any call of a function named ``register_words_method`` or
  ``Method``, plain or as an attribute);
- a call of a function of the same module that passes one of its own parameters on
  as the name of such a call, to any depth: with ``def _classifier(name, ...):
  register(Method(name=name, ...))``, the call ``_classifier("svm", ...)`` registers
  ``svm``.

The registrations are thus the single source of truth: a new module that registers a
method is found with no table to edit, and :func:`~jaxannot.annotators.get_method`
still imports the module of the method asked for alone. A name built at run time (an
f-string, a loop variable) is not found; ``tests/annotators/test_base.py`` imports
every module and checks the scan against what they register.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import pkgutil
from collections.abc import Sequence
from pathlib import Path

__all__ = ["METHODS_PACKAGE", "method_modules", "registered_names", "scan_methods"]

#: The package whose sub-packages are the method families.
METHODS_PACKAGE = "jaxannot.methods"

#: The registration functions: name -> (position, keyword) of the method's name.
_REGISTRARS: dict[str, tuple[int, str]] = {
    "register_words_method": (0, "name"),
    "Method": (0, "name"),
}


def _callee(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _name_argument(
    call: ast.Call, registrars: dict[str, tuple[int, str]]
) -> ast.expr | None:
    """The expression ``call`` passes as a method's name, when it is a registration."""
    where = registrars.get(_callee(call) or "")
    if where is None:
        return None
    position, keyword = where
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    positional = call.args[: position + 1]
    if len(positional) <= position or any(
        isinstance(arg, ast.Starred) for arg in positional
    ):
        return None
    return positional[position]


def registered_names(source: str) -> list[str]:
    """The names of the methods that module source ``source`` registers, in order.

    Parameters
    ----------
    source : str
        A module's Python source.

    Returns
    -------
    list of str
        The string literals passed as a method's name to a registration (see the
        module docstring), in the order they appear.
    """
    if not any(registrar in source for registrar in _REGISTRARS):
        return []  # no registration: not worth a parse
    tree = ast.parse(source)
    calls: list[ast.Call] = []  # every call of the module, walked once
    functions: dict[ast.FunctionDef, list[ast.Call]] = {}  # the calls of each function
    for statement in tree.body:
        inner = [node for node in ast.walk(statement) if isinstance(node, ast.Call)]
        calls += inner
        if isinstance(statement, ast.FunctionDef):
            functions[statement] = inner
    registrars = dict(_REGISTRARS)
    found = True
    while found:  # a helper of a helper: until no new one is found
        found = False
        for function, inner in functions.items():
            if function.name in registrars:
                continue
            params = [a.arg for a in function.args.posonlyargs + function.args.args]
            for call in inner:
                arg = _name_argument(call, registrars)
                if isinstance(arg, ast.Name) and arg.id in params:
                    registrars[function.name] = (params.index(arg.id), arg.id)
                    found = True
                    break
    return [
        arg.value
        for call in calls
        if isinstance(arg := _name_argument(call, registrars), ast.Constant)
        and isinstance(arg.value, str)
    ]


def scan_methods(roots: Sequence[str | Path]) -> dict[str, str]:
    """Method name -> ``"family.module"`` of every registration under ``roots``.

    Parameters
    ----------
    roots : sequence of str or Path
        The folders of a methods package (its ``__path__``); each package in them is
        a family, each of a family's modules is scanned (sub-packages of a family
        are not).

    Returns
    -------
    dict
        Every registered name and the module that registers it, sorted by name;
        ``ValueError`` when two registrations share a name.
    """
    found: dict[str, str] = {}
    for family in pkgutil.iter_modules([str(root) for root in roots]):
        if not family.ispkg:
            continue
        folder = Path(family.module_finder.path, family.name)
        for module in pkgutil.iter_modules([str(folder)]):
            path = folder / f"{module.name}.py"
            if module.ispkg or not path.is_file():
                continue
            where = f"{family.name}.{module.name}"
            for name in registered_names(path.read_text(encoding="utf-8")):
                if found.setdefault(name, where) != where:
                    raise ValueError(
                        f"method {name!r} is registered by {found[name]} and {where}"
                    )
    return dict(sorted(found.items()))


def method_modules() -> dict[str, str]:
    """Every method of the library and the module of :mod:`jaxannot.methods` that
    registers it (``"family.module"``), by name; scanned once per process.

    Returns
    -------
    dict
        Method name -> module under :data:`METHODS_PACKAGE` (the package itself is
        not imported).
    """
    return dict(_library_methods())


@functools.cache
def _library_methods() -> dict[str, str]:
    spec = importlib.util.find_spec(METHODS_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(f"no package {METHODS_PACKAGE}")
    return scan_methods(list(spec.submodule_search_locations))
