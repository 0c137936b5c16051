"""The ``jaxannot`` command line.

``jaxannot evaluate METHOD --dataset NAME|DIR``  fit and measure a method
``jaxannot tune METHOD --dataset D --grid k=..``  cross-validate a hyper-parameter grid
``jaxannot tune METHOD --dataset D --search --space k=1:60 --trials N``  a TPE search
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

import functools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

from jaxannot.cli.files import UserError
from jaxannot.cli.logs import log_to_stderr
from jaxannot.cli.parser import build_parser
from jaxannot.signals import interrupts_held

__all__ = ["console", "main"]

# not __name__: that is "__main__" under `python -m jaxannot.cli`
log = logging.getLogger("jaxannot.cli")


#: ``--FLAG`` (its ``dest``) -> inclusive bounds, checked before any command runs.
#: Past them jax overflows (its integers are 32-bit) or no machine has the memory;
#: the seed's range is what numpy's ``RandomState`` (the folds of ``tune``) accepts.
INT_FLAGS = {
    "seed": (0, 2**32 - 1),
    "checkpoint_every": (1, 10**6),
    "folds": (2, 10**6),
    "trials": (1, 10**6),
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``jaxannot ARGV``; return the exit status.

    Ctrl-C at any point after this module is imported (start-up's imports
    included, which this module defers to the commands) prints ``jaxannot:
    interrupted`` and returns 130, with no traceback; during the import of jax,
    once that import is done.
    """
    _RESENDER.start()
    saved_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_resend_interrupt, saved_hook)
    try:
        args = build_parser().parse_args(argv)
        with interrupts_held():  # Ctrl-C inside jaxlib's set-up aborts the process
            import jax  # noqa: F401
        from jaxannot.data.write_targets import protecting

        with log_to_stderr(args.log_level), protecting():  # the inputs: never written
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


class _Resender:
    """A daemon thread that sends ``SIGINT`` to this process again on request.

    Started once, before any command runs, so that :func:`_resend_interrupt` only
    sets an event: starting a thread there waits for it to start, and the resent
    signal could land inside that wait, in the hook, where it is swallowed again
    (seen once in 250 interrupted fits on a loaded machine).
    """

    def __init__(self) -> None:
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="jaxannot-resend-interrupt", daemon=True
            )
            self._thread.start()

    def request(self) -> None:
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            # a moment later, once the hook that asked has returned
            time.sleep(0.01)
            self.sent += 1
            os.kill(os.getpid(), signal.SIGINT)


_RESENDER = _Resender()


def _resend_interrupt(hook, unraisable) -> None:
    """``sys.unraisablehook``: a Ctrl-C that lands where Python cannot raise it (a
    garbage-collector callback, such as jax's, a ``__del__``, a weakref callback)
    would be printed with a traceback and lost; it is sent again instead (by
    :data:`_RESENDER`), to be raised in the code that runs next. A resent one that
    lands in this hook itself asks again. Other unraisable errors go to ``hook``."""
    if not issubclass(unraisable.exc_type, KeyboardInterrupt):
        hook(unraisable)
        return
    while True:
        try:
            _RESENDER.request()
            return
        except KeyboardInterrupt:
            continue


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
        _print_error(
            f"out of memory{_inputs_of(args)}: {detail or 'MemoryError'}; "
            "ask for smaller sizes (fewer images, "
            "VReps, topics, bins or eigenfunctions: see `jaxannot methods`)"
        )
        return 2


def _inputs_of(args) -> str:
    """`` on INPUT, ...``: the files and folders the command was reading (its
    MODEL, ``--dataset``, PHOTOS_DIR, ``--tags``, ``--extractor``), for an
    out-of-memory message."""
    names = []
    for dest in ("model", "dataset", "photos", "tags", "extractor"):
        value = getattr(args, dest, None)
        if isinstance(value, str | os.PathLike) and os.fspath(value):
            names.append(f"{dest.replace('_', ' ')} {os.fspath(value)}")
    return f" on {', '.join(names)}" if names else ""


def _print_error(message: str) -> None:
    """``jaxannot: error: message`` on stderr, on one line: a line break in it (a
    file name may hold one) is written as ``\\n``, every other control character
    (ESC, BEL, NUL: a file's text quoted by a parser) as ``\\xNN``
    (:func:`~jaxannot.data.errors.printable`)."""
    from jaxannot.data.errors import printable

    one_line = message.replace("\r", "\\r").replace("\n", "\\n")
    print(f"jaxannot: error: {printable(one_line)}", file=sys.stderr)


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
