"""Bounded reading: every data file is opened, measured and sized the same way.

The one rule for what a file may expand to (:func:`allowed_bytes`: :data:`MAX_RATIO`
times its size, at least :data:`MIN_ALLOWANCE`, at most :data:`MAX_ARCHIVE_BYTES`)
bounds what the model archives inflate to (:mod:`jaxannot.data.archive`), what a
MAT-file declares (:mod:`jaxannot.data.matlab`), and every dense matrix built from a
compact file -- the one-hot classes of a MAT-file, the densified sparse ARFF, the
tag matrix of a photo dataset -- through :func:`check_dense`, before it is
allocated.

:func:`open_regular` opens a file without blocking (a named pipe is refused, not
waited on) and :func:`read_limited` reads one whole only when its size is under a
given bound, measured first. :func:`as_float32` casts float64 values to float32
only when they fit (a value of 1e300 would become infinite). Every failure is a
:class:`~jaxannot.data.errors.DataFormatError` naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

import numpy as np

from jaxannot.data.errors import DataFormatError, check_link_loop

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_RATIO",
    "MAX_TEXT_BYTES",
    "MIN_ALLOWANCE",
    "allowed_bytes",
    "as_float32",
    "beyond_float32",
    "check_dense",
    "file_size",
    "limit_text",
    "open_regular",
    "read_limited",
]

#: The most bytes the entries of one archive may hold once decompressed (16 GiB).
MAX_ARCHIVE_BYTES = 16 * 2**30
#: The most the entries may hold per byte of the file: deflate reaches about 1030
#: only on constant data; float parameters and features compress 1 to 10 times.
MAX_RATIO = 200
#: Decompressed bytes allowed to any archive, however small the file (64 MiB).
MIN_ALLOWANCE = 64 * 2**20

#: The most bytes of a text file (ARFF, CSV, JSON) read whole: its parser holds
#: every line, field or value as a Python object, several times the file's size.
MAX_TEXT_BYTES = 256 * 2**20

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def allowed_bytes(file_size: int) -> int:
    """The most bytes a ``file_size``-byte file may expand to once decompressed or
    densified: :data:`MAX_RATIO` times its size, at least :data:`MIN_ALLOWANCE`, at
    most :data:`MAX_ARCHIVE_BYTES`."""
    return min(MAX_ARCHIVE_BYTES, max(MIN_ALLOWANCE, MAX_RATIO * file_size))


def limit_text(file_size: int) -> str:
    """The bound of :func:`allowed_bytes` in words, for error messages."""
    return (
        f"the limit of {allowed_bytes(file_size)} for a {file_size}-byte file "
        f"({MAX_RATIO} times its size, at least {MIN_ALLOWANCE}, at most "
        f"{MAX_ARCHIVE_BYTES})"
    )


def file_size(path: str | os.PathLike) -> int:
    """The size of ``path`` in bytes (0 when it cannot be measured)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def check_dense(
    path: str | os.PathLike,
    rows: int,
    columns: int,
    itemsize: int,
    what: str,
    size: int | None = None,
) -> None:
    """Refuse a dense ``rows x columns`` matrix of ``itemsize``-byte values built
    from the file ``path`` when it would take more than :func:`allowed_bytes` of
    the file's ``size`` (measured when not given), before it is allocated.

    Raises
    ------
    DataFormatError
        Naming the file, the matrix and the limit.
    """
    size = file_size(path) if size is None else size
    needed = int(rows) * int(columns) * int(itemsize)
    if needed > allowed_bytes(size):
        raise DataFormatError(
            path,
            f"{what} ({rows} x {columns}) would take {needed} bytes, over "
            f"{limit_text(size)}",
        )


def open_regular(path: str | os.PathLike, what: str) -> tuple[BinaryIO, int]:
    """``(binary file, size)`` of ``path``, opened only if it is a regular file.

    The open does not block (``O_NONBLOCK``: a named pipe is refused at once, never
    waited on) and the type and size are read from the open descriptor
    (``fstat``), so the file cannot be swapped in between.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    OSError
        ``ELOOP`` for a symbolic link loop (named as one).
    DataFormatError
        Not a regular file, or it cannot be opened (naming ``what`` it should be).
    """
    check_link_loop(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{what} {os.fspath(path)} does not exist")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{what} {os.fspath(path)} does not exist (a broken link?)"
        ) from None
    except OSError as err:
        if err.errno == errno.EISDIR:
            raise DataFormatError(path, f"not a {what}: a folder") from None
        raise DataFormatError(path, f"cannot be read ({err.strerror or err})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "named pipe" if stat.S_ISFIFO(info.st_mode) else "special file"
            if stat.S_ISDIR(info.st_mode):
                kind = "folder"
            raise DataFormatError(path, f"not a {what}: a {kind}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise


def read_limited(path: str | os.PathLike, what: str, limit: int, why: str) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), read only
    when its size, measured first, is at most ``limit``.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file should be (``"ARFF file"``), for the messages.
    limit : int
        The most bytes read.
    why : str
        Why the limit (appended to the message of a file over it).

    Raises
    ------
    DataFormatError
        Over ``limit``, not a regular file, or unreadable.
    """
    fh, size = open_regular(path, what)
    with fh:
        if size > limit:
            raise DataFormatError(
                path, f"{size} bytes, over the {limit} a {what} may have ({why})"
            )
        try:
            data = fh.read(limit + 1)
        except OSError as err:
            raise DataFormatError(
                path, f"cannot be read ({err.strerror or err})"
            ) from None
    if len(data) > limit:  # it grew while read
        raise DataFormatError(path, f"over the {limit} bytes a {what} may have")
    return data


def beyond_float32(values: np.ndarray) -> np.ndarray:
    """Mask of the finite ``values`` beyond float32's range (about 3.4e38 in
    magnitude: casting would make them infinite), checked on the values as they
    are, before any cast; NaN and infinite values are not flagged (a reader may
    take them as missing).

    Examples
    --------
    >>> beyond_float32(np.array([1.0, -1e300, np.inf, np.nan])).tolist()
    [False, True, False, False]
    """
    values = np.asarray(values)
    if values.dtype.kind != "f" or values.dtype.itemsize <= 4:
        return np.zeros(values.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (np.abs(values) > _FLOAT32_MAX)


def as_float32(
    values: np.ndarray, path: str | os.PathLike, what: str, *, remedy: str = ""
) -> np.ndarray:
    """``values`` as float32, refused when one is NaN, infinite or outside the
    float32 range (about 3.4e38; casting would make it infinite); ``remedy`` is
    appended to the message.

    Raises
    ------
    DataFormatError
        Naming the file, ``what`` and the position of the first bad value.
    """
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        raise DataFormatError(path, f"{what} holds {values.dtype} values, not numbers")
    if values.dtype.kind == "f":
        bad = ~np.isfinite(values) | beyond_float32(values)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            value = values[where]
            problem = (
                "a NaN/inf value" if not np.isfinite(value)
                else f"the value {float(value):g}, beyond float32's range (3.4e38),"
            )  # fmt: skip
            at = f"row {where[0]}, col {where[1]}" if len(where) == 2 else list(where)
            suffix = f"; {remedy}" if remedy else ""
            raise DataFormatError(path, f"{what} has {problem} at {at}{suffix}")
    return values.astype(np.float32)
