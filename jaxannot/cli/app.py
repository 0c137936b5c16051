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

Results (tables, JSON lines) go to stdout and nothing else does. What a command is
doing goes through :mod:`logging` (the ``"jaxannot"`` logger): :func:`main` prints its
records on stderr as ``jaxannot: message``, INFO and above by default, WARNING and
above with ``--quiet`` (which also hides the progress bars), DEBUG with ``--verbose``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from jaxannot.cli.files import (
    UserError,
    check_writable_output,
    dataset_folders,
    real_path,
    refuse_overwriting_inputs,
    write_json,
    writing,
)
from jaxannot.cli.logs import add_logging_options, log_to_stderr
from jaxannot.signals import interrupts_held

__all__ = ["main", "build_parser", "UserError"]

# not __name__: that is "__main__" under `python -m jaxannot.cli`
log = logging.getLogger("jaxannot.cli")


#: ``--FLAG`` (its ``dest``) -> inclusive bounds, checked before any command runs.
#: Past them jax overflows (its integers are 32-bit) or no machine has the memory;
#: the seed's range is what numpy's ``RandomState`` (the folds of ``tune``) accepts.
INT_FLAGS = {
    "seed": (0, 2**32 - 1),
    "checkpoint_every": (1, 10**6),
    "folds": (2, 10**6),
    "restarts": (1, 1000),
    "top": (1, 10**6),
    "size": (1, 4096),
    "step": (1, 4096),
    "words": (1, 10**6),
}


def _check_int_flags(args) -> None:
    """:class:`UserError` for an integer option outside :data:`INT_FLAGS`."""
    for dest, (low, high) in INT_FLAGS.items():
        value = getattr(args, dest, None)
        if not isinstance(value, int) or low <= value <= high:
            continue
        bound = f">= {low}" if value < low else f"<= {high}"
        raise UserError(f"--{dest.replace('_', '-')} must be {bound}, got {value}")


# ------------------------------------------------------------------- commands
def _cmd_evaluate(args) -> int:
    from jaxannot.annotators import get_method, parse_hyper, save
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.evaluation import check_columns, evaluate, format_table

    method = get_method(args.method)
    hyper = parse_hyper(method, args.set or [])  # fail on a bad --set before loading
    columns = check_columns(args.metrics) if args.metrics is not None else None
    checkpoint = [real_path(args.checkpoint)] if args.checkpoint else []
    refuse_overwriting_inputs(
        {"--json": args.json, "--save": args.save, "--checkpoint": args.checkpoint},
        {"--dataset": dataset_folders(args.dataset, args.data_dir)},
    )
    refuse_overwriting_inputs(
        {"--json": args.json, "--save": args.save}, {"--checkpoint": checkpoint}
    )
    for path in (args.json, args.save):  # ... and on an unwritable output
        if path:
            check_writable_output(path)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    task = make_task(
        train,
        test,
        protocol=args.protocol,
        labelled_fraction=args.labelled_fraction,
        seed=args.seed,
    )
    log.info(
        "%s on %s (%s): fitting on %d images, scoring %d",
        method.name,
        train.name,
        task.protocol,
        task.train.num_images,
        len(task.eval_rows),
    )
    result = evaluate(
        method,
        task,
        hyper=hyper,
        seed=args.seed,
        checkpoint=args.checkpoint,
        checkpoint_every=args.checkpoint_every,
    )
    log.info(
        "fitted in %.2f s, scored in %.2f s", result.fit_seconds, result.predict_seconds
    )
    payload = result.as_json()
    print(format_table([payload], columns))
    if args.json:
        write_json(args.json, payload)
    if args.save:
        with writing(args.save):
            save(args.save, result.fitted)
        log.info("saved the fitted model to %s", args.save)
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
    from jaxannot.annotators.hyper_spec import DEFAULTS, spec_for

    for name, m in available_methods().items():
        needs = f" [needs {', '.join(m.needs)}]" if m.needs else ""
        print(f"{name}: {m.summary}{needs}")
        settings = [f"{key} = {default!r}" for key, default in m.hyper.items()]
        width = max(map(len, settings), default=0)
        for key, setting in zip(m.hyper, settings, strict=True):
            spec = spec_for(name, key)
            text = f"{spec.help} [{spec.valid()}]" if spec else "(no description)"
            origin = DEFAULTS.get(name, {}).get(key)
            where = origin.describe(name) if origin else "origin not recorded"
            print(f"    {setting.ljust(width)}  {text} (default: {where})")
    return 0


