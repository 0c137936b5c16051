"""A generic driver for (variational) EM kernels, jit-compiled once.

A model supplies a pure ``step(rng_key, state, data) -> (state, info)`` (the kernel
shape of STYLE.md) whose ``info`` has a scalar field ``objective`` — the quantity EM
never decreases (log joint for MAP-EM, the ELBO for variational EM), evaluated at the
state that *entered* the step. :func:`run_em` runs that step a fixed number of times
through the library's runner, :func:`~jaxannot.runtime.progress.run_steps` (one
compiled loop for any number of iterations, checkpointed inside a
:func:`~jaxannot.runtime.checkpoint.checkpointing` block; iteration ``t`` draws
with the ``t``-th key of ``jax.random.split(rng_key, num_iterations)``,
:class:`~jaxannot.runtime.progress.Keyed`);
:func:`run_em_until_converged` inside one ``jax.jit``, through the runner's
in-program loop, :func:`~jaxannot.runtime.progress.run_until_stopped` (the stopping
rule is part of the loop). The step is a static argument, so a model's kernel
built once (e.g. through a cached ``build_kernel``) is traced and compiled once per
data shape.

References
----------
A. P. Dempster, N. M. Laird, D. B. Rubin. Maximum likelihood from incomplete data via
the EM algorithm. JRSS-B, 1977.
R. M. Neal, G. E. Hinton. A view of the EM algorithm that justifies incremental,
sparse, and other variants. Learning in Graphical Models, 1999.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.runtime.progress import Keyed, check_count, run_steps, run_until_stopped

__all__ = ["EMTrace", "run_em", "run_em_until_converged", "run_until_small_change"]


class EMTrace(NamedTuple):
    """Per-iteration diagnostics of :func:`run_em` and :func:`run_em_until_converged`.

    Attributes
    ----------
    objective : Float[Array, "max_iterations"]
        The objective of each iteration (float32); NaN after the last one run.
    num_iterations : Int[Array, ""]
        How many iterations ran.
    """

    objective: jax.Array
    num_iterations: jax.Array


def run_em(
    rng_key: jax.Array,
    state: Any,
    data: Any,
    *,
    step: Callable,
    num_iterations: int,
) -> tuple[Any, EMTrace]:
    """Run ``num_iterations`` EM steps through the library's runner (:func:`run_steps`).

    Parameters
    ----------
    rng_key : PRNGKey
        Iteration ``t`` takes its ``t``-th split.
    state : pytree
        The kernel state entering the first iteration.
    data : pytree
        Passed unchanged to every step (arrays and dynamic hyper-parameters).
    step : callable
        ``step(rng_key, state, data) -> (state, info)`` with ``info.objective``;
        static (hashable).
    num_iterations : int
        At least 1 (:func:`~jaxannot.runtime.progress.check_count`).

    Returns
    -------
    state : pytree
        The state after the last step.
    trace : EMTrace
        ``objective``: each iteration's ``info.objective`` (a float32 NumPy array);
        ``num_iterations``.

    Raises
    ------
    TypeError, ValueError
        ``num_iterations`` is not an integer >= 1.
    """
    num_iterations = check_count("num_iterations", num_iterations)
    state, infos = run_steps(
        Keyed(step),
        state,
        num_iterations,
        progress_bar=False,
        desc="EM",
        data=(rng_key, (data,)),
    )
    return state, EMTrace(infos.objective, num_iterations)


class _Converging(NamedTuple):
    """:func:`run_em_until_converged`'s carry: the key chain, the kernel's state,
    the last objective and whether the rule has stopped the run."""

    rng_key: jax.Array
    state: Any
    objective: jax.Array
    stopped: jax.Array


@functools.partial(
    jax.jit, static_argnames=("step", "max_iterations", "min_iterations")
)
def run_em_until_converged(
    rng_key: jax.Array,
    state: Any,
    data: Any,
    tolerance: float | jax.Array,
    *,
    step: Callable,
    max_iterations: int,
    min_iterations: int = 2,
) -> tuple[Any, EMTrace]:
    r"""Run EM steps until the relative objective change drops below ``tolerance``.

    Stops after iteration :math:`t \ge` ``min_iterations`` when
    :math:`|f_t - f_{t-1}| \le \text{tol}\,|f_{t-1}|`, or after ``max_iterations``.
    The iterations run through the library's in-program runner
    (:func:`~jaxannot.runtime.progress.run_until_stopped`), so the whole run is one
    traceable program.

    Parameters
    ----------
    rng_key : jax.Array
        Iteration ``t`` draws with the second half of its split, the first going on
        to the next.
    state : pytree
        The start.
    data : pytree
        What ``step`` takes besides the key and the state.
    tolerance : float or jax.Array
        Relative objective change to stop at.
    step : callable
        ``step(rng_key, state, data) -> (state, info)`` with ``info.objective``.
    max_iterations : int
        Iteration budget (static: the trace's length).
    min_iterations : int
        Iterations run before the stopping rule applies.

    Returns
    -------
    state : pytree
    trace : EMTrace
        Objective per iteration (NaN-padded to ``max_iterations``).
    """

    def iteration(t, carry: _Converging, data):
        key, sub = jax.random.split(carry.rng_key)
        st, info = step(sub, carry.state, data)
        last = info.objective.astype(jnp.float32)
        prev = jnp.where(t == 0, last, carry.objective)  # f_0 against itself
        small = jnp.abs(last - prev) <= tolerance * jnp.abs(prev)
        stopped = (t + 1 >= min_iterations) & small
        return _Converging(key, st, last, stopped), last

    start = _Converging(rng_key, state, jnp.float32(jnp.nan), jnp.array(False))
    carry, trace, t = run_until_stopped(iteration, start, max_iterations, data=data)
    return carry.state, EMTrace(trace, t)


def run_until_small_change(
    step: Callable, state: Any, tol: float | jax.Array, *, max_iterations: int
) -> tuple[Any, jax.Array]:
    r"""Iterate a deterministic solver until its relative change drops to ``tol``.

    ``state, info = step(state)`` is repeated while ``state.iteration <
    max_iterations`` and the last ``info.relative_change > tol`` (the solver defines
    the change: of the objective, or of the iterate), through the library's
    in-program runner (:func:`~jaxannot.runtime.progress.run_until_stopped`). Used
    by the reweighted solvers (FSNM, SFSLS's Algorithm 1), whose objectives never
    increase.

    Parameters
    ----------
    step : callable
        ``state -> (state, info)`` with ``state.iteration``, ``state.objective`` and
        ``info.objective``, ``info.relative_change``.
    state : pytree
        The start (iteration 0); its ``objective`` is the history's first entry.
    tol : float
        Stop at a relative change ``<= tol`` (traced: changing it does not
        recompile).
    max_iterations : int
        Static cap on the steps.

    Returns
    -------
    state : pytree
    history : Float[Array, "max_iterations + 1"]
        The start's objective, then one per step; NaN after the last step run.
    """

    dtype = jnp.asarray(state.objective).dtype

    def iteration(t, carry):
        del t
        st, info = step(carry[0])
        return (st, ~(info.relative_change > tol)), info.objective.astype(dtype)

    start = (state, jnp.array(False))
    carry, trace, _ = run_until_stopped(
        iteration,
        start,
        max_iterations,
        budget=max_iterations - state.iteration,
        stopped=operator.itemgetter(1),
    )
    first = jnp.asarray(state.objective, dtype)[None]
    return carry[0], jnp.concatenate([first, trace])
