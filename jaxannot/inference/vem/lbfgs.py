r"""A small L-BFGS for the default start of a
:class:`~jaxannot.inference.vem.algorithm.VEM` fit.

:func:`minimize` evaluates the objective and its gradient at *one* point per loop
iteration: a trial point :math:`x + t d` along the L-BFGS direction :math:`d` is
accepted where it meets the Armijo condition
:math:`f(x + t d) \le f(x) + c_1 t\, \nabla f(x)^\top d` (and is finite), otherwise
the step is halved and tried again in the next iteration. The objective's gradient
thus appears once in the compiled program, where ``optax.lbfgs`` with its zoom line
search inlines it at several places (a start that took 3.6 s of the 5.5 s first fit
to compile, issue 43). The first iteration evaluates the start itself (its value is
taken as :math:`+\infty`, so it is accepted when finite), the first step has unit
length, and later steps scale the inverse Hessian by
:math:`s^\top y / y^\top y` of the newest pair; pairs with
:math:`s^\top y \le 0` (a nonconvex stretch) are not kept.

References
----------
J. Nocedal, S. J. Wright. Numerical Optimization, 2nd ed., Springer 2006: algorithm
7.4 (the two-loop recursion) and section 3.1 (backtracking, the Armijo condition).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from jaxannot.runtime.progress import run_until_stopped

__all__ = ["minimize"]

#: Armijo's sufficient-decrease constant :math:`c_1`.
ARMIJO = 1e-4

#: Pairs :math:`(s, y)` kept for the inverse Hessian.
HISTORY = 10

#: Evaluations allowed per accepted step (the rest halve a rejected step).
EVALS_PER_STEP = 3


def _direction(g, s_hist, y_hist, sy, count):
    """:math:`-H g` by the two-loop recursion over the kept pairs (newest first in
    ``s_hist``/``y_hist``, ``count`` of them valid); a unit step along :math:`-g`
    while none is kept."""
    valid = jnp.arange(s_hist.shape[0]) < count
    rho = jnp.where(valid, 1.0 / jnp.where(valid, sy, 1.0), 0.0)

    def newest_first(q, pair):
        s, y, r = pair
        alpha = r * (s @ q)
        return q - alpha * y, alpha

    q, alphas = lax.scan(newest_first, g, (s_hist, y_hist, rho))
    y0 = y_hist[0]
    gamma = jnp.where(
        count > 0,
        sy[0] / jnp.maximum(y0 @ y0, jnp.finfo(g.dtype).tiny),
        1.0 / jnp.maximum(jnp.linalg.norm(g), jnp.finfo(g.dtype).tiny),
    )

    def oldest_first(r, pair):
        s, y, rh, alpha = pair
        return r + s * (alpha - rh * (y @ r)), None

    r, _ = lax.scan(
        oldest_first, gamma * q, (s_hist, y_hist, rho, alphas), reverse=True
    )
    return -r


class _Carry(NamedTuple):
    """:func:`minimize`'s carry: the accepted point, its value and gradient, the
    direction, the step length tried next, the kept pairs and the accepted steps."""

    x: jnp.ndarray
    f: jnp.ndarray
    g: jnp.ndarray
    d: jnp.ndarray
    t: jnp.ndarray
    s_hist: jnp.ndarray
    y_hist: jnp.ndarray
    sy_hist: jnp.ndarray
    count: jnp.ndarray
    steps: jnp.ndarray


def minimize(value_and_grad: Callable, x0: jnp.ndarray, num_steps: int) -> jnp.ndarray:
    """Minimize a function from ``x0`` by L-BFGS with backtracking (module
    docstring).

    Parameters
    ----------
    value_and_grad : callable
        ``x -> (f(x), grad f(x))`` on a flat vector.
    x0 : jnp.ndarray
        The start, a flat vector.
    num_steps : int
        Accepted steps after the start; at most ``EVALS_PER_STEP * num_steps + 1``
        evaluations in all.

    Returns
    -------
    jnp.ndarray
        The last accepted point (``x0`` if no finite point was met).

    Notes
    -----
    The evaluations run through the library's in-program runner
    (:func:`~jaxannot.runtime.progress.run_until_stopped`), one per step of it.
    """
    n, dtype = x0.shape[0], x0.dtype
    zeros = jnp.zeros((HISTORY, n), dtype)

    def evaluation(i: jnp.ndarray, carry: _Carry) -> tuple[_Carry, tuple]:
        del i
        x, f, g, d, t, s_hist, y_hist, sy_hist, count, steps = carry
        trial = x + t * d
        f_t, g_t = value_and_grad(trial)
        finite = jnp.isfinite(f_t) & jnp.all(jnp.isfinite(g_t))
        ok = finite & (f_t <= f + ARMIJO * t * (g @ d))
        s, y = trial - x, g_t - g
        sy = s @ y
        keep = ok & (sy > 0)
        s_hist = jnp.where(keep, jnp.roll(s_hist, 1, 0).at[0].set(s), s_hist)
        y_hist = jnp.where(keep, jnp.roll(y_hist, 1, 0).at[0].set(y), y_hist)
        sy_hist = jnp.where(keep, jnp.roll(sy_hist, 1).at[0].set(sy), sy_hist)
        count = jnp.where(keep, jnp.minimum(count + 1, HISTORY), count)
        x, f, g = (
            jnp.where(ok, new, old) for new, old in ((trial, x), (f_t, f), (g_t, g))
        )
        d = jnp.where(ok, _direction(g, s_hist, y_hist, sy_hist, count), d)
        t = jnp.where(ok, jnp.ones((), dtype), 0.5 * t)
        return _Carry(x, f, g, d, t, s_hist, y_hist, sy_hist, count, steps + ok), ()

    inf = jnp.asarray(jnp.inf, dtype)
    zero = jnp.zeros((n,), dtype)
    one = jnp.ones((), dtype)
    count = jnp.int32(0)
    sy_hist = jnp.zeros((HISTORY,), dtype)
    start = _Carry(x0, inf, zero, zero, one, zeros, zeros, sy_hist, count, count)
    carry, _, _ = run_until_stopped(
        evaluation,
        start,
        EVALS_PER_STEP * num_steps + 1,
        stopped=lambda carry: carry.steps > num_steps,
    )
    return carry.x