def _cmd_demo(args) -> int:
    from tqdm.auto import tqdm

    from jaxannot.annotators import available_methods
    from jaxannot.annotators.base import show_progress
    from jaxannot.data import make_task
    from jaxannot.data.synthetic import make_synthetic
    from jaxannot.evaluation import check_applicable, evaluate, format_table

    if args.json:
        check_writable_output(args.json)
    corpus = make_synthetic(seed=args.seed, num_classes=True)
    task = make_task(corpus, None, protocol="inductive", seed=args.seed)
    log.info(
        "demo: synthetic multimodal corpus, %d training and %d test images, %d words "
        "(sampled from the multimodal mixture of unigrams)",
        task.train.num_images,
        task.test.num_images,
        corpus.num_words,
    )
    rows = []
    methods = [m for m in available_methods().values() if m.name not in args.skip]
    for method in tqdm(methods, desc="methods", disable=not show_progress()):
        try:
            check_applicable(method, task)
        except ValueError:
            log.debug("%s does not apply to the demo corpus", method.name)
            continue
        rows.append(evaluate(method, task, seed=args.seed).as_json())
        log.info("%s: fitted in %.2f s", method.name, rows[-1]["fit_seconds"])
    print(format_table(rows))
    if args.json:
        write_json(args.json, rows)
    return 0


def _cmd_diagnose(args) -> int:
    """Fit a topic model from several starts; compare their Hungarian-aligned topics."""
    from jaxannot.annotators import get_method, parse_hyper
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.diagnostics import diagnose_restarts

    hyper = parse_hyper(get_method(args.method), args.set or [])
    refuse_overwriting_inputs(
        {"--json": args.json},
        {"--dataset": dataset_folders(args.dataset, args.data_dir)},
    )
    if args.json:
        check_writable_output(args.json)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    task = make_task(train, test, protocol=args.protocol, seed=args.seed)
    log.info("fitting %s from %d starts", args.method, args.restarts)
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
        write_json(args.json, {k: v for k, v in out.items() if k != "traces"})
    return 0


def _cmd_tune(args) -> int:
    import shlex

    from jaxannot.annotators import get_method
    from jaxannot.annotators.base import show_progress
    from jaxannot.data.datasets import load_dataset
    from jaxannot.evaluation import format_metric
    from jaxannot.tuning import (
        cross_validate,
        kfold_rows,
        parse_grid,
        resolve_fixed,
        resolve_metric,
        training_images,
        unlabelled_images,
    )

    method = get_method(args.method)
    # the checks that need no data come before loading it; all come before fitting
    grid = parse_grid(method, args.grid or [])
    fixed = resolve_fixed(method, grid, args.set or [])
    lf = args.labelled_fraction
    if lf is not None and not 0.0 < lf <= 1.0:
        raise UserError(f"--labelled-fraction must be in (0, 1], got {lf}")
    refuse_overwriting_inputs(
        {"--json": args.json},
        {"--dataset": dataset_folders(args.dataset, args.data_dir)},
    )
    if args.json:
        check_writable_output(args.json)
    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    corpus = training_images(train, test, seed=args.seed)  # the test split: left out
    unlabelled = None  # transductive: the other images' features, never their words
    if args.protocol == "transductive":
        unlabelled = unlabelled_images(train, test, seed=args.seed)
    kfold_rows(corpus.num_images, args.folds, args.seed)
    metric = resolve_metric(method, corpus, args.metric)
    n_settings = 1
    for values in grid.values():
        n_settings *= len(values)
    log.info(
        "%s on %s (%s): %d-fold cross-validation of %d setting(s) on the %d training "
        "images (%d fits), comparing %s",
        method.name,
        corpus.name,
        args.protocol,
        args.folds,
        n_settings,
        corpus.num_images,
        n_settings * args.folds,
        metric,
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
        progress=show_progress(),
        unlabelled=unlabelled,
    )
    print(result.table())
    best = result.best
    described = ", ".join(f"{k}={v}" for k, v in best.params.items()) or "(fixed)"
    print(
        f"\nbest {result.metric}: {described}  "
        f"({format_metric(result.metric, best.mean)} ± "
        f"{format_metric(result.metric, best.sd)} over {result.folds} folds)"
    )
    flags = " ".join(f"--set {shlex.quote(f)}" for f in result.set_flags())
    print(f"best: {flags}".rstrip())
    for r in result.results:
        if r.unconverged_folds:
            log.warning(
                "%s: the solver stopped before converging on fold(s) %s; those scores "
                "come from an inexact solution",
                ", ".join(f"{k}={v}" for k, v in r.params.items()) or "(fixed)",
                ", ".join(map(str, r.unconverged_folds)),
            )
    if args.json:
        write_json(args.json, result.as_json())
    log.info("tuned in %.1f s", result.seconds)
    return 0


