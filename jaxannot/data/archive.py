"""The ``.npz`` archives jaxannot writes, written with a checksum and read defensively.

Saved models (``jaxannot evaluate --save MODEL.npz``), a photo dataset's
``features.npz`` and its extractor's ``extractor.npz`` are ``.npz`` archives (a zip of
``.npy`` arrays that ``numpy.load`` reads) written by :func:`write_archive`, which
adds two things:

- an optional JSON header, the ``uint8`` entry ``__meta__`` holding a JSON object;
- a SHA-256 digest of every byte of the file before it, in the zip comment
  (``jaxannot-sha256:<64 hex digits>``), so that any change to the file -- a
  truncation, a flipped bit, even in a byte the zip format does not check -- is
  found when it is read.

:func:`read_archive` is the one reader of all three kinds. It never unpickles, checks
the digest (files written before digests existed, without a zip comment, are read
without it), parses each ``.npy`` header itself and checks the array's size against
the zip entry before reading it (a damaged shape never allocates), and accepts only
bool and numeric arrays. Before anything is decompressed, the sizes the zip
directory declares are bounded (a "zip bomb" is refused, not inflated): the entries
together may hold at most :data:`MAX_RATIO` times the file's size (with
:data:`MIN_ALLOWANCE` bytes allowed to any file), and never more than
:data:`MAX_ARCHIVE_BYTES`. Whatever is wrong, it raises one
:class:`~jaxannot.data.errors.DataFormatError` whose one-line message names the file,
what is wrong with it and what to do, never a zip, zlib or numpy exception.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import pathlib
import struct
import zipfile
from collections.abc import Mapping

import numpy as np

from jaxannot.data.atomic import atomic_write
from jaxannot.data.bounded import (
    MAX_ARCHIVE_BYTES,
    MAX_RATIO,
    MAX_TEXT_BYTES,
    MIN_ALLOWANCE,
    allowed_bytes,
    limit_text,
    open_regular,
    read_limited,
)
from jaxannot.data.errors import DataFormatError, printable

__all__ = [
    "Archive",
    "allowed_bytes",
    "limit_text",
    "MAX_ARCHIVE_BYTES",
    "MAX_RATIO",
    "MIN_ALLOWANCE",
    "read_archive",
    "read_json_object",
    "write_archive",
]

META = "__meta__"
_DIGEST_PREFIX = b"jaxannot-sha256:"
_DIGEST_LENGTH = len(_DIGEST_PREFIX) + 64  # the prefix and a hex SHA-256
_END_RECORD = b"PK\x05\x06"  # zip "end of central directory" record signature
_END_RECORD_SIZE = 22  # its size without the comment; the comment length ends it
_CHUNK = 2**24  # bytes decompressed at a time into an array
_ARRAY_KINDS = "biuf"  # bool, signed, unsigned, float: all the library stores


@dataclasses.dataclass(frozen=True)
class Archive:
    """What :func:`read_archive` found.

    Attributes
    ----------
    meta : dict or None
        The JSON header (``None`` when the archive has none).
    arrays : dict of str to numpy array
        Every other entry by name (without ``.npy``).
    """

    meta: dict | None
    arrays: dict[str, np.ndarray]


def write_archive(
    path: str | os.PathLike,
    arrays: Mapping[str, np.ndarray],
    *,
    meta: Mapping | None = None,
) -> None:
    """Write ``arrays`` (and the JSON header ``meta``) to ``path``, atomically.

    The archive is deflate-compressed and ends with the digest comment (module
    docstring); ``numpy.load`` reads it as any ``.npz``.

    Parameters
    ----------
    path : path-like
        The file to write (its folder must exist).
    arrays : mapping of str to array
        The entries; no name may be ``__meta__``.
    meta : mapping, optional
        JSON-able header.
    """
    if META in arrays:
        raise ValueError(f"an array may not be called {META!r}")
    entries = {name: np.asarray(value) for name, value in arrays.items()}
    if meta is not None:
        entries[META] = np.frombuffer(json.dumps(dict(meta)).encode(), np.uint8)
    atomic_write(path, lambda fh: fh.write(_serialize(entries)))


def _serialize(entries: dict[str, np.ndarray]) -> bytes:
    """The compressed archive of ``entries`` with the digest comment, in memory."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **entries)
    data = bytearray(buffer.getvalue())
    end = len(data) - _END_RECORD_SIZE
    if data[end : end + 4] != _END_RECORD or data[-2:] != b"\0\0":
        raise AssertionError("numpy wrote a zip that does not end as expected")
    data[-2:] = struct.pack("<H", _DIGEST_LENGTH)  # the comment's length, then it
    data += _DIGEST_PREFIX + hashlib.sha256(data).hexdigest().encode()
    return bytes(data)


