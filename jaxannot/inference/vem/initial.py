"""The state a :class:`~jaxannot.inference.vem.algorithm.VEM` fit starts from.

- :func:`start_values`: the default start (posteriors, then an M-step), compiled by
  :func:`start_values_jit`.
- :func:`initial_state`: the :class:`~jaxannot.inference.vem.steps.VEMState` a fit
  starts from, built in one compiled call of :func:`build_initial_state` (start,
  terms, optimizer, fold-in).
- :func:`fast_compile`: whether a fit's programs compile with XLA's cheaper
  options (:mod:`~jaxannot.runtime.compile_options`: small fits on CPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from numpyro import handlers
from numpyro.distributions.transforms import biject_to

from jaxannot.inference.vem.conjugate import (
    all_kept,
    conjugate_sites,
    conjugate_update,
)
from jaxannot.inference.vem.enumeration import first_value_of
from jaxannot.inference.vem.global_sites import maximize_expected, random_posteriors
from jaxannot.inference.vem.layout import Whole
from jaxannot.inference.vem.model_call import ModelCall
from jaxannot.inference.vem.start import num_uniforms, start_posteriors
from jaxannot.inference.vem.steps import (
    VEMState,
)
from jaxannot.inference.vem.summed import closed_form_on
from jaxannot.runtime.compile_options import jit_variants, use_fast
from jaxannot.runtime.progress import compile_lowered

if TYPE_CHECKING:
    from jaxannot.inference.vem.layout import Shards
    from jaxannot.types import Array, PRNGKey
__all__ = [
    "build_initial_state",
    "fast_compile",
    "initial_state",
    "start_values",
    "start_values_jit",
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
        return fixed, ~all_kept(kept)
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
    fold_in: bool = True,
    on_shapes: Callable[[VEMState], Any] | None = None,
) -> tuple[VEMState, Array]:
    """:func:`build_initial_state`, compiled once per algorithm, layouts and
    ``fold_in`` (cheaply where :func:`fast_compile` says so).

    Parameters
    ----------
    vem, whole, layout, keys, values, dyn_whole, dyn_layout, fold_in
        As :func:`build_initial_state` takes them.
    on_shapes : callable, optional
        Called with the state's shapes (a tree of ``jax.ShapeDtypeStruct``) once
        the start is traced and lowered, while it compiles on a thread (e.g. to
        trace and lower the EM loop meanwhile).

    Returns
    -------
    tuple of (VEMState, jax.Array)
        As :func:`build_initial_state` returns them.
    """
    jitted = _START_STATE[fast_compile(vem, whole, dyn_whole)]
    call = (vem, whole, layout, keys, values, dyn_whole, dyn_layout, fold_in)
    if on_shapes is not None:  # the start compiles while on_shapes runs
        shapes = jitted.eval_shape(*call)[0]  # the trace is kept for the call
        compiling = compile_lowered(jitted.lower(*call))
        on_shapes(shapes)
        compiling.join()
    return jitted(*call)


def build_initial_state(
    vem: Any,
    whole: Whole,
    layout: Whole | Shards,
    keys: PRNGKey,
    values: dict[str, Array] | None,
    dyn_whole: tuple,
    dyn_layout: tuple,
    fold_in: bool = True,
) -> tuple[VEMState, Array]:
    """The state a fit starts from: ``values`` (None: :func:`start_values`, a
    closed form's computed on ``layout``'s devices), each
    term's parameters, the optimizer's state and the fold-in posteriors (uniform
    ones without ``fold_in``).

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
    fold_in : bool
        The posteriors at ``values`` (the softmax of the log joint, a pass over
        every image); without it uniform ones, for a fit whose first E-step does
        not read them (an exact E-step: half an EM iteration of the mixture of
        unigrams' start, issue 46). Static.

    Returns
    -------
    tuple of (VEMState, jax.Array)
        The start, and whether to redo it from the values
        ``start_values_jit`` finds (:func:`start_values`'s second output).
    """
    s = whole.setup.structure
    init_key, loop_key = keys
    redo = jnp.bool_(False)
    if values is None and vem.closed_form is not None:
        values = _closed_form_start(vem, whole, layout, init_key, dyn_layout)
    elif values is None:
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
    if fold_in:
        a = layout.log_joint(vem.declared, values, dyn_layout)
        phi0 = layout.constrain(jax.nn.softmax(a, axis=-1))
    else:
        n, k = layout.setup.structure.num_images, s.num_values
        phi0 = layout.constrain(jnp.full((n, k), 1.0 / k, jnp.result_type(float)))
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
        jnp.int32(0),
    )
    return state, redo


def _closed_form_start(
    vem: Any, whole: Whole, layout: Whole | Shards, rng_key: PRNGKey, dynamic: tuple
) -> dict:
    """:func:`start_values` of a closed form on ``layout``: the same Dirichlet(1)
    rows of the real images (padded ones 0), drawn and summed where the layout
    keeps the images (on two devices, half of the 20M draws and of the M-step of
    issue 46's 1M images on each)."""
    s = whole.setup.structure
    phi = random_posteriors(rng_key, s.num_images, s.num_values)
    pad = layout.setup.structure.num_images - s.num_images
    phi = layout.constrain(jnp.pad(phi, ((0, pad), (0, 0))))
    values = closed_form_on(layout, vem.closed_form, phi, dynamic)
    return {k: jnp.asarray(v) for k, v in values.items()}


_START_STATE = jit_variants(build_initial_state, static_argnums=(0, 1, 2, 7))
