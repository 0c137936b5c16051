"""Damaged and hostile saved files (models, photo features, extractors) through the
CLI: always one ``jaxannot: error:`` line naming the file and exit status 2."""

import json
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from jaxannot.annotators import Fitted, get_method, load, save
from jaxannot.cli.app import main
from jaxannot.data.datasets import load_dataset
from jaxannot.data.extractor_settings import ExtractorSettings
from jaxannot.data.photo_build import build_photo_dataset
from jaxannot.data.synthetic_photos import write_synthetic_photos
from jaxannot.methods.baselines.params import KnnParams

SETTINGS = ExtractorSettings(size=64, daisy_step=6, codebook_size=16)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A photo dataset (two photos unlabelled) and a knn model fitted on it."""
    root = tmp_path_factory.mktemp("damaged")
    tags = write_synthetic_photos(root / "photos", per_kind=2, seed=3)
    labelled = {f: t for f, t in tags.items() if f not in sorted(tags)[-2:]}
    build_photo_dataset(root / "photos", root / "ds", tags=labelled, settings=SETTINGS)
    train, _ = load_dataset(str(root / "ds"))
    knn = get_method("knn")
    save(root / "knn.npz", knn.fit(train, rng_key=None, k=3))
    return root


def _annotate(root):
    return ["annotate", str(root / "knn.npz"), "--dataset", str(root / "ds")]


def _features_again(root):
    """`features --extractor`: reads the extractor before any photo."""
    out = root / "again"
    shutil.rmtree(out, ignore_errors=True)
    return ["features", str(root / "photos"), "--extractor", str(root / "ds"),
            "--out", str(out)]  # fmt: skip


#: file (relative to the fixture's folder) -> the command that reads it
TARGETS = {
    "knn.npz": _annotate,
    "ds/features.npz": _annotate,
    "ds/extractor.npz": _features_again,
}


def _damaged(data: bytes) -> list[tuple[str, bytes]]:
    """Truncations at every 1/16 of the file and 40 seeded single-bit flips."""
    cases = [(f"cut at {i}/16", data[: len(data) * i // 16]) for i in range(16)]
    rng = np.random.default_rng(len(data))
    for _ in range(40):
        at, bit = int(rng.integers(len(data))), int(rng.integers(8))
        flipped = bytearray(data)
        flipped[at] ^= 1 << bit
        cases.append((f"bit {bit} of byte {at} flipped", bytes(flipped)))
    return cases


def _assert_one_error_line(err, code, named, case):
    assert code == 2, (case, err)
    errors = [line for line in err.splitlines() if line.startswith("jaxannot: error:")]
    assert len(errors) == 1 and "Traceback" not in err, (case, err)
    assert str(named) in errors[0], (case, errors[0])


def test_the_files_are_sound_to_begin_with(saved, capsys):
    assert main([*_annotate(saved), "--quiet"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2  # the unlabelled photos


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_truncated_or_flipped_archives(saved, capsys, name):
    path = saved / name
    original = path.read_bytes()
    try:
        for case, data in _damaged(original):
            path.write_bytes(data)
            code = main([*TARGETS[name](saved), "--quiet"])
            _assert_one_error_line(capsys.readouterr().err, code, path, case)
    finally:
        path.write_bytes(original)


def _rewrite_model(path, meta_edit=None, arrays_edit=None):
    """The saved model with its JSON header and arrays edited, written as numpy
    would (no checksum: what a hand-made file looks like)."""
    with zipfile.ZipFile(path) as z, np.load(path) as archive:
        assert z.comment  # the original has its checksum
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(arrays.pop("__meta__").tobytes())
    meta = meta_edit(meta) if meta_edit else meta
    arrays = arrays_edit(arrays) if arrays_edit else arrays
    header = json.dumps(meta).encode()
    np.savez(path, __meta__=np.frombuffer(header, np.uint8), **arrays)


def _set(key, value):
    def edit(meta):
        return {**meta, key: value}

    return edit


def _drop(key, where=None):
    def edit(d):
        if where is None:
            return {k: v for k, v in d.items() if k != key}
        return {**d, where: {k: v for k, v in d[where].items() if k != key}}

    return edit


def _arrays(**changes):
    def edit(arrays):
        out = {**arrays, **changes}
        return {k: v for k, v in out.items() if v is not None}

    return edit


def _with_keys(edit):
    """``edit`` of the arrays, the header's key list kept in agreement."""

    def both(path):
        with np.load(path) as archive:
            keys = sorted(edit({k: 0 for k in archive.files if k != "__meta__"}))
        _rewrite_model(path, _set("keys", keys), edit)

    return both


