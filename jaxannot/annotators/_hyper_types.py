"""The :class:`HyperSpec` type: what a hyper-parameter is and which values it takes."""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

__all__ = ["HyperSpec", "Default", "ORIGINS", "RULES"]


@dataclasses.dataclass(frozen=True)
class HyperSpec:
    """What one hyper-parameter is and which values it accepts.

    Parameters
    ----------
    help : str
        One line: what the value is, with the paper's symbol where there is one.
    type : type
        ``bool``, ``int``, ``float`` or ``str`` (a ``float`` also accepts integers).
    low, high : float, optional
        Bounds of a numeric value (``None``: unbounded on that side).
    low_inclusive, high_inclusive : bool
        Whether ``low`` / ``high`` themselves are valid.
    choices : tuple of str, optional
        The valid strings.
    comma_list : bool
        The string is a comma-separated, non-empty list, each item one of
        ``choices``.
    """

    help: str
    type: type
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    choices: tuple[str, ...] | None = None
    comma_list: bool = False

    def __post_init__(self) -> None:
        if not self.help or "\n" in self.help:
            raise ValueError("a hyper-parameter's help is one non-empty line")
        if self.type not in (bool, int, float, str):
            raise ValueError(f"unsupported hyper-parameter type {self.type!r}")
        numeric = self.type in (int, float)
        if not numeric and (self.low is not None or self.high is not None):
            raise ValueError("only int and float hyper-parameters have a range")
        if self.type is not str and (self.choices is not None or self.comma_list):
            raise ValueError("only str hyper-parameters have choices")
        if self.comma_list and not self.choices:
            raise ValueError("a comma list needs choices")

    def valid(self) -> str:
        """The accepted values in words, e.g. ``"int >= 1"``, ``"float in (0, 1]"``,
        ``"one of cosine, euclidean"``."""
        if self.choices is not None:
            listed = ", ".join(self.choices)
            if self.comma_list:
                return f"a comma-separated list of {listed}"
            return f"one of {listed}"
        name = self.type.__name__
        low, high = self.low, self.high
        if low is not None and high is not None:
            left = "[" if self.low_inclusive else "("
            right = "]" if self.high_inclusive else ")"
            return f"{name} in {left}{_num(low)}, {_num(high)}{right}"
        if low is not None:
            return f"{name} {'>=' if self.low_inclusive else '>'} {_num(low)}"
        if high is not None:
            return f"{name} {'<=' if self.high_inclusive else '<'} {_num(high)}"
        return name

    def problem(self, value: Any) -> str | None:
        """``None`` when ``value`` is valid, else why not (one phrase)."""
        if self.type is bool:
            return None if isinstance(value, bool) else "not a bool"
        if self.type is str:
            if not isinstance(value, str):
                return "not a str"
            if self.choices is None:
                return None
            items = (
                [v.strip() for v in value.split(",")] if self.comma_list else [value]
            )
            bad = [v for v in items if v not in self.choices]
            if bad or not value.strip():
                return f"{bad[0]!r} is not a valid choice" if bad else "empty"
            return None
        if isinstance(value, bool) or not isinstance(
            value, numbers.Integral if self.type is int else numbers.Real
        ):
            return f"not an {self.type.__name__}" if self.type is int else "not a float"
        if not math.isfinite(float(value)):
            return "not finite"
        if self.low is not None and (
            value < self.low or (value == self.low and not self.low_inclusive)
        ):
            return "out of range"
        if self.high is not None and (
            value > self.high or (value == self.high and not self.high_inclusive)
        ):
            return "out of range"
        return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


#: How a cross-validated default is read off its record (``rule``).
RULES = {
    "best": "the setting with the best mean over the folds",
    "smallest_within_1se": "the smallest value whose mean is within one standard "
    "error of the best's, that error the best setting's standard error over the "
    "folds (the one-standard-error rule, Hastie, Tibshirani & Friedman, The "
    "Elements of Statistical Learning, sec. 7.10); for a size whose cost grows "
    "with it",
    "incumbent_within_1se": "the default the record's run was made at, unless the "
    "best setting beats it by more than one standard error of the best's score (as "
    "above); for a setting with no cheaper end, so that noise does not move it; a "
    "run over several keys keeps or replaces the combination as one setting",
}

#: Where a default comes from (``hyper_defaults.toml``'s ``origin``).
ORIGINS = {
    "cv": "cross-validation on a training split, recorded in "
    "benchmarks/results/defaults_cv/METHOD_DATASET.json",
    "paper": "the paper's setting (cited in the note)",
    "solver": "a numerical setting of the solver (tolerance, cap, batch), not a "
    "model choice",
    "data": "follows the corpus at fit time (its views, an automatic rule)",
    "untuned": "a model choice without a cross-validation record (the note says why)",
}


@dataclasses.dataclass(frozen=True)
class Default:
    """One hyper-parameter's default and where it comes from.

    Parameters
    ----------
    value : bool, int, float or str
        The default.
    origin : str
        One of :data:`ORIGINS`.
    record : str
        For ``origin = "cv"``: the dataset of the record
        ``benchmarks/results/defaults_cv/METHOD_DATASET.json``, whose winner the
        value is.
    record_method : str
        The METHOD of that record when it is another method's (``""``: this
        method's own): a choice two methods share, such as the input wing of
        ``mmh`` and ``mmh-regression``, cross-validated where data exist for it
        (the note says why not on this method's own data).
    note : str
        One line: the citation (``"paper"``), why there is no record
        (``"untuned"``), or a remark.
    rule : str
        For ``origin = "cv"``: how the value is read off the record's last run over
        the key, one of :data:`RULES` (``"best"``: the winner).
    requires : tuple of (str, value) pairs
        For ``origin = "cv"``: settings of the method's other hyper-parameters the
        key has an effect under only (e.g. a word rule used by k-means VReps
        alone); the record's run holds them there instead of at their defaults.
        In the TOML an inline table, ``requires = { vrep_method = "kmeans" }``.
    """

    value: Any
    origin: str
    record: str = ""
    note: str = ""
    record_method: str = ""
    rule: str = "best"
    requires: tuple = ()

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise ValueError(
                f"unknown origin {self.origin!r}; valid: {', '.join(ORIGINS)}"
            )
        if (self.origin == "cv") != bool(self.record):
            raise ValueError("a record (dataset) is given exactly when origin = 'cv'")
        if self.record_method and not self.note:
            raise ValueError("a default from another method's record needs a note")
        if self.record_method and self.origin != "cv":
            raise ValueError("record_method is given only with origin = 'cv'")
        if self.rule not in RULES:
            raise ValueError(f"unknown rule {self.rule!r}; valid: {', '.join(RULES)}")
        if self.rule != "best" and self.origin != "cv":
            raise ValueError("rule is given only with origin = 'cv'")
        if self.requires and self.origin != "cv":
            raise ValueError("requires is given only with origin = 'cv'")
        if self.origin in ("paper", "untuned") and not self.note:
            raise ValueError(f"origin {self.origin!r} needs a note")
        if "\n" in self.note:
            raise ValueError("a default's note is one line")

    def describe(self, method: str) -> str:
        """Where the default of ``method`` comes from, in one phrase (``jaxannot
        methods``), e.g. ``"cv: defaults_cv/knn_corel5k.json"``."""
        where = self.origin
        if self.record:
            owner = self.record_method or method
            where += f": defaults_cv/{owner}_{self.record}.json"
        if self.rule != "best":
            where += f" ({self.rule.replace('_', ' ')})"
        return f"{where}; {self.note}" if self.note else where
