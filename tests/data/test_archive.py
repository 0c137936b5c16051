import io
import json
import zipfile

import numpy as np
import pytest

from jaxannot.data import archive as archive_module
from jaxannot.data import bounded
from jaxannot.data.archive import read_archive, read_json_object, write_archive
from jaxannot.data.errors import DataFormatError

ARRAYS = {
    "a": np.arange(12, dtype=np.float32).reshape(3, 4),
    "b/c": np.array([True, False]),
    "f": np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
    "scalar": np.float64(2.5),
    "empty": np.zeros((0, 3), np.uint8),
}


def _same(got, expected):
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value)
        assert got[name].dtype == np.asarray(value).dtype


def test_round_trip_and_numpy_reads_it(tmp_path):
    path = tmp_path / "x.npz"
    write_archive(path, ARRAYS, meta={"format": "t", "n": [1, 2]})
    archive = read_archive(path, "test archive")
    assert archive.meta == {"format": "t", "n": [1, 2]}
    _same(archive.arrays, ARRAYS)
    assert all(v.flags.writeable for v in archive.arrays.values())
    with np.load(path, allow_pickle=False) as plain:  # an ordinary .npz
        _same({k: plain[k] for k in plain.files if k != "__meta__"}, ARRAYS)
    assert zipfile.ZipFile(path).comment.startswith(b"jaxannot-sha256:")


def test_files_of_plain_numpy_are_read_without_a_checksum(tmp_path):
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / f"{save.__name__}.npz"
        save(path, **ARRAYS)
        archive = read_archive(path, "test archive")
        assert archive.meta is None
        _same(archive.arrays, ARRAYS)


@pytest.mark.parametrize("seed", range(40))
def test_every_flipped_bit_is_found(tmp_path, seed):
    """Whatever byte a flip hits, zip headers the zip reader ignores included."""
    path = tmp_path / "x.npz"
    write_archive(path, ARRAYS, meta={"k": 1})
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(seed)
    at = int(rng.integers(len(data)))
    data[at] ^= 1 << int(rng.integers(8))
    path.write_bytes(bytes(data))
    with pytest.raises(DataFormatError, match=str(path)) as err:
        read_archive(path, "test archive", remedy="write it again")
    assert "\n" not in str(err.value) and str(err.value).endswith("write it again")


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, raw in entries.items():
            z.writestr(name, raw)
    return buffer.getvalue()


def _npy(value, header_patch=None) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, value, allow_pickle=True)
    raw = buffer.getvalue()
    return raw if header_patch is None else raw.replace(*header_patch)


HOSTILE = {
    "empty file": b"",
    "no zip directory": b"just some text, not a zip archive",
    "is not a .npy array": _zip({"notes.txt": b"hello"}),
    "holds object values": _zip({"o.npy": _npy(np.array([{}], dtype=object))}),
    "holds <U3 values": _zip({"s.npy": _npy(np.array(["abc"]))}),
    "not numbers": _zip({"s.npy": _npy(np.zeros(2, [("x", "f4"), ("y", "i4")]))}),
    # a shape of 10**12 rows on 8 bytes of data: refused before any allocation
    "needs 8000000000000 bytes": _zip(
        {"h.npy": _npy(np.zeros(1), (b"(1,)", b"(1000000000000,)"))}
    ),
    "corrupt test archive": _zip(
        {"h.npy": _npy(np.zeros(1), (b"'descr'", b"'dxscr'"))}
    ),
    "header is a JSON list": _zip({"__meta__.npy": _npy(np.frombuffer(b"[1]", "u1"))}),
    "header is not JSON": _zip({"__meta__.npy": _npy(np.frombuffer(b"{x", "u1"))}),
    "not a JSON text": _zip({"__meta__.npy": _npy(np.zeros(3))}),
    "checksum does not match": _zip({"a.npy": _npy(np.zeros(2))})[:-2]
    + b"\x50\x00"
    + b"jaxannot-sha256:"
    + b"0" * 64,
}


@pytest.mark.parametrize("expected", sorted(HOSTILE))
def test_hostile_files_give_one_line_naming_the_file(tmp_path, expected):
    path = tmp_path / "x.npz"
    path.write_bytes(HOSTILE[expected])
    with pytest.raises(DataFormatError) as err:
        read_archive(path, "test archive")
    message = str(err.value)
    assert message.startswith(f"{path}: ") and expected in message, message
    assert "\n" not in message


def test_not_a_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_archive(tmp_path / "none.npz", "test archive")
    with pytest.raises(DataFormatError, match="not a regular file"):
        read_archive(tmp_path, "test archive")
    with pytest.raises(ValueError, match="may not be called"):
        write_archive(tmp_path / "x.npz", {"__meta__": np.zeros(1)})


def test_read_json_object(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"a": 1}))
    assert read_json_object(path, "test header") == {"a": 1}
    for text, expected in [("[1, 2]", "a JSON list"), ("{", "not a test header")]:
        path.write_text(text)
        with pytest.raises(DataFormatError, match=expected):
            read_json_object(path, "test header")
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(DataFormatError, match="UnicodeDecodeError"):
        read_json_object(path, "test header")


def _zeros_archive(path, nbytes: int) -> None:
    """A deflated ``.npz`` of ``nbytes`` zero bytes: about 1000 times smaller."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("w.npy", _npy(np.zeros(nbytes, np.uint8)))


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    """The declared sizes are bounded by the file's size (ratio) before any entry is
    decompressed; the bounds are module constants (small here, to keep it quick)."""
    monkeypatch.setattr(bounded, "MIN_ALLOWANCE", 2**20)
    path = tmp_path / "bomb.npz"
    _zeros_archive(path, 4 * 2**20)  # 4 MiB in a ~4 KiB file: ratio ~1000
    assert path.stat().st_size * archive_module.MAX_RATIO < 4 * 2**20
    with pytest.raises(DataFormatError, match=r"bomb\.npz: .*would decompress to"):
        read_archive(path, "test archive")
    _zeros_archive(path, 2**20 - 200)  # within the allowance: read as before
    assert read_archive(path, "test archive").arrays["w"].sum() == 0


def test_the_ceiling_bounds_even_a_large_file(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded, "MAX_ARCHIVE_BYTES", 1000)
    path = tmp_path / "x.npz"
    write_archive(path, {"a": np.arange(300, dtype=np.float64)})  # 2400 bytes
    with pytest.raises(DataFormatError, match="at most 1000"):
        read_archive(path, "test archive")


@pytest.mark.parametrize("depth", [100_000])
def test_deeply_nested_json_is_a_format_error(tmp_path, depth):
    nested = ("[" * depth + "]" * depth).encode()
    path = tmp_path / "x.json"
    path.write_bytes(b'{"a": ' + nested + b"}")
    with pytest.raises(DataFormatError, match="nested too deeply"):
        read_json_object(path, "test object")
    path = tmp_path / "x.npz"
    write_archive(path, {"a": np.zeros(2)}, meta={"k": 1})
    data = _zip({"__meta__.npy": _npy(np.frombuffer(nested, np.uint8))})
    path.write_bytes(data)
    with pytest.raises(DataFormatError, match="nested too deeply"):
        read_archive(path, "test archive")
