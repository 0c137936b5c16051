"""The files a command writes: never inside the dataset it reads, checked (folder,
name, room on the disk) before any work, and every error writing them one line.

A full disk, a file too large, a read-only file system are simulated by making the
system call fail (``os.fsync``, ``os.replace``) with that ``errno``; a name too long
is real."""

import errno
import json
import os
import shutil

import pytest

from jaxannot.cli.app import main

SHORT_FIT = ["--set", "k=3", "-q"]


@pytest.fixture
def no_loading(monkeypatch):
    """Loading a dataset fails the test (the check must come before)."""

    def fail(*args, **kwargs):
        raise AssertionError("the dataset was loaded before the check")

    monkeypatch.setattr("jaxannot.data.datasets.load_dataset", fail)


@pytest.fixture
def root(data_root, tmp_path):
    """A data root holding a copy of emotions (a Mulan folder), and its files' bytes."""
    root = tmp_path / "root"
    shutil.copytree(data_root / "emotions", root / "emotions")
    return root


def _tree(folder) -> dict:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("jaxannot: error: ") and err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize(
    ("argv", "flag", "inside"),
    [
        (["evaluate", "knn"], "--save", "emotions/model.npz"),
        (["evaluate", "knn"], "--json", "emotions/emotions.xml"),
        (["evaluate", "knn"], "--json", "emotions"),
        (["evaluate", "knn"], "--checkpoint", "emotions/state"),
        (["tune", "knn", "--grid", "k=1,2"], "--json", "emotions/tune.json"),
        (["diagnose", "mix-unigram"], "--json", "emotions/sub/d.json"),
    ],
)
@pytest.mark.parametrize("how", ["path", "name"])
def test_an_output_inside_the_dataset_is_refused_before_loading(
    root, argv, flag, inside, how, capsys, no_loading
):
    """`--save ds/x.npz` (or `--json ds/emotions.xml`) exited 0 and the next load
    of ds failed; now refused before anything is loaded or written, whether the
    dataset is named (under --data-dir) or given as its folder."""
    before = _tree(root)
    dataset = ["--dataset", "emotions", "--data-dir", str(root)]
    if how == "path":
        dataset = ["--dataset", str(root / "emotions")]
    assert main([*argv, *dataset, flag, str(root / inside)]) == 2
    line = _one_error_line(capsys)
    assert f"{flag} {root / inside} is" in line
    assert f"the folder {root / 'emotions'} that --dataset reads" in line
    assert _tree(root) == before


def test_an_output_through_a_link_into_the_dataset_is_refused(
    root, tmp_path, capsys, no_loading
):
    (tmp_path / "link").symlink_to(root / "emotions")
    argv = ["evaluate", "knn", "--dataset", str(root / "emotions")]
    assert main([*argv, "--save", str(tmp_path / "link" / "m.npz")]) == 2
    assert "that --dataset reads" in _one_error_line(capsys)


def test_outputs_inside_the_checkpoint_or_one_another_are_refused(
    root, tmp_path, capsys, no_loading
):
    argv = ["evaluate", "knn", "--dataset", str(root / "emotions")]
    state = tmp_path / "state"
    assert main([*argv, "--checkpoint", str(state), "--save", str(state / "m")]) == 2
    assert "that --checkpoint reads" in _one_error_line(capsys)
    same = str(tmp_path / "out")
    assert main([*argv, "--json", same, "--save", same]) == 2
    assert "--json and --save name the same file" in _one_error_line(capsys)


def test_outputs_beside_the_dataset_are_written(root, capsys):
    before = _tree(root / "emotions")
    out = root / "knn.json"
    argv = ["evaluate", "knn", "--dataset", "emotions", "--data-dir", str(root)]
    assert main([*argv, "--json", str(out), *SHORT_FIT]) == 0
    assert json.loads(out.read_text())["method"] == "knn"
    assert _tree(root / "emotions") == before


def test_a_name_too_long_fails_before_loading(tmp_path, capsys, no_loading):
    """ENAMETOOLONG for real: the up-front check passed it (only the folder was
    probed) and the finished fit died with a traceback on the write."""
    long = tmp_path / ("a" * 300 + ".json")
    for flag in ("--json", "--save"):
        argv = ["evaluate", "knn", "--dataset", "corel5k", flag, str(long)]
        assert main(argv) == 2
        assert _one_error_line(capsys).endswith(f"{long}: File name too long")
    argv = ["tune", "knn", "--grid", "k=1", "--dataset", "x", "--json", str(long)]
    assert main(argv) == 2
    assert "File name too long" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def _failing(monkeypatch, module_attr: str, code: int, when=lambda *a: True):
    """Make ``os.<module_attr>`` (as the atomic writer calls it) fail with ``code``."""
    import jaxannot.data.atomic as atomic

    real = getattr(atomic.os, module_attr)

    def fake(*args, **kwargs):
        if when(*args):
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(atomic.os, module_attr, fake)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
@pytest.mark.parametrize("command", ["evaluate", "tune", "demo", "diagnose"])
def test_a_full_disk_is_found_before_the_work(
    command, code, tmp_path, capsys, monkeypatch, no_loading
):
    """The up-front check creates, fills and flushes a probe file: on a full disk
    the flush fails (the old check only created an empty file, which a full disk
    still allows, so the whole fit ran and was lost at the write)."""
    _failing(monkeypatch, "fsync", code)
    monkeypatch.setattr(
        "jaxannot.data.synthetic.make_synthetic",
        lambda *a, **k: pytest.fail("demo started its work"),
    )
    out = tmp_path / "out.json"
    argv = {
        "evaluate": ["evaluate", "knn", "--dataset", "corel5k"],
        "tune": ["tune", "knn", "--grid", "k=1", "--dataset", "corel5k"],
        "demo": ["demo"],
        "diagnose": ["diagnose", "mix-unigram", "--dataset", "corel5k"],
    }[command]
    assert main([*argv, "--json", str(out)]) == 2
    assert _one_error_line(capsys) == (
        f"jaxannot: error: cannot write {out}: {os.strerror(code)}"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EROFS])
@pytest.mark.parametrize("flag", ["--json", "--save"])
def test_an_error_writing_the_result_is_one_line(
    root, flag, code, tmp_path, capsys, monkeypatch
):
    """The fit done, the write fails (the disk filled meanwhile, the file is too
    large for the file system, it was remounted read-only): one line naming the
    output, status 2, nothing left behind; it was a traceback."""
    out = tmp_path / "out.file"
    _failing(monkeypatch, "replace", code, when=lambda src, dst: str(dst) == str(out))
    argv = ["evaluate", "knn", "--dataset", str(root / "emotions"), *SHORT_FIT]
    assert main([*argv, flag, str(out)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "knn" in captured.out  # fitted
    assert captured.err == f"jaxannot: error: cannot write {out}: {os.strerror(code)}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["root"]


def test_a_checkpoint_that_cannot_be_written_is_one_line(
    root, tmp_path, capsys, monkeypatch
):
    state = tmp_path / "state"
    _failing(
        monkeypatch,
        "replace",
        errno.ENOSPC,
        when=lambda src, dst: os.path.basename(dst) == "run-000.npz",
    )
    argv = ["evaluate", "mix-unigram", "--dataset", str(root / "emotions"), "-q"]
    argv += ["--set", "iterations=4", "--set", "topics=2", "--checkpoint", str(state)]
    assert main([*argv, "--checkpoint-every", "2"]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"jaxannot: error: checkpoint {state / 'run-000.npz'} ")
    assert "cannot be written (No space left on device)" in line
