"""The compiled pieces of a :class:`~jaxannot.inference.vem.algorithm.VEM` fit.

- :func:`start_values`: the default start (posteriors, then an M-step).
- :func:`initial_state`: the :class:`~jaxannot.inference.vem.steps.VEMState` a fit
  starts from, built in one compiled call of :func:`start_state` (start, terms,
  optimizer, fold-in).
- :func:`step_for`: one EM iteration as a pure ``step(t, state, data)``, built once
  per static configuration: :class:`VEM` objects that compare equal (same model,
  E-step configuration, optimizer, M-step and terms) share it and its compiled loop,
  so a fresh ``VEM`` for each fit compiles nothing new.
- :func:`one_update`: one compiled step (:meth:`VEM.update`).
- :func:`fast_compile`: whether a fit's programs compile with XLA's cheaper
  options (:mod:`~jaxannot.runtime.compile_options`: small fits on CPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax import lax
from numpyro import handlers
from numpyro.distributions.transforms import biject_to

from jaxannot.inference.vem.conjugate import conjugate_sites, conjugate_update
from jaxannot.inference.vem.enumeration import first_value_of
from jaxannot.inference.vem.faults import (
    DEFERRED,
    fault_code,
    keeps_old_values,
    no_fault,
    record_fault,
)
from jaxannot.inference.vem.global_sites import maximize_expected, random_posteriors
from jaxannot.inference.vem.layout import Whole
from jaxannot.inference.vem.m_step import conjugate_only, m_step
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.inference.vem.start import num_uniforms, start_posteriors
from jaxannot.inference.vem.steps import (
    VEMState,
    dual_updates,
    refine_for_terms,
    terms_value,
)
from jaxannot.runtime.compile_options import jit_variants, use_fast
from jaxannot.runtime.programs import bounded_cache

if TYPE_CHECKING:
    from jaxannot.inference.vem.layout import Shards
    from jaxannot.types import Array, PRNGKey

__all__ = [
    "fast_compile",
    "initial_state",
    "one_update",
    "start_state",
    "start_values",
    "start_values_jit",
    "step_for",
]


def start_values(
    vem: Any, whole: Whole, rng_key: PRNGKey, dynamic: tuple, lbfgs: bool = False
) -> tuple[dict, Array]:
    """The default start's global values (:meth:`VEM.init_params`) and whether they
    are to be found again with ``lbfgs=True`` (a scalar bool).

    Without a closed form, the posteriors are read from the data
    (:func:`~jaxannot.inference.vem.start.start_posteriors`) and the M-step starts
    from numpyro's ``init_to_uniform`` (uniform on ``[-2, 2]`` in unconstrained
    coordinates), one uniform draw for all sites, the posteriors' noise and
    k-means: each draw of a random-number generator is a program of its own inlined
    in the compiled start (slow to compile on CPU), and numpyro's draws one (and a
    key split) per site. Where every global site is conjugate (a Dirichlet or Beta
    prior, :mod:`~jaxannot.inference.vem.conjugate`), the M-step is their closed
    form, to be redone by L-BFGS only where it was not kept (``lbfgs=True``: the
    L-BFGS is then compiled, in its own program); otherwise it is L-BFGS.

    Parameters
    ----------
    vem : VEM
        The algorithm.
    whole : Whole
        The one-device layout the start runs on.
    rng_key : PRNGKey
        The start's key.
    dynamic : tuple
        The model's array arguments.
    lbfgs : bool
        L-BFGS for the M-step even where every site is conjugate (static).

    Returns
    -------
    tuple of (dict, jax.Array)
        Site -> start value, and whether to redo the start with ``lbfgs=True``.
    """
    s = whole.setup.structure
    if vem.closed_form is not None:
        phi = random_posteriors(rng_key, s.num_images, s.num_values)
        args, kwargs = whole.join(dynamic)
        values = vem.closed_form(phi, *args, **kwargs)
        return {k: jnp.asarray(v) for k, v in values.items()}, jnp.bool_(False)
    # enough for every global: no support's unconstrained size exceeds its own
    size = sum(math.prod(shape) for shape in s.global_shapes)
    more = num_uniforms(s.num_images, s.num_values)
    uniforms = jax.random.uniform(rng_key, (size + more,))
    start = _uniform_start(vem, whole, 4.0 * uniforms[:size] - 2.0, dynamic)
    phi = start_posteriors(vem, whole, uniforms[size:], start, dynamic)
    kinds = conjugate_sites(vem, whole, dynamic)
    if not lbfgs and len(kinds) == len(start):
        fixed, kept = conjugate_update(vem.declared, whole, start, phi, dynamic, kinds)
        return fixed, ~kept
    values = maximize_expected(vem.declared, whole, vem.init_steps, start, phi, dynamic)
    return values, jnp.bool_(False)


def _uniform_start(vem, whole: Whole, points, dynamic) -> dict:
    """The global values at ``points`` (unconstrained coordinates, consumed site
    by site in the model's order); a ``param`` site at its declared value. Another
    discrete site of the item plate (enumerated with the local one) takes the first
    value of its support, a real-valued one 0: the globals' start does not read
    them."""
    substitutions = {
        k: jnp.asarray(v)
        for k, v in vem.declared.small_substitutions(whole.setup).items()
    }
    globals_ = whole.setup.structure.globals_
    used = 0

    def draw(msg):
        nonlocal used
        if (
            msg["type"] != "sample"
            or msg["is_observed"]
            or msg["name"] in substitutions
        ):
            return None
        sample_shape = tuple(msg["kwargs"].get("sample_shape") or ())
        if msg["name"] not in globals_:
            return first_value_of(msg["fn"], sample_shape + msg["fn"].shape())
        transform = biject_to(msg["fn"].support)
        shape = transform.inverse_shape(sample_shape + msg["fn"].shape())
        size = math.prod(shape)
        used += size
        return transform(points[used - size : used].reshape(shape))

    args, kwargs = whole.join(dynamic)
    model = handlers.substitute(vem.model, substitute_fn=draw)
    traced = handlers.trace(handlers.substitute(model, data=substitutions))
    trace = traced.get_trace(*args, **kwargs)
    return {k: trace[k]["value"] for k in whole.setup.structure.globals_}


_START_VALUES = jit_variants(start_values, static_argnums=(0, 1, 4))


def fast_compile(vem: Any, whole: Whole, dynamic: tuple) -> bool:
    """Whether the fit's programs compile with XLA's cheaper options:
    ``vem.compile`` by :func:`~jaxannot.runtime.compile_options.use_fast`, on the
    model's arrays and the posteriors, on the fit's backend (static: read from
    shapes).

    Parameters
    ----------
    vem : VEM
        The algorithm (its ``compile`` and ``devices``).
    whole : Whole
        The one-device layout.
    dynamic : tuple
        The model's array arguments.

    Returns
    -------
    bool
    """
    s = whole.setup.structure
    platform = vem.devices[0].platform if vem.devices else jax.default_backend()
    posteriors = jax.ShapeDtypeStruct((s.num_images, s.num_values), jnp.float32)
    arrays = [*jax.tree.leaves(dynamic), posteriors]
    return use_fast(vem.compile, arrays, platform)


def start_values_jit(
    vem: Any, whole: Whole, rng_key: PRNGKey, dynamic: tuple, lbfgs: bool = False
) -> dict:
    """:func:`start_values`, compiled once per algorithm and set-up (cheaply where
    :func:`fast_compile` says so; redone by L-BFGS where the conjugate sites'
    closed form was not kept).

    Parameters
    ----------
    vem, whole, rng_key, dynamic, lbfgs
        As :func:`start_values` takes them.

    Returns
    -------
    dict
        Site -> start value.
    """
    jitted = _START_VALUES[fast_compile(vem, whole, dynamic)]
    values, redo = jitted(vem, whole, rng_key, dynamic, lbfgs)
    if redo:
        values, _ = jitted(vem, whole, rng_key, dynamic, True)
    return values


def initial_state(
    vem: Any,
    whole: Whole,
    layout: Whole | Shards,
    keys: PRNGKey,
    values: dict[str, Array] | None,
    dyn_whole: tuple,
    dyn_layout: tuple,
) -> VEMState:
    """:func:`start_state`, compiled once per algorithm and layouts (cheaply where
    :func:`fast_compile` says so).

    Parameters
    ----------
    vem, whole, layout, keys, values, dyn_whole, dyn_layout
        As :func:`start_state` takes them.

    Returns
    -------
    tuple of (VEMState, jax.Array)
        As :func:`start_state` returns them.
    """
    jitted = _START_STATE[fast_compile(vem, whole, dyn_whole)]
    return jitted(vem, whole, layout, keys, values, dyn_whole, dyn_layout)


def start_state(
    vem: Any,
    whole: Whole,
    layout: Whole | Shards,
    keys: PRNGKey,
    values: dict[str, Array] | None,
    dyn_whole: tuple,
    dyn_layout: tuple,
) -> VEMState:
    """The state a fit starts from: ``values`` (None: :func:`start_values`), each
    term's parameters, the optimizer's state and the fold-in posteriors.

    The keys are split from the fit's key by the caller, outside: a key split is a
    program of its own inlined in every compiled start (a threefry loop, about a
    tenth of a second of lowering and compiling on 2 CPU cores, for every shape of
    data), where the split on its own is compiled once per process.

    Parameters
    ----------
    vem : VEM
        The algorithm (static).
    whole : Whole
        The one-device layout (static).
    layout : Whole or Shards
        The fit's layout (static).
    keys : PRNGKey [2]
        ``jax.random.split`` of the fit's key: the key of the start (and of the
        terms' parameters), then the loop's.
    values : dict or None
        Site -> start value.
    dyn_whole, dyn_layout : tuple
        The model's array arguments, whole and placed for ``layout``.

    Returns
    -------
    tuple of (VEMState, jax.Array)
        The start, and whether to redo it from the values
        ``start_values_jit`` finds (:func:`start_values`'s second output).
    """
    s = whole.setup.structure
    init_key, loop_key = keys
    redo = jnp.bool_(False)
    if values is None:
        values, redo = start_values(vem, whole, init_key, dyn_whole)
    term_params = ()
    if vem.terms:
        term_keys = jax.random.split(init_key, len(vem.terms))
        term_params = tuple(
            t.init(k, s.num_values) for t, k in zip(vem.terms, term_keys, strict=True)
        )
    if vem.closed_form is not None:
        opt_state = vem.optimizer.init(term_params)
    else:
        transforms = ModelCall.join(vem.declared, layout.setup, dyn_layout).transforms()
        unconstrained = {k: transforms[k].inv(v) for k, v in values.items()}
        opt_state = vem.optimizer.init((unconstrained, term_params))
    a = layout.log_joint(vem.declared, values, dyn_layout)
    phi0 = layout.constrain(jax.nn.softmax(a, axis=-1))
    best = (values, phi0, term_params) if vem.estep.keep_best else ()
    state = VEMState(
        loop_key,
        values,
        phi0,
        opt_state,
        term_params,
        best,
        jnp.float32(-jnp.inf),
        jnp.bool_(False),
        no_fault(),
        jnp.int32(0),
    )
    return state, redo


_START_STATE = jit_variants(start_state, static_argnums=(0, 1, 2))


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
) -> Callable[[Array, VEMState, tuple], tuple[VEMState, Array]]:
    """One EM iteration as a pure ``step(t, state, data)`` (``t`` is unused: the
    iteration is ``state.iteration``, so a resumed state goes on counting).
    ``data`` (the model's arrays and the E-step's) is read, never returned: a
    loop that carried it would copy the whole corpus into its output.

    With ``defer``, a model whose global sites are all conjugate
    (:func:`~jaxannot.inference.vem.m_step.conjugate_only`) gets a smaller step
    without the generic M-step's optax steps (most of the compiled loop, about
    1 s of compiling on 2 CPU cores for Dawid–Skene): an iteration whose closed
    form is not kept (where the full step would take the optax steps) stops the
    fit with the code :data:`~jaxannot.inference.vem.faults.DEFERRED`, for the
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
        ``step(t, state, data) -> (state, loss)``.
    """
    setup = layout.setup
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
            if kinds:  # the closed form alone (kept or not: below)
                fixed, kept = conjugate_update(
                    vem.declared, layout, values, new_phi, dynamic, kinds
                )
                new_values = {
                    k: jnp.where(kept, fixed[k], v) for k, v in values.items()
                }
                new_opt, new_tp = state.opt_state, term_params
            else:
                new_values, new_opt, new_tp = m_step(
                    vem,
                    layout,
                    ModelCall.join(vem.declared, setup, dynamic).transforms(),
                    values,
                    state.opt_state,
                    term_params,
                    new_phi,
                    dynamic,
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
                record_fault(state.fault, code, it),
                it + 1,
            )
            if kinds:  # not kept: the fit stops, for the caller to redo it
                new_state = new_state._replace(
                    stopped=jnp.where(kept, new_state.stopped, True),
                    fault=jnp.where(
                        kept, new_state.fault, jnp.stack([jnp.int32(DEFERRED), it])
                    ),
                )
            return new_state, -objective

        def skip(_):
            return state._replace(iteration=it + 1), jnp.float32(jnp.nan)

        return lax.cond(state.stopped, skip, iterate, None)

    return step


def one_update(
    step: Callable[[Array, VEMState, tuple], tuple[VEMState, Array]],
    state: VEMState,
    data: tuple,
    fast: bool = False,
) -> tuple[VEMState, Array]:
    """``step`` once, compiled: ``(state, loss)``.

    Parameters
    ----------
    step : callable
        From :func:`step_for` (static).
    state : VEMState
        The state to go on from.
    data : tuple
        The model's and the E-step's arrays.
    fast : bool
        Compile with XLA's cheaper options (:func:`fast_compile`).

    Returns
    -------
    tuple of (VEMState, jax.Array)
        The new state and the scalar loss.
    """
    return _ONE_UPDATE[fast](step, state, data)


def _one_update(step, state, data):
    return step(state.iteration, state, data)


_ONE_UPDATE = jit_variants(_one_update, static_argnums=0)
