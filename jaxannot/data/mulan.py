"""Mulan multi-label datasets: an ARFF file plus a label XML.

A Mulan dataset stores features and labels as attributes of one ARFF relation; the XML
(namespace ``http://mulan.sourceforge.net/labels``) names the label attributes,
possibly nested in a hierarchy (``<label name="a"><label name="b"/></label>``; every
``label`` element at any depth is a label). Label columns are found **by name**: in
yeast and enron the XML order differs from the attribute order. The words of the
corpus follow the XML order; the features are all the other attributes in file order.

A *Mulan directory* holds ``<stem>.xml``, ``<stem>-train[-sparse].arff`` and
``<stem>-test[-sparse].arff`` (the dense file is preferred when both forms exist).

References
----------
G. Tsoumakas, E. Spyromitros-Xioufis, J. Vilcek, I. Vlahavas, "Mulan: A Java Library
for Multi-Label Learning", JMLR 12:2411-2414, 2011. http://mulan.sourceforge.net/format.html
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import xml.etree.ElementTree as ET

import numpy as np

from jaxannot.data.arff import ArffData, read_arff
from jaxannot.data.bounded import MAX_TEXT_BYTES, read_limited
from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import DataFormatError, check_link_loop

__all__ = [
    "MULAN_NAMESPACE",
    "read_label_xml",
    "load_mulan_arff",
    "find_mulan_files",
    "load_mulan_dir",
]

MULAN_NAMESPACE = "http://mulan.sourceforge.net/labels"


def read_label_xml(path: str | os.PathLike) -> tuple[str, ...]:
    """Label names of a Mulan label XML, in document order (all nesting depths).

    Raises
    ------
    DataFormatError
        Malformed XML (with the line), no labels, a label without a name, a name
        given twice, not a regular file (a named pipe is refused, not waited on) or
        over :data:`~jaxannot.data.bounded.MAX_TEXT_BYTES`.
    """
    path = os.fspath(path)
    raw = read_limited(path, "label XML", MAX_TEXT_BYTES, "it is parsed whole")
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        msg = f"malformed label XML ({e.msg})"
        raise DataFormatError(path, msg, e.position[0]) from None
    names = []
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
        if tag != "label":
            continue
        name = el.get("name")
        if not name:
            raise DataFormatError(path, "a <label> element has no name attribute")
        names.append(name)
    if not names:
        raise DataFormatError(
            path, f"no <label name=...> elements (namespace {MULAN_NAMESPACE})"
        )
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DataFormatError(path, f"label names given more than once: {dup[:5]}")
    return tuple(names)


def _unescape(name: str) -> str:
    """Drop backslash escapes (``m\\'usica`` -> ``m'usica``) for lenient matching."""
    out, it = [], iter(name)
    for ch in it:
        out.append(next(it, "") if ch == "\\" else ch)
    return "".join(out)


def _label_columns(data: ArffData, labels: tuple[str, ...], xml_path: str) -> list[int]:
    """Attribute index of each label name: exact match, else escape-insensitive."""
    exact = {n: j for j, n in enumerate(data.attribute_names)}
    loose = {_unescape(n): j for j, n in enumerate(data.attribute_names)}
    cols, missing = [], []
    for name in labels:
        j = exact.get(name, loose.get(_unescape(name)))
        if j is None:
            missing.append(name)
        else:
            cols.append(j)
    if missing:
        raise DataFormatError(
            data.path,
            f"{len(missing)} label(s) of {xml_path} are not attributes of this file: "
            f"{missing[:5]}",
        )
    if len(set(cols)) != len(cols):
        raise DataFormatError(data.path, "two labels of the XML match one attribute")
    return cols


def load_mulan_arff(
    arff_path: str | os.PathLike,
    xml_path: str | os.PathLike,
    *,
    name: str | None = None,
    feature_kind: str | None = None,
    view_name: str = "features",
    labels: tuple[str, ...] | None = None,
) -> Corpus:
    """Load one Mulan ARFF file as a :class:`Corpus`.

    Parameters
    ----------
    arff_path, xml_path : path-like
        The ARFF data and the Mulan label XML.
    name : str, optional
        Corpus name (default: the ARFF file stem).
    feature_kind : {"bag", "binary", "real"}, optional
        Kind of the feature view. Default: ``"binary"`` when every feature value is
        0 or 1, else ``"real"``.
    view_name : str
        Name of the feature view.
    labels : tuple of str, optional
        Label names already read from ``xml_path`` (skips re-reading it).

    Returns
    -------
    Corpus
        ``views[view_name]`` = the non-label attributes ``[rows, features]`` float32;
        ``words`` = the 0/1 label matrix, columns in XML order; ``word_names`` = the
        label names; ``feature_names[view_name]`` = the feature attribute names.

    Raises
    ------
    DataFormatError
        Malformed files, labels missing from the ARFF, label values other than 0/1,
        missing or non-finite feature values (file and line named).
    """
    xml_path = os.fspath(xml_path)
    if labels is None:
        labels = read_label_xml(xml_path)
    data = read_arff(arff_path)
    if data.num_rows == 0:
        raise DataFormatError(data.path, "the @data section has no instances")
    label_cols = _label_columns(data, labels, xml_path)
    is_label = np.zeros(len(data.attribute_names), dtype=bool)
    is_label[label_cols] = True
    feat_cols = np.flatnonzero(~is_label)
    if feat_cols.size == 0:
        raise DataFormatError(data.path, "every attribute is a label: no features")
    words = data.columns(label_cols)
    bad = ~np.isin(words, (0.0, 1.0))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataFormatError(
            data.path,
            f"label {labels[c]!r} has value {words[r, c]!r} (expected 0 or 1)",
            int(data.data_lines[r]),
        )
    x = data.columns(feat_cols)
    finite = np.isfinite(x)
    if not finite.all():
        r, c = np.argwhere(~finite)[0]
        raise DataFormatError(
            data.path,
            f"feature {data.attribute_names[feat_cols[c]]!r} is missing or not finite "
            f"({x[r, c]!r}) in instance {r}",
            int(data.data_lines[r]),
        )
    if feature_kind is None:
        feature_kind = "binary" if np.isin(x, (0.0, 1.0)).all() else "real"
    corpus = Corpus.from_arrays(
        {view_name: x},
        view_kinds={view_name: feature_kind},
        words=words,
        word_names=tuple(labels),
        name=name or pathlib.Path(data.path).stem,
    )
    feature_names = tuple(data.attribute_names[j] for j in feat_cols)
    return dataclasses.replace(corpus, feature_names={view_name: feature_names})


def find_mulan_files(directory: str | os.PathLike, stem: str | None = None) -> dict:
    """Locate the XML and train/test ARFF files of a Mulan directory.

    Parameters
    ----------
    directory : path-like
        The folder.
    stem : str, optional
        File stem; default: the stem of the only ``*.xml`` file in the folder.

    Returns
    -------
    dict
        ``{"stem", "xml", "train", "test"}`` (paths; ``test`` may be None).

    Raises
    ------
    FileNotFoundError
        Listing the files that were found when the XML or the training ARFF is missing.
    """
    d = pathlib.Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"{d} is not a directory")
    found = sorted(p.name for p in d.iterdir())
    if stem is None:
        xmls = sorted(p for p in d.glob("*.xml"))
        if len(xmls) != 1:
            raise FileNotFoundError(
                f"{d}: expected exactly one <stem>.xml Mulan label file, found "
                f"{[p.name for p in xmls]}; files present: {found}"
            )
        stem = xmls[0].stem
    xml = d / f"{stem}.xml"

    check_link_loop(xml)

    def pick(part: str) -> pathlib.Path | None:
        for suffix in ("", "-sparse"):
            p = d / f"{stem}-{part}{suffix}.arff"
            check_link_loop(p)
            if p.is_file():
                return p
        return None

    train, test = pick("train"), pick("test")
    if not xml.is_file() or train is None:
        want = [
            f"{stem}.xml",
            f"{stem}-train[-sparse].arff",
            f"{stem}-test[-sparse].arff",
        ]
        raise FileNotFoundError(
            f"{d} is not a complete Mulan directory: need {want}; "
            f"files present: {found}"
        )
    return {"stem": stem, "xml": xml, "train": train, "test": test}


def load_mulan_dir(
    directory: str | os.PathLike,
    *,
    stem: str | None = None,
    name: str | None = None,
    feature_kind: str | None = None,
    view_name: str = "features",
) -> tuple[Corpus, Corpus | None]:
    """Load a Mulan directory as ``(train, test)`` corpora (test None if absent).

    Both corpora share the label vocabulary (XML order) and the feature kind (taken
    from the training file when not given).
    """
    files = find_mulan_files(directory, stem)
    labels = read_label_xml(files["xml"])
    name = name or files["stem"]
    kw = dict(name=name, view_name=view_name, labels=labels, feature_kind="real")
    train = load_mulan_arff(files["train"], files["xml"], **kw)
    test = None
    if files["test"] is not None:
        test = load_mulan_arff(files["test"], files["xml"], **kw)
        if test.feature_names[view_name] != train.feature_names[view_name]:
            raise DataFormatError(
                files["test"], f"features differ from those of {files['train']}"
            )
    if feature_kind is None:
        parts = [train] + ([test] if test is not None else [])
        binary = all(np.isin(c.views[view_name], (0.0, 1.0)).all() for c in parts)
        feature_kind = "binary" if binary else "real"
    kinds = {view_name: feature_kind}
    if feature_kind in ("bag", "binary"):
        for c in (train, test):
            if c is not None and (c.views[view_name] < 0).any():
                raise DataFormatError(
                    files["train"], f"negative values in a {feature_kind} view"
                )
    train = dataclasses.replace(train, view_kinds=kinds)
    if test is not None:
        test = dataclasses.replace(test, view_kinds=kinds)
    return train, test
