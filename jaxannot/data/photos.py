"""A folder of photos as a dataset: its format, and loading it.

A *photo dataset* directory, written by
:func:`~jaxannot.data.photo_build.build_photo_dataset` (``jaxannot features``; the
photos and their tags file: :mod:`~jaxannot.data.photo_tags`), holds:

``photos.json``
    The manifest:
    ``{"format": "jaxannot.photos", "version": 1, "name", "views": {view: kind},
    "tags": [vocabulary], "num_photos", "test_fraction", "seed", "skipped":
    [{"file", "reason"}]}``.
``photos.csv``
    One row per featurized photo, in the row order of the arrays: ``file`` (path
    relative to the photo folder, ``/``-separated), ``split`` (``train``, ``test`` or
    ``unlabelled``) and ``tags`` (space-separated).
``features.npz``
    One ``float32 [photos, dims]`` array per view (``colour``, ``texture``,
    ``visual_words``; see :mod:`jaxannot.data.image_features`).
``extractor.json``, ``extractor.npz``
    The fitted :class:`~jaxannot.data.photo_extractor.PhotoExtractor` (settings and
    codebook), to featurize new photos identically.

:func:`load_photo_dir` (what :func:`jaxannot.data.datasets.load_dataset` calls for such
a folder) returns ``(train, test)``: ``train`` holds the ``train`` photos and the
``unlabelled`` ones (their words hidden: ``word_mask`` False, so methods never learn
their tags), ``test`` the ``test`` photos (``None`` when there are none).
"""

from __future__ import annotations

import csv
import io
import logging
import os
import pathlib
from collections.abc import Callable, Sequence

import numpy as np

from jaxannot.data.archive import read_archive, read_json_object
from jaxannot.data.bounded import as_float32, check_dense, file_size
from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import DataFormatError
from jaxannot.data.image_features import VIEW_KINDS
from jaxannot.data.photo_extractor import PhotoExtractor
from jaxannot.data.photo_tags import csv_errors, read_checked_text

__all__ = [
    "MANIFEST",
    "is_photo_dataset",
    "load_photo_dir",
    "photo_corpus",
    "read_manifest",
    "PHOTOS_FORMAT",
    "PHOTOS_VERSION",
]

MANIFEST = "photos.json"
PHOTOS_FORMAT = "jaxannot.photos"
PHOTOS_VERSION = 1
_SPLITS = ("train", "test", "unlabelled")
_OUTPUTS = (MANIFEST, "photos.csv", "features.npz", "extractor.json", "extractor.npz")

log = logging.getLogger(__name__)


