"""Build a photo dataset from a folder of photos (``jaxannot features``).

:func:`build_photo_dataset` lists the photos (:func:`~jaxannot.data.photo_tags.
list_photos`), matches them to their tags (:func:`~jaxannot.data.photo_tags.
tags_by_file`), featurizes them (:mod:`jaxannot.data.image_features`; the codebook is
learned unless a fitted :class:`~jaxannot.data.photo_extractor.PhotoExtractor` is
given), splits the labelled ones into train and test, and writes the folder described
in :mod:`jaxannot.data.photos` in one step
(:func:`~jaxannot.data.atomic.atomic_folder`): a failed or killed build leaves the
folder as it was.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
import pathlib
from collections.abc import Callable, Mapping

import numpy as np

from jaxannot.data.archive import write_archive
from jaxannot.data.atomic import atomic_folder, atomic_write
from jaxannot.data.errors import printable
from jaxannot.data.extractor_settings import ExtractorSettings
from jaxannot.data.image_features import (
    VIEW_KINDS,
    UnreadableImage,
    describe,
    fit_codebook,
    read_image,
)
from jaxannot.data.photo_extractor import PhotoExtractor
from jaxannot.data.photo_tags import list_photos, tags_by_file
from jaxannot.data.photos import (
    MANIFEST,
    PHOTOS_FORMAT,
    PHOTOS_VERSION,
    is_photo_dataset,
)

__all__ = ["PhotoDatasetReport", "build_photo_dataset"]

log = logging.getLogger("jaxannot.data.photos")  # the photo datasets' one logger


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
    tag_rows = tags_by_file(tags, files)
    log.info("featurizing %d file(s) under %s", len(files), photos_dir)
    colour, texture, desc, kept, skipped = _featurize(
        photos_dir, files, settings, progress, on_skip
    )
    if extractor is None:
        log.info("learning a %d-word codebook", settings.codebook_size)
        extractor = _fit_extractor(settings, desc)
    words = extractor.word_counts(desc)
    views = extractor.views(np.stack(colour), np.stack(texture), words)

    splits = _splits([f in tag_rows for f in kept], test_fraction, seed)
    vocabulary = sorted({t for f in kept if f in tag_rows for t in tag_rows[f]})
    unmatched = tuple(sorted(set(tag_rows) - set(kept) - {f for f, _ in skipped}))
    rows = [
        (f, s, " ".join(tag_rows.get(f, [])))
        for f, s in zip(kept, splits.tolist(), strict=True)
    ]
    name = name or out.resolve().name
    manifest = _manifest(name, vocabulary, len(kept), test_fraction, seed, skipped)
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


def _featurize(photos_dir: pathlib.Path, files, settings, progress: bool, on_skip):
    """``(colour, texture, descriptors, kept, skipped)`` of the readable ``files``
    (:func:`~jaxannot.data.image_features.describe`); each file that is not a
    readable image goes to ``on_skip(file, reason)``, or else to a warning.
    ``ValueError`` when no file is readable."""
    from tqdm.auto import tqdm

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
    return colour, texture, desc, kept, skipped


def _manifest(name, vocabulary, num_photos, test_fraction, seed, skipped) -> dict:
    """The content of ``photos.json`` (:mod:`jaxannot.data.photos`)."""
    return {
        "format": PHOTOS_FORMAT,
        "version": PHOTOS_VERSION,
        "name": name,
        "views": VIEW_KINDS,
        "tags": vocabulary,
        "num_photos": num_photos,
        "test_fraction": test_fraction,
        "seed": seed,
        "skipped": [{"file": f, "reason": r} for f, r in skipped],
    }


def _splits(labelled: list[bool], test_fraction: float, seed: int) -> np.ndarray:
    """``train`` / ``test`` / ``unlabelled`` of each photo: a seeded random
    ``test_fraction`` of the labelled photos is ``test``."""
    labelled = np.array(labelled, dtype=bool)
    splits = np.where(labelled, "train", "unlabelled").astype(object)
    n_test = int(round(test_fraction * labelled.sum()))
    if n_test:
        split_rng = np.random.default_rng(seed)
        splits[split_rng.permutation(np.flatnonzero(labelled))[:n_test]] = "test"
    return splits


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
