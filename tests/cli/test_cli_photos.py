"""``jaxannot features`` and ``jaxannot annotate`` end to end on synthetic photos."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from jaxannot.annotators import Fitted, save
from jaxannot.cli.app import main
from jaxannot.data.photos import load_photo_dir
from jaxannot.data.synthetic_photos import write_synthetic_photos

SMALL = ["--size", "64", "--step", "6", "--words", "16"]


@pytest.fixture(scope="module")
def photo_run(tmp_path_factory):
    """Synthetic photos with a corrupt JPEG and a text file among them, their tags
    (two photos untagged), featurized and fitted with knn through the CLI."""
    root = tmp_path_factory.mktemp("cli_photos")
    photos = root / "photos"
    tags = write_synthetic_photos(photos, per_kind=6, seed=1)
    whole = (photos / "photo000.jpg").read_bytes()
    (photos / "corrupt.jpg").write_bytes(whole[: len(whole) // 3])
    (photos / "notes.txt").write_text("shopping list, not a photo\n")
    untagged = sorted(tags)[-2:]
    rows = [f"{f},{' '.join(t)}\n" for f, t in tags.items() if f not in untagged]
    (root / "tags.csv").write_text("file,tags\n" + "".join(rows))
    return root, tags, untagged


@pytest.fixture(scope="module")
def featurized(photo_run):
    root = photo_run[0]
    out = subprocess.run(
        [sys.executable, "-m", "jaxannot.cli", "features", str(root / "photos"),
         "--tags", str(root / "tags.csv"), "--out", str(root / "ds"), *SMALL,
         "--quiet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return out


def test_features_skips_unreadable_files_and_exits_zero(photo_run, featurized):
    root, tags, untagged = photo_run
    assert featurized.returncode == 0, featurized.stderr
    assert "corrupt.jpg" in featurized.stderr and "notes.txt" in featurized.stderr
    assert "Traceback" not in featurized.stderr
    assert "skipped 2 file(s)" in featurized.stdout
    assert "36 photos featurized" in featurized.stdout
    assert "2 unlabelled" in featurized.stdout
    assert "photos:" not in featurized.stderr  # --quiet: no progress bar
    table = (root / "ds" / "photos.csv").read_text().splitlines()[1:]
    assert sorted(r.split(",")[0] for r in table) == sorted(tags)


def test_evaluate_recovers_the_tags_and_annotate_prints_them(
    photo_run, featurized, tmp_path, capsys
):
    root, tags, untagged = photo_run
    assert featurized.returncode == 0, featurized.stderr
    model, result = tmp_path / "knn.npz", tmp_path / "knn.json"
    ds = str(root / "ds")
    code = main(
        [
            "evaluate",
            "knn",
            "--dataset",
            ds,
            "--json",
            str(result),
            "--save",
            str(model),
            # 26 training photos: knn's default k = 40 (cross-validated on Corel5k's
            # 4,500) would vote with every photo; a neighbourhood of a few fits here
            "--set",
            "k=5",
        ]
    )
    assert code == 0
    metrics = json.loads(result.read_text())["metrics"]
    # chance: map ~0.4 (tag frequencies 1/3 and 1/2), accuracy ~0.4
    assert metrics["map"] >= 0.85 and metrics["accuracy"] >= 0.7, metrics
    capsys.readouterr()

    photos = [str(root / "photos" / f) for f in ("photo001.png", "photo030.jpg")]
    assert main(["annotate", str(model), *photos, "--dataset", ds, "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == photos
    for line, f in zip(lines, ("photo001.png", "photo030.jpg"), strict=True):
        assert {w for w in line.split(": ")[1].split()[::2]} == set(tags[f]), line

    assert main(["annotate", str(model), "--dataset", ds, "--json"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["photo"] for r in records] == untagged  # the dataset's unlabelled
    for r in records:
        assert len(r["tags"]) == 5 and r["scores"] == sorted(r["scores"], reverse=True)
        assert set(r["tags"][:2]) == set(tags[r["photo"]]), r


def test_annotate_skips_unreadable_photos_and_scores_each_alone(
    photo_run, featurized, tmp_path, capsys
):
    """An unreadable photo is named on stderr and left out; a photo's scores do not
    depend on the other photos of the command line."""
    root = photo_run[0]
    assert featurized.returncode == 0, featurized.stderr
    ds, model = str(root / "ds"), str(tmp_path / "knn.npz")
    argv = ["evaluate", "knn", "--dataset", ds, "--save", model, "--set", "k=5"]
    assert main(argv) == 0  # the k of the test above: its compiled knn
    capsys.readouterr()
    photos = [str(root / "photos" / f"photo{i:03d}.{'png' if i % 2 else 'jpg'}")
              for i in range(0, 30, 3)]  # fmt: skip
    corrupt = str(root / "photos" / "corrupt.jpg")

    def annotate(names):
        argv = ["annotate", model, *names, "--dataset", ds, "--json", "--top", "5"]
        assert main(argv) == 0
        captured = capsys.readouterr()
        return [json.loads(x) for x in captured.out.splitlines()], captured.err

    batch, err = annotate([photos[0], corrupt, *photos[1:]])
    assert "Traceback" not in err and f"skipped {corrupt}: " in err, err
    assert [r["photo"] for r in batch] == photos  # the corrupt one left out
    for i in (0, 7):
        (alone,), _ = annotate([photos[i]])
        assert alone["tags"] == batch[i]["tags"]
        np.testing.assert_allclose(alone["scores"], batch[i]["scores"], rtol=1e-6)


def test_annotate_user_errors_are_one_line(photo_run, featurized, tmp_path, capsys):
    root = photo_run[0]
    assert featurized.returncode == 0, featurized.stderr
    ds = str(root / "ds")
    model = tmp_path / "m.npz"
    assert main(["evaluate", "empirical", "--dataset", ds, "--save", str(model)]) == 0
    capsys.readouterr()
    photo = str(root / "photos" / "photo000.jpg")
    cases = {
        "does not exist": [str(tmp_path / "missing.npz"), photo, "--dataset", ds],
        "none of the 1 photo(s) is a readable image": [
            str(model),
            str(root / "photos" / "corrupt.jpg"),
        ],
        "is a folder": [str(model), str(root / "photos"), "--dataset", ds],
        "photo ": [str(model), str(tmp_path / "nope.jpg"), "--dataset", ds],
        "not a jaxannot model": [
            str(root / "tags.csv"),
            photo,
            "--dataset",
            ds,
        ],
        "not a photo dataset": [str(model), photo, "--dataset", str(tmp_path)],
        "--top must be": [str(model), photo, "--dataset", ds, "--top", "0"],
    }
    cases["none of the 1 photo(s) is a readable image"] += ["--dataset", ds]
    for expected, argv in cases.items():
        assert main(["annotate", "--quiet", *argv]) == 2, expected
        err = capsys.readouterr().err.strip()  # --quiet: the error line alone
        if "readable" in expected:  # after the warning that names the photo
            skipped, err = err.split("\n")
            assert (
                skipped.startswith("jaxannot: warning: skipped ")
                and "corrupt" in skipped
            )
        assert err.startswith("jaxannot: error: ") and expected in err, err
        assert "\n" not in err, err
    stranger = tmp_path / "stranger.npz"
    save(stranger, Fitted("no-such-method", {"w": np.zeros(3)}))
    assert main(["annotate", str(stranger), photo, "--dataset", ds]) == 2
    assert "unknown method 'no-such-method'" in capsys.readouterr().err


def test_features_progress_bar_and_bad_output_folder(
    photo_run, tmp_path, capsys, monkeypatch
):
    root = photo_run[0]
    small = tmp_path / "few"
    write_synthetic_photos(small, per_kind=1)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # bars need a terminal
    assert main(["features", str(small), "--out", str(tmp_path / "ds"), *SMALL]) == 0
    captured = capsys.readouterr()
    assert "photos:" in captured.err  # the progress bar (no --quiet)
    assert "jaxannot: featurizing 6 file(s)" in captured.err
    assert "skipped 0 file(s)" in captured.out
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    assert main(["features", str(small), "--out", str(busy), "--quiet"]) == 2
    assert "not a photo dataset" in capsys.readouterr().err
    assert main(["features", str(tmp_path / "none"), "--out", str(busy)]) == 2
    assert "not a folder of photos" in capsys.readouterr().err
    again = ["features", str(small), "--out", str(tmp_path / "again")]
    assert main([*again, "--extractor", str(tmp_path / "ds"), "--size", "64"]) == 2
    assert "drop --size" in capsys.readouterr().err
    assert main([*again, "--extractor", str(tmp_path / "ds"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "6 photos featurized" in captured.out
    assert captured.err == ""  # --quiet: no bar, no progress messages
    model = tmp_path / "m.npz"
    save(model, Fitted("empirical", {"frequency": np.ones(5)}))
    assert main(["annotate", str(model), "--dataset", str(tmp_path / "ds")]) == 2
    assert "has no tags" in capsys.readouterr().err
    tags = root / "tags.csv"
    assert main(["features", str(small), "--tags", str(tags) + "x", "--out", "o"]) == 2
    assert "does not exist" in capsys.readouterr().err


def _ramp_16bit():
    return np.round(np.linspace(0, 65535, 80))[None, :].repeat(48, 0).astype(np.uint16)


def test_a_folder_of_odd_files(tmp_path, capsys):
    """A named pipe, a 16-bit PNG, a 1x1 image, a non-ASCII name and a tags line
    with commas: the tags line is an error naming it (checked in process), the pipe
    is skipped without blocking (in a subprocess, under a timeout), the rest are
    featurized."""
    from PIL import Image

    photos = tmp_path / "photos"
    tags = write_synthetic_photos(photos, per_kind=1, seed=2)
    os.mkfifo(photos / "pipe.png")
    Image.fromarray(_ramp_16bit()).save(photos / "deep16.png")
    Image.fromarray(np.full((1, 1, 3), 200, np.uint8)).save(photos / "tiny.png")
    unicode_name = "été 写真.jpg"
    shutil.copy(photos / "photo000.jpg", photos / unicode_name)
    tags.update({unicode_name: tags["photo000.jpg"], "tiny.png": ["grey", "dot"]})
    rows = "".join(f"{f},{' '.join(t)}\n" for f, t in tags.items())
    csv = tmp_path / "tags.csv"
    csv.write_text("file,tags\n" + rows + "deep16.png,grey,ramp\n", encoding="utf-8")
    out = tmp_path / "ds"
    argv = [sys.executable, "-m", "jaxannot.cli", "features", str(photos), "--tags",
            str(csv), "--out", str(out), *SMALL, "--quiet"]  # fmt: skip

    def run():
        return subprocess.run(
            argv, capture_output=True, encoding="utf-8", timeout=300
        )  # a read of the pipe would block: the timeout fails the test

    assert main(argv[3:]) == 2
    bad = capsys.readouterr().err
    line = len(tags) + 2
    assert bad.startswith(f"jaxannot: error: {csv}, line {line}: 3 fields")
    assert bad.count("\n") == 1 and not out.exists()
    csv.write_text("file,tags\n" + rows + "deep16.png,grey ramp\n", encoding="utf-8")
    good = run()
    assert good.returncode == 0, good.stderr
    assert "Traceback" not in good.stderr
    skipped = "jaxannot: warning: skipped pipe.png: not a readable image (not a "
    assert good.stderr == skipped + "regular file)\n"
    assert "9 photos featurized" in good.stdout and "skipped 1 file" in good.stdout
    table = (out / "photos.csv").read_text(encoding="utf-8").splitlines()[1:]
    by_file = {r.split(",")[0]: r.split(",")[2] for r in table}
    assert by_file[unicode_name] == " ".join(tags["photo000.jpg"])
    assert by_file["deep16.png"] == "grey ramp" and by_file["tiny.png"] == "grey dot"
    train, test = load_photo_dir(out)
    colour = np.concatenate([train.views["colour"], test.views["colour"]])
    assert colour.shape[0] == 9 and np.isfinite(colour).all()


def test_a_very_large_photo_is_one_warning_line_naming_it(
    tmp_path, capsys, monkeypatch
):
    """Pillow's DecompressionBombWarning, under --quiet: one `jaxannot: warning:`
    line with the file's path, and the photo is featurized."""
    from PIL import Image

    photos = tmp_path / "photos"
    write_synthetic_photos(photos, per_kind=1)  # 64 x 64 = 4096 pixels each
    Image.fromarray(np.zeros((60, 100, 3), np.uint8)).save(photos / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5000)  # 6000: over, not twice
    argv = ["features", str(photos), "--out", str(tmp_path / "ds"), *SMALL, "-q"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"jaxannot: warning: {photos / 'big.png'}: Image size (6000 pixels) exceeds "
        "limit of 5000 pixels, could be decompression bomb DOS attack.\n"
    )
    assert "7 photos featurized" in captured.out


