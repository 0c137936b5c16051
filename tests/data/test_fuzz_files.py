"""Property-based fuzzing of every file format jaxannot reads (issue: hostile and
damaged input).

Each property feeds hostile or damaged content to a reader of the library --
ARFF, JSON headers, ``.npz`` archives and saved models, images (with EXIF), tags
CSVs, MATLAB files (v5 bytes, v7.3 group trees), extractor settings, checkpoint
folders, photo datasets -- or names an output through symbolic and hard links
(issue 44), and asserts that it either reads a value
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
import os
import pathlib
import shutil
import tempfile
import zipfile

import h5py
import numpy as np
import pytest
import scipy.io
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import jax
import jax.numpy as jnp

from jaxannot.annotators import Fitted, save
from jaxannot.annotators.persistence import flatten_params, load_scorer
from jaxannot.data import atomic
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
from jaxannot.data.matlab import MAX_NODES, read_mat
from jaxannot.data.photo_tags import read_tags
from jaxannot.data.photos import load_photo_dir
from jaxannot.runtime import checkpoint
from jaxannot.runtime.progress import run_steps


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


# --------------------------------------------------------------- checkpoints
def _step(t, carry):
    key, total = carry
    return (key, total + jax.random.uniform(jax.random.fold_in(key, t))), total


def _resume(folder: pathlib.Path):
    with checkpoint.checkpointing(folder, every=5, tag="fuzz"):
        return run_steps(_step, (jax.random.key(0), jnp.float32(0.0)), 10,
                         progress_bar=False)  # fmt: skip


@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory):
    """A real checkpoint of a finished fit (its bytes and its entries) and the
    fit's own result."""
    folder = tmp_path_factory.mktemp("checkpoint")
    (_, total), losses = _resume(folder)
    raw = (folder / "run-000.npz").read_bytes()
    with np.load(folder / "run-000.npz") as archive:
        entries = {name: archive[name] for name in archive.files}
    return raw, entries, (float(total), np.asarray(losses))


_LEAF_VALUES = [
    np.zeros(3, np.uint32), np.zeros((2, 2), np.float32), np.float64(1.0),
    np.float32(np.nan), np.float32(np.inf), np.full(10, np.nan, np.float32),
    np.zeros(10, np.int32), np.array("x"), np.zeros((0,), np.float32),
]  # fmt: skip


@st.composite
def checkpoint_damage(draw, raw: bytes, entries: dict):
    """Damaged bytes, or an entry replaced, dropped or added (written by numpy,
    as a hand-made file would be)."""
    if draw(st.booleans()):
        return draw(mutated(raw)), None
    name = draw(st.sampled_from([*sorted(entries), "leaf_99"]))
    value = draw(st.sampled_from([None, *_LEAF_VALUES]))
    return None, {**entries, name: value}


@fuzz(100)
@given(data=st.data())
def test_checkpoints(work, saved_checkpoint, data):
    """A damaged checkpoint is refused by a one-line ``CheckpointError`` naming it
    (and left as it was), or it resumes: to the uninterrupted fit's result from
    damaged bytes (the zip's CRC-32s), to a state of the fit's own shapes and
    finiteness from entries rewritten by hand (a file numpy wrote holds no
    checksum: a finite value, or a NaN loss trace, is taken as saved)."""
    raw, entries, (total, losses) = saved_checkpoint
    damaged, edited = data.draw(checkpoint_damage(raw, entries))
    folder = work / "checkpoint"
    folder.mkdir(exist_ok=True)
    path = folder / "run-000.npz"
    if damaged is not None:
        path.write_bytes(damaged)
    else:
        np.savez(path, **{k: v for k, v in edited.items() if v is not None})
    before = path.read_bytes()
    try:
        (_, got), got_losses = _resume(folder)
    except checkpoint.CheckpointError as err:
        event("refused")
        _one_line_naming(err, str(path))
        assert path.read_bytes() == before
    else:
        event("resumed")
        got_losses = np.asarray(got_losses)
        assert got.shape == () and np.isfinite(got)
        assert got_losses.shape == losses.shape and got_losses.dtype.kind == "f"
        if damaged is not None:
            assert float(got) == total
            np.testing.assert_array_equal(got_losses, losses)


