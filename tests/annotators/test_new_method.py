"""A new method in an existing family touches four files (issue 45): its module, its
parameters, its defaults record and its test; a hyper-parameter of its own that no
shared spec describes (the toy's ``min_images``) is declared once, in its defaults
entry (help, type, range, value and origin).

A copy of the package gets the toy method of ``tests/fixtures/word_centroid/``
(``word-centroid``, in the baselines family) and nothing else: the copy differs from
the repository in those four files alone, and in it the registry finds the method and
the registry-wide tests pass with it (the module scan against the imports, the
family layout, the self-description, the hyper-parameter specs and defaults, the
protocol, save and load, cross-validation and compile-once checks of
``tests/annotators/test_api_protocols.py``, the objectives' declarations), in a fresh
interpreter.
"""

import filecmp
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "word_centroid"

#: What the package needs to run its tests: copied, then the toy method added.
COPIED = ("jaxannot", "tests", "benchmarks", "tools", "pyproject.toml")

#: Each file of the fixture, the file of the copy it becomes, and whether it is
#: appended to an existing file (else it is a new file).
TOUCHED = (
    ("word_centroid.py", "jaxannot/methods/baselines/word_centroid.py", False),
    ("params.py", "jaxannot/methods/baselines/params.py", True),
    ("hyper_defaults.toml", "jaxannot/annotators/hyper_defaults.toml", True),
    ("check_word_centroid.py", "tests/methods/baselines/test_word_centroid.py", False),
)

#: The registry-wide tests, each of the new method's cases where they have one
#: (``word-centroid`` in the test's id) and all of the others.
REGISTRY_WIDE = (
    "tests/annotators/test_base.py",
    "tests/test_layout.py",
    "tests/annotators/test_self_description.py",
    "tests/annotators/test_hyper_spec.py",
    "tests/annotators/test_defaults.py",
    "tests/annotators/test_api_protocols.py",
    "tests/annotators/test_objectives.py::test_every_declaration_is_checked",
    "tests/methods/baselines/test_word_centroid.py",
)
SELECTED = "word-centroid or not (test_api_protocols or query_asks)"

#: Cases of the new method that must be among those that passed.
NEW_METHOD_CASES = (
    "tests/annotators/test_self_description.py::"
    "test_every_method_declares_its_description[word-centroid]",
    "tests/annotators/test_api_protocols.py::test_method_follows_the_protocol[word-centroid]",
    "tests/annotators/test_api_protocols.py::test_tune_cross_validates_every_method[word-centroid]",
    "tests/annotators/test_api_protocols.py::"
    "test_a_second_fit_on_other_data_compiles_nothing[word-centroid]",
    "tests/annotators/test_base.py::test_the_scan_finds_what_the_modules_register",
    "tests/test_layout.py::test_every_method_lives_in_its_family_folder",
    "tests/methods/baselines/test_word_centroid.py::test_the_registry_finds_the_new_method",
    "tests/methods/baselines/test_word_centroid.py::"
    "test_scores_are_cosines_with_the_word_centroids",
    "tests/methods/baselines/test_word_centroid.py::test_a_word_too_rare_scores_zero",
)


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", "fixtures") or n.endswith(".pyc")}


def _differences(a: pathlib.Path, b: pathlib.Path, where: str = "") -> list[str]:
    """The files of folders ``a`` and ``b`` that only one has or whose bytes differ,
    relative to them."""
    compared = filecmp.dircmp(a, b, ignore=["__pycache__", "fixtures"])
    found = [f"{where}{n}" for n in compared.left_only + compared.right_only]
    _, mismatch, errors = filecmp.cmpfiles(a, b, compared.common_files, shallow=False)
    found += [f"{where}{n}" for n in mismatch + errors]
    for name in compared.common_dirs:
        found += _differences(a / name, b / name, f"{where}{name}/")
    return found


def test_a_new_method_touches_four_files_and_passes_the_registry_tests(tmp_path):
    copy = tmp_path / "repo"
    for name in COPIED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, copy / name, ignore=_ignore)
        else:
            shutil.copy2(ROOT / name, copy / name)
    for source, target, append in TOUCHED:
        text = (FIXTURE / source).read_text()
        path = copy / target
        path.write_text(path.read_text() + text if append else text)

    changed = sorted(
        f"{name}/{path}"
        for name in COPIED
        if (ROOT / name).is_dir()
        for path in _differences(ROOT / name, copy / name)
    )
    assert changed == sorted(target for _, target, _ in TOUCHED)

    # a pytest of its own (no xdist worker's settings), importing the copy
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(copy)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
         *REGISTRY_WIDE, "-k", SELECTED],
        cwd=copy, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    passed = {line.split()[1] for line in out.stdout.splitlines() if " " in line
              and line.startswith("PASSED ")}  # fmt: skip
    for test in NEW_METHOD_CASES:
        assert test in passed, (test, out.stdout[-3000:])
    assert not any(
        line.startswith(("SKIPPED", "FAILED", "ERROR")) and "word-centroid" in line
        for line in out.stdout.splitlines()
    )
