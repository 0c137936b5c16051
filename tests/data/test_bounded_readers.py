"""Issue 44, point 2: every file is read through a bounded reader.

Each hostile file is built small in ``tmp_path``; each test failed (or hung, or
allocated without bound) before the readers were bounded.
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import threading
import time
import tracemalloc
import zlib

import h5py
import numpy as np
import pytest
import scipy.io

from jaxannot.data import bounded, mat_v5, matlab
from jaxannot.data.archive import read_archive, write_archive
from jaxannot.data.arff import read_arff
from jaxannot.data.errors import DataFormatError
from jaxannot.data.extractor_settings import ExtractorSettings
from jaxannot.data.image_features import VIEW_KINDS
from jaxannot.data.mat_datasets import cell_views_loader
from jaxannot.data.matlab import read_mat
from jaxannot.data.mulan import load_mulan_arff, read_label_xml
from jaxannot.data.photo_extractor import PhotoExtractor
from jaxannot.data.photo_tags import read_tags
from jaxannot.data.photos import load_photo_dir


# ----------------------------------------------------------------- MAT v7.3
def test_hard_linked_groups_fanning_out_are_refused(tmp_path):
    """4 hard links a level, 7 levels: 4^7 leaves from a file of a few KB."""
    path = tmp_path / "fan.mat"
    with h5py.File(path, "w") as f:
        below = f.create_group("#level7")
        below.create_dataset("leaf", data=np.zeros(1))
        for level in range(6, -1, -1):
            group = f.create_group(f"#level{level}")
            for k in range(4):
                group[f"g{k}"] = below  # a hard link: one object, four names
            below = group
        f["X"] = below
    with pytest.raises(DataFormatError, match="fan out") as err:
        read_mat(path)
    assert str(path) in str(err.value)
    assert 4**7 > matlab.MAX_NODES


def test_reference_arrays_fanning_out_are_refused(tmp_path):
    """8 references a level, 5 levels: 8^5 values dereferenced."""
    path = tmp_path / "refs.mat"
    with h5py.File(path, "w") as f:
        target = f.create_dataset("#refs#/leaf", data=np.zeros((1, 1)))
        for level in range(5):
            refs = np.array([target.ref] * 8, dtype=h5py.ref_dtype)
            target = f.create_dataset(f"#refs#/r{level}", data=refs)
        f["X"] = target
    with pytest.raises(DataFormatError, match="fan out"):
        read_mat(path)
    assert 8**5 > matlab.MAX_NODES


def test_an_external_link_is_refused(tmp_path):
    outside = tmp_path / "outside.h5"
    with h5py.File(outside, "w") as f:
        f.create_dataset("big", data=np.zeros(1000))
    path = tmp_path / "linked.mat"
    with h5py.File(path, "w") as f:
        f["Y"] = np.ones((1, 3))
        f["X"] = h5py.ExternalLink(str(outside), "/big")
    with pytest.raises(DataFormatError, match="external link"):
        read_mat(path)


def test_external_storage_is_refused(tmp_path):
    raw = tmp_path / "raw.bin"
    raw.write_bytes(np.arange(10.0).tobytes())
    path = tmp_path / "external.mat"
    with h5py.File(path, "w") as f:
        f.create_dataset("X", shape=(10,), dtype="f8", external=[(str(raw), 0, 80)])
    with pytest.raises(DataFormatError, match="stored in other files"):
        read_mat(path)


def test_many_classes_are_bounded_before_the_one_hot_matrix(tmp_path):
    """4200 classes of 4200 images: a 71 MB one-hot matrix from a ~70 KB file."""
    n = 4200
    x = np.arange(n, dtype=np.float64).reshape(n, 1)
    cells = np.empty((1, 1), dtype=object)
    cells[0, 0] = x
    scipy.io.savemat(tmp_path / "t.mat", {"X": cells, "Y": np.arange(1, n + 1)})
    assert os.path.getsize(tmp_path / "t.mat") < 200_000
    load = cell_views_loader("t.mat", ("v",), "real")
    with pytest.raises(DataFormatError, match="one-hot class matrix"):
        load(tmp_path, "t")


def test_a_view_beyond_float32_is_refused_naming_the_file(tmp_path):
    cells = np.empty((1, 1), dtype=object)
    cells[0, 0] = np.array([[1.0], [1e300]])
    scipy.io.savemat(tmp_path / "t.mat", {"X": cells, "Y": np.array([1, 2])})
    load = cell_views_loader("t.mat", ("v",), "real")
    with pytest.raises(DataFormatError, match="float32") as err:
        load(tmp_path, "t")
    assert "t.mat" in str(err.value)


# -------------------------------------------------------------------- MAT v5
def _v5_declaring(value, dims: tuple[int, int], compressed: bool) -> bytes:
    """A v5 MAT-file holding the one variable ``X = value``, its header's dimensions
    patched to ``dims`` (the data stay as small as ``value``'s)."""
    buffer = io.BytesIO()
    scipy.io.savemat(buffer, {"X": value}, do_compression=compressed)
    raw = buffer.getvalue()
    head, (kind, size), body = raw[:128], struct.unpack_from("<II", raw, 128), raw[136:]
    element = zlib.decompress(body[:size]) if compressed else body[:size]
    if compressed:  # the inflated stream is itself one miMATRIX element
        element = element[8:]
    # miMATRIX: array flags (tag 8 + data 8), then the dimensions' tag and data
    assert struct.unpack_from("<II", element, 16) == (5, 8)  # miINT32, 2 dims
    assert struct.unpack_from("<ii", element, 24) == value.shape
    element = element[:24] + struct.pack("<ii", *dims) + element[32:]
    if compressed:
        inner = struct.pack("<II", 14, len(element)) + element
        packed = zlib.compress(inner)
        return head + struct.pack("<II", kind, len(packed)) + packed
    return head + struct.pack("<II", kind, len(element)) + element + body[size:]


def _refused_before_loadmat(path, monkeypatch) -> str:
    """``read_mat(path)``'s one-line refusal, checked to come within 5 s and from
    the headers alone (``scipy.io.loadmat`` is never called)."""
    calls = []
    monkeypatch.setattr(scipy.io, "loadmat", lambda *a, **k: calls.append(a))
    start = time.perf_counter()
    with pytest.raises(DataFormatError) as err:
        read_mat(path)
    assert time.perf_counter() - start < 5
    assert calls == []
    return str(err.value)


@pytest.mark.parametrize(
    "value, dims, compressed, shown",
    [
        (np.zeros((2, 2)), (100_000, 100_000), False, "100000 x 100000 double"),
        (np.zeros((2, 2), np.float32), (100_000, 100_000), True, "x 100000 single"),
        (np.empty((1, 2), object), (1, 100_000_000), True, "1 x 100000000 cell"),
    ],
    ids=["double", "compressed-single", "compressed-cell"],
)
def test_a_v5_variable_declaring_a_huge_shape_is_refused_before_loadmat(
    tmp_path, monkeypatch, value, dims, compressed, shown
):
    """A few hundred bytes declaring 80 GB (or, for a cell, 10^8 object pointers:
    scipy allocates those before reading a cell) are refused from the headers that
    ``scipy.io.whosmat`` reads; ``loadmat`` is never called."""
    if value.dtype == object:
        value[0, 0], value[0, 1] = np.ones((2, 2)), np.ones((2, 3))
    path = tmp_path / "huge.mat"
    path.write_bytes(_v5_declaring(value, dims, compressed))
    assert path.stat().st_size < 1000
    assert scipy.io.whosmat(path)[0][1] == dims  # the header declares the shape
    message = _refused_before_loadmat(path, monkeypatch)
    assert str(path) in message and "variable X" in message and shown in message
    assert "\n" not in message


def _cell(*values) -> np.ndarray:
    cells = np.empty((1, len(values)), dtype=object)
    for k, value in enumerate(values):
        cells[0, k] = value
    return cells


def _v5_nested(variables: dict, old: tuple, new: tuple, compressed: bool) -> bytes:
    """A v5 MAT-file of ``variables`` whose one array of dimensions ``old`` (a cell
    or field nested in a variable) is patched to declare ``new``; compressed, each
    variable's element is deflated as scipy and MATLAB do."""
    buffer = io.BytesIO()
    scipy.io.savemat(buffer, variables, do_compression=False)
    raw = buffer.getvalue()
    pattern = struct.pack("<IIii", 5, 8, *old)  # miINT32, 8 bytes, the dimensions
    assert raw.count(pattern) == 1
    raw = raw.replace(pattern, struct.pack("<IIii", 5, 8, *new))
    if not compressed:
        return raw
    out, at = [raw[:128]], 128
    while at < len(raw):
        size = struct.unpack_from("<I", raw, at + 4)[0]
        packed = zlib.compress(raw[at : at + 8 + size])
        out.append(struct.pack("<II", 15, len(packed)) + packed)
        at += 8 + size
    return b"".join(out)


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
@pytest.mark.parametrize(
    "variables, shown",
    [
        ({"X": _cell(_cell(np.ones((2, 2)), np.ones((2, 3))))}, "variable X{1} "),
        (
            {
                "Y": np.ones((1, 3)),
                "X": _cell(np.ones(4), _cell(np.ones((2, 2)), np.ones(3)), np.ones(5)),
            },
            "variable X{2} ",
        ),
        ({"s": {"a": np.ones(3), "f": _cell(np.ones((2, 2)), 1.0)}}, "variable s.f "),
    ],
    ids=["cell-in-cell", "second-cell", "struct-field"],
)
def test_a_nested_v5_cell_declaring_a_huge_shape_is_refused_before_loadmat(
    tmp_path, monkeypatch, variables, shown, compressed
):
    """A cell nested in a variable declaring 1 x 10^8 cells: ``whosmat`` lists the
    variable alone (a 1 x 1 or 1 x 2 cell), and scipy reserved the nested cell's
    800 MB of pointers before reading a cell. Refused from the headers, without
    calling ``loadmat``."""
    path = tmp_path / "nested.mat"
    path.write_bytes(_v5_nested(variables, (1, 2), (1, 10**8), compressed))
    assert path.stat().st_size < 2000
    assert all(math.prod(shape) <= 3 for _, shape, _ in scipy.io.whosmat(path))
    message = _refused_before_loadmat(path, monkeypatch)
    assert str(path) in message and shown + "(a 1 x 100000000 cell)" in message
    assert "declares 800000000 bytes" in message and "\n" not in message


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
def test_nested_v5_cells_and_structs_are_walked_and_still_load(tmp_path, compressed):
    """The walk visits every array once (variables, cells, field values) and adds
    up what each declares; the file then loads as before."""
    inner = _cell("ab", np.arange(6.0).reshape(2, 3))
    variables = {
        "X": _cell(np.ones((2, 2)), inner, np.zeros((0, 0))),
        "s": {"a": np.ones((1, 3), np.float32), "b": _cell(np.int8(3))},
        "Y": np.array([[1, 2]], dtype=np.int32),
    }
    path = tmp_path / "ok.mat"
    scipy.io.savemat(path, variables, do_compression=compressed)
    size = path.stat().st_size
    walk = mat_v5.V5Walk(str(path), size, bounded.allowed_bytes(size))
    walk.run()
    # X, its 3 cells, the 2 of inner; s, its 2 fields, b's cell; Y
    assert walk.nodes == 11
    # pointers: X 3, inner 2, s 2 (1 x 1, 2 fields), b 1; values: 4 + 6 doubles,
    # "ab" 2 chars of 4 bytes, 3 singles, 1 int8, 2 int32s
    assert walk.total == 8 * (3 + 2 + 2 + 1) + 8 * (4 + 6) + 8 + 12 + 1 + 8
    mat = read_mat(path)
    np.testing.assert_array_equal(mat["X"][0, 1][0, 1], np.arange(6.0).reshape(2, 3))
    assert mat["X"][0, 1][0, 0] == "ab"
    np.testing.assert_array_equal(mat["s"]["a"][0, 0], np.ones((1, 3)))


def test_v5_cells_nested_too_deep_or_too_many_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(scipy.io, "loadmat", lambda *a, **k: pytest.fail("loaded"))
    value = np.ones(1)
    for _ in range(matlab.MAX_DEPTH + 2):
        value = _cell(value)
    scipy.io.savemat(tmp_path / "deep.mat", {"X": value})
    with pytest.raises(DataFormatError, match=r"variable X\{1\}(\{1\})+ nests"):
        read_mat(tmp_path / "deep.mat")
    many = _cell(*[np.zeros((0, 0))] * (matlab.MAX_NODES + 1))
    scipy.io.savemat(tmp_path / "many.mat", {"X": many}, do_compression=True)
    assert (tmp_path / "many.mat").stat().st_size < 10_000
    with pytest.raises(
        DataFormatError, match=r"more than 10000 arrays .*at X\{10000\}"
    ):
        read_mat(tmp_path / "many.mat")


def test_a_v5_file_is_not_read_whole_to_count_its_compressed_bytes(tmp_path):
    """An uncompressed 20 MB variable is skipped over (a seek), not read."""
    path = tmp_path / "plain.mat"
    scipy.io.savemat(path, {"X": np.ones((2500, 1000)), "Y": np.ones((1, 3))})
    assert path.stat().st_size > 20_000_000
    tracemalloc.start()
    try:
        assert mat_v5.v5_inflated_bytes(str(path), 2**30) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


# -------------------------------------------------------------------- ARFF
def test_a_sparse_arff_declaring_many_attributes_is_refused(tmp_path):
    """2000 attributes x 5000 rows of ``{0 1}``: 80 MB dense from 80 KB."""
    path = tmp_path / "wide-sparse.arff"
    header = "".join(f"@attribute a{j} numeric\n" for j in range(2000))
    path.write_text("@relation r\n" + header + "@data\n" + "{0 1}\n" * 5000)
    with pytest.raises(DataFormatError, match="densified"):
        read_arff(path)


_ARFF_HEAD = "@relation r\n@attribute f1 numeric\n@attribute f3 numeric\n"
_ARFF_HEAD += "@attribute lab {0,1}\n@data\n"


@pytest.mark.parametrize(
    "rows", ["1,2,0\n3,-1e300,1\n", "{0 1,1 2}\n{0 3,1 -1e300,2 1}\n"]
)
def test_an_arff_value_beyond_float32_is_refused_before_the_cast(tmp_path, rows):
    """-1e300 is finite in float64; cast to float32 it became -inf, refused only
    as "missing or not finite". It is now refused by a range check on the float64
    value, naming the file, the line and the attribute."""
    path = tmp_path / "x.arff"
    path.write_text(_ARFF_HEAD + rows)
    (tmp_path / "x.xml").write_text('<labels><label name="lab"/></labels>')
    pattern = r"x\.arff, line 7: attribute 'f3' value -1e\+300 is beyond float32's"
    with pytest.raises(DataFormatError, match=pattern) as err:
        read_arff(path).columns([0, 1])
    assert err.value.line == 7 and "\n" not in str(err.value)
    with pytest.raises(DataFormatError, match=pattern):
        load_mulan_arff(path, tmp_path / "x.xml")
    assert read_arff(path).columns([1], dtype=np.float64)[1, 0] == -1e300


def test_an_infinite_arff_value_is_still_refused_as_not_finite(tmp_path):
    """1e999 reads as inf (not a range problem): refused as before, as missing or
    not finite, like a missing value."""
    path = tmp_path / "x.arff"
    (tmp_path / "x.xml").write_text('<labels><label name="lab"/></labels>')
    for value, shown in (("1e999", "inf"), ("?", "nan")):
        path.write_text(_ARFF_HEAD + f"1,2,0\n3,{value},1\n")
        assert np.isnan(read_arff(path).columns([1])[1, 0]) == (value == "?")
        with pytest.raises(
            DataFormatError, match=r"line 7: feature 'f3' is missing or not finite"
        ) as err:
            load_mulan_arff(path, tmp_path / "x.xml")
        assert shown in str(err.value)


def _sparse_file(path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)  # holes: no disk, no time


def _peak_bytes(call) -> int:
    tracemalloc.start()
    try:
        with pytest.raises((DataFormatError, FileNotFoundError)):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_arff_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.arff"
    _sparse_file(path, bounded.MAX_TEXT_BYTES + 1)
    assert _peak_bytes(lambda: read_arff(path)) < 2**20


def test_a_huge_file_given_as_a_model_is_refused_from_its_tail(tmp_path):
    path = tmp_path / "not-a-model.npz"
    _sparse_file(path, 100 * 2**20)
    assert _peak_bytes(lambda: read_archive(path, "jaxannot model")) < 2**20


def _named_pipe(tmp_path, name: str):
    path = tmp_path / name
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "name, read",
    [
        ("t.arff", read_arff),
        ("t.mat", read_mat),
        ("tags.csv", read_tags),
        ("labels.xml", read_label_xml),
        ("photos.json", lambda p: bounded.read_limited(p, "JSON file", 10, "")),
    ],
)
def test_a_named_pipe_is_refused_not_waited_on(tmp_path, name, read):
    path = _named_pipe(tmp_path, name)
    outcome = []

    def attempt():
        try:
            read(path)
        except DataFormatError as err:
            outcome.append(str(err))

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():  # unblock the reader before failing
        with open(path, "wb"):
            pass
        pytest.fail(f"reading a named pipe {name} blocked")
    assert outcome and "named pipe" in outcome[0]


