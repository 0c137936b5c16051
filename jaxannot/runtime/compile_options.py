"""XLA's cheaper compile for the small fits whose time is mostly compiling.

A first fit of a small model on CPU spends most of its time in XLA (issue 43: a
2000-item mixture's fit of 100 EM iterations, some 7 s of which 0.8 s run the
programs). Two of XLA's options halve that compile: loop fusions emitted by its
older LLVM IR emitter instead of the MLIR fusion emitters
(``xla_cpu_use_fusion_emitters=False``) and LLVM's ``-O1`` pipeline instead of
``-O2`` (``xla_backend_optimization_level=1``). The programs they give may run
slower, which only a large fit notices.

:func:`jit_variants` jit-compiles a function twice over, as XLA's defaults and with
:data:`FAST_OPTIONS` (per program: ``jax.jit(..., compiler_options=...)``), and
:func:`use_fast` is the rule a fit picks one by (its ``compile`` option):

- ``"optimized"``: XLA's defaults (or the process's ``XLA_FLAGS``);
- ``"fast"``: :data:`FAST_OPTIONS` on the CPU backend (elsewhere the defaults);
- ``"auto"`` (the default): ``"fast"`` where the fit's arrays hold at most
  :data:`FAST_SIZE` elements, else ``"optimized"``. The choice is read from
  shapes, so a second fit of the same shapes runs the programs of the first.

An option the process's ``XLA_FLAGS`` already sets is left to it (it is not in
:data:`FAST_OPTIONS`): the test suite's flags set both, so there both variants are
one jitted function, and a process that asks for a cheaper compile still (``-O0``)
keeps it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from typing import Any

import jax

__all__ = [
    "COMPILE_MODES",
    "FAST_OPTIONS",
    "FAST_SIZE",
    "check_compile",
    "fast_options",
    "jit_variants",
    "use_fast",
]

#: The values of a fit's ``compile`` option.
COMPILE_MODES = ("auto", "fast", "optimized")

#: Array elements of a fit (its data and its posteriors) up to which ``"auto"``
#: compiles fast: there compiling is most of a first fit. A larger fit runs long
#: enough that its programs' speed matters more than their compile.
FAST_SIZE = 250_000

_CHEAP = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}


def fast_options(xla_flags: str) -> dict[str, Any]:
    """The cheaper compile's options that ``xla_flags`` does not set already.

    Parameters
    ----------
    xla_flags : str
        An ``XLA_FLAGS`` value.

    Returns
    -------
    dict
        Option -> value, for ``jax.jit(..., compiler_options=...)``.
    """
    given = {f.split("=")[0].lstrip("-") for f in xla_flags.split()}
    return {k: v for k, v in _CHEAP.items() if k not in given}


#: This process's cheaper compile (read from ``XLA_FLAGS`` at import).
FAST_OPTIONS = fast_options(os.environ.get("XLA_FLAGS", ""))


def check_compile(mode: str) -> str:
    """``mode`` if it is one of :data:`COMPILE_MODES`, else a clear error.

    Parameters
    ----------
    mode : str
        A fit's ``compile`` option.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        Not one of :data:`COMPILE_MODES`.
    """
    if not isinstance(mode, str) or mode not in COMPILE_MODES:
        raise ValueError(
            f"compile must be one of {', '.join(map(repr, COMPILE_MODES))}, got "
            f"{mode!r}"
        )
    return mode


def use_fast(mode: str, arrays: Iterable[Any], platform: str) -> bool:
    """Whether a fit compiles with :data:`FAST_OPTIONS` (module docstring).

    Parameters
    ----------
    mode : str
        The fit's ``compile`` option, one of :data:`COMPILE_MODES`.
    arrays : iterable
        The fit's arrays (anything without a ``shape`` counts as one element).
    platform : str
        The fit's backend (``"cpu"``, ``"gpu"``, ...).

    Returns
    -------
    bool
    """
    if platform != "cpu" or mode == "optimized":
        return False
    if mode == "fast":
        return True
    size = sum(math.prod(getattr(a, "shape", ())) for a in arrays)
    return size <= FAST_SIZE


def jit_variants(fn: Callable, **jit_kwargs: Any) -> tuple[Callable, Callable]:
    """``fn`` jit-compiled with XLA's defaults and with :data:`FAST_OPTIONS`
    (the same jitted function when those are empty).

    Parameters
    ----------
    fn : callable
        The function.
    **jit_kwargs
        ``jax.jit``'s other arguments (``static_argnums``, ...).

    Returns
    -------
    tuple of (callable, callable)
        ``(optimized, fast)``.
    """
    optimized = jax.jit(fn, **jit_kwargs)
    if not FAST_OPTIONS:
        return optimized, optimized
    return optimized, jax.jit(fn, compiler_options=FAST_OPTIONS, **jit_kwargs)
