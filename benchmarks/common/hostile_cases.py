"""The catalogue of hostile inputs of ``benchmarks/reliability/hostile_files.py``
(issue 44) and
the runner that puts each through the real command line.

Each :class:`Case` builds its files in a folder of its own and names the command a
user would run on them; :func:`run_case` runs it as ``python -m jaxannot.cli`` in a
child process (working directory: the case's folder, so every path is relative) with
a time limit, and records its exit status, seconds, peak resident memory (from
``os.wait4``: the command's own ``ru_maxrss``, see :data:`LAUNCHER`), whether its
stderr holds a traceback or a raw control character, whether its error line names
the hostile file, and whether any input changed (bytes, inode, link target, kind of
every entry under the folder, links never followed).

The builders are shared with the tests
(``tests/benchmarks/test_benchmark_hostile_files.py`` loads this module through the
``benchmark_script`` fixture).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable

import numpy as np

__all__ = [
    "CASES",
    "KINDS",
    "Case",
    "remove_tree",
    "run_case",
    "snapshot",
]

#: every class of hostile input issue 44 names
KINDS = (
    "arff",
    "label_xml",
    "archive",
    "mat_v5",
    "mat_v73",
    "photo_folder",
    "photo_dataset",
    "tags_csv",
    "checkpoint",
    "linked_output",
)

TIMEOUT_S = 30.0
_RAW_CONTROL = ("\x1b", "\x07", "\x00", "\x9b")


@dataclasses.dataclass(frozen=True)
class Case:
    """One hostile input and the command that reads it.

    Attributes
    ----------
    name : str
        A short unique name.
    kind : str
        One of :data:`KINDS`.
    build : callable
        ``build(folder) -> argv``: writes the inputs under ``folder`` and returns the
        ``jaxannot`` arguments (paths relative to ``folder``).
    names : str
        The path (relative to ``folder``; or the word) its stderr must name: the
        hostile file of a refused input, the entry a warning skips.
    outputs : tuple of str
        Paths the command may create (left out of the inputs compared).
    """

    name: str
    kind: str
    build: Callable[[pathlib.Path], list[str]]
    names: str
    outputs: tuple[str, ...] = ()


# ------------------------------------------------------------------ builders
_XML = (
    '<?xml version="1.0"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">'
    + "".join(f'<label name="l{j}"/>' for j in range(6))
    + "</labels>\n"
)


def _arff(rows: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    head = "@relation t\n" + "".join(f"@attribute f{j} numeric\n" for j in range(5))
    head += "".join(f"@attribute l{j} {{0,1}}\n" for j in range(6))
    x = rng.random((rows, 5)).round(4)
    y = rng.random((rows, 6)) < 0.4
    y[:, 0] |= ~y.any(1)  # every row has a label
    body = "".join(
        ",".join([*map(str, xi), *map(str, yi.astype(int))]) + "\n"
        for xi, yi in zip(x, y, strict=True)
    )
    return head + "@data\n" + body


def mulan(folder: pathlib.Path) -> pathlib.Path:
    """A small sound Mulan dataset ``folder`` (``t.xml``, ``t-{train,test}.arff``:
    5 numeric features, 6 labels; 40/20 rows)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.xml").write_text(_XML)
    (folder / "t-train.arff").write_text(_arff(40, 0))
    (folder / "t-test.arff").write_text(_arff(20, 1))
    return folder