def read_archive(path: str | os.PathLike, what: str, *, remedy: str = "") -> Archive:
    """Read an archive written by :func:`write_archive` (or ``numpy.savez``).

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be (e.g. ``"jaxannot model"``), for the messages.
    remedy : str
        What the user can do about a damaged file (appended to the messages).

    Returns
    -------
    Archive

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    DataFormatError
        Anything else: not a regular file, unreadable, truncated, altered (digest),
        not a zip of ``.npy`` arrays, an entry of another type, a header that is
        not a JSON object.
    """
    path = pathlib.Path(path)

    def fail(problem: str) -> DataFormatError:
        return DataFormatError(path, f"{problem}{'; ' + remedy if remedy else ''}")

    try:
        fh, size = open_regular(path, what)
    except DataFormatError as err:  # not a regular file, unreadable: add the remedy
        raise fail(str(err).removeprefix(f"{printable(path)}: ")) from None
    with fh:
        if not size:
            raise fail(f"empty file, not a {what}")
        try:  # the zip directory ends the file: look there before reading it whole
            fh.seek(max(0, size - _END_RECORD_SIZE - 65535))
            _check_end_record(fh.read(), fail, what)
            fh.seek(0)
            _check_directory(fh, size, fail, what)
            fh.seek(0)
            data = fh.read()
        except OSError as err:
            raise fail(f"cannot be read ({err.strerror or err})") from None
    if not data:
        raise fail(f"empty file, not a {what}")
    _check_digest(data, fail, what)
    try:  # zip, zlib and npy-header errors of every kind: all mean a damaged file
        entries = _read_entries(data, fail, what)
    except DataFormatError:
        raise
    except Exception as err:
        raise fail(f"corrupt {what} ({_one_line(err)})") from None
    meta = None
    if META in entries:
        meta = _decode_meta(entries.pop(META), fail)
    return Archive(meta, entries)


def read_json_object(path: str | os.PathLike, what: str, *, remedy: str = "") -> dict:
    """The JSON object in the text file ``path``; :class:`DataFormatError` when the
    file is not UTF-8 JSON or holds something else than an object (a list, ...)."""
    path = pathlib.Path(path)
    suffix = f"; {remedy}" if remedy else ""
    raw = read_limited(path, what, MAX_TEXT_BYTES, "a JSON file is read whole")
    try:
        value = _json_loads(raw)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise DataFormatError(
            path, f"not a {what} ({_one_line(err)}){suffix}"
        ) from None
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise DataFormatError(
            path, f"not a {what}: a JSON {kind}, not an object{suffix}"
        )
    return value


# ------------------------------------------------------------------ internals
def _one_line(err: BaseException, limit: int = 160) -> str:
    """``Type: message`` on one line, at most ``limit`` characters."""
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_digest(data: bytes, fail, what: str) -> None:
    """Check the digest comment (module docstring); a zip without a comment (written
    by an older jaxannot or by numpy) passes unchecked."""
    start = _check_end_record(data, fail, what)
    (comment_length,) = struct.unpack_from("<H", data, start + _END_RECORD_SIZE - 2)
    if comment_length == 0:
        return
    comment = data[start + _END_RECORD_SIZE :]
    digest = hashlib.sha256(data[: start + _END_RECORD_SIZE]).hexdigest().encode()
    if comment != _DIGEST_PREFIX + digest:
        raise fail(f"corrupt {what}: its checksum does not match its content")


