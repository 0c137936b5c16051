"""What the readers of both MAT-file versions share (:mod:`jaxannot.data.matlab`).

The bounds on the arrays a file's variables nest (:data:`MAX_DEPTH`,
:data:`MAX_NODES`), the errors of an unreadable or too big file, and text read the
same from both versions: a char array's rows (:func:`_rows_text`) and a cell array
of strings as a list of them (:func:`_cell_text`).
"""

from __future__ import annotations

import os

import numpy as np

from jaxannot.data.bounded import limit_text
from jaxannot.data.errors import DataFormatError

__all__ = ["MAX_DEPTH", "MAX_NODES"]

#: How deep cell arrays may nest in a v7.3 file (references to references ...).
MAX_DEPTH = 16
#: How many groups, datasets and references a v7.3 file's variables may hold in
#: all, each counted as often as it is reached.
MAX_NODES = 10_000


def _unreadable(path: str, e: Exception) -> DataFormatError:
    return DataFormatError(path, f"unreadable MAT-file ({type(e).__name__}: {e})")


def _too_big(path: str, what: str, size: int) -> DataFormatError:
    return DataFormatError(
        path,
        f"not a usable MAT-file: {what} would take {size} bytes or more, over "
        f"{limit_text(os.path.getsize(path))}",
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
