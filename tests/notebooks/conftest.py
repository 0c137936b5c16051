"""The notebooks import what they share (``notebooks/_notebook.py``) as a sibling
module; tests that load a notebook script by path need its folder on ``sys.path``."""

import pathlib
import sys

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
if str(NOTEBOOKS) not in sys.path:
    sys.path.insert(0, str(NOTEBOOKS))
