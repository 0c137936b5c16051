"""Docstring examples that run: each listed object's examples (those not marked
``+SKIP``) are executed by :mod:`doctest` and must print what they show."""

import doctest

import pytest

from jaxannot.diagnostics import fits

RUNNABLE = [fits.to_inference_data]


@pytest.mark.parametrize("obj", RUNNABLE, ids=lambda o: o.__qualname__)
def test_the_docstring_example_runs(obj):
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(obj, obj.__qualname__, globs={}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0, "no example ran"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
