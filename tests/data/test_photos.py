"""Photo datasets: features of synthetic and real photos, the directory format, the
loader behind ``load_dataset(dir)`` and the saved extractor."""

import io
import logging
import os
import pathlib
import re
import shutil
import struct

import numpy as np
import pytest

import jax

from jaxannot.annotators import get_method
from jaxannot.data.datasets import load_dataset
from jaxannot.data.errors import DataFormatError
from jaxannot.data.extractor_settings import ExtractorSettings
from jaxannot.data.image_features import UnreadableImage, describe, read_image
from jaxannot.data.photo_build import build_photo_dataset
from jaxannot.data.photo_extractor import PhotoExtractor
from jaxannot.data.photo_tags import read_tags
from jaxannot.data.photos import load_photo_dir, photo_corpus
from jaxannot.data.synthetic_photos import write_synthetic_photos

SMALL = ExtractorSettings(size=64, daisy_step=6, codebook_size=16)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """36 synthetic photos (6 per colour x pattern), 3 of them without tags."""
    root = tmp_path_factory.mktemp("synthetic")
    tags = write_synthetic_photos(root / "photos", per_kind=6, seed=0)
    unlabelled = sorted(tags)[-3:]
    labelled = {f: t for f, t in tags.items() if f not in unlabelled}
    report = build_photo_dataset(
        root / "photos", root / "ds", tags=labelled, settings=SMALL, test_fraction=1 / 3
    )
    return root, tags, unlabelled, report


def test_grid_points_is_the_number_of_daisy_descriptors():
    for s in (ExtractorSettings(), SMALL, ExtractorSettings(size=100, daisy_step=7)):
        rgb = np.random.default_rng(0).uniform(size=(s.size, s.size, 3))
        colour, texture, desc = describe(rgb, s)
        assert desc.shape[0] == s.grid_points
        assert colour.shape == (s.hue_bins * s.saturation_bins * s.value_bins,)
        assert np.isclose(colour.sum(), 1.0)


def test_dataset_views_splits_and_hidden_tags(synthetic):
    root, tags, unlabelled, report = synthetic
    assert report.skipped == ()
    assert report.tags == ("blue", "green", "plain", "red", "stripes")
    assert (report.count("train"), report.count("test")) == (22, 11)
    assert report.count("unlabelled") == 3
    train, test = load_dataset(root / "ds")  # recognised by its photos.json
    extractor = PhotoExtractor.load(root / "ds")
    assert train.num_images == 25 and test.num_images == 11
    assert dict(train.view_kinds) == {
        "colour": "real",
        "texture": "real",
        "visual_words": "bag",
    }
    dims = {k: v.shape[1] for k, v in train.views.items()}
    assert (
        dims == extractor.view_dims == {"colour": 72, "texture": 36, "visual_words": 16}
    )
    # words count the grid descriptors; colour and texture rows have norm `scale`
    np.testing.assert_allclose(train.views["visual_words"].sum(1), SMALL.grid_points)
    for view in ("colour", "texture"):
        norms = np.linalg.norm(train.views[view], axis=1)
        np.testing.assert_allclose(norms, extractor.scale, rtol=1e-5)
    # unlabelled photos: in train, words hidden; labelled ones carry their tags
    mask = np.asarray(train.word_mask)
    assert (~mask).sum() == 3 and not np.asarray(train.words)[~mask].any()
    assert np.asarray(train.words)[mask].sum(1).tolist() == [2.0] * 22
    rows = (root / "ds" / "photos.csv").read_text().splitlines()
    assert rows[0] == "file,split,tags"
    by_file = {r.split(",")[0]: r.split(",")[1:] for r in rows[1:]}
    assert sorted(by_file) == sorted(tags)
    assert all(by_file[f] == ["unlabelled", ""] for f in unlabelled)
    assert by_file["photo000.jpg"][1] == " ".join(tags["photo000.jpg"])


