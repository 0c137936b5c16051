"""The figures typed in README.md and docs/*.md, checked against their records.

A figure of the prose that comes from a record of ``benchmarks/results/`` carries an
invisible marker right after it (markdown renders an HTML comment as nothing)::

    0.333<!-- fig: multilabel_peers_corel5k.json:learners.br_logreg.metrics.lrap -->
    1.34<!-- fig: ale_vs_peers.json:rows.0.iale-sf.first_call_seconds --> s
    MiAP 7.5<!-- fig: {ale_vs_peers.json:rows.3.iale-sf.miap} - {...} --> points
    0.957<!-- fig: mean({mmh_claim.json:runs.dataset=bbcsport.label=L.accuracy}) -->

The marker holds either one reference ``FILE:PATH`` or an arithmetic expression
(``+ - * /``, parentheses, numbers, ``len min max abs sum mean sd psd``; ``min``,
``max``, ``sum``, ``mean`` take numbers and lists alike, all their values together;
``sd`` with ``ddof = 1``, ``psd`` the population's, ``ddof = 0``) whose references are
written in braces, ``{FILE:PATH}``. ``FILE`` is a JSON file under
``benchmarks/results/`` (a sub-folder allowed: ``defaults_cv/emml_corel5k.json``),
a notebook's record named from the repository root
(``notebooks/results/ale.json``), or ``hyper_defaults.toml``, the registered defaults
(``jaxannot/annotators/``: ``hyper_defaults.toml:ale-sf.bins.value``).
``PATH`` walks it from the top, its steps separated by dots: a key of an object, an
index of a list (``0``, ``-1``), a key with dots, slashes or spaces in double quotes
(``results."0.1/0.3".map``), ``*`` (every element) or a filter ``KEY=VALUE`` of a
list (the elements whose ``KEY`` reads ``VALUE``: ``runs.dataset=scene.test``; a
quoted ``KEY`` with dots reaches into each element, ``cv."hyper.p"="0.5"``, and a
number matches the same number, ``10`` 10.0); after
those the steps apply to each element, and the reference gives a list (for ``mean``,
``len``, …; a list of one element stands for that element in arithmetic and as the
marker's value). A mean over seeds of a per-seed best is written seed by seed:
``mean(max({…seed=0.cv_map}), max({…seed=1.cv_map}))``.

The figure is the number just before the marker (the marker best right after the
number, before its unit), with at most a short unit between them (``×``, ``%``,
`` s``, ``**``; no digit): ``2,012``, ``−0.5``, ``1.34`` all parse, and so does a
power of ten as the docs write one, ``2.5e-4``, ``1.2 × 10⁻⁵`` or ``1.2·10⁻⁷``. It
agrees with its record when the record's value, rounded to the decimals the figure
shows (of its mantissa, at its power of ten), gives the figure (a tie may round either
way): under a record of 11.6465, ``11.6×`` and ``11.65×`` pass, ``11.7×`` fails; under
4.15e-5, ``4.2e-5`` and ``4.2 × 10⁻⁵`` pass, ``4.1e-5`` fails.

:func:`check` returns every disagreement and every marker that cannot be read (an
unknown file or key, no number before it, an expression outside the grammar);
``tests/docs/test_prose_figures.py`` fails on any.

    python -m tools.prose_figures            # list problems, exit 1 if any
    python -m tools.prose_figures --count    # markers per file
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import statistics
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: the notebooks' records, named from the repository root: ``notebooks/results/X.json``
NOTEBOOK_RESULTS = ROOT / "notebooks" / "results"
#: the registered defaults, the one TOML file a marker may name
DEFAULTS = ROOT / "jaxannot" / "annotators" / "hyper_defaults.toml"


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and every page of docs/, in a fixed order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


#: ``<!-- fig: EXPRESSION -->``
MARKER = re.compile(r"<!-- fig: (?P<expr>.*?) -->")
#: superscript digits and signs, as ``10⁻⁵`` writes them
SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
#: the number just before a marker: digits with thousands commas and decimals, an
#: optional sign, an optional power of ten (``2.5e-4``, ``1.2 × 10⁻⁵``, ``1.2·10⁻⁷``),
#: then at most four characters of unit (no digit, no tag)
NUMBER = re.compile(
    r"(?<![\d.])(?P<number>[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
    r"(?:[eE][-−+]?\d+|\s?[×·]\s?10[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)?)"
    r"(?P<unit>[^\d<>\n]{0,4})\Z"
)
#: a figure's mantissa and its power of ten
_EXPONENT = re.compile(r"(?:[eE]|\s?[×·]\s?10)(?P<exp>[-−+⁻⁺]?[\d⁰¹²³⁴⁵⁶⁷⁸⁹]+)\Z")
#: a reference in braces inside an expression
REFERENCE = re.compile(r"\{(?P<ref>[^{}]+)\}")


def _values(args):
    return [v for a in args for v in (a if isinstance(a, list) else [a])]


FUNCTIONS = {
    "len": len,
    "min": lambda *a: min(_values(a)),
    "max": lambda *a: max(_values(a)),
    "abs": abs,
    "sum": lambda *a: sum(_values(a)),
    "mean": lambda *a: statistics.fmean(_values(a)),
    "sd": lambda *a: statistics.stdev(_values(a)),
    "psd": lambda *a: statistics.pstdev(_values(a)),
}


class FigureError(ValueError):
    """A marker that cannot be read: unknown file or key, no figure, bad grammar."""


@dataclass(frozen=True)
class Figure:
    """One marked figure: where it is, what it shows, what its record gives."""

    path: str
    line: int
    shown: str
    expr: str

    @property
    def _parts(self) -> tuple[str, int]:
        """The mantissa as shown and the power of ten (0 without one)."""
        match = _EXPONENT.search(self.shown)
        if match is None:
            return self.shown, 0
        exp = match.group("exp").translate(SUPERSCRIPT).replace("−", "-")
        return self.shown[: match.start()], int(exp)

    @property
    def decimals(self) -> int:
        """The decimals the figure's mantissa shows."""
        mantissa = self._parts[0]
        return len(mantissa.split(".")[1]) if "." in mantissa else 0

    @property
    def half_unit(self) -> float:
        """Half the figure's last shown digit: ``0.005`` for ``1.34``, ``5e-6`` for
        ``2.5e-4``."""
        return 0.5 * 10.0 ** (self._parts[1] - self.decimals)

    @property
    def number(self) -> float:
        """The figure as a float (thousands commas dropped, a typographic minus, a
        power of ten applied)."""
        mantissa, exp = self._parts
        return float(mantissa.replace(",", "").replace("−", "-")) * 10.0**exp


