"""Writing a file or a folder so that a crash never leaves it half-written, and
never over what is being read.

Every temporary name is ``.jaxannot-PID-XXXXXXXX.tmp`` next to its target (``PID``:
the writing process). A process killed outright (``kill -9``, a power cut) cannot
remove its temporary files; the next write in the same folder does
(:func:`remove_stale_temp`): a name of that pattern whose process is no longer
running and that is older than the process looking at it.

Every write goes to the *resolved* target (:func:`resolve_target`: symbolic links
followed), so an output named through a link replaces the file the link points at
and the link stays a link. Inside a :func:`protecting` block, the inputs registered
with :func:`protect` (an :class:`InputSet`: the real paths of the folders and files
read, and the ``(st_dev, st_ino)`` of every regular file among them, so a hard link
is recognised too) are refused as targets: :func:`atomic_write` and
:func:`atomic_folder` raise :class:`OverwritesInput` for a target that is an input
file, a hard link of one, an input folder or lies inside one. Those targets and
inputs are in :mod:`jaxannot.data.write_targets` (its names re-exported here).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import pathlib
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

from jaxannot.data.write_targets import (
    InputSet,
    OverwritesInput,
    checked_target,
    protect,
    protecting,
    resolve_target,
)
from jaxannot.signals import interrupts_held

__all__ = [
    "InputSet",
    "OverwritesInput",
    "atomic_folder",
    "atomic_write",
    "check_writable",
    "protect",
    "protecting",
    "remove_stale_temp",
    "resolve_target",
]

log = logging.getLogger(__name__)

_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"\.jaxannot-(\d+)-[A-Za-z0-9_]+\.tmp")
_STARTED = time.time()  # temporary files newer than this process are never stale


def _prefix() -> str:
    return f".jaxannot-{os.getpid()}-"


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe)
    os.umask(mask)
    return mask


def _mode_for(path: pathlib.Path, new: int) -> int:
    """An existing ``path``'s permission bits, else ``new`` less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return new & ~_umask()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's live process
        return True
    return True


def remove_stale_temp(folder: str | os.PathLike) -> list[str]:
    """Remove the temporary files and folders that killed writers left in ``folder``.

    Only names of this module's pattern (``.jaxannot-PID-XXXXXXXX.tmp``) are
    touched, and only when process ``PID`` is not running and the entry was last
    modified before this process started. Errors are ignored (best effort).

    Returns
    -------
    list of str
        The names removed.
    """
    folder = pathlib.Path(folder)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _TEMP_NAME.fullmatch(name)
        if match is None or int(match[1]) == os.getpid() or _running(int(match[1])):
            continue
        path = folder / name
        try:
            info = os.lstat(path)
            if info.st_mtime >= _STARTED:
                continue
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            continue
        removed.append(name)
    if removed:
        log.debug("removed stale temporary files in %s: %s", folder, removed)
    return removed


