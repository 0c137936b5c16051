"""Typed one-line descriptions of the hyper-parameters of every registered method.

Every hyper-parameter a method registers (``Method.hyper``) has a :class:`HyperSpec`:
a one-line ``help`` (what it is, with the paper's symbol where there is one), its
``type`` and the values it accepts — a numeric range (``low`` / ``high``, each
inclusive or not) or, for strings, ``choices``. :func:`spec_for` finds the spec of a
``(method, name)`` pair: :data:`SPECIFIC` first (names whose meaning depends on the
method, e.g. ``alpha``, ``c``, ``gamma``, ``lam``, ``iterations``, ``tol``), then
:data:`SHARED` (names that mean the same wherever they appear).
:func:`jaxannot.annotators.parse_hyper` validates every value against its spec, and
``jaxannot methods`` prints them.

The tables are data, in ``hyper_specs.toml`` (read by :mod:`.hyper_tables`). The
ranges are those the fit functions accept (or, where they accept a degenerate value
silently, those that give a meaningful fit); a ``0`` that means "choose
automatically" is allowed and said so in the help. This module registers no method.

A fit function's keyword-only defaults are the method's defaults
(:func:`fit_defaults`, :func:`register_words_method`), and :func:`records_hyper`
writes the values of each call into its ``Fitted.hyper``, so a method lists its
hyper-parameters once, in its signature.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

from jaxannot.annotators._hyper_types import HyperSpec
from jaxannot.annotators.hyper_tables import SHARED, SPECIFIC

__all__ = [
    "HyperSpec",
    "SHARED",
    "SPECIFIC",
    "spec_for",
    "fit_defaults",
    "records_hyper",
    "register_words_method",
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


def fit_defaults(fit) -> dict:
    """The hyper-parameter defaults of a fit function: its keyword-only arguments with
    a default, ``rng_key`` aside, in signature order (a method's ``hyper``)."""
    return {
        name: p.default
        for name, p in inspect.signature(fit).parameters.items()
        if p.kind is p.KEYWORD_ONLY and p.default is not p.empty and name != "rng_key"
    }


def records_hyper(fit):
    """``fit`` whose ``Fitted.hyper`` holds the hyper-parameters of the call (those of
    :func:`fit_defaults`, given or defaulted), updated by what ``fit`` itself records
    (a value it resolved, e.g. ``"auto"``, or an extra entry)."""
    signature = inspect.signature(fit)
    names = tuple(fit_defaults(fit))

    @functools.wraps(fit)
    def wrapped(*args, **kwargs):
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        fitted = fit(*args, **kwargs)
        hyper = {name: call.arguments[name] for name in names}
        return dataclasses.replace(fitted, hyper={**hyper, **fitted.hyper})

    return wrapped


def register_words_method(name: str, fit, summary: str, *, hyper=None, **functions):
    """Register an annotation method (one that ``needs`` words).

    Parameters
    ----------
    name, fit, summary
        As in :class:`~jaxannot.annotators.base.Method`.
    hyper : dict, optional
        Its defaults; by default those of ``fit`` (:func:`fit_defaults`).
    **functions
        Its other protocol functions (``score_words``, ``score_fit_corpus``,
        ``embed``).

    Returns
    -------
    Method
        The registered method.
    """
    from jaxannot.annotators.base import Method, register  # base imports this module

    return register(
        Method(
            name=name,
            fit=fit,
            hyper=dict(fit_defaults(fit) if hyper is None else hyper),
            summary=summary,
            needs=("words",),
            **functions,
        )
    )
