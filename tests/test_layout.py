"""The package's layout: no import cycle, every method inside its family folder.

The layers and the independence of the method families are import-linter contracts
(``pyproject.toml``, run by ``make lint``); what they cannot say is tested here.
"""

import pathlib
import pkgutil
import tomllib

import grimp
import pytest

import jaxannot.methods
from jaxannot.annotators.base import available_methods
from jaxannot.annotators.discovery import method_modules
from tools.code_sizes import MAX_CODE_LINES, code_lines

#: The method families: the packages of jaxannot.methods.
FAMILIES = {m.name for m in pkgutil.iter_modules(jaxannot.methods.__path__) if m.ispkg}

PYPROJECT = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("jaxannot")


def test_no_import_cycle(graph):
    # a cycle through a direct import m -> imp is a chain back from imp to m; lazy
    # (function-level) imports count, as grimp reads them too
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain:
                cycles.add((module, *chain))
    assert not cycles, f"import cycles: {sorted(cycles)}"


def test_cycle_check_finds_a_cycle():
    # the check above on a graph with a known cycle: it must not pass vacuously
    g = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b"):
        g.add_module(name)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")
    assert g.find_shortest_chain(importer="p.b", imported="p.a") == ("p.b", "p.a")


def test_every_method_lives_in_its_family_folder():
    assert len(FAMILIES) >= 6, FAMILIES
    modules = method_modules()
    # every family registers a method, and only families do
    assert {module.split(".")[0] for module in modules.values()} == FAMILIES
    registered = available_methods()
    for name, module in modules.items():
        fit_module = registered[name].fit.__module__
        family = module.split(".")[0]
        assert fit_module.startswith(f"jaxannot.methods.{family}."), (name, fit_module)


def test_the_independence_contract_holds_every_family(graph):
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    (independence,) = [c for c in contracts["contracts"] if c["type"] == "independence"]
    covered = set()
    for expression in independence["modules"]:
        prefix = expression.removesuffix(".*")
        if expression.endswith(".*"):
            covered |= {m for m in graph.modules if m.rpartition(".")[0] == prefix}
        else:
            covered.add(expression)
    assert {f"jaxannot.methods.{family}" for family in FAMILIES} <= covered


def test_no_module_outside_the_layout(graph):
    top = {m.split(".")[1] for m in graph.modules if m.count(".") >= 1}
    assert top == {
        "annotators",
        "cli",
        "data",
        "diagnostics",
        "evaluation",
        "graph",
        "inference",
        "methods",
        "metrics",
        "retrieval",
        "runtime",
        "signals",
        "sklearn",
        "solvers",
        "tuning",
        "types",
    }


def test_code_lines_counts_neither_docstrings_nor_comments():
    source = (
        '"""Module.\n\nMore.\n"""\n\n# a comment\nimport os\n\n\n'
        'def f(x):\n    """Doc."""\n    # why\n    return (x +\n            1)\n'
    )
    assert code_lines(source) == 4


def test_no_module_over_the_code_line_limit():
    root = pathlib.Path(jaxannot.__file__).resolve().parent
    sizes = {
        str(path.relative_to(root.parent)): code_lines(path.read_text())
        for path in sorted(root.rglob("*.py"))
    }
    offenders = {name: n for name, n in sizes.items() if n > MAX_CODE_LINES}
    assert not offenders, f"modules over {MAX_CODE_LINES} code lines: {offenders}"


#: The folders of tests/ that stand for no package folder of jaxannot: the notebooks'
#: tests, the benchmark scripts' and their records', the docs' (README, prose figures,
#: docstring examples, results tables), and the toy method's fixture.
OTHER_TEST_FOLDERS = {"notebooks", "benchmarks", "docs", "fixtures"}

#: The files at the top of tests/: the configuration and the package-wide checks.
TOP_TEST_FILES = {
    "conftest.py",
    "test_layout.py",
    "test_annotations.py",
    "test_reproducible.py",
}

TESTS = pathlib.Path(__file__).resolve().parent


def package_folders() -> set[str]:
    """The folders of ``jaxannot`` (``methods/<family>`` included), relative to it."""
    root = pathlib.Path(jaxannot.__file__).resolve().parent
    return {
        path.parent.relative_to(root).as_posix()
        for path in root.rglob("__init__.py")
        if path.parent != root
    }


def layout_offenders(tests: pathlib.Path, packages: set[str]) -> list[str]:
    """The folders and top-level files of ``tests`` outside the layout.

    A folder is in the layout when it is a package folder of ``jaxannot`` (relative
    to the package, ``packages``), a folder above one (``methods``) or one of
    ``OTHER_TEST_FOLDERS`` or below one; a file at the top when it is one of
    ``TOP_TEST_FILES``.
    """
    allowed = packages | {p.rpartition("/")[0] for p in packages} - {""}
    offenders = []
    for path in sorted(tests.rglob("*")):
        relative = path.relative_to(tests)
        if any(part.startswith((".", "__")) for part in relative.parts):
            continue
        if path.is_dir():
            if relative.parts[0] not in OTHER_TEST_FOLDERS and (
                relative.as_posix() not in allowed
            ):
                offenders.append(f"{relative.as_posix()}/")
        elif len(relative.parts) == 1 and relative.name not in TOP_TEST_FILES:
            offenders.append(relative.as_posix())
    return offenders


def test_tests_are_laid_out_like_the_package():
    offenders = layout_offenders(TESTS, package_folders())
    assert not offenders, (
        f"outside the layout of tests/ (a package folder of jaxannot or one of "
        f"{sorted(OTHER_TEST_FOLDERS)}; at the top, one of "
        f"{sorted(TOP_TEST_FILES)}): {offenders}"
    )


def test_the_layout_check_finds_a_stray_file_and_folder(tmp_path):
    # the check above on a copy of the layout with a planted file and folders: it
    # must not pass vacuously
    packages = package_folders()
    assert {"inference", "methods/emml", "solvers"} <= packages
    for folder in ("methods/emml", "inference", "notebooks"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "conftest.py").touch()
    assert layout_offenders(tmp_path, packages) == []
    (tmp_path / "test_stray.py").touch()
    (tmp_path / "models").mkdir()
    (tmp_path / "methods" / "lda").mkdir()
    assert layout_offenders(tmp_path, packages) == [
        "methods/lda/",
        "models/",
        "test_stray.py",
    ]
