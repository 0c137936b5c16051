"""The CLI's progress messages: INFO lines on stderr through :mod:`logging`, results
alone on stdout, ``--quiet`` keeps warnings only, ``--verbose`` adds debug lines; the
library alone prints nothing."""

import json
import logging
import sys

import pytest

from jaxannot.annotators.base import show_progress
from jaxannot.cli.app import main
from jaxannot.data import make_task
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate


def _evaluate(data_root, tmp_path, capsys, *options, method="knn", before=()):
    """Run ``jaxannot [before] evaluate METHOD --dataset emotions [options] --json``;
    return stdout, stderr and the JSON written."""
    out = tmp_path / "r.json"
    argv = [*before, "evaluate", method, "--dataset", "emotions"]
    argv += ["--data-dir", str(data_root), "--json", str(out), *options]
    assert main(argv) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err, json.loads(out.read_text())


def _without_times(table: str) -> list[list[str]]:
    """The table's cells but the last column (the fit seconds)."""
    return [line.split()[:-1] for line in table.splitlines()]


def test_progress_on_stderr_and_the_table_alone_on_stdout(data_root, tmp_path, capsys):
    out, err, result = _evaluate(data_root, tmp_path, capsys)
    lines = err.splitlines()
    assert all(line.startswith("jaxannot: ") for line in lines), err
    assert "jaxannot: loading dataset emotions" in lines
    assert any(
        line.startswith("jaxannot: loaded emotions: 391 training") for line in lines
    )
    assert any("fitting on 391 images, scoring 202" in line for line in lines)
    assert any(line.startswith("jaxannot: fitted in ") for line in lines)
    assert any(line.startswith("jaxannot: wrote ") for line in lines)
    table = out.splitlines()
    assert len(table) == 3 and table[0].split()[0] == "method"  # header, rule, row
    assert table[2].split()[0] == "knn" and result["method"] == "knn"
    assert f"{result['metrics']['map']:.4f}" in table[2]


@pytest.mark.parametrize(
    "where", [{"before": ("--quiet",)}, {"before": ("-q",)}, {"options": ("--quiet",)}]
)
def test_quiet_before_or_after_the_command_silences_stderr_only(
    where, data_root, tmp_path, capsys
):
    out, err, _ = _evaluate(data_root, tmp_path, capsys)
    quiet_out, quiet_err, _ = _evaluate(
        data_root,
        tmp_path,
        capsys,
        *where.get("options", ()),
        before=where.get("before", ()),
    )
    assert quiet_err == ""
    assert _without_times(quiet_out) == _without_times(out)


def test_verbose_adds_debug_lines(data_root, tmp_path, capsys):
    _, err, _ = _evaluate(data_root, tmp_path, capsys, "-v")
    assert "jaxannot: fitted knn in " in err  # evaluation's DEBUG line
    assert "jaxannot: loading dataset emotions" in err


def test_a_solver_that_did_not_converge_still_warns_under_quiet(
    data_root, tmp_path, capsys
):
    options = ("--quiet", "--set", "exact_sweeps=1", "--set", "vreps=20")
    out, err, result = _evaluate(data_root, tmp_path, capsys, *options, method="emml")
    assert err.startswith("jaxannot: warning: emml (exact solver) stopped before")
    assert len(err.splitlines()) == 1
    assert result["info"]["converged"] is False
    assert out.splitlines()[2].split()[0] == "emml"


def test_the_library_alone_prints_nothing(capsys):
    corpus = make_synthetic(seed=0, num_images=60)
    task = make_task(corpus, None, protocol="inductive", seed=0)
    logger = logging.getLogger("jaxannot")
    assert logger.level == logging.NOTSET and not logger.handlers  # main() restored it
    evaluate("knn", task)
    assert capsys.readouterr() == ("", "")


def test_bars_need_a_terminal_and_a_level_that_lets_info_through(monkeypatch):
    logger = logging.getLogger("jaxannot")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not show_progress()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert show_progress()  # the level unset: the library alone in a terminal
    for level, shown in [
        (logging.DEBUG, True),
        (logging.INFO, True),
        (logging.WARNING, False),
    ]:
        monkeypatch.setattr(logger, "level", level)
        assert show_progress() is shown
