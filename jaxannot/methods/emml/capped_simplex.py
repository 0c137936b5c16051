r"""Euclidean projection onto the capped simplex (Wang & Lu 2015), the block step of
the exact EMML solver (:mod:`.exact`).

References
----------
W. Wang, C. Lu. Projection onto the capped simplex. arXiv:1503.01002, 2015.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxannot.types import Array

__all__ = ["project_capped_simplex"]


def project_capped_simplex(
    v: Array, total: Array, cap: Array, iters: int = 64
) -> Array:
    r"""Euclidean projection onto the capped simplex (Wang & Lu 2015).

    Solves :math:`\min_{\mathbf u} \tfrac12 \|\mathbf u - \mathbf v\|^2` over
    :math:`\{0 \le u_w \le \text{cap}, \sum_w u_w = \text{total}\}`. Its KKT
    conditions give :math:`u_w = \operatorname{clip}(v_w - \tau, 0, \text{cap})`,
    with :math:`\tau` the multiplier of the sum constraint: the root of the
    non-increasing, piecewise-linear :math:`m(\tau) = \sum_w
    \operatorname{clip}(v_w - \tau, 0, \text{cap}) - \text{total}`, whose breakpoints
    are the :math:`v_w` and :math:`v_w - \text{cap}`. Wang & Lu locate the root's
    piece by sorting them; here ``iters`` bisection steps on
    :math:`[\min_w v_w - \text{cap}, \max_w v_w]` bracket it (no sort, a fixed
    number of vectorized steps), and the linear equation of the bracket's piece,
    :math:`\text{cap}\,|\{\text{capped}\}| + \sum_{\text{free}} (v_w - \tau) =
    \text{total}`, gives :math:`\tau` exactly when its root lies in the bracket (the
    bisection midpoint otherwise).

    Parameters
    ----------
    v : Float[Array, "words"]
        Point to project.
    total : Float[Array, ""]
        Required sum, ``0 <= total <= W cap``.
    cap : Float[Array, ""]
        Upper bound of every coordinate.
    iters : int
        Bisection steps.

    Returns
    -------
    u : Float[Array, "words"]
        The projection.
    """
    dtype = v.dtype

    def mass(tau):
        return jnp.sum(jnp.clip(v - tau, 0.0, cap))

    lo = jnp.min(v) - cap  # mass(lo) = W cap >= total
    hi = jnp.max(v)  # mass(hi) = 0 <= total

    def bisect(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        big = mass(mid) > total
        return jnp.where(big, mid, lo), jnp.where(big, hi, mid)

    lo, hi = jax.lax.fori_loop(0, iters, bisect, (lo, hi))
    tau = 0.5 * (lo + hi)
    # exact: on the piece containing tau, sum = cap * #capped + sum_free (v - tau)
    free = (v - tau > 0) & (v - tau < cap)
    capped = v - tau >= cap
    n_free = jnp.sum(free)
    exact = (jnp.sum(jnp.where(free, v, 0.0)) + cap * jnp.sum(capped) - total) / (
        jnp.maximum(n_free, 1).astype(dtype)
    )
    ok = (n_free > 0) & (exact >= lo) & (exact <= hi)
    tau = jnp.where(ok, exact, tau)
    return jnp.clip(v - tau, 0.0, cap)
