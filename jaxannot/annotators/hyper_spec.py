"""Typed one-line descriptions of the hyper-parameters of every registered method.

Every hyper-parameter a method registers (``Method.hyper``) has a :class:`HyperSpec`:
a one-line ``help`` (what it is, with the paper's symbol where there is one), its
``type`` and the values it accepts — a numeric range (``low`` / ``high``, each
inclusive or not; every int has an upper bound, so that a huge value is refused
naming it instead of overflowing inside jax) or, for strings, ``choices``.
:func:`spec_for` finds the spec of a ``(method, name)`` pair: :data:`SPECIFIC`
first (names whose meaning depends on the method, e.g. ``alpha``, ``c``,
``gamma``, ``lam``, ``iterations``, ``tol``), then :data:`SHARED` (names that mean
the same wherever they appear).
:func:`jaxannot.annotators.parse_hyper` validates every value against its spec, and
``jaxannot methods`` prints them.

The tables are data, in ``hyper_specs.toml`` (read by :mod:`.hyper_tables`). The
ranges are those the fit functions accept (or, where they accept a degenerate value
silently, those that give a meaningful fit); a ``0`` that means "choose
automatically" is allowed and said so in the help. This module registers no method.

The defaults are data too, in ``hyper_defaults.toml``: a value and its origin
(cross-validation record, paper, solver setting, data rule, or untuned) per
``(method, name)`` (:func:`method_defaults`, :func:`default_of`). A fit function
lists its hyper-parameters as keyword-only arguments without defaults and takes them
from the table through :func:`uses_defaults`, which also writes the values of each
call into its ``Fitted.hyper``; so a default is written once.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable

from jaxannot.annotators._hyper_types import ORIGINS, RULES, Default, HyperSpec
from jaxannot.annotators.hyper_tables import DEFAULTS, SHARED, SPECIFIC

__all__ = [
    "HyperSpec",
    "Default",
    "ORIGINS",
    "RULES",
    "SHARED",
    "SPECIFIC",
    "DEFAULTS",
    "spec_for",
    "method_defaults",
    "default_of",
    "fit_defaults",
    "uses_defaults",
]


def spec_for(method: str, name: str) -> HyperSpec | None:
    """The spec of hyper-parameter ``name`` of method ``method`` (``None`` if none).

    Parameters
    ----------
    method : str
        Registered method name.
    name : str
        Hyper-parameter name.

    Returns
    -------
    HyperSpec or None
        :data:`SPECIFIC` ``[(method, name)]``, else :data:`SHARED` ``[name]``.
    """
    spec = SPECIFIC.get((method, name))
    return spec if spec is not None else SHARED.get(name)


def method_defaults(method: str) -> dict:
    """The defaults of ``method`` (``hyper_defaults.toml``), in the table's order;
    ``KeyError`` when the table has no entry for it."""
    if method not in DEFAULTS:
        raise KeyError(f"hyper_defaults.toml has no table [{method}]")
    return {name: d.value for name, d in DEFAULTS[method].items()}


def default_of(method: str, name: str) -> Default:
    """The :class:`Default` (value and origin) of hyper-parameter ``name`` of
    ``method``."""
    return DEFAULTS[method][name]


def fit_defaults(fit: Callable) -> dict:
    """The hyper-parameter defaults of a fit function: its keyword-only arguments with
    a default, ``rng_key`` aside, in signature order."""
    return {
        name: p.default
        for name, p in inspect.signature(fit).parameters.items()
        if p.kind is p.KEYWORD_ONLY and p.default is not p.empty and name != "rng_key"
    }


def uses_defaults(method: str) -> Callable[[Callable], Callable]:
    """Decorator: ``fit`` takes the defaults of ``method`` from the table.

    ``fit``'s keyword-only arguments other than ``rng_key`` must be exactly the
    table's names, none with a default of its own (``TypeError`` at import
    otherwise). The returned function has the table's defaults in its signature
    (:func:`fit_defaults` reads them), fills the ones a call leaves out, and its
    ``Fitted.hyper`` holds the values of the call, updated by what ``fit`` itself
    records (a value it resolved, e.g. ``"auto"``, or an extra entry).
    """
    defaults = method_defaults(method)

    def decorate(fit):
        signature = inspect.signature(fit)
        keyword = {
            n: p
            for n, p in signature.parameters.items()
            if p.kind is p.KEYWORD_ONLY and n != "rng_key"
        }
        own = [n for n, p in keyword.items() if p.default is not p.empty]
        if set(keyword) != set(defaults) or own:
            raise TypeError(
                f"{fit.__qualname__}: keyword-only arguments {sorted(keyword)} must be "
                f"the hyper_defaults.toml names of {method!r} {sorted(defaults)}, "
                f"without defaults of their own (these have one: {own})"
            )
        signature = signature.replace(
            parameters=[
                p.replace(default=defaults[n]) if n in defaults else p
                for n, p in signature.parameters.items()
            ]
        )

        @functools.wraps(fit)
        def wrapped(*args, **kwargs):
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            fitted = fit(*call.args, **call.kwargs)
            hyper = {name: call.arguments[name] for name in defaults}
            return dataclasses.replace(fitted, hyper={**hyper, **fitted.hyper})

        wrapped.__signature__ = signature
        return wrapped

    return decorate