class _Many(list):
    """The elements a ``*`` or ``KEY=VALUE`` step selected (later steps map)."""


def split_path(path: str) -> list[tuple[str, str | None]]:
    """The steps of ``PATH``: ``(key, None)`` for a key or index, ``(key, value)`` for
    a filter ``KEY=VALUE``. Steps are separated by dots; a double-quoted part is taken
    as it is (dots, slashes, spaces and ``=`` included).

    Examples
    --------
    >>> split_path('results."0.1/0.3".map')
    [('results', None), ('0.1/0.3', None), ('map', None)]
    >>> split_path('runs.dataset=scene.test')
    [('runs', None), ('dataset', 'scene'), ('test', None)]
    """
    steps, key, value, quoted = [], "", None, False
    for ch in path + ".":
        if ch == '"':
            quoted = not quoted
        elif ch == "." and not quoted:
            if not key:
                raise FigureError(f"cannot read the path {path!r}")
            steps.append((key, value))
            key, value = "", None
        elif ch == "=" and not quoted and value is None:
            value = ""
        elif value is None:
            key += ch
        else:
            value += ch
    if quoted:
        raise FigureError(f"cannot read the path {path!r}: an open quote")
    return steps


def _matches(element, key: str, match: str) -> bool:
    """Whether ``element``'s ``key`` reads ``match`` (as text, or as the same number:
    ``10`` matches 10.0); a quoted key with dots that is not a key of ``element``
    walks its nested objects (``"hyper.mu"=10``)."""
    for part in (
        [key] if isinstance(element, dict) and key in element else key.split(".")
    ):
        if not isinstance(element, dict) or part not in element:
            return False
        element = element[part]
    if str(element) == match:
        return True
    try:
        return not isinstance(element, bool) and float(element) == float(match)
    except (TypeError, ValueError):
        return False


def _step(value, key, match, reference):
    """One step of a path from ``value``."""
    if isinstance(value, _Many) and match is None:
        out = _Many()
        for item in value:
            got = _step(item, key, match, reference)
            out.extend(got if isinstance(got, _Many) else [got])
        return out
    if match is not None:
        if not isinstance(value, list):
            raise FigureError(f"{reference!r}: {key}={match} filters a list only")
        if isinstance(value, _Many):  # a selection of lists: filter their elements
            value = [v for item in value
                     for v in (item if isinstance(item, list) else [item])]  # fmt: skip
        chosen = _Many(v for v in value if _matches(v, key, match))
        if not chosen:
            raise FigureError(f"{reference!r}: no element with {key}={match}")
        return chosen
    if key == "*" and isinstance(value, (list, dict)):
        return _Many(value.values() if isinstance(value, dict) else value)
    if isinstance(value, dict) and key in value:
        return value[key]
    if isinstance(value, list) and re.fullmatch(r"-?\d+", key):
        try:
            return value[int(key)]
        except IndexError:
            raise FigureError(f"{reference!r}: no index {key}") from None
    raise FigureError(f"{reference!r}: no key {key!r}")


@cache
def _read(path: Path) -> object:
    if path.suffix == ".toml":
        return tomllib.loads(path.read_text())
    return json.loads(path.read_text())


