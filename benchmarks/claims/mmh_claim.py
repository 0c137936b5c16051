"""MMH's claim (seed 001 §5.1): MMH against TWH, DWH+SVM and the flat SVM on every
multi-view labelled dataset here, several seeds each.

Each run is ``jaxannot evaluate METHOD --dataset D --seed S`` (inductive protocol) in
this process: wikipedia keeps its own split (the seed changes the model's key only),
mfeat, msrc, 3sources and bbcsport have no split and get ``make_task``'s random 70/30
split drawn with the seed (so the seed changes the split and the key). The methods
run at their registered defaults (``jaxannot/annotators/hyper_defaults.toml``),
cross-validated on the *training* images of wikipedia, except a default decided on a
dataset without a split (3sources' bag model): on that dataset each seed takes the
value the record's cross-validation inside *that seed's* 70 % chose
(:func:`seed_defaults`, recorded under ``nested``), since the other seeds' training
parts hold its test images. A *variant* ``METHOD:key=value,key=value`` runs a
method with settings changed (the diagnosis's controlled experiments); its label in
the JSON and the table is the spec itself.

The JSON keeps every run (accuracy, fit seconds, the settings, MMH's final V-step
gap) keyed by dataset, seed and label; a later invocation adds runs to it, so the
grid can be run a dataset at a time. The table is mean ± sd over the seeds.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.claims.mmh_claim \\
        --datasets wikipedia mfeat msrc 3sources bbcsport --seeds 0 1 2 3 4 \\
        --json benchmarks/results/mmh_claim.json
    python -m benchmarks.claims.mmh_claim \\
        --json benchmarks/results/mmh_claim.json --table
    python -m benchmarks.claims.mmh_claim \\
        --json benchmarks/results/mmh_claim.json --table \\
        --methods mmh mmh:c1=1e-6,c2=1e-6     # variants' columns
"""

from __future__ import annotations

import json
import pathlib
import shlex
import sys
import time

import numpy as np

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from benchmarks.common.records import write_json
from tools.defaults_guard import load_record, nested_keys, seed_choice

METHODS = ("mmh", "twh", "dwh-svm", "svm")
DATASETS = ("wikipedia", "mfeat", "msrc", "3sources", "bbcsport")
ABOUT = (
    "jaxannot evaluate METHOD --dataset D --seed S, inductive protocol; wikipedia on "
    "its own split (the seed changes the key), the others on a random 70/30 split "
    "drawn with the seed; registered defaults (cross-validated on wikipedia's "
    "training images) unless the label gives settings, and on 3sources the bag "
    "model chosen by the CV inside each seed's own training images ('nested'); "
    "accuracy on the test images"
)


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    """``"mmh:c1=0.01,topics=40"`` -> ``("mmh", {"c1": "0.01", "topics": "40"})``;
    a bare method name has no settings."""
    method, _, rest = spec.partition(":")
    settings = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise ValueError(
                f"variant {spec!r}: expected METHOD:key=value[,key=value...], "
                f"got the item {item!r}"
            )
        settings[key.strip()] = value.strip()
    if not method:
        raise ValueError(f"variant {spec!r}: no method before ':'")
    return method, settings


def summarize(values) -> tuple[float, float, int]:
    """Mean, sample standard deviation (0 for one value) and count."""
    values = np.asarray(values, dtype=float)
    sd = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return float(values.mean()), sd, int(values.size)


