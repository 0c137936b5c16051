"""Reading MATLAB ``.mat`` multi-view datasets (v5 with scipy, v7.3/HDF5 with h5py).

Multi-view clustering benchmarks are commonly packaged as a ``.mat`` file with a cell
array ``X`` of per-view matrices ``[images, dims]`` (dense or sparse) and a label
vector ``Y`` with classes ``1..k``. v7.3 files are HDF5 containers that store arrays
column-major, so every array read through h5py is transposed back to MATLAB's
``[rows, cols]`` orientation here (a ``(dim, n)`` dataset on disk is an ``n x dim``
MATLAB matrix).

Every size a file declares is bounded before it is allocated, as for model archives
(:func:`jaxannot.data.archive.allowed_bytes`: 200 times the file's size, at least 64
MiB, at most 16 GiB): the shape every v5 variable declares (read from its header by
:func:`scipy.io.whosmat`) is checked before scipy reads any, and so is the shape
every cell and struct field nested in one declares (a walk of the element headers,
at most :data:`MAX_NODES` arrays nested at most :data:`MAX_DEPTH` deep); the
compressed elements of a v5 file are inflated in bounded chunks (the file read a
chunk at a time) and counted first; the datasets of a v7.3 file are summed from
their declared shapes before h5py reads one; a sparse matrix is densified only when
its dense size fits the same bound, and so is the one-hot class matrix
(``images x classes``); cell references nest at most :data:`MAX_DEPTH` deep (a
reference cycle is refused, not followed) and the groups, datasets and references
the walk reaches, each counted as often as it is reached, are at most
:data:`MAX_NODES` and read at most the bound's bytes in all; HDF5 external links,
external and virtual storage are refused (their bytes lie in other files). Values
are cast to float32 only when they fit (:func:`~jaxannot.data.bounded.as_float32`).

Text reads the same from both versions: a ``1 x n`` char array is a Python ``str``,
an ``m x n`` one the list of its ``m`` rows, and a cell array of strings (cellstr) a
list of ``str`` (a list of rows of them for a matrix of cells). v7.3 stores char
arrays as ``uint16`` UTF-16 code units with the attribute ``MATLAB_class = 'char'``
(transposed like every array) and cell arrays as references; v5 char arrays come
from scipy as arrays of strings.

References
----------
MathWorks, "MAT-File Versions" (v7.3 uses HDF5);
scipy.io.loadmat; h5py.
"""

from __future__ import annotations

import math
import os
import struct
import zlib

import h5py
import numpy as np
import scipy.io
import scipy.sparse

from jaxannot.data.bounded import (
    allowed_bytes,
    as_float32,
    check_dense,
    limit_text,
    open_regular,
)
from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import DataFormatError

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "read_mat",
    "is_mat_v73",
    "dense_view",
    "class_labels",
    "multiview_corpus",
]

#: How deep cell arrays may nest in a v7.3 file (references to references ...).
MAX_DEPTH = 16
#: How many groups, datasets and references a v7.3 file's variables may hold in
#: all, each counted as often as it is reached.
MAX_NODES = 10_000
_MI_COMPRESSED = 15  # v5 data type of a zlib-compressed element
_MI_MATRIX = 14  # v5 data type of an array (a variable, a cell, a field's value)
_CHUNK = 2**20  # bytes inflated at a time while counting a compressed element
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


def is_mat_v73(path: str | os.PathLike) -> bool:
    """True when the file is a MATLAB v7.3 (HDF5) MAT-file."""
    return h5py.is_hdf5(os.fspath(path))


