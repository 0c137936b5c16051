"""atomic_write: the new content or the old one, never half of it, no temp files."""

import pytest

from jaxannot.data.atomic import atomic_write


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
