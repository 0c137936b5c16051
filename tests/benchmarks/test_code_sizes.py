"""``tools/code_sizes.py``: the sizes the closing notes of issue 45 report."""

import json

from tools import code_sizes

SOURCE = '''"""Module."""

import os


class A:
    """Doc."""

    def method(self, x: int) -> int:
        """Doc.

        More.
        """
        # a comment
        y = x + 1

        def inner():
            return y

        return inner()


def f(x):
    return (x +
            1)
'''


def test_function_lengths_count_code_lines_only():
    lengths = code_sizes.function_lengths(SOURCE)
    # def line, y = ..., def inner, return y, return inner(): docstring, comment
    # and blank lines aside
    assert lengths == {"A.method": 5, "A.method.<locals>.inner": 2, "f": 3}
    assert code_sizes.code_lines(SOURCE) == 10


def test_sizes_of_the_package_and_of_a_commit(tmp_path, capsys):
    now = code_sizes.sizes(code_sizes.ROOT)
    assert now["modules_over_limit"] == 0
    assert now["largest_modules"][0][1] <= code_sizes.MAX_CODE_LINES
    assert 0.9 <= now["fully_annotated"] <= 1.0
    assert now["public_functions"] > 500
    out = tmp_path / "sizes.json"
    head = code_sizes.main(["--rev", "HEAD", "--json", str(out)])
    as_json = json.loads(json.dumps(head))  # pairs as lists
    assert json.loads(out.read_text()) == as_json
    assert head["modules"] > 100 and head["readme_lines"] > 0
    assert json.loads(capsys.readouterr().out) == as_json
