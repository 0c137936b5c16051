"""Reading MATLAB ``.mat`` multi-view datasets (v5 with scipy, v7.3/HDF5 with h5py).

Multi-view clustering benchmarks are commonly packaged as a ``.mat`` file with a cell
array ``X`` of per-view matrices ``[images, dims]`` (dense or sparse) and a label
vector ``Y`` with classes ``1..k``. v7.3 files are HDF5 containers that store arrays
column-major, so every array read through h5py is transposed back to MATLAB's
``[rows, cols]`` orientation here (a ``(dim, n)`` dataset on disk is an ``n x dim``
MATLAB matrix).

Every size a file declares is bounded before it is allocated, as for model archives
(:func:`jaxannot.data.archive.allowed_bytes`: 200 times the file's size, at least 64
MiB, at most 16 GiB): the shape every v5 variable declares (read from its header by
:func:`scipy.io.whosmat`) is checked before scipy reads any, and so is the shape
every cell and struct field nested in one declares (a walk of the element headers,
at most :data:`MAX_NODES` arrays nested at most :data:`MAX_DEPTH` deep); the
compressed elements of a v5 file are inflated in bounded chunks (the file read a
chunk at a time) and counted first; the datasets of a v7.3 file are summed from
their declared shapes before h5py reads one; a sparse matrix is densified only when
its dense size fits the same bound, and so is the one-hot class matrix
(``images x classes``); cell references nest at most :data:`MAX_DEPTH` deep (a
reference cycle is refused, not followed) and the groups, datasets and references
the walk reaches, each counted as often as it is reached, are at most
:data:`MAX_NODES` and read at most the bound's bytes in all; HDF5 external links,
external and virtual storage are refused (their bytes lie in other files). Values
are cast to float32 only when they fit (:func:`~jaxannot.data.bounded.as_float32`).

Text reads the same from both versions: a ``1 x n`` char array is a Python ``str``,
an ``m x n`` one the list of its ``m`` rows, and a cell array of strings (cellstr) a
list of ``str`` (a list of rows of them for a matrix of cells). v7.3 stores char
arrays as ``uint16`` UTF-16 code units with the attribute ``MATLAB_class = 'char'``
(transposed like every array) and cell arrays as references; v5 char arrays come
from scipy as arrays of strings.

The v5 bounds are in :mod:`jaxannot.data.mat_v5` (its element streams in
:mod:`jaxannot.data.mat_v5_streams`), the v7.3 reader in
:mod:`jaxannot.data.mat_v73`, what both share in :mod:`jaxannot.data.mat_common`.

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

from jaxannot.data.bounded import (
    allowed_bytes,
    as_float32,
    check_dense,
    open_regular,
)
from jaxannot.data.corpus import Corpus
from jaxannot.data.errors import DataFormatError
from jaxannot.data.mat_common import (
    MAX_DEPTH,
    MAX_NODES,
    too_big_error,
    unreadable_error,
)
from jaxannot.data.mat_v5 import (
    V5Walk,
    check_v5_declared,
    v5_inflated_bytes,
    v5_text,
)
from jaxannot.data.mat_v73 import H5Walk, h5_declared_bytes

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "read_mat",
    "is_mat_v73",
    "dense_view",
    "class_labels",
    "multiview_corpus",
]


def is_mat_v73(path: str | os.PathLike) -> bool:
    """True when the file is a MATLAB v7.3 (HDF5) MAT-file."""
    return h5py.is_hdf5(os.fspath(path))


def read_mat(path: str | os.PathLike) -> dict:
    """Variables of a ``.mat`` file as numpy arrays / scipy sparse matrices.

    v5 files go through :func:`scipy.io.loadmat` (cell arrays become object arrays),
    once the shape every variable declares fits the file's bound; v7.3 files through
    h5py, with every array transposed to MATLAB orientation, cell arrays (HDF5 object
    references) dereferenced into object arrays and sparse matrices (groups with
    ``data``/``ir``/``jc``) rebuilt as CSC matrices. In both, char arrays become
    ``str`` (a list of rows for several rows) and cell arrays of strings lists of
    ``str``.

    Raises
    ------
    DataFormatError
        When the file is neither a readable v5 nor a v7.3 MAT-file.
    """
    path = os.fspath(path)
    fh, size = open_regular(path, "MAT-file")  # a named pipe: refused, not waited on
    fh.close()
    allowed = allowed_bytes(size)
    if is_mat_v73(path):
        try:
            with h5py.File(path, "r") as f:
                declared = h5_declared_bytes(f)
                if declared <= allowed:
                    walk = H5Walk(f, allowed)
                    names = [k for k in f.keys() if not k.startswith("#")]
                    return {k: walk.value(f[k], 0) for k in names}
        except DataFormatError:
            raise
        except Exception as e:  # h5py raises many types on corrupt input
            raise DataFormatError(path, f"unreadable v7.3 MAT-file ({e})") from None
        raise too_big_error(path, "its datasets", declared)
    inflated = v5_inflated_bytes(path, allowed)
    if inflated > allowed:
        raise too_big_error(path, "its compressed variables", inflated)
    check_v5_declared(path, size, allowed)
    V5Walk(path, size, allowed).run()
    try:
        raw = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises many types (even IndexError) on bad input
        raise unreadable_error(path, e) from None
    return {k: v5_text(v) for k, v in raw.items() if not k.startswith("__")}


def _densify(x, path: str, what: str) -> np.ndarray:
    """``x`` as a dense array; a sparse ``x`` only when its dense size fits the bound
    of the file it came from."""
    if scipy.sparse.issparse(x):
        size = int(np.prod(x.shape, dtype=np.float64)) * 4
        if size > allowed_bytes(_file_size(path)):
            raise too_big_error(
                path, f"{what} (a sparse {x.shape[0]} x {x.shape[1]})", size
            )
        x = x.toarray()
    return np.asarray(x)


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def dense_view(
    x: np.ndarray | scipy.sparse.spmatrix, path: str, what: str
) -> np.ndarray:
    """A (possibly sparse) 2-D matrix as dense float32, checked finite."""
    x = _densify(x, path, what)
    if x.ndim != 2 or x.dtype.kind not in "biuf":
        raise DataFormatError(path, f"{what} is not a 2-D numeric matrix ({x.shape})")
    return as_float32(x, path, what)


def class_labels(y: np.ndarray, path: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class vector (any integer coding, e.g. ``1..k``) -> 0-based int32 and names.

    The names are ``"0" .. "k-1"`` (the files store no class names).
    """
    y = _densify(y, path, "the class labels").ravel()
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
    check_dense(path, n, len(class_names), 4, "its one-hot class matrix")
    words = np.zeros((n, len(class_names)), dtype=np.float32)
    words[np.arange(n), labels] = 1.0
    return Corpus.from_arrays(
        views,
        view_kinds=view_kinds,
        words=words,
        labels=labels,
        word_names=class_names,
        class_names=class_names,
        name=name,
    )
