"""ARFF reader: dense/sparse decoding, value conventions, malformed input, fuzzing."""

import pathlib
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxannot.data.arff import parse_arff, read_arff
from jaxannot.data.errors import DataFormatError
from jaxannot.data.mulan import load_mulan_arff

HEADER = """% a comment
@relation 'test rel'
@attribute a numeric
@attribute 'b c' real
@attribute n {1,0}
@attribute lab1 {0,1}
@attribute lab2 {0,1}
@data
"""
DENSE = HEADER + "1.5,2,0,1,0\n% comment row\n\n-3,4e-1,1,0,1\n0,?,0,1,1\n"
SPARSE = HEADER + "{0 1.5,1 2,2 0,3 1}\n{}\n{0 -3,1 0.4,4 1}\n"
XML = (
    '<?xml version="1.0"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">'
    '<label name="lab2"/><label name="lab1"/></labels>\n'
)


def test_dense_values_and_lines():
    a = parse_arff(DENSE.encode())
    assert not a.sparse and a.relation == "test rel"
    assert a.attribute_names == ("a", "b c", "n", "lab1", "lab2")
    x = a.columns(range(5), dtype=np.float64)
    # nominal {1,0}: value index 0 -> number 1, index 1 -> number 0
    expected = [[1.5, 2, 0, 1, 0], [-3, 0.4, 1, 0, 1], [0, np.nan, 0, 1, 1]]
    np.testing.assert_array_equal(x, expected)
    assert a.data_lines.tolist() == [9, 12, 13]  # comment and blank rows skipped


def test_sparse_omitted_values_are_zero_index():
    a = parse_arff(SPARSE.encode())
    assert a.sparse and a.num_rows == 3
    x = a.columns(range(5), dtype=np.float64)
    # explicit "0" of n={1,0} is 0; omitted nominal entries take the first declared
    # value, "1"
    expected = [[1.5, 2, 0, 1, 0], [0, 0, 1, 0, 0], [-3, 0.4, 1, 0, 1]]
    np.testing.assert_array_equal(x, expected)
    assert a.data_lines.tolist() == [9, 10, 11]


def test_sparse_equals_dense_on_same_content():
    dense = HEADER + "1.5,2,0,1,0\n0,0,1,0,0\n-3,0.4,1,0,1\n"
    np.testing.assert_array_equal(
        parse_arff(dense.encode()).columns(range(5)),
        parse_arff(SPARSE.encode()).columns(range(5)),
    )


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        (HEADER + "1,2,0,1\n", 9, "BadDataFormat"),  # too few values
        (HEADER + "1,2,0,1,0\n1,2,0,1,0,1\n", 10, "BadDataFormat"),  # too many
        (HEADER + "1,abc,0,1,0\n", 9, "BadNumericalValue"),
        (HEADER + "1,2,0,2,0\n", 9, "BadNominalValue"),
        (HEADER + "{0 1}\n{9 1}\n", 10, "BadDataFormat"),  # index out of range
        (HEADER + "{0 1}\n{0 1,x}\n", 10, "BadLayout"),
        (HEADER.replace("@data\n", ""), None, "BadLayout"),  # no @data
        (HEADER.replace("real", "reel"), 4, "BadAttributeType"),
        ("@relation r\n@attribute s string\n@data\n'x'\n", 2, "STRING"),
        ("@relation r\n@attribute i integer\n@data\n1\nnan\n", 5, "converted"),
    ],
)
def test_malformed_names_file_and_line(text, line, fragment):
    with pytest.raises(DataFormatError) as info:
        parse_arff(text.encode(), path="bad.arff")
    err = info.value
    assert isinstance(err, ValueError)
    assert "bad.arff" in str(err) and fragment in str(err)
    if line is not None:
        assert err.line == line and f"line {line}" in str(err)


@pytest.mark.parametrize("values", [3, 64])  # 64 took liac-arff years
@pytest.mark.parametrize(
    "form",
    [
        "{%s",  # no closing brace
        "{%s x}",  # a space inside an unquoted value
        "{%s} x",  # text after the brace
        "{%s,'open}",  # an unclosed quote
    ],
)
def test_a_malformed_nominal_line_is_refused_at_once(values, form):
    listed = ",".join(f"v{i}" for i in range(values))
    text = f"@relation r\n@attribute g {form % listed}\n@data\nv0\n"
    with pytest.raises(DataFormatError, match=r"bad\.arff, line 2: malformed nominal"):
        parse_arff(text, path="bad.arff")


