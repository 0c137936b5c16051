"""Mulan loaders: label XML, label-by-name matching, directories, real files."""

import shutil

import numpy as np
import pytest

from jaxannot.data.arff import read_arff
from jaxannot.data.errors import DataFormatError
from jaxannot.data.mulan import (
    find_mulan_files,
    load_mulan_arff,
    load_mulan_dir,
    read_label_xml,
)

NESTED_XML = """<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
  <label name="it's &quot;odd&quot;">
    <label name="child one"/>
  </label>
  <label name="plain"></label>
</labels>
"""
ARFF = """@relation r
@attribute f1 numeric
@attribute 'child one' {0,1}
@attribute "it's \\"odd\\"" {0,1}
@attribute 'f 2' numeric
@attribute plain {0,1}
@data
0.5,1,0,2,1
1.5,0,1,-2,0
"""


def test_nested_labels_and_quoted_names(tmp_path):
    (tmp_path / "t.xml").write_text(NESTED_XML)
    (tmp_path / "t.arff").write_text(ARFF)
    names = read_label_xml(tmp_path / "t.xml")
    assert names == ('it\'s "odd"', "child one", "plain")
    c = load_mulan_arff(tmp_path / "t.arff", tmp_path / "t.xml")
    assert c.word_names == names
    # columns picked by name: XML order (odd, child, plain) from attributes (3, 2, 5)
    np.testing.assert_array_equal(c.words, [[0, 1, 1], [1, 0, 0]])
    np.testing.assert_array_equal(c.views["features"], [[0.5, 2], [1.5, -2]])
    assert c.feature_names["features"] == ("f1", "f 2")
    assert c.view_kinds["features"] == "real"


def test_label_xml_errors(tmp_path):
    p = tmp_path / "x.xml"
    p.write_text(
        '<labels xmlns="http://mulan.sourceforge.net/labels">\n<label name="a">\n'
    )
    with pytest.raises(DataFormatError, match=r"x\.xml, line 3: malformed label XML"):
        read_label_xml(p)
    p.write_text("<labels/>")
    with pytest.raises(DataFormatError, match="no <label"):
        read_label_xml(p)
    p.write_text('<labels><label name="a"/><label name="a"/></labels>')
    with pytest.raises(DataFormatError, match="more than once"):
        read_label_xml(p)


def test_missing_label_and_bad_values(tmp_path):
    (tmp_path / "t.arff").write_text(ARFF)
    (tmp_path / "t.xml").write_text('<labels><label name="nope"/></labels>')
    with pytest.raises(DataFormatError, match=r"t\.arff.*not attributes.*'nope'"):
        load_mulan_arff(tmp_path / "t.arff", tmp_path / "t.xml")
    (tmp_path / "t.xml").write_text('<labels><label name="f1"/></labels>')
    with pytest.raises(DataFormatError, match=r"t\.arff, line 8: label 'f1' has value"):
        load_mulan_arff(tmp_path / "t.arff", tmp_path / "t.xml")
    (tmp_path / "t.xml").write_text('<labels><label name="plain"/></labels>')
    (tmp_path / "t.arff").write_text(ARFF.replace("1.5,0", "?,0"))
    with pytest.raises(
        DataFormatError, match=r"t\.arff, line 9: feature 'f1' is missing"
    ):
        load_mulan_arff(tmp_path / "t.arff", tmp_path / "t.xml")
    (tmp_path / "t.arff").write_text(ARFF.replace("1.5,0", "1e999,0"))
    with pytest.raises(
        DataFormatError, match=r"line 9: feature 'f1' is missing or not"
    ):
        load_mulan_arff(tmp_path / "t.arff", tmp_path / "t.xml")


