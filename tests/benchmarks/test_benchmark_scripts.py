"""The layout of ``benchmarks/`` and ``tools/``: every script of
``benchmarks/<purpose>/`` answers ``--help`` and takes ``--device``, and no script or
shared module imports another script, a test or a notebook (the imports are parsed,
not run); what they share lives in ``benchmarks.common`` (issue 45, point 5)."""

from __future__ import annotations

import ast
import contextlib
import io
import pathlib
import runpy
import sys

import pytest

import jax

ROOT = pathlib.Path(__file__).resolve().parents[2]
PURPOSES = ("claims", "peers", "scale", "reliability")
#: where a module of its own is looked for: ``import NAME`` of one of these files'
#: stems is a script's folder on ``sys.path``, not a package import
LOCAL_FOLDERS = ("benchmarks", "tools", "tests", "notebooks")


def _module(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _is_script(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        for node in tree.body
    )


def _python_files() -> list[pathlib.Path]:
    return sorted(
        p
        for folder in ("benchmarks", "tools")
        for p in (ROOT / folder).rglob("*.py")
        if "results" not in p.parts
    )


def _purpose_scripts() -> list[pathlib.Path]:
    return sorted(
        p
        for purpose in PURPOSES
        for p in (ROOT / "benchmarks" / purpose).glob("*.py")
        if p.name != "__init__.py"
    )


def _scripts() -> set[str]:
    """The modules under ``benchmarks/`` and ``tools/`` that run as ``__main__``
    (``benchmarks.common.device`` prints its record so, yet is a shared module)."""
    return {
        _module(p)
        for p in _python_files()
        if _is_script(ast.parse(p.read_text())) and "common" not in p.parts
    }


def _local_stems() -> set[str]:
    return {
        p.stem
        for folder in LOCAL_FOLDERS
        for p in (ROOT / folder).rglob("*.py")
        if p.stem != "__init__"
    }


def import_problems(source: str, module: str, scripts: set[str], stems: set[str]):
    """What ``source`` (the module ``module``) imports that it must not: another
    script, a test, a notebook, a bare local name (a folder put on ``sys.path``), a
    relative import, a file loaded by path or a ``sys.path`` change."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.append(f"relative import of {node.module!r}")
                continue
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            call = node.func if isinstance(node, ast.Call) else None
            name = ast.unparse(call) if call is not None else ""
            if name in ("sys.path.insert", "sys.path.append"):
                problems.append(f"{name}(...)")
            if name.endswith("spec_from_file_location"):
                problems.append("a module loaded from its path")
            continue
        for name in names:
            top = name.split(".")[0]
            if top in ("tests", "notebooks"):
                problems.append(f"imports {name} (a test or a notebook)")
            elif name in scripts and name != module:
                problems.append(f"imports the script {name}")
            elif "." not in name and name in stems:
                problems.append(f"imports {name} by a folder on sys.path")
    return problems


def test_the_scripts_are_laid_out_by_purpose():
    folders = {p.parent.name for p in _purpose_scripts()}
    assert folders == set(PURPOSES)
    flat = [
        p.name for p in (ROOT / "benchmarks").glob("*.py") if p.name != "__init__.py"
    ]
    assert flat == [], "a script directly in benchmarks/"
    assert all(_is_script(ast.parse(p.read_text())) for p in _purpose_scripts())


def test_no_script_imports_a_sibling_a_test_or_a_notebook():
    scripts, stems = _scripts(), _local_stems()
    found = {
        _module(p): import_problems(p.read_text(), _module(p), scripts, stems)
        for p in _python_files()
    }
    assert {m: problems for m, problems in found.items() if problems} == {}


@pytest.mark.parametrize(
    "planted",
    [
        "from benchmarks.claims.fusion_study import fit_bases\n",
        "import benchmarks.scale.ale_scale\n",
        "from tools.defaults_cv import main\n",
        "from tests.inference import _graph_toy\n",
        "import seed003_sfsls\n",
        "import device\n",
        "from . import fusion_study\n",
        "import sys\nsys.path.insert(0, 'notebooks')\n",
        "import importlib.util\nimportlib.util.spec_from_file_location('x', 'x.py')\n",
    ],
)
def test_the_import_guard_catches_a_planted_import(planted):
    scripts, stems = _scripts(), _local_stems()
    assert import_problems(planted, "benchmarks.claims.x", scripts, stems)


def test_the_import_guard_lets_the_shared_modules_through():
    source = (
        "from benchmarks.common.device import add_device_argument\n"
        "from tools.defaults_guard import seed_choice\n"
        "import numpy as np\nfrom jaxannot.annotators import get_method\n"
    )
    assert (
        import_problems(source, "benchmarks.claims.x", _scripts(), _local_stems()) == []
    )


#: JAX settings a script may change only in its ``main``, after its arguments
_SETTINGS = ("jax_enable_x64", "jax_platforms", "jax_default_matmul_precision")


@pytest.mark.parametrize("path", _purpose_scripts(), ids=lambda p: p.stem)
def test_every_script_answers_help_with_device(path, monkeypatch):
    """``python -m benchmarks.PURPOSE.NAME --help``, run as ``__main__`` in this
    process (one JAX import for all): it exits 0 and lists ``--device``, and
    importing it changes none of JAX's settings (the tests after it in this process
    run under them)."""
    module = _module(path)
    before = {name: getattr(jax.config, name) for name in _SETTINGS}
    # a test file before this one may have imported the script as a module: run a
    # fresh copy as __main__ (runpy warns otherwise); the module comes back after
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    assert stop.value.code in (0, None)
    assert "--device {auto,cpu,gpu,tpu}" in out.getvalue()
    assert {name: getattr(jax.config, name) for name in _SETTINGS} == before


def _body(function: ast.FunctionDef) -> str:
    body = function.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        body = body[1:]  # the docstring
    return "\n".join(ast.unparse(node) for node in body)


def test_the_sfsls_pool_is_the_notebooks():
    """``benchmarks.common.sfsls_pool`` draws seed 003's pools and splits as the
    notebook does (the notebook is not imported by a benchmark)."""
    ours = ast.parse((ROOT / "benchmarks" / "common" / "sfsls_pool.py").read_text())
    theirs = ast.parse((ROOT / "notebooks" / "seed003_sfsls.py").read_text())

    def functions(tree):
        return {n.name: _body(n) for n in tree.body if isinstance(n, ast.FunctionDef)}

    mine, notebook = functions(ours), functions(theirs)
    for name in ("load_pool", "split"):
        assert mine[name] == notebook[name], name
    constants = [
        ast.unparse(n)
        for tree in (ours, theirs)
        for n in tree.body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "COREL_CONCEPTS"
    ]
    assert len(constants) == 2 and constants[0] == constants[1]
