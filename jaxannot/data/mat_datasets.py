"""Loaders of the named multi-view ``.mat`` datasets (mfeat, msrc, wikipedia, ...).

For :data:`~jaxannot.data.datasets.DATASETS`: mfeat (:func:`load_mfeat`), msrc,
3sources and bbcsport (:func:`cell_views_loader`) and wikipedia
(:func:`load_wikipedia`).

Each reads its file with :func:`~jaxannot.data.matlab.read_mat` and builds the corpus
with :func:`~jaxannot.data.matlab.multiview_corpus`: the views of the cell array
``X`` (or named variables) and the classes of ``Y``; a variable missing or of another
shape is a :class:`~jaxannot.data.errors.DataFormatError` naming the file.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import numpy as np
import scipy.sparse

from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import DataFormatError
from jaxannot.data.matlab import class_labels, dense_view, multiview_corpus, read_mat

__all__ = ["cell_views_loader", "load_mfeat", "load_wikipedia"]

Split = tuple[Corpus, Corpus | None]


def _variable(mat: dict, key: str, path: str):
    """The variable ``key`` of a MAT-file; DataFormatError listing the variables."""
    if key not in mat:
        raise DataFormatError(path, f"no variable {key!r}; variables: {sorted(mat)}")
    return mat[key]


def _cells(mat: dict, key: str, path: str) -> list:
    """The matrices of the cell array ``key``; DataFormatError when it is not a cell
    array of 2-D matrices."""
    value = _variable(mat, key, path)
    cells = list(np.asarray(value, dtype=object).ravel())
    if (
        not isinstance(value, np.ndarray)
        or value.dtype != object
        or not all(
            scipy.sparse.issparse(c) or (isinstance(c, np.ndarray) and c.ndim == 2)
            for c in cells
        )
    ):
        raise DataFormatError(
            path, f"{key} is not a cell array of 2-D matrices (one a view)"
        )
    return cells


def load_mfeat(folder: pathlib.Path, name: str) -> Split:
    """The UCI multiple-features digits (``handwritten.mat``): six views of 2000
    digits, matched to their names by their widths, and 10 classes."""
    path = str(folder / "handwritten.mat")
    mat = read_mat(path)
    by_dim = {76: "fou", 216: "fac", 64: "kar", 240: "pix", 47: "zer", 6: "mor"}
    found = {}
    for k, x in enumerate(_cells(mat, "X", path)):
        view = by_dim.get(x.shape[1])
        if view is None or view in found:
            raise DataFormatError(path, f"X{{{k + 1}}} has unexpected shape {x.shape}")
        found[view] = dense_view(x, path, f"X{{{k + 1}}}")
    if len(found) != 6:
        raise DataFormatError(path, f"expected 6 views, found {sorted(found)}")
    views = {v: found[v] for v in ("fou", "fac", "kar", "pix", "zer", "mor")}
    labels, classes = class_labels(_variable(mat, "Y", path), path)
    kinds = dict.fromkeys(views, "real")
    return multiview_corpus(path, views, kinds, labels, classes, name), None


def cell_views_loader(
    file: str, names: tuple[str, ...], kind: str, drop: int = 0
) -> Callable[[pathlib.Path, str], Split]:
    """A loader of the ``.mat`` file ``file`` whose cell array ``X`` holds the views
    ``names`` (of ``kind``) in order, then ``drop`` views left out, and ``Y`` the
    classes."""

    def load(folder: pathlib.Path, name: str) -> Split:
        path = str(folder / file)
        mat = read_mat(path)
        cells = _cells(mat, "X", path)
        if len(cells) != len(names) + drop:
            raise DataFormatError(
                path, f"X has {len(cells)} cells, expected {len(names) + drop}"
            )
        views = {
            v: dense_view(x, path, f"X{{{k + 1}}}")
            for k, (v, x) in enumerate(zip(names, cells[: len(names)], strict=True))
        }
        labels, classes = class_labels(_variable(mat, "Y", path), path)
        kinds = dict.fromkeys(views, kind)
        return multiview_corpus(path, views, kinds, labels, classes, name), None

    return load


def load_wikipedia(folder: pathlib.Path, name: str) -> Split:
    """The Wikipedia image-text dataset (``wiki_data.mat``, v7.3): image and text
    features, one-hot classes, its train/test split."""
    path = str(folder / "wiki_data.mat")
    mat = read_mat(path)  # v7.3: read_mat transposes to [images, dims]

    def part(suffix: str) -> Corpus:
        for key in ("I", "T", "L"):
            if f"{key}_{suffix}" not in mat:
                raise DataFormatError(
                    path, f"no variable {key}_{suffix}: {sorted(mat)}"
                )
        image = dense_view(_variable(mat, f"I_{suffix}", path), path, f"I_{suffix}")
        text = dense_view(_variable(mat, f"T_{suffix}", path), path, f"T_{suffix}")
        onehot = dense_view(_variable(mat, f"L_{suffix}", path), path, f"L_{suffix}")
        if not (np.isin(onehot, (0.0, 1.0)).all() and (onehot.sum(1) == 1).all()):
            raise DataFormatError(path, f"L_{suffix} is not one-hot per row")
        labels = onehot.argmax(1).astype(np.int32)
        classes = tuple(str(i) for i in range(onehot.shape[1]))
        views = {"image": image, "text": text}
        kinds = {"image": "real", "text": "real"}
        return multiview_corpus(path, views, kinds, labels, classes, name)

    return part("tr"), part("te")
