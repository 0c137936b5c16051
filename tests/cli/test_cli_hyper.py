"""The CLI's hyper-parameter checks: a bad ``--set`` and an unwritable ``--json`` /
``--save`` fail before any data is loaded; ``jaxannot methods`` describes every
hyper-parameter."""

import pytest

from jaxannot.annotators import available_methods
from jaxannot.annotators.hyper_spec import DEFAULTS, spec_for
from jaxannot.cli.app import main


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
    assert "'knn'" in line and "k=0" in line and "int in [1, 1000000]" in line


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


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["evaluate", "mix-unigram", "--set", "topics=1000000000000"], "topics="),
        (["evaluate", "link-lda", "--set", "iterations=10**12"], "expects int"),
        (["evaluate", "twh", "--set", "steps=1000000000000"], "steps="),
        (
            ["evaluate", "knn", "--seed", "1000000000000"],
            "--seed must be <= 4294967295",
        ),
        (["evaluate", "knn", "--seed", "-1"], "--seed must be >= 0, got -1"),
        (["tune", "knn", "--grid", "k=1", "--seed", str(2**64)], "--seed must be <="),
        (["tune", "knn", "--grid", "k=1", "--folds", "1"], "--folds must be >= 2"),
        (["diagnose", "mix-unigram", "--restarts", "10**9"], "invalid int value"),
        (["diagnose", "mix-unigram", "--restarts", "1000000"], "--restarts must be"),
        (["evaluate", "knn", "--checkpoint-every", str(10**12)], "<= 1000000"),
    ],
)
def test_huge_or_negative_integers_are_one_line_naming_the_bound(
    argv, needle, capsys, no_loading
):
    """Integers of 10^12 went on into jax (an OverflowError traceback: 'Python
    integer out of bounds for int32'); a negative seed read 'expected non-negative
    integer'. Now one line naming the bound, before any data is loaded."""
    try:
        code = main([*argv, "--dataset", "corel5k"])
    except SystemExit as stop:  # argparse: not an integer at all
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    if "invalid int value" not in needle:
        assert err.count("\n") == 1 and err.startswith("jaxannot: error: ")
    if "topics=" in needle or "steps=" in needle:
        assert "valid: int in [" in err and ", 1000000]" in err


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [
        ("--size", "1000000000000", "--size must be <= 4096"),
        ("--step", "0", "--step must be >= 1"),
        ("--words", str(10**12), "--words must be <= 1000000"),
        ("--seed", str(2**40), "--seed must be <= 4294967295"),
    ],
)
def test_features_integers_are_bounded(flag, value, needle, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    argv = ["features", str(photos), "--out", str(tmp_path / "ds"), flag, value]
    assert main(argv) == 2
    assert _one_line_error(capsys) == f"jaxannot: error: {needle}, got {value}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos"]
