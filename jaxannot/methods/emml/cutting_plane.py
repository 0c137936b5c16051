r"""Cutting-plane baseline for the structured max-margin dual (n-slack SVM-struct).

Algorithm 1 of Tsochantaridis, Hofmann, Joachims & Altun (2004), applied to the dual
(9) of Guo et al. (2016) for the comparison of :mod:`jaxannot.methods.emml.working_set`.
One pass
visits the VReps in order; for VRep :math:`i` it

1. finds the *most violated* constraint :math:`\hat{\mathbf y} = \arg\max_{\bar{\mathbf
   y}} H_i(\bar{\mathbf y})`, :math:`H_i(\bar{\mathbf y}) = l(\bar{\mathbf y},
   \mathbf y_i) - \alpha^\top \Phi_{i,\mathbf y_i,\bar{\mathbf y}}` (the same
   loss-augmented top-:math:`r_i` selection EMML uses);
2. with :math:`\xi_i = \max(0, \max_{\bar{\mathbf y} \in S_i} H_i(\bar{\mathbf y}))`,
   adds :math:`\hat{\mathbf y}` to :math:`S_i` when :math:`H_i(\hat{\mathbf y}) > \xi_i
   + \epsilon`;
3. re-solves the dual over all of :math:`S = \cup_i S_i` (warm start) before moving to
   the next VRep.

Passes repeat until one adds nothing. Constraints are never removed.

Two options generalize the pass (both default to 1, Algorithm 1 as published):
``candidates`` tests the first few outputs of
:func:`~jaxannot.solvers.qp.violator_candidates` per VRep (the ones EMML
tests) instead of the single most violated one, and ``batch`` visits that many VReps
against the same scores before one re-solve (the *batched* cutting plane; ``batch =
n`` re-solves once per pass). The re-solve uses
the same block-SMO solver and tolerance as EMML
(:func:`jaxannot.solvers.qp.solve_subproblem`), so a comparison of the two
isolates how constraints are selected and when the QP is re-solved: EMML adds every
violator of all VReps at once, drops zero multipliers, and re-solves once per outer
iteration; the cutting plane re-solves after each added constraint. With
:math:`\epsilon` equal to EMML's tolerance both stop at the same KKT accuracy.

References
----------
I. Tsochantaridis, T. Hofmann, T. Joachims, Y. Altun. Support vector machine learning
for
interdependent and structured output spaces. ICML 2004.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.methods.emml.structured_output import StructuredData
from jaxannot.methods.emml.working_set import (
    EMMLState,
    next_state,
    run_iterations,
)
from jaxannot.methods.emml.working_set import init as init_emml
from jaxannot.solvers.qp import (
    add_constraints,
    dual_objective,
    is_duplicate,
    slot_gradients,
    solve_subproblem,
    violator_candidates,
)
from jaxannot.types import Array, PRNGKey

__all__ = [
    "CuttingPlaneState",
    "CuttingPlaneSettings",
    "CuttingPlaneInfo",
    "init",
    "build_kernel",
    "fit_cutting_plane",
]


#: State after a pass: the fields of
#: :class:`~jaxannot.methods.emml.working_set.EMMLState`
#: (working set S, :math:`B`, :math:`F = KB`, dual objective, pass counter,
#: constraints added last pass / in total, slot overflows: 0 in a valid run) and the
#: re-solves run.
CuttingPlaneState = NamedTuple(
    "CuttingPlaneState", [*EMMLState.__annotations__.items(), ("resolves", Array)]
)


class CuttingPlaneSettings(NamedTuple):
    """Static settings of :func:`fit_cutting_plane`.

    Hashable (a tuple of ints): one static argument of the ``jit``, compiled once per
    value; ``c`` and ``epsilon`` stay traced. The defaults of ``candidates`` and
    ``batch`` are Algorithm 1 of Tsochantaridis et al.

    Attributes
    ----------
    capacity : int, default 32
        Constraint slots per VRep; must hold every constraint ever added to it (none
        are removed), ``state.overflow > 0`` otherwise.
    max_iterations : int, default 100
        Cap on passes over the VReps.
    max_sweeps : int, default 200
        Cap on block sweeps per warm-started re-solve.
    candidates : int, default 1
        Outputs tested per visited VRep (those of
        :func:`~jaxannot.solvers.qp.violator_candidates`, the same ones
        EMML tests); 1 is Tsochantaridis et al.'s most violated output.
    batch : int, default 1
        VReps visited (against the same scores) before one re-solve. 1 is Algorithm 1
        of Tsochantaridis et al.; ``batch = n`` re-solves once per pass, like EMML but
        without dropping constraints.
    """

    capacity: int = 32
    max_iterations: int = 100
    max_sweeps: int = 200
    candidates: int = 1
    batch: int = 1


class CuttingPlaneInfo(NamedTuple):
    """Per pass: dual objective at its end, constraints in S, constraints added, total
    block sweeps of its re-solves."""

    objective: Array
    num_active: Array
    num_added: Array
    sweeps: Array


def init(data: StructuredData, capacity: int) -> CuttingPlaneState:
    """Empty constraint sets, :math:`\\mu = 0`."""
    return CuttingPlaneState(*init_emml(data, capacity), jnp.zeros((), jnp.int32))


def _add_violators(i, ws, scores, data, candidates: int, epsilon):
    r"""Add VRep ``i``'s violated candidate outputs to S (no re-solve).

    Of the first ``candidates`` outputs of
    :func:`~jaxannot.solvers.qp.violator_candidates`, those with
    :math:`H_i(\bar{\mathbf y}) > \xi_i + \epsilon` that are neither ``y_i`` nor
    already in :math:`S_i`. Returns the working set, the constraints added and the
    slot overflows.
    """
    n = data.words.shape[0]
    f_i = scores[i][None]
    y_i = data.words[i][None]
    ybars, grads = violator_candidates(f_i, y_i, candidates)  # [k, 1, w], [k, 1]
    ws_i = jax.tree.map(lambda a: a[i][None], ws)
    g = slot_gradients(ws_i, f_i)[0]
    xi = jnp.maximum(0.0, jnp.max(jnp.where(ws_i.active[0], -g, -jnp.inf)))
    row = jnp.zeros(n, bool).at[i].set(True)
    added = overflow = jnp.zeros((), jnp.int32)
    for j in range(candidates):  # candidates are distinct outputs by construction
        want = (-grads[j, 0] > xi + epsilon) & ~jnp.all(ybars[j, 0] == y_i[0])
        want &= ~is_duplicate(ws_i, y_i, ybars[j])[0]
        ws, over = add_constraints(
            ws, data.words, data.words.at[i].set(ybars[j, 0]), row & want
        )
        added += want.astype(jnp.int32) - over.astype(jnp.int32)
        overflow += over.astype(jnp.int32)
    return ws, added, overflow


def build_kernel(
    c: float | Array,
    epsilon: float | Array,
    settings: CuttingPlaneSettings = CuttingPlaneSettings(),  # noqa: B008 (immutable)
    *,
    max_smo_steps: int | None = None,
) -> Callable:
    """One pass over the VReps (see the module docstring).

    Parameters
    ----------
    c, epsilon : float
        Dual box constant and violation margin / subproblem KKT tolerance.
    settings : CuttingPlaneSettings
        Its ``max_sweeps`` caps each warm-started re-solve; ``candidates`` and
        ``batch`` shape the pass. ``capacity`` is the state's (:func:`init`) and
        ``max_iterations`` the caller's loop.
    max_smo_steps : int, optional
        SMO steps per block visit of a re-solve.

    Returns ``step(rng_key, state, data) -> (CuttingPlaneState, CuttingPlaneInfo)``;
    ``rng_key`` is unused (deterministic visiting order).
    """
    candidates, batch = settings.candidates, settings.batch
    if candidates < 1 or batch < 1:
        raise ValueError(
            f"candidates and batch must be >= 1, got {candidates} and {batch}"
        )

    def visit_block(b, carry):
        ws, coef, scores, added, sweeps, overflow, resolves, data = carry
        n = data.words.shape[0]

        def visit(j, inner):
            i = b * batch + j

            def add(args):
                ws, got, over = args
                ws, a, o = _add_violators(i, ws, scores, data, candidates, epsilon)
                return ws, got + a, over + o

            return jax.lax.cond(i < n, add, lambda args: args, inner)

        z = jnp.zeros((), jnp.int32)
        ws, got, overflow = jax.lax.fori_loop(0, batch, visit, (ws, z, overflow))

        def resolve(args):
            ws, coef, scores, sweeps = args
            ws, coef, scores, sub = solve_subproblem(
                data.kernel, ws, coef, c, epsilon, settings.max_sweeps, max_smo_steps
            )
            return ws, coef, scores, sweeps + sub.sweeps

        ws, coef, scores, sweeps = jax.lax.cond(
            got > 0, resolve, lambda args: args, (ws, coef, scores, sweeps)
        )
        resolves += (got > 0).astype(jnp.int32)
        return ws, coef, scores, added + got, sweeps, overflow, resolves, data

    def step(rng_key: PRNGKey, state: CuttingPlaneState, data: StructuredData):
        del rng_key
        z = jnp.zeros((), jnp.int32)
        n = data.words.shape[0]
        ws, coef, scores, added, sweeps, overflow, resolves, _ = jax.lax.fori_loop(
            0,
            -(-n // batch),
            visit_block,
            (state.working_set, state.coefficients, state.scores, z, z, z, z, data),
        )
        objective = dual_objective(ws, coef, scores)
        new = CuttingPlaneState(
            *next_state(state, ws, coef, scores, objective, added, overflow),
            state.resolves + resolves,
        )
        info = CuttingPlaneInfo(
            objective=objective,
            num_active=jnp.sum(ws.active).astype(jnp.int32),
            num_added=added,
            sweeps=sweeps,
        )
        return new, info

    return step


@functools.partial(jax.jit, static_argnames=("settings",))
def fit_cutting_plane(
    data: StructuredData,
    c: float = 1.0,
    epsilon: float = 1e-3,
    *,
    settings: CuttingPlaneSettings = CuttingPlaneSettings(),  # noqa: B008 (immutable)
) -> tuple[CuttingPlaneState, CuttingPlaneInfo]:
    """Run passes until one adds no constraint (one ``jit``).

    Parameters
    ----------
    data : StructuredData
    c : float
        :math:`C` (traced).
    epsilon : float
        Violation margin of Tsochantaridis et al. and the subproblem KKT tolerance
        (traced), as ``tolerance`` of
        :func:`jaxannot.methods.emml.working_set.fit_emml`.
    settings : CuttingPlaneSettings
        Slots per VRep, pass and sweep caps, candidates and batch (static).

    Returns
    -------
    state : CuttingPlaneState
    history : CuttingPlaneInfo
        Per pass, arrays of length ``settings.max_iterations`` (NaN / -1 past
        ``state.iteration``).
    """
    dtype = data.kernel.dtype
    c = jnp.asarray(c, dtype)
    epsilon = jnp.asarray(epsilon, dtype)
    step = build_kernel(c, epsilon, settings)
    state = init(data, settings.capacity)
    f = jnp.full((settings.max_iterations,), jnp.nan, dtype)
    m = jnp.full((settings.max_iterations,), -1, jnp.int32)
    history = CuttingPlaneInfo(f, m, m, m)

    def going(state, _):
        first = state.iteration == 0
        more = state.iteration < settings.max_iterations
        return (first | (state.num_added > 0)) & more

    return run_iterations(step, jax.random.key(0), data, state, history, going)