def table(runs: list[dict], labels=None, datasets=None) -> str:
    """Markdown table of mean ± sd accuracy (and the number of seeds when they
    differ from the row's most common count), one row per dataset, one column per
    label, the best mean of a row in bold."""
    labels = labels or list(dict.fromkeys(r["label"] for r in runs))
    datasets = datasets or list(dict.fromkeys(r["dataset"] for r in runs))
    lines = [
        "| dataset | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for d in datasets:
        cells = {}
        for label in labels:
            acc = [
                r["accuracy"] for r in runs if r["dataset"] == d and r["label"] == label
            ]
            cells[label] = summarize(acc) if acc else None
        counts = [c[2] for c in cells.values() if c]
        usual = max(set(counts), key=counts.count) if counts else 0
        best = max((c[0] for c in cells.values() if c), default=None)
        row = []
        for label in labels:
            c = cells[label]
            if c is None:
                row.append("—")
                continue
            text = f"{c[0]:.3f} ± {c[1]:.3f}" + (
                f" (n={c[2]})" if c[2] != usual else ""
            )
            row.append(f"**{text}**" if c[0] == best else text)
        lines.append(f"| {d} (n={usual}) | " + " | ".join(row) + " |")
    return "\n".join(lines)


def cv_label(spec: str, grid: list[str]) -> str:
    """``spec``'s label with ``grid`` chosen by CV: ``"mmh cv[c2=1,5 topics=20]"``."""
    return f"{spec} cv[{' '.join(grid)}]" if grid else spec


def run_one(dataset: str, seed: int, spec: str, data_dir=None, cv=(), folds=3) -> dict:
    """One ``evaluate`` of the variant ``spec`` on ``dataset``'s split of ``seed``;
    with ``cv`` (``["key=v1,v2", ...]``) the grid is first cross-validated
    (``folds`` folds, seed ``seed``) on that split's training images only and the
    best setting evaluated."""
    from jaxannot.annotators import get_method
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.evaluation import evaluate
    from jaxannot.tuning import cross_validate

    method, settings = parse_variant(spec)
    train, test = load_dataset(dataset, data_dir=data_dir)
    task = make_task(train, test, protocol="inductive", seed=seed)
    start = time.perf_counter()
    nested = seed_defaults(method, dataset, seed, set(settings) | cv_keys(cv))
    fixed = [f"{k}={v}" for k, v in {**nested, **settings}.items()]
    chosen = cv_record = None
    if cv:
        res = cross_validate(
            method, task.train, list(cv), folds=folds, seed=seed, fixed=fixed
        ).as_json()
        chosen = res["best"]["params"]
        cv_record = [
            {"params": r["params"], "mean": r["mean"], "sd": r["sd"]}
            for r in res["results"]
        ]
        fixed += [f"{k}={v}" for k, v in chosen.items()]
    ev = evaluate(method, task, hyper=fixed, seed=seed)
    seconds = time.perf_counter() - start
    method_obj = get_method(method)
    fit_pred = np.asarray(method_obj.predict_labels(ev.fitted, task.train))
    fit_labels = np.asarray(task.train.labels)
    info = ev.fitted.info
    gaps = info.get("svm_gap")
    return {
        "dataset": dataset,
        "seed": seed,
        "label": cv_label(spec, list(cv)),
        "method": method,
        "accuracy": ev.metrics["classification_accuracy"],
        "train_accuracy": float(np.mean(fit_pred == fit_labels)),
        "seconds": round(seconds, 2),
        "split": "fixed" if test is not None else "random 70/30 drawn with the seed",
        "n_train": ev.n_train,
        "n_test": ev.n_test,
        "settings": {k: _plain(v) for k, v in ev.params.items()},
        "final_svm_gap": None if gaps is None else float(list(gaps)[-1]),
        "cv_chosen": chosen,
        "cv": cv_record,
        "nested": {k: _plain(v) for k, v in nested.items()},
    }


def cv_keys(cv) -> set[str]:
    """The keys of ``--cv`` grids (``["key=v1,v2", ...]``)."""
    return {item.partition("=")[0].strip() for item in cv}


def seed_defaults(method: str, dataset: str, seed: int, given=()) -> dict:
    """``key -> value`` for every default of ``method`` decided on ``dataset`` when
    it has no split (3sources' bag model): the value its record's cross-validation
    inside seed ``seed``'s training part gives (``defaults_guard.seed_choice``), so
    that no test image of the seed took part in choosing it; keys in ``given`` (a
    variant's settings, a ``--cv`` grid) are left to them. SystemExit when the
    record has no run at that seed."""
    out = {}
    for key, default in nested_keys(method, dataset).items():
        if key in given:
            continue
        owner = default.record_method or method
        try:
            out[key] = seed_choice(load_record(owner, dataset), key, default.rule, seed)
        except KeyError:
            raise SystemExit(
                f"{owner}_{dataset}.json has no run over {key} at seed {seed}: "
                f"python -m tools.defaults_cv {owner} --dataset {dataset} "
                f"--grid {key}=... --seed {seed}"
            ) from None
    return out


def _plain(value):
    return (
        value
        if isinstance(value, (bool, int, float, str)) or value is None
        else str(value)
    )


def load(path) -> dict:
    p = pathlib.Path(path)
    if p.exists():
        return json.loads(p.read_text())
    return {"benchmark": "mmh_claim", "about": ABOUT, "commands": [], "runs": []}


def save(path, report) -> None:
    write_json(path, report)


def add_run(report: dict, run: dict) -> None:
    """Put ``run`` in ``report["runs"]``, replacing one of the same dataset, seed and
    label."""
    key = (run["dataset"], run["seed"], run["label"])
    report["runs"] = [
        r for r in report["runs"] if (r["dataset"], r["seed"], r["label"]) != key
    ] + [run]


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--methods", nargs="+", default=list(METHODS), help="methods or variants"
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--cv",
        nargs="*",
        default=[],
        help="key=v1,v2 grids cross-validated on each seed's training images",
    )
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--json", required=True)
    parser.add_argument("--table", action="store_true", help="only print the table")
    parser.add_argument("--note", default=None, help="recorded with the command")
    args = parser.parse_args(argv)
    use_device(args.device)
    for spec in args.methods:
        parse_variant(spec)  # a malformed variant stops here, before any fit
    report = load(args.json)
    if not args.table:
        command = "python -m benchmarks.claims.mmh_claim " + shlex.join(
            argv or sys.argv[1:]
        )
        report["commands"].append({"command": command, "note": args.note})
        for dataset in args.datasets:
            for seed in args.seeds:
                for spec in args.methods:
                    run = run_one(
                        dataset, seed, spec, args.data_dir, args.cv, args.folds
                    )
                    print(
                        f"{dataset} seed={seed} {run['label']}: {run['accuracy']:.4f} "
                        f"({run['seconds']:.0f}s)",
                        flush=True,
                    )
                    add_run(report, run)
                    save(args.json, report)
    labels = [cv_label(spec, list(args.cv)) for spec in args.methods]
    datasets = [
        d for d in args.datasets if any(r["dataset"] == d for r in report["runs"])
    ]
    runs = [r for r in report["runs"] if r["seed"] in args.seeds]
    print(table(runs, labels, datasets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
