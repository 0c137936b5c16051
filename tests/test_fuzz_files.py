"""Property-based fuzzing of every file format jaxannot reads (issue: hostile and
damaged input).

Each property feeds hostile or damaged content to a reader of the library --
ARFF, JSON headers, ``.npz`` archives and saved models, images (with EXIF), tags
CSVs, MATLAB files, extractor settings -- and asserts that it either reads a value
of the documented kind or raises the documented error (``DataFormatError``,
``UnreadableImage``, ``ValueError``) with a one-line message naming the file, never
another exception, a warning (the suite turns warnings into errors) or a change to
the input file. Hypothesis' ``deadline`` bounds each example (a generous bound, a
hang detector only). The examples are derandomized, so CI runs the same ones.
"""

import contextlib
import hashlib
import io
import json
import pathlib
import zipfile

import numpy as np
import pytest
import scipy.io
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxannot.annotators import Fitted, save
from jaxannot.annotators.persistence import flatten_params, load_scorer
from jaxannot.data.archive import (
    MAX_RATIO,
    MIN_ALLOWANCE,
    read_archive,
    read_json_object,
    write_archive,
)
from jaxannot.data.arff import parse_arff
from jaxannot.data.datasets import load_dataset
from jaxannot.data.errors import DataFormatError, printable
from jaxannot.data.extractor_settings import ExtractorSettings
from jaxannot.data.image_features import UnreadableImage, read_image
from jaxannot.data.matlab import read_mat
from jaxannot.data.photo_tags import read_tags


def fuzz(examples: int):
    """Hypothesis settings of this module: derandomized, a hang-detecting deadline."""
    return settings(
        max_examples=examples,
        deadline=5000,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@st.composite
def mutated(draw, base: bytes, max_ops: int = 4):
    """``base`` with a few byte flips, overwrites, insertions, cuts, duplications."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(["flip", "set", "insert", "cut", "dup", "truncate"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[at] = draw(st.sampled_from([0, 0x7F, 0x80, 0xFF, data[at] ^ 0x80]))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "dup":
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
        else:
            del data[at:]
    return bytes(data)


@contextlib.contextmanager
def unchanged(path: pathlib.Path):
    """The file at ``path`` is not changed (nor removed) by the block."""
    before = hashlib.sha256(path.read_bytes()).digest()
    yield
    assert hashlib.sha256(path.read_bytes()).digest() == before


def _one_line_naming(err: Exception, name: str) -> None:
    text = str(err)
    assert "\n" not in text and name in text, text


# --------------------------------------------------------------------- ARFF
_ARFF = (
    "% comment\n@relation 'fuzz rel'\n@attribute a numeric\n@attribute 'b c' real\n"
    "@attribute n {x,'y z',\"q\"}\n@attribute l {0,1}\n@data\n"
    "1.5,2,x,1\n-3,?,'y z',0\n{0 1,3 1}\n"
)
_NOMINAL = st.lists(
    st.one_of(
        st.from_regex(r"[a-z0-9]{0,4}", fullmatch=True),
        st.sampled_from(["'a b'", '"c,d"', "'x\\'y'", " ", "{", "}", "'", '"', ","]),
    ),
    max_size=60,
)


@st.composite
def hostile_nominal_line(draw):
    """An @attribute line of many nominal values, often malformed (no closing
    brace, stray spaces, quotes, braces): liac-arff's exponential case."""
    values = draw(_NOMINAL)
    sep = draw(st.sampled_from([",", ", ", " ,", ",,"]))
    close = draw(st.sampled_from(["}", "", "} x", " }", "}}", "\t"]))
    return f"@attribute g {{{sep.join(values)}{close}"


@st.composite
def arff_bytes(draw):
    if draw(st.booleans()):
        lines = _ARFF.split("\n")
        lines.insert(draw(st.integers(2, 6)), draw(hostile_nominal_line()))
        return "\n".join(lines).encode()
    return draw(mutated(_ARFF.encode(), max_ops=6))


@fuzz(300)
@given(raw=arff_bytes())
def test_arff(raw):
    try:
        parsed = parse_arff(raw, path="fuzz.arff")
    except DataFormatError as err:
        _one_line_naming(err, "fuzz.arff")
    else:
        assert parsed.values.shape[1] == len(parsed.attribute_names)


# ---------------------------------------------------------------- JSON files
_JSON = json.dumps({"format": "jaxannot.photo_extractor", "settings": {"size": 64}})
json_bytes = st.one_of(
    mutated(_JSON.encode()),
    st.integers(1, 200_000).map(lambda d: b'{"a":' + b"[" * d + b"]" * d + b"}"),
    st.integers(1, 200_000).map(lambda d: b'{"a":' + b'{"b":' * d + b"1" + b"}" * d),
    st.binary(max_size=64),
)


@fuzz(120)
@given(raw=json_bytes)
def test_json_objects(work, raw):
    path = work / "extractor.json"
    path.write_bytes(raw)
    with unchanged(path):
        try:
            value = read_json_object(path, "photo extractor")
        except DataFormatError as err:
            _one_line_naming(err, str(path))
        else:
            assert isinstance(value, dict)


_SETTINGS = ExtractorSettings().as_json()
_SETTING_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.lists(st.lists(st.integers(-(10**7), 10**7), max_size=3), max_size=6),
    st.lists(st.floats(-1, 10**7), max_size=6),
    st.none(),
    st.text(max_size=3),
)


