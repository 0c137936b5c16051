"""A method's defaults record (``benchmarks/results/defaults_cv/METHOD_DATASET.json``):
one run of a cross-validation over a key, its split's fields, and where it is saved
(``tools.defaults_cv``, ``tools.ensemble_defaults_cv``)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from benchmarks.common.records import RESULTS as RECORDS
from benchmarks.common.records import write_json
from jaxannot.annotators import get_method
from jaxannot.data.datasets import load_dataset
from jaxannot.tuning import cross_validate, parse_grid, training_images
from jaxannot.tuning.folds import corpus_fingerprint, labelled_counts, training_rows

RESULTS = RECORDS / "defaults_cv"


def record_path(method: str, dataset: str, root: Path = RESULTS) -> Path:
    """Where the record of ``method``'s defaults on ``dataset`` lives."""
    return root / f"{method}_{dataset}.json"


def _with_defaults(grid: dict, defaults: dict) -> dict:
    """``grid`` with each key's current default added to its values when missing."""
    return {
        k: v if defaults[k] in v else sorted([*v, defaults[k]], key=value_order)
        for k, v in grid.items()
    }


def value_order(v: object) -> tuple:
    """The sort key of a grid's values: numbers first, by value, then the rest as
    strings."""
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def _edges(grid: dict, winner: dict) -> dict:
    """Per numeric key: ``"low"`` / ``"high"`` when the winner is at that end."""
    out = {}
    for k, values in grid.items():
        numeric = [v for v in values if isinstance(v, (int, float))]
        if len(numeric) < 2 or isinstance(winner[k], bool):
            continue
        if winner[k] == min(numeric):
            out[k] = "low"
        elif winner[k] == max(numeric):
            out[k] = "high"
    return out


def annotate_run(out: dict, defaults: dict, **extra) -> dict:
    """A record run: the tune JSON ``out`` with the grid keys, the defaults when it
    ran, the default setting's row and the winner's edges."""
    default_params = {k: defaults[k] for k in out["grid"]}
    rows = [r for r in out["results"] if r["params"] == default_params]
    return {
        "grid_keys": sorted(out["grid"]),
        "split": "train",
        **out,
        "defaults_at_run": defaults,
        "default": rows[0] if rows else None,
        "edge": _edges(out["grid"], out["best"]["params"]),
        **extra,
    }


def run_record(args) -> dict:
    """Cross-validate ``args.grid`` (plus the current defaults) on the training
    images of ``args.dataset``; the record run."""
    method = get_method(args.method)
    grid = _with_defaults(parse_grid(method, args.grid), dict(method.hyper))
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    corpus = training_images(train, test, seed=args.seed)
    split = split_fields(train, test, corpus, args)
    result = cross_validate(
        method,
        corpus,
        grid,
        folds=args.folds,
        metric=args.metric,
        seed=args.seed,
        fixed=args.set or [],
        labelled_fraction=args.labelled_fraction,
    )
    command = "python -m tools.defaults_cv " + " ".join(
        shlex.quote(a) for a in args.argv
    )
    return annotate_run(result.as_json(), dict(method.hyper), command=command, **split)


def split_fields(train, test, corpus, args) -> dict:
    """What a record run says about the images it cross-validated, for
    ``defaults_guard.py`` to recompute: the seed of the training split, its rows
    in the dataset (a dataset without a split: the seeded 70 % of
    ``jaxannot evaluate --seed``; ``None`` with a split: every training image), the
    fingerprint of those images and each fold's count of labelled fit images."""
    rows = training_rows(train, test, seed=args.seed)
    return {
        "split_seed": args.seed,
        "train_rows": None if rows is None else [int(r) for r in rows],
        "train_fingerprint": corpus_fingerprint(corpus),
        "n_labelled": labelled_counts(
            corpus,
            args.folds,
            labelled_fraction=args.labelled_fraction,
            seed=args.seed,
        ),
    }


def save_run(path: Path, method: str, dataset: str, run: dict) -> dict:
    """Add ``run`` to the record at ``path`` (replacing a run over the same grid
    and seed: a dataset without a split keeps one run per seed, each on that
    seed's training part) and write it atomically; returns the record."""
    record = {"method": method, "dataset": dataset, "runs": []}
    if path.exists():
        record = json.loads(path.read_text())
    runs = [
        r
        for r in record["runs"]
        if (r["grid"], r["seed"]) != (run["grid"], run["seed"])
    ]
    record["runs"] = [*runs, run]
    write_json(path, record, allow_nan=False)
    return record
