"""A folder of photos as a dataset: build it (``jaxannot features``) and load it.

A *photo dataset* directory, written by :func:`build_photo_dataset`, holds:

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
    The fitted :class:`~jaxannot.data.image_features.PhotoExtractor` (settings and
    codebook), to featurize new photos identically.

The folder is built under a temporary name and then takes its name in one step
(:func:`~jaxannot.data.atomic.atomic_folder`): a failed or killed build leaves the
folder as it was.

:func:`load_photo_dir` (what :func:`jaxannot.data.datasets.load_dataset` calls for such
a folder) returns ``(train, test)``: ``train`` holds the ``train`` photos and the
``unlabelled`` ones (their words hidden: ``word_mask`` False, so methods never learn
their tags), ``test`` the ``test`` photos (``None`` when there are none).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import logging
import os
import pathlib
from collections.abc import Callable, Mapping

import numpy as np

from jaxannot.data.archive import read_archive, read_json_object, write_archive
from jaxannot.data.atomic import atomic_folder, atomic_write
from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import DataFormatError, printable
from jaxannot.data.image_features import (
    VIEW_KINDS,
    ExtractorSettings,
    PhotoExtractor,
    UnreadableImage,
    describe,
    fit_codebook,
    read_image,
)

__all__ = [
    "MANIFEST",
    "PhotoDatasetReport",
    "build_photo_dataset",
    "is_photo_dataset",
    "list_photos",
    "load_photo_dir",
    "photo_corpus",
    "read_manifest",
    "read_tags",
]

MANIFEST = "photos.json"
_FORMAT = "jaxannot.photos"
_VERSION = 1
_SPLITS = ("train", "test", "unlabelled")
_OUTPUTS = (MANIFEST, "photos.csv", "features.npz", "extractor.json", "extractor.npz")

log = logging.getLogger(__name__)


def is_photo_dataset(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder written by :func:`build_photo_dataset`."""
    return (pathlib.Path(path) / MANIFEST).is_file()


def list_photos(
    folder: str | os.PathLike, exclude: str | os.PathLike | None = None
) -> list[str]:
    """Every file under ``folder`` (recursively, sorted), relative and ``/``-separated.

    Hidden files and folders (names starting with ``.``) and everything under
    ``exclude`` are left out. No file is opened: which files are images is found
    when they are read. A subfolder that cannot be listed is skipped with a warning
    naming it (logger ``jaxannot.data.photos``).

    Raises
    ------
    NotADirectoryError
        ``folder`` is not a folder.
    PermissionError
        ``folder`` itself cannot be listed (or another ``OSError`` saying why).
    """
    root = pathlib.Path(folder)
    if not root.is_dir():
        raise NotADirectoryError(f"{folder}: not a folder of photos")
    skip = pathlib.Path(exclude).resolve() if exclude is not None else None
    found = []

    def unreadable(err: OSError) -> None:
        why = err.strerror or str(err)
        if pathlib.Path(err.filename) == root:
            raise type(err)(err.errno, f"{printable(root)}: cannot be listed ({why})")
        log.warning(
            "skipped folder %s: cannot be listed (%s)", printable(err.filename), why
        )

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        here = pathlib.Path(dirpath)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and (skip is None or (here / d).resolve() != skip)
        )
        for f in filenames:
            if not f.startswith("."):
                found.append((here / f).relative_to(root).as_posix())
    return sorted(found)


def read_tags(path: str | os.PathLike) -> dict[str, list[str]]:
    """Read a tags CSV: header ``file,tags``, one row per photo, tags space-separated.

    Returns ``{file: [tags]}`` (``file`` stripped of surrounding spaces and of a
    leading ``./``, ``\\`` separators turned into ``/``; when a tags CSV is given
    to :func:`build_photo_dataset`, a name that is exactly a photo's, spaces and
    backslashes included, names that photo instead). A photo may have an empty tag
    list. A row with more fields than the header (tags
    separated by commas, ``cat.png,cat,animal``, or a file name with an unquoted
    comma) is an error, never a silent loss of the tags after the comma.

    Raises
    ------
    DataFormatError
        Missing columns, a row with more fields than the header, or a file listed
        twice (the message gives the line).
    """
    return _keyed_tags(path, _tag_rows(path))