@pytest.mark.parametrize("name", ["yeast", "enron"])
def test_labels_matched_by_name_when_xml_order_differs(data_root, name):
    d = data_root / name
    xml_names = read_label_xml(d / f"{name}.xml")
    raw = read_arff(d / f"{name}-train.arff")
    attr_label_order = [n for n in raw.attribute_names if n in set(xml_names)]
    assert list(xml_names) != attr_label_order  # the premise of this test
    c = load_mulan_arff(d / f"{name}-train.arff", d / f"{name}.xml")
    assert c.word_names == xml_names
    for k in (0, 3, len(xml_names) - 1):  # independent column lookup by name
        col = raw.attribute_names.index(xml_names[k])
        np.testing.assert_array_equal(c.words[:, k], raw.columns([col])[:, 0])
    assert c.num_words + c.views["features"].shape[1] == len(raw.attribute_names)


def test_yeast_shapes_and_cardinality(data_root):
    train, test = load_mulan_dir(data_root / "yeast")
    assert train.views["features"].shape == (1500, 103)
    assert test.views["features"].shape == (917, 103)
    assert train.num_words == 14
    # SOURCE.md: label cardinality 4.228 train, 4.252 test (3 decimals)
    assert train.words.sum(1).mean() == pytest.approx(4.228, abs=5e-4)
    assert test.words.sum(1).mean() == pytest.approx(4.252, abs=5e-4)


def test_corel5k_sparse_equals_dense_test(data_root):
    d = data_root / "corel5k"
    labels = read_label_xml(d / "Corel5k.xml")
    dense = load_mulan_arff(d / "Corel5k-test.arff", d / "Corel5k.xml", labels=labels)
    sparse = load_mulan_arff(
        d / "Corel5k-test-sparse.arff", d / "Corel5k.xml", labels=labels
    )
    assert read_arff(d / "Corel5k-test-sparse.arff").sparse
    assert not read_arff(d / "Corel5k-test.arff").sparse
    np.testing.assert_array_equal(dense.views["features"], sparse.views["features"])
    np.testing.assert_array_equal(dense.words, sparse.words)
    assert dense.views["features"].shape == (500, 499) and dense.num_words == 374
    # SOURCE.md: mean 9.1 non-zero blob features, label cardinality 3.526 on test
    assert (dense.views["features"] > 0).sum(1).mean() == pytest.approx(9.1, abs=0.05)
    assert dense.words.sum(1).mean() == pytest.approx(3.526, abs=5e-4)


def test_mulan_directory_under_another_stem(data_root, tmp_path):
    src = data_root / "scene"
    for part in ("train", "test"):
        shutil.copy(src / f"scene-{part}.arff", tmp_path / f"myset-{part}.arff")
    shutil.copy(src / "scene.xml", tmp_path / "myset.xml")
    files = find_mulan_files(tmp_path)
    assert files["stem"] == "myset"
    train, test = load_mulan_dir(tmp_path)
    assert train.name == "myset"
    assert train.views["features"].shape == (1211, 294)
    assert test.views["features"].shape == (1196, 294)
    assert train.word_names == (
        "Beach",
        "Sunset",
        "FallFoliage",
        "Field",
        "Mountain",
        "Urban",
    )
    assert train.words.sum(1).mean() == pytest.approx(1.062, abs=5e-4)
    assert train.view_kinds["features"] == "real"


def test_directory_prefers_dense_and_reports_missing(tmp_path):
    (tmp_path / "s.xml").write_text('<labels><label name="y"/></labels>')
    head = "@relation r\n@attribute x numeric\n@attribute y {0,1}\n@data\n"
    (tmp_path / "s-train-sparse.arff").write_text(head + "{0 5,1 1}\n")
    train, test = load_mulan_dir(tmp_path)
    assert test is None and train.views["features"][0, 0] == 5
    (tmp_path / "s-train.arff").write_text(head + "7,1\n")
    assert find_mulan_files(tmp_path)["train"].name == "s-train.arff"
    assert load_mulan_dir(tmp_path)[0].views["features"][0, 0] == 7
    (tmp_path / "s-train.arff").unlink()
    (tmp_path / "s-train-sparse.arff").unlink()
    with pytest.raises(FileNotFoundError, match=r"s-train\[-sparse\]\.arff.*'s\.xml'"):
        load_mulan_dir(tmp_path)
    (tmp_path / "s.xml").unlink()
    with pytest.raises(FileNotFoundError, match=r"exactly one <stem>\.xml.*found \[\]"):
        load_mulan_dir(tmp_path)
