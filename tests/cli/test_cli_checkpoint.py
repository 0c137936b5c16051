"""``jaxannot evaluate --checkpoint DIR``: the fit's state is saved, the same command
started again resumes from it with the same result, a corrupt checkpoint is a one-line
error, and a bad ``--checkpoint-every`` fails before any data is loaded."""

import json
import shutil

import numpy as np
import pytest

from jaxannot.cli.app import main


@pytest.fixture
def no_loading(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the dataset was loaded before the check")

    monkeypatch.setattr("jaxannot.data.datasets.load_dataset", fail)


def _evaluate(data_root, folder, out, *extra):
    argv = ["evaluate", "mix-unigram", "--dataset", "emotions"]
    argv += [
        "--data-dir",
        str(data_root),
        "--set",
        "iterations=12",
        "--set",
        "topics=4",
    ]
    return main([*argv, "--checkpoint", str(folder), "--json", str(out), *extra])


def test_checkpointed_evaluate_resumes_with_the_same_result(
    data_root, tmp_path, capsys
):
    folder = tmp_path / "state"
    assert (
        _evaluate(data_root, folder, tmp_path / "a.json", "--checkpoint-every", "5")
        == 0
    )
    assert sorted(p.name for p in folder.iterdir()) == ["run-000.npz"]
    capsys.readouterr()
    assert (
        _evaluate(data_root, folder, tmp_path / "b.json", "--checkpoint-every", "5")
        == 0
    )
    assert "step loop 0 resumed at step 12" in capsys.readouterr().err
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert a["metrics"] == b["metrics"] and a["info"] == b["info"]


def test_corrupt_checkpoint_is_a_one_line_error(data_root, tmp_path, capsys):
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "run-000.npz").write_bytes(b"not a zip file")
    assert _evaluate(data_root, folder, tmp_path / "a.json") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("jaxannot: error: checkpoint ")
    assert "run-000.npz cannot be read" in err
    assert not (tmp_path / "a.json").exists()


def test_bad_checkpoint_every_fails_before_loading(tmp_path, capsys, no_loading):
    argv = ["evaluate", "knn", "--dataset", "corel5k", "--checkpoint", str(tmp_path)]
    assert main([*argv, "--checkpoint-every", "0"]) == 2
    assert "--checkpoint-every must be >= 1" in capsys.readouterr().err


def test_a_method_without_a_step_loop_warns_that_nothing_was_saved(
    data_root, tmp_path, capsys
):
    argv = ["evaluate", "knn", "--dataset", "emotions", "--data-dir", str(data_root)]
    assert main([*argv, "--checkpoint", str(tmp_path / "state")]) == 0
    assert "has no step loop to checkpoint" in capsys.readouterr().err


@pytest.fixture(scope="module")
def written(data_root, tmp_path_factory):
    """The checkpoint folder of a finished fit."""
    folder = tmp_path_factory.mktemp("written") / "state"
    assert _evaluate(data_root, folder, folder.parent / "a.json", "-q") == 0
    return folder


def _rewrite_header(path, edit) -> None:
    """Rewrite the JSON header of the checkpoint at ``path`` through ``edit``."""
    with np.load(path, allow_pickle=False) as archive:
        entries = {k: archive[k] for k in archive.files}
    meta = edit(json.loads(entries["__meta__"].tobytes().decode()))
    entries["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **entries)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda m: {k: v for k, v in m.items() if k != "step"}, "has no `step` entry"),
        (lambda m: {**m, "step": "12"}, "header's `step` is '12', not an int"),
        (lambda m: {**m, "step": 1.5}, "header's `step` is 1.5, not an int"),
        (lambda m: {k: v for k, v in m.items() if k != "key_impls"}, "`key_impls`"),
        (lambda m: [m], "not a jaxannot checkpoint"),
    ],
)
def test_a_checkpoint_header_missing_an_entry_says_which(
    data_root, written, tmp_path, capsys, edit, needle
):
    """A checkpoint without `step` printed `jaxannot: error: step` (a KeyError);
    now the line names the file and what its header lacks."""
    folder = tmp_path / "state"
    shutil.copytree(written, folder)
    _rewrite_header(folder / "run-000.npz", edit)
    assert _evaluate(data_root, folder, tmp_path / "b.json", "-q") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jaxannot: error: checkpoint {folder / 'run-000.npz'}")
    assert needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "b.json").exists()
