"""Small hostile inputs that got the wrong message (issue 44): a symbolic link loop
said "does not exist", an empty training split said "k must be in [1, 0]", a photo
folder nested 1100 levels deep raised ``RecursionError`` from ``os.walk``, a photo
table cut short was blamed on the features (found by
``tests/data/test_fuzz_files.py``)."""

import json

import numpy as np
import pytest

from jaxannot.data import make_task, photo_tags
from jaxannot.data.archive import read_archive, write_archive
from jaxannot.data.datasets import load_dataset
from jaxannot.data.errors import DataFormatError
from jaxannot.data.image_features import VIEW_KINDS
from jaxannot.data.photos import load_photo_dir
from jaxannot.data.synthetic import make_synthetic


def _loop(folder, name="x"):
    (folder / name).symlink_to("y")
    (folder / "y").symlink_to(name)
    return folder / name


def test_a_model_that_is_a_link_loop_is_named_a_loop(tmp_path):
    with pytest.raises(OSError, match="symbolic link loop") as info:
        read_archive(_loop(tmp_path), "jaxannot model")
    assert not isinstance(info.value, FileNotFoundError)


def test_a_dataset_folder_that_is_a_link_loop_is_named_a_loop(tmp_path):
    with pytest.raises(OSError, match="symbolic link loop"):
        load_dataset(_loop(tmp_path))


def test_a_dataset_file_that_is_a_link_loop_is_named_a_loop(tmp_path):
    (tmp_path / "t.xml").write_text("<labels/>")
    _loop(tmp_path, "t-train.arff")
    with pytest.raises(OSError, match="a symbolic link loop.*t-train.arff"):
        load_dataset(tmp_path)


def test_an_empty_training_split_is_named():
    corpus = make_synthetic(seed=0, num_images=1)
    with pytest.raises(ValueError, match="training split has no images"):
        make_task(corpus, None, protocol="inductive", seed=0)
    ok = make_synthetic(seed=0, num_images=20)
    empty = ok.subset(np.zeros(20, bool))
    with pytest.raises(ValueError, match="test split has no images"):
        make_task(ok, empty, protocol="inductive", seed=0)


def test_a_deeply_nested_photo_folder_is_walked_without_recursion(tmp_path, caplog):
    folders = [tmp_path / "d"]
    for _ in range(1100):  # os.makedirs and shutil.rmtree recurse: by hand
        folders[-1].mkdir()
        folders.append(folders[-1] / "d")
    deep = folders[-2] / "deep.jpg"
    deep.write_bytes(b"x")
    (folders[2] / "top.jpg").write_bytes(b"x")
    try:
        assert photo_tags.list_photos(tmp_path) == ["d/d/d/top.jpg"]
        assert f"more than {getattr(photo_tags, 'MAX_DEPTH', 64)} levels" in caplog.text
    finally:
        deep.unlink()
        (folders[2] / "top.jpg").unlink()
        for folder in reversed(folders[:-1]):
            folder.rmdir()


def test_a_photo_table_missing_rows_is_named_not_the_features(tmp_path):
    """A ``photos.csv`` cut short was blamed on ``features.npz`` ("view 'colour'
    has shape (8, 4), expected [4, dims]"): the table disagrees with the manifest's
    count, so the table is named."""
    manifest = {"format": "jaxannot.photos", "version": 1, "views": VIEW_KINDS,
                "tags": [], "num_photos": 8}  # fmt: skip
    (tmp_path / "photos.json").write_text(json.dumps(manifest))
    (tmp_path / "photos.csv").write_text(
        "file,split,tags\n" + "".join(f"p{i}.jpg,train,\n" for i in range(4))
    )
    write_archive(
        tmp_path / "features.npz",
        {v: np.zeros((8, 2), np.float32) for v in VIEW_KINDS},
    )
    with pytest.raises(DataFormatError, match="lists 4 photos.*counts 8") as err:
        load_photo_dir(tmp_path)
    assert str(tmp_path / "photos.csv") in str(err.value)
