r"""Linear ε-insensitive support vector regression in the dual (seed 001 eq. 12).

Primal (seed 001 P2 with the features fixed; :math:`h_d` the latent means):

.. math::

    \min_V \; \tfrac12 C_1 \|V\|^2 + C_2 \sum_d \max(0, |y_d - V^\top h_d| - \epsilon).

Dual with :math:`\mu_d, \mu_d^* \in [0, C_2]` and :math:`V = \frac1{C_1}\sum_d (\mu_d -
\mu_d^*) h_d` (eq. 12). At the optimum at most one of :math:`\mu_d, \mu_d^*` is
non-zero,
so with :math:`\beta_d = \mu_d - \mu_d^* \in [-C_2, C_2]` the dual is

.. math::

    \min_\beta \; \frac1{2C_1} \Big\|\sum_d \beta_d h_d\Big\|^2
        + \epsilon \sum_d |\beta_d| - \sum_d y_d \beta_d ,

solved by exact coordinate descent (a soft-threshold and a clip per coordinate, as in
LIBLINEAR's dual solver for L1-loss SVR); the dual objective never increases.
Dividing the primal by :math:`C_1` gives the usual SVR with :math:`C = C_2/C_1`.

References
----------
A. J. Smola, B. Schölkopf. A Tutorial on Support Vector Regression. Statistics and
Computing 14(3), 2004. C.-H. Ho, C.-J. Lin. Large-scale Linear Support Vector
Regression. JMLR 13, 2012. Seed 001 §4.2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.solvers.multiclass_svm import DualStop, run_dual_epochs
from jaxannot.types import Array, PRNGKey

__all__ = [
    "DEFAULT_STOP",
    "SVRState",
    "SVRInfo",
    "primal_objective",
    "dual_objective",
    "build_kernel",
    "fit_svr",
    "multipliers",
]


#: Default of :func:`fit_svr`.
DEFAULT_STOP = DualStop(max_epochs=500, tol=1e-5)


class SVRState(NamedTuple):
    """``beta = mu - mu* [n]`` and ``weights = V [F]``."""

    beta: Array
    weights: Array


class SVRInfo(NamedTuple):
    """Primal and dual objectives (both minimized) and the duality gap."""

    primal: Array
    dual: Array
    gap: Array


def primal_objective(
    weights: Array, x: Array, y: Array, c1: float, c2: float, epsilon: float
) -> Array:
    """Primal value.

    :math:`\\tfrac12 C_1\\|V\\|^2
    + C_2 \\sum_d \\max(0, |y_d - V^\\top x_d| - \\epsilon)`
    """
    resid = jnp.abs(y - x @ weights)
    return 0.5 * c1 * jnp.sum(weights**2) + c2 * jnp.sum(
        jnp.maximum(0.0, resid - epsilon)
    )


def dual_objective(state: SVRState, y: Array, c1: float, epsilon: float) -> Array:
    """Minimized dual; equals minus the maximized dual of seed 001."""
    return (
        0.5 * c1 * jnp.sum(state.weights**2)
        + epsilon * jnp.sum(jnp.abs(state.beta))
        - jnp.sum(y * state.beta)
    )


def build_kernel(
    c1: float, c2: float, epsilon: float
) -> Callable[..., tuple[SVRState, SVRInfo]]:
    """Build ``step(rng_key, state, x, y) -> (SVRState, SVRInfo)``: one epoch."""

    def step(rng_key: PRNGKey, state: SVRState, x: Array, y: Array):
        order = jax.random.permutation(rng_key, x.shape[0])
        curv = jnp.sum(x**2, axis=1) / c1  # second derivative of each coordinate

        def visit(j, s: SVRState) -> SVRState:
            i = order[j]
            a = curv[i]
            old = s.beta[i]
            g = x[i] @ s.weights - y[i] - a * old  # linear coefficient without beta_i
            new = -jnp.sign(g) * jnp.maximum(jnp.abs(g) - epsilon, 0.0) / a
            new = jnp.where(a > 0, jnp.clip(new, -c2, c2), old)
            weights = s.weights + (new - old) * x[i] / c1
            return SVRState(s.beta.at[i].set(new), weights)

        state = jax.lax.fori_loop(0, x.shape[0], visit, state)
        primal = primal_objective(state.weights, x, y, c1, c2, epsilon)
        dual = dual_objective(state, y, c1, epsilon)
        return state, SVRInfo(primal, dual, primal + dual)

    return step


@jax.jit
def fit_svr(
    rng_key: PRNGKey,
    x: Array,
    y: Array,
    c1: float = 1.0,
    c2: float = 1.0,
    epsilon: float = 0.1,
    *,
    stop: DualStop = DEFAULT_STOP,
    init_state: SVRState | None = None,
) -> tuple[SVRState, SVRInfo]:
    """Fit the ε-insensitive SVR dual by coordinate descent until ``stop``.

    Parameters
    ----------
    rng_key, x, stop
        As in :func:`~jaxannot.solvers.multiclass_svm.fit_multiclass_svm`.
    y : [n] array
        Targets.
    c1, c2, epsilon : float
        Seed 001's :math:`C_1` (weight of :math:`\\|V\\|^2`), :math:`C_2` (box of the
        multipliers) and the insensitivity :math:`\\epsilon`.
    init_state : SVRState, optional
        Warm start.

    Returns
    -------
    (SVRState, SVRInfo)
        Final state and ``[stop.max_epochs]`` traces (NaN after the stopping epoch).
    """
    x = jnp.asarray(x)
    y = jnp.asarray(y, x.dtype)
    if init_state is None:
        init_state = SVRState(
            jnp.zeros(x.shape[0], x.dtype), jnp.zeros(x.shape[1], x.dtype)
        )
    step = build_kernel(c1, c2, epsilon)
    return run_dual_epochs(step, rng_key, init_state, x, y, stop)


def multipliers(state: SVRState) -> tuple[Array, Array]:
    """``(mu, mu*)`` of seed 001 eq. 12 from ``beta = mu - mu*``."""
    return jnp.maximum(state.beta, 0.0), jnp.maximum(-state.beta, 0.0)