MODEL_HEADERS = {
    "a JSON list": lambda p: _rewrite_model(p, lambda m: [m]),
    "a JSON str": lambda p: _rewrite_model(p, lambda m: "knn"),
    "names no method": lambda p: _rewrite_model(p, _drop("method")),
    "names no method ": lambda p: _rewrite_model(p, _set("method", 3)),
    "names no method  ": lambda p: _rewrite_model(p, _set("method", "")),
    "unknown method 'knnn'": lambda p: _rewrite_model(p, _set("method", "knnn")),
    "'hyper' is not a JSON object": lambda p: _rewrite_model(p, _set("hyper", [])),
    "'info' is not a JSON object": lambda p: _rewrite_model(p, _set("info", 1)),
    "another format": lambda p: _rewrite_model(p, _set("format", "x")),
    "version '1'": lambda p: _rewrite_model(p, _set("version", "1")),
    "version True": lambda p: _rewrite_model(p, _set("version", True)),
    "version 99": lambda p: _rewrite_model(p, _set("version", 99)),
    "other parameters": lambda p: _rewrite_model(p, _set("keys", ["features"])),
    "other parameters ": lambda p: _rewrite_model(p, _set("keys", "features")),
    "'words' should be one array": _with_keys(_arrays(**{"words/x": np.zeros(2)})),
    "has an empty part": _with_keys(_arrays(**{"a//b": np.zeros(2)})),
    "hyper-parameter 'k'": lambda p: _rewrite_model(p, _drop("k", "hyper")),
    "k='ten'": lambda p: _rewrite_model(
        p, lambda m: {**m, "hyper": {**m["hyper"], "k": "ten"}}
    ),
    "metric='manhattan'": lambda p: _rewrite_model(
        p, lambda m: {**m, "hyper": {**m["hyper"], "metric": "manhattan"}}
    ),
    "no parameter 'words'": _with_keys(_arrays(words=None)),
    "do not fit method 'knn'": _with_keys(_arrays(features=np.zeros(5, np.float32))),
    "holds <U1 values": _with_keys(_arrays(frequency=np.array(["a"]))),
    "'features' holds NaN or infinite values": _with_keys(
        _arrays(features=np.full((10, 104), np.nan, np.float32))
    ),
    "'width' holds NaN or infinite values": _with_keys(_arrays(width=np.inf)),
    "'features' holds int64 values, not kind 'f'": _with_keys(
        _arrays(features=np.zeros((10, 104), np.int64))
    ),
    "'width' has shape (2,), not []": _with_keys(_arrays(width=np.ones(2))),
    "'words' has shape (3, 4): its n is 3": _with_keys(
        _arrays(words=np.zeros((3, 4), np.float32))
    ),
    "unexpected parameter 'extra'": _with_keys(_arrays(extra=np.zeros(2))),
    "no JSON header": lambda p: np.savez(p, w=np.zeros(2)),
}


def _edit_json(path, edit):
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def _settings(**changes):
    return lambda m: {**m, "settings": {**m["settings"], **changes}}


EXTRACTOR_HEADERS = {
    "a JSON list": lambda m: [m],
    "not a jaxannot.photo_extractor": _drop("format"),
    "settings must be a JSON object": _drop("settings"),
    "unknown extractor settings ['colour']": _settings(colour=3),
    "size='160'": _settings(size="160"),
    "lbp=[[8]]": _settings(lbp=[[8]]),
    "gabor_frequencies=[None]": _settings(gabor_frequencies=[None]),
    "size 10 is too small": _settings(size=10),
    "daisy_rings must be in [1, 8], got 0": _settings(daisy_rings=0),
    "lbp points must be in [4, 32], got 5000000": _settings(lbp=[[5000000, 1]]),
    "lbp must hold 1 to 4 entries, got 5": _settings(lbp=[[8, 1]] * 5),
    "gabor_orientations must be in [0, 16]": _settings(gabor_orientations=10**7),
    "size must be in [1, 640], got 30000": _settings(size=30000),
    "gabor frequency must be in [0.05, 0.5], got 0": _settings(gabor_frequencies=[0]),
    "codebook_size * max_descriptors must be in": _settings(
        codebook_size=10_000, max_descriptors=10**6
    ),
    "scale None": _drop("scale"),
    "scale -1": _set("scale", -1),
    "scale '2'": _set("scale", "2"),
}


def test_hostile_model_headers(saved, capsys):
    path = saved / "knn.npz"
    original = path.read_bytes()
    try:
        for expected, write in MODEL_HEADERS.items():
            path.write_bytes(original)
            write(path)
            code = main([*_annotate(saved), "--quiet"])
            err = capsys.readouterr().err
            _assert_one_error_line(err, code, path, expected)
            assert expected.strip() in err, (expected, err)
    finally:
        path.write_bytes(original)


