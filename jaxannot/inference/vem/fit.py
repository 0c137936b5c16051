"""The compiled EM iteration of a :class:`~jaxannot.inference.vem.algorithm.VEM` fit
(its start: :mod:`~jaxannot.inference.vem.initial`).

- :func:`step_for`: one EM iteration as a pure ``step(t, state, data) -> (state,
  info)`` (:class:`~jaxannot.inference.vem.steps.VEMInfo`), built once
  per static configuration: :class:`VEM` objects that compare equal (same model,
  E-step configuration, optimizer, M-step and terms) share it and its compiled loop,
  so a fresh ``VEM`` for each fit compiles nothing new.
  :meth:`VEM.update` takes one step of it through the same compiled loop
  (:func:`~jaxannot.inference.vem.run.update`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxannot.inference.vem.conjugate import all_kept, conjugate_update
from jaxannot.inference.vem.faults import DEFERRED, fault_code, keeps_old_values
from jaxannot.inference.vem.layout import Whole
from jaxannot.inference.vem.m_step import conjugate_only, m_step
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.inference.vem.steps import (
    VEMInfo,
    VEMState,
    dual_updates,
    refine_for_terms,
    terms_value,
)
from jaxannot.runtime.programs import bounded_cache

if TYPE_CHECKING:
    from jaxannot.inference.vem.layout import Shards
    from jaxannot.types import Array

__all__ = ["step_for"]


def _e_step(vem, layout, e_arrays, rng_key, values, phi, term_params, dynamic):
    r"""The E-step of one EM iteration: ``(a, new_phi, objective)``.

    ``a`` the local log joint under ``values``, ``new_phi`` the E-step transform's
    posteriors refined for the extra terms, ``objective`` :math:`\mathcal{L}` at
    them (the E-step's value, minus the terms, plus the log prior)."""
    a = layout.log_joint(vem.declared, values, dynamic)
    new_phi, q = layout.estep(vem.estep, e_arrays, rng_key, phi, a)
    new_phi = refine_for_terms(vem.terms, term_params, new_phi, a, vem.term_steps)
    if vem.terms:  # the refinement moved phi: re-evaluate
        q = vem.estep.objective(e_arrays, new_phi, a)
        q = q - terms_value(vem.terms, term_params, new_phi)
    objective = q + layout.log_prior(vem.declared, values, dynamic)
    return a, new_phi, objective


def _progress(state: VEMState, ok, objective, fitted, keep_best: bool, tolerance):
    """``(improved, halt, best)`` after an iteration reached ``objective`` with the
    fitted ``(values, phi, term_params)`` (``ok``: no fault).

    It improved on the best objective by ``tolerance`` (relative), or is the first.
    An E-step that keeps its best iterate halts when it did not improve and keeps
    the best of the fitted; otherwise the fit is the last iterate and halts on a
    fault, or with ``tolerance > 0`` when it did not improve (a fault raises after
    the loop)."""
    it, best_obj = state.iteration, state.best_objective
    improved = ok & ((it == 0) | (objective > best_obj + tolerance * jnp.abs(best_obj)))
    if keep_best:
        best = jax.tree_util.tree_map(
            lambda n, o: jnp.where(improved, n, o), fitted, state.best
        )
        return improved, ~improved, best
    late = (it > 0) & ~improved if tolerance > 0 else False
    return improved, late | ~ok, ()


@bounded_cache(64)
def step_for(
    vem: Any, layout: Whole | Shards, tolerance: float, defer: bool = False
) -> Callable[[Array, VEMState, tuple], tuple[VEMState, VEMInfo]]:
    """One EM iteration as a pure ``step(t, state, data)`` (``t`` is unused: the
    iteration is ``state.iteration``, so a resumed state goes on counting).
    ``data`` (the model's arrays and the E-step's) is read, never returned: a
    loop that carried it would copy the whole corpus into its output.

    With ``defer``, a model whose global sites are all conjugate
    (:func:`~jaxannot.inference.vem.m_step.conjugate_only`) gets a smaller step
    without the generic M-step's optax steps (most of the compiled loop, about
    1 s of compiling on 2 CPU cores for Dawid–Skene): an iteration whose closed
    form is not kept (where the full step would take the optax steps) stops the
    fit with the fault code :data:`~jaxannot.inference.vem.faults.DEFERRED` in its
    :class:`~jaxannot.inference.vem.steps.VEMInfo`, for the
    caller to redo the fit with the full step. Until then it is the full step's
    fit.

    Parameters
    ----------
    vem : VEM
        The algorithm whose step is built.
    layout : Whole or Shards
        The fit's layout.
    tolerance : float
        Relative improvement below which the fit stops.
    defer : bool
        Stop at an iteration whose conjugate closed form is not kept (the caller
        redoes the fit with the full step).

    Returns
    -------
    callable
        ``step(t, state, data) -> (state, info)``, ``info`` a
        :class:`~jaxannot.inference.vem.steps.VEMInfo`.
    """
    keep_best = bool(vem.estep.keep_best)
    draws = bool(getattr(vem.estep, "draws", True))

    def step(t, state: VEMState, data):
        del t
        dynamic, e_arrays = data
        values, phi, term_params = state.params, state.posteriors, state.term_params
        it = state.iteration
        kinds = conjugate_only(vem, layout, values, dynamic) if defer else {}

        def iterate(_):
            rng2 = sub = state.rng_key  # an E-step that draws nothing: no split
            if draws:
                rng2, sub = jax.random.split(state.rng_key)
            a, new_phi, objective = _e_step(
                vem, layout, e_arrays, sub, values, phi, term_params, dynamic
            )
            new_values, new_opt, new_tp, kept = _m_update(
                vem, layout, state, new_phi, dynamic, kinds
            )
            new_tp = dual_updates(vem.terms, new_tp, new_phi)
            code = fault_code(a, new_phi, objective, new_values)
            new_values = jax.tree.map(
                lambda old, new: jnp.where(keeps_old_values(code), old, new),
                values,
                new_values,
            )
            improved, halt, new_best = _progress(
                state,
                code == 0,
                objective,
                (new_values, new_phi, new_tp),
                keep_best,
                tolerance,
            )
            new_state = VEMState(
                rng2,
                new_values,
                new_phi,
                new_opt,
                new_tp,
                new_best,
                jnp.where(improved, objective, state.best_objective),
                halt,
                it + 1,
            )
            if kinds:  # not kept: the fit stops, for the caller to redo it
                new_state, code = _deferred(new_state, code, kept)
            return new_state, VEMInfo(-objective, code)

        def skip(_):
            info = VEMInfo(jnp.float32(jnp.nan), jnp.int32(0))
            return state._replace(iteration=it + 1), info

        return lax.cond(state.stopped, skip, iterate, None)

    return step


def _m_update(
    vem: Any,
    layout: Whole | Shards,
    state: VEMState,
    new_phi: Array,
    dynamic: tuple,
    kinds: dict,
) -> tuple:
    """The M-step of :func:`step_for`'s iteration after its E-step's ``new_phi``:
    with ``kinds`` (a deferring step), the conjugate closed form alone where it is
    kept; else the full M-step. Returns the new values, optimizer state and term
    parameters, and (with ``kinds``) whether every closed form was kept."""
    values, term_params = state.params, state.term_params
    if kinds:
        fixed, kept = conjugate_update(
            vem.declared, layout, values, new_phi, dynamic, kinds
        )
        new_values = {k: jnp.where(kept[k], fixed[k], v) for k, v in values.items()}
        return new_values, state.opt_state, term_params, all_kept(kept)
    new_values, new_opt, new_tp = m_step(
        vem,
        layout,
        ModelCall.join(vem.declared, layout.setup, dynamic).transforms(),
        values,
        state.opt_state,
        term_params,
        new_phi,
        dynamic,
    )
    return new_values, new_opt, new_tp, None


def _deferred(state: VEMState, code: Array, kept: Array) -> tuple[VEMState, Array]:
    """A deferring step's state and fault code: stopped with
    :data:`~jaxannot.inference.vem.faults.DEFERRED` where a closed form was not
    kept."""
    state = state._replace(stopped=jnp.where(kept, state.stopped, True))
    return state, jnp.where(kept, code, jnp.int32(DEFERRED))
