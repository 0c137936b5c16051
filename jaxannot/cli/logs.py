"""Logging for the ``jaxannot`` command line: records of the ``"jaxannot"`` logger on
stderr as ``jaxannot: message`` while a command runs, and the ``-q/--quiet``,
``-v/--verbose`` options that set their level (see :mod:`jaxannot.cli`)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator

__all__ = ["log_to_stderr", "add_logging_options"]


class _StderrHandler(logging.Handler):
    """``jaxannot: message`` (``jaxannot: warning: message`` from WARNING up) on the
    current ``sys.stderr`` through ``tqdm.write``: it does not break a progress bar.
    Control characters in the message (a tag or file name quoted from a file) are
    escaped (:func:`~jaxannot.data.errors.printable`)."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm.auto import tqdm

        from jaxannot.data.errors import printable

        warns = record.levelno >= logging.WARNING
        level = f"{record.levelname.lower()}: " if warns else ""
        try:
            text = printable(record.getMessage())  # a file's text: no ESC, BEL ...
            tqdm.write(f"jaxannot: {level}{text}", file=sys.stderr)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def log_to_stderr(level: int) -> Iterator[None]:
    """Print the ``"jaxannot"`` logger's records at ``level`` and above on stderr
    while the command runs; the logger is restored afterwards."""
    logger = logging.getLogger("jaxannot")
    handler = _StderrHandler()
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)


def add_logging_options(parser: argparse.ArgumentParser, default: int | str) -> None:
    """``-q/--quiet`` and ``-v/--verbose``: the level of the CLI's log handler."""
    group = parser.add_mutually_exclusive_group()
    for flags, level, text in (
        (("-q", "--quiet"), logging.WARNING, "no progress: warnings and errors only"),
        (("-v", "--verbose"), logging.DEBUG, "also debug messages (each fit of tune)"),
    ):
        group.add_argument(
            *flags,
            dest="log_level",
            action="store_const",
            const=level,
            default=default,
            help=text,
        )
