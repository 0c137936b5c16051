"""Named datasets: data root resolution, lookup errors, listing, every real loader."""

import pathlib

import numpy as np
import pytest

from jaxannot.data.corpus import Corpus
from jaxannot.data.datasets import DATASETS, data_root, list_datasets, load_dataset

NAMES = [
    "corel5k",
    "scene",
    "yeast",
    "emotions",
    "enron",
    "bibtex",
    "delicious",
    "mfeat",
    "msrc",
    "3sources",
    "bbcsport",
    "wikipedia",
]


def test_registry_names():
    assert sorted(DATASETS) == sorted(NAMES)


def test_data_root_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("JAXANNOT_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="--data-dir.*JAXANNOT_DATA=DIR"):
        data_root()
    monkeypatch.setenv("JAXANNOT_DATA", str(tmp_path))
    assert data_root() == tmp_path
    (tmp_path / "other").mkdir()
    assert data_root(tmp_path / "other") == tmp_path / "other"  # argument wins
    with pytest.raises(FileNotFoundError, match="not a directory"):
        data_root(tmp_path / "missing")
    assert [p for _, p, _ in list_datasets()] == [False] * len(NAMES)
    with pytest.raises(FileNotFoundError, match=r"'scene': missing \['scene\.xml'"):
        load_dataset("scene")


def test_unknown_name_lists_valid_names(tmp_path):
    with pytest.raises(KeyError, match=r"unknown dataset 'corel6k'.*'bibtex'.*'yeast'"):
        load_dataset("corel6k", tmp_path)


def test_list_datasets_real(data_root):
    listing = list_datasets(data_root)
    assert [n for n, _, _ in listing] == list(DATASETS)
    assert all(present for _, present, _ in listing)
    assert all(isinstance(s, str) and s for _, _, s in listing)


def test_corel5k_matches_source(data_root):
    train, test = load_dataset("corel5k", data_root)
    assert list(train.views) == ["blobs"] and train.view_kinds["blobs"] == "bag"
    assert train.views["blobs"].shape == (4500, 499)
    assert test.views["blobs"].shape == (500, 499)
    assert train.num_words == test.num_words == 374
    assert train.word_names[0] == "city"  # SOURCE.md: first label
    # SOURCE.md: label cardinality 3.522 (train), 8.2 blobs per image, 3 unused words
    assert train.words.sum(1).mean() == pytest.approx(3.522, abs=5e-4)
    assert (train.views["blobs"] > 0).sum(1).mean() == pytest.approx(8.2, abs=0.05)
    assert int((train.words.sum(0) == 0).sum()) == 3
    assert int((test.words.sum(0) == 0).sum()) == 111
    assert train.word_mask.all() and train.labels is None
    assert train.views["blobs"].dtype == np.float32


def test_corel5k_empirical_baseline_figures(data_root):
    """Word-frequency ranking gives the published accuracy 0.1912 / CL 121.55.

    Computed here independently of jaxannot.metrics (ties broken by word index), so a
    misaligned word column in the loader would change both figures.
    """
    train, test = load_dataset("corel5k", data_root)
    freq = train.words.sum(0)
    order = np.lexsort((np.arange(freq.size), -freq))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    accuracy, complete_length = [], []
    for truth in test.words > 0:
        r = int(truth.sum())
        if r:
            accuracy.append(truth[order[:r]].sum() / r)
            complete_length.append(rank[truth].max() + 1)
    assert round(float(np.mean(accuracy)), 4) == 0.1912
    assert round(float(np.mean(complete_length)), 2) == 121.55


SMALL_MULAN = {
    # name: (train shape, test shape, words, kind, train label cardinality)
    "scene": ((1211, 294), (1196, 294), 6, "real", 1.062),
    "emotions": ((391, 72), (202, 72), 6, "real", 1.813),
    "enron": ((1123, 1001), (579, 1001), 53, "binary", 3.386),
}


@pytest.mark.parametrize("name", sorted(SMALL_MULAN))
def test_small_mulan_datasets(data_root, name):
    tr_shape, te_shape, words, kind, card = SMALL_MULAN[name]
    train, test = load_dataset(name, data_root)
    assert train.views["features"].shape == tr_shape
    assert test.views["features"].shape == te_shape
    assert train.num_words == words and train.view_kinds["features"] == kind
    assert train.words.sum(1).mean() == pytest.approx(card, abs=5e-4)


def test_big_sparse_datasets_once(data_root):
    """bibtex and delicious (the largest shared files, ~1-3 s each)."""
    train, test = load_dataset("bibtex", data_root)
    assert train.views["features"].shape == (4880, 1836)
    assert test.views["features"].shape == (2515, 1836) and train.num_words == 159
    assert train.words.sum(1).mean() == pytest.approx(2.380, abs=5e-4)
    assert (train.views["features"].sum(1)).mean() == pytest.approx(68.5, abs=0.05)
    train, test = load_dataset("delicious", data_root)
    assert train.views["features"].shape == (12920, 500)
    assert test.views["features"].shape == (3185, 500) and train.num_words == 983
    assert train.view_kinds["features"] == "binary"
    assert train.words.sum(1).mean() == pytest.approx(19.05, abs=5e-3)
    assert len(set(train.word_names)) == 983 and "TAG_??" in train.word_names


def test_every_corpus_passes_validation(data_root):
    """Rebuilding each (small) corpus with Corpus.from_arrays validates its values."""
    for name in ["corel5k", "scene", "yeast", "mfeat", "msrc", "3sources", "wikipedia"]:
        train, test = load_dataset(name, data_root)
        for c in (train, test):
            if c is None:
                continue
            again = Corpus.from_arrays(
                c.views,
                view_kinds=c.view_kinds,
                words=c.words,
                labels=c.labels,
                word_names=c.word_names,
                class_names=c.class_names or None,
            )
            assert again.num_images == c.num_images


def test_mulan_directory_by_path(data_root):
    train, test = load_dataset(str(data_root / "emotions"))
    assert train.views["features"].shape == (391, 72) and test.num_images == 202


def _tiny_mulan(folder, stem: str, rows: int) -> None:
    """A Mulan directory ``stem.xml`` + ``stem-{train,test}.arff`` with ``rows``
    training images (two features, two labels)."""
    folder.mkdir(parents=True)
    (folder / f"{stem}.xml").write_text(
        '<labels xmlns="http://mulan.sourceforge.net/labels">'
        '<label name="a"/><label name="b"/></labels>'
    )
    head = "@relation r\n@attribute x numeric\n@attribute y numeric\n"
    head += "@attribute a {0,1}\n@attribute b {0,1}\n@data\n"
    data = "".join(f"{i}.0,{i % 3}.5,{i % 2},{1 - i % 2}\n" for i in range(rows))
    (folder / f"{stem}-train.arff").write_text(head + data)
    (folder / f"{stem}-test.arff").write_text(head + data[: data.index("\n") + 1])


def test_a_folder_named_like_a_dataset_is_never_silently_shadowed(
    tmp_path, monkeypatch
):
    root, here = tmp_path / "root", tmp_path / "here"
    _tiny_mulan(root / "scene", "scene", rows=4)  # the named dataset
    _tiny_mulan(here / "scene", "scene", rows=7)  # the user's own folder
    monkeypatch.chdir(here)
    for path in ("./scene", "scene/", str(here / "scene"), pathlib.Path("scene")):
        train, _ = load_dataset(path, root)
        assert train.num_images == 7, path
    with pytest.raises(ValueError, match=r"'scene' is ambiguous.*write \./scene"):
        load_dataset("scene", root)
    with pytest.raises(FileNotFoundError, match="'yeast': missing"):
        load_dataset("yeast", root)  # no folder of that name here: the name
    monkeypatch.chdir(root)  # ./scene is the named dataset's own folder: no doubt
    train, _ = load_dataset("scene", root)
    assert train.num_images == 4 and train.name == "scene"
