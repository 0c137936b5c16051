"""The M-step of a :class:`~jaxannot.inference.vem.algorithm.VEM` fit.

- :func:`m_step`: the global values given the posteriors, by the closed form
  (``m_step=``) or by the conjugate sites' closed-form updates and optax steps on
  the expected complete log joint, together with the extra terms' parameters.
- :func:`optax_steps`: the optimizer's steps of one M-step, in one ``fori_loop``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import optax
from jax import lax

from jaxannot.inference.vem.conjugate import (
    all_kept,
    conjugate_sites,
    conjugate_update,
)
from jaxannot.inference.vem.steps import terms_value
from jaxannot.inference.vem.summed import closed_form_on

if TYPE_CHECKING:
    from numpyro.distributions.transforms import Transform

    from jaxannot.inference.vem.layout import Shards, Whole
    from jaxannot.types import Array, ArrayTree

__all__ = ["conjugate_only", "m_step", "optax_steps"]


def m_step(
    vem: Any,
    layout: Whole | Shards,
    transforms: dict[str, Transform],
    values: dict[str, Array],
    opt_state: ArrayTree,
    term_params: tuple,
    phi: Array,
    dynamic: tuple,
) -> tuple[dict[str, Array], ArrayTree, tuple]:
    r"""One M-step of ``vem``: ``(values, opt_state, term_params)``.

    With a closed form (``vem.closed_form``) the global values are its answer to the
    posteriors ``phi`` and the extra terms' parameters take ``vem.m_steps`` optax
    steps on :math:`\sum_t \Omega_t(\Phi, \eta_t)`; otherwise the globals, in
    unconstrained coordinates (``transforms``), and the terms' parameters take
    ``vem.m_steps`` optax steps together on the negative expected complete log joint
    :math:`-\sum_{ik}\phi_{ik}a_{ik}(\theta) - \log p(\theta)` plus the terms.
    Before them, the Dirichlet and Beta sites get their closed-form update and
    the Normal sites Newton steps
    (:mod:`~jaxannot.inference.vem.conjugate`, unless ``vem.conjugate`` is False);
    where it is kept those sites stay at it through the steps (which are skipped
    when no other site and no term is left), otherwise every site takes the steps.

    Parameters
    ----------
    vem : VEM
        The algorithm (its optimizer, sites and terms).
    layout : Whole or Shards
        The fit's layout.
    transforms : dict
        Site -> transform onto its support.
    values : dict
        Site -> current global value.
    opt_state : pytree
        The optimizer's state.
    term_params : tuple
        The extra terms' parameters.
    phi : jax.Array [images, K]
        Posteriors.
    dynamic : tuple
        The model's array arguments.

    Returns
    -------
    tuple of (dict, pytree, tuple)
        The new values, optimizer state and terms' parameters.
    """
    if vem.closed_form is not None:
        answer = closed_form_on(layout, vem.closed_form, phi, dynamic)
        values = {k: jnp.asarray(v) for k, v in answer.items()}
        if vem.terms:
            term_params, opt_state = optax_steps(
                vem, lambda tp: terms_value(vem.terms, tp, phi), term_params, opt_state
            )
        return values, opt_state, term_params
    kinds = conjugate_sites(vem, layout, dynamic)
    fixed, kept = {}, {}
    if kinds:
        fixed, kept = conjugate_update(
            vem.declared, layout, values, phi, dynamic, kinds
        )

    def constrain(u):
        """Constrained values; the kept closed-form ones in place of theirs."""
        vals = {k: transforms[k](x) for k, x in u.items()}
        return {
            k: jnp.where(kept[k], fixed[k], v) if k in fixed else v
            for k, v in vals.items()
        }

    def loss(u_and_t):
        u, tp = u_and_t
        value = -layout.expected(vem.declared, constrain(u), phi, dynamic)
        return value + (terms_value(vem.terms, tp, phi) if vem.terms else 0.0)

    def steps(carry):
        return optax_steps(vem, loss, *carry)

    unconstrained = {k: transforms[k].inv(v) for k, v in values.items()}
    carry = ((unconstrained, term_params), opt_state)
    if len(kinds) == len(values) and not vem.terms:  # nothing left to step
        carry = lax.cond(all_kept(kept), lambda c: c, steps, carry)
    else:
        carry = steps(carry)
    (unconstrained, term_params), opt_state = carry
    return constrain(unconstrained), opt_state, term_params


def conjugate_only(
    vem: Any, layout: Whole | Shards, values: dict[str, Array], dynamic: tuple
) -> dict[str, str]:
    """The conjugate sites (:func:`~jaxannot.inference.vem.conjugate.conjugate_sites`)
    where they are every global site of a model with neither a closed form nor extra
    terms, else ``{}``: the M-step of such a model is their closed-form update, and
    :func:`m_step`'s optax steps run only where it is not kept. Read at trace time.

    Parameters
    ----------
    vem : VEM
        The algorithm (its conjugate sites and terms).
    layout : Whole or Shards
        The fit's layout.
    values : dict
        Site -> current global value.
    dynamic : tuple
        The model's array arguments.

    Returns
    -------
    dict
        Site -> ``"dirichlet"``, ``"beta"`` or ``"normal"``, or empty.
    """
    if vem.closed_form is not None or vem.terms:
        return {}
    kinds = conjugate_sites(vem, layout, dynamic)
    return kinds if kinds and len(kinds) == len(values) else {}


def optax_steps(
    vem: Any,
    loss: Callable[[ArrayTree], Array],
    params: ArrayTree,
    opt_state: ArrayTree,
) -> tuple[ArrayTree, ArrayTree]:
    """``vem.m_steps`` steps of ``vem.optimizer`` on ``loss(params)``:
    ``(params, opt_state)`` (one ``fori_loop``).

    Parameters
    ----------
    vem : VEM
        The algorithm (its optimizer and ``m_steps``).
    loss : callable
        ``loss(params)``, a scalar.
    params : pytree
        The start.
    opt_state : pytree
        The optimizer's state.

    Returns
    -------
    tuple of (pytree, pytree)
        The new params and optimizer state.
    """
    extra = isinstance(vem.optimizer, optax.GradientTransformationExtraArgs)

    def body(_, carry):
        params, opt_state = carry
        value, grads = jax.value_and_grad(loss)(params)
        kw = dict(value=value, grad=grads, value_fn=loss) if extra else {}
        updates, opt_state = vem.optimizer.update(grads, opt_state, params, **kw)
        return optax.apply_updates(params, updates), opt_state

    return lax.fori_loop(0, vem.m_steps, body, (params, opt_state))
