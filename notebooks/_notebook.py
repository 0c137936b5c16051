"""What every paper notebook shares: the repository's folders and its arguments.

Imported by the notebooks as scripts (``python notebooks/NAME.py``: this folder is on
``sys.path``) and under a Jupyter kernel (started in this folder).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import sys

__all__ = ["ROOT", "FIGURES", "script_argv"]

#: The repository root, and the folder the notebooks' figures are written to.
ROOT = pathlib.Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"


def script_argv(argv=None) -> list[str]:
    """``argv`` if given; under a Jupyter kernel (whose ``sys.argv`` belongs to
    ipykernel) the shell-split ``JAXANNOT_NOTEBOOK_ARGS``; else ``sys.argv[1:]``."""
    if argv is not None:
        return list(argv)
    if "ipykernel" in sys.modules:
        return shlex.split(os.environ.get("JAXANNOT_NOTEBOOK_ARGS", ""))
    return sys.argv[1:]