def test_hostile_extractors_and_datasets(saved, capsys):
    folder = saved / "ds"
    saved_files = {n: (folder / n).read_bytes() for n in ("extractor.json",
                   "extractor.npz", "features.npz", "photos.json")}  # fmt: skip
    cases = [
        (f"extractor.json: {e}", "extractor.json", e, lambda p, f=f: _edit_json(p, f))
        for e, f in EXTRACTOR_HEADERS.items()
    ]
    cases += [
        ("not JSON", "extractor.json", "not a photo extractor (JSONDecodeError",
         lambda p: p.write_text("{")),
        ("nested", "extractor.json", "nested too deeply",
         lambda p: p.write_text("[" * 10**5 + "]" * 10**5)),
        ("nested", "photos.json", "nested too deeply",
         lambda p: p.write_text('{"a":' + "[" * 10**5 + "]" * 10**5 + "}")),
        ("wide codebook", "extractor.npz", "needs a [words, 104] 'codebook'",
         lambda p: np.savez(p, codebook=np.zeros((4, 3), np.float32))),
        ("no codebook", "extractor.npz", "found none",
         lambda p: np.savez(p, centres=np.zeros((4, 104), np.float32))),
        ("NaN codebook", "extractor.npz", "its codebook has a NaN/inf value",
         lambda p: np.savez(p, codebook=np.full((4, 104), np.nan, np.float32))),
        ("a folder", "extractor.npz", "not a regular file",
         lambda p: (p.unlink(), p.mkdir())),
        ("no view", "features.npz", "no array for view(s) ['texture']",
         lambda p: np.savez(p, colour=np.zeros((12, 72)),
                            visual_words=np.zeros((12, 16)))),
        ("bad view", "features.npz", "view 'colour' has shape (3,)",
         lambda p: np.savez(p, colour=np.zeros(3), texture=np.zeros((12, 36)),
                            visual_words=np.zeros((12, 16)))),
        ("manifest list", "photos.json", "a JSON list", lambda p: p.write_text("[]")),
        ("manifest tags", "photos.json", "tags must be a list of strings",
         lambda p: _edit_json(p, _set("tags", "red"))),
        ("manifest views", "photos.json", "its views must be",
         lambda p: _edit_json(p, _set("views", ["colour"]))),
    ]  # fmt: skip
    try:
        for case, name, expected, damage in cases:
            damage(folder / name)
            command = _annotate(saved)  # reads features.npz, photos.json
            if name.startswith("extractor"):  # read to featurize a photo
                command.insert(2, str(saved / "photos" / "photo000.jpg"))
            code = main([*command, "--quiet"])
            err = capsys.readouterr().err
            assert expected in err, (case, err)
            assert err.count("\n") == 1 and err.startswith("jaxannot: error: "), err
            assert code == 2 and str(folder / name) in err, (case, err)
            if (folder / name).is_dir():
                (folder / name).rmdir()
            (folder / name).write_bytes(saved_files[name])
    finally:
        for name, data in saved_files.items():
            (folder / name).write_bytes(data)
    assert len(MODEL_HEADERS) + len(cases) + 3 * 56 >= 200  # the acceptance's count


def test_a_damaged_model_through_a_real_process(saved, tmp_path):
    model = tmp_path / "cut.npz"
    data = (saved / "knn.npz").read_bytes()
    model.write_bytes(data[: len(data) // 2])
    features = tmp_path / "ds"
    shutil.copytree(saved / "ds", features)
    raw = bytearray((features / "features.npz").read_bytes())
    raw[len(raw) // 3] ^= 4
    (features / "features.npz").write_bytes(bytes(raw))
    for argv, named in [
        (["annotate", str(model), "--dataset", str(saved / "ds")], model),
        (_annotate(saved)[:2] + ["--dataset", str(features)], features),
    ]:
        run = subprocess.run(
            [sys.executable, "-m", "jaxannot.cli", *argv, "--quiet"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 2, run.stderr
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
        assert run.stderr.startswith("jaxannot: error: ") and str(named) in run.stderr


def test_a_saved_model_loads_back_equal(saved, tmp_path):
    params = KnnParams(np.ones((2, 3)), np.zeros((2, 2)), np.ones(2))
    save(tmp_path / "m.npz", Fitted("knn", params, {"k": 1}))
    back = load(tmp_path / "m.npz")
    assert back.method == "knn" and back.hyper == {"k": 1}
    assert type(back.params) is KnnParams and back.params.width is None
    np.testing.assert_array_equal(back.params.words, np.zeros((2, 2)))
