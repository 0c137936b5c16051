"""Files the ``jaxannot`` commands write: checked before any work, written
atomically, and their errors as one line.

Before a command loads or fits anything, each output is checked
(:func:`check_writable_output`: its folder exists, its name fits the file system,
and :data:`PROBE_BYTES` can be written and flushed to disk there) and refused when
it would overwrite an input (:func:`refuse_overwriting_inputs`: an output inside the
dataset folder being read). An ``OSError`` while writing (full disk, file too large,
read-only file system, ...) becomes the one line ``jaxannot: error: cannot write
PATH: reason`` (:func:`writing`). Used by :mod:`jaxannot.cli` and
:mod:`jaxannot.cli.photos`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import pathlib
from collections.abc import Container, Iterator

__all__ = [
    "PROBE_BYTES",
    "WRITE_ERRNOS",
    "UserError",
    "check_writable_output",
    "dataset_folders",
    "folder_of",
    "real_path",
    "refuse_overwriting_inputs",
    "write_json",
    "writing",
]

log = logging.getLogger("jaxannot.cli")


class UserError(Exception):
    """An error caused by the user's input: reported in one line, exit status 2."""


#: Bytes each output's up-front check writes and flushes to disk before any work:
#: a full disk or an exhausted quota is found then, not after the fit. (An output
#: larger than this can still fail when it is written: one error line then too.)
PROBE_BYTES = 1 << 20

#: The errors of writing (not reading) a file: full disk, quota, file too large,
#: read-only file system, name too long.
WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.ENAMETOOLONG}
)


def folder_of(path: str) -> str:
    """The folder ``path`` is written in; :class:`UserError` when it does not exist."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"cannot write {path}: folder {folder} does not exist")
    return folder


def write_json(path: str, payload) -> None:
    """``payload`` as indented JSON at ``path``, atomically; write errors as one
    line (:func:`writing`)."""
    from jaxannot.data.atomic import atomic_write

    folder_of(path)
    text = json.dumps(payload, indent=2, sort_keys=False) + "\n"
    with writing(path):
        atomic_write(path, lambda fh: fh.write(text.encode()))
    log.info("wrote %s", path)


@contextlib.contextmanager
def writing(path: str, errnos: Container[int] | None = None) -> Iterator[None]:
    """An ``OSError`` of the block (those of ``errnos`` only, when given) as the
    one-line :class:`UserError` ``cannot write PATH: reason`` (a full disk, a file
    too large, a read-only file system, a name too long, ...)."""
    try:
        yield
    except OSError as err:
        if errnos is not None and err.errno not in errnos:
            raise
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None


def check_writable_output(path: str, *, folder: bool = False) -> None:
    """Fail now, not after hours of fitting, when ``path`` cannot be written: its
    folder, its name, and :data:`PROBE_BYTES` of room on the disk. ``folder``:
    ``path`` is a folder, written whole next to its old self and swapped in."""
    parent = folder_of(path)
    if not folder and os.path.isdir(path):
        raise UserError(f"cannot write {path}: it is a folder")
    from jaxannot.data.atomic import check_writable

    with writing(path):
        try:
            os.lstat(path)  # a name too long for the file system fails here
        except FileNotFoundError:
            pass
        check_writable(parent, PROBE_BYTES)  # as atomic_write: a temp file, renamed


def real_path(path: str | os.PathLike) -> pathlib.Path:
    """``path`` absolute, ``~`` expanded, symbolic links resolved."""
    return pathlib.Path(os.path.realpath(os.path.expanduser(path)))


def dataset_folders(dataset: str, data_dir: str | None) -> list[pathlib.Path]:
    """The folders ``--dataset`` may be read from: the folder it names, and the
    named dataset's folder under the data root (either may be what is loaded)."""
    from jaxannot.data.datasets import DATASETS, data_root

    folders = []
    if os.path.isdir(os.path.expanduser(dataset)):
        folders.append(real_path(dataset))
    spec = DATASETS.get(dataset.lower())
    if spec is not None:
        try:
            folders.append(real_path(data_root(data_dir) / spec.folder))
        except FileNotFoundError:  # no data root: loading says so
            pass
    return folders


def refuse_overwriting_inputs(
    outputs: dict[str, str | None], inputs: dict[str, list[pathlib.Path]]
) -> None:
    """:class:`UserError` when an output (``flag -> path``) is an input folder
    (``flag -> folders``) or lies inside one, or two outputs are one file: the
    command would damage what it reads (say, ``--save`` over a dataset's file, so
    the dataset no longer loads)."""
    named = {flag: real_path(path) for flag, path in outputs.items() if path}
    for flag, out in named.items():
        for source, folders in inputs.items():
            for folder in folders:
                if out == folder or folder in out.parents:
                    where = "is" if out == folder else "is inside"
                    raise UserError(
                        f"{flag} {outputs[flag]} {where} the folder {folder} that "
                        f"{source} reads: writing it would change that input; "
                        "write it elsewhere"
                    )
    seen: dict[pathlib.Path, str] = {}
    for flag, out in named.items():
        if out in seen:
            raise UserError(f"{seen[out]} and {flag} name the same file {out}")
        seen[out] = flag
