"""Writing a file so that a crash never leaves it half-written."""

from __future__ import annotations

import os
import pathlib
import tempfile
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["atomic_write"]


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(binary file)`` on a temporary file next to ``path``, flush it to
    disk, then rename it to ``path``.

    The rename is atomic on POSIX file systems and the data is on disk (``fsync``)
    before the new name makes it visible, so a reader sees either the previous file
    or the complete new one, even after a crash. The temporary file
    (``.jaxannot-*.tmp`` in the same folder) is removed when ``write`` fails.

    Parameters
    ----------
    path : str or PathLike
        The file to write; its folder must exist.
    write : callable
        Writes the content to the open binary file it is given.
    """
    path = pathlib.Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".jaxannot-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