def _metrics(dataset, folder) -> dict:
    """knn's evaluation metrics on ``dataset`` (in this process)."""
    result = folder / "knn.json"
    assert main(["evaluate", "knn", "--dataset", str(dataset), "--json",
                 str(result), "--quiet"]) == 0  # fmt: skip
    return json.loads(result.read_text())["metrics"]


def test_killing_a_rebuild_leaves_the_dataset_as_it_was(tmp_path, capsys):
    """SIGKILL and SIGINT at seeded random moments of `features` re-run into an
    existing dataset (while it featurizes the photos, while it writes the new
    dataset): `evaluate` then gives the old dataset's metrics, or the new one's
    when the run had already swapped it in; never an error. The next complete run
    removes what the killed ones left."""
    photos, out = tmp_path / "photos", tmp_path / "ds"
    tags = write_synthetic_photos(photos, per_kind=3, seed=3)
    rows = "".join(f"{f},{' '.join(t)}\n" for f, t in tags.items())
    (tmp_path / "tags.csv").write_text("file,tags\n" + rows)
    argv = ["features", str(photos), "--tags", str(tmp_path / "tags.csv"), *SMALL]
    began = time.monotonic()
    assert main([*argv, "--out", str(tmp_path / "new"), "--seed", "1", "-q"]) == 0
    featurizing = time.monotonic() - began  # in this process: no imports
    new = _metrics(tmp_path / "new", tmp_path)
    assert main([*argv, "--out", str(out), "-q"]) == 0
    old = _metrics(out, tmp_path)
    assert new != old  # the re-runs use another split
    shutil.copytree(out, tmp_path / "copy")
    rerun = [sys.executable, "-m", "jaxannot.cli", *argv, "--out", str(out),
             "--seed", "1"]  # fmt: skip
    rng = np.random.default_rng(0)
    outcomes = []
    for sig, phase, longest in (
        (signal.SIGKILL, "featurizing", 0.8 * featurizing),
        (signal.SIGINT, "featurizing", 0.8 * featurizing),
        (signal.SIGKILL, "writing", 0.3),
        (signal.SIGINT, "writing", 0.3),
    ):
        proc = subprocess.Popen(rerun, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr:  # its progress messages, until the phase starts
            if line.startswith(f"jaxannot: {phase}"):
                break
        time.sleep(rng.uniform(0.0, longest))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
        assert "Traceback" not in err, err
        metrics = _metrics(out, tmp_path)
        assert metrics in (old, new)
        # SIGINT: 130, or death by the signal (-2; a shell shows 130 for both)
        if sig == signal.SIGINT and err.endswith("jaxannot: interrupted\n"):
            assert proc.returncode in (130, -signal.SIGINT)  # stopped, cleaned up
            assert not list(tmp_path.glob(f".jaxannot-{proc.pid}-*"))
        elif sig == signal.SIGINT:  # it had finished, or was exiting
            assert proc.returncode in (0, -signal.SIGINT) and metrics == new, err
        outcomes.append((sig, metrics == old))
        if metrics == new:  # finished before the signal: start again from the old
            shutil.rmtree(out)
            shutil.copytree(tmp_path / "copy", out)
    assert (signal.SIGKILL, True) in outcomes, outcomes
    assert (signal.SIGINT, True) in outcomes, outcomes
    # a new process: leftovers are removed only when older than the process that
    # finds them (data/atomic.py), so an in-process run here would keep them
    assert subprocess.run(rerun, capture_output=True, timeout=300).returncode == 0
    assert _metrics(out, tmp_path) == new
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "copy",
        "ds",
        "knn.json",
        "new",
        "photos",
        "tags.csv",
    ]
    capsys.readouterr()