# ------------------------------------------------------------ photo datasets
def test_a_photo_dataset_with_many_rows_and_tags_is_bounded(tmp_path):
    """5000 photos x 4000 tags: an 80 MB tag matrix from ~110 KB of text."""
    rows, tags = 5000, 4000
    manifest = {
        "format": "jaxannot.photos",
        "version": 1,
        "name": "wide",
        "views": VIEW_KINDS,
        "tags": [f"t{j}" for j in range(tags)],
        "num_photos": rows,
        "test_fraction": 0.0,
        "seed": 0,
        "skipped": [],
    }
    (tmp_path / "photos.json").write_text(json.dumps(manifest))
    table = "".join(f"p{i}.jpg,train,\n" for i in range(rows))
    (tmp_path / "photos.csv").write_text("file,split,tags\n" + table)
    write_archive(
        tmp_path / "features.npz",
        {v: np.zeros((rows, 1), np.float32) for v in VIEW_KINDS},
    )
    with pytest.raises(DataFormatError, match="tag matrix") as err:
        load_photo_dir(tmp_path)
    assert "photos.csv" in str(err.value)


def test_a_codebook_beyond_float32_is_refused_naming_the_file(tmp_path):
    settings = ExtractorSettings()
    codebook = np.ones((3, settings.descriptor_dims), np.float64)
    codebook[1, 2] = 1e300  # finite in float64, inf in float32
    PhotoExtractor(settings, codebook, 1.0).save(tmp_path)
    with pytest.raises(DataFormatError, match="float32") as err:
        PhotoExtractor.load(tmp_path)
    assert "extractor.npz" in str(err.value)


def test_features_beyond_float32_are_refused_naming_the_file(tmp_path):
    manifest = {
        "format": "jaxannot.photos", "version": 1, "name": "f",
        "views": VIEW_KINDS, "tags": [], "num_photos": 2,
    }  # fmt: skip
    (tmp_path / "photos.json").write_text(json.dumps(manifest))
    (tmp_path / "photos.csv").write_text("file,split,tags\na,train,\nb,train,\n")
    arrays = {v: np.ones((2, 1)) for v in VIEW_KINDS}
    arrays["colour"][1, 0] = -1e300
    write_archive(tmp_path / "features.npz", arrays)
    with pytest.raises(DataFormatError, match="float32") as err:
        load_photo_dir(tmp_path)
    assert "features.npz" in str(err.value)


# ----------------------------------------------------------------- tags CSV
def test_one_unbalanced_quote_in_a_tags_csv_names_its_line(tmp_path):
    path = tmp_path / "tags.csv"
    path.write_text('file,tags\na.png,cat\n"b.png,dog\nc.png,sky\nd.png,sea\n')
    with pytest.raises(DataFormatError, match="unbalanced quote") as err:
        read_tags(path)
    assert err.value.line == 3
    assert "\n" not in str(err.value)
