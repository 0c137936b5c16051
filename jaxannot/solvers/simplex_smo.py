r"""SMO on one block's scaled simplex, the inner step of :mod:`~jaxannot.solvers.qp`.

A block's variables are its slots' multipliers :math:`\mu_{ip}` plus a slack
:math:`s_i = C - \sum_p \mu_{ip}` (gradient 0, no curvature) on the scaled simplex
:math:`\{\mu_i, s_i \ge 0, \sum_p \mu_{ip} + s_i = C\}`. SMO with the maximal
violating pair (Keerthi et al. 2001) increases the variable with the smallest
gradient and decreases the one with the largest gradient among those with positive
mass, by the exact line minimizer: the objective never increases.

References
----------
S. S. Keerthi, S. K. Shevade, C. Bhattacharyya, K. R. K. Murthy. Improvements to Platt's
SMO algorithm for SVM classifier design. Neural Computation 13(3), 2001.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxannot.runtime.progress import run_until_stopped
from jaxannot.types import Array

__all__ = ["block_gap", "smo_block"]


def block_gap(mu_e: Array, g_e: Array, up_ok: Array) -> Array:
    """The maximal violating pair's gradient gap of a block (0 or less: optimal).

    ``mu_e``, ``g_e`` are the block's variables and gradients with the slack last;
    ``up_ok`` marks the variables that may increase (the active slots and the
    slack); a variable may decrease where it also has positive mass."""
    down_ok = up_ok & (mu_e > 0)
    g_up = jnp.min(jnp.where(up_ok, g_e, jnp.inf))
    g_down = jnp.max(jnp.where(down_ok, g_e, -jnp.inf))
    return g_down - g_up


class _SMOCarry(NamedTuple):
    """:func:`smo_block`'s carry: the block's variables and gradients (slack last)
    and whether its :func:`block_gap` is at most the tolerance."""

    mu_e: Array
    g_e: Array
    stopped: Array


def smo_block(
    mu_i: Array,
    grad_i: Array,
    gram_i: Array,
    active_i: Array,
    k_ii: Array,
    c: float | Array,
    tol: float,
    max_steps: int,
) -> Array:
    r"""SMO with the maximal violating pair on one VRep's scaled simplex.

    Minimizes :math:`\tfrac12 \mu_i^\top (k_{ii} G_i) \mu_i + g_i^\top \mu_i` over
    :math:`\{\mu_i, s_i \ge 0, \sum_p \mu_{ip} + s_i = C\}` from ``mu_i``: each
    step moves mass from the variable with the largest gradient (among those with
    mass) to the one with the smallest, by the exact line minimizer clipped to the
    mass available, until the :func:`block_gap` is at most ``tol`` or after
    ``max_steps`` steps. Inactive slots stay at 0. The steps run through the
    library's in-program runner
    (:func:`~jaxannot.runtime.progress.run_until_stopped`).

    Parameters
    ----------
    mu_i, grad_i : Float[Array, "P"]
        The block's multipliers and their gradients :math:`g_{ip}`.
    gram_i : Float[Array, "P P"]
        The slot Gram matrix :math:`G_i`.
    active_i : Bool[Array, "P"]
    k_ii, c, tol : float
    max_steps : int

    Returns
    -------
    Float[Array, "P"]
        The new multipliers.
    """
    p = mu_i.shape[0]
    dtype = mu_i.dtype
    slack = jnp.maximum(c - jnp.sum(mu_i), 0.0)
    mu_e = jnp.concatenate([mu_i, slack[None]])
    g_e = jnp.concatenate([grad_i, jnp.zeros((1,), dtype)])
    q = jnp.zeros((p + 1, p + 1), dtype).at[:p, :p].set(k_ii * gram_i)
    up_ok = jnp.concatenate([active_i, jnp.ones((1,), bool)])

    def step(t: Array, carry: _SMOCarry) -> tuple[_SMOCarry, tuple]:
        del t
        mu_e, g_e = carry.mu_e, carry.g_e
        down_ok = up_ok & (mu_e > 0)
        u = jnp.argmin(jnp.where(up_ok, g_e, jnp.inf))
        d = jnp.argmax(jnp.where(down_ok, g_e, -jnp.inf))
        gap = g_e[d] - g_e[u]
        curv = q[u, u] + q[d, d] - 2.0 * q[u, d]
        avail = mu_e[d]
        move = jnp.where(
            curv > 0, jnp.minimum(gap / jnp.where(curv > 0, curv, 1.0), avail), avail
        )
        to_zero = move >= avail
        mu_e = mu_e.at[u].add(move)
        mu_e = mu_e.at[d].set(jnp.where(to_zero, 0.0, mu_e[d] - move))
        g_e = g_e + move * (q[:, u] - q[:, d])
        return _SMOCarry(mu_e, g_e, ~(block_gap(mu_e, g_e, up_ok) > tol)), ()

    start = _SMOCarry(mu_e, g_e, ~(block_gap(mu_e, g_e, up_ok) > tol))
    carry, _, _ = run_until_stopped(step, start, max_steps)
    return jnp.where(active_i, carry.mu_e[:p], 0.0)