def resolve(reference: str, results: Path = RESULTS) -> object:
    """The value that ``FILE:PATH`` names in ``results`` (a list where a ``*`` or a
    ``KEY=VALUE`` step selected several).

    Raises
    ------
    FigureError
        When the file, a key or an index does not exist, or a filter matches nothing.
    """
    name, sep, path = reference.strip().partition(":")
    file = (results / name).resolve()
    if sep and name == DEFAULTS.name:
        file = DEFAULTS
    elif sep and name.startswith("notebooks/results/") and name.endswith(".json"):
        file = (ROOT / name).resolve()
        if NOTEBOOK_RESULTS.resolve() not in file.parents:
            raise FigureError(f"{reference!r}: not under notebooks/results")
    elif not sep or not name.endswith(".json") or results.resolve() not in file.parents:
        raise FigureError(f"{reference!r}: not FILE.json:PATH under the results")
    if not file.is_file():
        raise FigureError(f"{reference!r}: no record {name}")
    value = _read(file)
    for key, match in split_path(path):
        value = _step(value, key, match, reference)
    return list(value) if isinstance(value, _Many) else value


def _one(value):
    """A selection of exactly one element is that element (in arithmetic, and as a
    marker's value); any other value is itself."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _evaluate(node, values):
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name) and node.id in values:
        return values[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_one(_evaluate(node.operand, values))
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: float.__add__, ast.Sub: float.__sub__,
               ast.Mult: float.__mul__, ast.Div: float.__truediv__}  # fmt: skip
        if type(node.op) in ops:
            left = float(_one(_evaluate(node.left, values)))
            right = float(_one(_evaluate(node.right, values)))
            return ops[type(node.op)](left, right)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in FUNCTIONS and not node.keywords):  # fmt: skip
        args = [_evaluate(a, values) for a in node.args]
        return FUNCTIONS[node.func.id](*args)
    raise FigureError(f"not in the grammar: {ast.unparse(node)!r}")


def value_of(expr: str, results: Path = RESULTS) -> float:
    """What a marker's expression gives: one reference, or arithmetic on ``{refs}``.

    Raises
    ------
    FigureError
        On an unknown file or key, a value that is not a number, or an expression
        outside the grammar.
    """
    if "{" not in expr:
        value = resolve(expr, results)
    else:
        values = {}

        def name(match):
            key = f"_r{len(values)}"
            values[key] = resolve(match.group("ref"), results)
            return key

        try:
            tree = ast.parse(REFERENCE.sub(name, expr).strip(), mode="eval")
        except SyntaxError as err:
            raise FigureError(f"cannot parse {expr!r}: {err.msg}") from None
        value = _evaluate(tree, values)
    value = _one(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FigureError(f"{expr!r} gives {type(value).__name__}, not a number")
    return float(value)


def figures(text: str, path: str = "") -> list[Figure]:
    """Every marked figure of ``text``.

    Raises
    ------
    FigureError
        When no number stands just before a marker.
    """
    found = []
    for match in MARKER.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        start = text.rfind("\n", 0, match.start()) + 1
        before = NUMBER.search(text[start : match.start()])
        if before is None:
            raise FigureError(f"{path}:{line}: no figure just before the marker")
        found.append(Figure(path, line, before.group("number"), match.group("expr")))
    return found


def agrees(figure: Figure, value: float) -> bool:
    """Whether ``value`` rounded to the figure's decimals gives the figure."""
    if math.isnan(value):
        return False
    half = figure.half_unit
    return abs(value - figure.number) <= half * (1 + 1e-9) + 1e-12


def check(text: str, path: str = "", results: Path = RESULTS) -> list[str]:
    """Every problem of the marked figures of ``text``: one line each, none if all
    agree with their records."""
    try:
        marked = figures(text, path)
    except FigureError as err:
        return [str(err)]
    problems = []
    for figure in marked:
        where = f"{path}:{figure.line}"
        try:
            value = value_of(figure.expr, results)
        except (FigureError, ZeroDivisionError, TypeError,
                statistics.StatisticsError) as err:  # fmt: skip
            problems.append(f"{where}: {err}")
            continue
        if not agrees(figure, value):
            problems.append(
                f"{where}: {figure.shown} but {figure.expr} gives "
                f"{value:.{figure.decimals + 2}f}"
            )
    return problems


def check_all(root: Path = ROOT, results: Path = RESULTS) -> list[str]:
    """Every problem in README.md and docs/*.md."""
    problems = []
    for doc in documents(root):
        problems += check(doc.read_text(), str(doc.relative_to(root)), results)
    return problems


def counts(root: Path = ROOT) -> dict[str, int]:
    """The number of markers of each document."""
    return {
        str(doc.relative_to(root)): len(MARKER.findall(doc.read_text()))
        for doc in documents(root)
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", action="store_true", help="markers per file")
    args = parser.parse_args(argv)
    if args.count:
        for name, n in counts().items():
            print(f"{n:4d}  {name}")
        return 0
    problems = check_all()
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
