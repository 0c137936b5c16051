"""MAT-file v5: the sizes its headers declare, bounded before scipy reads the file.

:func:`check_v5_declared` bounds what every variable declares (from
:func:`scipy.io.whosmat`), :func:`v5_inflated_bytes` what its compressed elements
inflate to (counted in chunks), and :class:`V5Walk` what every cell and struct
field nested in a variable declares (a walk of the element headers, within
:data:`~jaxannot.data.mat_common.MAX_NODES` and
:data:`~jaxannot.data.mat_common.MAX_DEPTH`); :func:`v5_text` normalizes the text
scipy read.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
import scipy.io

from jaxannot.data.bounded import limit_text
from jaxannot.data.errors import DataFormatError
from jaxannot.data.mat_common import (
    MAX_DEPTH,
    MAX_NODES,
    cell_text,
    rows_text,
    unreadable_error,
)
from jaxannot.data.mat_v5_streams import (
    INFLATE_CHUNK,
    ElementStream,
    FileStream,
    InflateStream,
    StreamEnd,
    inflated_size,
)

_MI_COMPRESSED = 15  # v5 data type of a zlib-compressed element
_MI_MATRIX = 14  # v5 data type of an array (a variable, a cell, a field's value)
#: Bytes a value of each MATLAB class takes once scipy reads it (a char is a
#: 4-byte unicode code point); cells, structs and objects hold one pointer (8) an
#: element; a sparse matrix is read as its stored entries, not densified (skipped).
_ITEMSIZE = {
    "double": 8, "single": 4, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "logical": 1, "char": 4,
}  # fmt: skip
#: The v5 array classes (the low byte of an array's flags) by number.
_V5_CLASS = {
    1: "cell", 2: "struct", 3: "object", 4: "char", 5: "sparse", 6: "double",
    7: "single", 8: "int8", 9: "uint8", 10: "int16", 11: "uint16", 12: "int32",
    13: "uint32", 14: "int64", 15: "uint64",
}  # fmt: skip


def check_v5_declared(path: str, size: int, allowed: int) -> None:
    """Refuse a v5 (or v4) MAT-file whose variables declare, in their headers, more
    than ``allowed`` bytes (one variable, or all up to it), before scipy reads one:
    :func:`scipy.io.whosmat` reads the name, shape and class of each variable
    without its data. Nested cells and struct fields are not listed by it:
    :class:`V5Walk` bounds them.

    Parameters
    ----------
    path : str
        The MAT-file.
    size : int
        Its size in bytes, for the message's limit.
    allowed : int
        The most bytes its variables may declare in all.

    Raises
    ------
    DataFormatError
        scipy cannot list the variables, or they declare more than ``allowed``.
    """
    try:
        variables = scipy.io.whosmat(path, chars_as_strings=False)
    except Exception as e:  # scipy raises many types on bad input
        raise unreadable_error(path, e) from None
    total = 0
    for name, shape, kind in variables:
        if kind == "sparse":
            continue
        nbytes = math.prod(int(d) for d in shape) * _ITEMSIZE.get(kind, 8)
        total += nbytes
        if total > allowed:
            dims = " x ".join(str(int(d)) for d in shape)
            raise DataFormatError(
                path,
                f"not a usable MAT-file: variable {name} (a {dims} {kind}) declares "
                f"{nbytes} bytes ({total} with the variables before it), over "
                f"{limit_text(size)}",
            )


def v5_inflated_bytes(path: str, allowed: int) -> int:
    """Bytes the compressed elements of a v5 MAT-file inflate to, counted in chunks
    and given up once over ``allowed`` (0 for a file without a v5 header: v4 files
    hold no compressed data). The file is read a tag and a chunk at a time:
    uncompressed elements are skipped over, never read. A malformed element list
    stops the count; scipy then reports the damage.

    Parameters
    ----------
    path : str
        The MAT-file.
    allowed : int
        The count stops once past this many bytes.

    Returns
    -------
    int
        The inflated bytes counted (over ``allowed`` when the count gave up).
    """
    total = 0
    with open(path, "rb") as fh:
        for _, kind, size in _v5_elements(fh):
            if kind == _MI_COMPRESSED:
                total += inflated_size(fh, size, allowed - total)
                if total > allowed:
                    return total
    return total


def _v5_elements(fh: BinaryIO) -> Iterator[tuple[str, int, int]]:
    """``(byte order, type, bytes)`` of each top-level element of the v5 MAT-file
    open as ``fh`` (none without a v5 header), ``fh`` at the element's data; once
    the caller is done with it, ``fh`` moves on to the next element (a compressed
    element is not padded, the others are, to 8 bytes). Small elements (their data
    sit in the tag) are passed over."""
    head = fh.read(128)
    order = {b"IM": "<", b"MI": ">"}.get(head[126:128])
    if len(head) < 128 or order is None:
        return
    while len(tag := fh.read(8)) == 8:
        kind, size = struct.unpack(order + "II", tag)
        if kind >> 16:
            continue
        start = fh.tell()
        yield order, kind, size
        fh.seek(start + size + (0 if kind == _MI_COMPRESSED else -size % 8))


class V5Walk:
    """The headers of every array in a v5 MAT-file -- each variable and, nested in
    it, each cell and each struct field's value -- read before scipy reads any,
    without their data (skipped over, or inflated and dropped for a compressed
    variable).

    :func:`scipy.io.whosmat` lists the variables alone, and scipy reserves the
    object pointers of every cell array a header declares before reading its
    cells: a 1 x 1 cell holding a cell declaring 1 x 10^8 cells took 800 MB from a
    few hundred bytes. The walk adds up what every header declares (elements times
    item size, 8 bytes a cell or struct field) and refuses the file once that is
    over ``allowed``, naming the array (``X{3}``, ``s(2).f``, ``s.f``); it visits
    at most :data:`MAX_NODES` arrays, nested at most :data:`MAX_DEPTH` deep.
    Sparse matrices (their stored entries are their bytes in the file), function
    handles and objects scipy cannot read are not looked into. A malformed element
    list stops the walk; scipy then reports the damage. Layout: MathWorks,
    "MAT-File Format" (level 5: tags, small data elements, 8-byte alignment).
    """

    def __init__(self, path: str, size: int, allowed: int) -> None:
        self.path, self.size, self.allowed = path, size, allowed
        self.order = "<"
        self.nodes = 0
        self.total = 0

    def run(self) -> None:
        with open(self.path, "rb") as fh:
            # a v4 file has no element: no cells, no structs
            for order, kind, size in _v5_elements(fh):
                self.order = order
                try:
                    if kind == _MI_COMPRESSED:
                        stream = InflateStream(fh, size)
                        inner, length = self._tag(stream)[:2]
                        if inner == _MI_MATRIX:
                            self._matrix(stream, length, None, 0)
                    elif kind == _MI_MATRIX:
                        self._matrix(FileStream(fh, size), size, None, 0)
                except StreamEnd:
                    return

    def _tag(self, stream: ElementStream) -> tuple[int, int, bytes | None]:
        """``(type, bytes, data)`` of the next element's tag; ``data`` is the
        element's own bytes for a small element (packed in the tag), else None."""
        raw = stream.read(8)
        kind, size = struct.unpack(self.order + "II", raw)
        if kind >> 16:
            if kind >> 16 > 4:
                raise StreamEnd
            return kind & 0xFFFF, kind >> 16, raw[4 : 4 + (kind >> 16)]
        return kind, size, None

    def _field(self, stream: ElementStream, name: str) -> bytes:
        """The data of the next (header) element, at most :data:`INFLATE_CHUNK`
        bytes."""
        _, size, data = self._tag(stream)
        if data is not None:
            return data
        if size > INFLATE_CHUNK:
            raise DataFormatError(
                self.path,
                f"not a usable MAT-file: variable {name} has a {size}-byte header "
                f"element, over the {INFLATE_CHUNK} a header may hold",
            )
        data = stream.read(size)
        stream.skip(-size % 8)
        return data

    def _ints(self, data: bytes, code: str) -> tuple[int, ...]:
        return struct.unpack(
            f"{self.order}{len(data) // 4}{code}", data[: len(data) // 4 * 4]
        )

    def _declare(self, name: str, shape: tuple[int, ...], kind: str, nbytes: int):
        self.total += nbytes
        if self.total > self.allowed:
            dims = " x ".join(str(d) for d in shape)
            raise DataFormatError(
                self.path,
                f"not a usable MAT-file: variable {name} (a {dims} {kind}) declares "
                f"{nbytes} bytes ({self.total} with the arrays before it), over "
                f"{limit_text(self.size)}",
            )

    def _matrix(
        self, stream: ElementStream, length: int, name: str | None, depth: int
    ) -> None:
        """Walk the array whose ``length`` bytes (after its tag) come next in
        ``stream``; ``name`` is its path (None for a variable: its own name)."""
        start = stream.pos
        if length == 0:  # an empty array: no flags, no dimensions
            self._visit(name or "?", depth)
            return
        flags = self._ints(self._field(stream, name or "?"), "I")
        kind = _V5_CLASS.get(flags[0] & 0xFF) if flags else None
        if kind is None:  # function handles, opaque objects: not looked into
            stream.skip(length - (stream.pos - start))
            return
        shape = self._ints(self._field(stream, name or "?"), "i")
        label = self._field(stream, name or "?").decode("latin-1")
        name = label if name is None else name
        if any(d < 0 for d in shape) or not shape:
            raise StreamEnd
        self._visit(name, depth)
        count = math.prod(shape)
        if kind == "object":
            self._field(stream, name)  # its class name
        if kind in ("struct", "object"):
            width = self._ints(self._field(stream, name), "i")
            names = self._field(stream, name)
            width = width[0] if width else 0
            fields = [
                names[k : k + width].split(b"\0")[0].decode("latin-1")
                for k in range(0, len(names) - width + 1, width)
            ] if width > 0 else []  # fmt: skip
            self._declare(name, shape, kind, count * max(len(fields), 1) * 8)
            for k in range(count if fields else 0):
                where = name if count == 1 else f"{name}({k + 1})"
                for field in fields:
                    self._child(stream, f"{where}.{field}", depth)
        elif kind == "cell":
            self._declare(name, shape, kind, count * 8)
            for k in range(count):
                self._child(stream, f"{name}{{{k + 1}}}", depth)
        elif kind != "sparse":
            logical = bool(flags[0] & 0x200)
            item = _ITEMSIZE["logical" if logical else kind]
            self._declare(
                name, shape, kind, count * item * (2 if flags[0] & 0x800 else 1)
            )
        rest = length - (stream.pos - start)
        if rest < 0:
            raise StreamEnd
        stream.skip(rest)

    def _child(self, stream: ElementStream, name: str, depth: int) -> None:
        kind, length, data = self._tag(stream)
        if kind != _MI_MATRIX or data is not None:
            raise StreamEnd
        self._matrix(stream, length, name, depth + 1)
        stream.skip(-length % 8)

    def _visit(self, name: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DataFormatError(
                self.path,
                f"not a usable MAT-file: variable {name} nests cells or structs "
                f"more than {MAX_DEPTH} deep",
            )
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise DataFormatError(
                self.path,
                f"not a usable MAT-file: its variables hold more than {MAX_NODES} "
                f"arrays in cells and structs (at {name})",
            )


def v5_text(value: Any, depth: int = 0) -> Any:
    """A value scipy read from a v5 file with its char arrays (arrays of strings,
    one a row) as :func:`rows_text` and cell arrays of strings as
    :func:`cell_text`, in cells nested up to :data:`MAX_DEPTH` deep (deeper ones
    are left as scipy read them).

    Parameters
    ----------
    value : Any
        A variable as :func:`scipy.io.loadmat` returned it.
    depth : int, optional
        How deep in cells ``value`` is (0 for a variable).

    Returns
    -------
    Any
        ``value`` with its text as ``str`` and lists of ``str``.
    """
    if isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim <= 1:
        return rows_text([str(r) for r in value])
    if isinstance(value, np.ndarray) and value.dtype == object and depth < MAX_DEPTH:
        out = np.empty(value.shape, dtype=object)
        for idx in np.ndindex(value.shape):
            out[idx] = v5_text(value[idx], depth + 1)
        return cell_text(out)
    return value