def bomb_bytes(declared: int) -> bytes:
    """A ``.npz`` whose one entry inflates to ``declared`` zero bytes (a zip bomb:
    ~1/1000 of that on disk)."""
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("w.npy", "w", force_zip64=True) as fh:
            header = {"descr": "|u1", "fortran_order": False, "shape": (declared,)}
            np.lib.format.write_array_header_1_0(fh, header)
            for _ in range(declared // 2**24):
                fh.write(bytes(2**24))
    return buffer.getvalue()


def photo_dataset(folder: pathlib.Path, rows: int = 8, tags: int = 6) -> pathlib.Path:
    """A sound photo dataset ``folder`` written by hand (manifest, table and
    features; no photos, no extractor)."""
    from jaxannot.data.archive import write_archive
    from jaxannot.data.image_features import VIEW_KINDS

    folder.mkdir(parents=True, exist_ok=True)
    manifest = {
        "format": "jaxannot.photos", "version": 1, "name": "p", "views": VIEW_KINDS,
        "tags": [f"t{j}" for j in range(tags)], "num_photos": rows,
        "test_fraction": 0.0, "seed": 0, "skipped": [],
    }  # fmt: skip
    (folder / "photos.json").write_text(json.dumps(manifest))
    table = "".join(f"p{i}.jpg,train,t{i % tags}\n" for i in range(rows))
    (folder / "photos.csv").write_text("file,split,tags\n" + table)
    rng = np.random.default_rng(0)
    write_archive(
        folder / "features.npz",
        {v: rng.random((rows, 4)).astype(np.float32) for v in VIEW_KINDS},
    )
    return folder


def _mat_v5(path: pathlib.Path, n: int = 30, x=None, y=None) -> None:
    """A BBCSport-like v5 MAT-file: two views (images x dims) in the cell array
    ``X``, the classes ``Y``."""
    import scipy.io

    rng = np.random.default_rng(0)
    cells = np.empty((1, 2), dtype=object)
    cells[0, 0] = rng.random((n, 3)) if x is None else x
    cells[0, 1] = rng.random((n, 4))
    y = np.arange(n) % 5 + 1 if y is None else y
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"X": cells, "Y": y.reshape(-1, 1)})


def _bbcsport(edit: Callable[[pathlib.Path], None]):
    def build(folder: pathlib.Path) -> list[str]:
        path = folder / "root" / "bbcsport" / "BBCSport.mat"
        _mat_v5(path)
        edit(path)
        return ["evaluate", "knn", "--dataset", "bbcsport", "--data-dir", "root"]

    return build


def _cut(path: pathlib.Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])


def _garbage(path: pathlib.Path) -> None:
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(7)
    data[128:] = rng.integers(0, 256, len(data) - 128, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))


def _wikipedia(write: Callable[[object, pathlib.Path], None]):
    def build(folder: pathlib.Path) -> list[str]:
        import h5py

        path = folder / "root" / "wikipedia-xmodal" / "wiki_data.mat"
        path.parent.mkdir(parents=True)
        with h5py.File(path, "w") as f:
            write(f, path.parent)
        return ["evaluate", "knn", "--dataset", "wikipedia", "--data-dir", "root"]

    return build


def _external_link(f, folder: pathlib.Path) -> None:
    import h5py

    with h5py.File(folder / "outside.h5", "w") as g:
        g.create_dataset("big", data=np.zeros((4, 4)))
    f["I_tr"] = np.ones((4, 3))
    f["T_tr"] = h5py.ExternalLink("outside.h5", "/big")


def _external_storage(f, folder: pathlib.Path) -> None:
    (folder / "raw.bin").write_bytes(np.arange(10.0).tobytes())
    f.create_dataset("I_tr", shape=(10,), dtype="f8", external=[("raw.bin", 0, 80)])


def _deep_groups(f, folder: pathlib.Path) -> None:
    group = f.create_group("I_tr")
    for level in range(40):
        group = group.create_group(f"g{level}")
    group.create_dataset("leaf", data=np.zeros(1))


def _fan_out(f, folder: pathlib.Path) -> None:
    """4 hard links a level, 7 levels: 4^7 leaves from a few KB."""
    below = f.create_group("#level7")
    below.create_dataset("leaf", data=np.zeros(1))
    for level in range(6, -1, -1):
        group = f.create_group(f"#level{level}")
        for k in range(4):
            group[f"g{k}"] = below
        below = group
    f["I_tr"] = below


def _reference_fan_out(f, folder: pathlib.Path) -> None:
    import h5py

    target = f.create_dataset("#refs#/leaf", data=np.zeros((1, 1)))
    for level in range(5):
        refs = np.array([target.ref] * 8, dtype=h5py.ref_dtype)
        target = f.create_dataset(f"#refs#/r{level}", data=refs)
    f["I_tr"] = target


