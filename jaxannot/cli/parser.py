"""The argument parser of the ``jaxannot`` command line (:func:`build_parser`).

Each sub-command's options are added by one function here (or, for ``query``,
``features`` and ``annotate``, in :mod:`jaxannot.cli.query` and
:mod:`jaxannot.cli.photos`); the commands themselves are in
:mod:`jaxannot.cli.commands_fit` and :mod:`jaxannot.cli.commands_info`.
"""

from __future__ import annotations

import argparse
import functools
import logging

from jaxannot.cli import commands_fit, commands_info
from jaxannot.cli.logs import add_logging_options

__all__ = ["build_parser"]

_METHOD_HELP = "a method name (see `jaxannot methods`)"


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``jaxannot [options] COMMAND ...``; each sub-command sets
    ``func``, the function that runs it."""
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
    _add_evaluate(add)
    _add_tune(add)
    _add_other_commands(add)

    from jaxannot.cli.query import add_query_command

    add_query_command(add)  # EMML queries on a saved model

    from jaxannot.cli.photos import add_photo_commands

    add_photo_commands(add)  # `features` and `annotate`: your own photos
    return parser


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


def _add_evaluate(add) -> None:
    """``evaluate METHOD --dataset D [--set K=V] ...``."""
    ev = add(
        "evaluate",
        commands_fit.cmd_evaluate,
        help="fit a method on a dataset and measure it",
    )
    _add_dataset_options(ev, _METHOD_HELP)
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


_TUNE_DESCRIPTION = (
    "Score every setting of a hyper-parameter grid (--grid), or settings drawn "
    "from a space by a TPE search (--search --space), by k-fold cross-validation "
    "on the dataset's TRAINING images (the test split's words are never "
    "used; for a dataset without a split, the images `evaluate --seed N` "
    "holds out are left out). Each fold is fitted and scored by the same "
    "driver as `jaxannot evaluate`. Prints every setting's (with --search: the "
    "best settings') mean ± sd of the metric over the folds, the other metrics' "
    "means, and the best setting as --set flags ready to paste into "
    "`jaxannot evaluate`."
)
_TUNE_EPILOG = (
    "examples: jaxannot tune knn --dataset corel5k --grid k=5,10,20,40 "
    "--grid metric=cosine,euclidean --folds 5 --json tune.json; "
    "jaxannot tune ale-svm --dataset scene --search --space c=1e-4:10:log "
    "--space bins=4:200 --trials 40 --timeout 3600 --json search.json. "
    "Folds: a RandomState(seed) shuffle cut into --folds parts, as "
    "sklearn's KFold(shuffle=True, random_state=seed); every setting and trial is "
    "fitted on the same folds. Metrics: higher is "
    "better except complete_length, rmse, ranking_loss, coverage, "
    "one_error and hamming_loss. --protocol transductive: as "
    "`evaluate --protocol transductive`, every fold fits on all images (the "
    "test split's with their words removed) with --labelled-fraction of them "
    "labelled, drawn from the training images outside the fold, and scores "
    "the unlabelled training images. --search needs optuna "
    "(pip install 'jaxannot[search]'); a trial whose running mean after a fold "
    "is below the median of the earlier trials' is pruned (its folds so far are "
    "kept in the JSON)."
)


def _add_tune(add) -> None:
    """``tune METHOD --dataset D --grid K=V1,V2 ...`` or ``--search --space ...``."""
    tu = add(
        "tune",
        commands_fit.cmd_tune,
        help="choose hyper-parameters by k-fold cross-validation on the training split",
        description=_TUNE_DESCRIPTION,
        epilog=_TUNE_EPILOG,
    )
    _add_dataset_options(tu, _METHOD_HELP)
    tu.add_argument(
        "--grid",
        action="append",
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
    tu.add_argument(
        "--folds", type=int, default=None, help="number of folds (5; 3 with --search)"
    )
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
    _add_search_options(tu)


def _add_search_options(tu: argparse.ArgumentParser) -> None:
    """``--search --space K=LO:HI --trials N [--timeout S] [--no-prune]``."""
    se = tu.add_argument_group(
        "search (instead of --grid; needs optuna: pip install 'jaxannot[search]')"
    )
    se.add_argument(
        "--search",
        action="store_true",
        help="draw settings from --space with Optuna's TPE sampler (seeded by "
        "--seed) instead of fitting a grid",
    )
    se.add_argument(
        "--space",
        action="append",
        metavar="KEY=LO:HI[:log]|KEY=V1,V2,...",
        help="a range of an int or float hyper-parameter (its type; ':log' for a "
        "log scale, e.g. c=1e-4:10:log) or values to choose from (parsed like "
        "--grid); repeat for each key, searched jointly",
    )
    se.add_argument("--trials", type=int, default=None, help="trials to run")
    se.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start no trial after this many seconds (the running one finishes)",
    )
    se.add_argument(
        "--no-prune",
        dest="prune",
        action="store_false",
        help="score every trial on every fold (default: prune a trial whose running "
        "mean falls below the median of the earlier trials' at that fold)",
    )


def _add_other_commands(add) -> None:
    """``datasets``, ``methods``, ``demo`` and ``diagnose``."""
    ds = add(
        "datasets",
        commands_info.cmd_datasets,
        help="list the datasets under the data root",
    )
    ds.add_argument("--data-dir", default=None)

    add(
        "methods",
        commands_info.cmd_methods,
        help="list methods and their hyper-parameters",
    )

    de = add(
        "demo", commands_info.cmd_demo, help="compare the methods on a synthetic corpus"
    )
    de.add_argument("--seed", type=int, default=0)
    de.add_argument("--json", default=None)
    de.add_argument("--skip", nargs="*", default=[], help="methods to leave out")

    dg = add(
        "diagnose",
        commands_fit.cmd_diagnose,
        help="compare a topic model's random restarts",
    )
    _add_dataset_options(
        dg, "a topic model (mix-unigram, link-lda, ...)", protocol="transductive"
    )
    dg.add_argument("--restarts", type=int, default=3)
    dg.add_argument("--set", action="append", metavar="KEY=VALUE")
    dg.add_argument("--seed", type=int, default=0)
    dg.add_argument("--json", default=None)
