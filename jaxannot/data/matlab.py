"""Reading MATLAB ``.mat`` multi-view datasets (v5 with scipy, v7.3/HDF5 with h5py).

Multi-view clustering benchmarks are commonly packaged as a ``.mat`` file with a cell
array ``X`` of per-view matrices ``[images, dims]`` (dense or sparse) and a label
vector ``Y`` with classes ``1..k``. v7.3 files are HDF5 containers that store arrays
column-major, so every array read through h5py is transposed back to MATLAB's
``[rows, cols]`` orientation here (a ``(dim, n)`` dataset on disk is an ``n x dim``
MATLAB matrix).

References
----------
MathWorks, "MAT-File Versions" (v7.3 uses HDF5);
scipy.io.loadmat; h5py.
"""

from __future__ import annotations

import os

import h5py
import numpy as np
import scipy.io
import scipy.sparse

from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import DataFormatError

__all__ = ["read_mat", "is_mat_v73", "dense_view", "class_labels", "multiview_corpus"]


def is_mat_v73(path: str | os.PathLike) -> bool:
    """True when the file is a MATLAB v7.3 (HDF5) MAT-file."""
    return h5py.is_hdf5(os.fspath(path))


def read_mat(path: str | os.PathLike) -> dict:
    """Variables of a ``.mat`` file as numpy arrays / scipy sparse matrices.

    v5 files go through :func:`scipy.io.loadmat` (cell arrays become object arrays);
    v7.3 files through h5py, with every array transposed to MATLAB orientation, cell
    arrays (HDF5 object references) dereferenced into object arrays and sparse
    matrices (groups with ``data``/``ir``/``jc``) rebuilt as CSC matrices.

    Raises
    ------
    DataFormatError
        When the file is neither a readable v5 nor a v7.3 MAT-file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such MAT-file: {path}")
    if is_mat_v73(path):
        try:
            with h5py.File(path, "r") as f:
                return {
                    k: _h5_value(f, f[k]) for k in f.keys() if not k.startswith("#")
                }
        except Exception as e:  # h5py raises many types on corrupt input
            raise DataFormatError(path, f"unreadable v7.3 MAT-file ({e})") from None
    try:
        raw = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises many types (even IndexError) on bad input
        raise DataFormatError(
            path, f"unreadable MAT-file ({type(e).__name__}: {e})"
        ) from None
    return {k: v for k, v in raw.items() if not k.startswith("__")}


def _h5_value(f: h5py.File, node):
    if isinstance(node, h5py.Group):
        if {"data", "ir", "jc"} <= set(node.keys()):
            n_rows = int(node.attrs["MATLAB_sparse"])
            jc = np.asarray(node["jc"], dtype=np.int64)
            return scipy.sparse.csc_matrix(
                (np.asarray(node["data"]), np.asarray(node["ir"], np.int64), jc),
                shape=(n_rows, len(jc) - 1),
            )
        return {k: _h5_value(f, node[k]) for k in node.keys()}
    arr = node[()]
    if node.dtype == h5py.ref_dtype:
        out = np.empty(arr.shape, dtype=object)
        for idx in np.ndindex(arr.shape):
            out[idx] = _h5_value(f, f[arr[idx]])
        return out.T
    return np.asarray(arr).T


def dense_view(x, path: str, what: str) -> np.ndarray:
    """A (possibly sparse) 2-D matrix as dense float32, checked finite."""
    if scipy.sparse.issparse(x):
        x = x.toarray()
    x = np.asarray(x)
    if x.ndim != 2 or x.dtype.kind not in "biuf":
        raise DataFormatError(path, f"{what} is not a 2-D numeric matrix ({x.shape})")
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        r, c = np.argwhere(~np.isfinite(x))[0]
        raise DataFormatError(path, f"{what} has a NaN/inf value at row {r}, col {c}")
    return x


def class_labels(y, path: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class vector (any integer coding, e.g. ``1..k``) -> 0-based int32 and names.

    The names are ``"0" .. "k-1"`` (the files store no class names).
    """
    y = np.asarray(y.toarray() if scipy.sparse.issparse(y) else y).ravel()
    if y.dtype.kind not in "biuf":  # strings, cells, structs
        raise DataFormatError(path, f"class labels are {y.dtype} values, not integers")
    if y.size == 0 or not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
        raise DataFormatError(path, "class labels are not integers")
    values, inverse = np.unique(y, return_inverse=True)
    return inverse.astype(np.int32), tuple(str(i) for i in range(len(values)))


def multiview_corpus(
    path: str,
    views: dict[str, np.ndarray],
    view_kinds: dict[str, str],
    labels: np.ndarray,
    class_names: tuple[str, ...],
    name: str,
) -> Corpus:
    """A single-label multi-view corpus: ``labels`` and ``words`` = one-hot labels."""
    n = labels.shape[0]
    for k, v in views.items():
        if v.shape[0] != n:
            raise DataFormatError(path, f"view {k!r} has {v.shape[0]} rows, labels {n}")
    words = np.eye(len(class_names), dtype=np.float32)[labels]
    return Corpus.from_arrays(
        views,
        view_kinds=view_kinds,
        words=words,
        labels=labels,
        word_names=class_names,
        class_names=class_names,
        name=name,
    )
