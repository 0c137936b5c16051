"""MATLAB readers: v5 (scipy) and v7.3 (h5py, transposed), and the multi-view files."""

import h5py
import numpy as np
import pytest
import scipy.io
import scipy.sparse

from jaxannot.data.datasets import load_dataset
from jaxannot.data.errors import DataFormatError
from jaxannot.data.matlab import class_labels, dense_view, is_mat_v73, read_mat


def test_v5_cells_and_sparse_roundtrip(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 3))
    b = scipy.sparse.random(4, 5, density=0.3, random_state=0, format="csc")
    cells = np.empty((1, 2), dtype=object)
    cells[0, 0], cells[0, 1] = a, b
    scipy.io.savemat(
        tmp_path / "m.mat", {"X": cells, "Y": np.array([[2], [1], [2], [3]])}
    )
    assert not is_mat_v73(tmp_path / "m.mat")
    mat = read_mat(tmp_path / "m.mat")
    x = mat["X"].ravel()
    np.testing.assert_allclose(x[0], a)
    np.testing.assert_allclose(x[1].toarray(), b.toarray())
    labels, names = class_labels(mat["Y"], "m.mat")
    assert labels.tolist() == [1, 0, 1, 2] and names == ("0", "1", "2")


def test_v73_arrays_are_transposed(tmp_path):
    """An HDF5 dataset stored (dims, n) column-major is the MATLAB n x dims matrix."""
    m = np.arange(12.0).reshape(3, 4)  # MATLAB-side 3 x 4
    s = scipy.sparse.random(5, 3, density=0.4, random_state=1, format="csc")
    with h5py.File(tmp_path / "v73.mat", "w", userblock_size=512) as f:
        f["M"] = m.T  # what MATLAB writes: column-major = the transpose in C order
        g = f.create_group("S")
        g.attrs["MATLAB_sparse"] = np.uint64(5)
        g["data"], g["ir"], g["jc"] = s.data, s.indices.astype(np.uint64), s.indptr
        ref = f.create_dataset("cell_item", data=m.T)
        f.create_dataset("C", data=np.array([[ref.ref]], dtype=h5py.ref_dtype))
    assert is_mat_v73(tmp_path / "v73.mat")
    mat = read_mat(tmp_path / "v73.mat")
    np.testing.assert_array_equal(mat["M"], m)
    np.testing.assert_allclose(mat["S"].toarray(), s.toarray())
    np.testing.assert_array_equal(mat["C"][0, 0], m)


def test_non_finite_view_names_file(tmp_path, monkeypatch):
    x = np.ones((3, 2))
    x[1, 1] = np.nan
    cells = np.empty((1, 2), dtype=object)
    cells[0, 0], cells[0, 1] = x, x
    folder = tmp_path / "bbcsport"
    folder.mkdir()
    scipy.io.savemat(folder / "BBCSport.mat", {"X": cells, "Y": np.array([1, 2, 1])})
    with pytest.raises(DataFormatError, match=r"BBCSport\.mat: X\{1\} has a NaN/inf"):
        load_dataset("bbcsport", tmp_path)


def _two_views():
    cells = np.empty((1, 2), dtype=object)
    cells[0, 0], cells[0, 1] = np.ones((3, 2)), np.ones((3, 4))
    return cells


@pytest.mark.parametrize(
    "variables, expected",
    [
        ({"X": _two_views()}, r"no variable 'Y'; variables: \['X'\]"),
        ({"Y": np.array([1, 2, 1])}, r"no variable 'X'"),
        ({"X": np.ones((3, 2)), "Y": np.array([1, 2, 1])}, "X is not a cell array"),
        (
            {"X": _two_views(), "Y": np.array(["a", "b", "a"])},
            "class labels are <U1 values",
        ),
        ({"X": _two_views(), "Y": _two_views()}, "class labels are object values"),
    ],
)
def test_malformed_variables_name_the_file(tmp_path, variables, expected):
    folder = tmp_path / "bbcsport"
    folder.mkdir()
    scipy.io.savemat(folder / "BBCSport.mat", variables)
    with pytest.raises(DataFormatError, match=r"BBCSport\.mat: " + expected):
        load_dataset("bbcsport", tmp_path)


