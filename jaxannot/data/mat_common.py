"""What the readers of both MAT-file versions share (:mod:`jaxannot.data.matlab`).

The bounds on the arrays a file's variables nest (:data:`MAX_DEPTH`,
:data:`MAX_NODES`), the errors of an unreadable or too big file, and text read the
same from both versions: a char array's rows (:func:`rows_text`) and a cell array
of strings as a list of them (:func:`cell_text`).
"""

from __future__ import annotations

import os

import numpy as np

from jaxannot.data.bounded import limit_text
from jaxannot.data.errors import DataFormatError

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "unreadable_error",
    "too_big_error",
    "rows_text",
    "cell_text",
]

#: How deep cell arrays may nest in a v7.3 file (references to references ...).
MAX_DEPTH = 16
#: How many groups, datasets and references a v7.3 file's variables may hold in
#: all, each counted as often as it is reached.
MAX_NODES = 10_000


def unreadable_error(path: str, e: Exception) -> DataFormatError:
    """The error for a MAT-file its reader failed on.

    Parameters
    ----------
    path : str
        The file.
    e : Exception
        What the reader (scipy or h5py) raised.

    Returns
    -------
    DataFormatError
        Naming the file and the reader's error.
    """
    return DataFormatError(path, f"unreadable MAT-file ({type(e).__name__}: {e})")


def too_big_error(path: str, what: str, size: int) -> DataFormatError:
    """The error for a MAT-file whose contents would take more memory than allowed.

    Parameters
    ----------
    path : str
        The file (its size sets the limit, :func:`~jaxannot.data.bounded.limit_text`).
    what : str
        What would take the memory (a variable, the inflated elements).
    size : int
        The bytes it would take, at least.

    Returns
    -------
    DataFormatError
        Naming the file, ``what``, ``size`` and the limit.
    """
    return DataFormatError(
        path,
        f"not a usable MAT-file: {what} would take {size} bytes or more, over "
        f"{limit_text(os.path.getsize(path))}",
    )


def rows_text(rows: list[str]) -> str | list[str]:
    """The rows of a char array: one row as a ``str`` (none as ``""``), several as a
    list.

    Parameters
    ----------
    rows : list of str
        The char array's rows.

    Returns
    -------
    str or list of str
        The only row, ``""`` for none, or the rows.
    """
    if not rows:
        return ""
    return rows[0] if len(rows) == 1 else rows


def cell_text(cells: np.ndarray) -> np.ndarray | list:
    """A cell array whose every cell is a ``str`` as a list of them (a list of rows
    for a matrix of cells); any other cell array unchanged.

    Parameters
    ----------
    cells : numpy.ndarray
        An object array of cells.

    Returns
    -------
    numpy.ndarray or list
        A list of ``str`` (of lists of ``str`` for a matrix), or ``cells`` itself
        when it is empty or some cell is not a ``str``.
    """
    if cells.size == 0 or not all(isinstance(c, str) for c in cells.flat):
        return cells
    if cells.ndim == 2 and min(cells.shape) > 1:
        return cells.tolist()
    return list(cells.ravel())
