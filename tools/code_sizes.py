"""The package's sizes as a reader of its code meets them: modules and functions in
code lines, and how many public functions are typed and documented.

A *code line* is a line on which a token other than a comment starts or runs,
docstring lines aside (those of the module, its classes and its functions): blank,
comment-only and docstring lines do not count. A function's length is the code lines
from its ``def`` to its last line (nested functions counted in their parent too). A
function is *public* when its name and its module path have no leading underscore
(methods of public classes count, ``__init__`` too); it is *fully annotated* when
every argument a caller passes (``self`` / ``cls`` aside) and its return
(``__init__`` aside) carry annotations. ``tests/test_layout.py`` holds every module
to :data:`MAX_CODE_LINES`; ``tests/test_annotations.py`` the annotated share to 90 %.

    python -m tools.code_sizes                # the working tree
    python -m tools.code_sizes --rev 9bbfb60~1   # a commit, read through git

prints the figures as JSON (``--json PATH`` writes them atomically).
"""

from __future__ import annotations

import ast
import io
import json
import pathlib
import subprocess
import tarfile
import tempfile
import tokenize

from benchmarks.common.cli import script_parser
from benchmarks.common.records import write_json

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: The most code lines a module of the package may hold.
MAX_CODE_LINES = 250

_SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}
_SCOPES = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def code_line_numbers(source: str) -> set[int]:
    """The numbers of the code lines of a module's source (module docstring).

    Parameters
    ----------
    source : str
        A Python module's text.

    Returns
    -------
    set of int
        Its code lines, 1-based.
    """
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = node.body if isinstance(node, _SCOPES) else []
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _SKIP:
            code.update(range(token.start[0], token.end[0] + 1))
    return code - docstrings


def code_lines(source: str) -> int:
    """How many code lines a module's source holds (module docstring).

    Parameters
    ----------
    source : str
        A Python module's text.

    Returns
    -------
    int
        Its code lines.
    """
    return len(code_line_numbers(source))


def function_lengths(source: str, code: set[int] | None = None) -> dict[str, int]:
    """The code lines of every function of a module, by qualified name.

    Parameters
    ----------
    source : str
        A Python module's text.
    code : set of int, optional
        Its :func:`code_line_numbers`, when the caller has them already.

    Returns
    -------
    dict
        ``"Class.method"`` or ``"function"`` (``"outer.<locals>.inner"`` for a
        nested one) -> its code lines.
    """
    code = code_line_numbers(source) if code is None else code
    found: dict[str, int] = {}

    def visit(body: list, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{node.name}"
                span = range(node.lineno, node.end_lineno + 1)
                found[name] = len(code.intersection(span))
                visit(node.body, f"{name}.<locals>.")

    visit(ast.parse(source).body, "")
    return found


def public_functions(package: pathlib.Path) -> list[tuple]:
    """Every public function of a package (module docstring).

    Parameters
    ----------
    package : pathlib.Path
        The package's folder.

    Returns
    -------
    list of tuple
        ``(module path relative to the package, qualified name, FunctionDef, class
        or None)``.
    """
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if any(p.startswith("_") and p != "__init__.py" for p in rel.split("/")):
            continue

        def visit(body, cls=None, rel=rel):
            for node in body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    visit(node.body, node)
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if node.name.startswith("_") and node.name != "__init__":
                    continue
                if node.name == "__init__" and cls is None:
                    continue
                name = f"{cls.name}.{node.name}" if cls else node.name
                found.append((rel, name, node, cls))

        visit(ast.parse(path.read_text()).body)
    return found


def arguments(node: ast.FunctionDef, cls: ast.ClassDef | None) -> list[ast.arg]:
    """The arguments a caller passes.

    Parameters
    ----------
    node : ast.FunctionDef
        The function.
    cls : ast.ClassDef or None
        Its class, for a method.

    Returns
    -------
    list of ast.arg
        Its arguments, ``self`` / ``cls`` aside, ``*args`` and ``**kwargs`` included.
    """
    a = node.args
    args = a.posonlyargs + a.args + a.kwonlyargs
    if cls is not None and args and args[0].arg in ("self", "cls"):
        args = args[1:]
    return args + [x for x in (a.vararg, a.kwarg) if x]


def fully_annotated(node: ast.FunctionDef, cls: ast.ClassDef | None) -> bool:
    """Whether every argument and the return (``__init__`` aside) are annotated.

    Parameters
    ----------
    node : ast.FunctionDef
        The function.
    cls : ast.ClassDef or None
        Its class, for a method.

    Returns
    -------
    bool
        True when fully annotated.
    """
    args_ok = all(x.annotation is not None for x in arguments(node, cls))
    return args_ok and (node.returns is not None or node.name == "__init__")


def sizes(root: pathlib.Path) -> dict:
    """The figures of the module docstring for the checkout at ``root``.

    Parameters
    ----------
    root : pathlib.Path
        A checkout: ``jaxannot/`` and ``README.md`` inside.

    Returns
    -------
    dict
        Module count, code lines, the largest modules, the longest functions, the
        public functions fully annotated and those with a Parameters section, and
        the README's lines.
    """
    package = root / "jaxannot"
    modules, functions = {}, {}
    for path in sorted(package.rglob("*.py")):
        rel, source = path.relative_to(root).as_posix(), path.read_text()
        code = code_line_numbers(source)
        modules[rel] = len(code)
        for name, n in function_lengths(source, code).items():
            functions[f"{rel}:{name}"] = n
    public = public_functions(package)
    annotated = sum(fully_annotated(node, cls) for _, _, node, cls in public)
    documented = sum(
        "Parameters\n" in (ast.get_docstring(node) or "")
        for _, _, node, cls in public
        if arguments(node, cls)
    )
    with_arguments = sum(bool(arguments(node, cls)) for _, _, node, cls in public)

    def largest(table: dict) -> list:
        return sorted(table.items(), key=lambda kv: (-kv[1], kv[0]))[:5]

    return {
        "modules": len(modules),
        "code_lines": sum(modules.values()),
        "largest_modules": largest(modules),
        "modules_over_limit": sum(n > MAX_CODE_LINES for n in modules.values()),
        "longest_functions": largest(functions),
        "public_functions": len(public),
        "fully_annotated": round(annotated / len(public), 4),
        "parameters_section": round(documented / with_arguments, 4),
        "readme_lines": len((root / "README.md").read_text().splitlines()),
    }


def _sizes_at(rev: str) -> dict:
    """:func:`sizes` of commit ``rev`` of this repository, read through git."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "jaxannot", "README.md"],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            # this repository's own archive; the filter exists from Python 3.11.4
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(folder, **safe)
        return sizes(pathlib.Path(folder))


def main(argv: list[str] | None = None) -> dict:
    """Print (and with ``--json`` write) the sizes (module docstring).

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    dict
        The figures.
    """
    parser = script_parser(__doc__, device=False)
    parser.add_argument("--rev", help="a commit (default: the working tree)")
    parser.add_argument("--json", type=pathlib.Path, help="write the figures here")
    args = parser.parse_args(argv)
    figures = _sizes_at(args.rev) if args.rev else sizes(ROOT)
    if args.json:
        write_json(args.json, figures, indent=2)
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