def _check_end_record(data: bytes, fail, what: str) -> int:
    """Where the zip "end of central directory" record starts in ``data`` (the
    file, or its last 64 KiB: the record and its comment end the file); a file
    without one, or with bytes after its comment, is refused."""
    start = data.rfind(_END_RECORD, max(0, len(data) - _END_RECORD_SIZE - 65535))
    if start < 0 or start + _END_RECORD_SIZE > len(data):
        raise fail(f"not a {what}: no zip directory at its end (truncated?)")
    (comment_length,) = struct.unpack_from("<H", data, start + _END_RECORD_SIZE - 2)
    if start + _END_RECORD_SIZE + comment_length != len(data):
        raise fail(f"corrupt {what}: its zip directory does not end the file")
    return start


def _json_loads(raw: bytes):
    """``json.loads`` of UTF-8 ``raw``; a nesting too deep for Python's parser (a
    RecursionError) is a ``ValueError`` like any other malformed JSON."""
    text = raw.decode("utf-8")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _check_sizes(infos: list[zipfile.ZipInfo], file_size: int, fail, what) -> None:
    """Refuse entries whose declared sizes exceed the bounds of the module docstring
    before any of them is decompressed."""
    declared = sum(info.file_size for info in infos)
    if declared > allowed_bytes(file_size):
        raise fail(
            f"not a {what}: its entries would decompress to {declared} bytes, over "
            f"{limit_text(file_size)}"
        )


def _check_directory(fh, size: int, fail, what: str) -> None:
    """Bound the sizes the zip directory of the open file ``fh`` declares
    (:func:`_check_sizes`) reading only the directory, before the file is read
    whole."""
    try:
        with zipfile.ZipFile(fh) as archive:
            infos = archive.infolist()
    except Exception as err:  # zipfile raises many types on a damaged directory
        raise fail(f"corrupt {what} ({_one_line(err)})") from None
    _check_sizes(infos, size, fail, what)


def _read_entries(data: bytes, fail, what: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        _check_sizes(archive.infolist(), len(data), fail, what)
        for info in archive.infolist():
            name = info.filename
            if not name.endswith(".npy") or len(name) == 4:
                raise fail(f"entry {name!r} is not a .npy array")
            key = name[:-4]
            if key in out:
                raise fail(f"entry {name!r} appears twice")
            with archive.open(info) as fh:
                out[key] = _read_npy(fh, info, fail)
    return out


def _read_npy(fh, info: zipfile.ZipInfo, fail) -> np.ndarray:
    """One ``.npy`` entry; its header is checked before any allocation."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = fmt.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = fmt.read_array_header_2_0(fh)
    else:
        raise fail(f"entry {info.filename!r}: unsupported .npy version {version}")
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None:
        raise fail(f"entry {info.filename!r} holds {dtype} values, not numbers")
    expected = math.prod(shape) * dtype.itemsize
    header = fh.tell()
    if info.file_size - header != expected:
        raise fail(
            f"entry {info.filename!r}: shape {shape} needs {expected} bytes, the "
            f"archive holds {info.file_size - header}"
        )
    out = np.empty(shape, dtype, order="F" if fortran else "C")
    target = memoryview(out.reshape(-1, order="A")).cast("B")
    done = 0
    while done < expected:  # in chunks: the array is the only full-size buffer
        chunk = fh.read(min(_CHUNK, expected - done))
        if not chunk:
            raise fail(f"entry {info.filename!r} is cut short")
        target[done : done + len(chunk)] = chunk
        done += len(chunk)
    return out


def _decode_meta(raw: np.ndarray, fail) -> dict:
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise fail(f"its header {META!r} is not a JSON text")
    try:
        meta = _json_loads(raw.tobytes())
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise fail(f"its header is not JSON ({_one_line(err)})") from None
    if not isinstance(meta, dict):
        raise fail(f"its header is a JSON {type(meta).__name__}, not an object")
    return meta
