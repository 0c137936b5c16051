"""Named datasets under a data root, and :func:`load_dataset`.

The data root is the ``data_dir`` argument, else the environment variable
``JAXANNOT_DATA``. Each named dataset lives in a folder of the root (see
``DATASETS``); :func:`load_dataset` also accepts the path of any Mulan directory
(``<stem>.xml`` + ``<stem>-train[-sparse].arff`` [+ ``<stem>-test[-sparse].arff``]).
Nothing is cached on disk.

What each loader produces:

=========  =====================================================  ==========  =========
name       views (kind)                                           words       split
=========  =====================================================  ==========  =========
corel5k    blobs [499] (bag)                                      374 words   4500/500
scene      features [294] (real)                                  6 labels    1211/1196
yeast      features [103] (real)                                  14 labels   1500/917
emotions   features [72] (real)                                   6 labels    391/202
enron      features [1001] (binary)                               53 tags     1123/579
bibtex     features [1836] (binary)                               159 tags    4880/2515
delicious  features [500] (binary)                                983 tags    12920/3185
mfeat      fou 76, fac 216, kar 64, pix 240, zer 47, mor 6 (real) 10 classes  none
msrc       cent 1302, cmt 48, gist 512, hog 100, lbp 256 (real)   7 classes   none
3sources   source1 3560, source2 3631, source3 3068 (bag)         6 classes   none
bbcsport   segment1 3183, segment2 3203 (real)                    5 classes   none
wikipedia  image 128, text 10 (real)                              10 classes  2173/693
=========  =====================================================  ==========  =========

For the single-label class datasets ``labels`` holds the 0-based class and ``words``
its one-hot indicator (class names ``"0".."k-1"``; the files store none).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import time
from collections.abc import Callable

from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import check_link_loop
from jaxannot.data.mat_datasets import cell_views_loader, load_mfeat, load_wikipedia
from jaxannot.data.mulan import load_mulan_dir

__all__ = ["DATASETS", "DatasetSpec", "data_root", "load_dataset", "list_datasets"]

ENV_VAR = "JAXANNOT_DATA"

Split = tuple[Corpus, Corpus | None]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Where a named dataset lives and how to read it.

    Attributes
    ----------
    folder : str
        Folder under the data root.
    files : tuple of str
        Files that must exist in the folder (for :func:`list_datasets`).
    loader : callable
        ``loader(folder_path, name) -> (train, test or None)``.
    summary : str
        One line for listings.
    """

    folder: str
    files: tuple[str, ...]
    loader: Callable[[pathlib.Path, str], Split]
    summary: str


def _mulan(
    stem: str,
    kind: str,
    summary: str,
    *,
    folder: str | None = None,
    view: str = "features",
    sparse: bool = False,
) -> DatasetSpec:
    """The spec of a Mulan dataset: ``<stem>.xml`` and ``<stem>-{train,test}.arff``
    (``-sparse.arff`` when ``sparse``) in ``folder`` (default ``stem``)."""
    suffix = "-sparse" if sparse else ""
    files = (f"{stem}.xml", f"{stem}-train{suffix}.arff", f"{stem}-test{suffix}.arff")

    def load(path: pathlib.Path, name: str) -> Split:
        return load_mulan_dir(
            path, stem=stem, name=name, view_name=view, feature_kind=kind
        )

    return DatasetSpec(folder or stem, files, load, summary)


DATASETS: dict[str, DatasetSpec] = {
    "corel5k": _mulan(
        "Corel5k",
        "bag",
        "Corel5k images: 499 blob tokens (bag), 374 words; 4500/500",
        folder="corel5k",
        view="blobs",
        sparse=True,
    ),
    "scene": _mulan(
        "scene", "real", "scene images: 294 colour moments, 6 concepts; 1211/1196"
    ),
    "yeast": _mulan(
        "yeast", "real", "yeast genes: 103 features, 14 functional classes; 1500/917"
    ),
    "emotions": _mulan(
        "emotions", "real", "music clips: 72 audio features, 6 emotions; 391/202"
    ),
    "enron": _mulan(
        "enron", "binary", "Enron e-mails: 1001 binary words, 53 categories; 1123/579"
    ),
    "bibtex": _mulan(
        "bibtex", "binary", "BibTeX entries: 1836 binary words, 159 tags; 4880/2515"
    ),
    "delicious": _mulan(
        "delicious",
        "binary",
        "del.icio.us pages: 500 binary words, 983 tags; 12920/3185",
    ),
    "mfeat": DatasetSpec(
        "mfeat-handwritten",
        ("handwritten.mat",),
        load_mfeat,
        "UCI handwritten digits: 6 real views, 10 classes; 2000, no split",
    ),
    "msrc": DatasetSpec(
        "msrc-v1",
        ("MSRCV1.mat",),
        cell_views_loader(
            "MSRCV1.mat", ("cent", "cmt", "gist", "hog", "lbp"), "real", 1
        ),
        "MSRC-v1 objects: 5 real views, 7 classes; 210, no split",
    ),
    "3sources": DatasetSpec(
        "3sources",
        ("3-sources.mat",),
        cell_views_loader("3-sources.mat", ("source1", "source2", "source3"), "bag"),
        "3sources news: 3 term-count views (bag), 6 classes; 169, no split",
    ),
    "bbcsport": DatasetSpec(
        "bbcsport",
        ("BBCSport.mat",),
        cell_views_loader("BBCSport.mat", ("segment1", "segment2"), "real"),
        "BBCSport news: 2 weighted-term views (real), 5 classes; 544, no split",
    ),
    "wikipedia": DatasetSpec(
        "wikipedia-xmodal",
        ("wiki_data.mat",),
        load_wikipedia,
        "Wikipedia image+text: SIFT-BoW 128 + LDA 10 (real), 10 classes; 2173/693",
    ),
}