@fuzz(150)
@given(changes=st.dictionaries(st.sampled_from(sorted(_SETTINGS)), _SETTING_VALUES))
def test_extractor_settings(changes):
    """Any settings either are refused by a one-line ValueError or lie within the
    documented bounds (so featurizing with them is bounded in time and memory)."""
    try:
        s = ExtractorSettings.from_json({**_SETTINGS, **changes})
    except ValueError as err:
        assert "\n" not in str(err)
    else:
        assert s.size <= 640 and s.gabor_orientations <= 16
        assert s.grid_points * s.descriptor_dims <= 2**20
        assert all(0.05 <= f <= 0.5 for f in s.gabor_frequencies)


# ----------------------------------------------------------- archives, models
def _archive_bytes() -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, a=np.arange(12, dtype=np.float32).reshape(3, 4))
    return buffer.getvalue()


def _bomb(declared: int) -> bytes:
    """A zip whose one entry declares ``declared`` bytes (its data is short)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "|u1", "fortran_order": False, "shape": (declared,)}
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("w.npy", header.getvalue() + bytes(1000))
    data = bytearray(buffer.getvalue())
    size = (declared + len(header.getvalue())).to_bytes(8, "little")[:4]
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.index(signature)  # the local and the central header's size
        data[at + offset : at + offset + 4] = size
    return bytes(data)


archive_bytes = st.one_of(
    mutated(_archive_bytes()),
    st.integers(0, 2**32 - 2**20).map(_bomb),
    st.binary(max_size=200),
)


@fuzz(200)
@given(raw=archive_bytes)
def test_archives(work, raw):
    path = work / "features.npz"
    path.write_bytes(raw)
    with unchanged(path):
        try:
            archive = read_archive(path, "feature archive")
        except DataFormatError as err:
            _one_line_naming(err, str(path))
        else:
            held = sum(a.nbytes for a in archive.arrays.values())
            assert held <= max(MIN_ALLOWANCE, MAX_RATIO * len(raw))


def _model_bytes(tmp: pathlib.Path) -> bytes:
    rng = np.random.default_rng(0)
    params = {
        "features": rng.random((6, 4), dtype=np.float32),
        "words": (rng.random((6, 5)) < 0.4).astype(np.float32),
        "frequency": np.full(5, 0.2, np.float32),
        "width": np.float32(0.5),
    }
    hyper = {"k": 3, "view": "features", "metric": "cosine", "weight": "heat"}
    save(tmp / "model.npz", Fitted("knn", params, hyper))
    return (tmp / "model.npz").read_bytes()


@st.composite
def model_edits(draw, base: bytes):
    """A damaged model: bytes mutated (its checksum then fails), or arrays of
    another shape, dtype or with NaN, written with a valid checksum."""
    if draw(st.booleans()):
        return draw(mutated(base)), None
    key = draw(st.sampled_from(["features", "words", "frequency", "width"]))
    value = draw(
        st.sampled_from(
            [np.zeros(3), np.zeros((6, 4), np.int32), np.full((6, 4), np.nan),
             np.zeros((2, 2, 2), np.float32), np.array(np.inf, np.float32),
             np.zeros((7, 5), np.float32), np.ones(5, bool)]
        )
    )  # fmt: skip
    return None, (key, value)


@fuzz(100)
@given(data=st.data())
def test_models(work, data):
    """Damaged bytes give a DataFormatError (or, rarely, the model as saved); every
    array edit (another rank, size, dtype kind, a NaN) is refused by name."""
    base = _model_bytes(work)
    raw, edit = data.draw(model_edits(base))
    path = work / "fuzz_model.npz"
    if raw is None:
        archive = read_archive(work / "model.npz", "model")
        key, value = edit
        write_archive(path, {**archive.arrays, key: value}, meta=archive.meta)
        with unchanged(path), pytest.raises(DataFormatError) as err:
            load_scorer(path)
        _one_line_naming(err.value, str(path))
        return
    path.write_bytes(raw)
    with unchanged(path):
        try:
            fitted, method = load_scorer(path)
        except DataFormatError as err:
            _one_line_naming(err, str(path))
        else:
            assert method.name == "knn" and set(flatten_params(fitted.params)) == {
                "features", "words", "frequency", "width"
            }  # fmt: skip


# ------------------------------------------------------------------- images
def _jpeg_with_exif() -> bytes:
    from PIL import Image

    rgb = (np.random.default_rng(0).random((24, 32, 3)) * 255).astype(np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotated
    exif[0x010F] = "maker"
    exif[0x8769] = {0x9003: "2020:01:01 00:00:00", 0x920A: (35, 1)}
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, "JPEG", exif=exif.tobytes())
    return buffer.getvalue()


def _png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8)).save(buffer, "PNG")
    return buffer.getvalue()


_JPEG = _jpeg_with_exif()
_EXIF = (_JPEG.index(b"Exif"), _JPEG.index(b"Exif") + 160)


@st.composite
def exif_mutation(draw):
    """One byte of the EXIF block set to another value (Pillow's EXIF rewrite
    raised struct.error, TypeError, AttributeError on ~1.5% of these)."""
    data = bytearray(_JPEG)
    data[draw(st.integers(*_EXIF))] = draw(st.integers(0, 255))
    return bytes(data)


image_bytes = st.one_of(
    exif_mutation(), mutated(_JPEG), mutated(_png()), st.binary(max_size=64)
)


@fuzz(300)
@given(raw=image_bytes)
def test_images(work, raw):
    path = work / "photo\x1b[2J.jpg"
    path.write_bytes(raw)
    with unchanged(path):
        try:
            rgb = read_image(path, 16)
        except UnreadableImage as err:
            _one_line_naming(err, printable(path))
            assert "\x1b" not in str(err)
        else:
            assert rgb.shape == (16, 16, 3) and rgb.dtype == np.float32
            assert np.isfinite(rgb).all() and 0 <= rgb.min() and rgb.max() <= 1


# ------------------------------------------------------------------ tags CSV
_TAGS = 'file,tags\nphoto000.jpg,red sky\n"a,b.png",x\nsub\\c.png,\n'
tags_bytes = st.one_of(
    mutated(_TAGS.encode(), max_ops=6),
    st.integers(100_000, 200_000).map(lambda n: f"file,tags\na,{'t' * n}\n".encode()),
    st.text(alphabet='ab,"\n\r\x00 \\', max_size=40).map(str.encode),
)


@fuzz(150)
@given(raw=tags_bytes)
def test_tags_csv(work, raw):
    path = work / "tags.csv"
    path.write_bytes(raw)
    with unchanged(path):
        try:
            tags = read_tags(path)
        except DataFormatError as err:
            _one_line_naming(err, str(path))
        else:
            assert all(isinstance(t, list) for t in tags.values())


# ------------------------------------------------------------------- MATLAB
def _mat_bytes() -> bytes:
    cells = np.empty((1, 2), dtype=object)
    cells[0, 0], cells[0, 1] = np.ones((3, 2)), np.arange(12.0).reshape(3, 4)
    buffer = io.BytesIO()
    scipy.io.savemat(buffer, {"X": cells, "Y": np.array([[1], [2], [1]])})
    return buffer.getvalue()


@fuzz(150)
@given(raw=mutated(_mat_bytes(), max_ops=3))
def test_matlab(work, raw):
    folder = work / "bbcsport"
    folder.mkdir(exist_ok=True)
    path = folder / "BBCSport.mat"
    path.write_bytes(raw)
    with unchanged(path):
        try:
            read_mat(path)
            train, _ = load_dataset("bbcsport", work)
        except DataFormatError as err:
            _one_line_naming(err, str(path))
        else:
            assert np.isfinite(train.features()).all()


# ---------------------------------------------------------------- printable
@fuzz(100)
@given(name=st.text(max_size=30))
def test_printable_names_hold_no_control_character(name):
    shown = printable(name)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)
    if name.isprintable():
        assert shown == name
