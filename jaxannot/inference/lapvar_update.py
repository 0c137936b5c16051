r"""LapVar1's update of one variable: the exact maximizer of :math:`f_i` on the simplex.

The part of seed 000's :math:`Q(\Phi)` (:mod:`~jaxannot.inference.lapvar`) that
depends on one variable :math:`\phi_i`, with :math:`d_i = \sum_j S_{ij}` and
:math:`m_i = \sum_j S_{ij}\phi_j`, is

.. math::
    f_i(\phi_i) = \phi_i^\top a_i - \phi_i^\top\log\phi_i
                  - \lambda\,(d_i\lVert\phi_i\rVert^2 - 2\phi_i^\top m_i),

strictly concave on the simplex. Its stationarity conditions in log coordinates, with
a Lagrange multiplier :math:`\nu` for :math:`\sum_k\phi_{ik} = 1`, read
:math:`\log\phi_{ik} + c_i\phi_{ik} = r_{ik} - \nu` with :math:`r_i = a_i +
2\lambda m_i` and :math:`c_i = 2\lambda d_i`: each component is a Lambert W,
:math:`\phi_{ik} = W(c_i e^{r_{ik}-\nu}) / c_i`, and :math:`\nu` is the root of
:math:`\sum_k\phi_{ik}(\nu) = 1`, found by Newton's method (:func:`newton_update`).

References
----------
Seed 000: "Graph-regularized variational inference for image annotation" (LapVar1).
R. M. Corless, G. H. Gonnet, D. E. G. Hare, D. J. Jeffrey, D. E. Knuth. On the Lambert
W function. Adv. Comput. Math. 5, 1996.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax

if TYPE_CHECKING:
    from jaxannot.types import Array

__all__ = ["local_objective", "newton_update"]

# Newton iterations for W(e^L) from softplus(L): three reach float32 precision for
# every L > _W_SERIES (measured against scipy.special.lambertw on L in [-80, 80]).
_W_NEWTON = 3
# Below this L, W(e^L) = e^L to float32 precision (W(x) = x - x^2 + ...).
_W_SERIES = -30.0
# Where w = c phi exceeds this, phi is read as w / c: log phi = s - w would lose the
# digits of phi to the cancellation of two large terms.
_W_DIRECT = 1.0
# An update is kept unless f_i reads lower by more than this many units of float32
# round-off (eps = 1.2e-7) of its terms: an exact maximizer may read a few ulps lower.
_ACCEPT_ULPS = 8 * 1.2e-7


def local_objective(
    phi_i: Array, a_i: Array, m_i: Array, d_i: Array, lam: float | Array
) -> jax.Array:
    """:math:`f_i(\\phi_i)`: the terms of :math:`Q` that depend on one variable.

    Parameters
    ----------
    phi_i, a_i, m_i : jax.Array [K]
        The variable's posterior, log joint and neighbour sum.
    d_i : jax.Array
        Its degree.
    lam : float or jax.Array
        The weight of the Laplacian penalty.

    Returns
    -------
    jax.Array
        The scalar :math:`f_i`.
    """
    return (
        phi_i @ a_i
        - jax.scipy.special.xlogy(phi_i, phi_i).sum()
        - lam * (d_i * (phi_i @ phi_i) - 2.0 * (phi_i @ m_i))
    )


def _lambert_w_exp(log_x: jax.Array) -> jax.Array:
    """:math:`W(e^L)`, the principal branch of Lambert W at :math:`e^L`, elementwise.

    Newton's method on :math:`w + \\log w = L` from :math:`\\log(1 + e^L)`, an upper
    bound of the root on a concave increasing function, so every iterate stays
    positive; :math:`e^L` itself below ``_W_SERIES`` (and 0 at :math:`L = -\\infty`).
    """
    lc = jnp.maximum(log_x, _W_SERIES)
    w = jax.nn.softplus(lc)
    for _ in range(_W_NEWTON):
        w = w * (1.0 + lc - jnp.log(w)) / (1.0 + w)
    return jnp.where(log_x > _W_SERIES, w, jnp.exp(log_x))


def newton_update(
    phi_i: Array,
    a_i: Array,
    m_i: Array,
    d_i: Array,
    lam: float | Array,
    num_steps: int = 10,
) -> jax.Array:
    r"""Maximize :math:`f_i` over the simplex: Newton's method on the multiplier.

    With :math:`c = 2\lambda d_i`, :math:`r = a_i + 2\lambda m_i` shifted so that
    :math:`\mathrm{lse}(r) = 0`, and :math:`t = \mathrm{lse}(r_i) - \nu`, the
    maximizer for a multiplier is :math:`\phi_k(t) = W(c\,e^{r_k + t}) / c`
    (:math:`e^{r_k}` when :math:`c = 0`); :math:`S(t) = \sum_k\phi_k(t)` is convex
    increasing with :math:`S(0) \le 1 \le S(c)`, so Newton's method on
    :math:`S(t) = 1` from :math:`t = c` decreases monotonically to the root.
    ``num_steps`` steps (each O(K)); the result is renormalized and replaces
    ``phi_i`` unless :math:`f_i` reads lower by more than float32 round-off. It does
    not depend on ``phi_i`` otherwise: a sharp start is no obstacle. One variable,
    [K]; vmap over independent variables.

    Parameters
    ----------
    phi_i, a_i, m_i, d_i, lam
        As :func:`local_objective` takes them.
    num_steps : int
        Newton steps.

    Returns
    -------
    jax.Array [K]
        The new posterior.
    """
    lam = jnp.asarray(lam, phi_i.dtype)
    a_i = a_i - a_i.max()  # f_i changes by a constant on the simplex
    c = 2.0 * lam * d_i
    r = a_i + 2.0 * lam * m_i
    r = r - jax.nn.logsumexp(r)
    log_c = jnp.log(c)  # -inf for c = 0: w = 0 and phi = softmax(r)

    def solution(t):
        w = _lambert_w_exp(log_c + r + t)  # w = c phi
        return jnp.where(w > _W_DIRECT, w / c, jnp.exp(r + t - w)), w

    def step(_, t):
        phi, w = solution(t)
        slope = (phi / (1.0 + w)).sum()  # dS/dt > 0
        return jnp.clip(t - (phi.sum() - 1.0) / slope, 0.0, t)

    def more(carry):
        k, t, previous = carry
        return (k < num_steps) & (t != previous)

    def advance(carry):
        k, t, _ = carry
        return k + 1, step(k, t), t

    # stops where a step leaves t unchanged: a fixed point of the step, so the
    # remaining steps of a fori_loop would change nothing (the same bits)
    _, t, _ = lax.while_loop(more, advance, (0, c, jnp.full_like(c, jnp.nan)))
    new = solution(t)[0]
    new = new / new.sum()
    old_value = local_objective(phi_i, a_i, m_i, d_i, lam)
    new_value = local_objective(new, a_i, m_i, d_i, lam)
    scale = 1.0 + jnp.abs(a_i) @ (phi_i + new) + 2.0 * lam * (d_i + m_i.sum())
    return jnp.where(new_value >= old_value - _ACCEPT_ULPS * scale, new, phi_i)