def _tag_rows(path) -> list[tuple[str, int, list[str]]]:
    """``(file as written, line, tags)`` of each row of the tags CSV ``path``."""
    reader = csv.DictReader(io.StringIO(_read_text(path, "utf-8-sig")))
    with _csv_errors(path, reader):
        return _raw_tag_rows(path, reader)


def _keyed_tags(path, rows, photos=frozenset()) -> dict[str, list[str]]:
    """``{file: tags}`` of ``rows``: a file that is one of ``photos`` as written is
    kept as it is, any other normalised (:func:`read_tags`)."""
    out: dict[str, list[str]] = {}
    for raw, line, tags in rows:
        name = raw if raw in photos else _normalise(raw.strip())
        if not name:
            raise DataFormatError(path, "empty file name", line=line)
        if name in out:
            raise DataFormatError(path, f"{name!r} listed twice", line=line)
        out[name] = tags
    return out


def _read_text(path, encoding: str = "utf-8") -> str:
    try:
        return pathlib.Path(path).read_text(encoding=encoding)
    except UnicodeDecodeError as err:
        raise DataFormatError(path, f"not UTF-8 text: {err}") from None


@contextlib.contextmanager
def _csv_errors(path, reader):
    """A ``csv.Error`` (a field over the csv module's 131,072 characters, a NUL
    byte, ...) as a DataFormatError naming the file and the line."""
    try:
        yield
    except csv.Error as err:  # raised before the reader counts the failing line
        raise DataFormatError(
            path, f"not a CSV table ({err})", reader.line_num + 1
        ) from None


def _raw_tag_rows(path, reader) -> list[tuple[str, int, list[str]]]:
    columns = [c.strip() for c in (reader.fieldnames or [])]
    if "file" not in columns or "tags" not in columns:
        raise DataFormatError(
            path, f"needs a header with columns 'file,tags', got {columns}", line=1
        )
    reader.fieldnames = columns
    out = []
    for row in reader:
        if None in row:  # DictReader's key for the fields beyond the header's
            raise DataFormatError(
                path,
                f"{len(columns) + len(row[None])} fields, the header has "
                f"{len(columns)} ({','.join(columns)}): separate tags with spaces, "
                f"not commas, and quote a file name holding a comma",
                line=reader.line_num,
            )
        tags = (row.get("tags") or "").split()
        out.append((row.get("file") or "", reader.line_num, tags))
    return out


def _normalise(name: str) -> str:
    name = name.replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    return name


@dataclasses.dataclass(frozen=True)
class PhotoDatasetReport:
    """What :func:`build_photo_dataset` did.

    Attributes
    ----------
    folder : pathlib.Path
        The dataset directory written.
    files : tuple of str
        The photos featurized (rows of the dataset).
    splits : tuple of str
        ``train`` / ``test`` / ``unlabelled`` for each photo.
    tags : tuple of str
        The tag vocabulary.
    skipped : tuple of (str, str)
        ``(file, reason)`` of every file that could not be read as an image.
    unmatched_tags : tuple of str
        Files of the tags CSV that are not among the photos featurized.
    """

    folder: pathlib.Path
    files: tuple[str, ...]
    splits: tuple[str, ...]
    tags: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    unmatched_tags: tuple[str, ...]

    def count(self, split: str) -> int:
        """Number of photos in ``split``."""
        return sum(s == split for s in self.splits)


