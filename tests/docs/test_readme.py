"""The README stays a front page (issue 45, point 6): details go to docs/."""

import pathlib

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"

#: The most lines the README may hold.
MAX_README_LINES = 250


def test_the_readme_is_short_and_says_how_to_install_the_library():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"
    assert any("as a library" in line and "pip install" in line for line in lines)
