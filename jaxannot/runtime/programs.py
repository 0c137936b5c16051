"""A bound on the compiled programs a long session keeps alive.

Every XLA executable holds memory mappings (on CPU about 9 to 21 each; a
``mix-unigram`` configuration compiles some 20 programs, some 330 mappings), and
jax keeps every program it compiled for as long as the function it compiled is alive:
module-level ``jax.jit`` functions and the compiled loops that take a step function as
a static argument live as long as the process. A session that fits many
configurations which change a compiled shape (a search over an integer
hyper-parameter, a ``GridSearchCV``, a notebook) then grows without end, until
Linux's limit on mappings (``vm.max_map_count``, 65,530 by default) ends it: XLA
prints ``LLVM compilation error: Cannot allocate memory`` and the process segfaults.

Two bounds keep that flat:

- **The program budget.** Every registered method's ``fit``
  (:class:`jaxannot.annotators.Method`) first calls :func:`release_if_over_budget`:
  when more than :func:`program_budget` programs (default :data:`DEFAULT_BUDGET`,
  or the environment variable ``JAXANNOT_MAX_PROGRAMS``) were compiled or loaded
  from the persistent cache since the last release, it calls
  :func:`release_compiled_programs`, which empties the builder caches below and
  jax's own caches (:func:`jax.clear_caches`), so the executables are freed. Jax can
  only drop its caches all at once, so the release is of every program, not of the
  least recently used: configurations still in use compile again on their next fit
  (or load from the persistent compilation cache when it is on). Releases happen
  only between fits, never inside one, and never inside :func:`keep_programs`.
- **Bounded builder caches.** The functions that build one step function or jitted
  closure per configuration are :func:`bounded_cache` LRUs of a documented size
  (:data:`BUILDER_CACHE_SIZE` unless a module says otherwise), registered here so a
  release empties them too.

Refits of one configuration, and continuous hyper-parameters that are traced values,
compile nothing new and never reach the budget.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import jax
import jax.monitoring

__all__ = [
    "BUILDER_CACHE_SIZE",
    "DEFAULT_BUDGET",
    "bounded_cache",
    "keep_programs",
    "program_budget",
    "programs_since_release",
    "release_compiled_programs",
    "release_if_over_budget",
    "releases",
    "set_program_budget",
]

#: Programs compiled (or loaded) since the last release above which the next fit
#: releases them all: at 9 to 21 mappings a program, 256 programs hold some 2,300 to
#: 5,400 mappings, under a tenth of Linux's default limit (65,530), and cover the
#: programs of several configurations of the largest methods (lap-mix-unigram
#: compiles 58 for one).
DEFAULT_BUDGET = 256

#: The size of the LRU of each builder of step functions / jitted closures (one entry
#: per configuration).
BUILDER_CACHE_SIZE = 32

_ENV = "JAXANNOT_MAX_PROGRAMS"
#: jax records it around compiling a program or loading it from the persistent
#: compilation cache (``compile_or_get_cached``): once per program either way, so a
#: loaded program, which holds its mappings too, counts once
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

F = TypeVar("F", bound=Callable[..., Any])


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.programs = 0  # compiled or loaded since the last release
        self.releases = 0
        self.held = 0  # keep_programs() depth
        self.budget: int | None = None  # None: the environment's or the default
        self.caches: list[Callable[[], None]] = []


_STATE = _State()


def _on_compile(name: str, *_args, **_kwargs) -> None:
    if name == _COMPILE_EVENT:
        with _STATE.lock:
            _STATE.programs += 1


jax.monitoring.register_event_duration_secs_listener(_on_compile)


def program_budget() -> int:
    """The budget in force: :func:`set_program_budget`'s, else the environment
    variable ``JAXANNOT_MAX_PROGRAMS``, else :data:`DEFAULT_BUDGET`.

    Returns
    -------
    int
        Programs since the last release above which the next fit releases them.
    """
    if _STATE.budget is not None:
        return _STATE.budget
    text = os.environ.get(_ENV, "").strip()
    if not text:
        return DEFAULT_BUDGET
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{_ENV} must be a positive integer, got {text!r}") from None
    if value < 1:
        raise ValueError(f"{_ENV} must be a positive integer, got {text!r}")
    return value


def set_program_budget(budget: int | None) -> int | None:
    """Set the program budget for this process (None: back to the environment's or
    the default).

    Parameters
    ----------
    budget : int or None
        Programs since the last release above which the next fit releases them.

    Returns
    -------
    int or None
        The budget set before (None if none was).
    """
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise ValueError(f"the program budget must be a positive integer: {budget!r}")
    previous, _STATE.budget = _STATE.budget, budget
    return previous


def programs_since_release() -> int:
    """Programs compiled or loaded from the persistent cache since the last release
    (or since jaxannot was imported)."""
    return _STATE.programs


def releases() -> int:
    """How many times :func:`release_compiled_programs` ran in this process."""
    return _STATE.releases


def release_compiled_programs() -> None:
    """Free every compiled program: empty the :func:`bounded_cache` builders and jax's
    caches (:func:`jax.clear_caches`), then collect garbage so the executables and
    their memory mappings go now."""
    for clear in list(_STATE.caches):
        clear()
    jax.clear_caches()
    gc.collect()
    with _STATE.lock:
        _STATE.programs = 0
        _STATE.releases += 1


def release_if_over_budget() -> bool:
    """Release the compiled programs (:func:`release_compiled_programs`) when more than
    :func:`program_budget` were compiled since the last release, unless inside
    :func:`keep_programs`. Called before every registered method's fit.

    Returns
    -------
    bool
        Whether it released them.
    """
    if _STATE.held or _STATE.programs <= program_budget():
        return False
    release_compiled_programs()
    return True


@contextlib.contextmanager
def keep_programs() -> Iterator[None]:
    """No release inside this block (a measurement of compiles or of time that
    must not see programs dropped under it)."""
    with _STATE.lock:
        _STATE.held += 1
    try:
        yield
    finally:
        with _STATE.lock:
            _STATE.held -= 1


def bounded_cache(maxsize: int = BUILDER_CACHE_SIZE) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)``, emptied by every release.

    For builders of step functions or jitted closures, one per configuration: an
    entry evicted (or released) drops its function, and with :func:`jax.clear_caches`
    the programs compiled for it.

    Parameters
    ----------
    maxsize : int
        Configurations kept (least recently used evicted first).

    Returns
    -------
    callable
        The decorator.
    """
    if maxsize < 1:
        raise ValueError(f"maxsize must be positive, got {maxsize}")

    def decorate(fn: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        _STATE.caches.append(cached.cache_clear)
        return cached  # type: ignore[return-value]

    return decorate
