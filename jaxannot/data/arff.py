"""Reading ARFF files (dense and sparse) with ``liac-arff``.

An ARFF file (Weka's Attribute-Relation File Format) has a header of ``@attribute``
declarations and a ``@data`` section whose rows are either dense
(``v1,v2,...``) or sparse (``{index value, ...}``, 0-based attribute indices, omitted
attributes are 0). Mulan's multi-label datasets ship as ARFF plus a label XML
(:mod:`jaxannot.data.mulan`).

Parsing is delegated to ``liac-arff``; sparse files are decoded with its coordinate
(COO) return type, so no Python list per row is ever built for them. Every failure of
the parser (its own ``ArffException`` subclasses, which carry a line number, and any
other exception it lets escape on malformed input) and non-UTF-8 bytes become a
:class:`~jaxannot.data.errors.DataFormatError` naming the file and the line.

Value conventions
-----------------
- ``NUMERIC`` / ``REAL`` / ``INTEGER`` attributes: their value; missing (``?``) is NaN.
- Nominal attributes whose values all read as numbers (``{0,1}``): that number.
- Other nominal attributes: the 0-based index of the value in the declaration.
- ``STRING`` and ``DATE`` attributes are not supported (DataFormatError).

Nominal declarations
--------------------
``liac-arff`` checks a nominal declaration with a regular expression that takes time
exponential in the number of values when the line does not match (a missing
closing brace: 4 s at 22 values, doubling with each). Every ``{...}`` declaration is
therefore checked first, in linear time, against a stricter form -- values
separated by commas, each either quoted (``'...'`` or ``"..."``, backslash escapes
allowed) or free of whitespace, commas, quotes and braces, the list closed by ``}``
at the end of the line -- and a line of another form is a DataFormatError naming it.
A UTF-8 byte order mark at the start of the file is ignored.

Bounds
------
The file's size is measured before it is read
(:func:`jaxannot.data.bounded.read_limited`) and a sparse file's
``rows x attributes`` is bounded by the archive rule
(:func:`jaxannot.data.bounded.check_dense`) before liac-arff decodes it: a 2.2 MB
file declaring 40,000 attributes asked for 3.9 GB once densified.

References
----------
Weka ARFF format: https://waikato.github.io/weka-wiki/formats_and_processors/arff/ ;
liac-arff: https://github.com/renatopp/liac-arff
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import arff as liac_arff
import numpy as np
import scipy.sparse

from jaxannot.data.bounded import (
    MAX_TEXT_BYTES,
    beyond_float32,
    check_dense,
    read_limited,
)
from jaxannot.data.errors import DataFormatError

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = ["ArffData", "read_arff", "parse_arff"]


@dataclasses.dataclass(frozen=True)
class ArffData:
    """The content of one ARFF file.

    Attributes
    ----------
    path : str
        Where it was read from (used in error messages).
    relation : str
        The ``@relation`` name.
    attribute_names : tuple of str
        Attribute names in file order.
    attribute_types : tuple
        ``"NUMERIC"``, ``"REAL"``, ``"INTEGER"`` or the tuple of nominal values.
    values : ndarray [rows, attributes] or scipy.sparse.csr_matrix
        Raw decoded values (nominals as value indices; NaN for missing). Use
        :meth:`columns` to get numbers with the conventions of the module docstring.
    data_lines : int ndarray [rows]
        1-based line number of each data row in the file.
    sparse : bool
        Whether the data section was written in sparse ``{index value}`` form.
    """

    path: str
    relation: str
    attribute_names: tuple[str, ...]
    attribute_types: tuple
    values: object
    data_lines: np.ndarray
    sparse: bool

    @property
    def num_rows(self) -> int:
        return int(self.values.shape[0])

    def index_of(self, name: str) -> int:
        """Column index of attribute ``name`` (KeyError naming a few if absent)."""
        try:
            return self.attribute_names.index(name)
        except ValueError:
            raise KeyError(
                f"{self.path}: no attribute named {name!r} (first attributes: "
                f"{list(self.attribute_names[:5])})"
            ) from None

    def columns(self, cols: Sequence[int], dtype: DTypeLike = np.float32) -> np.ndarray:
        """Dense ``[rows, len(cols)]`` array of the given attribute columns.

        Nominal columns are mapped to their numeric value (or value index).

        Raises
        ------
        DataFormatError
            When ``dtype`` is float32 and a value is finite but beyond its range
            (1e300 would become infinite), checked on the float64 values before
            the cast and naming the line and the attribute; NaN (missing) and
            infinite values are returned as they are.
        """
        cols = np.asarray(cols, dtype=np.int64)
        if scipy.sparse.issparse(self.values):
            block = self.values[:, cols].toarray()
        else:
            block = np.asarray(self.values)[:, cols]
        block = np.array(block, dtype=np.float64)
        for j, c in enumerate(cols):
            lut = _nominal_lut(self.attribute_types[c])
            if lut is None:
                continue
            col = block[:, j]
            ok = np.isfinite(col)
            idx = col[ok].astype(np.int64)
            col[ok] = lut[idx]
        if np.dtype(dtype) == np.float32:
            beyond = beyond_float32(block)
            if beyond.any():
                r, j = np.argwhere(beyond)[0]
                raise DataFormatError(
                    self.path,
                    f"attribute {self.attribute_names[cols[j]]!r} value "
                    f"{block[r, j]:g} is beyond float32's range (3.4e38)",
                    int(self.data_lines[r]),
                )
        return block.astype(dtype)


def _nominal_lut(type_) -> np.ndarray | None:
    """Index -> number for a nominal attribute, or None when no mapping is needed."""
    if isinstance(type_, str):
        return None
    try:
        lut = np.array([float(v) for v in type_], dtype=np.float64)
    except (TypeError, ValueError):
        return None  # non-numeric nominal values: keep the value index
    if np.array_equal(lut, np.arange(len(lut))):
        return None
    return lut


def read_arff(path: str | os.PathLike) -> ArffData:
    """Read an ARFF file (dense or sparse).

    Parameters
    ----------
    path : path-like
        The ``.arff`` file.

    Returns
    -------
    ArffData

    Raises
    ------
    DataFormatError
        Malformed content, with the file name and line number in the message; not
        a regular file (a named pipe is refused, never waited on); over
        :data:`~jaxannot.data.bounded.MAX_TEXT_BYTES` (measured before it is
        read); sparse rows whose dense ``rows x attributes`` float64 matrix would
        exceed :func:`~jaxannot.data.bounded.allowed_bytes` of the file's size.
    FileNotFoundError
        When the file does not exist.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.arff"
    >>> _ = p.write_text("@relation r\\n@attribute a numeric\\n@attribute b {0,1}\\n"
    ...                  "@data\\n{0 2.5,1 1}\\n{}\\n")
    >>> read_arff(p).columns([0, 1]).tolist()
    [[2.5, 1.0], [0.0, 0.0]]
    """
    path = os.fspath(path)
    raw = read_limited(path, "ARFF file", MAX_TEXT_BYTES, _WHY_LIMIT)
    return parse_arff(raw, path=path)


_WHY_LIMIT = "the ARFF parser holds every value as a Python object"


def parse_arff(raw: bytes | str, *, path: str = "<string>") -> ArffData:
    """Parse ARFF content given as bytes (UTF-8) or text; see :func:`read_arff`."""
    lines = _text(raw, path).removeprefix("\ufeff").split("\n")
    attr_lines, data_lines = _scan(lines)
    for k in attr_lines:
        _check_nominal(lines[k - 1], path, k)
    sparse = bool(data_lines) and lines[data_lines[0] - 1].strip().startswith("{")
    if sparse:  # its rows are densified (ArffData.columns) as float64
        check_dense(
            path, len(data_lines), len(attr_lines), 8,
            "its sparse rows densified", size=len(raw),
        )  # fmt: skip
    obj = _decode(lines, sparse, path)
    names, types = _attributes(obj, lines, attr_lines, path)
    line_arr = np.asarray(data_lines, dtype=np.int64)
    return ArffData(
        path=path,
        relation=obj["relation"],
        attribute_names=names,
        attribute_types=types,
        values=_values(obj["data"], sparse, types, line_arr, len(names), path),
        data_lines=line_arr,
        sparse=sparse,
    )


def _text(raw: bytes | str, path: str) -> str:
    """``raw`` as text: bytes decoded as UTF-8, else a DataFormatError naming the
    line of the first invalid byte."""
    if not isinstance(raw, bytes):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataFormatError(
            path, f"not valid UTF-8 (byte {raw[e.start]:#04x})", line
        ) from None


def _decode(lines: list[str], sparse: bool, path: str) -> dict:
    """liac-arff's decoding of ``lines`` (COO data when ``sparse``), its errors as
    DataFormatErrors naming the line."""
    decoder = liac_arff.ArffDecoder()
    return_type = liac_arff.COO if sparse else liac_arff.DENSE
    try:
        return decoder.decode(lines, encode_nominal=True, return_type=return_type)
    except liac_arff.ArffException as e:
        raise DataFormatError(path, _arff_message(e), e.line) from None
    except Exception as e:  # liac-arff lets some malformed input escape untyped
        line = decoder._current_line or None
        raise DataFormatError(
            path, f"malformed ARFF ({type(e).__name__}: {e})", line
        ) from None


def _attributes(obj: dict, lines, attr_lines, path: str):
    """``(names, types)`` of the decoded attributes; quoted names re-read from their
    lines; DataFormatError on a name declared twice, a STRING attribute or none."""
    names = tuple(a[0] for a in obj["attributes"])
    if len(attr_lines) == len(names):  # re-read quoted names: liac-arff only strips
        names = tuple(
            _attribute_name(lines[k - 1], n)
            for k, n in zip(attr_lines, names, strict=True)
        )
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})[:3]
            raise DataFormatError(path, f"attribute names declared twice: {dup}")
    types = tuple(
        a[1] if isinstance(a[1], str) else tuple(a[1]) for a in obj["attributes"]
    )
    for j, t in enumerate(types):
        if t == "STRING":
            raise DataFormatError(
                path,
                f"attribute {names[j]!r} is a STRING attribute (not supported)",
                attr_lines[j] if j < len(attr_lines) else None,
            )
    if not names:
        raise DataFormatError(path, "no @attribute declarations")
    return names, types


def _values(data, sparse: bool, types, line_arr: np.ndarray, n_attr: int, path: str):
    """The decoded ``data`` as float64 ``[rows, attributes]`` (CSR when
    ``sparse``; NaN for missing values); a value that is no number is a
    DataFormatError naming its line."""
    n_rows = len(line_arr)
    if sparse:
        vals, rows, cols = data
        vals = _to_float(vals, path, lambda k: int(line_arr[rows[k]]))
        return scipy.sparse.csr_matrix(
            (vals, (np.asarray(rows, np.int64), np.asarray(cols, np.int64))),
            shape=(n_rows, n_attr),
        )
    if len(data) != n_rows:  # pragma: no cover - the scan mirrors liac-arff
        raise DataFormatError(path, f"read {len(data)} rows, expected {n_rows}")
    if "INTEGER" in types:  # liac-arff returns a row unconverted on int('nan')
        for r, row in enumerate(data):
            if any(isinstance(v, str) for v in row):
                raise DataFormatError(
                    path, "a value could not be converted", int(line_arr[r])
                )
    try:
        return np.array(data, dtype=np.float64).reshape(n_rows, n_attr)
    except (TypeError, ValueError):
        pass  # a value that is no number: find it, outside the handler
    flat = [v for row in data for v in row]
    values = _to_float(flat, path, lambda k: int(line_arr[k // n_attr]))
    return values.reshape(n_rows, n_attr)


def _to_float(vals, path, line_of) -> np.ndarray:
    """Values list (floats, ints, None) -> float64 array; NaN for None."""
    try:
        return np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
    except (TypeError, ValueError):
        for k, v in enumerate(vals):
            try:
                float(np.nan if v is None else v)
            except (TypeError, ValueError):
                raise DataFormatError(
                    path, f"value {v!r} is not a number", line_of(k)
                ) from None
        raise  # pragma: no cover


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}

# liac-arff's split of an @attribute line into name and type (linear time: no
# nested quantifier), so the type checked below is the one liac-arff checks.
_NAME_AND_TYPE = re.compile(r"^(\".*\"|'.*'|[^{}%,\s]*)\s+(.+)$")
# A nominal value list; possessive quantifiers never backtrack, so this runs in
# linear time, and every list it accepts matches liac-arff's own expression.
_VALUE = r"""(?>"(?:[^"\\]|\\.)*+"|'(?:[^'\\]|\\.)*+'|[^\s,{}'"]*+)"""
_NOMINAL = re.compile(rf"\{{\s*+(?:{_VALUE}\s*+,\s*+)*+{_VALUE}\s*+\}}")


def _check_nominal(line: str, path: str, number: int) -> None:
    """Refuse a nominal declaration liac-arff could take exponential time on
    (module docstring) with a DataFormatError naming the line."""
    _, _, rest = line.strip(" \r\n").partition(" ")
    match = _NAME_AND_TYPE.match(rest.strip())
    if match is None or not match.group(2).startswith("{"):
        return  # not nominal: liac-arff's own checks are linear
    if _NOMINAL.fullmatch(match.group(2)) is None:
        raise DataFormatError(
            path,
            "malformed nominal attribute: write {v1,v2,...} closed by '}' at the end "
            "of the line, values separated by commas and quoted ('...') when they "
            "hold spaces, commas, quotes or braces",
            number,
        )


def _attribute_name(line: str, fallback: str) -> str:
    """The name of an ``@attribute`` line, unquoted with backslash escapes resolved.

    Unquoted names are taken literally up to the first whitespace; quoted names
    (``'...'`` or ``"..."``) end at the first unescaped matching quote.
    """
    rest = line.strip(" \r\n")[len("@attribute") :].lstrip()
    if not rest or rest[0] not in "'\"":
        return fallback
    quote, out, k = rest[0], [], 1
    while k < len(rest):
        ch = rest[k]
        if ch == "\\" and k + 1 < len(rest):
            out.append(_ESCAPES.get(rest[k + 1], rest[k + 1]))
            k += 2
            continue
        if ch == quote:
            return "".join(out)
        out.append(ch)
        k += 1
    return fallback


def _arff_message(e) -> str:
    """liac-arff's message without its own 'at line N' (we add file and line)."""
    try:
        msg = str(e)
    except Exception:  # pragma: no cover - a message template that fails to format
        msg = type(e).__name__
    for tail in (f", at line {e.line}.", f" at line {e.line}.", f" in line {e.line}"):
        msg = msg.replace(tail, "")
    return f"{type(e).__name__}: {msg}"


def _scan(lines: list[str]) -> tuple[list[int], list[int]]:
    """1-based line numbers of the @attribute lines and of the data rows.

    Mirrors liac-arff's own reading: header rows are stripped of ``' \\r\\n'`` and the
    first ``@data`` ends the header; data rows are stripped and skipped when empty or
    comments (``%``).
    """
    attr_lines: list[int] = []
    data_lines: list[int] = []
    k = 0
    for k, row in enumerate(lines, start=1):
        u = row.strip(" \r\n").upper()
        if u.startswith("@ATTRIBUTE"):
            attr_lines.append(k)
        elif u.startswith("@DATA"):
            break
    else:
        return attr_lines, data_lines
    for j in range(k, len(lines)):
        row = lines[j].strip()
        if row and not row.startswith("%"):
            data_lines.append(j + 1)
    return attr_lines, data_lines
