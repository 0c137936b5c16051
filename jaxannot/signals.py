"""Ctrl-C at the moments when Python code must not be cut off.

Imports nothing heavy: the command line uses it before jax is imported.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["interrupts_held"]


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (``SIGINT``) back until the block ends, then deliver it.

    For code that is not written for an exception at any bytecode: the standard
    :mod:`zipfile` writer, interrupted inside a member's ``close``, leaves an archive
    that cannot be closed (a ``ValueError`` replaces the interrupt, and a traceback
    is printed when the archive is collected); a ``KeyboardInterrupt`` raised in
    Python code that jaxlib's C++ module set-up calls aborts the process. A
    ``SIGINT`` that arrives inside the block is raised again (``signal.raise_signal``)
    as soon as the block is left, with or without an error, under the handler that
    was in place before it: with Python's default one, a ``KeyboardInterrupt``.
    Only the main thread can set a signal handler; elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(1))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)
