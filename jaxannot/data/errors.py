"""Errors raised by the data loaders."""

from __future__ import annotations

__all__ = ["DataFormatError"]


class DataFormatError(ValueError):
    """A data file is malformed or does not hold what the loader expects.

    The message always names the file and, where one is known, the line number
    (1-based, as an editor shows it).

    Attributes
    ----------
    path : str
        The offending file.
    line : int or None
        1-based line number, or None when the problem is not tied to one line.
    """

    def __init__(self, path, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")