def _mulan_with(name: str, text: str | bytes, command: str = "evaluate"):
    """The dataset ``ds`` with its file ``name`` replaced by ``text``."""

    def build(folder: pathlib.Path) -> list[str]:
        ds = mulan(folder / "ds")
        data = text.encode() if isinstance(text, str) else text
        (ds / name).write_bytes(data)
        return [command, "knn", "--dataset", "ds", "--set", "k=3"]

    return build


def _nominal_without_brace(values: int) -> str:
    listed = ",".join(f"v{i}" for i in range(values))
    return f"@relation r\n@attribute g {{{listed}\n@data\nv0\n"


def _wide_sparse() -> str:
    """2000 attributes x 5000 rows of ``{0 1}``: 80 MB dense from ~100 KB."""
    head = "".join(f"@attribute a{j} numeric\n" for j in range(2000))
    return "@relation r\n" + head + "@data\n" + "{0 1}\n" * 5000


_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
    + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9)
    )
    + ']>\n<labels><label name="&j;"/></labels>\n'
)


def _photo_ds(edit: Callable[[pathlib.Path], None], *, rows: int = 8, tags: int = 6):
    def build(folder: pathlib.Path) -> list[str]:
        ds = photo_dataset(folder / "pd", rows, tags)
        edit(ds)
        return ["evaluate", "knn", "--dataset", "pd", "--set", "k=3"]

    return build


def _wide_tags(ds: pathlib.Path) -> None:
    """5000 photos x 4000 tags: an 80 MB tag matrix from ~110 KB of text."""
    from jaxannot.data.archive import write_archive
    from jaxannot.data.image_features import VIEW_KINDS

    manifest = json.loads((ds / "photos.json").read_text())
    manifest.update(tags=[f"t{j}" for j in range(4000)], num_photos=5000)
    (ds / "photos.json").write_text(json.dumps(manifest))
    table = "".join(f"p{i}.jpg,train,\n" for i in range(5000))
    (ds / "photos.csv").write_text("file,split,tags\n" + table)
    write_archive(
        ds / "features.npz", {v: np.zeros((5000, 1), np.float32) for v in VIEW_KINDS}
    )


def _beyond_float32(ds: pathlib.Path) -> None:
    from jaxannot.data.archive import write_archive
    from jaxannot.data.image_features import VIEW_KINDS

    arrays = {v: np.ones((8, 4)) for v in VIEW_KINDS}
    arrays[next(iter(VIEW_KINDS))][1, 0] = -1e300
    write_archive(ds / "features.npz", arrays)


def _photos(edit: Callable[[pathlib.Path], None], tags: bool = False):
    """``features photos --out out`` (small settings), the folder ``photos`` of six
    synthetic photos edited."""

    def build(folder: pathlib.Path) -> list[str]:
        from jaxannot.data.synthetic_photos import write_synthetic_photos

        photos = folder / "photos"
        write_synthetic_photos(photos, per_kind=1, seed=0)
        edit(photos)
        argv = ["features", "photos", "--out", "out", "--size", "64", "--step", "6"]
        argv += ["--words", "4"]
        return [*argv, "--tags", "tags.csv"] if tags else argv

    return build


def _link_loops(photos: pathlib.Path) -> None:
    (photos / "a.jpg").symlink_to("b.jpg")
    (photos / "b.jpg").symlink_to("a.jpg")
    (photos / "sub").mkdir()
    (photos / "sub" / "up").symlink_to("..", target_is_directory=True)


def _fifo(photos: pathlib.Path) -> None:
    os.mkfifo(photos / "photo.jpg")


def _deep(photos: pathlib.Path) -> None:
    """1100 nested folders (``os.walk`` recursed past Python's limit)."""
    folder = photos
    for _ in range(1100):
        folder = folder / "d"
        folder.mkdir()
    (folder / "deep.jpg").write_bytes(b"\xff\xd8 not a photo")


