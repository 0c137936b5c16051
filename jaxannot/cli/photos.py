"""``jaxannot features`` and ``jaxannot annotate``: your own photos.

``jaxannot features PHOTOS_DIR [--tags tags.csv] --out DATASET_DIR``
    Featurize a folder of photos into a dataset directory that every method reads
    (``jaxannot evaluate METHOD --dataset DATASET_DIR``); see
    :mod:`jaxannot.data.photos` for the format.
``jaxannot annotate MODEL PHOTO... --dataset DATASET_DIR [--top N]``
    Top tags of new photos under a model saved by ``jaxannot evaluate METHOD
    --dataset DATASET_DIR --save MODEL``. A saved model does not know how its
    features were made, so ``--dataset`` names the photo dataset whose extractor
    (codebook and settings) featurizes the photos and whose tag vocabulary names the
    scores. Without PHOTO arguments, the dataset's unlabelled photos are annotated.

Registered in :func:`jaxannot.cli.parser.build_parser` by :func:`add_photo_commands`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import stat
from collections.abc import Callable

__all__ = ["add_photo_commands"]

log = logging.getLogger(__name__)


def _cmd_features(args) -> int:
    from jaxannot.annotators.base import show_progress
    from jaxannot.cli.files import (
        WRITE_ERRNOS,
        check_writable_output,
        refuse_overwriting_inputs,
        writing,
    )
    from jaxannot.data.extractor_settings import ExtractorSettings
    from jaxannot.data.photo_build import build_photo_dataset
    from jaxannot.data.photo_extractor import PhotoExtractor

    if not os.path.isdir(args.photos):
        raise NotADirectoryError(f"{args.photos}: not a folder of photos")
    if args.tags is not None:
        _check_tags_file(args.tags)
    # --out may lie inside PHOTOS_DIR (it is left out of the photos) or be the
    # dataset it rebuilds: the old folder is replaced only once the new one is built
    # (its other entries carried over); it may not be the tags file or the
    # extractor's files, through a link or a hard link either
    inputs = {"--tags": [args.tags] if args.tags is not None else []}
    if args.extractor is not None:
        folder = pathlib.Path(args.extractor)
        inputs["--extractor"] = [folder / "extractor.json", folder / "extractor.npz"]
    refuse_overwriting_inputs({"--out": args.out}, inputs)
    check_writable_output(args.out, folder=True)
    chosen = {"size": args.size, "daisy_step": args.step, "codebook_size": args.words}
    chosen = {k: v for k, v in chosen.items() if v is not None}
    settings = extractor = None
    if args.extractor is not None:
        if chosen:
            raise ValueError(
                "--extractor fixes the features: drop --size/--step/--words"
            )
        extractor = PhotoExtractor.load(args.extractor)
    else:
        settings = ExtractorSettings(seed=args.seed, **chosen)
    with writing(args.out, WRITE_ERRNOS):  # reading errors say what they read
        result = build_photo_dataset(
            args.photos,
            args.out,
            tags=args.tags,
            settings=settings,
            extractor=extractor,
            test_fraction=args.test_fraction,
            seed=args.seed,
            name=args.name,
            progress=show_progress(),
        )  # each file skipped is logged as a warning
    if result.unmatched_tags:
        shown = ", ".join(result.unmatched_tags[:5])
        more = len(result.unmatched_tags) - 5
        log.warning(
            "%d file(s) of the tags file are not among the photos: %s%s",
            len(result.unmatched_tags),
            shown,
            f" and {more} more" if more > 0 else "",
        )
    print(
        f"{len(result.files)} photos featurized into {args.out} "
        f"({result.count('train')} train, {result.count('test')} test, "
        f"{result.count('unlabelled')} unlabelled; {len(result.tags)} tags)"
    )
    print(f"skipped {len(result.skipped)} file(s) that are not readable images")
    return 0


def _check_tags_file(path: str) -> None:
    """``--tags`` names a regular file that can be read, else what it is instead."""
    if not os.path.lexists(path):
        raise FileNotFoundError(f"tags file {path} does not exist")
    if not os.path.exists(path):
        raise FileNotFoundError(f"tags file {path} is a broken symbolic link")
    if os.path.isdir(path):
        raise IsADirectoryError(f"tags file {path} is a folder, not a CSV file")
    if not os.path.isfile(path):
        kind = "named pipe" if stat.S_ISFIFO(os.stat(path).st_mode) else "special file"
        raise ValueError(
            f"tags file {path} is a {kind}, not a regular file: write the tags to a "
            "CSV file (header file,tags)"
        )
    if not os.access(path, os.R_OK):
        raise PermissionError(f"tags file {path} cannot be read (permission denied)")


def _cmd_annotate(args) -> int:
    import numpy as np

    from jaxannot.annotators.persistence import load_scorer
    from jaxannot.data.photos import read_manifest

    _check_photo_args(args)  # command-line mistakes: before any work
    fitted, method = load_scorer(args.model)
    if method.score_words is None:
        raise ValueError(f"method {method.name!r} does not score tags")
    vocabulary = list(read_manifest(args.dataset)["tags"])
    if not vocabulary:
        raise ValueError(f"{args.dataset} has no tags (built without --tags)")
    corpus, names = _photos_to_annotate(args)
    log.info("scoring %d photo(s) with %s", corpus.num_images, method.name)
    try:
        scores = np.asarray(method.score_words(fitted, corpus))
    except ValueError as err:  # the photos' features do not fit the model's
        raise ValueError(f"model {args.model}: {err}") from None
    if scores.ndim != 2 or scores.shape[1] != len(vocabulary):
        raise ValueError(
            f"{args.model} scores {scores.shape[-1]} tags, the dataset "
            f"{args.dataset} has {len(vocabulary)}: was the model fitted on it?"
        )
    _print_tags(names, scores, vocabulary, min(args.top, len(vocabulary)), args.json)
    return 0


def _check_photo_args(args) -> None:
    """``--top`` >= 1 and every PHOTO an existing regular file."""
    if args.top < 1:
        raise ValueError(f"--top must be >= 1, got {args.top}")
    for photo in args.photos:
        if os.path.isdir(photo):
            raise ValueError(
                f"photo {photo} is a folder: name image files (a folder of photos "
                f"becomes a dataset with `jaxannot features {photo} --out DIR`)"
            )
        if not os.path.exists(photo):
            raise FileNotFoundError(f"photo {photo} does not exist")
        if not os.path.isfile(photo):
            raise ValueError(f"photo {photo} is not a regular file")


def _photos_to_annotate(args):
    """``(corpus, names)``: the PHOTOs featurized by the dataset's extractor (the
    unreadable ones skipped with a warning), or else the dataset's unlabelled
    photos."""
    import numpy as np

    from jaxannot.annotators.base import show_progress
    from jaxannot.data.datasets import load_dataset
    from jaxannot.data.photos import photo_corpus

    if args.photos:
        skipped = []

        def skip(path: str, message: str) -> None:  # as `features` does
            skipped.append(path)
            log.warning("skipped %s", message)

        corpus = photo_corpus(
            args.dataset, args.photos, progress=show_progress(), on_error=skip
        )
        names = [p for p in args.photos if p not in skipped]
        if not names:
            raise ValueError(
                f"none of the {len(args.photos)} photo(s) is a readable image"
            )
        return corpus, names
    train, _ = load_dataset(args.dataset)
    rows = np.flatnonzero(~np.asarray(train.word_mask, dtype=bool))
    if rows.size == 0:
        raise ValueError(f"{args.dataset} has no unlabelled photos; name PHOTOs")
    return train.subset(rows), _unlabelled_files(args.dataset)


def _print_tags(names, scores, vocabulary, top: int, as_json: bool) -> None:
    """Each photo's ``top`` tags and scores: a line ``photo: tag score ...``, or a
    JSON object per line with ``as_json``."""
    import numpy as np

    from jaxannot.data.errors import printable

    for name, row in zip(names, scores, strict=True):
        best = np.argsort(-row, kind="stable")[:top]
        tags = [(vocabulary[j], float(row[j])) for j in best]
        if as_json:
            print(
                json.dumps(
                    {
                        "photo": name,
                        "tags": [t for t, _ in tags],
                        "scores": [s for _, s in tags],
                    }
                )
            )
        else:
            shown = "  ".join(f"{printable(t)} {s:.3f}" for t, s in tags)
            print(f"{printable(name)}: {shown}")


def _unlabelled_files(folder) -> list[str]:
    import csv

    with open(pathlib.Path(folder) / "photos.csv", encoding="utf-8") as fh:
        return [r["file"] for r in csv.DictReader(fh) if r["split"] == "unlabelled"]


def _add_dataset_dir(parser, flag: str, help: str, required: bool = False) -> None:
    """An option naming a photo dataset directory (written by ``features``)."""
    parser.add_argument(flag, required=required, metavar="DATASET_DIR", help=help)


def add_photo_commands(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``features`` and ``annotate`` through ``add(name, func, **parser_kwargs)``
    (:func:`jaxannot.cli.parser.build_parser`'s sub-command factory)."""
    fe = add(
        "features",
        _cmd_features,
        help="turn a folder of photos into a dataset directory",
        description=(
            "Featurize every image under PHOTOS_DIR (recursively) into DATASET_DIR: "
            "an HSV colour histogram, LBP + Gabor texture, and DAISY visual words "
            "over a k-means codebook learned on these photos. Files that are not "
            "readable images are reported and skipped. Photos without a row in "
            "--tags are unlabelled: their tags are hidden from every method."
        ),
        epilog=(
            "example: jaxannot features photos/ --tags tags.csv --out mydata && "
            "jaxannot evaluate knn --dataset mydata --save knn.npz"
        ),
    )
    fe.add_argument("photos", metavar="PHOTOS_DIR", help="folder of JPEG/PNG files")
    fe.add_argument(
        "--tags", default=None, help="CSV with header file,tags (tags space-separated)"
    )
    fe.add_argument("--out", required=True, metavar="DATASET_DIR")
    fe.add_argument(
        "--test-fraction",
        type=float,
        default=0.3,
        help="seeded random fraction of the labelled photos held out as test (0.3)",
    )
    fe.add_argument("--words", type=int, default=None, help="codebook size (100)")
    fe.add_argument(
        "--size", type=int, default=None, help="photos are resized to SIZE x SIZE (160)"
    )
    fe.add_argument("--step", type=int, default=None, help="DAISY grid step, px (12)")
    _add_dataset_dir(
        fe, "--extractor", "reuse this dataset's extractor (codebook, settings) as is"
    )
    fe.add_argument("--seed", type=int, default=0, help="seeds the split and k-means")
    fe.add_argument("--name", default=None, help="dataset name (the folder's name)")

    an = add(
        "annotate",
        _cmd_annotate,
        help="top tags of photos under a saved model",
        description=(
            "Print the top tags of each PHOTO under MODEL (saved by `jaxannot "
            "evaluate METHOD --dataset DATASET_DIR --save MODEL`). The photos are "
            "featurized by DATASET_DIR's saved extractor; with no PHOTO, the "
            "dataset's unlabelled photos are annotated."
        ),
    )
    an.add_argument("model", metavar="MODEL", help="a model saved by evaluate --save")
    an.add_argument("photos", metavar="PHOTO", nargs="*", help="image files")
    _add_dataset_dir(
        an, "--dataset", "the photo dataset the model was fitted on", required=True
    )
    an.add_argument("--top", type=int, default=5, help="tags per photo (5)")
    an.add_argument("--json", action="store_true", help="one JSON object per line")