def test_a_view_of_strings_names_the_file(tmp_path):
    with pytest.raises(DataFormatError, match=r"f\.mat: X\{1\} is not a 2-D numeric"):
        dense_view(np.array([["a", "b"]]), "f.mat", "X{1}")


def test_unreadable_mat(tmp_path):
    (tmp_path / "bad.mat").write_bytes(b"MATLAB 5.0 MAT-file" + b"\x00" * 50)
    with pytest.raises(DataFormatError, match=r"bad\.mat: unreadable MAT-file"):
        read_mat(tmp_path / "bad.mat")


def test_wikipedia_v73(data_root):
    path = data_root / "wikipedia-xmodal" / "wiki_data.mat"
    assert is_mat_v73(path)
    train, test = load_dataset("wikipedia", data_root)
    with h5py.File(path, "r") as f:  # independent read: on-disk (dims, n)
        assert f["I_tr"].shape == (128, 2173)
        np.testing.assert_allclose(train.views["image"], f["I_tr"][()].T, rtol=1e-6)
        np.testing.assert_array_equal(train.labels, f["L_tr"][()].argmax(0))
    assert train.views["text"].shape == (2173, 10) and test.num_images == 693
    # SOURCE.md: image rows are L1-normalised histograms, text rows LDA proportions
    np.testing.assert_allclose(train.views["image"].sum(1), 1.0, atol=1e-4)
    np.testing.assert_allclose(test.views["text"].sum(1), 1.0, atol=1e-4)
    counts = np.bincount(train.labels, minlength=10).tolist()
    assert counts == [138, 272, 244, 248, 202, 178, 186, 144, 214, 347]
    assert np.bincount(test.labels).tolist() == [
        34,
        88,
        96,
        85,
        65,
        58,
        51,
        41,
        71,
        104,
    ]
    np.testing.assert_array_equal(train.words, np.eye(10)[train.labels])


@pytest.mark.parametrize(
    "name, dims, kind, counts",
    [
        (
            "mfeat",
            {"fou": 76, "fac": 216, "kar": 64, "pix": 240, "zer": 47, "mor": 6},
            "real",
            [200] * 10,
        ),
        (
            "msrc",
            {"cent": 1302, "cmt": 48, "gist": 512, "hog": 100, "lbp": 256},
            "real",
            [30] * 7,
        ),
        (
            "3sources",
            {"source1": 3560, "source2": 3631, "source3": 3068},
            "bag",
            [56, 21, 11, 18, 51, 12],
        ),
        (
            "bbcsport",
            {"segment1": 3183, "segment2": 3203},
            "real",
            [62, 104, 193, 124, 61],
        ),
    ],
)
def test_v5_multiview_datasets(data_root, name, dims, kind, counts):
    corpus, test = load_dataset(name, data_root)
    assert test is None
    assert {k: v.shape[1] for k, v in corpus.views.items()} == dims
    assert list(corpus.views) == list(dims)
    assert all(v.dtype == np.float32 for v in corpus.views.values())
    assert set(corpus.view_kinds.values()) == {kind}
    assert corpus.labels.dtype == np.int32
    assert np.bincount(corpus.labels).tolist() == counts  # SOURCE.md class counts
    assert corpus.class_names == tuple(str(i) for i in range(len(counts)))
    np.testing.assert_array_equal(corpus.words.argmax(1), corpus.labels)
    np.testing.assert_array_equal(corpus.words.sum(1), 1.0)


def test_mfeat_views_identified_by_dimension(data_root):
    corpus, _ = load_dataset("mfeat", data_root)
    raw = scipy.io.loadmat(data_root / "mfeat-handwritten" / "handwritten.mat")
    x = raw["X"].ravel()
    np.testing.assert_array_equal(corpus.views["pix"], x[0])  # SOURCE.md: X{1} = pix
    np.testing.assert_allclose(corpus.views["fou"], x[1].astype(np.float32))
    assert corpus.views["pix"].max() == 6  # pix values 0..6