def _tags_text(text: str):
    def edit(photos: pathlib.Path) -> None:
        (photos.parent / "tags.csv").write_text(text, encoding="utf-8")

    return edit


_ESCAPES = "evil\x1b]0;PWNED\x07\x1b[2J\x00end"


def _checkpoint(edit: Callable[[pathlib.Path], None]):
    """``evaluate mix-unigram --checkpoint ckpt`` on a checkpoint of this very
    command (made by :func:`checkpoint_template`), ``edit`` damaging it."""

    def build(folder: pathlib.Path) -> list[str]:
        template = checkpoint_template(folder.parent / "_checkpoint_template")
        shutil.copytree(template, folder, dirs_exist_ok=True, symlinks=True)
        edit(folder / "ckpt" / "run-000.npz")
        return CHECKPOINTED

    return build


CHECKPOINTED = [
    "evaluate", "mix-unigram", "--dataset", "ds", "--set", "iterations=12",
    "--set", "topics=4", "--checkpoint", "ckpt", "--checkpoint-every", "5",
]  # fmt: skip


def checkpoint_template(folder: pathlib.Path) -> pathlib.Path:
    """``folder`` with the dataset ``ds`` and the checkpoint ``ckpt`` of
    :data:`CHECKPOINTED`, made once by running the command."""
    if (folder / "ckpt" / "run-000.npz").is_file():
        return folder
    mulan(folder / "ds")
    run = subprocess.run(
        [sys.executable, "-m", "jaxannot.cli", *CHECKPOINTED, "-q"],
        cwd=folder, env=_child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if run.returncode != 0 or not (folder / "ckpt" / "run-000.npz").is_file():
        raise RuntimeError(f"the checkpoint template failed: {run.stderr[-2000:]}")
    return folder


def _entries(path: pathlib.Path) -> dict:
    with np.load(path) as archive:
        return {name: archive[name] for name in archive.files}


def _rewrite(path: pathlib.Path, **changes) -> None:
    """The checkpoint rewritten by numpy with entries changed (no checksum)."""
    entries = {**_entries(path), **changes}
    np.savez(path, **{k: v for k, v in entries.items() if v is not None})


def _flip(path: pathlib.Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _wrong_shape(path: pathlib.Path) -> None:
    name = sorted(k for k in _entries(path) if k.startswith("leaf_"))[-1]
    _rewrite(path, **{name: np.zeros((3, 7), np.float32)})


def _nan_leaves(path: pathlib.Path) -> None:
    entries = _entries(path)
    changes = {
        k: np.full_like(v, np.nan)
        for k, v in entries.items()
        if k.startswith("leaf_") and v.dtype.kind == "f"
    }
    _rewrite(path, **changes)


def _missing_leaf(path: pathlib.Path) -> None:
    name = sorted(k for k in _entries(path) if k.startswith("leaf_"))[-1]
    _rewrite(path, **{name: None})


def _replace_with(make: Callable[[pathlib.Path], None]):
    def edit(path: pathlib.Path) -> None:
        path.unlink()
        make(path)

    return edit


def _loop(path: pathlib.Path) -> None:
    path.symlink_to("loop")
    (path.parent / "loop").symlink_to(path.name)


def _linked(flag: str, link: str, how: str, command: str = "evaluate"):
    """An output (``flag link``) that is a symbolic or hard link of an input."""

    def build(folder: pathlib.Path) -> list[str]:
        store = folder / "store"
        store.mkdir()
        ds = mulan(folder / "ds")
        (ds / "t-train.arff").rename(store / "train.arff")
        (ds / "t-train.arff").symlink_to("../store/train.arff")
        target = folder / link
        source = store / "train.arff"
        if flag == "--checkpoint":  # a checkpoint file of the folder named
            target.mkdir()
            target = target / "run-000.npz"
        if how == "symlink":
            target.symlink_to(os.path.relpath(source, target.parent))
        else:
            os.link(source, target)
        return [command, "knn", "--dataset", "ds", "--set", "k=3", flag, link]

    return build


def _linked_tags(how: str):
    def build(folder: pathlib.Path) -> list[str]:
        (folder / "photos").mkdir()
        tags = folder / "tags.csv"
        tags.write_text("file,tags\na.jpg,sky\n")
        if how == "symlink":
            (folder / "out").symlink_to("tags.csv")
        else:
            os.link(tags, folder / "out")
        return ["features", "photos", "--tags", "tags.csv", "--out", "out"]

    return build


# ----------------------------------------------------------------- catalogue
_MB_ARFF = "ds/t-train.arff"
_MAT5 = "root/bbcsport/BBCSport.mat"
_MAT73 = "root/wikipedia-xmodal/wiki_data.mat"
_CKPT = "ckpt/run-000.npz"

CASES: tuple[Case, ...] = (
    Case("arff_nominal_without_brace", "arff",
         _mulan_with("t-train.arff", _nominal_without_brace(22)), _MB_ARFF),
    Case("arff_garbage_bytes", "arff",
         _mulan_with("t-train.arff", bytes(range(256)) * 64), _MB_ARFF),
    Case("arff_sparse_declares_huge_shape", "arff",
         _mulan_with("t-train.arff", _wide_sparse()), _MB_ARFF),
    Case("arff_escape_characters", "arff",
         _mulan_with("t-train.arff", f"@relation r\n@attribute a {{x,y}}\n@data\n"
                     f"{_ESCAPES}\n"), _MB_ARFF),
    Case("label_xml_entity_expansion", "label_xml",
         _mulan_with("t.xml", _LAUGHS), "ds/t.xml"),
    Case("label_xml_unclosed", "label_xml",
         _mulan_with("t.xml", "<labels><label name='a'>"), "ds/t.xml"),
    Case("model_zip_bomb", "archive",
         lambda f: (photo_dataset(f / "pd"),
                    (f / "bomb.npz").write_bytes(bomb_bytes(2**28)),
                    ["annotate", "bomb.npz", "--dataset", "pd"])[-1],
         "bomb.npz"),
    Case("model_garbage", "archive",
         lambda f: (photo_dataset(f / "pd"),
                    (f / "m.npz").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 8),
                    ["annotate", "m.npz", "--dataset", "pd"])[-1],
         "m.npz"),
    Case("mat_v5_truncated", "mat_v5", _bbcsport(_cut), _MAT5),
    Case("mat_v5_garbage", "mat_v5", _bbcsport(_garbage), _MAT5),
    Case("mat_v5_many_classes", "mat_v5",
         _bbcsport(lambda p: _mat_v5(p, 4200, y=np.arange(1, 4201))), _MAT5),
    Case("mat_v5_beyond_float32", "mat_v5",
         _bbcsport(lambda p: _mat_v5(p, x=np.full((30, 3), 1e300))), _MAT5),
    Case("mat_v73_external_link", "mat_v73", _wikipedia(_external_link), _MAT73),
    Case("mat_v73_external_storage", "mat_v73",
         _wikipedia(_external_storage), _MAT73),
    Case("mat_v73_deep_groups", "mat_v73", _wikipedia(_deep_groups), _MAT73),
    Case("mat_v73_hard_link_fan_out", "mat_v73", _wikipedia(_fan_out), _MAT73),
    Case("mat_v73_reference_fan_out", "mat_v73",
         _wikipedia(_reference_fan_out), _MAT73),
    Case("photo_folder_symlink_loops", "photo_folder", _photos(_link_loops),
         "a.jpg", ("out",)),
    Case("photo_folder_fifo", "photo_folder", _photos(_fifo), "photo.jpg",
         ("out",)),
    Case("photo_folder_1100_deep", "photo_folder", _photos(_deep), "photos/d/d",
         ("out",)),
    Case("photo_dataset_huge_tag_matrix", "photo_dataset", _photo_ds(_wide_tags),
         "pd/photos.csv"),
    Case("photo_dataset_beyond_float32", "photo_dataset",
         _photo_ds(_beyond_float32), "pd/features.npz"),
    Case("photo_dataset_features_zip_bomb", "photo_dataset",
         _photo_ds(lambda d: (d / "features.npz").write_bytes(bomb_bytes(2**28))),
         "pd/features.npz"),
    Case("photo_dataset_nested_manifest", "photo_dataset",
         _photo_ds(lambda d: (d / "photos.json").write_text(
             '{"a":' + "[" * 10**5 + "]" * 10**5 + "}")), "pd/photos.json"),
    Case("tags_csv_escape_characters", "tags_csv",
         _photos(_tags_text(f"file,tags\n{_ESCAPES}.jpg,{_ESCAPES}\n"), tags=True),
         "evil\\x1b]0;PWNED\\x07", ("out",)),
    Case("tags_csv_unbalanced_quote", "tags_csv",
         _photos(_tags_text('file,tags\n"a.jpg,\x1b[2J\nb.jpg,x\n'), tags=True),
         "tags.csv", ("out",)),
    Case("tags_csv_nul_bytes", "tags_csv",
         _photos(_tags_text("file,tags\na\x00.jpg,x\x00y\n"), tags=True),
         "a\\x00.jpg", ("out",)),
    Case("checkpoint_truncated", "checkpoint",
         _checkpoint(_cut), _CKPT, ("ckpt",)),
    Case("checkpoint_bit_flipped", "checkpoint",
         _checkpoint(_flip), _CKPT, ("ckpt",)),
    Case("checkpoint_wrong_shape", "checkpoint",
         _checkpoint(_wrong_shape), _CKPT, ("ckpt",)),
    Case("checkpoint_nan_leaves", "checkpoint",
         _checkpoint(_nan_leaves), _CKPT, ("ckpt",)),
    Case("checkpoint_missing_leaf", "checkpoint",
         _checkpoint(_missing_leaf), _CKPT, ("ckpt",)),
    Case("checkpoint_zip_bomb", "checkpoint",
         _checkpoint(lambda p: p.write_bytes(bomb_bytes(2**28))), _CKPT, ("ckpt",)),
    Case("checkpoint_fifo", "checkpoint",
         _checkpoint(_replace_with(os.mkfifo)), _CKPT, ("ckpt",)),
    Case("checkpoint_symlink_loop", "checkpoint",
         _checkpoint(_replace_with(_loop)), _CKPT, ("ckpt",)),
    Case("json_symlinked_to_input", "linked_output",
         _linked("--json", "out.json", "symlink"), "--json"),
    Case("json_hard_link_of_input", "linked_output",
         _linked("--json", "out.json", "hardlink"), "--json"),
    Case("save_symlinked_to_input", "linked_output",
         _linked("--save", "model.npz", "symlink"), "--save"),
    Case("save_hard_link_of_input", "linked_output",
         _linked("--save", "model.npz", "hardlink"), "--save"),
    Case("checkpoint_holding_hard_link_of_input", "linked_output",
         _linked("--checkpoint", "state", "hardlink"), "--checkpoint"),
    Case("features_out_symlinked_to_tags", "linked_output",
         _linked_tags("symlink"), "--out"),
    Case("features_out_hard_link_of_tags", "linked_output",
         _linked_tags("hardlink"), "--out"),
)  # fmt: skip


# -------------------------------------------------------------------- runner
def remove_tree(root: pathlib.Path) -> None:
    """Remove ``root`` without recursion (a tree 1100 folders deep is too deep for
    ``shutil.rmtree`` on some Pythons); links are removed, never followed."""
    stack = [(pathlib.Path(root), False)]
    while stack:
        path, emptied = stack.pop()
        if emptied:
            path.rmdir()
            continue
        mode = os.lstat(path).st_mode
        if not stat.S_ISDIR(mode):
            path.unlink()
            continue
        stack.append((path, True))
        stack.extend((pathlib.Path(e.path), False) for e in os.scandir(path))


def snapshot(root: pathlib.Path, skip: tuple[str, ...] = ()) -> dict:
    """Every entry under ``root`` (relative name -> kind and content): a file's
    sha256, size and inode, a link's target, a FIFO or a folder as such. Links are
    not followed, FIFOs not opened, entries under ``skip`` left out."""
    out: dict = {}
    stack = [pathlib.Path(root)]
    while stack:
        folder = stack.pop()
        for entry in os.scandir(folder):
            path = pathlib.Path(entry.path)
            name = path.relative_to(root).as_posix()
            if any(name == s or name.startswith(s + "/") for s in skip):
                continue
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[name] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[name] = ("dir",)
                stack.append(path)
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[name] = ("file", digest, st.st_size, st.st_ino)
            else:
                out[name] = ("other", stat.S_IFMT(st.st_mode))
    return out


#: A small launcher between the runner and the command. On Linux a process's
#: ``ru_maxrss`` starts from the resident set of the process it was forked from (the
#: high-water mark of the copied address space is kept through ``exec``), so a
#: command forked straight from a large parent (a test worker holding gigabytes)
#: reports the parent's memory as its peak. The launcher is a fresh interpreter of a
#: few megabytes: it forks and execs the command, waits for it and writes the
#: command's own ``ru_maxrss`` (KiB) to the file named by its first argument, then
#: exits as the command did (the same status, or the same signal).
LAUNCHER = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.WEXITSTATUS(status))
"""


def _child_env() -> dict:
    env = dict(os.environ)
    env.update(JAX_PLATFORMS="cpu", JAXANNOT_NO_COMPILATION_CACHE="1")
    env.pop("JAXANNOT_DATA", None)  # every dataset is the case's own
    return env


def _input_bytes(before: dict) -> int:
    return sum(v[2] for v in before.values() if v[0] == "file")


def run_case(case: Case, folder: pathlib.Path, timeout: float = TIMEOUT_S) -> dict:
    """Build ``case`` in the new folder ``folder`` and run its command.

    Returns
    -------
    dict
        ``exit_code`` (None when it hung and was killed), ``seconds``,
        ``peak_rss_mb`` (the command's own maximum resident set; None when it
        hung), ``hung``,
        ``traceback`` and ``raw_control_chars`` (in its stderr), ``names_input``
        (its stderr names :attr:`Case.names`), ``inputs_changed`` (the
        entries that differ), ``input_mb`` and ``last_line`` (of its stderr,
        the folder's own path replaced by ``<case>``).
    """
    folder.mkdir(parents=True)
    argv = case.build(folder)
    before = snapshot(folder, case.outputs)
    err_path = folder.parent / f"{folder.name}.stderr"
    rss_path = folder.parent / f"{folder.name}.rss"
    with open(err_path, "wb") as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(rss_path),
             "-m", "jaxannot.cli", *argv, "-q"],
            cwd=folder, env=_child_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
        )  # fmt: skip
        hung, status = False, 0
        while True:
            pid, status, _ = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout:
                hung = True
                os.killpg(child.pid, signal.SIGKILL)
                _, status, _ = os.wait4(child.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    # the command's own peak (KiB on Linux); a hung command, killed with its
    # launcher, has none (None: the hang is what the row reports)
    peak_kib = int(rss_path.read_text()) if rss_path.exists() else None
    rss_path.unlink(missing_ok=True)
    stderr = err_path.read_bytes().decode("utf-8", "replace")
    err_path.unlink()
    after = snapshot(folder, case.outputs)
    changed = sorted(
        k for k in set(before) | set(after) if before.get(k) != after.get(k)
    )
    lines = stderr.strip().split("\n")
    last = lines[-1] if lines else ""
    return {
        "name": case.name,
        "kind": case.kind,
        "command": ["jaxannot", *argv],
        "input_mb": _input_bytes(before) / 2**20,
        "exit_code": None if hung else child.returncode,
        "seconds": seconds,
        "peak_rss_mb": None if peak_kib is None else peak_kib / 1024,
        "hung": hung,
        "traceback": "Traceback" in stderr,
        "raw_control_chars": any(c in stderr for c in _RAW_CONTROL),
        "names_input": case.names in stderr,
        "inputs_changed": changed,
        "last_line": last.replace(str(folder), "<case>")[:300],
    }
