"""``jaxannot features`` and ``jaxannot annotate`` end to end on synthetic photos."""

import json
import subprocess
import sys

import numpy as np
import pytest

from jaxannot.annotators import Fitted, save
from jaxannot.cli import main
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
    assert main(["evaluate", "knn", "--dataset", ds, "--save", model]) == 0
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