EVIL = "evil\x1b]0;PWNED\x07\x1b[2J"  # retitles the terminal, then clears it


def _dds_with_an_unknown_pixel_format() -> bytes:
    """A DDS file Pillow opens but cannot decode (NotImplementedError)."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGBA", (8, 8)).save(buffer, "DDS")
    data = bytearray(buffer.getvalue())
    data[80:88] = (4).to_bytes(4, "little") + b"ZZZZ"  # DDPF_FOURCC, unknown
    return bytes(data)


def test_annotate_names_escaped_and_odd_formats_skipped(
    photo_run, featurized, tmp_path, capsys
):
    """Control characters of a file name never reach the terminal (stdout or the
    skip warning), and a file Pillow half knows is skipped, not fatal."""
    root = photo_run[0]
    assert featurized.returncode == 0, featurized.stderr
    ds, model = str(root / "ds"), str(tmp_path / "knn.npz")
    argv = ["evaluate", "knn", "--dataset", ds, "--save", model, "--set", "k=5"]
    assert main(argv) == 0  # the k of the test above: its compiled knn
    evil = tmp_path / f"{EVIL}.jpg"
    shutil.copy(root / "photos" / "photo000.jpg", evil)
    (tmp_path / f"{EVIL}.txt").write_text("not a photo")
    (tmp_path / "texture.jpg").write_bytes(_dds_with_an_unknown_pixel_format())
    capsys.readouterr()
    names = [str(evil), str(tmp_path / f"{EVIL}.txt"), str(tmp_path / "texture.jpg")]
    assert main(["annotate", model, *names, "--dataset", ds, "--top", "2"]) == 0
    out, err = capsys.readouterr()
    for text in (out, err):
        assert not any(c in text for c in "\x1b\x07"), repr(text)
    assert out.startswith(str(tmp_path / "evil\\x1b]0;PWNED\\x07\\x1b[2J.jpg: "))
    assert "evil\\x1b]0;PWNED\\x07\\x1b[2J.txt: not a readable image" in err
    assert "texture.jpg: not a readable image (NotImplementedError" in err


def test_a_tags_file_that_is_not_a_regular_file_says_what_it_is(tmp_path, capsys):
    """A folder or a named pipe as --tags read 'does not exist'; now the line says
    what the path is (and a pipe is never opened, so nothing blocks)."""
    photos = tmp_path / "photos"
    photos.mkdir()
    os.mkfifo(tmp_path / "pipe.csv")
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "broken.csv").symlink_to(tmp_path / "gone.csv")
    for name, expected in (
        ("folder.csv", "is a folder, not a CSV file"),
        ("pipe.csv", "is a named pipe, not a regular file"),
        ("broken.csv", "is a broken symbolic link"),
        ("missing.csv", "does not exist"),
    ):
        tags = tmp_path / name
        argv = ["features", str(photos), "--tags", str(tags)]
        assert main([*argv, "--out", str(tmp_path / "ds")]) == 2
        err = capsys.readouterr().err
        assert err == f"jaxannot: error: tags file {tags} {expected}" + (
            ": write the tags to a CSV file (header file,tags)\n"
            if name == "pipe.csv"
            else "\n"
        ), err
    assert not (tmp_path / "ds").exists()
