"""The command line of every benchmark script: one parser convention.

from benchmarks.common.cli import script_parser

parser = script_parser(__doc__)  # or script_parser(__doc__, "what --device misses")
parser.add_argument(...)
args = parser.parse_args(argv)
use_device(args.device)  # before any JAX computation
"""

from __future__ import annotations

import argparse

from benchmarks.common.device import add_device_argument


def script_parser(
    doc: str, device_note: str | None = None, *, device: bool = True
) -> argparse.ArgumentParser:
    """A script's parser: its description is the first paragraph of the script's
    docstring, and it takes ``--device``.

    Parameters
    ----------
    doc : str
        The script's docstring (``__doc__``).
    device_note : str, optional
        What ``--device`` does not reach, for its help
        (:func:`~benchmarks.common.device.add_device_argument`).
    device : bool
        Add ``--device``; False for a tool that runs no JAX computation (it reads
        files and records).

    Returns
    -------
    argparse.ArgumentParser
        The parser, ``--device`` added unless ``device`` is False.
    """
    summary = " ".join(doc.split("\n\n")[0].split())
    parser = argparse.ArgumentParser(description=summary)
    if device:
        add_device_argument(parser, device_note)
    return parser
