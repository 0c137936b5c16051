"""Errors raised by the data loaders, and file names made safe to print."""

from __future__ import annotations

import errno
import os
import re

__all__ = ["DataFormatError", "check_link_loop", "printable"]

# C0 controls, DEL and C1 controls: a terminal acts on them (ESC starts a sequence
# that can retitle the window, clear the screen, move the cursor ...).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(name: object) -> str:
    """``name`` (a file name, or any text quoting one) safe to print on a terminal.

    Bytes that are not UTF-8 (held as surrogate escapes, as ``os`` decodes file
    names) and every control character -- C0 (``\\x00``-``\\x1f``), DEL and C1
    (``\\x80``-``\\x9f``) -- are written as ``\\xNN`` escapes; everything else is
    kept.

    Examples
    --------
    >>> printable("evil\\x1b]0;PWNED\\x07.jpg")
    'evil\\\\x1b]0;PWNED\\\\x07.jpg'
    """
    text = str(name).encode("utf-8", "surrogateescape")
    text = text.decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class DataFormatError(ValueError):
    """A data file is malformed or does not hold what the loader expects.

    The message always names the file and, where one is known, the line number
    (1-based, as an editor shows it); the file name and the message (which may
    quote the file's own text: an attribute name, a parser's error) go through
    :func:`printable`, so no control character of the file reaches a terminal.

    Attributes
    ----------
    path : str
        The offending file.
    line : int or None
        1-based line number, or None when the problem is not tied to one line.
    """

    def __init__(
        self, path: str | os.PathLike, message: str, line: int | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        name = printable(self.path)
        where = f"{name}, line {line}" if line is not None else name
        super().__init__(f"{where}: {printable(message)}")


def link_loop_error(path: str | os.PathLike) -> OSError:
    """The ``OSError`` (``ELOOP``) that names ``path`` as a symbolic link loop."""
    return OSError(
        errno.ELOOP,
        "a symbolic link loop (a link that leads back to itself)",
        os.fspath(path),
    )


def check_link_loop(path: str | os.PathLike) -> None:
    """``OSError`` (``ELOOP``) naming ``path`` when it is a symbolic link that
    leads back to itself: ``Path.exists`` and ``is_file`` say False for it, so it
    was reported as a missing file."""
    if not os.path.islink(path):
        return
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise link_loop_error(path) from None
