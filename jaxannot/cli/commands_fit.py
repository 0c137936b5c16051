"""The commands that fit methods on a dataset: ``evaluate``, ``tune``, ``diagnose``.

Each parses its ``--set`` / ``--grid`` / ``--space`` values once, checks them and
its outputs before loading any data, and hands the checked values
(:class:`~jaxannot.annotators.Hyper`, :class:`~jaxannot.tuning.Grid`,
:class:`~jaxannot.tuning.Space`) down unchanged.
"""

from __future__ import annotations

import argparse
import logging

from jaxannot.cli.files import (
    UserError,
    check_writable_output,
    dataset_folders,
    real_path,
    refuse_overwriting_inputs,
    write_json,
    writing,
)
from jaxannot.cli.tune_output import print_searched, print_tuned

__all__ = ["cmd_diagnose", "cmd_evaluate", "cmd_tune"]

log = logging.getLogger("jaxannot.cli")


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``jaxannot evaluate METHOD``: fit, score and measure one method."""
    from jaxannot.annotators import get_method, parse_hyper, save
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.evaluation import evaluate
    from jaxannot.metrics.tables import check_columns, format_table

    method = get_method(args.method)
    # the one parse and check of --set, before loading; evaluate takes it as it is
    hyper = parse_hyper(method, args.set or [])
    columns = check_columns(args.metrics) if args.metrics is not None else None
    checkpoint = [real_path(args.checkpoint)] if args.checkpoint else []
    refuse_overwriting_inputs(
        {"--json": args.json, "--save": args.save, "--checkpoint": args.checkpoint},
        {"--dataset": dataset_folders(args.dataset, args.data_dir)},
    )
    refuse_overwriting_inputs(  # the checkpoint is read and written
        {"--json": args.json, "--save": args.save},
        {"--checkpoint": checkpoint},
        protect_inputs=False,
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


def cmd_diagnose(args: argparse.Namespace) -> int:
    """Fit a topic model from several starts; compare their Hungarian-aligned topics."""
    from jaxannot.annotators import get_method, parse_hyper
    from jaxannot.data import make_task
    from jaxannot.data.datasets import load_dataset
    from jaxannot.diagnostics import diagnose_restarts

    hyper = parse_hyper(get_method(args.method), args.set or [])
    _check_json_output(args)
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


def cmd_tune(args: argparse.Namespace) -> int:
    """``jaxannot tune METHOD --grid ...`` (k-fold cross-validation of a grid on the
    training images) or ``--search --space ...`` (a TPE search, each trial
    cross-validated); prints the table and the best setting as ``--set`` flags."""
    from jaxannot.annotators import get_method

    _check_tune_mode(args)
    method = get_method(args.method)
    if args.search:
        return _search(args, method)
    from jaxannot.annotators.base import show_progress
    from jaxannot.tuning import cross_validate, parse_grid, resolve_fixed

    args.folds = 5 if args.folds is None else args.folds
    # the checks that need no data come before loading it; all come before fitting
    grid = parse_grid(method, args.grid or [])
    fixed = resolve_fixed(method, grid, args.set or [])
    _check_tune_outputs(args)
    corpus, unlabelled, metric = _tune_data(args, method)
    n_settings = 1
    for values in grid.values():
        n_settings *= len(values)
    log.info(
        "%s on %s (%s): %d-fold cross-validation of %d setting(s) on the %d training "
        "images (%d fits), comparing %s",
        method.name, corpus.name, args.protocol, args.folds, n_settings,
        corpus.num_images, n_settings * args.folds, metric,
    )  # fmt: skip
    folds = _fold_arguments(args, metric, fixed, unlabelled)
    result = cross_validate(method, corpus, grid, **folds, progress=show_progress())
    print_tuned(result)
    if args.json:
        write_json(args.json, result.as_json())
    log.info("tuned in %.1f s", result.seconds)
    return 0


def _check_tune_mode(args) -> None:
    """:class:`UserError` unless exactly one of ``--grid`` and ``--search`` is
    given, with what each needs (``--search``: ``--space`` and ``--trials``)."""
    search_only = {"--space": args.space, "--trials": args.trials}
    search_only["--timeout"] = args.timeout
    search_only["--no-prune"] = None if args.prune else True
    if args.grid and args.search:
        raise UserError(
            "--grid and --search exclude each other: --grid fits every listed "
            "setting, --search draws --trials settings from --space; give one"
        )
    if not args.search:
        if not args.grid:
            raise UserError(
                "give --grid KEY=V1,V2,... (every setting) or --search --space "
                "KEY=LO:HI --trials N (settings drawn by TPE)"
            )
        given = [flag for flag, value in search_only.items() if value is not None]
        if given:
            raise UserError(f"{given[0]} goes with --search, not --grid")
        return
    if not args.space:
        raise UserError(
            "--search needs --space KEY=LO:HI[:log] or KEY=V1,V2,... (repeat for "
            "each key)"
        )
    if args.trials is None:
        raise UserError("--search needs --trials N, the number of settings to try")


def _fold_arguments(args, metric: str, fixed, unlabelled) -> dict:
    """The keyword arguments that ``tune`` gives both
    :func:`~jaxannot.tuning.cross_validate` and :func:`~jaxannot.tuning.search`:
    the folds, metric, protocol, seed, fixed hyper-parameters and unlabelled images."""
    return {
        "folds": args.folds,
        "metric": metric,
        "protocol": args.protocol,
        "labelled_fraction": args.labelled_fraction,
        "seed": args.seed,
        "fixed": fixed,
        "unlabelled": unlabelled,
    }


def _check_tune_outputs(args) -> None:
    """``--labelled-fraction`` in range and ``--json`` writable, not inside the
    dataset: before any data is loaded."""
    lf = args.labelled_fraction
    if lf is not None and not 0.0 < lf <= 1.0:
        raise UserError(f"--labelled-fraction must be in (0, 1], got {lf}")
    _check_json_output(args)


def _check_json_output(args) -> None:
    """``--json`` writable and not inside the dataset it is computed from."""
    refuse_overwriting_inputs(
        {"--json": args.json},
        {"--dataset": dataset_folders(args.dataset, args.data_dir)},
    )
    if args.json:
        check_writable_output(args.json)


def _search(args, method) -> int:
    """``tune --search``: optuna, the space, the budget and the outputs checked
    before loading data; the search; its table; the whole record to ``--json``."""
    from jaxannot.tuning import hyper_search, parse_space, resolve_fixed

    try:
        hyper_search.require_optuna()
    except ImportError as err:
        raise UserError(str(err)) from None
    args.folds = 3 if args.folds is None else args.folds
    space = parse_space(method, args.space)
    fixed = resolve_fixed(method, space, args.set or [], flag="--space")
    hyper_search.check_budget(args.trials, args.timeout)
    _check_tune_outputs(args)
    corpus, unlabelled, metric = _tune_data(args, method)
    log.info(
        "%s on %s (%s): TPE search of %s, %d trial(s)%s, each a %d-fold "
        "cross-validation on the %d training images, comparing %s",
        method.name, corpus.name, args.protocol, ", ".join(space), args.trials,
        "" if args.timeout is None else f" or {args.timeout:g} s",
        args.folds, corpus.num_images, metric,
    )  # fmt: skip
    folds = _fold_arguments(args, metric, fixed, unlabelled)
    result = hyper_search.search(
        method,
        corpus,
        space,
        **folds,
        trials=args.trials,
        timeout=args.timeout,
        prune=args.prune,
    )
    if args.json:
        write_json(args.json, result.as_json())
    print_searched(result)
    log.info("searched in %.1f s", result.seconds)
    return 0


def _tune_data(args, method):
    """The training images to cross-validate, the images fitted on unlabelled
    (transductive; else None) and the metric compared; the folds and the metric are
    checked before any fit."""
    from jaxannot.data.datasets import load_dataset
    from jaxannot.tuning import (
        kfold_rows,
        resolve_metric,
        training_images,
        unlabelled_images,
    )

    train, test = load_dataset(args.dataset, data_dir=args.data_dir)
    corpus = training_images(train, test, seed=args.seed)  # the test split: left out
    unlabelled = None  # transductive: the other images' features, never their words
    if args.protocol == "transductive":
        unlabelled = unlabelled_images(train, test, seed=args.seed)
    kfold_rows(corpus.num_images, args.folds, args.seed)
    metric = resolve_metric(method, corpus, args.metric)
    return corpus, unlabelled, metric
