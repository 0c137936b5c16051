"""Outputs that reach an input through a symbolic link or a hard link (issue 44).

The dataset folder ``ds`` holds ``t-train.arff``, a symbolic link to (or a hard link
of) ``store/train.arff``, beside ``t-test.arff`` and ``t.xml``. Before, the
"would overwrite an input" check resolved the output but compared it only with the
dataset's folder, and the write went to the unresolved name:
``--save store/train.arff`` replaced the training ARFF and ``--json ds/t-train.arff``
replaced the link with a JSON file (both exit 0; the dataset no longer loaded).
Every test checks the bytes of every file and every link after the run.
"""

import os
import shutil

import pytest

from jaxannot.cli.app import main
from jaxannot.data import atomic

QUICK = ["--set", "k=3", "-q"]


@pytest.fixture(params=["symlink", "hardlink"])
def linked(request, data_root, tmp_path, monkeypatch):
    """``tmp_path`` with ``store/train.arff`` and the dataset ``ds`` whose training
    file is linked to it (``request.param``); the working directory is
    ``tmp_path``."""
    store, ds = tmp_path / "store", tmp_path / "ds"
    store.mkdir()
    ds.mkdir()
    source = data_root / "emotions"
    shutil.copyfile(source / "emotions-train.arff", store / "train.arff")
    shutil.copyfile(source / "emotions-test.arff", ds / "t-test.arff")
    shutil.copyfile(source / "emotions.xml", ds / "t.xml")
    if request.param == "symlink":
        (ds / "t-train.arff").symlink_to("../store/train.arff")
    else:
        os.link(store / "train.arff", ds / "t-train.arff")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _state(root) -> dict:
    """Every entry under ``root``: a link's target, a file's bytes and inode."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[key] = ("link", os.readlink(path))
        elif path.is_file():
            out[key] = ("file", path.read_bytes(), path.stat().st_ino)
    return out


def _refused(capsys, flag: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith(f"jaxannot: error: {flag} ") and err.count("\n") == 1, err
    assert "reads" in err
    return err


DATASET = ["--dataset", "ds"]


@pytest.mark.parametrize(
    ("argv", "flag", "target"),
    [
        (["evaluate", "knn", *QUICK], "--save", "store/train.arff"),
        (["evaluate", "knn", *QUICK], "--json", "store/train.arff"),
        (["evaluate", "knn", *QUICK], "--json", "ds/t-train.arff"),
        (["evaluate", "knn", *QUICK], "--checkpoint", "store/train.arff"),
        (["evaluate", "knn", *QUICK], "--checkpoint", "store"),
        (["tune", "knn", "--grid", "k=1,2", "-q"], "--json", "store/train.arff"),
        (["diagnose", "mix-unigram", "-q"], "--json", "store/train.arff"),
    ],
)
def test_an_output_onto_a_linked_input_is_refused(linked, argv, flag, target, capsys):
    before = _state(linked)
    assert main([*argv, *DATASET, flag, target]) == 2
    _refused(capsys, flag)
    assert _state(linked) == before


def test_an_output_that_is_a_hard_link_of_an_input_is_refused(linked, capsys):
    os.link(linked / "store" / "train.arff", linked / "copy.arff")
    before = _state(linked)
    for flag in ("--json", "--save"):
        assert main(["evaluate", "knn", *QUICK, *DATASET, flag, "copy.arff"]) == 2
        _refused(capsys, flag)
    assert _state(linked) == before


def test_a_checkpoint_folder_holding_a_hard_link_of_an_input_is_refused(linked, capsys):
    (linked / "state").mkdir()
    os.link(linked / "store" / "train.arff", linked / "state" / "run-000.npz")
    before = _state(linked)
    assert main(["evaluate", "knn", *QUICK, *DATASET, "--checkpoint", "state"]) == 2
    assert "a hard link of the file" in _refused(capsys, "--checkpoint")
    assert _state(linked) == before


def test_the_features_output_onto_a_linked_tags_file_is_refused(linked, capsys):
    photos = linked / "photos"
    photos.mkdir()
    tags = linked / "store" / "tags.csv"
    tags.write_text("file,tags\na.jpg,sky\n")
    (linked / "out").symlink_to(tags)
    os.link(tags, linked / "hard.csv")
    before = _state(linked)
    for out in ("out", "hard.csv"):
        argv = ["features", "photos", "--tags", str(tags), "--out", out, "-q"]
        assert main(argv) == 2
        _refused(capsys, "--out")
    assert _state(linked) == before


def test_a_linked_output_is_written_through_its_link(linked, capsys):
    """An output named through a link writes the file it points at; the link stays
    (it used to be replaced by a regular file)."""
    (linked / "elsewhere.json").write_text("{}")
    (linked / "result.json").symlink_to("elsewhere.json")
    argv = ["evaluate", "knn", *QUICK, *DATASET, "--json", "result.json"]
    assert main(argv) == 0
    assert os.readlink(linked / "result.json") == "elsewhere.json"
    assert '"method": "knn"' in (linked / "elsewhere.json").read_text()


def test_a_cache_inside_the_dataset_is_turned_off(linked, capsys, monkeypatch):
    import jax

    before = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("JAXANNOT_CACHE_DIR", str(linked / "ds" / "cache"))
    monkeypatch.delenv("JAXANNOT_NO_COMPILATION_CACHE", raising=False)
    try:
        state = _state(linked)
        argv = ["evaluate", "empirical", *DATASET, "--json", "out.json"]
        assert main(argv) == 0
        assert "running without the cache" in capsys.readouterr().err
        assert jax.config.jax_compilation_cache_dir is None
        assert {k: v for k, v in _state(linked).items() if k != "out.json"} == state
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_the_writer_refuses_protected_inputs_at_write_time(linked):
    """Outputs written later (a model, a checkpoint) are checked again by the one
    writer, whatever name reaches the input."""
    before = _state(linked)
    with atomic.protecting():
        atomic.protect("--dataset", [linked / "ds"])
        for target in ("store/train.arff", "ds/t-train.arff", "ds/new"):
            with pytest.raises(atomic.OverwritesInput, match="that --dataset reads"):
                atomic.atomic_write(target, lambda fh: fh.write(b"x"))
    atomic.atomic_write("store/other", lambda fh: fh.write(b"x"))  # no block: free
    assert {k: v for k, v in _state(linked).items() if k != "store/other"} == before


def test_a_symlink_loop_is_named_as_a_loop(tmp_path, capsys):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError, match="loop"):
        atomic.resolve_target(tmp_path / "a" / "x.json")
    argv = ["evaluate", "knn", "--dataset", "emotions", "--json", str(tmp_path / "a")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "loop" in err and "does not exist" not in err and "Traceback" not in err