# ------------------------------------------------------------ photo datasets
@pytest.fixture(scope="module")
def photo_folder(tmp_path_factory, benchmark_script):
    """A sound hand-made photo dataset (the hostile-files benchmark's builder)."""
    folder = tmp_path_factory.mktemp("photos") / "pd"
    benchmark_script("benchmarks.common.hostile_cases").photo_dataset(folder)
    return folder


_FEATURE_VALUES = [
    np.zeros((8, 4)), np.full((8, 4), 1e300), np.full((8, 4), np.nan, np.float32),
    np.zeros((7, 4), np.float32), np.zeros(8, np.float32), np.zeros((8, 4), np.int64),
    np.zeros((8, 4), bool), np.array(["a"] * 8),
]  # fmt: skip


@fuzz(120)
@given(data=st.data())
def test_photo_datasets(work, photo_folder, data):
    """A photo dataset with one file damaged loads with finite float32 views or is
    refused by a ``DataFormatError`` naming the damaged file; nothing is changed."""
    folder = work / "pd"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(photo_folder, folder)
    name = data.draw(st.sampled_from(["photos.json", "photos.csv", "features.npz"]))
    path = folder / name
    if name == "features.npz" and data.draw(st.booleans()):
        arrays = dict(read_archive(path, "features").arrays)
        view = data.draw(st.sampled_from([*sorted(arrays), "extra"]))
        arrays[view] = data.draw(st.sampled_from(_FEATURE_VALUES))
        write_archive(path, arrays)
    else:
        path.write_bytes(data.draw(mutated(path.read_bytes())))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    try:
        train, _ = load_photo_dir(folder)
    except DataFormatError as err:
        event("refused")
        _one_line_naming(err, folder.name)
        assert name in str(err) or "photos.json" in str(err), str(err)
    else:
        event("loaded")
        for x in train.views.values():
            assert x.dtype == np.float32 and np.isfinite(x).all()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# ------------------------------------------------------------- MAT v7.3 trees
def _grow(f, group, data, depth: int, made: list, flags: dict) -> None:
    """Children of ``group``: arrays, groups, chains of groups, hard links and
    reference arrays to objects made before, external links."""
    for i in range(data.draw(st.integers(0, 3))):
        kind = data.draw(
            st.sampled_from(["array", "group", "chain", "hard", "refs", "external"])
        )
        name = f"n{i}"
        if kind == "array":
            shape = data.draw(st.lists(st.integers(0, 3), max_size=2))
            fill = data.draw(st.sampled_from([0.0, 1.5, np.nan, 1e300]))
            made.append(group.create_dataset(name, data=np.full(shape, fill)))
        elif kind == "group" and depth < 4:
            made.append(group.create_group(name))
            _grow(f, made[-1], data, depth + 1, made, flags)
        elif kind == "chain":
            below = group.create_group(name)
            for level in range(data.draw(st.integers(1, 40))):
                below = below.create_group(f"c{level}")
            below.create_dataset("leaf", data=np.zeros(1))
        elif kind == "hard" and made:
            for k in range(data.draw(st.integers(1, 6))):
                group[f"{name}_{k}"] = data.draw(st.sampled_from(made))
        elif kind == "refs" and made:
            targets = data.draw(st.lists(st.sampled_from(made), min_size=1, max_size=8))
            refs = np.array([t.ref for t in targets], dtype=h5py.ref_dtype)
            made.append(group.create_dataset(name, data=refs))
        elif kind == "external":
            group[name] = h5py.ExternalLink("elsewhere.h5", "/x")
            flags["external"] = True


def _leaves(value) -> int:
    if isinstance(value, dict):
        return sum(_leaves(v) for v in value.values())
    if isinstance(value, np.ndarray) and value.dtype == object:
        return sum(_leaves(v) for v in value.flat)
    return 1


