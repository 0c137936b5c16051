"""A method's hyper-parameters once parsed and checked: :class:`Hyper`.

``--set key=value`` strings (or a mapping from Python) are parsed to the types of
the method's defaults and checked against their specs once, at the boundary that
receives them (:func:`jaxannot.annotators.parse_hyper`: the CLI, the sklearn
wrappers, a library call of :func:`jaxannot.evaluation.evaluate`). What comes out is
a :class:`Hyper`, read-only, which the later layers (evaluation, cross-validation,
the method's ``fit``) take as it is: ``parse_hyper`` returns a :class:`Hyper` of the
same method unchanged, without parsing or checking it again, and :func:`fit_parsed`
hands it to the method's fit, which checks the values it is given only when called
directly (:func:`jaxannot.annotators.hyper_spec.uses_defaults`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from jaxannot.annotators.hyper_spec import check_hyper, checked_values

if TYPE_CHECKING:
    from jaxannot.annotators.base import Fitted, Method
    from jaxannot.data.corpus import Corpus

__all__ = [
    "Checked",
    "Hyper",
    "check_hyper",
    "check_key",
    "fit_parsed",
    "parse_hyper",
    "parse_value",
]


class Described(Protocol):
    """What parsing needs of a method (a :class:`~jaxannot.annotators.Method`):
    its name and its hyper-parameters' defaults."""

    name: str
    hyper: Mapping[str, Any]


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


def parse_hyper(method: Described, assignments: list[str] | Mapping[str, Any]) -> Hyper:
    """Merge ``key=value`` strings (or a mapping) into the method's defaults: the one
    parse and check of a set of hyper-parameters.

    Values are parsed to the type of the default (bool, int, float, str); an unknown
    key raises ``KeyError`` listing the valid ones. Every merged value is then checked
    against its :class:`~jaxannot.annotators.hyper_spec.HyperSpec` (type, range,
    choices; :func:`~jaxannot.annotators.hyper_spec.spec_for`): ``ValueError`` names
    the method, the key, the value and the valid values.

    A :class:`Hyper` of ``method`` (what this
    returned before) is returned as it is, neither parsed nor checked again; one of
    another method is a ``ValueError``.
    """
    if isinstance(assignments, Hyper):
        if assignments.method != method.name:
            raise ValueError(
                f"hyper-parameters of method {assignments.method!r} given to "
                f"method {method.name!r}; parse them for {method.name!r}"
            )
        return assignments
    items = (
        list(assignments.items())
        if isinstance(assignments, Mapping)
        else [_split_assignment(a) for a in assignments]
    )
    given = {key: parse_value(method, key, value) for key, value in items}
    for key, value in method.hyper.items():
        if key not in given:
            check_hyper(method.name, key, value)
    return Hyper(method.name, {**method.hyper, **given}, given=given)


def parse_value(method: Described, key: str, value: Any) -> Any:
    """One value of hyper-parameter ``key`` of ``method``, parsed to the type of
    its default (a string; other values are taken as they are) and checked
    (:func:`check_hyper`).

    Raises
    ------
    KeyError
        ``method`` has no hyper-parameter ``key`` (the message lists the valid ones).
    ValueError
        The value does not parse or is invalid (the message gives the valid values).
    """
    check_key(method, key)
    value = _coerce(value, method.hyper[key], key)
    check_hyper(method.name, key, value)
    return value


def check_key(method: Described, key: str) -> None:
    """``KeyError`` listing the valid names unless ``method`` has a hyper-parameter
    ``key``."""
    if key not in method.hyper:
        valid = ", ".join(method.hyper) or "(none)"
        raise KeyError(
            f"method {method.name!r} has no hyper-parameter {key!r}; valid: {valid}"
        )


def fit_parsed(method: Method, corpus: Corpus, *, rng_key: Any, hyper: Hyper) -> Fitted:
    """``method.fit(corpus, rng_key=rng_key, **hyper)`` with values
    :func:`parse_hyper` made for ``method``, which its fit takes as they are
    (:func:`~jaxannot.annotators.hyper_spec.checked_values`): not checked again.

    Parameters
    ----------
    method : Method
        The registered method.
    corpus : Corpus
        What it learns from.
    rng_key : PRNGKey or None
        Its key.
    hyper : Hyper
        Its hyper-parameters, parsed for it (``ValueError`` for another method's;
        ``TypeError`` for values not parsed).

    Returns
    -------
    Fitted
        What the fit returns.
    """
    if not isinstance(hyper, Hyper):
        raise TypeError(
            f"fit_parsed takes a Hyper (jaxannot.annotators.parse_hyper), got "
            f"{type(hyper).__name__}"
        )
    parse_hyper(method, hyper)  # refuses another method's
    with checked_values(method.name):
        return method.fit(corpus, rng_key=rng_key, **hyper)


def _split_assignment(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise ValueError(f"--set expects key=value, got {text!r}")
    key, value = text.split("=", 1)
    return key.strip(), value.strip()


def _coerce(value: Any, default: Any, key: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        if isinstance(default, bool):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
    except ValueError:
        raise ValueError(
            f"hyper-parameter {key!r} expects {type(default).__name__}, got {value!r}"
        ) from None
    if default is None:
        for cast in (int, float):
            try:
                return cast(value)
            except ValueError:
                pass
    return value