def check_writable(folder: str | os.PathLike, reserve: int = 0) -> None:
    """Raise ``OSError`` unless a file of ``reserve`` bytes can be written in
    ``folder``.

    Creates, fills with ``reserve`` zero bytes, flushes to disk (``fsync``: a full
    disk or an exceeded quota shows here, not only when the data is written back
    later) and removes a temporary file named as :func:`atomic_write` names its own,
    so one left by a process killed in between is swept like theirs.

    Parameters
    ----------
    folder : str or PathLike
        The folder to write in.
    reserve : int
        Bytes the probe must hold (0: only create it).
    """
    with interrupts_held():
        fd, probe = tempfile.mkstemp(dir=folder, prefix=_prefix(), suffix=_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as fh:
                block = bytes(min(reserve, 1 << 20))
                for start in range(0, reserve, len(block) or 1):
                    fh.write(block[: reserve - start])
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            os.unlink(probe)


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(binary file)`` on a temporary file next to ``path``, flush it to
    disk, then rename it to ``path``.

    The rename is atomic on POSIX file systems and the data is on disk (``fsync``)
    before the new name makes it visible, so a reader sees either the previous file
    or the complete new one, even after a crash. The temporary file is removed when
    ``write`` fails, and stale ones of killed writers with it
    (:func:`remove_stale_temp`). A new file gets the permissions ``0o666`` less the
    umask (like ``open``); a replaced file keeps its permission bits. Ctrl-C while
    ``write`` runs takes effect when it returns (:func:`interrupts_held`): the
    temporary file is then removed and ``path`` is left as it was.

    The file written is ``path`` resolved (:func:`resolve_target`): a symbolic
    link keeps pointing at the (new) file, never replaced by a regular file.

    Parameters
    ----------
    path : str or PathLike
        The file to write; its folder must exist.
    write : callable
        Writes the content to the open binary file it is given.

    Raises
    ------
    OverwritesInput
        ``path`` is an input registered by :func:`protect` (or lies inside one).
    """
    path = checked_target(path)
    remove_stale_temp(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_prefix(), suffix=_SUFFIX)
    try:
        os.fchmod(fd, _mode_for(path, 0o666))
        with os.fdopen(fd, "wb") as fh:
            with interrupts_held():
                write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[pathlib.Path]:
    """Fill a new folder that then replaces ``path`` in one step.

    Yields an empty temporary folder next to ``path``. When the ``with`` block ends
    without an error, the folder takes the name ``path``: where Linux can exchange
    two names (``renameat2(RENAME_EXCHANGE)``) the old folder is swapped out in one
    atomic step, so a reader (or a crash) sees the old folder or the new one, never
    neither; elsewhere the old one is first renamed aside
    (``.jaxannot-PID-XXXXXXXX.old``, left for the user should the process die
    between the two renames). Entries of the old folder that the block did not
    write (say, the user's own files kept there) are carried into the new one as
    hard links just before the swap. On an error (Ctrl-C included) the temporary
    folder is removed and ``path`` is untouched. The new folder has the old one's
    permission bits, or ``0o777`` less the umask, given once it is filled (so a
    read-only folder, ``0o555``, can be rebuilt).

    Parameters
    ----------
    path : str or PathLike
        The folder to create or replace; its parent must exist.

    Raises
    ------
    FileExistsError
        An entry to carry over that cannot be hard-linked (another file system, a
        special file); ``path`` is then untouched.
    OverwritesInput
        ``path`` is an input registered by :func:`protect` (or lies inside one).
    """
    path = checked_target(path)  # resolved: "." has no parent to rename it in
    remove_stale_temp(path.parent)
    tmp = pathlib.Path(
        tempfile.mkdtemp(dir=path.parent, prefix=_prefix(), suffix=_SUFFIX)
    )
    try:
        mode = _mode_for(path, 0o777)
        yield tmp
        if path.is_dir():
            for name in sorted(set(os.listdir(path)) - set(os.listdir(tmp))):
                if not _TEMP_NAME.fullmatch(name):
                    _link_tree(path / name, tmp / name)
        os.chmod(tmp, mode)
        _fsync_folder(tmp)
        if not path.exists():
            os.rename(tmp, path)
        elif _exchange(tmp, path):
            _remove_old(tmp)  # now the old folder
        else:
            aside = path.parent / f"{_prefix()}{secrets.token_hex(4)}.old"
            os.rename(path, aside)
            os.rename(tmp, path)
            _remove_old(aside)
        _fsync_folder(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove_old(folder: pathlib.Path) -> None:
    """Remove the replaced folder, made writable first (it may be read-only)."""
    os.chmod(folder, stat.S_IMODE(os.stat(folder).st_mode) | stat.S_IRWXU)
    shutil.rmtree(folder)


def _link_tree(source: pathlib.Path, target: pathlib.Path) -> None:
    """Mirror ``source`` at ``target`` with hard links (folders recreated)."""
    info = os.lstat(source)
    try:
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(target, stat.S_IMODE(info.st_mode))
            for name in os.listdir(source):
                _link_tree(source / name, target / name)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(source), target)
        elif stat.S_ISREG(info.st_mode):
            os.link(source, target)
        else:
            raise OSError(errno.EPERM, "not a regular file, folder or link")
    except OSError as err:
        raise FileExistsError(
            f"{source}: cannot keep it when replacing {source.parent} "
            f"({err.strerror or err}); move it elsewhere first"
        ) from None


def _exchange(a: pathlib.Path, b: pathlib.Path) -> bool:
    """Swap the names ``a`` and ``b`` atomically; False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError, TypeError):  # not glibc / musl on Linux
        return False
    at_fdcwd, rename_exchange = -100, 2  # <fcntl.h>, <linux/fs.h>
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange):
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            return False  # old kernel, or a file system without exchange
        raise OSError(code, os.strerror(code), str(b))
    return True


def _fsync_folder(folder: pathlib.Path) -> None:
    """Flush a folder's entries to disk where the system allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