@fuzz(120)
@given(data=st.data())
def test_mat_v73_structure(work, data):
    """Any tree of groups, arrays, hard links, references and external links reads
    as a bounded dict of its variables or is refused naming the file; an
    external link is always refused."""
    path = work / "tree.mat"
    flags: dict = {}
    with h5py.File(path, "w") as f:
        made: list = []
        for v in range(data.draw(st.integers(1, 3))):
            made.append(f.create_group(f"v{v}"))
            _grow(f, made[-1], data, 0, made, flags)
    with unchanged(path):
        try:
            mat = read_mat(path)
        except DataFormatError as err:
            event("refused")
            _one_line_naming(err, str(path))
        else:
            event("read")
            assert not flags, "an external link was followed"
            assert sorted(mat) == sorted(k for k in mat if not k.startswith("#"))
            assert _leaves(mat) <= MAX_NODES


# ---------------------------------------------------------- linked outputs
def _state(root: pathlib.Path) -> dict:
    """Every entry under ``root``: a link's target, a file's bytes and inode."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[path.relative_to(root).as_posix()] = os.readlink(path)
        elif path.is_file():
            out[path.relative_to(root).as_posix()] = (
                path.read_bytes(), path.stat().st_ino
            )  # fmt: skip
    return out


@st.composite
def output_links(draw):
    """An output name ``out/o<k>`` and the links to make first: symbolic links
    (chains of them) to the input file, into or onto the input folder, to a
    missing file, to each other (loops), and hard links of the input file."""
    targets = ["../in/data.arff", "../in", "../in/new.json", "../in/sub/x",
               "../missing/x", "free.json", "../in/../in/data.arff"]  # fmt: skip
    links = []
    for k in range(draw(st.integers(0, 4))):
        how = draw(st.sampled_from(["symlink", "hardlink", "chain", "loop"]))
        if how == "symlink":
            links.append((f"o{k}", "symlink", draw(st.sampled_from(targets))))
        elif how == "chain" and k:
            links.append((f"o{k}", "symlink", f"o{draw(st.integers(0, k - 1))}"))
        elif how == "loop":
            links.append((f"o{k}", "symlink", f"o{k}"))
        else:
            links.append((f"o{k}", "hardlink", "../in/data.arff"))
    name = draw(st.sampled_from([f"o{k}" for k in range(len(links) + 1)]))
    suffix = draw(st.sampled_from(["", "/x.json"]))
    return links, name + suffix


@fuzz(150)
@given(case=output_links())
def test_linked_outputs(work, case):
    """An output named through any links is written to a place that is not an
    input (the links left as they were) or refused by one line; the input folder
    never changes."""
    links, name = case
    root = pathlib.Path(tempfile.mkdtemp(dir=work))
    try:
        (root / "in" / "sub").mkdir(parents=True)
        (root / "in" / "data.arff").write_text("@relation r\n")
        (root / "out").mkdir()
        for link, how, target in links:
            if how == "symlink":
                (root / "out" / link).symlink_to(target)
            elif not (root / "out" / link).exists():
                os.link(root / "in" / "data.arff", root / "out" / link)
        inputs, outputs = _state(root / "in"), _state(root / "out")
        target = root / "out" / name
        with atomic.protecting():
            atomic.protect("--dataset", [root / "in"])
            try:
                atomic.atomic_write(target, lambda fh: fh.write(b"written"))
            except (atomic.OverwritesInput, OSError) as err:
                event(type(err).__name__)
                assert "\n" not in str(err)
                assert _state(root / "out") == outputs
            else:
                event("written")
                real = pathlib.Path(os.path.realpath(target))
                assert real.read_bytes() == b"written"
                assert (root / "in") not in real.parents
                links_after = {k: v for k, v in _state(root / "out").items()
                               if isinstance(v, str)}  # fmt: skip
                assert links_after == {
                    k: v for k, v in outputs.items() if isinstance(v, str)
                }
        assert _state(root / "in") == inputs
    finally:
        shutil.rmtree(root)
