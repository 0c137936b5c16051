"""Issue 44, points 4 and 5: a file's text never reaches the terminal raw, and the
messages name the input.

ESC starts a terminal sequence (retitle the window, clear the screen), BEL rings,
NUL truncates; each is shown as ``\\xNN``. Every test failed before the escaping.
"""

from __future__ import annotations

import logging
import types

import numpy as np
import pytest

from jaxannot.cli import app, photos, query
from jaxannot.cli.logs import log_to_stderr
from jaxannot.data.arff import parse_arff
from jaxannot.data.errors import DataFormatError

HOSTILE = "evil\x1b]0;PWNED\x07\x1b[2J\x00end"
RAW = ("\x1b", "\x07", "\x00")


def _clean(text: str) -> bool:
    return not any(c in text for c in RAW)


def test_liac_arff_error_text_is_escaped():
    """liac-arff quotes the bad value of a row in its message."""
    text = f"@relation r\n@attribute a {{x,y}}\n@data\n{HOSTILE}\n"
    with pytest.raises(DataFormatError) as err:
        parse_arff(text, path="t.arff")
    message = str(err.value)
    assert _clean(message) and "\\x1b" in message, message


def test_an_error_line_escapes_control_characters(capsys):
    app._print_error(f"tags file: {HOSTILE}\nsecond line")
    err = capsys.readouterr().err
    assert _clean(err) and err.count("\n") == 1
    assert "\\x1b]0;PWNED\\x07" in err


def test_a_warning_quoting_a_tags_csv_name_is_escaped(capsys):
    with log_to_stderr(logging.INFO):
        logging.getLogger("jaxannot.data.photos").warning("no photo %s", HOSTILE)
    err = capsys.readouterr().err
    assert _clean(err) and "no photo evil\\x1b" in err


def test_annotate_escapes_tag_names(capsys):
    vocabulary = ["sky", HOSTILE]
    photos._print_tags(["a.png"], np.array([[0.1, 0.9]]), vocabulary, 2, False)
    out = capsys.readouterr().out
    assert _clean(out) and out.startswith("a.png: evil\\x1b")


def test_an_out_of_memory_message_names_the_input(capsys):
    def fit(args):
        raise MemoryError("Unable to allocate 37.3 GiB for an array")

    args = types.SimpleNamespace(func=fit, dataset="hostile-ds", model=None)
    assert app._run(args) == 2
    err = capsys.readouterr().err
    assert "out of memory on dataset hostile-ds" in err, err


def test_a_feature_dimension_mismatch_names_the_model():
    def score_words(fitted, corpus):
        raise ValueError("the corpus has 7 feature dimensions, the fitted model 5")

    method = types.SimpleNamespace(score_words=score_words)
    corpus = types.SimpleNamespace(num_images=3, subset=lambda rows: None)
    args = types.SimpleNamespace(model="saved/knn.npz", row=None, top=3)
    with pytest.raises(ValueError, match=r"^model saved/knn\.npz: the corpus has 7"):
        query._annotate(args, None, method, corpus, ["a", "b"])
