"""Each paper notebook's `.ipynb` is in sync with its jupytext percent-format `.py`
(the source of truth): same cells, same sources."""

import importlib.util
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("nbexec", HERE / "nbexec.py")
nbexec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbexec)

PAIRED = (
    "seed000_lap_mix_unigram",
    "seed001_harmoniums",
    "seed002_ale",
    "seed003_sfsls",
    "seed004_emml",
    "modelling",
)


@pytest.mark.parametrize("name", PAIRED)
def test_ipynb_matches_script(name):
    script = nbexec.NOTEBOOKS / f"{name}.py"
    problems = nbexec.out_of_sync(script)
    assert not problems, (
        f"{name}.ipynb is out of sync with {name}.py: {problems[:3]}; rerun "
        f"`python tests/notebooks/nbexec.py run notebooks/{name}.py` (full mode) or "
        "`... sync ...` (no outputs)"
    )


@pytest.mark.parametrize("name", PAIRED)
def test_committed_notebook_is_small_and_clean(name):
    ipynb = nbexec.NOTEBOOKS / f"{name}.ipynb"
    assert ipynb.stat().st_size < 2_500_000
    nb = nbexec.nbformat.read(ipynb, as_version=4)
    assert not nbexec.machine_paths(nb)
    assert all("execution" not in c.metadata for c in nb.cells)


def test_a_changed_cell_is_detected(tmp_path):
    script = nbexec.NOTEBOOKS / "seed004_emml.py"
    copy = tmp_path / script.name
    copy.write_text(script.read_text().replace("NS = (2, 3, 5,", "NS = (2, 4, 5,"))
    problems = nbexec.out_of_sync(copy, script.with_suffix(".ipynb"))
    assert len(problems) == 1 and problems[0].startswith("cell "), problems


def test_a_machine_path_is_found_but_not_xlas_slow_compile_hint():
    def notebook(text):
        out = {"output_type": "stream", "name": "stderr", "text": text}
        return nbexec.nbformat.from_dict({"cells": [{"outputs": [out]}]})

    alarm = (
        "E0000 slow_operation_alarm.cc:73] Very slow compile? If you want to file a "
        "bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results."
    )
    assert nbexec.machine_paths(notebook(alarm)) == []
    assert nbexec.machine_paths(notebook(alarm + " reading /tmp/foo/data.npz")) != []
    assert nbexec.machine_paths(notebook("saved to /home/me/x.json")) != []
