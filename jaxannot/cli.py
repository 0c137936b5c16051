"""The ``jaxannot`` command line.

``jaxannot evaluate METHOD --dataset NAME|DIR``  fit and measure a method
``jaxannot tune METHOD --dataset D --grid k=..``  cross-validate a hyper-parameter grid
``jaxannot datasets``                            datasets found under the data root
``jaxannot methods``                             methods and their hyper-parameters
``jaxannot demo``                                every method on a synthetic corpus
``jaxannot diagnose METHOD --dataset NAME``      compare a topic model's restarts
``jaxannot features PHOTOS_DIR --out DIR``       a folder of photos as a dataset
``jaxannot annotate MODEL PHOTO... --dataset DIR``  top tags of photos

User errors (unknown names, malformed files, bad shapes or values) print one line
``jaxannot: error: ...`` and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence

__all__ = ["main", "build_parser"]

_TABLE_METRICS = (
    "accuracy",
    "complete_length",
    "f1@5",
    "word_f1@5",
    "n_plus@5",
    "map",
    "classification_accuracy",
)


class UserError(Exception):
    """An error caused by the user's input: reported in one line, exit status 2."""


def _write_json_atomic(path: str, payload) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"cannot write {path}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".jaxannot-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _check_writable(path: str) -> None:
    """Fail now, not after hours of fitting, when ``path`` cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"cannot write {path}: folder {folder} does not exist")
    if os.path.isdir(path):
        raise UserError(f"cannot write {path}: it is a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".jaxannot-", suffix=".probe")
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None
    os.close(fd)
    os.unlink(probe)  # _write_json_atomic writes the same way: a temp file, renamed


def _format_value(column: str, v) -> str:
    if v is None:
        return "-"
    if column == "complete_length" or column.startswith("n_plus"):
        return f"{v:.2f}"
    return f"{v:.4f}"


def _align(lines: list[list[str]], left: int = 1) -> str:
    """Columns padded to their widths (the first ``left`` left-aligned), a rule under
    the header row."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for j, line in enumerate(lines):
        out.append(
            "  ".join(
                c.ljust(w) if i < left else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in out)


def _format_table(rows: list[dict], columns: Sequence[str]) -> str:
    lines = [["method", *columns, "fit s"]]
    for row in rows:
        cells = [_format_value(c, row["metrics"].get(c)) for c in columns]
        lines.append([row["method"], *cells, f"{row['fit_seconds']:.2f}"])
    return _align(lines)


def _present_columns(rows: list[dict]) -> list[str]:
    return [c for c in _TABLE_METRICS if any(c in r["metrics"] for r in rows)]


# ------------------------------------------------------------------- commands
def _cmd_evaluate(args) -> int:
    from jaxannot.annotators import get_method, parse_hyper, save
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.evaluation import evaluate

    method = get_method(args.method)
    hyper = parse_hyper(method, args.set or [])  # fail on a bad --set before loading
    for path in (args.json, args.save):  # ... and on an unwritable output
        if path:
            _check_writable(path)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    task = make_task(
        train,
        test,
        protocol=args.protocol,
        labelled_fraction=args.labelled_fraction,
        seed=args.seed,
    )
    print(
        f"{method.name} on {train.name} ({task.protocol}): fitting on "
        f"{task.train.num_images} images, scoring {len(task.eval_rows)}",
        file=sys.stderr,
    )
    result = evaluate(method, task, hyper=hyper, seed=args.seed)
    payload = result.as_json()
    print(_format_table([payload], _present_columns([payload])))
    if args.json:
        _write_json_atomic(args.json, payload)
    if args.save:
        save(args.save, result.fitted)
        print(f"saved the fitted model to {args.save}", file=sys.stderr)
    return 0


def _cmd_datasets(args) -> int:
    from jaxannot.data.datasets import data_root, list_datasets

    root = data_root(args.data_dir)
    print(f"data root: {root}")
    for name, present, summary in list_datasets(args.data_dir):
        print(f"  {name:<12} {'found  ' if present else 'missing'}  {summary}")
    return 0


def _cmd_methods(args) -> int:
    from jaxannot.annotators import available_methods
    from jaxannot.annotators.hyper_spec import spec_for

    for name, m in available_methods().items():
        needs = f" [needs {', '.join(m.needs)}]" if m.needs else ""
        print(f"{name}: {m.summary}{needs}")
        settings = [f"{key} = {default!r}" for key, default in m.hyper.items()]
        width = max(map(len, settings), default=0)
        for key, setting in zip(m.hyper, settings, strict=True):
            spec = spec_for(name, key)
            text = f"{spec.help} [{spec.valid()}]" if spec else "(no description)"
            print(f"    {setting.ljust(width)}  {text}")
    return 0


def _cmd_demo(args) -> int:
    from tqdm.auto import tqdm

    from jaxannot.annotators import available_methods
    from jaxannot.data import make_task
    from jaxannot.data.synthetic import make_synthetic
    from jaxannot.evaluation import check_applicable, evaluate

    corpus = make_synthetic(seed=args.seed, num_classes=True)
    task = make_task(corpus, None, protocol="inductive", seed=args.seed)
    print(
        f"demo: synthetic multimodal corpus, {task.train.num_images} training and "
        f"{task.test.num_images} test images, {corpus.num_words} words "
        f"(sampled from the multimodal mixture of unigrams)"
    )
    rows = []
    methods = [m for m in available_methods().values() if m.name not in args.skip]
    for method in tqdm(methods, desc="methods", disable=not sys.stderr.isatty()):
        try:
            check_applicable(method, task)
        except ValueError:
            continue
        rows.append(evaluate(method, task, seed=args.seed).as_json())
    print(_format_table(rows, _present_columns(rows)))
    if args.json:
        _write_json_atomic(args.json, rows)
    return 0


def _cmd_diagnose(args) -> int:
    """Fit a topic model from several starts; compare their Hungarian-aligned topics."""
    from jaxannot.annotators import get_method, parse_hyper
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.diagnostics import diagnose_restarts

    hyper = parse_hyper(get_method(args.method), args.set or [])
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    task = make_task(train, test, protocol=args.protocol, seed=args.seed)
    out = diagnose_restarts(
        args.method, task.train, restarts=args.restarts, hyper=hyper, seed=args.seed
    )
    print("restart  final objective  aligned topic L1  unaligned topic L1")
    for r in range(args.restarts):
        print(
            f"{r:7d}  {out['final_objective'][r]:15.2f}  "
            f"{out['aligned_topic_l1'][r]:16.4f}  {out['unaligned_topic_l1'][r]:18.4f}"
        )
    if args.json:
        _write_json_atomic(args.json, {k: v for k, v in out.items() if k != "traces"})
    return 0


def _format_tune_table(result) -> str:
    """One row per setting: its grid values, the metric's mean ± sd over the folds,
    the other table metrics' means; ``*`` marks the best."""
    first = result.results[0].metrics_mean
    others = [c for c in _TABLE_METRICS if c in first and c != result.metric]
    keys = list(result.grid) or ["setting"]
    arrow = "higher" if result.higher_is_better else "lower"
    header = [*keys, f"{result.metric} mean ± sd ({arrow} better)", *others, ""]
    lines = [header]
    for i, r in enumerate(result.results):
        params = [str(r.params[k]) for k in result.grid] or ["fixed"]
        m = result.metric
        score = f"{_format_value(m, r.mean)} ± {_format_value(m, r.sd)}"
        means = [_format_value(c, r.metrics_mean.get(c)) for c in others]
        lines.append([*params, score, *means, "*" if i == result.best_index else ""])
    return _align(lines, left=len(keys))


def _cmd_tune(args) -> int:
    import shlex

    from jaxannot.annotators import get_method
    from jaxannot.data.datasets import load_dataset
    from jaxannot.tuning import (
        cross_validate,
        kfold_rows,
        parse_grid,
        resolve_fixed,
        resolve_metric,
        training_images,
    )

    method = get_method(args.method)
    # the checks that need no data come before loading it; all come before fitting
    grid = parse_grid(method, args.grid or [])
    fixed = resolve_fixed(method, grid, args.set or [])
    if args.folds < 2:
        raise UserError(f"--folds must be >= 2, got {args.folds}")
    lf = args.labelled_fraction
    if lf is not None and not 0.0 < lf <= 1.0:
        raise UserError(f"--labelled-fraction must be in (0, 1], got {lf}")
    if args.json:
        _check_writable(args.json)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    corpus = training_images(train, test, seed=args.seed)  # the test split: left out
    kfold_rows(corpus.num_images, args.folds, args.seed)
    metric = resolve_metric(method, corpus, args.metric)
    n_settings = 1
    for values in grid.values():
        n_settings *= len(values)
    print(
        f"{method.name} on {corpus.name} ({args.protocol}): {args.folds}-fold "
        f"cross-validation of {n_settings} setting(s) on the {corpus.num_images} "
        f"training images ({n_settings * args.folds} fits), comparing {metric}",
        file=sys.stderr,
    )
    result = cross_validate(
        method,
        corpus,
        grid,
        folds=args.folds,
        metric=metric,
        protocol=args.protocol,
        labelled_fraction=args.labelled_fraction,
        seed=args.seed,
        fixed=fixed,
        progress=sys.stderr.isatty() and not args.quiet,
    )
    print(_format_tune_table(result))
    best = result.best
    described = ", ".join(f"{k}={v}" for k, v in best.params.items()) or "(fixed)"
    print(
        f"\nbest {result.metric}: {described}  "
        f"({_format_value(result.metric, best.mean)} ± "
        f"{_format_value(result.metric, best.sd)} over {result.folds} folds)"
    )
    flags = " ".join(f"--set {shlex.quote(f)}" for f in result.set_flags())
    print(f"best: {flags}".rstrip())
    if args.json:
        _write_json_atomic(args.json, result.as_json())
    print(f"tuned in {result.seconds:.1f} s", file=sys.stderr)
    return 0


# --------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxannot",
        description="Automatic image annotation and multimodal latent models on JAX.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("evaluate", help="fit a method on a dataset and measure it")
    ev.add_argument("method", help="a method name (see `jaxannot methods`)")
    ev.add_argument(
        "--dataset", required=True, help="a dataset name or a Mulan directory"
    )
    ev.add_argument(
        "--data-dir", default=None, help="data root (default: $JAXANNOT_DATA)"
    )
    ev.add_argument(
        "--protocol", default="inductive", choices=("inductive", "transductive")
    )
    ev.add_argument(
        "--labelled-fraction",
        type=float,
        default=None,
        help="fraction of fit images with observed words (1; transductive 0.25)",
    )
    ev.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="hyper-parameter"
    )
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--json", default=None, help="write the result as JSON here")
    ev.add_argument("--save", default=None, help="save the fitted model (.npz) here")
    ev.set_defaults(func=_cmd_evaluate)

    tu = sub.add_parser(
        "tune",
        help="choose hyper-parameters by k-fold cross-validation on the training split",
        description=(
            "Score every setting of a hyper-parameter grid by k-fold cross-validation "
            "on the dataset's TRAINING images (the test split is never used; for a "
            "dataset without a split, the images `evaluate --seed N` holds out are "
            "left out). Each fold is fitted and scored by the same driver as "
            "`jaxannot evaluate`. Prints every setting's mean ± sd of the metric "
            "over the folds, the other metrics' means, and the best setting as "
            "--set flags ready to paste into `jaxannot evaluate`."
        ),
        epilog=(
            "example: jaxannot tune knn --dataset corel5k --grid k=5,10,20,40 "
            "--grid metric=cosine,euclidean --folds 5 --json tune.json. "
            "Folds: a RandomState(seed) shuffle cut into --folds parts, as "
            "sklearn's KFold(shuffle=True, random_state=seed). Metrics: higher is "
            "better except complete_length. --protocol transductive: the held-out "
            "fold's images take part in the fit with their words hidden."
        ),
    )
    tu.add_argument("method", help="a method name (see `jaxannot methods`)")
    tu.add_argument(
        "--dataset", required=True, help="a dataset name or a Mulan directory"
    )
    tu.add_argument(
        "--data-dir", default=None, help="data root (default: $JAXANNOT_DATA)"
    )
    tu.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="values of a hyper-parameter to try (repeat for a Cartesian product; "
        "parsed like --set)",
    )
    tu.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a hyper-parameter held fixed for every setting",
    )
    tu.add_argument("--folds", type=int, default=5, help="number of folds (5)")
    tu.add_argument(
        "--metric",
        default=None,
        help="metric to compare (map; classification_accuracy for a classifier on "
        "a dataset with classes); any metric `evaluate` reports",
    )
    tu.add_argument(
        "--protocol", default="inductive", choices=("inductive", "transductive")
    )
    tu.add_argument(
        "--labelled-fraction",
        type=float,
        default=None,
        help="fraction of the fit folds' images with observed words "
        "(1; transductive 0.25)",
    )
    tu.add_argument("--seed", type=int, default=0, help="seeds the folds and fits")
    tu.add_argument(
        "--json", default=None, help="write every setting's scores as JSON here"
    )
    tu.add_argument("--quiet", action="store_true", help="no progress bar")
    tu.set_defaults(func=_cmd_tune)

    ds = sub.add_parser("datasets", help="list the datasets under the data root")
    ds.add_argument("--data-dir", default=None)
    ds.set_defaults(func=_cmd_datasets)

    me = sub.add_parser("methods", help="list methods and their hyper-parameters")
    me.set_defaults(func=_cmd_methods)

    de = sub.add_parser("demo", help="compare the methods on a synthetic corpus")
    de.add_argument("--seed", type=int, default=0)
    de.add_argument("--json", default=None)
    de.add_argument("--skip", nargs="*", default=[], help="methods to leave out")
    de.set_defaults(func=_cmd_demo)

    dg = sub.add_parser("diagnose", help="compare a topic model's random restarts")
    dg.add_argument("method", help="a topic model (mix-unigram, link-lda, ...)")
    dg.add_argument("--dataset", required=True)
    dg.add_argument("--data-dir", default=None)
    dg.add_argument(
        "--protocol", default="transductive", choices=("inductive", "transductive")
    )
    dg.add_argument("--restarts", type=int, default=3)
    dg.add_argument("--set", action="append", metavar="KEY=VALUE")
    dg.add_argument("--seed", type=int, default=0)
    dg.add_argument("--json", default=None)
    dg.set_defaults(func=_cmd_diagnose)

    from jaxannot.cli_query import add_query_command

    add_query_command(sub)  # EMML queries on a saved model

    from jaxannot.cli_photos import add_photo_commands

    add_photo_commands(sub)  # `features` and `annotate`: your own photos
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (
        UserError,
        ValueError,
        KeyError,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
    ) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        print(f"jaxannot: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jaxannot: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