def test_sparse_views_densified(data_root):
    corpus, _ = load_dataset("3sources", data_root)
    raw = scipy.io.loadmat(data_root / "3sources" / "3-sources.mat")
    x0 = raw["X"].ravel()[0]
    assert scipy.sparse.issparse(x0)
    np.testing.assert_array_equal(corpus.views["source1"], x0.toarray())
    # SOURCE.md: mean 144.7 non-zero terms per doc in X{1}
    assert (corpus.views["source1"] > 0).sum(1).mean() == pytest.approx(144.7, abs=0.05)


# -------------------------------------------------------------- declared sizes bounded
@pytest.fixture
def small_allowance(monkeypatch):
    """Bounds of 1 MiB so that the tests below stay small (the real floor is 64 MiB)."""
    from jaxannot.data import bounded

    monkeypatch.setattr(bounded, "MIN_ALLOWANCE", 2**20)


def test_v5_compressed_bomb_refused_before_scipy_reads_it(tmp_path, small_allowance):
    path = tmp_path / "bomb.mat"
    scipy.io.savemat(path, {"X": np.zeros((1024, 1024))}, do_compression=True)
    assert path.stat().st_size < 20_000  # 8 MiB of zeros in a few KiB
    with pytest.raises(DataFormatError, match=r"bomb\.mat: .*compressed variables.*"):
        read_mat(path)


def test_v5_compressed_file_within_the_bound_reads(tmp_path, small_allowance):
    path = tmp_path / "ok.mat"
    x = np.random.default_rng(0).normal(size=(100, 50))
    scipy.io.savemat(path, {"X": x}, do_compression=True)
    np.testing.assert_allclose(read_mat(path)["X"], x)


def test_v73_declared_dataset_sizes_refused_before_reading(tmp_path, small_allowance):
    path = tmp_path / "bomb73.mat"
    with h5py.File(path, "w", userblock_size=512) as f:
        # declared 16 MiB, never written: the file stays tiny
        f.create_dataset("X", shape=(2048, 2048), dtype="f4", compression="gzip")
    assert path.stat().st_size < 100_000
    with pytest.raises(DataFormatError, match=r"bomb73\.mat: .*its datasets"):
        read_mat(path)


def test_v73_reference_cycle_refused(tmp_path):
    path = tmp_path / "cycle.mat"
    with h5py.File(path, "w", userblock_size=512) as f:
        ds = f.create_dataset("C", shape=(1,), dtype=h5py.ref_dtype)
        ds[0] = ds.ref  # a cell that holds itself
    with pytest.raises(DataFormatError, match=r"cycle\.mat: .*nest more than"):
        read_mat(path)


def test_sparse_view_too_large_to_densify_refused(tmp_path, small_allowance):
    path = tmp_path / "wide.mat"
    # 16 MB dense, a few bytes sparse
    x = scipy.sparse.csc_matrix(([1.0], ([0], [0])), shape=(10**6, 4))
    scipy.io.savemat(path, {"X": x})
    mat = read_mat(path)
    with pytest.raises(DataFormatError, match=r"wide\.mat: .*a sparse 1000000 x 4"):
        dense_view(mat["X"], str(path), "X{1}")
    with pytest.raises(DataFormatError, match=r"wide\.mat: .*class labels"):
        class_labels(mat["X"], str(path))


# ------------------------------------------------------------------------- text
_TEXT = {
    "s": "abc",
    "u": "héllo €",
    "e": "",
    "m": ["abc", "de "],  # a 2 x 3 char matrix: its rows
    "y": ["a", "b", "a"],  # a 3 x 1 char matrix
    "c": ["ab", "cde", ""],  # a 1 x 3 cellstr
    "k": ["x", "yz"],  # a 2 x 1 cellstr
}