def read_mat(path: str | os.PathLike) -> dict:
    """Variables of a ``.mat`` file as numpy arrays / scipy sparse matrices.

    v5 files go through :func:`scipy.io.loadmat` (cell arrays become object arrays),
    once the shape every variable declares fits the file's bound; v7.3 files through
    h5py, with every array transposed to MATLAB orientation, cell arrays (HDF5 object
    references) dereferenced into object arrays and sparse matrices (groups with
    ``data``/``ir``/``jc``) rebuilt as CSC matrices. In both, char arrays become
    ``str`` (a list of rows for several rows) and cell arrays of strings lists of
    ``str``.

    Raises
    ------
    DataFormatError
        When the file is neither a readable v5 nor a v7.3 MAT-file.
    """
    path = os.fspath(path)
    fh, size = open_regular(path, "MAT-file")  # a named pipe: refused, not waited on
    fh.close()
    allowed = allowed_bytes(size)
    if is_mat_v73(path):
        try:
            with h5py.File(path, "r") as f:
                declared = _h5_declared_bytes(f)
                if declared <= allowed:
                    walk = _H5Walk(f, allowed)
                    names = [k for k in f.keys() if not k.startswith("#")]
                    return {k: walk.value(f[k], 0) for k in names}
        except DataFormatError:
            raise
        except Exception as e:  # h5py raises many types on corrupt input
            raise DataFormatError(path, f"unreadable v7.3 MAT-file ({e})") from None
        raise _too_big(path, "its datasets", declared)
    inflated = _v5_inflated_bytes(path, allowed)
    if inflated > allowed:
        raise _too_big(path, "its compressed variables", inflated)
    _check_v5_declared(path, size, allowed)
    _V5Walk(path, size, allowed).run()
    try:
        raw = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises many types (even IndexError) on bad input
        raise _unreadable(path, e) from None
    return {k: _v5_text(v) for k, v in raw.items() if not k.startswith("__")}


def _unreadable(path: str, e: Exception) -> DataFormatError:
    return DataFormatError(path, f"unreadable MAT-file ({type(e).__name__}: {e})")


def _check_v5_declared(path: str, size: int, allowed: int) -> None:
    """Refuse a v5 (or v4) MAT-file whose variables declare, in their headers, more
    than ``allowed`` bytes (one variable, or all up to it), before scipy reads one:
    :func:`scipy.io.whosmat` reads the name, shape and class of each variable
    without its data. Nested cells and struct fields are not listed by it:
    :class:`_V5Walk` bounds them."""
    try:
        variables = scipy.io.whosmat(path, chars_as_strings=False)
    except Exception as e:  # scipy raises many types on bad input
        raise _unreadable(path, e) from None
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


def _too_big(path: str, what: str, size: int) -> DataFormatError:
    return DataFormatError(
        path,
        f"not a usable MAT-file: {what} would take {size} bytes or more, over "
        f"{limit_text(os.path.getsize(path))}",
    )


def _h5_declared_bytes(f: h5py.File) -> int:
    """Bytes the datasets of an HDF5 file declare (their shapes times item sizes).

    Every link is looked at first: an external link (to another file), a dataset
    stored in external files or a virtual dataset is refused, since its bytes lie
    outside this file and outside its bound."""
    external: list[tuple[str, str]] = []
    elsewhere: list[str] = []
    total = 0

    def visit_link(name, link):  # raising inside h5py's visit garbles the error
        if isinstance(link, h5py.ExternalLink) and not external:
            external.append((name, link.filename))

    def visit(name, node):
        nonlocal total
        if isinstance(node, h5py.Dataset):
            if node.external or node.is_virtual:
                elsewhere.append(name)
            total += int(node.size) * node.dtype.itemsize

    f.visititems_links(visit_link)
    if external:
        name, target = external[0]
        raise DataFormatError(
            f.filename,
            f"{name} is an HDF5 external link to {target}: a MAT-file must hold "
            "its own data",
        )
    f.visititems(visit)
    if elsewhere:
        raise DataFormatError(
            f.filename,
            f"dataset {elsewhere[0]} is stored in other files (HDF5 external or "
            "virtual storage): a MAT-file must hold its own data",
        )
    return total


