"""The ``jaxannot`` command line.

``jaxannot evaluate METHOD --dataset NAME|DIR``  fit and measure a method
``jaxannot datasets``                            datasets found under the data root
``jaxannot methods``                             methods and their hyper-parameters
``jaxannot demo``                                every method on a synthetic corpus

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


def _format_table(rows: list[dict], columns: Sequence[str]) -> str:
    header = ["method", *columns, "fit s"]
    lines = [header]
    for row in rows:
        cells = [row["method"]]
        for c in columns:
            v = row["metrics"].get(c)
            cells.append(
                "-"
                if v is None
                else (
                    f"{v:.2f}"
                    if c == "complete_length" or c.startswith("n_plus")
                    else f"{v:.4f}"
                )
            )
        cells.append(f"{row['fit_seconds']:.2f}")
        lines.append(cells)
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = []
    for j, line in enumerate(lines):
        out.append(
            "  ".join(
                str(c).ljust(w) if i == 0 else str(c).rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


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

    for name, m in available_methods().items():
        needs = f" [needs {', '.join(m.needs)}]" if m.needs else ""
        print(f"{name}: {m.summary}{needs}")
        for key, default in m.hyper.items():
            print(f"    {key} = {default!r}")
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


# --------------------------------------------------------------------- parser
def _cmd_query(args) -> int:
    """``jaxannot query MODEL KIND``: EMML queries (§4 of Guo et al. 2016) on a saved
    model; the database is the dataset's training images, query images its test rows."""
    import numpy as np

    from jaxannot import retrieval
    from jaxannot.annotators import get_method, load
    from jaxannot.data.datasets import load_dataset

    fitted = load(args.model)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    queries = test if test is not None else train
    names = list(train.word_names)

    def rows_of(corpus, rows):
        bad = [r for r in rows if not 0 <= r < corpus.num_images]
        if bad:
            raise UserError(f"--row {bad[0]} out of range [0, {corpus.num_images})")
        return rows

    def word_weights():
        unknown = [w for w in args.word if w not in names]
        if unknown:
            raise UserError(
                f"unknown word {unknown[0]!r}; the vocabulary has {len(names)} words"
            )
        return np.isin(np.array(names), args.word).astype(np.float32)

    if args.kind == "annotate":
        rows = rows_of(queries, args.row or [0])
        method = get_method(fitted.method)
        scores = np.asarray(method.score_words(fitted, queries.subset(np.array(rows))))
        for r, s in zip(rows, scores, strict=True):
            top = np.argsort(-s, kind="stable")[: args.top]
            print(json.dumps({"row": r, "words": [names[j] for j in top]}))
        return 0
    if fitted.method != "emml":
        raise UserError(
            f"{args.kind} queries need an 'emml' model, got {fitted.method!r}"
        )
    p, kernel = fitted.params, fitted.hyper["kernel"]
    view = fitted.hyper.get("view") or train.primary_view
    index = retrieval.build_index(
        p["vrep_features"],
        p["vrep_word_scores"],
        train.view(view),
        database_words=train.words,
        kernel=kernel,
        gamma=float(p["gamma"]),
    )
    x = np.asarray(queries.view(view), np.float32)
    if args.kind == "word":
        if not args.word:
            raise UserError("a word query needs --word")
        ids, sc = retrieval.word_query(index, word_weights(), top_images=args.top)
    elif args.kind == "image":
        (r,) = rows_of(queries, args.row[:1] or [0])
        ids, sc = retrieval.image_retrieval(
            index, x[r], kernel=kernel, top_images=args.top
        )
    else:
        rows = rows_of(queries, args.row or [])
        w = word_weights() if args.word else np.zeros(len(names), np.float32)
        imgs = x[np.array(rows, int)] if rows else np.zeros((1, x.shape[1]), np.float32)
        a = np.full(max(len(rows), 1), 1.0 if rows else 0.0, np.float32)
        ids, sc = retrieval.multimodal_query(
            index, imgs, a * args.image_weight, w, kernel=kernel, top_images=args.top
        )
    for i, s in zip(np.asarray(ids), np.asarray(sc), strict=True):
        if i >= 0:
            words = [names[j] for j in np.flatnonzero(np.asarray(train.words)[i] > 0)]
            print(json.dumps({"image": int(i), "score": float(s), "words": words}))
    return 0


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

    qu = sub.add_parser("query", help="annotate / word / image / multimodal queries")
    qu.add_argument("model", help="a model saved by `evaluate --save`")
    qu.add_argument("kind", choices=("annotate", "word", "image", "multimodal"))
    qu.add_argument("--dataset", required=True, help="database: its training images")
    qu.add_argument("--data-dir", default=None)
    qu.add_argument("--row", type=int, action="append", default=[], help="query row")
    qu.add_argument("--word", action="append", default=[], help="query word")
    qu.add_argument("--image-weight", type=float, default=1.0)
    qu.add_argument("--top", type=int, default=5)
    qu.set_defaults(func=_cmd_query)
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
