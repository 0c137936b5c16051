"""The pieces :class:`~jaxannot.inference.vem.VEM` plugs together.

- :class:`VEMResult`, what :meth:`VEM.run` returns.
- E-step transforms: the protocol and :class:`ExactEStep` (the exact local posterior);
  :class:`~jaxannot.inference.lapvar.LapVar1` / ``LapVar2`` implement the same one.
- Closed-form M-steps, registered per model (:func:`register_closed_form`).
- The extra terms of the objective (e.g. :class:`~jaxannot.inference.MaxMargin`):
  their value, the MedLDA-style E-step refinement they induce, and their dual updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import xlogy

__all__ = [
    "VEMResult",
    "ExactEStep",
    "register_closed_form",
    "closed_form_for",
    "terms_value",
    "refine_for_terms",
    "dual_updates",
]


class VEMResult(NamedTuple):
    """What :meth:`VEM.run` returns.

    Attributes
    ----------
    params : dict
        Constrained values of the global sites (plus ``"terms"``: a tuple of each
        extra term's parameters, empty without terms).
    posteriors : Float[Array, "images K"]
        The local posteriors the final parameters were fitted to.
    losses : np.ndarray [num_steps]
        Negative objective :math:`-\\mathcal{L}` after each E-step (NaN for steps
        skipped after convergence).
    draws : dict or None
        Draws ``{site: [draws, ...]}`` of the global posterior the posteriors
        imply (:meth:`VEM.laplace_draws`); None without.
    draw_posteriors : Float[Array, "draws images K"] or None
        The fold-in posteriors under each draw; None without draws.
    """

    params: dict
    posteriors: jax.Array
    losses: np.ndarray
    draws: dict | None = None
    draw_posteriors: jax.Array | None = None


_CLOSED_FORMS: dict[Callable, Callable] = {}


def register_closed_form(model: Callable, m_step: Callable) -> Callable:
    """Register ``m_step(posteriors, *args, **kwargs) -> dict`` for ``model``.

    ``m_step`` returns the constrained values of the global sites that maximize the
    expected complete log joint :math:`\\sum_{ik}\\phi_{ik}a_{ik} + \\log p(\\theta)`
    given the posteriors ``[images, K]``. :class:`VEM` uses it when
    ``m_step="auto"``. Returns ``model`` (usable as a decorator helper).
    """
    _CLOSED_FORMS[model] = m_step
    return model


def closed_form_for(model: Callable) -> Callable | None:
    """The closed-form M-step registered for ``model``, or None."""
    return _CLOSED_FORMS.get(model)


class ExactEStep:
    """The plain E-step: :math:`\\phi_i = \\operatorname{softmax}(a_i)` (the exact
    local posterior), with objective :math:`\\sum_i \\operatorname{logsumexp}(a_i)`.

    The protocol of every E-step transform: ``arrays`` (a pytree of the transform's
    arrays, passed to the compiled fit as data, so a new graph of the same shape
    compiles nothing), ``static_key`` (its hashable static configuration),
    ``keep_best`` (keep the best iterate and stop when the objective stops
    improving), ``apply(arrays, rng_key, phi, a) -> (phi, objective)`` and
    ``objective(arrays, phi, a)``.
    """

    keep_best = False
    arrays: tuple = ()
    static_key = ("exact",)

    def apply(self, arrays, rng_key, phi, a):
        del arrays, rng_key, phi
        return jax.nn.softmax(a, axis=-1), jax.scipy.special.logsumexp(a, -1).sum()

    def objective(self, arrays, phi, a):
        """:math:`\\sum_{ik}\\phi_{ik}a_{ik} - \\phi_{ik}\\log\\phi_{ik}`."""
        del arrays
        return (phi * a).sum() - xlogy(phi, phi).sum()


# ------------------------------------------------------------- extra terms
def terms_value(terms, term_params, phi):
    """Sum of the extra terms' regularizers and penalties on the posteriors."""
    idx = jnp.arange(phi.shape[0])
    return sum(
        (t.regularizer(p) + t.penalty(p, phi, idx))
        for t, p in zip(terms, term_params, strict=True)
    )


def refine_for_terms(terms, term_params, phi, a, steps: int):
    """Raise the E-step objective minus the terms' penalty in ``phi`` by damped
    entropic mirror-ascent steps, accepted image by image only where they help
    (MedLDA's E-step with the margin term)."""
    if not terms or steps == 0:
        return phi

    def per_image(ph):
        idx = jnp.arange(ph.shape[0])
        own = ((ph * a) - xlogy(ph, ph)).sum(-1)
        pen = sum(
            jax.vmap(lambda f, i, t=t, p=p: t.penalty(p, f[None], i[None]))(ph, idx)
            for t, p in zip(terms, term_params, strict=True)
        )
        return own - pen

    def grad_pen(ph):
        return jax.grad(
            lambda q: sum(
                t.penalty(p, q, jnp.arange(q.shape[0]))
                for t, p in zip(terms, term_params, strict=True)
            )
        )(ph)

    def body(_, ph):
        target = jax.nn.log_softmax(a - grad_pen(ph), axis=-1)
        cand = jax.nn.softmax(0.5 * jnp.log(jnp.maximum(ph, 1e-30)) + 0.5 * target)
        better = per_image(cand) > per_image(ph)
        return jnp.where(better[:, None], cand, ph)

    return lax.fori_loop(0, steps, body, phi)


def dual_updates(terms, term_params, phi):
    """The terms solved exactly by their dual solvers (``solver="dual"``)."""
    return tuple(
        t.dual_update(phi, p) if getattr(t, "solver", "optax") == "dual" else p
        for t, p in zip(terms, term_params, strict=True)
    )
