"""User-facing methods behind one protocol (see :mod:`jaxannot.annotators.base`).

Every module of this package registers its methods on import; :func:`available_methods`
imports them all.
"""

from jaxannot.annotators.base import (
    Fitted,
    Method,
    available_methods,
    get_method,
    load,
    parse_hyper,
    register,
    save,
)

__all__ = [
    "Fitted",
    "Method",
    "available_methods",
    "get_method",
    "load",
    "parse_hyper",
    "register",
    "save",
]
