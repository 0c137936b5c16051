r"""The global values of a :class:`~jaxannot.inference.vem.algorithm.VEM` fit given
posteriors.

Both functions work on the *expected complete log joint*

.. math::
    E(\theta) = \sum_{ik} \phi_{ik}\, a_{ik}(\theta) + \log p(\theta),

in the unconstrained coordinates :math:`u` of the global sites
(:math:`\theta = T(u)`, each site's support bijection):

- :func:`maximize_expected`: the M-step of the default start, by L-BFGS (random
  soft assignments :math:`\Phi`, then this: the closed-form path's start for a
  model without a closed form).
- :func:`laplace_draws`: draws of the global posterior the local posteriors
  imply, :math:`q(\theta) \propto \exp E(\theta)` — the factor of :math:`\theta`
  that mean-field variational Bayes pairs with :math:`q(z) = \Phi` — by its Laplace
  approximation in the unconstrained coordinates at the fit's values:
  :math:`u \sim \mathcal N(\hat u, H^{-1})`, :math:`H = -\nabla^2_u E(T(u))`,
  then :math:`\theta = T(u)`. As for the M-step, no Jacobian is added: :math:`\hat
  u` (the M-step's maximizer) is the mode of :math:`E(T(u))`, where the Gaussian
  is its second-order expansion. :math:`H` is dense, ``D x D`` for ``D``
  unconstrained coordinates.

References
----------
L. Tierney, J. B. Kadane. Accurate approximations for posterior moments and marginal
densities. JASA 81, 1986 (the Laplace approximation).
D. C. Liu, J. Nocedal. On the limited memory BFGS method for large scale
optimization. Mathematical Programming 45, 1989.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax
from jax.flatten_util import ravel_pytree

from jaxannot.inference.vem import lbfgs
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.runtime import draws

if TYPE_CHECKING:
    from jaxannot.inference.vem.declared import DeclaredModel
    from jaxannot.inference.vem.layout import Shards, Whole
    from jaxannot.types import Array, PRNGKey

__all__ = [
    "MAX_LAPLACE_DIM",
    "laplace_draws",
    "maximize_expected",
    "random_posteriors",
]

#: Largest number of unconstrained coordinates :func:`laplace_draws` accepts: its
#: Hessian is dense (``D**2`` floats, 64 MiB at this size in float32).
MAX_LAPLACE_DIM = 4096


def random_posteriors(rng_key: PRNGKey, num_images: int, num_values: int) -> Array:
    """Dirichlet(1) rows (normalized Exponential(1) draws), [images, values]:
    ``jax.random.exponential``'s draws, made in one pass
    (:func:`jaxannot.runtime.draws.exponential`).

    Parameters
    ----------
    rng_key : PRNGKey
        The draws' key.
    num_images, num_values : int
        The shape.

    Returns
    -------
    jax.Array [images, values]
        Rows on the simplex.
    """
    e = draws.exponential(rng_key, (num_images, num_values))
    return e / e.sum(-1, keepdims=True)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def maximize_expected(
    dm: DeclaredModel,
    layout: Whole | Shards,
    num_steps: int,
    values: dict[str, Array],
    phi: Array,
    dynamic: tuple,
) -> dict[str, Array]:
    """``num_steps`` L-BFGS steps on :math:`-E` from ``values``
    (:func:`~jaxannot.inference.vem.lbfgs.minimize`: one evaluation of
    :math:`E` and its gradient in the compiled loop); the start is kept where no
    finite point was met.

    Parameters
    ----------
    dm : DeclaredModel
        The model (static).
    layout : Whole or Shards
        The fit's layout (static).
    num_steps : int
        L-BFGS steps (static).
    values : dict
        Site -> start value.
    phi : jax.Array [images, K]
        The posteriors the expectation is taken under.
    dynamic : tuple
        The model's array arguments.

    Returns
    -------
    dict
        Site -> new value.
    """
    expected, flat, constrain = _in_unconstrained(dm, layout, values, phi, dynamic)

    def loss(x):
        return -expected(x)

    return constrain(lbfgs.minimize(jax.value_and_grad(loss), flat, num_steps))


def _in_unconstrained(dm, layout, values, phi, dynamic):
    """:math:`E(T(u))` as a function of the flat unconstrained coordinates ``x``,
    the coordinates of ``values``, and the map from coordinates to global values."""
    transforms = ModelCall.join(dm, layout.setup, dynamic).transforms()
    start = {k: transforms[k].inv(v) for k, v in values.items()}
    flat, unravel = ravel_pytree(start)

    def constrain(x):
        return {k: transforms[k](v) for k, v in unravel(x).items()}

    def expected(x):
        return layout.expected(dm, constrain(x), phi, dynamic)

    return expected, flat, constrain


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def laplace_draws(
    dm: DeclaredModel,
    layout: Whole | Shards,
    num_draws: int,
    rng_key: PRNGKey,
    values: dict[str, Array],
    phi: Array,
    dynamic: tuple,
) -> tuple[dict[str, Array], Array]:
    """``num_draws`` draws of the global values from the Laplace approximation of
    :math:`\\exp E` at ``values`` (module docstring), ``{site: [num_draws, ...]}``,
    and the smallest eigenvalue of :math:`H` (not positive: ``values`` is not a
    local maximum, the draws are not to be trusted).

    Parameters
    ----------
    dm, layout
        As :func:`maximize_expected` takes them (static).
    num_draws : int
        Draws (static).
    rng_key : PRNGKey
        The draws' key.
    values : dict
        Site -> value at the mode.
    phi, dynamic
        As :func:`maximize_expected` takes them.

    Returns
    -------
    tuple of (dict, jax.Array)
        Site -> draws [num_draws, ...], and the smallest eigenvalue of :math:`H`.
    """
    log_density, flat, constrain = _in_unconstrained(dm, layout, values, phi, dynamic)
    grad = jax.grad(log_density)

    def hessian_column(e):
        return -jax.jvp(grad, (flat,), (e,))[1]

    hessian = lax.map(hessian_column, jnp.eye(flat.size, dtype=flat.dtype))
    hessian = 0.5 * (hessian + hessian.T)
    eigenvalues, vectors = jnp.linalg.eigh(hessian)
    # directions of zero or negative curvature get a unit precision: they are
    # reported (the smallest eigenvalue) rather than drawn with infinite spread
    precision = jnp.where(eigenvalues > 0, eigenvalues, 1.0)
    noise = jax.random.normal(rng_key, (num_draws, flat.size), flat.dtype)
    draws = flat + (noise / jnp.sqrt(precision)) @ vectors.T
    return jax.vmap(constrain)(draws), eigenvalues[0]
