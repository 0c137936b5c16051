"""Record the cross-validation a method's defaults come from.

Runs :func:`jaxannot.tuning.cross_validate` on a dataset's TRAINING images only (the
test split is never loaded into a fold) over a small grid and writes the record
``benchmarks/results/defaults_cv/METHOD_DATASET.json``: the grid, the folds, the metric,
every setting's mean ± sd over the folds (and the other metrics' means), the winner, the
defaults at the time of the run and the figures of the default setting. The current
default of every grid key is added to its values when missing, so the record always
holds the defaults' own figures. A numeric winner at either end of its grid is flagged
(``edge``): extend the grid past it before taking it as a default.

A record file holds a list of runs (a later run over the same grid replaces it; the
last run over a key decides its default), so a method can be tuned in stages, a grid
extended past an edge winner by a later run. ``hyper_defaults.toml`` names the record
of every default whose origin is ``"cv"``; ``tests/annotators/test_defaults.py`` checks
that the default equals the recorded winner (for a default with ``rule =
"smallest_within_1se"``, the smallest value within one standard error of the best
setting's score:
:func:`jaxannot.tuning.selection.smallest_within_one_se`).

    OPENBLAS_NUM_THREADS=1 nice -n 10 .venv/bin/python -m tools.defaults_cv emml \\
        --dataset corel5k --grid gamma_scale=1,2,4,8,30 --grid solver=exact,none \\
        --folds 3 --data-dir DATA

``--labelled-fraction 0.1`` keeps the words of 10 % of each fit fold's images (the
semi-supervised setting of sfsls / sfss / fsnm); the record says so per run.

Each run also stores what ``defaults_guard.py`` recomputes from the split it names
(issue 42): ``split_seed``; ``train_rows``, the dataset rows cross-validated when the
dataset has no split (``jaxannot evaluate --seed S``'s 70 %; ``null`` with a split);
``train_fingerprint`` of those images; ``n_labelled``, each fold's labelled fit
images. A dataset without a split (3sources) is cross-validated once per evaluation
seed, ``--seed S`` inside seed S's training part; the record keeps a run per seed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from jaxannot.annotators import get_method
from tools.defaults_record import (
    RESULTS,
    annotate_run,
    record_path,
    run_record,
    save_run,
    value_order,
)

os.environ.setdefault("TQDM_DISABLE", "1")


def _signed(mean: float | None, sign: float) -> float:
    """``sign * mean`` for ranking; a diverged setting (``null`` mean) ranks last."""
    return -float("inf") if mean is None else sign * mean


def import_runs(paths: list[Path], as_keys: list[str] | None = None) -> dict:
    """One record run from ``jaxannot tune --json`` outputs of the same protocol
    (method, dataset, folds, seed, metric, protocol, images) over the same grid keys:
    their settings side by side, the best of all of them the winner. Every setting
    keeps its fold scores; none is re-run.

    A one-setting output over *another* grid key is taken as the setting of the
    first output's key(s) when its hyper-parameters equal that setting's in every
    other key: one fit of the defaults serves every one-key record it is the default
    of (the same fit, so the same scores); ``shared_from`` names such files.

    ``as_keys`` records one-setting outputs as a grid over those keys instead
    (``--as``): they must differ in nothing else, e.g. emml's ``word_rule`` from two
    runs of ``--grid vrep_method=kmeans`` with ``--set word_rule=...``."""
    tunes = [json.loads(Path(p).read_text()) for p in paths]
    same = ("method", "dataset", "folds", "seed", "metric", "protocol", "n_images")
    if as_keys:
        for t, p in zip(tunes, paths, strict=True):
            if not _relabel(t, tunes[0], as_keys):
                raise SystemExit(
                    f"{p}: not one setting that differs from {paths[0]} only in "
                    f"{as_keys}"
                )
    first = tunes[0]
    shared = []
    for t, p in zip(tunes, paths, strict=True):
        bad = [k for k in same if t[k] != first[k]]
        if not bad and sorted(t["grid"]) != sorted(first["grid"]):
            if not _relabel(t, first, list(first["grid"])):
                raise SystemExit(
                    f"{p}: grid keys {sorted(t['grid'])} differ from {paths[0]}'s and "
                    "it is not one setting of the same fit at their keys"
                )
            shared.append(Path(p).as_posix())
        if bad:
            raise SystemExit(f"{p}: differs from {paths[0]} in {bad}")
    rows = [r for t in tunes for r in t["results"]]
    hypers = [
        {**t["best"]["hyper"], **r["params"]} for t in tunes for r in t["results"]
    ]
    fixed = {k: v for k, v in hypers[0].items() if all(h[k] == v for h in hypers)}
    grid = {
        k: sorted({r["params"][k] for r in rows}, key=value_order)
        for k in first["grid"]
    }
    sign = 1.0 if first["higher_is_better"] else -1.0
    best = max(range(len(rows)), key=lambda i: _signed(rows[i]["mean"], sign))
    out = {
        **{k: first[k] for k in (*same, "higher_is_better", "labelled_fraction")},
        "grid": grid,
        "fixed": {k: v for k, v in fixed.items() if k not in grid},
        "seconds": sum(t["seconds"] for t in tunes),
        "results": rows,
        "best": rows[best],
        "platform": [t.get("platform") for t in tunes],
    }
    method = get_method(first["method"])
    return annotate_run(
        out,
        dict(method.hyper),
        imported_from=[Path(p).as_posix() for p in paths],
        **({"shared_from": shared} if shared else {}),
    )


def _relabel(tune: dict, like: dict, keys: list[str]) -> bool:
    """Re-key a one-setting ``tune`` by ``keys`` (in place) when its
    hyper-parameters equal ``like``'s but for those keys; False if they don't."""
    if len(tune["results"]) != 1:
        return False
    hyper, other = tune["best"]["hyper"], like["best"]["hyper"]
    if any(hyper.get(k) != v for k, v in other.items() if k not in keys):
        return False
    if set(hyper) != set(other):
        return False
    row = {**tune["results"][0], "params": {k: hyper[k] for k in keys}}
    tune["grid"] = {k: [hyper[k]] for k in keys}
    tune["results"] = [row]
    tune["best"] = {**tune["best"], "params": row["params"]}
    return True


def main(argv: list[str] | None = None) -> int:
    p = script_parser(__doc__)
    p.add_argument("method")
    p.add_argument("--dataset", required=True)
    p.add_argument("--grid", action="append", help="key=v1,v2,...")
    p.add_argument(
        "--import",
        dest="imports",
        nargs="+",
        type=Path,
        help="record these `jaxannot tune --json` outputs (no fit is run)",
    )
    p.add_argument(
        "--as",
        dest="as_keys",
        action="append",
        help="with --import: record one-setting outputs as a grid over this key",
    )
    p.add_argument("--set", action="append", help="key=value held fixed")
    p.add_argument("--folds", type=int, default=3)
    p.add_argument("--metric", default=None, help="default: the tune default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--labelled-fraction",
        type=float,
        default=None,
        help="fraction of each fit fold's images with observed words (the rest "
        "unlabelled, for the semi-supervised methods); default: every image",
    )
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    use_device(args.device)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if "--data-dir" in args.argv:
        i = args.argv.index("--data-dir")
        del args.argv[i : i + 2]
    start = time.perf_counter()
    if bool(args.grid) == bool(args.imports):
        p.error("give --grid (run the cross-validation) or --import (record runs)")
    if args.as_keys and not args.imports:
        p.error("--as goes with --import")
    run = import_runs(args.imports, args.as_keys) if args.imports else run_record(args)
    path = record_path(args.method, args.dataset, args.out)
    save_run(path, args.method, args.dataset, run)
    w, d = run["best"], run["default"] or {"params": None, "mean": None}
    default = "diverged" if d["mean"] is None else f"{d['mean']:.4f}"
    print(
        f"{args.method} {args.dataset}: winner {w['params']} {run['metric']} "
        f"{w['mean']:.4f} ± {w['sd']:.4f}; default {d['params']} {default}; "
        f"edge {run['edge']}; {time.perf_counter() - start:.0f} s -> {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