def build_photo_dataset(
    photos_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    tags: str | os.PathLike | Mapping[str, list[str]] | None = None,
    settings: ExtractorSettings | None = None,
    extractor: PhotoExtractor | None = None,
    test_fraction: float = 0.3,
    seed: int = 0,
    name: str | None = None,
    progress: bool = False,
    on_skip: Callable[[str, str], None] | None = None,
) -> PhotoDatasetReport:
    """Featurize a folder of photos into a dataset directory.

    Parameters
    ----------
    photos_dir : path-like
        Folder of JPEG / PNG / ... files (searched recursively).
    out_dir : path-like
        The dataset directory to write. An existing one must be empty or a photo
        dataset; it is replaced in one step once the new dataset is fully built
        (:func:`~jaxannot.data.atomic.atomic_folder`), so an error, Ctrl-C or a
        kill leaves it loading as before. Other files kept in it stay.
    tags : path-like or mapping, optional
        Tags CSV (see :func:`read_tags`) or ``{file: [tags]}``. Photos without an
        entry are unlabelled.
    settings : ExtractorSettings, optional
        Feature settings (defaults of :class:`ExtractorSettings`).
    extractor : PhotoExtractor, optional
        A fitted extractor (e.g. ``PhotoExtractor.load(other_dataset)``) to use as it
        is: no codebook is learned and ``settings`` must not be given, so the photos
        are featurized exactly like those of the extractor's dataset.
    test_fraction : float in [0, 1)
        Seeded random fraction of the labelled photos put in the ``test`` split.
    seed : int
        Seeds the split (the codebook uses ``settings.seed``).
    name : str, optional
        Dataset name (default: the name of ``out_dir``).
    progress : bool
        Show a progress bar over the photos.
    on_skip : callable(file, reason), optional
        Called for every file that is not a readable image (it is skipped);
        without it, each is logged as a warning (logger ``jaxannot.data.photos``).

    Returns
    -------
    PhotoDatasetReport
    """
    if extractor is not None:
        if settings is not None:
            raise ValueError("give settings or a fitted extractor, not both")
        settings = extractor.settings
    settings = settings or ExtractorSettings()
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test fraction must be in [0, 1), got {test_fraction}")
    photos_dir, out = pathlib.Path(photos_dir), pathlib.Path(out_dir)
    _check_output(out)  # the old dataset is replaced only once the new one is built
    files = list_photos(photos_dir, exclude=out)
    if isinstance(tags, Mapping):
        tag_rows = {_normalise(k): list(v) for k, v in tags.items()}
    else:
        rows = _tag_rows(tags) if tags is not None else []
        tag_rows = _keyed_tags(tags, rows, set(files))

    from tqdm.auto import tqdm

    log.info("featurizing %d file(s) under %s", len(files), photos_dir)
    colour, texture, desc, kept, skipped = [], [], [], [], []
    for f in tqdm(files, desc="photos", unit="photo", disable=not progress):
        try:
            _check_name(f)
            rgb = read_image(photos_dir / f, settings.size)
        except UnreadableImage as err:
            reason = err.reason
            f = printable(f)
            skipped.append((f, reason))
            if on_skip is None:
                log.warning("skipped %s: %s", f, reason)
            else:
                on_skip(f, reason)
            continue
        c, t, d = describe(rgb, settings)
        colour.append(c)
        texture.append(t)
        desc.append(d.astype(np.float16))  # halves the memory of large folders
        kept.append(f)
    if not kept:
        raise ValueError(
            f"{photos_dir}: no readable image among {len(files)} file(s)"
            + (f" ({len(skipped)} skipped)" if skipped else "")
        )

    if extractor is None:
        log.info("learning a %d-word codebook", settings.codebook_size)
        extractor = _fit_extractor(settings, desc)
    words = extractor.word_counts(desc)
    views = extractor.views(np.stack(colour), np.stack(texture), words)

    labelled = np.array([f in tag_rows for f in kept])
    splits = np.where(labelled, "train", "unlabelled").astype(object)
    n_test = int(round(test_fraction * labelled.sum()))
    if n_test:
        split_rng = np.random.default_rng(seed)
        splits[split_rng.permutation(np.flatnonzero(labelled))[:n_test]] = "test"
    vocabulary = sorted({t for f in kept if f in tag_rows for t in tag_rows[f]})
    unmatched = tuple(sorted(set(tag_rows) - set(kept) - {f for f, _ in skipped}))

    rows = [
        (f, s, " ".join(tag_rows.get(f, [])))
        for f, s in zip(kept, splits.tolist(), strict=True)
    ]
    manifest = {
        "format": _FORMAT,
        "version": _VERSION,
        "name": name or out.resolve().name,
        "views": VIEW_KINDS,
        "tags": vocabulary,
        "num_photos": len(kept),
        "test_fraction": test_fraction,
        "seed": seed,
        "skipped": [{"file": f, "reason": r} for f, r in skipped],
    }
    log.info("writing the dataset to %s", out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_folder(out) as building:  # swapped in whole, or not at all
        _write_dataset(building, extractor, views, rows, manifest)
    return PhotoDatasetReport(
        folder=out,
        files=tuple(kept),
        splits=tuple(splits.tolist()),
        tags=tuple(vocabulary),
        skipped=tuple(skipped),
        unmatched_tags=unmatched,
    )


def _fit_extractor(settings: ExtractorSettings, desc: list) -> PhotoExtractor:
    """Learn the codebook on a sample of ``desc`` and the colour/texture scale."""
    rng = np.random.default_rng(settings.seed)
    per_photo = max(1, -(-settings.max_descriptors // len(desc)))
    sample = np.concatenate(
        [d[rng.choice(len(d), min(len(d), per_photo), replace=False)] for d in desc]
    )
    codebook = fit_codebook(
        sample.astype(np.float32),
        settings.codebook_size,
        iterations=settings.kmeans_iterations,
        seed=settings.seed,
    )
    words = PhotoExtractor(settings, codebook).word_counts(desc)
    scale = float(np.median(np.linalg.norm(words, axis=1)))
    return PhotoExtractor(settings, codebook, scale)


def _check_output(out: pathlib.Path) -> None:
    """Refuse an ``out`` that is a file, or a folder of something else than a photo
    dataset (hidden entries aside); nothing is changed."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out}: exists and is not a folder")
    if out.is_dir() and not is_photo_dataset(out):
        if any(not p.name.startswith(".") for p in out.iterdir()):
            raise FileExistsError(
                f"{out}: not empty and not a photo dataset; choose a new --out folder"
            )


def _check_name(name: str) -> None:
    """A file name ``photos.csv`` can hold (UTF-8), else :class:`UnreadableImage`."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        reason = "file name is not valid UTF-8"
        raise UnreadableImage(f"{printable(name)}: {reason}", reason) from None


def _write_dataset(out, extractor, views, rows, manifest) -> None:
    extractor.save(out)
    write_archive(out / "features.npz", views)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(("file", "split", "tags"))
    writer.writerows(rows)
    table = buffer.getvalue().encode()
    atomic_write(out / "photos.csv", lambda fh: fh.write(table))
    text = (json.dumps(manifest, indent=2) + "\n").encode()
    atomic_write(out / MANIFEST, lambda fh: fh.write(text))


def read_manifest(folder: str | os.PathLike) -> dict:
    """The manifest ``photos.json`` of a photo dataset (``DataFormatError`` if bad)."""
    path = pathlib.Path(folder) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder}: no {MANIFEST}; not a photo dataset (write one with "
            f"`jaxannot features PHOTOS_DIR --out DIR`)"
        )
    manifest = read_json_object(path, "photo dataset manifest")
    if manifest.get("format") != _FORMAT or manifest.get("version") != _VERSION:
        raise DataFormatError(path, f"not a {_FORMAT} v{_VERSION} manifest")
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
    reader = csv.DictReader(io.StringIO(_read_text(path)))
    with _csv_errors(path, reader):
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


def load_photo_dir(folder: str | os.PathLike, name: str | None = None):
    """Load a photo dataset as ``(train, test)`` (see the module docstring).

    Raises
    ------
    FileNotFoundError
        A missing file of the dataset.
    DataFormatError
        Files that disagree (row counts, views, tags outside the vocabulary).
    """
    folder = pathlib.Path(folder)
    manifest = read_manifest(folder)
    rows = _read_table(folder)
    path = folder / "features.npz"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no features.npz")
    kinds = dict(manifest["views"])
    remedy = "build the dataset again with `jaxannot features`"
    arrays = read_archive(path, "photo features file", remedy=remedy).arrays
    missing = sorted(set(kinds) - set(arrays))
    if missing:
        raise DataFormatError(path, f"no array for view(s) {missing}; {remedy}")
    views = {v: arrays[v].astype(np.float32) for v in kinds}
    for v, x in views.items():
        if x.ndim != 2 or x.shape[0] != len(rows):
            raise DataFormatError(
                path, f"view {v!r} has shape {x.shape}, expected [{len(rows)}, dims]"
            )
    vocabulary = list(manifest["tags"])
    index = {t: j for j, t in enumerate(vocabulary)}
    splits = np.array([s for _, s, _ in rows])
    words = None
    if vocabulary:
        words = np.zeros((len(rows), len(vocabulary)), np.float32)
        for i, (f, _, tags) in enumerate(rows):
            unknown = [t for t in tags if t not in index]
            if unknown:
                raise DataFormatError(
                    folder / "photos.csv", f"{f}: tags {unknown} not in the manifest"
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
    paths,
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