def data_root(data_dir: str | os.PathLike | None = None) -> pathlib.Path:
    """The data root: ``data_dir``, else ``$JAXANNOT_DATA``.

    Raises
    ------
    FileNotFoundError
        When neither is set, or the folder does not exist; the message says how to set
        it.
    """
    source = "data_dir"
    if data_dir is None:
        data_dir, source = os.environ.get(ENV_VAR), f"${ENV_VAR}"
    if not data_dir:
        raise FileNotFoundError(
            f"no data root: pass --data-dir DIR (data_dir=...) or set the environment "
            f"variable {ENV_VAR}=DIR to the folder holding the dataset folders "
            f"({', '.join(sorted({s.folder for s in DATASETS.values()}))})"
        )
    root = pathlib.Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"data root {root} (from {source}) is not a directory; pass --data-dir DIR "
            f"or set {ENV_VAR}=DIR"
        )
    return root


def load_dataset(
    name_or_dir: str | os.PathLike, data_dir: str | os.PathLike | None = None
) -> Split:
    """Load a named dataset or a Mulan directory as ``(train, test)``.

    Parameters
    ----------
    name_or_dir : str or path-like
        A key of ``DATASETS`` (case-insensitive), the path of a Mulan directory, or
        the path of a photo dataset directory (``jaxannot features``; see
        :mod:`jaxannot.data.photos`). A name that is also a folder in the
        working directory is an error (write ``./name`` for the folder), unless it
        is the named dataset's own folder under the data root. A path-like object
        (not a ``str``) is always a path.
    data_dir : path-like, optional
        Data root for named datasets (default ``$JAXANNOT_DATA``).

    Returns
    -------
    train : Corpus
    test : Corpus or None
        None for datasets without a train/test split.

    Raises
    ------
    KeyError
        Unknown name (the message lists the valid names).
    ValueError
        A bare name that is both a named dataset and a folder here.
    FileNotFoundError
        Missing data root or dataset folder / files.
    DataFormatError
        Malformed files.

    Notes
    -----
    Logs (INFO, logger ``jaxannot.data.datasets``) the dataset loaded, its sizes and
    the seconds taken.
    """
    key = os.fspath(name_or_dir)
    log.info("loading dataset %s", key)
    start = time.perf_counter()
    train, test = _load(key, data_dir, path=not isinstance(name_or_dir, str))
    log.info(
        "loaded %s: %d training, %s test images, %d words (%.1f s)",
        train.name,
        train.num_images,
        "no" if test is None else test.num_images,
        train.num_words,
        time.perf_counter() - start,
    )
    return train, test


def _load(key: str, data_dir: str | os.PathLike | None, path: bool) -> Split:
    """:func:`load_dataset` without the log lines (``path``: never a name)."""
    spec = None if path else _named(key, data_dir)
    if spec is None:
        folder = pathlib.Path(key).expanduser()
        check_link_loop(folder)
        if folder.is_dir():
            from jaxannot.data.photos import is_photo_dataset, load_photo_dir

            if is_photo_dataset(folder):  # written by `jaxannot features`
                return load_photo_dir(folder)
            return load_mulan_dir(folder)
        raise KeyError(
            f"unknown dataset {key!r}; valid names: {sorted(DATASETS)} "
            f"(or the path of a Mulan directory or a photo dataset directory)"
        )
    folder = data_root(data_dir) / spec.folder
    missing = [f for f in spec.files if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"dataset {key.lower()!r}: missing {missing} in {folder}"
        )
    return spec.loader(folder, key.lower())


def _named(key: str, data_dir: str | os.PathLike | None) -> DatasetSpec | None:
    """The named dataset ``key`` means, or None for a path.

    A key written as a path (with a folder separator, or starting with ``.`` or
    ``~``) is a path. A bare name of ``DATASETS`` that is also a folder here is
    ambiguous, unless that folder is the named dataset's own folder.

    Raises
    ------
    ValueError
        The ambiguous case; the message says how to write either meaning.
    """
    spec = DATASETS.get(key.lower())
    path_like = key.startswith((".", "~")) or any(
        sep and sep in key for sep in (os.sep, os.altsep)
    )
    if spec is None or path_like:
        return None
    here = pathlib.Path(key)
    if here.is_dir():
        try:
            own = data_root(data_dir) / spec.folder
        except FileNotFoundError:
            own = None
        if own is None or not (own.exists() and here.samefile(own)):
            named = "" if own is None else f", or {own} for the named dataset"
            raise ValueError(
                f"dataset {key!r} is ambiguous: both a named dataset and the folder "
                f"{here.resolve()}; write ./{key} for this folder{named}"
            )
    return spec


def list_datasets(data_dir: str | os.PathLike | None = None) -> list:
    """``[(name, present, summary)]`` for every named dataset.

    ``present`` is False for all when no data root is configured.
    """
    try:
        root = data_root(data_dir)
    except FileNotFoundError:
        root = None
    out = []
    for name, spec in DATASETS.items():
        present = root is not None and all(
            (root / spec.folder / f).is_file() for f in spec.files
        )
        out.append((name, present, spec.summary))
    return out
