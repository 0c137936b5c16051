import argparse
import json
import logging
import shutil
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from jaxannot.cli import app as cli
from jaxannot.cli.app import main

KEYS = {
    "method",
    "dataset",
    "protocol",
    "params",
    "metrics",
    "fit_seconds",
    "predict_seconds",
    "n_train",
    "n_test",
    "n_words",
    "info",  # the fitted model's info (JSON-able), e.g. emml's "converged"
    "bipartition",  # the top-k rule of the bipartition metrics (its k)
}
METRICS = {
    "accuracy",
    "complete_length",
    "f1@5",
    "precision@5",
    "recall@5",
    "word_precision@5",
    "word_recall@5",
    "word_f1@5",
    "n_plus@5",
    "map",
    "miap",
}


def test_evaluate_writes_the_documented_json(data_root, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        [
            "evaluate",
            "empirical",
            "--dataset",
            "corel5k",
            "--data-dir",
            str(data_root),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert set(result) == KEYS and METRICS <= set(result["metrics"])
    assert (result["n_train"], result["n_test"], result["n_words"]) == (4500, 500, 374)
    assert "empirical" in capsys.readouterr().out


def test_evaluate_on_a_mulan_directory_that_is_not_named(data_root, tmp_path):
    folder = tmp_path / "myscene"
    folder.mkdir()
    for part in ("train", "test"):
        shutil.copy(
            data_root / "scene" / f"scene-{part}.arff", folder / f"outdoor-{part}.arff"
        )
    shutil.copy(data_root / "scene" / "scene.xml", folder / "outdoor.xml")
    out = tmp_path / "r.json"
    argv = ["evaluate", "knn", "--dataset", str(folder), "--json", str(out)]
    # k as test_evaluate_saves_a_model_that_loads sets it: one knn compile for both
    assert main([*argv, "--set", "k=5"]) == 0
    result = json.loads(out.read_text())
    assert (
        result["n_train"] == 1211
        and result["n_test"] == 1196
        and result["n_words"] == 6
    )


def test_classification_dataset_reports_accuracy(data_root, tmp_path):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "evaluate",
                "knn",
                "--dataset",
                "wikipedia",
                "--data-dir",
                str(data_root),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    metrics = json.loads(out.read_text())["metrics"]
    assert 0.1 < metrics["classification_accuracy"] <= 1.0


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["evaluate", "nope", "--dataset", "corel5k"], "valid methods: "),
        (["evaluate", "knn", "--dataset", "nope"], "corel5k"),
        (["evaluate", "knn", "--dataset", "corel5k", "--set", "kk=3"], "valid: k,"),
        (["evaluate", "knn", "--dataset", "corel5k", "--set", "k=x"], "expects int"),
        (
            [
                "evaluate",
                "knn",
                "--dataset",
                "corel5k",
                "--protocol",
                "transductive",
                "--labelled-fraction",
                "1.5",
            ],
            "(0, 1]",
        ),
        # one dimension's eigenproblem alone would need 745 GiB: refused, where
        # XLA's CPU client hangs on an allocation failing inside the eigensolver
        (
            ["evaluate", "ale-sf", "--dataset", "scene", "--set", "bins=200000"],
            "use at most",
        ),
    ],
)
def test_user_errors_are_one_line(argv, needle, data_root, capsys):
    assert main([*argv, "--data-dir", str(data_root)]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert needle in last and last.startswith("jaxannot: error:")
    assert "Traceback" not in err


def test_malformed_file_names_file_and_line(tmp_path, capsys):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "b.xml").write_text(
        '<labels xmlns="http://mulan.sourceforge.net/labels"><label name="y"/></labels>'
    )
    good = "@relation r\n@attribute x numeric\n@attribute y {0,1}\n@data\n1.0,1\n"
    (folder / "b-train.arff").write_text(good)
    (folder / "b-test.arff").write_text(good + "oops,2,3\n")
    assert main(["evaluate", "knn", "--dataset", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "b-test.arff" in err and "line" in err and "Traceback" not in err


def test_methods_and_datasets_listings(data_root, capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "empirical" in out and "knn" in out and "k = 40" in out
    assert main(["datasets", "--data-dir", str(data_root)]) == 0
    assert "corel5k" in capsys.readouterr().out


def test_console_script_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "jaxannot.cli", "evaluate", "nope", "--dataset", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_evaluate_saves_a_model_that_loads(data_root, tmp_path):
    import numpy as np

    from jaxannot.annotators import get_method, load
    from jaxannot.data.datasets import load_dataset

    model = tmp_path / "knn.npz"
    argv = ["evaluate", "knn", "--dataset", "scene", "--data-dir", str(data_root)]
    assert main([*argv, "--set", "k=5", "--save", str(model)]) == 0
    fitted = load(model)
    assert fitted.method == "knn" and fitted.hyper["k"] == 5
    _, test = load_dataset("scene", data_dir=data_root)
    scores = get_method("knn").score_words(fitted, test)
    assert scores.shape == (1196, 6) and np.all(np.isfinite(scores))


def test_ctrl_c_during_start_up_prints_one_line_and_exits_130(wait_for_numpy):
    """SIGINT at seeded random moments of the imports and first steps of a
    command (jax loading, the first compiles): one line, status 130, no traceback,
    and the command stops. Without the CLI's handling, a Ctrl-C in jax's
    garbage-collector callback was swallowed (the command ran on) and one inside
    jaxlib's import aborted the process with a C++ `terminate`."""
    delays = np.random.default_rng(0).uniform(0.0, 2.0, 4)
    for delay in delays:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jaxannot.cli", "demo", "--quiet"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for_numpy(proc)
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait()
        assert err == "jaxannot: interrupted\n", (delay, err)
        assert proc.returncode in (130, -signal.SIGINT), (delay, proc.returncode)


def test_ctrl_c_after_the_command_finished_is_ignored():
    """A SIGINT that lands while Python shuts down (its exit handlers, e.g. the
    logging shutdown) was printed as 'Exception ignored in atexit callback' with a
    traceback; the program ignores Ctrl-C once its command is done."""
    script = (
        "import atexit, os, signal, sys\n"
        "from jaxannot.cli import app as cli\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
        "sys.argv = ['jaxannot', 'methods']\n"
        "cli.console()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    assert "knn" in done.stdout


@pytest.mark.parametrize("kind", [ImportError, ValueError])
def test_an_error_a_ctrl_c_turned_into_is_an_interruption(kind, capsys, monkeypatch):
    """A C extension's set-up interrupted by Ctrl-C raises 'ImportError:
    initialization failed' from the KeyboardInterrupt (scipy's pocketfft, imported
    while featurizing); zipfile a ValueError: both are the interruption."""

    def command(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise kind("initialization failed") from interrupt

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_running(command))
    assert main(["x"]) == 130
    assert capsys.readouterr().err == "jaxannot: interrupted\n"


@pytest.mark.parametrize("where", ["xla", "numpy"])
def test_running_out_of_memory_is_one_error_line(where, capsys, monkeypatch):
    """An allocation the device cannot hold (XLA's RESOURCE_EXHAUSTED, raised by a
    real 256 GB request) or numpy's MemoryError: one line, exit 2."""

    def command(args):
        if where == "xla":
            import jax.numpy as jnp

            jnp.zeros((40_000, 40_000, 40)).block_until_ready()
        raise MemoryError

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_running(command))
    assert main(["x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("jaxannot: error: out of memory: ")
    assert ("RESOURCE_EXHAUSTED" in err) == (where == "xla")


def test_an_unrelated_runtime_error_is_not_called_out_of_memory(monkeypatch):
    def command(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_running(command))
    with pytest.raises(RuntimeError, match="a bug"):
        main(["x"])


def _parser_running(command):
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.set_defaults(log_level=logging.WARNING)
    parser.set_defaults(func=command)
    return parser


def test_a_local_folder_named_like_a_dataset_is_an_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "root").mkdir()
    (tmp_path / "scene").mkdir()
    monkeypatch.chdir(tmp_path)
    argv = ["evaluate", "knn", "--dataset", "scene", "--data-dir", "root", "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxannot: error: dataset 'scene' is ambiguous") and (
        err.count("\n") == 1
    ), err


def test_a_fit_that_diverges_is_one_error_line(data_root, capsys):
    argv = ["evaluate", "twh", "--dataset", "wikipedia", "--data-dir", str(data_root)]
    for setting in ("optimizer=sgd", "learning_rate=1e6", "steps=5", "topics=4"):
        argv += ["--set", setting]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("jaxannot: error:") == 1, err
    assert err.splitlines()[-1].startswith("jaxannot: error: twh: training diverged")


def test_an_interrupted_command_leaves_without_python_shutdown():
    """2 of 292 Ctrl-Cs during a knn fit printed 'jaxannot: interrupted' and then
    died of SIGSEGV in the interpreter's shutdown (status 139), under XLA threads
    still running. An interrupted command now flushes its output and ends the
    process at once (os._exit(130)): no exit handler runs (this one would print
    'teardown'), and what it printed is not lost."""
    script = (
        "import atexit, sys\n"
        "from jaxannot.cli import app as cli\n"
        "atexit.register(lambda: print('teardown', file=sys.stderr))\n"
        "def interrupted(argv=None):\n"
        "    print('partial table')\n"  # buffered: stdout is a pipe
        "    print('jaxannot: interrupted', file=sys.stderr)\n"
        "    return 130\n"
        "cli.main = interrupted\n"
        "cli.console()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130
    assert done.stdout == "partial table\n"
    assert done.stderr == "jaxannot: interrupted\n"


def test_a_ctrl_c_python_cannot_raise_is_sent_again(capsys, monkeypatch):
    """A KeyboardInterrupt raised in a ``__del__`` (as in jax's garbage-collector
    callbacks) is unraisable: Python prints it and goes on. The command is
    interrupted all the same, by the signal sent again."""

    class Finalized:
        def __del__(self):
            raise KeyboardInterrupt

    def command(args):
        Finalized()  # collected at once: the interrupt is unraisable
        for _ in range(500):  # the resent signal lands here, within 5 s
            time.sleep(0.01)
        return 0

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_running(command))
    assert main(["x"]) == 130
    assert capsys.readouterr().err == "jaxannot: interrupted\n"


def test_a_resent_ctrl_c_landing_in_the_hook_asks_again(monkeypatch):
    """The resent signal can land inside the hook itself (once in 250 interrupted
    fits, when the hook started a thread and waited for it): it must not escape the
    hook, where Python prints it as 'Exception ignored in sys.unraisablehook' and
    the interrupt is lost, but ask for one more."""
    calls = []

    def request():
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the resent SIGINT, raised inside the hook

    monkeypatch.setattr(cli._RESENDER, "request", request)
    unraisable = types.SimpleNamespace(exc_type=KeyboardInterrupt)
    cli._resend_interrupt(lambda u: pytest.fail("not for a Ctrl-C"), unraisable)
    assert len(calls) == 2
    other = types.SimpleNamespace(exc_type=ValueError)
    seen = []
    cli._resend_interrupt(seen.append, other)
    assert seen == [other] and len(calls) == 2