def _v5_inflated_bytes(path: str, allowed: int) -> int:
    """Bytes the compressed elements of a v5 MAT-file inflate to, counted in chunks
    and given up once over ``allowed`` (0 for a file without a v5 header: v4 files
    hold no compressed data). The file is read a tag and a chunk at a time:
    uncompressed elements are skipped over, never read. A malformed element list
    stops the count; scipy then reports the damage."""
    with open(path, "rb") as fh:
        head = fh.read(128)
        order = {b"IM": "<", b"MI": ">"}.get(head[126:128])
        if len(head) < 128 or order is None:
            return 0
        total = 0
        while len(tag := fh.read(8)) == 8:
            kind, size = struct.unpack(order + "II", tag)
            if kind >> 16:  # a small element: its data sit in the tag
                continue
            start = fh.tell()
            if kind == _MI_COMPRESSED:
                total += _inflated_size(fh, size, allowed - total)
                if total > allowed:
                    return total
                fh.seek(start + size)
            else:
                fh.seek(start + size + (-size % 8))  # padded to 8 bytes
    return total


def _inflated_size(fh, length: int, budget: int) -> int:
    """Length of the next ``length`` bytes of ``fh`` inflated, read and inflated
    ``_CHUNK`` bytes at a time; stops as soon as it passes ``budget`` (or the
    stream is damaged or ends)."""
    inflater = zlib.decompressobj()
    total = 0
    try:
        while length > 0 and total <= budget and not inflater.eof:
            pending = fh.read(min(_CHUNK, length))
            if not pending:
                break
            length -= len(pending)
            while pending and total <= budget:
                total += len(inflater.decompress(pending, _CHUNK))
                pending = inflater.unconsumed_tail
    except zlib.error:
        pass
    return total


class _End(Exception):
    """A v5 element list that ends early or is malformed: the walk stops there
    (scipy then reports the damage)."""


class _FileStream:
    """The ``length`` bytes of an uncompressed v5 element, from the file ``fh``
    positioned at their start: read a few at a time, skipped over by seeks."""

    def __init__(self, fh, length: int) -> None:
        self.fh, self.left, self.pos = fh, length, 0

    def read(self, n: int) -> bytes:
        data = self.fh.read(n) if n <= self.left else b""
        if len(data) < n:
            raise _End
        self.left -= n
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if not 0 <= n <= self.left:
            raise _End
        self.fh.seek(n, os.SEEK_CUR)
        self.left -= n
        self.pos += n


class _InflateStream:
    """The inflated bytes of a compressed v5 element (``length`` bytes of ``fh``),
    inflated as far as they are read or skipped, :data:`_CHUNK` bytes at a time
    (the file read a chunk at a time too)."""

    def __init__(self, fh, length: int) -> None:
        self.fh, self.left, self.pos = fh, length, 0
        self.inflater = zlib.decompressobj()
        self.buffer = bytearray()

    def _more(self) -> None:
        pending = self.inflater.unconsumed_tail
        if not pending:
            if self.inflater.eof or self.left <= 0:
                raise _End
            pending = self.fh.read(min(_CHUNK, self.left))
            if not pending:
                raise _End
            self.left -= len(pending)
        try:
            self.buffer += self.inflater.decompress(pending, _CHUNK)
        except zlib.error:
            raise _End from None

    def read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._more()
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if n < 0:
            raise _End
        self.pos += n
        while n > 0:
            if not self.buffer:
                self._more()
            taken = min(n, len(self.buffer))
            del self.buffer[:taken]
            n -= taken