def test_tags_are_recovered_well_above_chance(synthetic):
    """knn on the colour view finds the colour tag, on the texture view the pattern
    tag, and on all views both (chance: 1/3 and 1/2)."""
    root = synthetic[0]
    train, test = load_photo_dir(root / "ds")
    names = list(train.word_names)
    colours = [names.index(c) for c in ("red", "green", "blue")]
    patterns = [names.index(p) for p in ("stripes", "plain")]
    truth = np.asarray(test.words)
    knn = get_method("knn")

    def hit_rate(view, k, group):
        fitted = knn.fit(train, rng_key=jax.random.key(0), k=k, view=view)
        scores = np.asarray(knn.score_words(fitted, test))[:, group]
        return np.mean(scores.argmax(1) == truth[:, group].argmax(1))

    assert hit_rate("colour", 3, colours) >= 0.9
    assert hit_rate("texture", 3, patterns) >= 0.7
    assert hit_rate("", 10, colours) >= 0.8
    assert hit_rate("", 10, patterns) >= 0.6


def test_saved_extractor_featurizes_new_photos_identically(synthetic):
    root, tags, _, _ = synthetic
    train, test = load_photo_dir(root / "ds")
    table = (root / "ds" / "photos.csv").read_text().splitlines()[1:]
    files = [r.split(",")[0] for r in table]
    is_test = np.array([r.split(",")[1] == "test" for r in table])
    # load_photo_dir: train rows (train + unlabelled) first, then test, in file order
    order = [files[i] for i in np.flatnonzero(~is_test)]
    order += [files[i] for i in np.flatnonzero(is_test)]
    stored = np.concatenate([train.features(), test.features()])
    picked = sorted(tags)[:4] + sorted(tags)[-1:]  # labelled and unlabelled ones
    again = photo_corpus(root / "ds", [root / "photos" / f for f in picked])
    expected = stored[[order.index(f) for f in picked]]
    np.testing.assert_allclose(again.features(), expected, rtol=1e-5, atol=1e-5)
    assert again.word_names == train.word_names
    assert not np.asarray(again.word_mask).any()


def test_real_photos_shipped_with_scikit_image(tmp_path):
    """Bundled skimage.data files (colour and grey PNGs, JPEGs): every one is
    featurized, and a photo annotated afresh gets its own tags back from 1-NN."""
    import skimage.data

    source = pathlib.Path(skimage.data.__file__).parent
    tags = {
        "astronaut.png": "person space",
        "camera.png": "person grey",
        "chelsea.png": "cat animal",
        "coffee.png": "cup drink",
        "rocket.jpg": "space sky",
        "brick.png": "wall grey",
        "grass.png": "plant grey",
    }
    photos = tmp_path / "photos"
    photos.mkdir()
    for name in tags:
        if not (source / name).is_file():
            pytest.skip(f"scikit-image does not ship {name}")
        shutil.copy(source / name, photos / name)
    csv = tmp_path / "tags.csv"
    csv.write_text("file,tags\n" + "".join(f"{f},{t}\n" for f, t in tags.items()))
    settings = ExtractorSettings(size=96, daisy_step=10, codebook_size=24)
    report = build_photo_dataset(
        photos, tmp_path / "ds", tags=csv, settings=settings, test_fraction=0.0
    )
    assert report.files == tuple(sorted(tags)) and report.skipped == ()
    train, test = load_dataset(tmp_path / "ds")
    assert test is None and train.num_images == 7 and train.num_words == 10
    knn = get_method("knn")
    fitted = knn.fit(train, rng_key=jax.random.key(0), k=1)
    query = ["chelsea.png", "rocket.jpg", "camera.png"]
    scores = np.asarray(
        knn.score_words(
            fitted, photo_corpus(tmp_path / "ds", [photos / q for q in query])
        )
    )
    for q, row in zip(query, scores, strict=True):
        top = {train.word_names[j] for j in np.argsort(-row)[:2]}
        assert top == set(tags[q].split()), q


