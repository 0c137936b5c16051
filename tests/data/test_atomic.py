"""atomic_write and atomic_folder: the new content or the old one, never half of it,
no temp files (nor those of killed writers), the permissions a plain write gives."""

import gc
import os
import signal
import stat
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from jaxannot.data.archive import write_archive
from jaxannot.data.atomic import (
    atomic_folder,
    atomic_write,
    check_writable,
    remove_stale_temp,
)


def test_writes_and_replaces(tmp_path):
    path = tmp_path / "out.bin"
    atomic_write(path, lambda fh: fh.write(b"first"))
    atomic_write(path, lambda fh: fh.write(b"second"))
    assert path.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_failing_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")

    def half_then_fail(fh):
        fh.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, half_then_fail)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_missing_folder_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "nope" / "out.bin", lambda fh: fh.write(b"x"))


@pytest.fixture
def umask_027():
    saved = os.umask(0o027)
    yield
    os.umask(saved)


def test_a_new_file_follows_the_umask_and_a_replaced_one_keeps_its_mode(
    tmp_path, umask_027
):
    with open(tmp_path / "reference", "wb"):  # what open() makes under this umask
        pass
    expected = stat.S_IMODE(os.stat(tmp_path / "reference").st_mode)
    assert expected == 0o640
    atomic_write(tmp_path / "new.bin", lambda fh: fh.write(b"x"))
    assert stat.S_IMODE(os.stat(tmp_path / "new.bin").st_mode) == expected
    os.chmod(tmp_path / "new.bin", 0o604)
    atomic_write(tmp_path / "new.bin", lambda fh: fh.write(b"y"))
    assert stat.S_IMODE(os.stat(tmp_path / "new.bin").st_mode) == 0o604
    assert (tmp_path / "new.bin").read_bytes() == b"y"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temp_files_of_killed_writers_are_removed(tmp_path):
    dead, old = _dead_pid(), time.time() - 3600
    stale_file = tmp_path / f".jaxannot-{dead}-ab12cd34.tmp"
    stale_file.write_bytes(b"half a file")
    stale_folder = tmp_path / f".jaxannot-{dead}-ef56gh78.tmp"
    stale_folder.mkdir()
    (stale_folder / "features.npz").write_bytes(b"half")
    kept = {
        f".jaxannot-{os.getpid()}-ij90kl12.tmp": old,  # this process: in use
        f".jaxannot-{os.getppid()}-mn34op56.tmp": old,  # a live process
        f".jaxannot-{dead}-qr78st90.tmp": time.time() + 60,  # newer than us
        ".jaxannot-uv12wx34.tmp": old,  # no process id: not provably ours
        "user.tmp": old,
        "notes.txt": old,
    }
    for name, mtime in kept.items():
        (tmp_path / name).write_bytes(b"keep")
        os.utime(tmp_path / name, (mtime, mtime))
    for path in (stale_folder / "features.npz", stale_folder, stale_file):
        os.utime(path, (old, old))
    atomic_write(tmp_path / "out.bin", lambda fh: fh.write(b"x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "out.bin"])
    assert remove_stale_temp(tmp_path / "missing") == []  # best effort, no error


def _tree(folder):
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "rename"])
def test_atomic_folder_replaces_a_folder_and_keeps_the_user_files(
    tmp_path, monkeypatch, umask_027, exchange
):
    if not exchange:  # the path taken where the system cannot exchange two names
        monkeypatch.setattr("jaxannot.data.atomic._exchange", lambda a, b: False)
    target = tmp_path / "ds"
    with atomic_folder(target) as building:
        (building / "data.bin").write_bytes(b"one")
    assert _tree(target) == {"data.bin": b"one"}
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o750  # 0o777 less the umask
    os.chmod(target, 0o755)
    (target / "mine.txt").write_text("the user's notes")
    (target / ".hidden").write_text("dot file")
    (target / "sub").mkdir()
    (target / "sub" / "model.npz").write_bytes(b"model")
    inode = os.stat(target / "sub" / "model.npz").st_ino
    with atomic_folder(target) as building:
        assert _tree(building) == {}
        (building / "data.bin").write_bytes(b"two")
    assert _tree(target) == {
        ".hidden": b"dot file",
        "data.bin": b"two",
        "mine.txt": b"the user's notes",
        "sub/model.npz": b"model",
    }
    assert os.stat(target / "sub" / "model.npz").st_ino == inode  # linked, not copied
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temp left