class _V5Walk:
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
            head = fh.read(128)
            order = {b"IM": "<", b"MI": ">"}.get(head[126:128])
            if len(head) < 128 or order is None:
                return  # a v4 file: no cells, no structs
            self.order = order
            while len(tag := fh.read(8)) == 8:
                kind, size = struct.unpack(order + "II", tag)
                if kind >> 16:  # a small element: its data sit in the tag
                    continue
                start = fh.tell()
                try:
                    if kind == _MI_COMPRESSED:
                        stream = _InflateStream(fh, size)
                        inner, length = self._tag(stream)[:2]
                        if inner == _MI_MATRIX:
                            self._matrix(stream, length, None, 0)
                    elif kind == _MI_MATRIX:
                        self._matrix(_FileStream(fh, size), size, None, 0)
                except _End:
                    return
                fh.seek(start + size + (0 if kind == _MI_COMPRESSED else -size % 8))

    def _tag(self, stream) -> tuple[int, int, bytes | None]:
        """``(type, bytes, data)`` of the next element's tag; ``data`` is the
        element's own bytes for a small element (packed in the tag), else None."""
        raw = stream.read(8)
        kind, size = struct.unpack(self.order + "II", raw)
        if kind >> 16:
            if kind >> 16 > 4:
                raise _End
            return kind & 0xFFFF, kind >> 16, raw[4 : 4 + (kind >> 16)]
        return kind, size, None

    def _field(self, stream, name: str) -> bytes:
        """The data of the next (header) element, at most :data:`_CHUNK` bytes."""
        _, size, data = self._tag(stream)
        if data is not None:
            return data
        if size > _CHUNK:
            raise DataFormatError(
                self.path,
                f"not a usable MAT-file: variable {name} has a {size}-byte header "
                f"element, over the {_CHUNK} a header may hold",
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

    def _matrix(self, stream, length: int, name: str | None, depth: int) -> None:
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
            raise _End
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
            raise _End
        stream.skip(rest)

    def _child(self, stream, name: str, depth: int) -> None:
        kind, length, data = self._tag(stream)
        if kind != _MI_MATRIX or data is not None:
            raise _End
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


def _rows_text(rows: list[str]) -> str | list[str]:
    """The rows of a char array: one row as a ``str`` (none as ``""``), several as a
    list."""
    if not rows:
        return ""
    return rows[0] if len(rows) == 1 else rows


def _cell_text(cells: np.ndarray):
    """A cell array whose every cell is a ``str`` as a list of them (a list of rows
    for a matrix of cells); any other cell array unchanged."""
    if cells.size == 0 or not all(isinstance(c, str) for c in cells.flat):
        return cells
    if cells.ndim == 2 and min(cells.shape) > 1:
        return cells.tolist()
    return list(cells.ravel())


def _v5_text(value, depth: int = 0):
    """A value scipy read from a v5 file with its char arrays (arrays of strings,
    one a row) as :func:`_rows_text` and cell arrays of strings as
    :func:`_cell_text`, in cells nested up to :data:`MAX_DEPTH` deep (deeper ones
    are left as scipy read them)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim <= 1:
        return _rows_text([str(r) for r in value])
    if isinstance(value, np.ndarray) and value.dtype == object and depth < MAX_DEPTH:
        out = np.empty(value.shape, dtype=object)
        for idx in np.ndindex(value.shape):
            out[idx] = _v5_text(value[idx], depth + 1)
        return _cell_text(out)
    return value


def _h5_attr(node: h5py.Dataset, name: str):
    """The attribute ``name`` of a v7.3 dataset, read only when it takes at most 64
    bytes (MATLAB's are a class name or a flag); ``None`` otherwise."""
    if name not in node.attrs or node.attrs.get_id(name).get_storage_size() > 64:
        return None
    value = node.attrs[name]
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


def _h5_text(codes: np.ndarray) -> str | list[str]:
    """A v7.3 char array (UTF-16 code units, MATLAB orientation) as text."""
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        raise ValueError(f"a char array of {codes.dtype} values")
    if codes.ndim < 2:  # MATLAB writes every array 2-D; a 1-D one is taken as a row
        codes = codes.reshape(1, -1)
    codes = codes.reshape(codes.shape[0], math.prod(codes.shape[1:]))
    rows = [row.astype("<u2").tobytes().decode("utf-16-le", "replace") for row in codes]
    return _rows_text(rows)


def _densify(x, path: str, what: str) -> np.ndarray:
    """``x`` as a dense array; a sparse ``x`` only when its dense size fits the bound
    of the file it came from."""
    if scipy.sparse.issparse(x):
        size = int(np.prod(x.shape, dtype=np.float64)) * 4
        if size > allowed_bytes(_file_size(path)):
            raise _too_big(path, f"{what} (a sparse {x.shape[0]} x {x.shape[1]})", size)
        x = x.toarray()
    return np.asarray(x)


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class _H5Walk:
    """The values of a v7.3 file's variables, bounded in depth
    (:data:`MAX_DEPTH`), in the number of groups, datasets and references visited
    (:data:`MAX_NODES`) and in the bytes read (``allowed``): hard links and
    reference arrays may point at one object many times over, so a file under 1 MB
    can fan out to 10^8 leaves within the depth limit."""

    def __init__(self, f: h5py.File, allowed: int) -> None:
        self.f = f
        self.allowed = allowed
        self.nodes = 0
        self.read = 0

    def _visit(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DataFormatError(
                self.f.filename,
                f"cell arrays nest more than {MAX_DEPTH} deep (a cycle?)",
            )
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise DataFormatError(
                self.f.filename,
                f"its groups and cell references fan out to more than {MAX_NODES} "
                "values (the same objects linked or referenced many times over?)",
            )

    def _count(self, nbytes: int) -> None:
        self.read += nbytes
        if self.read > self.allowed:
            raise _too_big(self.f.filename, "the values it references", self.read)

    def value(self, node, depth: int):
        self._visit(depth)
        if isinstance(node, h5py.Group):
            if {"data", "ir", "jc"} <= set(node.keys()):
                for key in ("data", "ir", "jc"):
                    self._count(int(node[key].size) * node[key].dtype.itemsize)
                n_rows = int(node.attrs["MATLAB_sparse"])
                jc = np.asarray(node["jc"], dtype=np.int64)
                return scipy.sparse.csc_matrix(
                    (np.asarray(node["data"]), np.asarray(node["ir"], np.int64), jc),
                    shape=(n_rows, len(jc) - 1),
                )
            return {k: self.value(node[k], depth + 1) for k in node.keys()}
        self._count(int(node.size) * node.dtype.itemsize)
        text = str(_h5_attr(node, "MATLAB_class")) == "char"
        if text and np.any(_h5_attr(node, "MATLAB_empty")):
            return ""  # an empty char array: its dataset holds its dimensions
        arr = node[()]
        if node.dtype == h5py.ref_dtype:
            out = np.empty(arr.shape, dtype=object)
            for idx in np.ndindex(arr.shape):
                out[idx] = self.value(self.f[arr[idx]], depth + 1)
            return _cell_text(out.T)
        if text:
            return _h5_text(np.asarray(arr).T)
        return np.asarray(arr).T


def dense_view(x, path: str, what: str) -> np.ndarray:
    """A (possibly sparse) 2-D matrix as dense float32, checked finite."""
    x = _densify(x, path, what)
    if x.ndim != 2 or x.dtype.kind not in "biuf":
        raise DataFormatError(path, f"{what} is not a 2-D numeric matrix ({x.shape})")
    return as_float32(x, path, what)


def class_labels(y, path: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class vector (any integer coding, e.g. ``1..k``) -> 0-based int32 and names.

    The names are ``"0" .. "k-1"`` (the files store no class names).
    """
    y = _densify(y, path, "the class labels").ravel()
    if y.dtype.kind not in "biuf":  # strings, cells, structs
        raise DataFormatError(path, f"class labels are {y.dtype} values, not integers")
    if y.size == 0 or not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
        raise DataFormatError(path, "class labels are not integers")
    values, inverse = np.unique(y, return_inverse=True)
    return inverse.astype(np.int32), tuple(str(i) for i in range(len(values)))


def multiview_corpus(
    path: str,
    views: dict[str, np.ndarray],
    view_kinds: dict[str, str],
    labels: np.ndarray,
    class_names: tuple[str, ...],
    name: str,
) -> Corpus:
    """A single-label multi-view corpus: ``labels`` and ``words`` = one-hot labels."""
    n = labels.shape[0]
    for k, v in views.items():
        if v.shape[0] != n:
            raise DataFormatError(path, f"view {k!r} has {v.shape[0]} rows, labels {n}")
    check_dense(path, n, len(class_names), 4, "its one-hot class matrix")
    words = np.zeros((n, len(class_names)), dtype=np.float32)
    words[np.arange(n), labels] = 1.0
    return Corpus.from_arrays(
        views,
        view_kinds=view_kinds,
        words=words,
        labels=labels,
        word_names=class_names,
        class_names=class_names,
        name=name,
    )
