"""User-facing methods behind one protocol (see :mod:`jaxannot.annotators.base`).

The library's methods are found by scanning :mod:`jaxannot.methods`
(:func:`~jaxannot.annotators.discovery.method_modules`); :func:`get_method` imports
the module of the one asked for, :func:`available_methods` all of them.
"""

from jaxannot.annotators.base import (
    Fitted,
    Method,
    available_methods,
    get_method,
    register,
)
from jaxannot.annotators.hyper_values import Hyper, parse_hyper
from jaxannot.annotators.persistence import load, save

__all__ = [
    "Fitted",
    "Hyper",
    "Method",
    "available_methods",
    "get_method",
    "load",
    "parse_hyper",
    "register",
    "save",
]
