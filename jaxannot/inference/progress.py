"""Run a jit-compiled step function many times, with an optional tqdm progress bar.

Every iterative fit of the library (:class:`~jaxannot.inference.VEM`,
:class:`~jaxannot.inference.MAP`, ...) is a pure ``step(t, carry) -> (carry, loss)``
run by :func:`run_steps`. The loop over steps is one jit-compiled ``lax.fori_loop``
with *dynamic* bounds, so the same compiled program serves any slice of the steps:

- ``progress_bar=False`` runs all steps in one call;
- ``progress_bar=True`` runs them in about 50 slices and updates a tqdm bar (shown only
  when the run lasts longer than ``delay`` seconds, as ``numpyro.infer.SVI.run`` shows
  its bar) with the current loss, without a second compile.

The step is a static argument: pass the *same* function object on every run (build it
once, e.g. in an object's ``__init__`` or a cached builder) and a second run on arrays
of the same shapes compiles nothing.

Inside a :func:`jaxannot.inference.checkpoint.checkpointing` block the loop runs in
slices of the block's ``every`` steps and saves its carry after each, and resumes from
a saved carry of the same fit (:mod:`jaxannot.inference.checkpoint`).
"""

from __future__ import annotations

import functools
import operator
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from jaxannot.inference import checkpoint, sharding

__all__ = ["check_count", "run_steps"]

#: Number of slices a run with a progress bar is cut into.
_SLICES = 50


@functools.partial(jax.jit, static_argnames=("step", "replicated"))
def _advance(
    step: Callable, carry: Any, losses: jax.Array, start, stop, data, replicated=None
):
    def body(t, state):
        carry, losses = state
        carry, loss = step(t, carry) if data is None else step(t, carry, data)
        return carry, losses.at[t].set(jnp.asarray(loss, losses.dtype))

    carry, losses = lax.fori_loop(start, stop, body, (carry, losses))
    if replicated is not None:  # keep the trace's layout from slice to slice
        losses = lax.with_sharding_constraint(losses, replicated)
    return carry, losses, losses[stop - 1]


def _index(value) -> int | None:
    """``operator.index(value)``, or None where ``value`` is not an integer."""
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_count(name: str, value, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer ``>= minimum``, else a clear error.

    A count (of steps, restarts, draws) is refused rather than truncated when it is
    not an integer: ``10.7``, ``True``, ``"10"`` and ``10.0`` raise, while Python and
    NumPy integers (and 0-d integer arrays) pass.

    Parameters
    ----------
    name : str
        The argument's name, for the message (e.g. ``"num_steps"``).
    value : object
        What the caller passed.
    minimum : int
        The least allowed value.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``value`` is not an integer (a bool, a float, a string, ...).
    ValueError
        ``value < minimum``.

    Examples
    --------
    >>> check_count("num_steps", 10)
    10
    >>> check_count("num_steps", 10.7)
    Traceback (most recent call last):
    ...
    TypeError: num_steps must be an integer >= 1, got 10.7 (float): pass an int
    """
    expected = f"{name} must be an integer >= {minimum}"
    count = None if isinstance(value, (bool, np.bool_)) else _index(value)
    if count is None:
        raise TypeError(
            f"{expected}, got {value!r} ({type(value).__name__}): pass an int"
        )
    if count < minimum:
        raise ValueError(f"{expected}, got {count}: pass at least {minimum}")
    return count


def _replicated_on_carry_mesh(carry) -> NamedSharding | None:
    """Replicated sharding on the mesh of a carry split over several devices (a
    data-parallel fit), else None: the loss trace then keeps one layout in every
    slice, so slicing the loop compiles it once."""
    for leaf in jax.tree.leaves(carry):
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, NamedSharding) and sharding.mesh.size > 1:
            return NamedSharding(sharding.mesh, PartitionSpec())
    return None


def run_steps(
    step: Callable[[jax.Array, Any], tuple[Any, jax.Array]],
    carry: Any,
    num_steps: int,
    *,
    progress_bar: bool = True,
    desc: str = "fit",
    delay: float = 2.0,
    data: Any = None,
) -> tuple[Any, np.ndarray]:
    """Run ``carry, loss = step(t, carry)`` for ``t = 0 .. num_steps - 1``.

    Parameters
    ----------
    step : callable
        Pure and hashable; ``t`` is the (traced) step index, e.g. for
        ``jax.random.fold_in``. The loss is a scalar recorded per step.
    carry : pytree
        The state entering step 0.
    num_steps : int
        At least 1 (as ``numpyro.infer.SVI.run``); checked by :func:`check_count`.
    progress_bar : bool
        Show a tqdm bar with the loss (after ``delay`` seconds) on stderr.
    desc : str
        The bar's label.
    delay : float
        Seconds before the bar appears (short runs print nothing).
    data : pytree, optional
        Arrays every step reads and none changes (a corpus): with them the step is
        ``step(t, carry, data)``. They are arguments of the compiled loop, not part
        of its carry, so the loop does not copy them into its output.

    Returns
    -------
    carry : pytree
        The state after the last step.
    losses : np.ndarray [num_steps]

    Raises
    ------
    TypeError, ValueError
        ``num_steps`` is not an integer >= 1 (:func:`check_count`).
    """
    num_steps = check_count("num_steps", num_steps)
    losses = jnp.full((num_steps,), jnp.nan, jnp.float32)
    replicated = _replicated_on_carry_mesh(carry)
    if replicated is not None:
        losses = sharding.put(losses, replicated)
    advance = functools.partial(_advance, step, data=data, replicated=replicated)
    session = checkpoint.active_session()
    if session is None and not progress_bar:
        carry, losses, _ = advance(carry, losses, 0, num_steps)
        return carry, np.asarray(sharding.gather(losses))
    start, size, save = 0, max(1, -(-num_steps // _SLICES)), None
    if session is not None:
        run = session.next_run()
        path = session.path(run)
        fitted = carry if data is None else (carry, data)  # a checkpoint of this data
        digest = checkpoint.fingerprint(session, run, fitted, num_steps)
        if path.exists():
            carry, losses, start = checkpoint.load(path, digest, carry)
            session.resumed.append((run, start))
        size = session.every

        def save(carry, losses, stop):
            checkpoint.save(path, digest, carry, losses, stop)
            session.saved += 1

    from tqdm.auto import tqdm

    bar = tqdm(
        total=num_steps,
        initial=start,
        desc=desc,
        delay=delay,
        file=sys.stderr,
        disable=not progress_bar,
    )
    with bar:
        for begin in range(start, num_steps, size):
            stop = min(num_steps, begin + size)
            carry, losses, last = advance(carry, losses, begin, stop)
            if save is not None:
                save(carry, losses, stop)
            bar.set_postfix(loss=f"{float(sharding.gather(last)):.6g}", refresh=False)
            bar.update(stop - begin)
    return carry, np.asarray(sharding.gather(losses))