def test_atomic_folder_leaves_the_old_folder_on_any_error(tmp_path):
    target = tmp_path / "ds"
    target.mkdir()
    (target / "data.bin").write_bytes(b"old")
    for error in (RuntimeError("disk full"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            with atomic_folder(target) as building:
                (building / "data.bin").write_bytes(b"half")
                raise error
        assert _tree(target) == {"data.bin": b"old"}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    os.mkfifo(target / "pipe")  # cannot be carried over: refused, nothing changed
    with pytest.raises(FileExistsError, match="pipe: cannot keep it"):
        with atomic_folder(target) as building:
            (building / "data.bin").write_bytes(b"new")
    assert _tree(target) == {"data.bin": b"old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_atomic_folder_replaces_the_working_directory_by_its_name(
    tmp_path, monkeypatch
):
    target = tmp_path / "ds"
    target.mkdir()
    (target / "data.bin").write_bytes(b"old")
    monkeypatch.chdir(target)
    with atomic_folder(".") as building:
        (building / "data.bin").write_bytes(b"new")
    assert _tree(target) == {"data.bin": b"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_ctrl_c_during_a_write_keeps_the_old_file_and_is_raised_after_it(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    finished = []

    def write(fh):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the write
        fh.write(b"new")
        finished.append(True)

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, write)
    assert finished  # the write was not cut off half-way ...
    assert path.read_bytes() == b"old"  # ... and the interrupt still won
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_inside_the_zip_writer_leaves_no_broken_archive(tmp_path, monkeypatch):
    """Interrupted inside a zip member's close, the standard zipfile writer leaves an
    archive that cannot be closed (a ValueError replaces the interrupt, and a
    traceback is printed when it is collected); the writer holds the interrupt."""
    path = tmp_path / "model.npz"
    write_archive(path, {"x": np.arange(3)}, meta={"v": 1})
    before = path.read_bytes()
    close = zipfile._ZipWriteFile.close

    def interrupted_close(self):
        os.kill(os.getpid(), signal.SIGINT)
        close(self)

    monkeypatch.setattr(zipfile._ZipWriteFile, "close", interrupted_close)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(KeyboardInterrupt):
        write_archive(path, {"x": np.arange(1000)}, meta={"v": 2})
    gc.collect()
    assert unraisable == []
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]


def test_check_writable_leaves_nothing_and_refuses_a_missing_folder(tmp_path):
    check_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        check_writable(tmp_path / "missing")


@pytest.mark.parametrize("exchange", [True, False])
def test_a_read_only_folder_is_rebuilt_read_only(tmp_path, monkeypatch, exchange):
    """The new folder is filled writable and takes the old mode (0o555) only then;
    the old read-only folder is removed. (Root ignores modes: the test checks the
    modes themselves.)"""
    if not exchange:
        monkeypatch.setattr("jaxannot.data.atomic._exchange", lambda a, b: False)
    target = tmp_path / "ds"
    with atomic_folder(target) as building:
        (building / "data.bin").write_bytes(b"one")
    os.chmod(target, 0o555)
    with atomic_folder(target) as building:
        assert stat.S_IMODE(os.stat(building).st_mode) & stat.S_IWUSR
        (building / "data.bin").write_bytes(b"two")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o555
    assert _tree(target) == {"data.bin": b"two"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    os.chmod(target, 0o755)
