"""A method's hyper-parameters once parsed and checked: :class:`Hyper`.

``--set key=value`` strings (or a mapping from Python) are parsed to the types of
the method's defaults and checked against their specs once, at the boundary that
receives them (:func:`jaxannot.annotators.parse_hyper`: the CLI, the sklearn
wrappers, a library call of :func:`jaxannot.evaluation.evaluate`). What comes out is
a :class:`Hyper`, read-only, which the later layers (evaluation, cross-validation,
the method's ``fit``) take as it is: ``parse_hyper`` returns a :class:`Hyper` of the
same method unchanged, without parsing or checking it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

__all__ = ["Checked", "Hyper"]


class Checked(dict):
    """A read-only ``dict`` of values parsed and checked for one method (so
    ``json.dumps`` and ``fit(**values)`` take it as a dict); the base of
    :class:`Hyper` and of :class:`jaxannot.tuning.Grid`.

    Parameters
    ----------
    method : str
        The method the values belong to.
    values : mapping
        The values, already parsed to their types and checked (making one directly
        vouches for them).
    """

    __slots__ = ("method",)

    def __init__(self, method: str, values: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.method = method

    def _read_only(self, *args, **kwargs) -> NoReturn:
        raise TypeError(
            f"the hyper-parameters of {self.method!r} are read-only once checked; "
            "parse a new set with jaxannot.annotators.parse_hyper(method, {...})"
        )

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):
        return (type(self), (self.method, dict(self)))


class Hyper(Checked):
    """The hyper-parameters of one method, parsed and checked: every one of the
    method's, with its value (:func:`jaxannot.annotators.parse_hyper` makes them).

    Parameters
    ----------
    method : str
        The method they belong to.
    values : mapping
        Every hyper-parameter of the method with its checked value.
    given : iterable of str
        The keys that were given rather than defaulted (``--set``), in the order
        given.

    Notes
    -----
    ``dict(hyper)`` and ``{**hyper, ...}`` are ordinary, mutable copies; they are
    parsed again if they are handed to ``parse_hyper``.
    """

    __slots__ = ("given",)

    def __init__(
        self, method: str, values: Mapping[str, Any], given: Iterable[str] = ()
    ) -> None:
        super().__init__(method, values)
        self.given = tuple(given)

    def __reduce__(self):
        return (Hyper, (self.method, dict(self), self.given))
