"""The targets of a write, and the inputs a command reads that no write may change.

:func:`resolve_target` gives the file a write to a path changes (symbolic links
followed); inside a :func:`protecting` block, the inputs registered with
:func:`protect` (an :class:`InputSet`: real paths, and the ``(st_dev, st_ino)`` of
every regular file among them) are refused as targets by
:func:`~jaxannot.data.atomic.atomic_write` and
:func:`~jaxannot.data.atomic.atomic_folder` (:func:`checked_target` raises
:class:`OverwritesInput`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import pathlib
import stat
from collections.abc import Iterable, Iterator

from jaxannot.data.errors import link_loop_error

__all__ = [
    "InputSet",
    "OverwritesInput",
    "protect",
    "protecting",
    "resolve_target",
    "checked_target",
]

# the logger of jaxannot.data.atomic, where these were first
log = logging.getLogger("jaxannot.data.atomic")

#: How deep :meth:`InputSet.add` walks an input folder (deeper entries are still
#: covered by the folder itself; only their links and hard links go unrecorded).
MAX_INPUT_DEPTH = 32
#: How many entries of one input folder :meth:`InputSet.add` looks at.
MAX_INPUT_ENTRIES = 200_000


class OverwritesInput(ValueError):
    """A target that is, or lies inside, something being read.

    Attributes
    ----------
    target : str
        The output as given.
    relation : str
        ``"is"``, ``"is inside"`` or ``"is a hard link of"``.
    kind : str
        ``"file"`` or ``"folder"``.
    input : pathlib.Path
        The input it would change (its real path).
    source : str
        What reads that input (a flag such as ``--dataset``).
    """

    def __init__(
        self, target: str, relation: str, kind: str, input: pathlib.Path, source: str
    ) -> None:
        self.target, self.relation, self.kind = target, relation, kind
        self.input, self.source = input, source
        super().__init__(f"{target} {self.detail}")

    @property
    def detail(self) -> str:
        """The message without the target: ``is inside the folder X that S reads:
        ...``."""
        return (
            f"{self.relation} the {self.kind} {self.input} that {self.source} reads: "
            "writing it would change that input; write it elsewhere"
        )


def resolve_target(path: str | os.PathLike) -> pathlib.Path:
    """The file a write to ``path`` changes: absolute, ``~`` expanded, every
    symbolic link followed (a final component that does not exist yet is kept).

    Raises
    ------
    OSError
        ``ELOOP``: a symbolic link loop on the way (named as such, not as a
        missing file).
    """
    lexical = os.path.abspath(os.path.expanduser(os.fspath(path)))
    try:
        return pathlib.Path(os.path.realpath(lexical, strict=True))
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise link_loop_error(path) from None
    return pathlib.Path(os.path.realpath(lexical))


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the regular file ``path`` (links followed), else
    None."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


@dataclasses.dataclass
class InputSet:
    """What a command reads, as :func:`atomic_write` compares targets with it.

    Attributes
    ----------
    folders : dict of pathlib.Path to str
        Input folders (as given and resolved, and every folder a link inside one
        leads to) and what reads them.
    files : dict of pathlib.Path to str
        Input files (as given and resolved) and what reads them.
    inodes : dict of (int, int) to (pathlib.Path, str)
        ``(st_dev, st_ino)`` of every regular input file: its path and reader.
    """

    folders: dict[pathlib.Path, str] = dataclasses.field(default_factory=dict)
    files: dict[pathlib.Path, str] = dataclasses.field(default_factory=dict)
    inodes: dict[tuple[int, int], tuple[pathlib.Path, str]] = dataclasses.field(
        default_factory=dict
    )

    def __bool__(self) -> bool:
        return bool(self.folders or self.files)

    def add(self, source: str, path: str | os.PathLike) -> None:
        """Record ``path`` (a file or a folder, read by ``source``).

        A folder is walked (iteratively, at most :data:`MAX_INPUT_DEPTH` deep and
        :data:`MAX_INPUT_ENTRIES` entries) for the files and folders its symbolic
        links lead to and the identities of its regular files. A path that does not
        exist is recorded as a file and as a folder (a checkpoint folder not made
        yet: nothing may be written inside it either).
        """
        lexical = pathlib.Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
        real = pathlib.Path(os.path.realpath(lexical))
        if not real.is_dir():
            for name in (lexical, real):
                self.files.setdefault(name, source)
                if not os.path.lexists(real):  # a folder to be made (a checkpoint)
                    self.folders.setdefault(name, source)
            self._add_inode(real, source)
            return
        self.folders.setdefault(lexical, source)
        self._walk(real, source)

    def _add_inode(self, path: pathlib.Path, source: str) -> None:
        key = _identity(path)
        if key is not None:
            self.inodes.setdefault(key, (path, source))

    def _walk(self, top: pathlib.Path, source: str) -> None:
        seen: set[tuple[int, int]] = set()
        stack = [(top, 0)]
        entries = 0
        while stack:
            folder, depth = stack.pop()
            try:
                info = os.stat(folder)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            self.folders.setdefault(folder, source)
            try:
                scan = list(os.scandir(folder))
            except OSError:
                continue
            for entry in scan:
                entries += 1
                if entries > MAX_INPUT_ENTRIES:
                    log.debug("%s: more than %d entries; not all recorded", top,
                              MAX_INPUT_ENTRIES)  # fmt: skip
                    return
                path = pathlib.Path(entry.path)
                try:
                    is_link = entry.is_symlink()
                    is_dir = entry.is_dir()  # follows links
                except OSError:
                    continue
                if is_dir:
                    real = pathlib.Path(os.path.realpath(path)) if is_link else path
                    if depth < MAX_INPUT_DEPTH:
                        stack.append((real, depth + 1))
                    else:
                        self.folders.setdefault(real, source)
                    continue
                if is_link:
                    self.files.setdefault(pathlib.Path(os.path.realpath(path)), source)
                self.files.setdefault(path, source)
                self._add_inode(path, source)

    def conflict(self, target: str | os.PathLike) -> OverwritesInput | None:
        """The :class:`OverwritesInput` a write to ``target`` would be (as given
        and resolved: :func:`resolve_target`), else None."""
        shown = os.fspath(target)
        lexical = pathlib.Path(os.path.abspath(os.path.expanduser(shown)))
        real = resolve_target(target)
        names = tuple(dict.fromkeys((lexical, real)))
        for name in names:
            for folder, source in self.folders.items():
                if name == folder:
                    return OverwritesInput(shown, "is", "folder", folder, source)
                if folder in name.parents:
                    return OverwritesInput(shown, "is inside", "folder", folder, source)
        for name in names:
            if name in self.files:
                return OverwritesInput(shown, "is", "file", name, self.files[name])
        key = _identity(real)
        if key is not None and key in self.inodes:
            path, source = self.inodes[key]
            return OverwritesInput(shown, "is a hard link of", "file", path, source)
        return None


_PROTECTED: list[InputSet] = []


@contextlib.contextmanager
def protecting() -> Iterator[InputSet]:
    """A scope in which :func:`protect` registers inputs that every
    :func:`atomic_write` and :func:`atomic_folder` refuses to write over; the
    registrations end with the block."""
    inputs = InputSet()
    _PROTECTED.append(inputs)
    try:
        yield inputs
    finally:
        _PROTECTED.remove(inputs)


def protect(source: str, paths: Iterable[str | os.PathLike]) -> None:
    """Register ``paths`` (read by ``source``) with every enclosing
    :func:`protecting` block (no effect outside one)."""
    paths = list(paths)
    for inputs in _PROTECTED:
        for path in paths:
            inputs.add(source, path)


def checked_target(path: str | os.PathLike) -> pathlib.Path:
    """:func:`resolve_target` of ``path``; :class:`OverwritesInput` when a
    protected input would be written over.

    Parameters
    ----------
    path : str or os.PathLike
        Where an output is to be written.

    Returns
    -------
    pathlib.Path
        The file to write.

    Raises
    ------
    OverwritesInput
        Writing it would overwrite an input in use.
    """
    for inputs in _PROTECTED:
        found = inputs.conflict(path)
        if found is not None:
            raise found
    return resolve_target(path)
