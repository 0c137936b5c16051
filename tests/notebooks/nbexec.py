"""Notebook helpers: the `.ipynb` ↔ jupytext `.py` pairing and nbclient execution.

The paper notebooks are written as jupytext percent-format scripts
(`notebooks/NAME.py`, the source of truth) and paired with `notebooks/NAME.ipynb`,
the notebook people open (committed with its full-mode outputs). A script reads its
command-line arguments from the environment variable `JAXANNOT_NOTEBOOK_ARGS` when it
runs under a Jupyter kernel, so the notebook runs in small mode with
`JAXANNOT_NOTEBOOK_ARGS=--small` and in full mode with it unset.

As a command (from the repository root)::

    python tests/notebooks/nbexec.py sync notebooks/NAME.py   # NAME.ipynb, no outputs
    python tests/notebooks/nbexec.py check notebooks/NAME.py  # exit 1 if out of sync
    python tests/notebooks/nbexec.py run notebooks/NAME.py [--args "--small"]

`run` executes the notebook converted from the script in a fresh `python3` kernel
(working directory `notebooks/`), strips the execution timings, replaces the
repository's absolute path in the outputs by `.` and refuses outputs that still name
a machine path.
"""

from __future__ import annotations

import argparse
import copy
import os
import pathlib
import re
import sys
import tempfile

import jupytext
import nbformat
from nbclient import NotebookClient
from traitlets.config import Config

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
ENV_ARGS = "JAXANNOT_NOTEBOOK_ARGS"
MACHINE_PATH = re.compile(r"(?<![\w.])/(work|tmp|home|root|opt|usr)/")
#: What XLA's slow-compile alarm suggests (``Very slow compile? If you want to file a
#: bug, run with envvar XLA_FLAGS=--xla_dump_to=/tmp/foo``), printed on a kernel's
#: stderr when one compile takes long, as on a loaded machine: a placeholder, not a
#: path of the machine.
XLA_ALARM_HINT = "--xla_dump_to=/tmp/foo"


def from_script(script: pathlib.Path) -> nbformat.NotebookNode:
    """The notebook jupytext makes of a percent-format script (no outputs)."""
    nb = jupytext.read(script, fmt="py:percent")
    nb.metadata.setdefault("jupytext", {})["formats"] = "ipynb,py:percent"
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def cells(nb) -> list[tuple[str, str]]:
    """(cell type, source) of every cell: what the pairing must keep equal."""
    return [(c.cell_type, c.source) for c in nb.cells]


def out_of_sync(script: pathlib.Path, ipynb: pathlib.Path | None = None) -> list[str]:
    """Differences between the script's cells and its paired notebook's (empty when
    in sync)."""
    ipynb = ipynb or script.with_suffix(".ipynb")
    if not ipynb.exists():
        return [f"{ipynb.name} is missing"]
    want, have = cells(from_script(script)), cells(nbformat.read(ipynb, as_version=4))
    problems = []
    if len(want) != len(have):
        problems.append(f"{len(want)} cells in {script.name}, {len(have)} in notebook")
    for i, (w, h) in enumerate(zip(want, have, strict=False)):
        if w != h:
            problems.append(f"cell {i} differs: {w[1][:60]!r} vs {h[1][:60]!r}")
    return problems


def execute(
    path: pathlib.Path,
    args: str = "",
    timeout: int = 600,
    env: dict | None = None,
) -> nbformat.NotebookNode:
    """Run a notebook (an `.ipynb`, or the notebook of a percent-format `.py`) with
    ``JAXANNOT_NOTEBOOK_ARGS=args``; returns it executed and cleaned."""
    path = pathlib.Path(path)
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
    else:
        nb = from_script(path)
    kernel_env = {**os.environ, **(env or {}), ENV_ARGS: args}
    kernel_env.setdefault("JAX_PLATFORMS", "cpu")
    kernel_env.setdefault("TQDM_DISABLE", "1")
    kernel_env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    # tqdm.auto warns on import under a kernel without ipywidgets (bars are off)
    kernel_env.setdefault("PYTHONWARNINGS", "ignore:IProgress not found")
    # The kernel talks over unix sockets in a folder of its own: with TCP, the ports
    # jupyter_client finds free are bound by the kernel only later, and a process of
    # the other test worker can take one in between (the kernel then dies before
    # replying to kernel_info).
    with tempfile.TemporaryDirectory(prefix="nbk") as sockets:
        ipc = {"transport": "ipc", "ip": os.path.join(sockets, "k")}
        client = NotebookClient(
            nb,
            config=Config(KernelManager=ipc),
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        client.execute(env=kernel_env)
    return clean(nb)


def _scrub(text: str) -> str:
    return text.replace(str(ROOT), ".")


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop execution timings and the kernel's version noise; scrub the repository
    path from text outputs."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            if "text" in out:
                out["text"] = _scrub(out["text"])
            for key in ("text/plain", "text/markdown", "text/html"):
                if key in out.get("data", {}):
                    out["data"][key] = _scrub(out["data"][key])
            if "traceback" in out:
                out["traceback"] = [_scrub(t) for t in out["traceback"]]
    return nb


def texts(nb) -> str:
    """Every text output (stdout, stderr, results) joined.

    Consecutive outputs of one stream are concatenated as they were written: the
    kernel flushes a stream on a timer, so one printed line can arrive in two
    outputs, and a separator between them would cut the line in two."""
    parts: list[str] = []
    stream = None
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            name = out.get("name") if out.get("output_type") == "stream" else None
            if name is not None and name == stream:
                parts[-1] += out.get("text", "")
                continue
            stream = name
            if name is not None:
                parts.append(out.get("text", ""))
                continue
            if "text" in out:
                parts.append(out["text"])
            parts.append(out.get("data", {}).get("text/plain", ""))
        stream = None
    return "\n".join(parts)


def images(nb) -> list[str]:
    """The base64 PNGs among the outputs."""
    return [
        out["data"]["image/png"]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]


def machine_paths(nb) -> list[str]:
    """The machine paths named in the text outputs (not XLA's placeholder)."""
    return MACHINE_PATH.findall(texts(nb).replace(XLA_ALARM_HINT, ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("sync", "check", "run"))
    ap.add_argument("scripts", nargs="+", type=pathlib.Path)
    ap.add_argument("--args", default="", help="JAXANNOT_NOTEBOOK_ARGS for `run`")
    ap.add_argument("--timeout", type=int, default=-1, help="per cell (s); -1: none")
    opts = ap.parse_args(argv)
    status = 0
    for script in opts.scripts:
        target = script.with_suffix(".ipynb")
        if opts.command == "check":
            problems = out_of_sync(script)
            for p in problems:
                print(f"{script}: {p}")
            status |= bool(problems)
            continue
        if opts.command == "sync":
            nb = from_script(script)
        else:
            nb = execute(script, opts.args, timeout=opts.timeout)
            found = machine_paths(nb)
            if found:
                print(f"{script}: machine paths left in outputs: {found}")
                status = 1
        nbformat.write(nb, target)
        print(f"wrote {target}")
    return status


if __name__ == "__main__":
    sys.exit(main())