def test_unreadable_files_are_skipped_and_logged(tmp_path, caplog):
    tags = write_synthetic_photos(tmp_path / "photos", per_kind=1)
    good = (tmp_path / "photos" / "photo000.jpg").read_bytes()
    (tmp_path / "photos" / "corrupt.jpg").write_bytes(good[: len(good) // 3])
    (tmp_path / "photos" / "readme.txt").write_text("not a photo")
    (tmp_path / "photos" / ".hidden.png").write_text("ignored: hidden")
    with caplog.at_level(logging.WARNING, logger="jaxannot.data.photos"):
        report = build_photo_dataset(
            tmp_path / "photos", tmp_path / "ds", tags=tags, settings=SMALL
        )
    assert [f for f, _ in report.skipped] == ["corrupt.jpg", "readme.txt"]
    assert "corrupt.jpg" in caplog.text and "readme.txt" in caplog.text
    assert report.files == tuple(sorted(tags))
    with pytest.raises(UnreadableImage, match="readme.txt"):
        read_image(tmp_path / "photos" / "readme.txt", 64)


def test_tags_csv_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "tags.csv"
    bad.write_text("file,labels\na.jpg,x\n")
    with pytest.raises(DataFormatError, match=r"tags.csv, line 1: .*file,tags"):
        read_tags(bad)
    bad.write_text("file,tags\na.jpg,x y\n./a.jpg,z\n")
    with pytest.raises(DataFormatError, match=r"line 3: 'a.jpg' listed twice"):
        read_tags(bad)
    bad.write_text('file,tags\nsub\\b.png,"x  y"\nc.png,\n')
    assert read_tags(bad) == {"sub/b.png": ["x", "y"], "c.png": []}


def test_output_folder_is_checked(tmp_path):
    write_synthetic_photos(tmp_path / "photos", per_kind=1)
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("someone's file")
    with pytest.raises(FileExistsError, match="not a photo dataset"):
        build_photo_dataset(tmp_path / "photos", other, settings=SMALL)
    with pytest.raises(ValueError, match="no readable image"):
        build_photo_dataset(other, tmp_path / "ds", settings=SMALL)
    # no tags: every photo unlabelled, the corpus has no words
    build_photo_dataset(tmp_path / "photos", tmp_path / "ds", settings=SMALL)
    train, test = load_dataset(tmp_path / "ds")
    assert train.words is None and test is None and train.num_images == 6
    assert not list((tmp_path / "ds").glob(".jaxannot-*"))  # no temp files left


def test_a_new_folder_featurized_with_a_saved_extractor(synthetic, tmp_path):
    root, tags, _, _ = synthetic
    picked = sorted(tags)[5:8]
    for f in picked:
        shutil.copy(root / "photos" / f, tmp_path / f)
    extractor = PhotoExtractor.load(root / "ds")
    build_photo_dataset(tmp_path, tmp_path / "new", extractor=extractor)
    new, _ = load_photo_dir(tmp_path / "new")
    assert PhotoExtractor.load(tmp_path / "new").scale == extractor.scale
    expected = photo_corpus(root / "ds", [root / "photos" / f for f in picked])
    np.testing.assert_allclose(new.features(), expected.features(), rtol=1e-6)
    with pytest.raises(ValueError, match="not both"):
        build_photo_dataset(
            tmp_path, tmp_path / "x", extractor=extractor, settings=SMALL
        )


def test_tags_after_a_comma_are_an_error_naming_the_line(tmp_path):
    bad = tmp_path / "tags.csv"
    bad.write_text("file,tags\nastronaut.png,person space\nchelsea.png,cat,animal\n")
    with pytest.raises(DataFormatError, match=r"tags.csv, line 3: 3 fields.*spaces"):
        read_tags(bad)
    bad.write_text('file,tags\n"a,b.png",cat animal\n')  # a quoted comma is fine
    assert read_tags(bad) == {"a,b.png": ["cat", "animal"]}


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_failed_rebuild_leaves_the_old_dataset_loading(tmp_path, monkeypatch):
    """An empty photo folder, a bad tags file and Ctrl-C in the middle of the photos
    all leave the dataset at --out as it was, with no temporary files; a rebuild
    that succeeds replaces it and keeps the user's own files there."""
    tags = write_synthetic_photos(tmp_path / "photos", per_kind=1)
    out = tmp_path / "ds"
    build_photo_dataset(tmp_path / "photos", out, tags=tags, settings=SMALL)
    (out / "knn.npz").write_bytes(b"a model the user saved here")
    before = _snapshot(out)
    features = load_photo_dir(out)[0].features()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no readable image"):
        build_photo_dataset(tmp_path / "empty", out, settings=SMALL)
    bad = tmp_path / "tags.csv"
    bad.write_text("file,tags\nphoto000.jpg,red,plain\n")
    with pytest.raises(DataFormatError, match="line 2"):
        build_photo_dataset(tmp_path / "photos", out, tags=bad, settings=SMALL)
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return describe(*args, **kwargs)

    monkeypatch.setattr("jaxannot.data.photo_build.describe", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_photo_dataset(tmp_path / "photos", out, tags=tags, settings=SMALL)
    monkeypatch.undo()
    assert _snapshot(out) == before
    np.testing.assert_array_equal(load_photo_dir(out)[0].features(), features)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ds",
        "empty",
        "photos",
        "tags.csv",
    ]
    build_photo_dataset(tmp_path / "photos", out, settings=SMALL, seed=1)
    assert (out / "knn.npz").read_bytes() == before["knn.npz"]
    assert load_photo_dir(out)[0].words is None  # the new dataset: no tags


def _gradient_16bit(height=48, width=80):
    """A horizontal grey ramp over the whole 16-bit range."""
    return np.round(np.linspace(0, 65535, width))[None, :].repeat(height, 0)


@pytest.mark.parametrize("suffix", [".png", ".tif"])
def test_16_bit_images_keep_their_range(tmp_path, suffix):
    from PIL import Image

    ramp = _gradient_16bit()
    Image.fromarray(ramp.astype(np.uint16)).save(tmp_path / f"deep{suffix}")
    with Image.open(tmp_path / f"deep{suffix}") as im:
        assert im.mode.startswith("I;16")  # what convert("RGB") clipped to white
    # reference: the same ramp stored with 8 bits, which Pillow reads as "L"
    Image.fromarray(np.round(ramp / 257).astype(np.uint8)).save(tmp_path / "l8.png")
    deep = read_image(tmp_path / f"deep{suffix}", 64)
    eight = read_image(tmp_path / "l8.png", 64)
    assert deep.shape == (64, 64, 3) and deep.dtype == np.float32
    np.testing.assert_allclose(deep, eight, atol=1.5 / 255)  # 8-bit rounding
    np.testing.assert_allclose(deep[0, :, 0], np.linspace(0, 1, 64), atol=0.02)


def test_a_named_pipe_is_skipped_not_waited_on(tmp_path):
    import threading

    os.mkfifo(tmp_path / "pipe.png")
    outcome = []

    def read():
        try:
            read_image(tmp_path / "pipe.png", 64)
        except UnreadableImage as err:
            outcome.append(str(err))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=20)  # opening a FIFO for reading blocks until a writer comes
    assert (
        outcome
        and "pipe.png: not a readable image (not a regular file)" in (outcome[0])
    )


def test_a_very_large_image_is_logged_with_its_name(tmp_path, monkeypatch, caplog):
    """Pillow's DecompressionBombWarning becomes a log record naming the file (the
    suite turns warnings into errors, so one escaping would fail the test)."""
    from PIL import Image

    Image.fromarray(np.zeros((60, 100, 3), np.uint8)).save(tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4000)  # 6000 pixels: warned
    with caplog.at_level(logging.WARNING, logger="jaxannot.data.image_features"):
        assert read_image(tmp_path / "big.png", 64).shape == (64, 64, 3)
    [record] = caplog.records
    assert record.getMessage().startswith(f"{tmp_path / 'big.png'}: Image size (6000")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 2000)  # over twice the limit
    with pytest.raises(UnreadableImage, match="big.png: not a readable image"):
        read_image(tmp_path / "big.png", 64)


