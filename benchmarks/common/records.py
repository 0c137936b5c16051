"""Where the records live, how a script writes one, and how it starts itself again.

Every script writes its JSON with :func:`write_json` (atomic: a reader sees the old
record or the whole new one, never a half-written file) and starts a child process of
itself with :func:`script_command` and :func:`root_env` (the children import
``benchmarks`` as the parent did, wherever they run from).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from jaxannot.data.atomic import atomic_write

#: the repository root: ``python -m benchmarks.PURPOSE.NAME`` runs from here
ROOT = Path(__file__).resolve().parents[2]
#: the committed records
RESULTS = ROOT / "benchmarks" / "results"


def write_json(
    path: str | os.PathLike,
    record: object,
    *,
    indent: int = 1,
    sort_keys: bool = False,
    allow_nan: bool = True,
) -> None:
    """Write ``record`` as JSON (and a final newline) to ``path`` atomically.

    Parameters
    ----------
    path : str or PathLike
        The file; its folder is made when missing. ``-`` writes to standard output.
    record : object
        Anything :func:`json.dumps` takes.
    indent : int
        JSON indentation.
    sort_keys : bool
        Sort the keys of every object.
    allow_nan : bool
        Write NaN and infinities (not JSON); ``False`` raises ``ValueError``.
    """
    text = json.dumps(record, indent=indent, sort_keys=sort_keys, allow_nan=allow_nan)
    text += "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: fh.write(text.encode()))


def script_command(module: str, *args: str) -> list[str]:
    """The command line of a child process that runs the script ``module``.

    Parameters
    ----------
    module : str
        The script's module name, its ``__spec__.name`` (e.g.
        ``benchmarks.scale.first_fit``).
    *args : str
        Its arguments.

    Returns
    -------
    list of str
        ``[python, "-m", module, *args]``; run it with :func:`root_env`.
    """
    return [sys.executable, "-m", module, *args]


def root_env(env: dict | None = None) -> dict:
    """``env`` (default: ``os.environ``) with the repository root first on
    ``PYTHONPATH``, so that a child imports ``benchmarks`` and ``tools``.

    Parameters
    ----------
    env : dict, optional
        The environment to extend (copied).

    Returns
    -------
    dict
        The child's environment.
    """
    env = dict(os.environ if env is None else env)
    paths = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env