def test_nominal_lines_of_every_accepted_form_still_parse():
    text = (
        '@relation r\n@attribute a { x , \'y z\' ,"q,\\"r"}\n'
        '@attribute b {0,1}\n@data\n\'y z\',1\n"q,\\"r",0\n'
    )
    parsed = parse_arff(text)
    assert parsed.attribute_types[0] == ("x", "y z", 'q,"r')
    assert parsed.columns([0, 1]).tolist() == [[1, 1], [2, 0]]


def test_a_byte_order_mark_is_ignored():
    text = DENSE.split("\n", 1)[1]  # starting with @relation
    parsed = parse_arff(b"\xef\xbb\xbf" + text.encode(), path="bom.arff")
    np.testing.assert_array_equal(parsed.values, parse_arff(text.encode()).values)


def test_non_utf8_line(tmp_path):
    p = tmp_path / "latin.arff"
    p.write_bytes(DENSE.encode().replace(b"'b c'", b"'b\xe9c'"))
    with pytest.raises(DataFormatError, match=r"latin\.arff, line 4: not valid UTF-8"):
        read_arff(p)


def test_real_file_relation_and_shape(data_root):
    a = read_arff(data_root / "emotions" / "emotions-train.arff")
    assert a.num_rows == 391 and len(a.attribute_names) == 78
    assert a.relation == "musicout"


# ------------------------------------------------------------------ fuzzing
GARBAGE = [
    "{",
    "}",
    "'",
    '"',
    ",",
    "@data",
    "abc",
    "%",
    "\\",
    "1e999",
    "?",
    "{0 ",
    "99999 1",
    "@attribute x",
    " ",
    "-",
    "nan",
    "\t",
]


@st.composite
def corrupted(draw):
    base = draw(st.sampled_from([DENSE, SPARSE]))
    lines = base.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(
            st.sampled_from(
                [
                    "truncate",
                    "garbage",
                    "index",
                    "drop_value",
                    "add_value",
                    "delete",
                    "duplicate",
                    "bytes",
                ]
            )
        )
        line = lines[i]
        if op == "truncate":
            lines[i] = line[: draw(st.integers(0, max(len(line) - 1, 0)))]
        elif op == "garbage":
            pos = draw(st.integers(0, len(line)))
            token = draw(st.sampled_from(GARBAGE) | st.text(max_size=4))
            lines[i] = line[:pos] + token + line[pos:]
        elif op == "index":
            lines[i] = line.replace("{0 ", "{" + str(draw(st.integers(5, 10**6))) + " ")
        elif op == "drop_value":
            lines[i] = ",".join(line.split(",")[:-1])
        elif op == "add_value":
            lines[i] = line + "," + draw(st.sampled_from(["1", "x", "?", "{1 1}"]))
        elif op == "delete":
            del lines[i]
            if not lines:
                lines = [""]
        elif op == "duplicate":
            lines.insert(i, line)
        else:
            lines[i] = line + "\udcff"  # becomes a lone invalid byte below
    text = "\n".join(lines)
    return text.encode("utf-8", errors="surrogateescape")


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(raw=corrupted())
def test_fuzzed_arff_gives_dataformaterror_only(raw):
    """Corrupted files either parse or raise DataFormatError, never anything else."""
    try:
        parse_arff(raw, path="fuzz.arff")
    except DataFormatError as e:
        assert "fuzz.arff" in str(e)
    with tempfile.TemporaryDirectory() as d:
        arff_path, xml_path = pathlib.Path(d) / "f.arff", pathlib.Path(d) / "f.xml"
        arff_path.write_bytes(raw)
        xml_path.write_text(XML)
        try:
            corpus = load_mulan_arff(arff_path, xml_path)
        except DataFormatError as e:
            assert "f.arff" in str(e)
        else:
            assert np.isfinite(corpus.views["features"]).all()
            assert set(np.unique(corpus.words)) <= {0.0, 1.0}
