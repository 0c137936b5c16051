r"""EMML: the working-set dual solver of structured max-margin learning (Algorithm 1).

Solves the dual (9) of the structured max-margin problem (5) of Guo et al. (2016),

.. math::

    \min_\mu\ \tfrac12 \mu^\top D \mu - \mu^\top S \quad\text{s.t.}\quad A\mu \le C,\
    \mu \ge 0,

with one variable per VRep :math:`i` and output :math:`\bar{\mathbf y} \in
\operatorname{perm}(\mathbf y_i)`, by the decomposition of Algorithm 1:

3. solve the subproblem (12) on the working set :math:`\mu_B` (warm start; the shared
   block-SMO solver of :mod:`jaxannot.solvers.qp`);
4. move the multipliers that are zero out of :math:`\mu_B`;
5. move in the multipliers that violate condition (13): for each VRep the
   loss-augmented top-:math:`r_i` selection over its word scores
   (:func:`~jaxannot.solvers.qp.loss_augmented_argmax`) returns the
   minimizer :math:`\bar{\mathbf y}^*` of :math:`g_{i,\bar{\mathbf y}} =
   (D\mu)_{i,\bar{\mathbf y}} - S_{i,\bar{\mathbf y}}` over
   :math:`\operatorname{perm}(\mathbf y_i)` without enumerating it. It violates the
   KKT conditions (10) when :math:`g^* < \theta_i - \text{tol}`, where
   :math:`\theta_i = 0` if :math:`\sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf y}} < C`
   (condition 13 / 11) and otherwise :math:`\theta_i = -\gamma_i`, the common gradient
   of VRep :math:`i`'s positive multipliers (the case :math:`A_i^\top\mu = C` of
   Section 3.2). All VReps are scanned at once (vectorized) and every violator is
   added;
6. repeat until no violator remains.

The whole solve is a single ``jit`` (:func:`fit_emml`): fixed-capacity working-set
buffers, the outer iterations run by the library's in-program runner
(:func:`~jaxannot.runtime.progress.run_until_stopped`), batched kernel algebra.
:class:`EMMLInfo` reports the dual objective (non-increasing across iterations), the
number of active constraints and the number added. The exact solver over per-VRep
mixtures, with no working-set cap, is :mod:`jaxannot.methods.emml.exact`.

The patent notice of the EMML method is in
:mod:`jaxannot.methods.emml.structured_output`.

References
----------
Guo et al. 2016 (Section 3), as cited in :mod:`jaxannot.methods.emml.structured_output`.
E. Osuna, R. Freund, F. Girosi. An improved training algorithm for support vector
machines. IEEE NNSP 1997.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.methods.emml.structured_output import StructuredData
from jaxannot.runtime.progress import run_until_stopped
from jaxannot.solvers.qp import (
    WorkingSet,
    add_constraints,
    dual_objective,
    empty_working_set,
    is_duplicate,
    slot_gradients,
    solve_subproblem,
    violator_candidates,
)
from jaxannot.types import Array, PRNGKey

if TYPE_CHECKING:
    from jaxannot.types import ArrayTree

__all__ = [
    "WorkingSetSettings",
    "EMMLState",
    "EMMLInfo",
    "init",
    "build_kernel",
    "fit_emml",
    "run_iterations",
    "next_state",
    "kkt_thresholds",
    "theorem_3_5_bound",
]


class WorkingSetSettings(NamedTuple):
    """Static settings of the working-set solver :func:`fit_emml`.

    A tuple of ints, hence hashable, so the whole object is one static argument of
    the ``jit``: each distinct value compiles once, while ``c`` and ``tolerance`` stay
    traced. ``capacity`` and ``max_iterations`` fix the shapes of the working set and
    of the history.

    Attributes
    ----------
    capacity : int, default 16
        Working-set slots per VRep; ``state.overflow > 0`` means it was too small.
    max_iterations : int, default 200
        Cap on outer iterations (steps 3 to 5 of Algorithm 1).
    max_sweeps : int, default 200
        Cap on block sweeps per subproblem solve. A small value solves the subproblem
        inexactly (every step still decreases the objective); :func:`fit_emml` then
        also continues while the last subproblem's KKT gap exceeds ``tolerance``, so
        the stopping test is unchanged.
    violators_per_vrep : int, default 1
        Candidates tested per VRep and iteration
        (:func:`~jaxannot.solvers.qp.violator_candidates`); every one
        that violates (13) enters :math:`\\mu_B` (step 5 moves all violators).
    """

    capacity: int = 16
    max_iterations: int = 200
    max_sweeps: int = 200
    violators_per_vrep: int = 1


class EMMLState(NamedTuple):
    """State of Algorithm 1.

    Attributes
    ----------
    working_set : WorkingSet
        :math:`\\mu_B` in fixed-capacity slots (inactive slots are :math:`\\mu_N = 0`).
    coefficients : Float[Array, "vreps words"]
        :math:`B_i = \\sum_{\\bar{\\mathbf y}} \\mu_{i,\\bar{\\mathbf y}}
        (\\mathbf y_i -
        \\bar{\\mathbf y})`; word scores of an image are :math:`k(\\mathbf x, X) B`.
    scores : Float[Array, "vreps words"]
        :math:`F = K B`, the VReps' own word scores.
    objective : Float[Array, ""]
        Dual objective after the last subproblem solve.
    iteration : Int[Array, ""]
    num_added : Int[Array, ""]
        Constraints moved into :math:`\\mu_B` by the last iteration.
    total_added : Int[Array, ""]
        Constraints moved in over the whole run.
    overflow : Int[Array, ""]
        Violators dropped because a VRep's slots were full (0 in a valid run).
    """

    working_set: WorkingSet
    coefficients: Array
    scores: Array
    objective: Array
    iteration: Array
    num_added: Array
    total_added: Array
    overflow: Array


class EMMLInfo(NamedTuple):
    """Diagnostics of one outer iteration.

    Attributes
    ----------
    objective : dual objective after step 3 (never increases)
    num_active : constraints in :math:`\\mu_B` after step 4 (before additions)
    num_added : violators moved in at step 5
    max_violation : largest KKT violation :math:`\\theta_i - g^*_i` over VReps
    sweeps : block sweeps of the subproblem solve
    subproblem_gap : final KKT gap of the subproblem
    """

    objective: Array
    num_active: Array
    num_added: Array
    max_violation: Array
    sweeps: Array
    subproblem_gap: Array


def init(data: StructuredData, capacity: int) -> EMMLState:
    """Empty working set (:math:`\\mu = 0`, objective 0) with ``capacity`` slots per
    VRep."""
    n, w = data.words.shape
    dtype = data.kernel.dtype
    ws = empty_working_set(n, w, capacity, dtype)
    zero_i = jnp.zeros((), jnp.int32)
    return EMMLState(
        working_set=ws,
        coefficients=jnp.zeros((n, w), dtype),
        scores=jnp.zeros((n, w), dtype),
        objective=jnp.zeros((), dtype),
        iteration=zero_i,
        num_added=zero_i,
        total_added=zero_i,
        overflow=zero_i,
    )


def next_state(
    state: EMMLState,
    ws: WorkingSet,
    coefficients: Array,
    scores: Array,
    objective: Array,
    num_added: Array,
    overflow: Array,
) -> EMMLState:
    """The :class:`EMMLState` after an iteration from ``state`` that ends with
    ``ws, coefficients, scores, objective``, ``num_added`` constraints moved in and
    ``overflow`` violators dropped."""
    return EMMLState(
        ws,
        coefficients,
        scores,
        objective,
        state.iteration + 1,
        num_added,
        state.total_added + num_added,
        state.overflow + overflow,
    )


def kkt_thresholds(ws: WorkingSet, scores: Array, c: float) -> Array:
    """:math:`\\theta_i`: the largest gradient among VRep ``i``'s variables that could
    give up mass — its positive multipliers and, when :math:`\\sum\\mu_i < C`, the slack
    (gradient 0). A new constraint violates KKT (10) when its gradient is below it."""
    grads = slot_gradients(ws, scores)
    pos = ws.active & (ws.mu > 0)
    slack = c - jnp.sum(ws.mu, axis=-1)
    best = jnp.max(jnp.where(pos, grads, -jnp.inf), axis=-1)
    return jnp.maximum(best, jnp.where(slack > 0, 0.0, -jnp.inf))


def build_kernel(
    c: float,
    tolerance: float = 1e-3,
    settings: WorkingSetSettings = WorkingSetSettings(),  # noqa: B008 (immutable)
    *,
    max_smo_steps: int | None = None,
    random_ties: bool = False,
) -> Callable[..., tuple[EMMLState, EMMLInfo]]:
    """One outer iteration of Algorithm 1 (steps 3, 4, 5).

    Parameters
    ----------
    c : float
        Box constant :math:`C` of the slack penalty.
    tolerance : float
        KKT tolerance, in loss units, shared by the subproblem solve (max violating
        pair gap) and the violator test (:math:`g^* < \\theta_i - \\text{tol}`).
    settings : WorkingSetSettings
        Its ``max_sweeps`` caps each subproblem solve and its ``violators_per_vrep``
        candidates are tested per VRep; ``capacity`` is the state's (:func:`init`)
        and ``max_iterations`` the caller's loop.
    max_smo_steps : int, optional
        SMO steps per block visit.
    random_ties : bool
        Break ties among equal loss-augmented word scores at random (drawn from
        ``rng_key`` folded with the iteration) instead of by lowest word index.

    Returns
    -------
    step : ``step(rng_key, state, data) -> (EMMLState, EMMLInfo)``
        ``rng_key`` is used only with ``random_ties``.
    """
    max_sweeps, violators_per_vrep = settings.max_sweeps, settings.violators_per_vrep

    def step(rng_key: PRNGKey, state: EMMLState, data: StructuredData):
        tie_key = jax.random.fold_in(rng_key, state.iteration) if random_ties else None
        ws, coef, scores, sub = solve_subproblem(
            data.kernel,
            state.working_set,
            state.coefficients,
            c,
            tolerance,
            max_sweeps,
            max_smo_steps,
        )
        objective = dual_objective(ws, coef, scores)
        # step 4: zero multipliers leave the working set
        keep = ws.active & (ws.mu > 0)
        ws = ws._replace(active=keep, mu=jnp.where(keep, ws.mu, 0.0))
        num_active = jnp.sum(keep).astype(jnp.int32)
        # step 5: violators of (13) / KKT (10) enter it
        theta = kkt_thresholds(ws, scores, c)
        ybars, grads = violator_candidates(
            scores, data.words, violators_per_vrep, tie_key
        )
        num_added = jnp.zeros((), jnp.int32)
        overflow = jnp.zeros((), jnp.int32)
        max_violation = jnp.full((), -jnp.inf, scores.dtype)
        for k in range(violators_per_vrep):
            violation = theta - grads[k]
            fresh = ~is_duplicate(ws, data.words, ybars[k])
            fresh &= ~jnp.all(ybars[k] == data.words, axis=-1)
            add = (violation > tolerance) & fresh
            ws, over = add_constraints(ws, data.words, ybars[k], add)
            num_added += (jnp.sum(add) - over).astype(jnp.int32)
            overflow += over.astype(jnp.int32)
            max_violation = jnp.maximum(
                max_violation, jnp.max(jnp.where(fresh, violation, -jnp.inf))
            )
        new_state = next_state(state, ws, coef, scores, objective, num_added, overflow)
        info = EMMLInfo(
            objective, num_active, num_added, max_violation, sub.sweeps, sub.max_gap
        )
        return new_state, info

    return step


def _empty_history(max_iterations: int, dtype) -> EMMLInfo:
    f = jnp.full((max_iterations,), jnp.nan, dtype)
    i = jnp.full((max_iterations,), -1, jnp.int32)
    return EMMLInfo(f, i, i, f, i, f)


@functools.partial(jax.jit, static_argnames=("settings",))
def fit_emml(
    data: StructuredData,
    c: float = 1.0,
    tolerance: float = 1e-3,
    *,
    tie_key: PRNGKey | None = None,
    settings: WorkingSetSettings = WorkingSetSettings(),  # noqa: B008 (immutable)
) -> tuple[EMMLState, EMMLInfo]:
    """Run Algorithm 1 to convergence in one ``jit`` (:func:`run_iterations`).

    Stops when an iteration adds no violator (the subproblem optimum is then KKT-optimal
    for the full dual (9) within ``tolerance``; Theorem 3.2) or after
    ``settings.max_iterations``.

    Parameters
    ----------
    data : StructuredData
    c : float
        :math:`C` (traced: changing it does not recompile).
    tolerance : float
        KKT tolerance in loss units (traced).
    tie_key : PRNGKey, optional
        Break ties among equal wrong words at random from this key (default: lowest
        word index, deterministic).
    settings : WorkingSetSettings
        Working-set capacity, iteration and sweep caps, violators per VRep (static:
        a new value compiles once).

    Returns
    -------
    state : EMMLState
        Final state; ``state.coefficients`` define the word scores.
    history : EMMLInfo
        Per-iteration diagnostics, arrays of length ``settings.max_iterations`` (NaN /
        -1 past ``state.iteration``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> data = StructuredData(jnp.eye(2), jnp.array([[1.0, 0, 0], [0, 1.0, 0]]))
    >>> settings = WorkingSetSettings(capacity=4)
    >>> state, hist = fit_emml(data, c=1.0, settings=settings)
    >>> int(state.overflow), int(state.total_added)
    (0, 4)
    """
    dtype = data.kernel.dtype
    c = jnp.asarray(c, dtype)
    tolerance = jnp.asarray(tolerance, dtype)
    step = build_kernel(c, tolerance, settings, random_ties=tie_key is not None)
    state = init(data, settings.capacity)
    history = _empty_history(settings.max_iterations, dtype)
    key = jax.random.key(0) if tie_key is None else tie_key

    def going(state: EMMLState, info: EMMLInfo) -> Array:
        unsolved = info.subproblem_gap > tolerance
        going = (state.num_added > 0) | unsolved
        return going & (state.iteration < settings.max_iterations)

    return run_iterations(step, key, data, state, history, going)


class _Iterating(NamedTuple):
    """:func:`run_iterations`' carry: the solver's state and whether ``going``
    said no after the last iteration."""

    state: ArrayTree
    stopped: Array


def run_iterations(
    step: Callable,
    key: PRNGKey,
    data: StructuredData,
    state: EMMLState,
    history: ArrayTree,
    going: Callable[..., Array],
) -> tuple[EMMLState, ArrayTree]:
    """Run ``step(key, state, data) -> (state, info)`` from ``state`` (iteration 0)
    until ``going(state, info)`` is False after an iteration, or as many iterations
    as ``history`` has entries.

    The iterations run through the library's in-program runner
    (:func:`~jaxannot.runtime.progress.run_until_stopped`): the first always runs.

    Parameters
    ----------
    step : callable
        One outer iteration, ``step(key, state, data) -> (state, info)``.
    key : PRNGKey
        Handed to every iteration (a step draws from it folded with the iteration).
    data : StructuredData
    state : EMMLState
        The start (:func:`init`'s, or another solver's state of the same layout).
    history : pytree
        An ``info`` tree of arrays of one length (the most iterations), holding
        what stays past the last iteration run (NaN, -1).
    going : callable
        ``going(state, info) -> bool array``: run another iteration after one that
        returned ``(state, info)``.

    Returns
    -------
    state : EMMLState
        The state after the last iteration run.
    history : pytree
        ``history`` with each iteration's ``info`` written at its index.
    """

    def iteration(t: Array, carry: _Iterating, data: StructuredData):
        del t
        state, info = step(key, carry.state, data)
        return _Iterating(state, ~going(state, info)), info

    length = jax.tree.leaves(history)[0].shape[0]
    start = _Iterating(state, jnp.array(False))
    carry, trace, ran = run_until_stopped(iteration, start, length, data=data)
    past = jnp.arange(length) >= ran

    def merge(empty: Array, recorded: Array) -> Array:
        where = past.reshape(-1, *(1,) * (empty.ndim - 1))
        return jnp.where(where, empty, recorded.astype(empty.dtype))

    return carry.state, jax.tree.map(merge, history, trace)


def theorem_3_5_bound(data: StructuredData, c: float, epsilon: float) -> float:
    """Theorem 3.5: at most :math:`2nRC\\Delta\\epsilon^{-2}` constraints enter
    :math:`\\mu_B`, with
    :math:`R = \\max_{i,\\bar{\\mathbf y}} k_{ii}\\, l(\\bar{\\mathbf
    y}, \\mathbf y_i)` (the joint kernel's diagonal is :math:`k_{ii} \\|\\mathbf y_i -
    \\bar{\\mathbf y}\\|^2`), :math:`\\Delta = \\max l = 2 \\max_i \\min(r_i, W - r_i)`
    and :math:`\\epsilon` the smallest violation of an added constraint (here the
    tolerance)."""
    n, w = data.words.shape
    r = jnp.sum(data.words > 0, axis=1)
    max_loss = 2.0 * jnp.minimum(r, w - r)
    big_r = float(jnp.max(jnp.diag(data.kernel) * max_loss))
    delta = float(jnp.max(max_loss))
    return 2.0 * n * big_r * c * delta / epsilon**2