def is_photo_dataset(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder written by :func:`build_photo_dataset`."""
    return (pathlib.Path(path) / MANIFEST).is_file()


def read_manifest(folder: str | os.PathLike) -> dict:
    """The manifest ``photos.json`` of a photo dataset (``DataFormatError`` if bad)."""
    path = pathlib.Path(folder) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder}: no {MANIFEST}; not a photo dataset (write one with "
            f"`jaxannot features PHOTOS_DIR --out DIR`)"
        )
    manifest = read_json_object(path, "photo dataset manifest")
    if (
        manifest.get("format") != PHOTOS_FORMAT
        or manifest.get("version") != PHOTOS_VERSION
    ):
        raise DataFormatError(path, f"not a {PHOTOS_FORMAT} v{PHOTOS_VERSION} manifest")
    views, tags = manifest.get("views"), manifest.get("tags")
    if views != VIEW_KINDS:
        raise DataFormatError(path, f"its views must be {VIEW_KINDS}, got {views!r}")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise DataFormatError(path, "its tags must be a list of strings")
    return manifest


def _read_table(folder: pathlib.Path) -> list[tuple[str, str, list[str]]]:
    path = folder / "photos.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no photos.csv")
    reader = csv.DictReader(io.StringIO(read_checked_text(path)))
    with csv_errors(path, reader):
        if reader.fieldnames != ["file", "split", "tags"]:
            raise DataFormatError(path, "header must be file,split,tags", line=1)
        rows = []
        for row in reader:
            if row["split"] not in _SPLITS:
                raise DataFormatError(
                    path, f"split {row['split']!r} not in {_SPLITS}", reader.line_num
                )
            rows.append((row["file"], row["split"], (row["tags"] or "").split()))
    return rows


def load_photo_dir(
    folder: str | os.PathLike, name: str | None = None
) -> tuple[Corpus, Corpus | None]:
    """Load a photo dataset as ``(train, test)`` (see the module docstring).

    Raises
    ------
    FileNotFoundError
        A missing file of the dataset.
    DataFormatError
        Files that disagree (row counts: ``photos.csv`` against the manifest's
        ``num_photos``, then the views; tags outside the vocabulary), a
        feature beyond float32's range, or a ``photos x tags`` matrix over
        :func:`~jaxannot.data.bounded.allowed_bytes` of the size of ``photos.csv``
        and the manifest together (checked before it is allocated).
    """
    folder = pathlib.Path(folder)
    manifest = read_manifest(folder)
    rows = _read_table(folder)
    counted = manifest.get("num_photos")
    if type(counted) is int and counted != len(rows):  # blame the table, not views
        raise DataFormatError(
            folder / "photos.csv",
            f"it lists {len(rows)} photos, its {MANIFEST} counts {counted}",
        )
    path = folder / "features.npz"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no features.npz")
    kinds = dict(manifest["views"])
    remedy = "build the dataset again with `jaxannot features`"
    arrays = read_archive(path, "photo features file", remedy=remedy).arrays
    missing = sorted(set(kinds) - set(arrays))
    if missing:
        raise DataFormatError(path, f"no array for view(s) {missing}; {remedy}")
    views = {v: as_float32(arrays[v], path, f"view {v!r}") for v in kinds}
    for v, x in views.items():
        if x.ndim != 2 or x.shape[0] != len(rows):
            raise DataFormatError(
                path, f"view {v!r} has shape {x.shape}, expected [{len(rows)}, dims]"
            )
    vocabulary = list(manifest["tags"])
    index = {t: j for j, t in enumerate(vocabulary)}
    splits = np.array([s for _, s, _ in rows])
    words = None
    if vocabulary:  # its own bound: photos.csv and the manifest are small
        table = folder / "photos.csv"
        size = file_size(table) + file_size(folder / MANIFEST)
        check_dense(table, len(rows), len(vocabulary), 4, "its tag matrix", size)
        words = np.zeros((len(rows), len(vocabulary)), np.float32)
        for i, (f, _, tags) in enumerate(rows):
            unknown = [t for t in tags if t not in index]
            if unknown:
                raise DataFormatError(
                    folder / "photos.csv",
                    f"{f}: tags {unknown} not in the manifest ({MANIFEST})",
                )
            words[i, [index[t] for t in tags]] = 1.0
    corpus = Corpus.from_arrays(
        views,
        view_kinds=kinds,
        words=words,
        word_mask=None if words is None else splits != "unlabelled",
        word_names=tuple(vocabulary) if vocabulary else None,
        name=name or manifest.get("name") or folder.name,
    )
    test_rows = splits == "test"
    test = corpus.subset(test_rows) if test_rows.any() else None
    return corpus.subset(~test_rows), test


def photo_corpus(
    folder: str | os.PathLike,
    paths: Sequence[str | os.PathLike],
    *,
    extractor: PhotoExtractor | None = None,
    progress: bool = False,
    on_error: Callable[[str, str], None] | None = None,
) -> Corpus:
    """Featurize image files with a photo dataset's extractor, as a :class:`Corpus`
    with the dataset's views and tag vocabulary (every tag unobserved); ``progress``
    shows a bar over the photos.

    Without ``on_error``, a file that is not an image raises
    :class:`~jaxannot.data.image_features.UnreadableImage`; with it, such a file is
    reported by ``on_error(path, message)`` and left out of the corpus (whose rows
    are then the readable files, in order).
    """
    paths = list(paths)
    if not paths:
        raise ValueError("no photos to featurize")
    manifest = read_manifest(folder)
    extractor = extractor or PhotoExtractor.load(folder)
    log.info("featurizing %d photo(s) with the extractor of %s", len(paths), folder)
    views, kept = extractor.transform(paths, progress=progress, on_error=on_error)
    vocabulary = tuple(manifest["tags"])
    n = len(kept)
    words = np.zeros((n, len(vocabulary)), np.float32) if vocabulary else None
    return Corpus.from_arrays(
        views,
        view_kinds=dict(manifest["views"]),
        words=words,
        word_mask=None if words is None else np.zeros(n, bool),
        word_names=vocabulary or None,
        name=manifest.get("name", "photos"),
    )
