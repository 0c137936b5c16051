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
from typing import Any

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
    """The folder ``path`` is written in (its symbolic links followed: where the
    file is written); :class:`UserError` when it does not exist."""
    from jaxannot.data.write_targets import resolve_target

    with writing(path, {errno.ELOOP}):
        folder = os.fspath(resolve_target(path).parent)
    if not os.path.isdir(folder):
        raise UserError(f"cannot write {path}: folder {folder} does not exist")
    return folder


def write_json(path: str, payload: Any) -> None:
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
    """The folders ``--dataset`` may be read from: the folder it names (as given,
    absolute), and the named dataset's folder under the data root (either may be
    what is loaded)."""
    from jaxannot.data.datasets import DATASETS, data_root

    folders = []
    if os.path.isdir(os.path.expanduser(dataset)):
        folders.append(pathlib.Path(os.path.abspath(os.path.expanduser(dataset))))
    spec = DATASETS.get(dataset.lower())
    if spec is not None:
        try:
            folders.append(real_path(data_root(data_dir) / spec.folder))
        except FileNotFoundError:  # no data root: loading says so
            pass
    return folders


def refuse_overwriting_inputs(
    outputs: dict[str, str | None],
    inputs: dict[str, list[pathlib.Path]],
    *,
    protect_inputs: bool = True,
    output_folders: Container[str] = ("--checkpoint",),
) -> None:
    """:class:`UserError` when an output (``flag -> path``) would change an input
    (``flag -> files or folders``), or two outputs are one file: the command would
    damage what it reads (say, ``--save`` over a dataset's file, so the dataset no
    longer loads).

    An output changes an input when, as given or with its symbolic links followed,
    it is an input file or folder, lies inside an input folder or inside a folder a
    link in one leads to, or is a hard link of an input file (same ``st_dev`` and
    ``st_ino``); an output folder (a flag of ``output_folders``, whose files the
    command replaces) also may not hold an input file or a hard link of one.
    Unless ``protect_inputs`` is false (an input the command also writes, such as
    ``--checkpoint``), the inputs are also registered with
    :func:`jaxannot.data.write_targets.protect`, so every file the command writes later
    (the fitted model, a checkpoint) is checked again when it is written.
    """
    from jaxannot.data.write_targets import InputSet, protect, resolve_target

    known = InputSet()
    for source, paths in inputs.items():
        for path in paths:
            known.add(source, path)
        if protect_inputs:
            protect(source, paths)
    _cache_beside_inputs(known)
    named = {flag: path for flag, path in outputs.items() if path}
    seen: dict[object, str] = {}
    for flag, path in named.items():
        with writing(path, {errno.ELOOP}):
            found = known.conflict(path)
            real = resolve_target(path)
        if found is not None:
            raise UserError(f"{flag} {path} {found.detail}")
        if flag in output_folders:
            _refuse_holding_inputs(flag, path, real, known)
        info = _file_identity(real)
        for key in (real, info):
            if key is not None and key in seen:
                raise UserError(f"{seen[key]} and {flag} name the same file {real}")
        seen.update({key: flag for key in (real, info) if key is not None})


def _refuse_holding_inputs(flag: str, path: str, real: pathlib.Path, known) -> None:
    """:class:`UserError` when the output folder ``real`` holds an input file (its
    real path inside it, or one of its entries a hard link of one)."""
    for name, source in known.files.items():
        if real in name.parents:
            raise UserError(
                f"{flag} {path} holds the file {name} that {source} reads: writing "
                "there could change that input; write it elsewhere"
            )
    try:
        entries = list(os.scandir(real))
    except OSError:  # not made yet, or not a folder (said later)
        return
    for entry in entries:
        try:
            info = entry.stat()
        except OSError:
            continue
        hit = known.inodes.get((info.st_dev, info.st_ino))
        if hit is not None:
            raise UserError(
                f"{flag} {path} holds {entry.name}, a hard link of the file {hit[0]} "
                f"that {hit[1]} reads: writing there could change that input; write "
                "it elsewhere"
            )


def _cache_beside_inputs(known) -> None:
    """Turn JAX's compilation cache off, with a warning, when its folder is an
    input or lies inside one (JAX writes there itself, past every check)."""
    import jax

    folder = jax.config.jax_compilation_cache_dir
    if not folder or not known:
        return
    found = known.conflict(folder)
    if found is not None:
        log.warning("compilation cache folder %s; running without the cache", found)
        jax.config.update("jax_compilation_cache_dir", None)


def _file_identity(path: pathlib.Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of an existing file, else None."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)
