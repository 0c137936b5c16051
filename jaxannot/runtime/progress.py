"""Run a jit-compiled step function many times, with an optional tqdm progress bar.

Every iterative fit of the library (:class:`~jaxannot.inference.VEM`,
:class:`~jaxannot.inference.MAP`, ...) is a pure ``step(t, carry) -> (carry, info)``
run by :func:`run_steps`, as blackjax's kernels return ``(state, info)``: ``info`` is
a pytree of arrays recorded at every step (the simplest, a scalar loss; VEM's, the
loss and a fault code: :class:`~jaxannot.inference.VEMInfo`). A random kernel of
blackjax's shape, ``kernel(rng_key, state, *args) -> (state, info)`` (contrastive
divergence, :mod:`~jaxannot.inference.em`'s kernels), runs as such a step wrapped in
:class:`Keyed`, which hands step ``t`` the key ``fold_in(rng_key, t)``. The loop over
steps is one jit-compiled ``lax.fori_loop`` with *dynamic* bounds over info buffers
of fixed length (:data:`BUFFER`), so the same compiled program serves any slice of
the steps and any number of steps:

- ``progress_bar=False`` runs the steps in slices of :data:`BUFFER`;
- ``progress_bar=True`` runs them in about 50 slices and updates a tqdm bar (shown only
  when the run lasts longer than ``delay`` seconds, as ``numpyro.infer.SVI.run`` shows
  its bar) with the current loss (the info itself where it is a scalar, else its
  ``loss`` field), without a second compile.

:func:`run_step` takes one step through the same compiled loop (an object's
``update``, as ``numpyro.infer.SVI.update``), so stepping by hand after a run, or a run
after stepping by hand, compiles no second program of the step.

The step is a static argument: pass the *same* function object on every run (build it
once, e.g. in an object's ``__init__`` or a cached builder) and a second run on arrays
of the same shapes compiles nothing.

A fit that stops at a tolerance keeps a ``stopped`` flag in its carry (a step after
it changes nothing) and passes ``done``, read on the host after each slice: the
slices after it are not run (:func:`run_steps`).

A loop that is one part of a larger compiled program (a solver called inside another
fit's step) runs the same ``step(t, carry[, data])`` through :func:`run_until_stopped`:
one ``lax.while_loop``, traced where it is called, that ends at the first step whose
carry says ``stopped`` or at a step budget, its infos in buffers of a static length.

Inside a :func:`jaxannot.runtime.checkpoint.checkpointing` block the loop runs in
slices of the block's ``every`` steps and saves its carry after each, and resumes from
a saved carry of the same fit (:mod:`jaxannot.runtime.checkpoint`), with the infos
recorded so far.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from jaxannot.runtime import checkpoint, sharding
from jaxannot.runtime.compile_options import jit_variants

__all__ = [
    "Keyed",
    "check_count",
    "compile_in_background",
    "compile_lowered",
    "run_step",
    "run_steps",
    "run_until_stopped",
]

#: Number of slices a run with a progress bar is cut into.
_SLICES = 50

#: Steps one compiled call runs at most: the info buffers' length. A run of any length
#: goes through the same compiled loop in slices of at most this many steps, so
#: ``num_steps`` is not a compiled shape (a fit of 100 steps and one of 57 share it).
BUFFER = 64


def _fill(dtype) -> float:
    """What an info buffer holds where no step wrote: NaN (floats) or 0."""
    return np.nan if jnp.issubdtype(dtype, jnp.inexact) else 0


def _buffer(shape: jax.ShapeDtypeStruct) -> jax.Array:
    """A buffer of :data:`BUFFER` entries of an info leaf (:func:`_fill`)."""
    return jnp.full((BUFFER, *shape.shape), _fill(shape.dtype), shape.dtype)


def _advance(step: Callable, carry: Any, offset, count, data, replicated=None):
    """Steps ``offset .. offset + count - 1`` (``count <= BUFFER``) and their infos,
    each leaf in a buffer of ``BUFFER`` entries (NaN or 0 past ``count``)."""
    call = jax.jit(step)  # traced once: for the info's shapes, then in the loop
    first = (offset, carry) if data is None else (offset, carry, data)
    _, shapes = call.eval_shape(*first)
    trace = jax.tree.map(_buffer, shapes)
    if replicated is not None:  # keep the trace's layout from slice to slice
        trace = jax.tree.map(
            lambda b: lax.with_sharding_constraint(b, replicated), trace
        )

    def body(i, state):
        carry, trace = state
        t = offset + i
        carry, info = call(t, carry) if data is None else call(t, carry, data)
        return carry, jax.tree.map(lambda b, x: b.at[i].set(x), trace, info)

    return lax.fori_loop(0, count, body, (carry, trace))


#: :func:`_advance` compiled with XLA's defaults and cheaply
#: (:mod:`~jaxannot.runtime.compile_options`), by ``fast_compile``.
_ADVANCE = dict(
    zip(
        (False, True),
        jit_variants(_advance, static_argnames=("step", "replicated")),
        strict=True,
    )
)


def compile_in_background(
    step: Callable, carry: Any, data: Any = None, fast_compile: bool = False
) -> threading.Thread:
    """Trace and lower :func:`run_steps`'s compiled loop for the shapes of ``carry``
    (a one-device carry, or its ``jax.ShapeDtypeStruct`` tree) here, and compile it
    on a thread: XLA compiles it while this thread goes on (e.g. compiling the
    fit's start), and :func:`run_steps` on a carry of those shapes then runs it
    without compiling. A compile that fails on the thread is left to
    :func:`run_steps`, which compiles again and raises.

    Parameters
    ----------
    step : callable
        ``step(t, carry[, data]) -> (carry, info)``, as :func:`run_steps` takes it.
    carry : pytree
        The carry, or its shapes.
    data : pytree, optional
        As :func:`run_steps` takes it.
    fast_compile : bool
        As :func:`run_steps` takes it.

    Returns
    -------
    threading.Thread
        The compiling thread (started; join it before timing the loop).
    """
    lowered = _ADVANCE[bool(fast_compile)].lower(
        step, carry, 0, 1, data=data, replicated=None
    )
    return compile_lowered(lowered)


def compile_lowered(lowered: jax.stages.Lowered) -> threading.Thread:
    """Compile a lowered program on a thread (XLA compiles it while this thread
    goes on); a call of its jitted function on the same shapes, once the thread
    is joined, runs it without compiling. A compile that fails on the thread is
    left to that call, which compiles again and raises.

    Parameters
    ----------
    lowered : jax.stages.Lowered
        ``jitted.lower(...)``.

    Returns
    -------
    threading.Thread
        The compiling thread (started; join it before calling the jitted
        function).
    """

    def compile_quietly():
        try:
            lowered.compile()
        except Exception:  # noqa: BLE001 - the call compiles again and raises
            pass

    thread = threading.Thread(target=compile_quietly, daemon=True)
    thread.start()
    return thread


def _slices(start: int, stop: int, size: int, every: int | None):
    """``(begin, end, save)`` slices of ``[start, stop)`` of at most ``size`` steps,
    ending on every multiple of ``every`` (``save`` there and at ``stop``)."""
    begin = start
    while begin < stop:
        end = min(stop, begin + size)
        if every is not None:
            end = min(end, (begin // every + 1) * every)
        yield begin, end, every is not None and (end % every == 0 or end == stop)
        begin = end


def _index(value) -> int | None:
    """``operator.index(value)``, or None where ``value`` is not an integer."""
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_count(name: str, value: object, minimum: int = 1, what: str = "") -> int:
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
    what : str
        What the count counts, shown in parentheses (e.g. ``"EM iterations"``).

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
    label = f" ({what})" if what else ""
    expected = f"{name} must be an integer >= {minimum}{label}"
    count = None if isinstance(value, (bool, np.bool_)) else _index(value)
    if count is None:
        raise TypeError(
            f"{expected}, got {value!r} ({type(value).__name__}): pass an int"
        )
    if count < minimum:
        raise ValueError(f"{expected}, got {count}: pass at least {minimum}")
    return count


@dataclasses.dataclass(frozen=True)
class Keyed:
    """A kernel ``kernel(rng_key, state, *args) -> (state, info)`` (blackjax's
    shape) as the runner's ``step(t, state, data)``, with ``data = (rng_key, args)``.

    Step ``t`` draws with ``jax.random.fold_in(rng_key, t)``: under JAX's default
    (partitionable threefry) keys, the ``t``-th key of
    ``jax.random.split(rng_key, num_steps)``, so a run gives bit for bit the
    states of a ``lax.scan`` over those keys, with one compiled loop for any
    ``num_steps`` (no key array of ``num_steps`` rows is an argument). Equal
    (and hashing equal) for the same kernel: wrap it anew at every run and the
    loop compiled for the first run serves the next.

    Parameters
    ----------
    kernel : callable
        ``kernel(rng_key, state, *args) -> (state, info)``, pure and hashable.

    Examples
    --------
    >>> def kernel(rng_key, state, scale):
    ...     state = state + scale * jax.random.normal(rng_key)
    ...     return state, state
    >>> data = (jax.random.key(0), (jnp.float32(0.1),))
    >>> state, trace = run_steps(
    ...     Keyed(kernel), jnp.float32(0), 5, data=data, progress_bar=False
    ... )
    >>> trace.shape
    (5,)
    """

    kernel: Callable

    def __call__(self, t: jax.Array, state: Any, data: tuple) -> tuple[Any, Any]:
        """Step ``t``: the kernel at ``fold_in(rng_key, t)``.

        Parameters
        ----------
        t : jax.Array
            The step's index.
        state : pytree
            The state entering the step.
        data : tuple
            ``(rng_key, args)``: the run's key and the kernel's other arguments.

        Returns
        -------
        tuple
            The kernel's ``(state, info)``.
        """
        rng_key, args = data
        return self.kernel(jax.random.fold_in(rng_key, t), state, *args)


def _replicated_on_carry_mesh(carry) -> NamedSharding | None:
    """Replicated sharding on the mesh of a carry split over several devices (a
    data-parallel fit), else None: the loss trace then keeps one layout in every
    slice, so slicing the loop compiles it once."""
    for leaf in jax.tree.leaves(carry):
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, NamedSharding) and sharding.mesh.size > 1:
            return NamedSharding(sharding.mesh, PartitionSpec())
    return None


def _host(info: Any) -> Any:
    """An info tree of the device, whole and as numpy arrays."""
    return jax.tree.map(lambda x: np.asarray(sharding.gather(x)), info)


def _host_trace(num_steps: int, chunk: np.ndarray) -> np.ndarray:
    """The host's buffer of an info leaf over ``num_steps`` steps (:func:`_fill`)."""
    return np.full((num_steps, *chunk.shape[1:]), _fill(chunk.dtype), chunk.dtype)


def _shown_loss(info: Any) -> Any:
    """What the bar shows of a step's info: itself where it is one array, else its
    ``loss`` field (an attribute or a key); None where that is not one number."""
    if isinstance(info, np.ndarray | np.generic):
        loss = info
    elif isinstance(info, dict):
        loss = info.get("loss")
    else:
        loss = getattr(info, "loss", None)
    return loss if loss is not None and np.size(loss) == 1 else None


def run_step(
    step: Callable[[jax.Array, Any], tuple[Any, Any]],
    carry: Any,
    t: int = 0,
    *,
    data: Any = None,
    fast_compile: bool = False,
) -> tuple[Any, Any]:
    """Run ``carry, info = step(t, carry)`` once, through :func:`run_steps`'s loop.

    The step runs in the compiled loop that :func:`run_steps` runs it in (a loop of
    one step), so the carry is bit for bit the one of the same steps run there, and
    neither compiles the step again after the other. Not checkpointed.

    Parameters
    ----------
    step : callable
        As in :func:`run_steps` (the same function object reuses its program).
    carry : pytree
        The state entering the step.
    t : int
        The step's index.
    data : pytree, optional
        As in :func:`run_steps`.
    fast_compile : bool
        As in :func:`run_steps`.

    Returns
    -------
    carry : pytree
        The state after the step.
    info : pytree of numpy values
        The step's info, as :func:`run_steps` records it (a scalar loss: an
        ``np.float32``), read on the host as :func:`run_steps` reads each slice's
        (indexing the device's buffers would compile small programs).
    """
    replicated = _replicated_on_carry_mesh(carry)
    advance = _ADVANCE[bool(fast_compile)]
    carry, trace = advance(step, carry, t, 1, data=data, replicated=replicated)
    return carry, jax.tree.map(lambda x: x[0], _host(trace))


def _trace_template(step: Callable, carry: Any, data: Any, num_steps: int) -> Any:
    """The shapes of the infos of ``num_steps`` steps (a checkpoint's template)."""
    first = (0, carry) if data is None else (0, carry, data)
    _, shapes = jax.eval_shape(step, *first)
    return jax.tree.map(
        lambda s: jax.ShapeDtypeStruct((num_steps, *s.shape), s.dtype), shapes
    )


def run_steps(
    step: Callable[[jax.Array, Any], tuple[Any, Any]],
    carry: Any,
    num_steps: int,
    *,
    progress_bar: bool = True,
    desc: str = "fit",
    delay: float = 2.0,
    data: Any = None,
    fast_compile: bool = False,
    done: Callable[[Any], bool] | None = None,
) -> tuple[Any, Any]:
    """Run ``carry, info = step(t, carry)`` for ``t = 0 .. num_steps - 1``.

    Parameters
    ----------
    step : callable
        Pure and hashable; ``t`` is the (traced) step index, e.g. for
        ``jax.random.fold_in``. ``info`` is a pytree of arrays (of the same
        shapes at every step) recorded per step: a scalar loss, or a tree whose
        ``loss`` field the bar shows (blackjax's ``(state, info)``).
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
    fast_compile : bool
        Compile the loop with XLA's cheaper options
        (:data:`~jaxannot.runtime.compile_options.FAST_OPTIONS`, a program of its
        own): for small fits, whose time is mostly compiling.
    done : callable, optional
        ``done(carry) -> bool``, read on the host after each slice of steps: True
        ends the run there (a fit that stops at a tolerance). The steps of a slice
        all run, so a step that has stopped (a ``stopped`` flag in its carry, as
        :class:`~jaxannot.inference.VEM`'s) must leave its carry unchanged;
        ``done`` only spares the slices after it. None: run every step.

    Returns
    -------
    carry : pytree
        The state after the last step run.
    trace : pytree of np.ndarray
        The infos, each leaf stacked over the steps (``[num_steps, ...]``): for a
        scalar loss, the losses ``[num_steps]``. Past the slice where ``done``
        ended the run: NaN (floats) or 0.

    Raises
    ------
    TypeError, ValueError
        ``num_steps`` is not an integer >= 1 (:func:`check_count`).
    """
    num_steps = check_count("num_steps", num_steps)
    replicated = _replicated_on_carry_mesh(carry)
    advance = functools.partial(
        _ADVANCE[bool(fast_compile)], step, data=data, replicated=replicated
    )
    size = BUFFER
    if progress_bar:
        size = min(BUFFER, max(1, -(-num_steps // _SLICES)))
    carry, trace, start, every, save = _checkpointed(step, carry, data, num_steps)

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
        for begin, stop, saving in _slices(start, num_steps, size, every):
            carry, chunk = advance(carry, begin, stop - begin)
            trace = _recorded(trace, _host(chunk), begin, stop, num_steps)
            if saving:
                save(carry, trace, stop)
            loss = _shown_loss(jax.tree.map(operator.itemgetter(stop - 1), trace))
            if loss is not None:
                bar.set_postfix(loss=f"{float(loss):.6g}", refresh=False)
            bar.update(stop - begin)
            if done is not None and done(carry):
                break
    return carry, trace


def _checkpointed(step: Callable, carry: Any, data: Any, num_steps: int) -> tuple:
    """:func:`run_steps`'s start inside a
    :func:`~jaxannot.runtime.checkpoint.checkpointing` block: the carry, the host's
    trace and the first step from this run's checkpoint if there is one, the
    checkpoint interval and ``save(carry, trace, stop)``; outside a block, the
    carry, no trace, step 0 and no saving."""
    session = checkpoint.active_session()
    if session is None:
        return carry, None, 0, None, None
    trace, start = None, 0
    run = session.next_run()
    path = session.path(run)
    fitted = carry if data is None else (carry, data)  # a checkpoint of this data
    template = _trace_template(step, carry, data, num_steps)
    digest = checkpoint.fingerprint(session, run, fitted, num_steps, template)
    if path.is_symlink() or path.exists():  # a dangling link or a loop too
        carry, trace, start = checkpoint.load(path, digest, carry, template)
        trace = jax.tree.map(np.array, trace)  # writable
        session.resumed.append((run, start))

    def save(carry, trace, stop):
        checkpoint.save(path, digest, carry, trace, stop)
        session.saved += 1

    return carry, trace, start, session.every, save


def _recorded(trace: Any, chunk: Any, begin: int, stop: int, num_steps: int) -> Any:
    """The host's trace of ``num_steps`` steps (made from the first chunk) with
    steps ``begin`` to ``stop`` of ``chunk`` written in."""
    if trace is None:
        trace = jax.tree.map(functools.partial(_host_trace, num_steps), chunk)
    for whole, part in zip(jax.tree.leaves(trace), jax.tree.leaves(chunk), strict=True):
        whole[begin:stop] = part[: stop - begin]
    return trace


def run_until_stopped(
    step: Callable[..., tuple[Any, Any]],
    carry: Any,
    max_steps: int,
    *,
    data: Any = None,
    budget: int | jax.Array | None = None,
    stopped: Callable[[Any], jax.Array] = operator.attrgetter("stopped"),
) -> tuple[Any, Any, jax.Array]:
    """Run ``carry, info = step(t, carry[, data])`` in one ``lax.while_loop`` until
    ``stopped(carry)`` or the budget: :func:`run_steps`'s loop inside a compiled
    program.

    Traceable (call it inside ``jax.jit``, as a solver inside another fit's step
    does): step ``t`` runs while ``t < min(budget, max_steps)`` and the carry it
    takes is not stopped, so no step runs after the stop (the step need not leave a
    stopped carry unchanged, as :func:`run_steps`'s must). A random kernel runs
    wrapped in :class:`Keyed` (``data = (rng_key, args)``).

    Parameters
    ----------
    step : callable
        ``step(t, carry) -> (carry, info)``, or ``step(t, carry, data)`` with
        ``data``; ``info`` a pytree of arrays of the same shapes at every step.
    carry : pytree
        The state entering step 0 (``stopped(carry)`` False, or no step runs).
    max_steps : int
        Static: the most steps, and the length of the info buffers.
    data : pytree, optional
        Arrays every step reads and none changes.
    budget : int or jax.Array, optional
        Fewer steps than ``max_steps`` (traced: a new budget compiles nothing).
    stopped : callable
        ``stopped(carry) -> bool array``: the run ends before a carry for which it
        holds. Default: the carry's ``stopped`` field.

    Returns
    -------
    carry : pytree
        The state after the last step run.
    trace : pytree of jax.Array
        The infos, each leaf stacked over the steps (``[max_steps, ...]``); NaN
        (floats) or 0 past the last step run.
    num_steps : jax.Array
        The steps run (int32).
    """
    args = () if data is None else (data,)
    _, shapes = jax.eval_shape(step, 0, carry, *args)
    trace = jax.tree.map(
        lambda s: jnp.full((max_steps, *s.shape), _fill(s.dtype), s.dtype), shapes
    )
    limit = max_steps if budget is None else jnp.minimum(budget, max_steps)

    def cond(state):
        t, carry, _ = state
        return (t < limit) & ~stopped(carry)

    def body(state):
        t, carry, trace = state
        carry, info = step(t, carry, *args)
        return t + 1, carry, jax.tree.map(lambda b, x: b.at[t].set(x), trace, info)

    t, carry, trace = lax.while_loop(cond, body, (jnp.int32(0), carry, trace))
    return carry, trace, t
