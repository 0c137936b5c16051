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

The tables are data (read by :mod:`.hyper_tables`): the specs several methods share
in ``hyper_specs.toml``, a spec of one method alone in that method's entry of
``hyper_defaults.toml``, beside its default, so that each is declared once. The
ranges are those the fit functions accept (or, where they accept a degenerate value
silently, those that give a meaningful fit); a ``0`` that means "choose
automatically" is allowed and said so in the help. This module registers no method.

The defaults are data too, in ``hyper_defaults.toml``: a value and its origin
(cross-validation record, paper, solver setting, data rule, or untuned) per
``(method, name)`` (:func:`method_defaults`, :func:`default_of`). Every fit of the
library is declared by :func:`uses_defaults`: its signature lists the table's names
with the table's defaults (an unknown keyword is a ``TypeError`` naming it), a value
given to it is checked against its spec (:func:`check_hyper`) unless it comes from
:func:`jaxannot.annotators.parse_hyper`, which checked it
(:func:`jaxannot.annotators.hyper_values.fit_parsed`), and the values of each call
go into its ``Fitted.hyper``; so a default is written once and a value checked once.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

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
    "check_hyper",
    "checked_values",
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


def check_hyper(method: str, key: str, value: Any) -> None:
    """``ValueError`` unless ``value`` is valid for hyper-parameter ``key`` of
    ``method`` (a hyper-parameter without a spec is not checked).

    Parameters
    ----------
    method : str
        Method name.
    key : str
        Hyper-parameter name.
    value : object
        Its value, already parsed.
    """
    spec = spec_for(method, key)
    if spec is None:
        return
    problem = spec.problem(value)
    if problem is not None:
        raise ValueError(
            f"method {method!r}: hyper-parameter {key}={value!r} is invalid "
            f"({problem}); valid: {spec.valid()}"
        )


#: The method whose fit the current call hands values already checked
#: (:func:`checked_values`); ``None`` outside.
_CHECKED: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jaxannot_checked_values", default=None
)


@contextlib.contextmanager
def checked_values(method: str) -> Iterator[None]:
    """Within it, the fit of ``method`` (one declared by :func:`uses_defaults`) takes
    the values it is given as checked: for a caller that holds them from
    :func:`jaxannot.annotators.parse_hyper`
    (:func:`jaxannot.annotators.hyper_values.fit_parsed`), so that they are not
    checked twice. The fits that fit calls in turn check theirs.

    Parameters
    ----------
    method : str
        The method whose values were checked.
    """
    token = _CHECKED.set(method)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def uses_defaults(method: str, **fixed: Any) -> Callable[[Callable], Callable]:
    """Decorator: ``fit`` is the fit of ``method``, with the table's hyper-parameters.

    ``fit`` takes them in one of two ways (``TypeError`` at import otherwise):

    - by name: its keyword-only arguments other than ``rng_key`` are exactly the
      table's names (and those of ``fixed``), none with a default of its own;
    - as a whole: one keyword-only argument ``hyper``, a fresh ``dict`` of every
      value of the call (and of ``fixed``), for a fit that hands them on to
      helpers that also read a fitted model's ``Fitted.hyper``.

    The returned function has the table's names in its signature, keyword-only with
    the table's defaults (:func:`fit_defaults` reads them; ``fixed`` is not in it),
    so that an unknown keyword is a ``TypeError`` naming it. A call fills the values
    it leaves out from the table, checks those it gives against their specs
    (:func:`check_hyper`: ``ValueError``) unless they come checked
    (:func:`checked_values`), and its ``Fitted.hyper`` holds ``fixed`` and the values
    of the call, updated by what ``fit`` itself records (a value it resolved, e.g.
    ``"auto"``, or an extra entry).

    Parameters
    ----------
    method : str
        The method, with a table in ``hyper_defaults.toml``.
    **fixed
        Hyper-parameters ``fit`` takes that ``method`` holds at one value, outside
        its table (``sfss`` is ``sfsls`` at ``p = 1``).

    Returns
    -------
    callable
        The decorator.
    """
    defaults = method_defaults(method)
    if set(fixed) & set(defaults):
        raise TypeError(f"{method!r}: fixed {sorted(fixed)} are in its table")

    KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY

    def decorate(fit):
        keyword = _fit_keywords(fit, method, defaults, fixed)
        whole = set(keyword) == {"hyper"}
        signature = inspect.signature(fit)
        others = [p for n, p in signature.parameters.items() if n not in keyword]
        positional = [p.name for p in others if p.kind is not p.KEYWORD_ONLY]
        typed = {  # the fit's annotation, else the spec's type
            n: keyword[n].annotation
            if n in keyword
            else getattr(spec_for(method, n), "type", inspect.Parameter.empty)
            for n in defaults
        }
        signature = signature.replace(
            parameters=[
                *others,
                *(
                    inspect.Parameter(n, KEYWORD_ONLY, default=v, annotation=typed[n])
                    for n, v in defaults.items()
                ),
            ]
        )

        @functools.wraps(fit)
        def wrapped(*args, **kwargs):
            call = signature.bind(*args, **kwargs)
            if _CHECKED.get() != method:
                for name, value in call.arguments.items():
                    if name in defaults:
                        check_hyper(method, name, value)
            call.apply_defaults()
            values = call.arguments
            hyper = {**fixed, **{name: values[name] for name in defaults}}
            given = [values[n] for n in positional]
            rest = {p.name: values[p.name] for p in others if p.name not in positional}
            token = _CHECKED.set(None)  # the fits it calls check their own values
            try:
                if whole:
                    fitted = fit(*given, **rest, hyper=dict(hyper))
                else:
                    fitted = fit(*given, **rest, **hyper)
            finally:
                _CHECKED.reset(token)
            return dataclasses.replace(fitted, hyper={**hyper, **fitted.hyper})

        wrapped.__signature__ = signature
        return wrapped

    return decorate


def _fit_keywords(
    fit: Callable, method: str, defaults: dict, fixed: dict
) -> dict[str, inspect.Parameter]:
    """The keyword-only arguments of ``fit`` other than ``rng_key``, checked to be
    the table's names of ``method`` (and ``fixed``'s) or the one argument ``hyper``,
    none with a default of its own (:func:`uses_defaults`; ``TypeError``)."""
    keyword = {
        n: p
        for n, p in inspect.signature(fit).parameters.items()
        if p.kind is p.KEYWORD_ONLY and n != "rng_key"
    }
    whole = set(keyword) == {"hyper"}
    own = [n for n, p in keyword.items() if p.default is not p.empty]
    if (not whole and set(keyword) != set(defaults) | set(fixed)) or own:
        raise TypeError(
            f"{fit.__qualname__}: keyword-only arguments {sorted(keyword)} must be "
            f"the hyper_defaults.toml names of {method!r} {sorted(defaults)} "
            f"(and the fixed {sorted(fixed)}), or one argument 'hyper', "
            f"without defaults of their own (these have one: {own})"
        )
    return keyword
