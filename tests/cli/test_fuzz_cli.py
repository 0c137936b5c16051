"""Property-based fuzzing of the command line's values (hypothesis, derandomized).

Hostile ``--set`` values (huge, negative, non-finite, malformed), seeds, sizes, counts
and output paths (inside the dataset, too long, in a missing folder, a folder, with
odd characters) go through :func:`jaxannot.cli.app.main` in this process. No example
reaches a fit: the dataset is a damaged folder (no label file), a named dataset under
an empty data root, or an empty folder of photos, so the command stops at its checks
or at loading. Every example must end with status 0 or 2 (2: argparse's usage error
or one ``jaxannot: error:`` line), never a traceback, within the deadline, and change
no file outside the outputs it names.
"""

import contextlib
import io
import os
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxannot.annotators import available_methods
from jaxannot.cli.app import main

METHODS = available_methods()
FUZZ = settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=30_000,  # ms: a guard against a hang, not a speed figure
    suppress_health_check=[HealthCheck.too_slow],
)

HUGE = [10**12, 2**31, 2**32, 2**63, 2**64, 10**40]
integers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([*HUGE, *(-h for h in HUGE), 0, -1]),
)
numbers = st.one_of(
    integers.map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e308", "1e-320", "0x10", "10**12"]),
)
text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
)
value = st.one_of(numbers, text, st.sampled_from(["", "=", "true", "cosine"]))


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A damaged dataset folder, an empty data root, an empty photo folder."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "ds").mkdir()
    (root / "ds" / "junk-train.arff").write_text("not an arff file\n")
    (root / "root").mkdir()
    (root / "photos").mkdir()
    (root / "out").mkdir()
    return root


def _snapshot(folder: pathlib.Path) -> dict:
    return {
        p.relative_to(folder).as_posix(): (p.is_dir(), p.stat().st_size)
        for p in sorted(folder.rglob("*"))
    }


def _output(place: pathlib.Path):
    """An output path: beside the data, inside the dataset, the dataset itself,
    in a missing folder, a folder, too long, odd characters."""
    return st.one_of(
        st.sampled_from(
            [
                place / "out" / "r.json",
                place / "ds" / "model.npz",
                place / "ds",
                place / "ds" / "junk-train.arff",
                place / "missing" / "r.json",
                place / "out",
                place / "out" / ("n" * 300),
                place / "out" / "line\nbreak.json",
                place / "out" / " ",
            ]
        ),
        text.filter(lambda t: t.strip() and "/" not in t).map(
            lambda t: place / "out" / t
        ),
    ).map(str)


def _dataset(place: pathlib.Path):
    damaged = st.just(["--dataset", str(place / "ds")])
    named = st.sampled_from(["corel5k", "emotions", "scene"]).map(
        lambda n: ["--dataset", n, "--data-dir", str(place / "root")]
    )
    return st.one_of(damaged, named)


def _sets(method: str):
    keys = st.one_of(st.sampled_from(sorted(METHODS[method].hyper) or ["k"]), text)
    return st.lists(
        st.tuples(keys, value).map(lambda kv: ["--set", f"{kv[0]}={kv[1]}"]),
        max_size=3,
    ).map(lambda pairs: [a for p in pairs for a in p])


def _run(argv: list[str], place: pathlib.Path, outputs: list[str]) -> None:
    """Run ``argv``; check the status, the error line and the files."""
    before = _snapshot(place)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's usage errors
            code = stop.code
    stderr = err.getvalue()
    assert code in (0, 2), (argv, code, stderr)
    assert "Traceback" not in stderr, (argv, stderr)
    if code == 2 and "usage:" not in stderr:
        lines = stderr.strip().split("\n")  # not splitlines: it splits at \x1e too
        assert lines[-1].startswith("jaxannot: error: "), (argv, stderr)
        assert not [x for x in lines[:-1] if x.startswith("jaxannot: error")]
    named = {os.path.relpath(os.path.abspath(o), place) for o in outputs}
    after = _snapshot(place)
    changed = {
        k for k in set(before) | set(after) if before.get(k) != after.get(k)
    } - named
    assert not changed, (argv, changed)


@pytest.fixture(autouse=True)
def _no_data_root(monkeypatch):
    monkeypatch.delenv(
        "JAXANNOT_DATA", raising=False
    )  # named sets come from --data-dir


def test_evaluate_values(place):
    @FUZZ
    @given(
        method=st.sampled_from(sorted(METHODS)),
        data=st.data(),
    )
    def check(method, data):
        argv = ["evaluate", method, *data.draw(_dataset(place))]
        argv += data.draw(_sets(method))
        outputs = []
        for flag in ("--seed", "--checkpoint-every", "--labelled-fraction"):
            if data.draw(st.booleans()):
                argv += [flag, data.draw(numbers)]
        for flag in ("--json", "--save"):
            if data.draw(st.booleans()):
                outputs.append(data.draw(_output(place)))
                argv += [flag, outputs[-1]]
        _run([*argv, "-q"], place, outputs)

    check()


def test_tune_and_diagnose_values(place):
    @FUZZ
    @given(
        method=st.sampled_from(sorted(METHODS)),
        command=st.sampled_from(["tune", "diagnose"]),
        data=st.data(),
    )
    def check(method, command, data):
        argv = [command, method, *data.draw(_dataset(place))]
        keys = sorted(METHODS[method].hyper) or ["k"]
        if command == "tune":
            key = data.draw(st.sampled_from(keys))
            grid = data.draw(st.lists(numbers, min_size=1, max_size=3))
            argv += ["--grid", f"{key}=" + ",".join(grid)]
            argv += ["--folds", data.draw(numbers)]
        else:
            argv += ["--restarts", data.draw(numbers)]
        argv += data.draw(_sets(method)) + ["--seed", data.draw(numbers)]
        output = data.draw(_output(place))
        _run([*argv, "--json", output, "-q"], place, [output])

    check()


def test_features_values(place):
    @FUZZ
    @given(data=st.data())
    def check(data):
        out = data.draw(_output(place))
        photos = data.draw(st.sampled_from(["photos", "ds", "missing"]))
        argv = ["features", str(place / photos), "--out", out]
        for flag in ("--size", "--step", "--words", "--seed", "--test-fraction"):
            if data.draw(st.booleans()):
                argv += [flag, data.draw(numbers)]
        if data.draw(st.booleans()):
            argv += ["--tags", data.draw(_output(place))]
        _run([*argv, "-q"], place, [out])

    check()


def test_annotate_and_query_values(place):
    @FUZZ
    @given(command=st.sampled_from(["annotate", "query"]), data=st.data())
    def check(command, data):
        model = data.draw(_output(place))
        if command == "annotate":
            argv = ["annotate", model, "--dataset", str(place / "ds")]
        else:
            kind = data.draw(st.sampled_from(["annotate", "word", "image", "x"]))
            argv = ["query", model, kind, *data.draw(_dataset(place))]
            argv += ["--row", data.draw(numbers), "--word", data.draw(text)]
            argv += ["--image-weight", data.draw(numbers)]
        argv += ["--top", data.draw(numbers)]
        _run([*argv, "-q"], place, [])

    check()
