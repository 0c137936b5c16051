"""How a :class:`~jaxannot.inference.vem.algorithm.VEM` runs a fit.

- :func:`run` (the compiled loop, from one start or the best of several) and
  :func:`run_restarts` (every start's fit, e.g. as arviz chains): what
  :meth:`VEM.run <jaxannot.inference.vem.algorithm.VEM.run>` and
  :meth:`VEM.run_restarts <jaxannot.inference.vem.algorithm.VEM.run_restarts>`
  delegate to, reading only the VEM's public attributes and methods.
- :func:`start_state`: the state a fit starts from (``VEM.init`` /
  ``VEM.init_prepared``).
- :func:`run_one`: one fit, from a start or a state, through
  :func:`~jaxannot.runtime.progress.run_steps`.
- :func:`update`: one iteration in :func:`run_one`'s compiled loop (``VEM.update``).
- :func:`final_objective`: the last finite objective of a fit, which picks the best
  restart.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import jax

from jaxannot.inference.vem import heldout
from jaxannot.inference.vem.checks import (
    check_inputs,
    check_key,
    check_state,
    check_tolerance,
    checked_start,
    model_errors,
)
from jaxannot.inference.vem.faults import DEFERRED, first_fault, raise_fault
from jaxannot.inference.vem.fit import step_for
from jaxannot.inference.vem.fit_warnings import warn_empty
from jaxannot.inference.vem.initial import fast_compile, initial_state, start_values_jit
from jaxannot.inference.vem.layout import Whole
from jaxannot.inference.vem.steps import ExactEStep, VEMResult, VEMState
from jaxannot.runtime import sharding
from jaxannot.runtime.progress import (
    check_count,
    compile_in_background,
    run_step,
    run_steps,
)

if TYPE_CHECKING:
    from jaxannot.inference.vem.layout import Shards
    from jaxannot.inference.vem.log_joint import Setup
    from jaxannot.types import ArrayLike, PRNGKey

__all__ = [
    "EARLY_STOP",
    "final_objective",
    "run",
    "run_one",
    "run_restarts",
    "start_state",
    "update",
    "warn_early_stop",
]

#: A fit that keeps its best iterate and stops within this many EM iterations warns.
EARLY_STOP = 3


def _run_opts(
    num_steps: int, restarts: int, progress_bar: bool, tolerance: float
) -> tuple[int, int, dict]:
    """``num_steps`` and ``restarts`` checked, and the options :func:`run_one` takes
    (what :func:`run` and :func:`run_restarts` check alike)."""
    num_steps = check_count("num_steps", num_steps, 1, "EM iterations")
    restarts = check_count("restarts", restarts)
    tolerance = float(check_tolerance(tolerance))
    return num_steps, restarts, dict(progress_bar=progress_bar, tolerance=tolerance)


def run(
    vem: Any,
    rng_key: jax.Array,
    num_steps: int,
    args: tuple,
    kwargs: dict,
    *,
    init_params: dict | None = None,
    init_state: VEMState | None = None,
    progress_bar: bool = True,
    tolerance: float = 0.0,
    restarts: int = 1,
) -> VEMResult:
    """:meth:`VEM.run <jaxannot.inference.vem.algorithm.VEM.run>`: ``num_steps``
    EM iterations (from ``restarts`` starts), the weight of a graph E-step chosen
    or checked first (:mod:`~jaxannot.inference.vem.heldout`).

    Parameters
    ----------
    vem : VEM
        The algorithm (its ``estep``, ``warn_empty`` and the ``prepare_call`` /
        ``init_prepared`` :func:`run_one` uses).
    rng_key, num_steps, init_params, init_state, progress_bar, tolerance, restarts
        As :meth:`VEM.run <jaxannot.inference.vem.algorithm.VEM.run>` takes them.
    args, kwargs : tuple, dict
        The model's positional and keyword arguments.

    Returns
    -------
    VEMResult
        The fit, with ``lam`` and ``lam_path``.
    """
    num_steps, restarts, opts = _run_opts(num_steps, restarts, progress_bar, tolerance)
    if init_state is None:
        check_key(rng_key)
    if restarts > 1 and (init_params is not None or init_state is not None):
        raise ValueError(
            "restarts > 1 draws its own starts; pass init_params or init_state, "
            "or restarts"
        )
    if init_params is not None and init_state is not None:
        raise ValueError("pass init_params (a new fit) or init_state, not both")
    fitted, lam, path = vem, getattr(vem.estep, "lam", None), None
    held_out = heldout.HeldOutFits(vem, run_one, num_steps, args, kwargs, opts)
    if lam == "auto":
        if init_state is not None:
            raise ValueError(
                "lam='auto' chooses its weight for a new fit; to go on from "
                "init_state use an E-step at the fit's weight: "
                "estep.with_lam(result.lam)"
            )
        path = heldout.select_lam(held_out, rng_key)
        lam = path.chosen
        fitted = copy.copy(vem)
        fitted.estep = vem.estep.with_lam(lam)
    elif lam is not None and lam > 0 and vem.estep.heldout_check:
        if init_state is None:
            path = heldout.check_lam(held_out, rng_key)
    if restarts == 1:
        result = run_one(
            fitted, rng_key, num_steps, args, kwargs, init_params, opts, init_state
        )
    else:
        fits = [
            run_one(fitted, key, num_steps, args, kwargs, None, opts)
            for key in jax.random.split(rng_key, restarts)
        ]
        result = max(fits, key=final_objective)
    if fitted.estep.keep_best and init_state is None:
        warn_early_stop(result, num_steps, type(fitted.estep).__name__, stacklevel=4)
    if vem.warn_empty:
        warn_empty(result.posteriors, stacklevel=4)
    return result._replace(lam=lam, lam_path=path)


def run_restarts(
    vem: Any,
    rng_key: jax.Array,
    restarts: int,
    num_steps: int,
    args: tuple,
    kwargs: dict,
    *,
    num_draws: int = 0,
    progress_bar: bool = True,
    tolerance: float = 0.0,
) -> list[VEMResult]:
    """:meth:`VEM.run_restarts <jaxannot.inference.vem.algorithm.VEM.run_restarts>`:
    every fit of :func:`run` with ``restarts`` starts, each with ``num_draws``
    Laplace draws (``vem.laplace_draws``) where ``num_draws > 0``.

    Parameters
    ----------
    vem : VEM
        The algorithm.
    rng_key, restarts, num_steps, num_draws, progress_bar, tolerance
        As :meth:`VEM.run_restarts
        <jaxannot.inference.vem.algorithm.VEM.run_restarts>` takes them.
    args, kwargs : tuple, dict
        The model's positional and keyword arguments.

    Returns
    -------
    list of VEMResult
        One per restart, in key order.
    """
    num_steps, restarts, opts = _run_opts(num_steps, restarts, progress_bar, tolerance)
    num_draws = check_count("num_draws", num_draws, 0)
    check_key(rng_key)
    keys = jax.random.split(rng_key, restarts)
    fits = []
    for r, key in enumerate(keys):
        fit = run_one(vem, key, num_steps, args, kwargs, None, opts)
        if vem.warn_empty:
            warn_empty(fit.posteriors, f"restart {r}", stacklevel=4)
        if num_draws:  # a key apart from the two the fit split its key into
            key = jax.random.fold_in(key, 1)
            fit = vem.laplace_draws(key, fit, num_draws, *args, **kwargs)
        fits.append(fit)
    return fits


def start_state(
    vem: Any,
    setup: Setup,
    layout: Whole | Shards,
    rng_key: PRNGKey,
    init_params: Mapping[str, ArrayLike] | None,
    dynamic: tuple,
    placed: tuple,
    args_kw: tuple[tuple, dict],
    fold_in: bool = True,
    on_shapes: Callable[[VEMState], Any] | None = None,
) -> VEMState:
    """:meth:`VEM.init_prepared
    <jaxannot.inference.vem.algorithm.VEM.init_prepared>`: the state a fit starts
    from, on a call already prepared (``vem.prepare_call``): ``init_params``
    checked, or the default start, redone by L-BFGS where the conjugate sites'
    closed form was not kept.

    Parameters
    ----------
    vem : VEM
        The algorithm.
    setup, layout, rng_key, init_params, dynamic, placed, args_kw
        As :meth:`VEM.init_prepared
        <jaxannot.inference.vem.algorithm.VEM.init_prepared>` takes them.
    fold_in : bool
        The start's posteriors folded in at its values; uniform ones otherwise,
        for a fit whose first E-step does not read them
        (:func:`~jaxannot.inference.vem.initial.build_initial_state`).
    on_shapes : callable, optional
        Called with the start's shapes before it compiles
        (:func:`~jaxannot.inference.vem.initial.initial_state`).

    Returns
    -------
    VEMState
        The start, placed for the layout.
    """
    values = None
    if init_params is not None:
        values = checked_start(vem, setup, init_params, args_kw)
    check_inputs(setup.structure, vem.plate, values, vem.terms)
    # split here, not in the compiled start: compiled once for every shape
    keys = jax.random.split(rng_key)
    with model_errors(vem.plate, *args_kw):
        whole, default = Whole(setup), values is None
        start = (whole, layout, keys)
        state, redo = initial_state(
            vem, *start, values, dynamic, placed, fold_in, on_shapes
        )
        if default and redo:  # the conjugate start was not kept: L-BFGS's
            init_key = keys[0]
            values = start_values_jit(vem, whole, init_key, dynamic, True)
            state, _ = initial_state(vem, *start, values, dynamic, placed, fold_in)
    return layout.place(state, vem.estep.arrays)[0]


def run_one(
    vem: Any,
    rng_key: PRNGKey,
    num_steps: int,
    args: tuple,
    kwargs: dict,
    init_params: Mapping[str, ArrayLike] | None,
    opts: dict,
    init_state: VEMState | None = None,
) -> VEMResult:
    """One fit of ``vem.run``: from ``init_params`` (None: the default start) or
    ``init_state``, ``num_steps`` EM iterations of the compiled step; a fault (the
    first nonzero code of the iterations' recorded
    :class:`~jaxannot.inference.vem.steps.VEMInfo`) raises with the iteration and
    the step that met it. The step is
    :func:`~jaxannot.inference.vem.fit.step_for`'s with ``defer``: where every
    global site is conjugate, the closed form alone, and where it stopped on a
    closed form not kept, the fit is run again from its start with the full step.

    Parameters
    ----------
    vem : VEM
        The algorithm.
    rng_key : PRNGKey
        The fit's key.
    num_steps : int
        EM iterations.
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.
    init_params : Mapping or None
        Site -> start value.
    opts : dict
        ``tolerance``, ``progress_bar`` and the other run options.
    init_state : VEMState, optional
        A state to resume.

    Returns
    -------
    VEMResult
        The fit.
    """
    setup, dynamic, layout, placed = vem.prepare_call(args, kwargs)
    data, fast = (placed, vem.estep.arrays), fast_compile(vem, Whole(setup), dynamic)
    step, compiling = step_for(vem, layout, opts["tolerance"], True), []
    if init_state is None:
        # the exact E-step never reads the posteriors it starts from: the start
        # skips their fold-in (a pass of the log joint over every image)
        fold_in = type(vem.estep) is not ExactEStep
        call = (dynamic, placed, (args, kwargs), fold_in)
        on_shapes = None
        if isinstance(layout, Whole):  # the loop compiles while the start does

            def on_shapes(shapes):
                compiling.append(compile_in_background(step, shapes, data, fast))

        state = start_state(vem, setup, layout, rng_key, init_params, *call, on_shapes)
    else:
        check_state(setup.structure, init_state)
        state = layout.place(init_state, vem.estep.arrays)[0]
    for thread in compiling:
        thread.join()
    run = functools.partial(
        run_steps,
        data=data,
        progress_bar=opts["progress_bar"],
        desc="VEM",
        fast_compile=fast,
    )
    with model_errors(vem.plate, args, kwargs):
        start = state
        state, info = run(step, start, num_steps)
        first = int(start.iteration)  # a resumed fit goes on counting
        code, t, at = first_fault(info.fault, first)
        if code == DEFERRED:  # a closed form not kept: the full step's fit
            step = step_for(vem, layout, opts["tolerance"])
            state, info = run(step, start, num_steps)
            code, t, at = first_fault(info.fault, first)
    losses = info.loss
    if code:
        raise_fault((code, t), state.params, args, kwargs, -losses[at], vem)
    if vem.estep.keep_best:
        values, phi, term_params = state.best
    else:
        values, phi, term_params = state.params, state.posteriors, state.term_params
    params = jax.tree.map(sharding.gather, dict(values))  # whole on every process
    params["terms"] = term_params
    return VEMResult(params, layout.real(phi), losses, state=state)


def update(
    vem: Any, state: VEMState, args: tuple, kwargs: dict
) -> tuple[VEMState, np.float32]:
    """:meth:`VEM.update <jaxannot.inference.vem.algorithm.VEM.update>`: one EM
    iteration through :func:`~jaxannot.runtime.progress.run_step`, in the compiled
    loop of :func:`run_one` at ``tolerance=0`` (its step that defers to the full
    step where a conjugate closed form is not kept, then that one), so an update
    after such a run, or a run after updates, compiles no step again.

    Parameters
    ----------
    vem : VEM
        The algorithm.
    state : VEMState
        The state to go on from.
    args : tuple
        The model's positional arguments.
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    tuple of (VEMState, np.float32)
        The new state and the iteration's loss (NaN once the fit has stopped).

    Raises
    ------
    FloatingPointError, ValueError
        The iteration met a non-finite quantity (as :func:`run`).
    """
    setup, dynamic, layout, placed = vem.prepare_call(args, kwargs)
    check_state(setup.structure, state)
    state, e_arrays = layout.place(state, vem.estep.arrays)
    one = functools.partial(
        run_step,
        data=(placed, e_arrays),
        fast_compile=fast_compile(vem, Whole(setup), dynamic),
    )
    new, info = one(step_for(vem, layout, 0.0, True), state)
    if info.fault == DEFERRED:  # a closed form not kept: the full step
        new, info = one(step_for(vem, layout, 0.0), state)
    code = int(info.fault)
    if code:
        t = int(new.iteration) - 1
        raise_fault((code, t), new.params, args, kwargs, -float(info.loss))
    return new, info.loss


def final_objective(result: VEMResult) -> float:
    """The last finite objective of a fit (``-inf`` if none).

    Parameters
    ----------
    result : VEMResult
        A fit.

    Returns
    -------
    float
        The objective.
    """
    objective = -np.asarray(result.losses, np.float64)
    finite = objective[np.isfinite(objective)]
    return float(finite[-1]) if finite.size else -np.inf


def warn_early_stop(
    result: VEMResult, num_steps: int, name: str, stacklevel: int = 3
) -> bool:
    """Warn (``UserWarning``) when a fit that keeps its best iterate (LapVar2)
    stopped within ``EARLY_STOP`` EM iterations of ``num_steps > EARLY_STOP``: it
    then sits near its start (issue 43: ARI 0.02 to 0.04 where the same fit run on
    reaches 0.35), a state the collapse check does not see. Returns whether it
    warned.

    Parameters
    ----------
    result : VEMResult
        A fit.
    num_steps : int
        The EM iterations asked for.
    name : str
        The E-step's name, for the message.
    stacklevel : int
        ``warnings.warn``'s stacklevel, pointing at the user's call.

    Returns
    -------
    bool
        Whether it warned.
    """
    ran = int(np.isfinite(np.asarray(result.losses)).sum())
    if num_steps <= EARLY_STOP or ran > EARLY_STOP:
        return False
    warnings.warn(
        f"{name} stopped after {ran} EM iterations (its objective fell): the fit is "
        "near its random start. Use LapVar1, lam='auto' or a smaller lam, or "
        "another rng_key",
        UserWarning,
        stacklevel=stacklevel,
    )
    return True