def test_a_file_name_that_is_not_utf8_is_skipped(tmp_path):
    tags = write_synthetic_photos(tmp_path / "photos", per_kind=1)
    folder = os.fsencode(tmp_path / "photos")
    shutil.copy(folder + b"/photo000.jpg", folder + b"/bad\xff.jpg")
    report = build_photo_dataset(
        tmp_path / "photos", tmp_path / "ds", tags=tags, settings=SMALL
    )
    assert report.skipped == (("bad\\xff.jpg", "file name is not valid UTF-8"),)
    assert report.files == tuple(sorted(tags))
    train, test = load_photo_dir(tmp_path / "ds")
    assert train.num_images + test.num_images == 6


@pytest.mark.parametrize(
    "error", [struct.error("unpack requires a buffer of 2 bytes"), TypeError(),
              AttributeError("'NoneType' object has no attribute 'get'")],
)  # fmt: skip
def test_any_error_of_a_damaged_exif_is_an_unreadable_image(
    tmp_path, monkeypatch, error
):
    """Pillow's EXIF rewrite raises these on ~1.5% of single-byte EXIF mutations."""
    from PIL import ImageOps

    write_synthetic_photos(tmp_path, per_kind=1)

    def exif_transpose(im):
        raise error

    monkeypatch.setattr(ImageOps, "exif_transpose", exif_transpose)
    with pytest.raises(UnreadableImage, match=r"photo000\.jpg: not a readable image"):
        read_image(tmp_path / "photo000.jpg", 64)