def _char(f, name: str, text: str | list[str]) -> h5py.Dataset:
    """A char array laid out as MATLAB v7.3 writes it: UTF-16 code units, one row
    per string, stored transposed, ``MATLAB_class = 'char'``; an empty one as its
    dimensions with ``MATLAB_empty = 1``."""
    rows = [text] if isinstance(text, str) else text
    if rows == [""]:
        ds = f.create_dataset(name, data=np.array([0, 0], dtype=np.uint64))
        ds.attrs["MATLAB_empty"] = np.uint8(1)
    else:
        codes = np.array([np.frombuffer(r.encode("utf-16-le"), "<u2") for r in rows])
        ds = f.create_dataset(name, data=codes.T)  # (cols, rows) on disk
    ds.attrs["MATLAB_class"] = np.bytes_(b"char")
    ds.attrs["MATLAB_int_decode"] = np.int32(2)
    return ds


def _cellstr(f, name: str, texts: list[str], shape: tuple[int, int]) -> None:
    """A cell array of strings as MATLAB v7.3 writes it: object references (stored
    transposed, ``MATLAB_class = 'cell'``) to char arrays under ``#refs#``."""
    refs = [_char(f, f"#refs#/{name}{i}", t).ref for i, t in enumerate(texts)]
    cells = np.array(refs, dtype=h5py.ref_dtype).reshape(shape[::-1])
    f.create_dataset(name, data=cells).attrs["MATLAB_class"] = np.bytes_(b"cell")


def test_v73_char_and_cellstr_read_as_text_like_v5(tmp_path):
    path = tmp_path / "text73.mat"
    with h5py.File(path, "w", userblock_size=512) as f:
        for name in ("s", "u", "e", "m", "y"):
            _char(f, name, _TEXT[name])
        _cellstr(f, "c", _TEXT["c"], (1, 3))
        _cellstr(f, "k", _TEXT["k"], (2, 1))
    v73 = read_mat(path)
    assert v73 == _TEXT
    scipy.io.savemat(
        tmp_path / "text5.mat",
        {
            "s": "abc",
            "u": "héllo €",
            "e": "",
            "m": np.array(["abc", "de "]),
            "y": np.array(["a", "b", "a"]),
            "c": np.array(["ab", "cde", ""], dtype=object),
            "k": np.array([["x"], ["yz"]], dtype=object),
        },
    )
    assert read_mat(tmp_path / "text5.mat") == v73


def test_v73_cells_of_matrices_stay_object_arrays(tmp_path):
    path = tmp_path / "mixed.mat"
    with h5py.File(path, "w", userblock_size=512) as f:
        a = f.create_dataset("#refs#/a", data=np.arange(6.0).reshape(2, 3).T)
        b = _char(f, "#refs#/b", "label")
        f.create_dataset("C", data=np.array([[a.ref], [b.ref]], dtype=h5py.ref_dtype))
    cells = read_mat(path)["C"]
    assert cells.dtype == object and cells.shape == (1, 2)
    np.testing.assert_array_equal(cells[0, 0], np.arange(6.0).reshape(2, 3))
    assert cells[0, 1] == "label"


def test_v73_cellstr_within_the_node_bound(tmp_path):
    """10,001 references to one string: refused by the walk's node count."""
    from jaxannot.data.matlab import MAX_NODES

    path = tmp_path / "many.mat"
    with h5py.File(path, "w", userblock_size=512) as f:
        ref = _char(f, "#refs#/s", "spam").ref
        f.create_dataset("C", data=np.array([ref] * MAX_NODES, dtype=h5py.ref_dtype))
    with pytest.raises(DataFormatError, match=r"many\.mat: .*fan out"):
        read_mat(path)


def test_v5_text_labels_still_refused_as_labels(tmp_path):
    folder = tmp_path / "bbcsport"
    folder.mkdir()
    cells = np.empty((1, 2), dtype=object)
    cells[0, 0], cells[0, 1] = np.ones((3, 2)), np.ones((3, 4))
    scipy.io.savemat(folder / "BBCSport.mat", {"X": cells, "Y": np.array(["a", "b"])})
    assert read_mat(folder / "BBCSport.mat")["Y"] == ["a", "b"]
    with pytest.raises(DataFormatError, match=r"class labels are <U1 values"):
        load_dataset("bbcsport", tmp_path)