# --------------------------------------------------------------------- parser
def _subcommand(sub, name: str, func, **kwargs) -> argparse.ArgumentParser:
    """Add the sub-command ``name`` (``kwargs`` as for ``add_parser``) that runs
    ``func(args)`` and takes the logging options."""
    parser = sub.add_parser(name, **kwargs)
    parser.set_defaults(func=func)
    # SUPPRESS: an option given before the command is not reset by the sub-parser
    add_logging_options(parser, argparse.SUPPRESS)
    return parser


def _add_dataset_options(
    parser: argparse.ArgumentParser, method_help: str, protocol: str = "inductive"
) -> None:
    """The METHOD argument, ``--dataset``, ``--data-dir`` and ``--protocol``."""
    parser.add_argument("method", help=method_help)
    parser.add_argument(
        "--dataset", required=True, help="a dataset name or a Mulan directory"
    )
    parser.add_argument(
        "--data-dir", default=None, help="data root (default: $JAXANNOT_DATA)"
    )
    parser.add_argument(
        "--protocol", default=protocol, choices=("inductive", "transductive")
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxannot",
        description="Automatic image annotation and multimodal latent models on JAX.",
        epilog=(
            "Progress: what a command is doing is logged on stderr (jaxannot: ...), "
            "with progress bars over long loops when stderr is a terminal; results go "
            "to stdout. -q/--quiet keeps only warnings and errors, -v/--verbose adds "
            "debug messages; both may come before or after the command."
        ),
    )
    add_logging_options(parser, logging.INFO)
    parser.add_argument(
        "--no-compilation-cache",
        action="store_true",
        help=(
            "do not keep compiled programs on disk (default: kept in "
            "$JAXANNOT_CACHE_DIR or ~/.cache/jaxannot/jax, so a second run starts "
            "faster; JAXANNOT_NO_COMPILATION_CACHE=1 also turns it off)"
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add = functools.partial(_subcommand, sub)

    ev = add("evaluate", _cmd_evaluate, help="fit a method on a dataset and measure it")
    _add_dataset_options(ev, "a method name (see `jaxannot methods`)")
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
    ev.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="save the fit's state in DIR every --checkpoint-every steps; the same "
        "command started again resumes from it",
    )
    ev.add_argument("--checkpoint-every", type=int, default=10, metavar="N")
    ev.add_argument(
        "--metrics",
        default=None,
        metavar="M1,M2,...",
        help="the table's metric columns, comma-separated (default: accuracy, "
        "complete_length, f1@5, word_f1@5, n_plus@5, map and what applies of "
        "classification_accuracy, rmse, r2); any metric the JSON reports, e.g. "
        "lrap,ranking_loss,coverage,one_error,micro_f1,macro_f1,example_f1,"
        "hamming_loss (the JSON always has them all)",
    )

    tu = add(
        "tune",
        _cmd_tune,
        help="choose hyper-parameters by k-fold cross-validation on the training split",
        description=(
            "Score every setting of a hyper-parameter grid by k-fold cross-validation "
            "on the dataset's TRAINING images (the test split's words are never "
            "used; for a dataset without a split, the images `evaluate --seed N` "
            "holds out are left out). Each fold is fitted and scored by the same "
            "driver as `jaxannot evaluate`. Prints every setting's mean ± sd of the "
            "metric over the folds, the other metrics' means, and the best setting "
            "as --set flags ready to paste into `jaxannot evaluate`."
        ),
        epilog=(
            "example: jaxannot tune knn --dataset corel5k --grid k=5,10,20,40 "
            "--grid metric=cosine,euclidean --folds 5 --json tune.json. "
            "Folds: a RandomState(seed) shuffle cut into --folds parts, as "
            "sklearn's KFold(shuffle=True, random_state=seed). Metrics: higher is "
            "better except complete_length, rmse, ranking_loss, coverage, "
            "one_error and hamming_loss. --protocol transductive: as "
            "`evaluate --protocol transductive`, every fold fits on all images (the "
            "test split's with their words removed) with --labelled-fraction of them "
            "labelled, drawn from the training images outside the fold, and scores "
            "the unlabelled training images."
        ),
    )
    _add_dataset_options(tu, "a method name (see `jaxannot methods`)")
    tu.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="values of a hyper-parameter to try (repeat for a Cartesian product; "
        "parsed like --set; a list value joins its items with '+', e.g. "
        "distances=cosine,cosine+idf)",
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
        "a dataset with classes; rmse for mmh-regression); any metric `evaluate` "
        "reports",
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

    ds = add("datasets", _cmd_datasets, help="list the datasets under the data root")
    ds.add_argument("--data-dir", default=None)

    add("methods", _cmd_methods, help="list methods and their hyper-parameters")

    de = add("demo", _cmd_demo, help="compare the methods on a synthetic corpus")
    de.add_argument("--seed", type=int, default=0)
    de.add_argument("--json", default=None)
    de.add_argument("--skip", nargs="*", default=[], help="methods to leave out")

    dg = add("diagnose", _cmd_diagnose, help="compare a topic model's random restarts")
    _add_dataset_options(
        dg, "a topic model (mix-unigram, link-lda, ...)", protocol="transductive"
    )
    dg.add_argument("--restarts", type=int, default=3)
    dg.add_argument("--set", action="append", metavar="KEY=VALUE")
    dg.add_argument("--seed", type=int, default=0)
    dg.add_argument("--json", default=None)

    from jaxannot.cli.query import add_query_command

    add_query_command(add)  # EMML queries on a saved model

    from jaxannot.cli.photos import add_photo_commands

    add_photo_commands(add)  # `features` and `annotate`: your own photos
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``jaxannot ARGV``; return the exit status.

    Ctrl-C at any point after this module is imported (start-up's imports
    included, which this module defers to the commands) prints ``jaxannot:
    interrupted`` and returns 130, with no traceback; during the import of jax,
    once that import is done.
    """
    saved_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_resend_interrupt, saved_hook)
    try:
        args = build_parser().parse_args(argv)
        with interrupts_held():  # Ctrl-C inside jaxlib's set-up aborts the process
            import jax  # noqa: F401
        with log_to_stderr(args.log_level):
            _compilation_cache(args)
            return _run(args)
    except BaseException as err:
        if not _interrupted(err):
            raise
        print("jaxannot: interrupted", file=sys.stderr)
        return 130
    finally:
        sys.unraisablehook = saved_hook


def _compilation_cache(args) -> None:
    """JAX's persistent compilation cache, unless turned off; a folder that cannot
    be used is a warning, never a failed command."""
    from jaxannot.runtime import compilation_cache as cc

    if getattr(args, "no_compilation_cache", False) or cc.cache_disabled():
        return
    try:
        cc.enable_compilation_cache()
    except ValueError as error:
        logging.getLogger("jaxannot").warning("%s; running without it", error)


def _interrupted(err: BaseException) -> bool:
    """Whether ``err`` is a Ctrl-C or came from one: library code may turn the
    ``KeyboardInterrupt`` into another error (a C extension's module set-up into
    ``ImportError: initialization failed``, the zip writer into a ``ValueError``),
    chained to it as cause or context."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _resend_interrupt(hook, unraisable) -> None:
    """``sys.unraisablehook``: a Ctrl-C that lands where Python cannot raise it (a
    garbage-collector callback, such as jax's, a ``__del__``, a weakref callback)
    would be printed with a traceback and lost; it is sent again instead, to be
    raised in the code that runs next. Other unraisable errors go to ``hook``."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        # from another thread, a moment later: a signal raised here, in the hook,
        # would be swallowed again
        resend = threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT))
        resend.daemon = True
        resend.start()
    else:
        hook(unraisable)


def _run(args) -> int:
    """The command of ``args``; user errors as one line and status 2."""
    try:
        _check_int_flags(args)
        return args.func(args)
    except (
        UserError,
        ValueError,
        KeyError,
        FileNotFoundError,
        FileExistsError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
        FloatingPointError,
    ) as err:
        if _interrupted(err):
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        _print_error(str(message))
        return 2
    except OSError as err:  # the system's: disk full, I/O error, ... (as PATH: why)
        if _interrupted(err):
            raise
        where = f"{err.filename}: " if err.filename is not None else ""
        _print_error(f"{where}{err.strerror or err}")
        return 2
    except (MemoryError, RuntimeError) as err:
        if _interrupted(err) or not _out_of_memory(err):
            raise
        detail = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(
            f"jaxannot: error: out of memory: {detail or 'MemoryError'}; "
            "ask for smaller sizes (fewer images, "
            "VReps, topics, bins or eigenfunctions: see `jaxannot methods`)",
            file=sys.stderr,
        )
        return 2


def _print_error(message: str) -> None:
    """``jaxannot: error: message`` on stderr, on one line: a line break in it (a
    file name may hold one) is written as ``\\n``."""
    one_line = message.replace("\r", "\\r").replace("\n", "\\n")
    print(f"jaxannot: error: {one_line}", file=sys.stderr)


def _out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is the host or an accelerator running out of memory: a
    ``MemoryError`` (numpy) or XLA's ``RESOURCE_EXHAUSTED`` status (jax raises it as a
    ``JaxRuntimeError``, a ``RuntimeError``)."""
    return isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in str(err)


def console() -> NoReturn:
    """The ``jaxannot`` program: :func:`main`, then exit with its status.

    A Ctrl-C that arrives once the command has finished, while Python shuts down
    (its exit handlers flush and close the log), is ignored: there is nothing left
    to interrupt, and Python would print it as a traceback.

    An interrupted command (status 130) leaves at once (``os._exit``) once stdout
    and stderr are flushed, without Python's shutdown: the interrupt may have cut
    jax off mid-computation, and tearing the interpreter down under XLA's threads
    that still run could crash (2 of 292 interrupted fits died of ``SIGSEGV``,
    status 139). Nothing is left to clean up: the files being written were removed
    as the interrupt unwound (:func:`jaxannot.data.atomic.atomic_write`).
    """
    status = 130
    try:
        status = main()
    except KeyboardInterrupt:  # in the moment between main's return and here
        print("jaxannot: interrupted", file=sys.stderr)
        status = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if status == 130:
        _leave_now(status)
    sys.exit(status)


def _leave_now(status: int) -> NoReturn:
    """Flush stdout and stderr, then end the process with ``status`` without
    running Python's shutdown (exit handlers, module teardown)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a pipe whose reader is gone
            pass
    os._exit(status)


if __name__ == "__main__":
    console()