def test_pillows_warnings_about_a_file_are_logged_naming_it(
    tmp_path, monkeypatch, caplog
):
    """The suite turns warnings into errors: one escaping would fail the test."""
    import warnings

    from PIL import ImageOps

    write_synthetic_photos(tmp_path, per_kind=1)
    transpose = ImageOps.exif_transpose

    def exif_transpose(im):
        warnings.warn("Corrupt EXIF data.  Expecting to read 2 bytes", stacklevel=2)
        return transpose(im)

    monkeypatch.setattr(ImageOps, "exif_transpose", exif_transpose)
    with caplog.at_level(logging.WARNING, logger="jaxannot.data.image_features"):
        assert read_image(tmp_path / "photo000.jpg", 32).shape == (32, 32, 3)
    [record] = caplog.records
    expected = f"{tmp_path / 'photo000.jpg'}: Corrupt EXIF data. Expecting to read 2"
    assert record.getMessage().startswith(expected)


def test_a_damaged_float_image_is_read_finite(tmp_path):
    from PIL import Image

    values = np.full((8, 8), np.nan, np.float32)
    values[:4] = np.inf
    values[0, 0] = 0.5
    Image.fromarray(values, mode="F").save(tmp_path / "nan.tif")
    rgb = read_image(tmp_path / "nan.tif", SMALL.size)
    assert np.isfinite(rgb).all() and rgb.max() > 0
    describe(rgb, SMALL)  # used to fail on NaN colour bins


def test_odd_files_and_hostile_names_do_not_stop_a_build(tmp_path, caplog):
    """A file Pillow half knows (DDS named .jpg) is skipped, not fatal; a name's
    control characters are escaped in the report and the log."""
    tags = write_synthetic_photos(tmp_path / "photos", per_kind=1)
    evil = "evil\x1b]0;PWNED\x07\x1b[2J"
    (tmp_path / "photos" / f"{evil}.jpg").write_text("not a photo")
    dds = io.BytesIO()
    from PIL import Image

    Image.new("RGBA", (8, 8)).save(dds, "DDS")
    data = bytearray(dds.getvalue())
    data[80:88] = (4).to_bytes(4, "little") + b"ZZZZ"  # unknown pixel format
    (tmp_path / "photos" / "texture.jpg").write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="jaxannot.data.photos"):
        report = build_photo_dataset(
            tmp_path / "photos", tmp_path / "ds", tags=tags, settings=SMALL
        )
    assert report.files == tuple(sorted(tags))
    skipped = dict(report.skipped)
    assert sorted(skipped) == ["evil\\x1b]0;PWNED\\x07\\x1b[2J.jpg", "texture.jpg"]
    assert skipped["texture.jpg"].startswith("not a readable image (NotImplemented")
    assert "\x1b" not in caplog.text and "\x07" not in caplog.text


