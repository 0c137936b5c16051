"""MAT-file v7.3 (HDF5): its variables read through h5py within the file's bound.

:func:`h5_declared_bytes` sums what the datasets declare (external links and
storage refused) before any is read; :class:`H5Walk` reads the variables, with
cell references dereferenced, sparse matrices rebuilt and char arrays as text
(:func:`_h5_text`), bounded in depth, in nodes visited and in bytes read.
"""

from __future__ import annotations

import math
from typing import Any

import h5py
import numpy as np
import scipy.sparse

from jaxannot.data.errors import DataFormatError
from jaxannot.data.mat_common import (
    MAX_DEPTH,
    MAX_NODES,
    cell_text,
    rows_text,
    too_big_error,
)


def h5_declared_bytes(f: h5py.File) -> int:
    """Bytes the datasets of an HDF5 file declare (their shapes times item sizes).

    Every link is looked at first: an external link (to another file), a dataset
    stored in external files or a virtual dataset is refused, since its bytes lie
    outside this file and outside its bound.

    Parameters
    ----------
    f : h5py.File
        The open v7.3 MAT-file.

    Returns
    -------
    int
        The declared bytes of all its datasets.

    Raises
    ------
    DataFormatError
        Some link or dataset keeps its data outside the file.
    """
    external: list[tuple[str, str]] = []
    elsewhere: list[str] = []
    total = 0

    def visit_link(name, link):  # raising inside h5py's visit garbles the error
        if isinstance(link, h5py.ExternalLink) and not external:
            external.append((name, link.filename))

    def visit(name, node):
        nonlocal total
        if isinstance(node, h5py.Dataset):
            if node.external or node.is_virtual:
                elsewhere.append(name)
            total += int(node.size) * node.dtype.itemsize

    f.visititems_links(visit_link)
    if external:
        name, target = external[0]
        raise DataFormatError(
            f.filename,
            f"{name} is an HDF5 external link to {target}: a MAT-file must hold "
            "its own data",
        )
    f.visititems(visit)
    if elsewhere:
        raise DataFormatError(
            f.filename,
            f"dataset {elsewhere[0]} is stored in other files (HDF5 external or "
            "virtual storage): a MAT-file must hold its own data",
        )
    return total


def _h5_attr(node: h5py.Dataset, name: str):
    """The attribute ``name`` of a v7.3 dataset, read only when it takes at most 64
    bytes (MATLAB's are a class name or a flag); ``None`` otherwise."""
    if name not in node.attrs or node.attrs.get_id(name).get_storage_size() > 64:
        return None
    value = node.attrs[name]
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


def _h5_text(codes: np.ndarray) -> str | list[str]:
    """A v7.3 char array (UTF-16 code units, MATLAB orientation) as text."""
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        raise ValueError(f"a char array of {codes.dtype} values")
    if codes.ndim < 2:  # MATLAB writes every array 2-D; a 1-D one is taken as a row
        codes = codes.reshape(1, -1)
    codes = codes.reshape(codes.shape[0], math.prod(codes.shape[1:]))
    rows = [row.astype("<u2").tobytes().decode("utf-16-le", "replace") for row in codes]
    return rows_text(rows)


class H5Walk:
    """The values of a v7.3 file's variables, bounded in depth
    (:data:`MAX_DEPTH`), in the number of groups, datasets and references visited
    (:data:`MAX_NODES`) and in the bytes read (``allowed``): hard links and
    reference arrays may point at one object many times over, so a file under 1 MB
    can fan out to 10^8 leaves within the depth limit."""

    def __init__(self, f: h5py.File, allowed: int) -> None:
        self.f = f
        self.allowed = allowed
        self.nodes = 0
        self.read = 0

    def _visit(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DataFormatError(
                self.f.filename,
                f"cell arrays nest more than {MAX_DEPTH} deep (a cycle?)",
            )
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise DataFormatError(
                self.f.filename,
                f"its groups and cell references fan out to more than {MAX_NODES} "
                "values (the same objects linked or referenced many times over?)",
            )

    def _count(self, nbytes: int) -> None:
        self.read += nbytes
        if self.read > self.allowed:
            raise too_big_error(self.f.filename, "the values it references", self.read)

    def value(self, node: h5py.Group | h5py.Dataset, depth: int) -> Any:
        """The value of ``node`` as the reader returns it, its bytes counted.

        Parameters
        ----------
        node : h5py.Group or h5py.Dataset
            A variable, a struct field or a referenced cell.
        depth : int
            How deep in cells and structs it is (0 for a variable).

        Returns
        -------
        Any
            A dict for a struct, a CSC matrix for a sparse array, text as
            ``str`` / lists of ``str``, cells as lists or object arrays, other
            arrays transposed to MATLAB's order.

        Raises
        ------
        DataFormatError
            Cells nest deeper than :data:`MAX_DEPTH`, over :data:`MAX_NODES` values
            are reached, or their bytes pass the bound.
        """
        self._visit(depth)
        if isinstance(node, h5py.Group):
            if {"data", "ir", "jc"} <= set(node.keys()):
                for key in ("data", "ir", "jc"):
                    self._count(int(node[key].size) * node[key].dtype.itemsize)
                n_rows = int(node.attrs["MATLAB_sparse"])
                jc = np.asarray(node["jc"], dtype=np.int64)
                return scipy.sparse.csc_matrix(
                    (np.asarray(node["data"]), np.asarray(node["ir"], np.int64), jc),
                    shape=(n_rows, len(jc) - 1),
                )
            return {k: self.value(node[k], depth + 1) for k in node.keys()}
        self._count(int(node.size) * node.dtype.itemsize)
        text = str(_h5_attr(node, "MATLAB_class")) == "char"
        if text and np.any(_h5_attr(node, "MATLAB_empty")):
            return ""  # an empty char array: its dataset holds its dimensions
        arr = node[()]
        if node.dtype == h5py.ref_dtype:
            out = np.empty(arr.shape, dtype=object)
            for idx in np.ndindex(arr.shape):
                out[idx] = self.value(self.f[arr[idx]], depth + 1)
            return cell_text(out.T)
        if text:
            return _h5_text(np.asarray(arr).T)
        return np.asarray(arr).T
