"""The CLI's hyper-parameter checks: a bad ``--set`` and an unwritable ``--json`` /
``--save`` fail before any data is loaded; ``jaxannot methods`` describes every
hyper-parameter."""

import pytest

from jaxannot.annotators import available_methods
from jaxannot.annotators.hyper_spec import DEFAULTS, spec_for
from jaxannot.cli import main


@pytest.fixture
def no_loading(monkeypatch):
    """Make loading a dataset an error the CLI does not catch (so a test fails loudly
    when the command gets as far as loading)."""

    def fail(*args, **kwargs):
        raise AssertionError("the dataset was loaded before the check")

    monkeypatch.setattr("jaxannot.data.datasets.load_dataset", fail)


def _one_line_error(capsys) -> str:
    """The one error line, last on stderr (progress messages may come before it)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("jaxannot: error: ")]
    assert errors == lines[-1:], err
    return lines[-1]


def test_bad_set_fails_before_loading_the_data(tmp_path, capsys, no_loading):
    argv = ["evaluate", "knn", "--set", "k=0", "--dataset", "corel5k"]
    code = main([*argv, "--data-dir", str(tmp_path / "no-such-dir")])
    assert code == 2
    line = _one_line_error(capsys)
    assert "'knn'" in line and "k=0" in line and "int >= 1" in line


def test_bad_set_with_the_real_loader_names_the_hyper_parameter(tmp_path, capsys):
    # without the patch the missing data root would be the error, were it checked first
    argv = ["evaluate", "knn", "--set", "k=0", "--dataset", "corel5k"]
    assert main([*argv, "--data-dir", str(tmp_path / "no-such-dir")]) == 2
    assert "k=0" in _one_line_error(capsys)


def test_bad_choice_lists_the_choices(tmp_path, capsys, no_loading):
    argv = ["evaluate", "knn", "--set", "metric=manhattan", "--dataset", "corel5k"]
    assert main(argv) == 2
    assert _one_line_error(capsys).endswith("valid: one of cosine, euclidean")


@pytest.mark.parametrize("flag", ["--json", "--save"])
def test_output_in_a_missing_folder_fails_before_loading(
    flag, tmp_path, capsys, no_loading
):
    out = tmp_path / "missing" / "out.file"
    argv = ["evaluate", "knn", "--dataset", str(tmp_path / "no-data"), flag, str(out)]
    assert main(argv) == 2
    line = _one_line_error(capsys)
    assert f"cannot write {out}" in line and "does not exist" in line
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("flag", ["--json", "--save"])
def test_output_that_is_a_folder_fails_before_loading(
    flag, tmp_path, capsys, no_loading
):
    argv = ["evaluate", "knn", "--dataset", str(tmp_path / "no-data")]
    assert main([*argv, flag, str(tmp_path)]) == 2
    assert "it is a folder" in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []  # no probe file left behind


def test_writable_outputs_go_on_to_load_the_data(tmp_path, capsys):
    argv = ["evaluate", "knn", "--dataset", str(tmp_path / "no-data")]
    argv += ["--json", str(tmp_path / "r.json"), "--save", str(tmp_path / "m.npz")]
    assert main(argv) == 2
    line = _one_line_error(capsys)
    assert "cannot write" not in line and "no-data" in line  # the dataset's error
    assert list(tmp_path.iterdir()) == []


def test_methods_describes_every_hyper_parameter(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    blocks: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if line.startswith("    "):
            blocks[current].append(line)
        else:
            current = line.split(":", 1)[0]
            blocks[current] = []
    methods = available_methods()
    assert sorted(blocks) == sorted(methods)
    for name, m in methods.items():
        lines = blocks[name]
        assert len(lines) == len(m.hyper), name
        for line, (key, default) in zip(lines, m.hyper.items(), strict=True):
            spec = spec_for(name, key)
            assert line.startswith(f"    {key} = {default!r} "), line
            origin = DEFAULTS[name][key].describe(name)
            assert line.endswith(f"{spec.help} [{spec.valid()}] (default: {origin})")