@pytest.mark.parametrize(
    "changes, bound",
    [
        ({"size": 30000}, "size must be in [1, 640], got 30000"),
        ({"lbp": ((5_000_000, 1),)}, "lbp points must be in [4, 32]"),
        ({"lbp": ((8, 0),)}, "lbp radius must be in [1, 32], got 0"),
        ({"lbp": ()}, "lbp must hold 1 to 4 entries, got 0"),
        ({"gabor_orientations": 10_000_000}, "gabor_orientations must be in [0, 16]"),
        ({"gabor_frequencies": (0,)}, "gabor frequency must be in [0.05, 0.5]"),
        ({"gabor_frequencies": (0.1,) * 5}, "gabor_frequencies must hold 0 to 4"),
        ({"hue_bins": 64, "saturation_bins": 64}, "hue_bins * saturation_bins"),
        ({"daisy_step": 1}, "grid_points * descriptor_dims must be in [1, 1048576]"),
        ({"codebook_size": 0}, "codebook_size must be in [1, 10000], got 0"),
    ],
)
def test_extractor_settings_have_documented_bounds(changes, bound):
    with pytest.raises(ValueError, match=re.escape(bound)):
        ExtractorSettings(**changes)


def test_a_field_over_the_csv_limit_names_the_file_and_line(tmp_path):
    tags = tmp_path / "tags.csv"
    tags.write_text("file,tags\na.jpg,x\nb.jpg," + "t" * 140_000 + "\n")
    with pytest.raises(DataFormatError, match=r"tags\.csv, line 3: not a CSV table"):
        read_tags(tags)


def test_a_damaged_photos_csv_names_the_file(tmp_path):
    write_synthetic_photos(tmp_path / "photos", per_kind=1)
    build_photo_dataset(tmp_path / "photos", tmp_path / "ds", settings=SMALL)
    table = tmp_path / "ds" / "photos.csv"
    original = table.read_text()
    table.write_text(original + "x.jpg,train," + "t" * 140_000 + "\n")
    with pytest.raises(DataFormatError, match=r"photos\.csv, line \d+: not a CSV"):
        load_photo_dir(tmp_path / "ds")
    table.write_bytes(original.encode() + b"\xff\n")
    with pytest.raises(DataFormatError, match=r"photos\.csv, line \d+: not UTF-8 text"):
        load_photo_dir(tmp_path / "ds")


def test_names_with_a_leading_space_or_a_backslash_can_be_tagged(tmp_path):
    tags = write_synthetic_photos(tmp_path / "photos", per_kind=1)
    photos = tmp_path / "photos"
    shutil.copy(photos / "photo000.jpg", photos / " lead.jpg")
    shutil.copy(photos / "photo000.jpg", photos / "back\\slash.jpg")
    rows = [f"{f},{' '.join(t)}" for f, t in tags.items()]
    rows += ['" lead.jpg",red', '"back\\slash.jpg",blue']
    (tmp_path / "tags.csv").write_text("file,tags\n" + "\n".join(rows) + "\n")
    report = build_photo_dataset(
        photos, tmp_path / "ds", tags=tmp_path / "tags.csv", settings=SMALL
    )
    split = dict(zip(report.files, report.splits, strict=True))
    assert (
        split[" lead.jpg"] != "unlabelled" and split["back\\slash.jpg"] != "unlabelled"
    )
    assert report.unmatched_tags == ()
    assert read_tags(tmp_path / "tags.csv")["back/slash.jpg"] == ["blue"]


def test_unreadable_photo_folders_are_named(tmp_path, monkeypatch, caplog):
    """(Root ignores modes: listing is refused through os.scandir here.)"""
    tags = write_synthetic_photos(tmp_path / "photos", per_kind=1)
    (tmp_path / "photos" / "locked").mkdir()
    shutil.copy(tmp_path / "photos" / "photo000.jpg", tmp_path / "photos" / "locked")
    scandir, refused = os.scandir, set()

    def guarded(path="."):
        if pathlib.Path(path).name in refused:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", guarded)
    refused.add("locked")
    with caplog.at_level(logging.WARNING, logger="jaxannot.data.photos"):
        report = build_photo_dataset(
            tmp_path / "photos", tmp_path / "ds", tags=tags, settings=SMALL
        )
    assert report.files == tuple(sorted(tags))
    assert "skipped folder" in caplog.text and "locked: cannot be listed" in caplog.text
    refused.add("photos")
    with pytest.raises(PermissionError, match=r"photos: cannot be listed \(Permission"):
        build_photo_dataset(tmp_path / "photos", tmp_path / "ds2", settings=SMALL)
