"""Reading a checkpoint file of :mod:`jaxannot.runtime.checkpoint` safely: ``stat``
first (a FIFO or a device is refused without opening it, so nothing blocks), then
the bounded archive reader (:func:`jaxannot.data.archive.read_archive`: declared
sizes bounded by the file's size before anything is decompressed, no pickles), then
the format, the version and the header's entries. Every message names the file."""

from __future__ import annotations

import errno
import os
import pathlib
import stat

import numpy as np

__all__ = ["FORMAT", "VERSION", "CheckpointError", "read_checked"]

#: The ``format`` entry of a checkpoint's header.
FORMAT = "jaxannot.checkpoint"
#: The checkpoint format's version (1: one loss per step, a VEM fit's fault in its
#: state; 2: every info leaf of the steps).
VERSION = 2


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used for this fit."""


def read_checked(path: pathlib.Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the arrays of the checkpoint ``path``, its format, version
    and header entries checked.

    Parameters
    ----------
    path : pathlib.Path
        The file.

    Returns
    -------
    meta : dict
        The header (``fingerprint``, ``step``, ``key_impls``, ...).
    arrays : dict of str to numpy.ndarray
        The saved arrays by entry name.

    Raises
    ------
    CheckpointError
        Not a regular file, unreadable, over the archive bounds, of another format
        or an older version, or a header entry missing or of the wrong type.
    """
    meta, arrays = _read(path)
    _check_meta(path, meta)
    return meta, arrays


#: The entries of a checkpoint's header and their types (the format's and version's
#: are checked on their own).
_META_TYPES = {"fingerprint": str, "step": int, "key_impls": list}


def _check_meta(path: pathlib.Path, meta: dict) -> None:
    """:class:`CheckpointError` naming the header entry that is missing or of the
    wrong type (a damaged or hand-edited file)."""
    for key, kind in _META_TYPES.items():
        if key not in meta:
            raise CheckpointError(
                f"checkpoint {path}: its header has no `{key}` entry (damaged or not "
                "written by jaxannot); delete it to start the fit over"
            )
        value = meta[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CheckpointError(
                f"checkpoint {path}: its header's `{key}` is {value!r}, not "
                f"{'an' if kind is int else 'a'} {kind.__name__}; delete it to start "
                "the fit over"
            )


def _regular_file(path: pathlib.Path) -> None:
    """:class:`CheckpointError` unless ``path`` (links followed) is a regular file;
    found with ``stat``, never by opening it (a FIFO would block the open)."""
    try:
        info = os.stat(path)
    except OSError as err:
        problem = (
            "is a symbolic link loop"
            if err.errno == errno.ELOOP
            else f"cannot be read ({err.strerror or err})"
        )
        raise CheckpointError(
            f"checkpoint {path} {problem}; delete it to start the fit over"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(
            f"checkpoint {path} is not a regular file (a FIFO, a device or a "
            "folder); delete it to start the fit over"
        )


def _read(path: pathlib.Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the arrays of ``path``, read by the bounded archive reader
    (:func:`jaxannot.data.archive.read_archive`: sizes checked before anything is
    decompressed or allocated, no pickles)."""
    from jaxannot.data.archive import read_archive
    from jaxannot.data.errors import DataFormatError

    _regular_file(path)
    try:
        archive = read_archive(path, "jaxannot checkpoint")
    except (DataFormatError, OSError) as err:
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({_reason(err)}): not a jaxannot "
            f"checkpoint v{VERSION}; delete it to start the fit over"
        ) from None
    meta = archive.meta
    if (
        isinstance(meta, dict)
        and meta.get("format") == FORMAT
        and meta.get("version") == 1
    ):
        raise CheckpointError(
            f"checkpoint {path} was written by an older jaxannot (checkpoint v1: one "
            f"loss per step, a VEM fit's fault in its state), not v{VERSION}; delete "
            "it to start the fit over"
        )
    if (
        not isinstance(meta, dict)
        or meta.get("format") != FORMAT
        or meta.get("version") != VERSION
    ):
        raise CheckpointError(
            f"checkpoint {path}: not a jaxannot checkpoint v{VERSION}"
        )
    return meta, archive.arrays


def _reason(err: BaseException) -> str:
    """The error's message without the file name it starts with."""
    text = " ".join(str(err).split())
    _, sep, rest = text.partition(": ")
    return rest if sep and rest else text
