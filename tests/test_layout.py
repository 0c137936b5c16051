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
