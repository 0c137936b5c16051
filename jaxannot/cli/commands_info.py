"""The commands that describe or demonstrate: ``datasets``, ``methods``, ``demo``."""

from __future__ import annotations

import argparse
import logging

from jaxannot.cli.files import check_writable_output, write_json

__all__ = ["cmd_datasets", "cmd_demo", "cmd_methods"]

log = logging.getLogger("jaxannot.cli")


def cmd_datasets(args: argparse.Namespace) -> int:
    """``jaxannot datasets``: the datasets under the data root, found or missing."""
    from jaxannot.data.datasets import data_root, list_datasets

    root = data_root(args.data_dir)
    print(f"data root: {root}")
    for name, present, summary in list_datasets(args.data_dir):
        print(f"  {name:<12} {'found  ' if present else 'missing'}  {summary}")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    """``jaxannot methods``: every method, its hyper-parameters, their defaults and
    where each default comes from."""
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


def cmd_demo(args: argparse.Namespace) -> int:
    """``jaxannot demo``: every applicable method on a synthetic corpus."""
    from tqdm.auto import tqdm

    from jaxannot.annotators import available_methods
    from jaxannot.annotators.base import show_progress
    from jaxannot.data import make_task
    from jaxannot.data.synthetic import make_synthetic
    from jaxannot.evaluation import check_applicable, evaluate
    from jaxannot.metrics.tables import format_table

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
