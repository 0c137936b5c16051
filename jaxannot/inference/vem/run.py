"""How a :class:`~jaxannot.inference.vem.algorithm.VEM` runs a fit.

- :class:`Runs`: :meth:`~Runs.run` (the compiled loop, from one start or the best of
  several) and :meth:`~Runs.run_restarts` (every start's fit, e.g. as arviz chains),
  the half of :class:`~jaxannot.inference.vem.algorithm.VEM` that drives fits.
- :func:`run_one`: one fit, from a start or a state, through
  :func:`~jaxannot.runtime.progress.run_steps`.
- :func:`final_objective`: the last finite objective of a fit, which picks the best
  restart.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

import jax

from jaxannot.inference.vem import heldout
from jaxannot.inference.vem.checks import (
    check_key,
    check_state,
    check_tolerance,
    model_errors,
)
from jaxannot.inference.vem.faults import DEFERRED, raise_fault
from jaxannot.inference.vem.fit import fast_compile, step_for
from jaxannot.inference.vem.fit_warnings import warn_empty
from jaxannot.inference.vem.layout import Whole
from jaxannot.inference.vem.steps import VEMResult, VEMState
from jaxannot.runtime import sharding
from jaxannot.runtime.progress import check_count, run_steps

if TYPE_CHECKING:
    from jaxannot.types import ArrayLike, PRNGKey

__all__ = ["EARLY_STOP", "Runs", "final_objective", "run_one", "warn_early_stop"]

#: A fit that keeps its best iterate and stops within this many EM iterations warns.
EARLY_STOP = 3


class Runs:
    """:meth:`run` and :meth:`run_restarts` of
    :class:`~jaxannot.inference.vem.algorithm.VEM` (a base class of it: the methods
    use its ``prepare_call``, ``init_prepared``, ``estep`` and ``laplace_draws``)."""

    def run(
        self,
        rng_key: jax.Array,
        num_steps: int,
        *args: Any,
        init_params: dict | None = None,
        init_state: VEMState | None = None,
        progress_bar: bool = True,
        tolerance: float = 0.0,
        restarts: int = 1,
        **kwargs: Any,
    ) -> VEMResult:
        """Run ``num_steps`` EM iterations (from ``restarts`` starts).

        Parameters
        ----------
        rng_key : PRNGKey
            Split into an initialization key and the loop key (E-step transforms
            that sweep in random order draw from the loop key).
        num_steps : int
            EM iterations (the maximum when ``tolerance > 0``), an int >= 1. Not a
            compiled shape: runs of any length share one compiled loop.
        *args, **kwargs
            The model's arguments. Arrays are traced (a new corpus of the same shape
            reuses the compiled fit); other values are static, and so are arrays
            the model reads by value (``int(np.max(x)) + 1``): given as NumPy
            arrays, keyed on their content (new values compile again).
        init_params : dict, optional
            Constrained starting values of the global sites, checked by name, shape
            and support (default: :meth:`init_params`, random soft assignments then
            an M-step).
        init_state : VEMState, optional
            Go on from this state (a previous result's ``state``) instead of
            starting anew; ``rng_key`` is then unused.
        progress_bar : bool
            A tqdm bar with the loss when the run lasts over ~2 s.
        tolerance : float
            Stop when the objective fails to improve by this relative amount
            (E-steps that keep their best iterate, as LapVar2, always stop then).
        restarts : int
            Fits from this many default starts (keys split from ``rng_key``, one
            compiled fit); the one with the highest final objective (the last
            finite ``-losses``) is returned. :meth:`run_restarts` returns them all.

        Returns
        -------
        VEMResult
            With ``state``, the final :class:`VEMState`.

        Raises
        ------
        TypeError
            ``num_steps`` or ``restarts`` not an int, ``rng_key`` not a PRNG key,
            ``tolerance`` not a number, a 0-d integer array where the model needs
            a static value (a shape or a plate size: pass a Python int).
        ValueError
            ``num_steps < 1``, ``tolerance`` negative or not finite, a plate of
            size 0 (no images, ``num_topics=0``), ``init_params`` with an unknown
            or missing site, of the wrong shape or off its support, a term with one
            label per image of another plate size, NaN in the data reaching the
            log joint, an observation outside its distribution's support (the
            images and sites are named).
        FloatingPointError
            A non-finite log joint, posterior, objective or global value arose
            mid-fit; the message names the EM iteration and the step.

        Warns
        -----
        EmptyComponentWarning
            The returned fit leaves a value of the local site with less than half
            an image of posterior mass (unless ``warn_empty=False``).
        """
        num_steps = check_count("num_steps", num_steps, 1, "EM iterations")
        restarts = check_count("restarts", restarts)
        tolerance = check_tolerance(tolerance)
        if init_state is None:
            check_key(rng_key)
        if restarts > 1 and (init_params is not None or init_state is not None):
            raise ValueError(
                "restarts > 1 draws its own starts; pass init_params or init_state, "
                "or restarts"
            )
        if init_params is not None and init_state is not None:
            raise ValueError("pass init_params (a new fit) or init_state, not both")
        opts = dict(progress_bar=progress_bar, tolerance=float(tolerance))
        vem, lam, path = self, getattr(self.estep, "lam", None), None
        held_out = heldout.HeldOutFits(self, run_one, num_steps, args, kwargs, opts)
        if lam == "auto":
            if init_state is not None:
                raise ValueError(
                    "lam='auto' chooses its weight for a new fit; to go on from "
                    "init_state use an E-step at the fit's weight: "
                    "estep.with_lam(result.lam)"
                )
            path = heldout.select_lam(held_out, rng_key)
            lam = path.chosen
            vem = copy.copy(self)
            vem.estep = self.estep.with_lam(lam)
        elif lam is not None and lam > 0 and self.estep.heldout_check:
            if init_state is None:
                path = heldout.check_lam(held_out, rng_key)
        if restarts == 1:
            result = run_one(
                vem, rng_key, num_steps, args, kwargs, init_params, opts, init_state
            )
        else:
            fits = [
                run_one(vem, key, num_steps, args, kwargs, None, opts)
                for key in jax.random.split(rng_key, restarts)
            ]
            result = max(fits, key=final_objective)
        if vem.estep.keep_best and init_state is None:
            warn_early_stop(result, num_steps, type(vem.estep).__name__)
        if self.warn_empty:
            warn_empty(result.posteriors)
        return result._replace(lam=lam, lam_path=path)

    def run_restarts(
        self,
        rng_key: jax.Array,
        restarts: int,
        num_steps: int,
        *args: Any,
        num_draws: int = 0,
        progress_bar: bool = True,
        tolerance: float = 0.0,
        **kwargs: Any,
    ) -> list[VEMResult]:
        """Every fit of :meth:`run` with ``restarts`` starts, e.g. as arviz chains.

        Parameters
        ----------
        rng_key : PRNGKey
            Split into one key per restart (as ``run(..., restarts=...)``) and, with
            ``num_draws``, the draws' key.
        restarts, num_steps : int
        *args, **kwargs, progress_bar, tolerance
            As :meth:`run`.
        num_draws : int
            With ``num_draws > 0``, each fit carries that many draws of the global
            posterior its local posteriors imply (:meth:`laplace_draws`), which
            :func:`~jaxannot.diagnostics.to_inference_data` turns into draws of
            each chain.

        Returns
        -------
        list of VEMResult
            One per restart, in key order; each warns
            (:class:`EmptyComponentWarning`) if it left a component empty.
        """
        restarts = check_count("restarts", restarts)
        num_steps = check_count("num_steps", num_steps, 1, "EM iterations")
        num_draws = check_count("num_draws", num_draws, 0)
        tolerance = check_tolerance(tolerance)
        check_key(rng_key)
        keys = jax.random.split(rng_key, restarts)
        opts = dict(progress_bar=progress_bar, tolerance=float(tolerance))
        fits = []
        for r, key in enumerate(keys):
            fit = run_one(self, key, num_steps, args, kwargs, None, opts)
            if self.warn_empty:
                warn_empty(fit.posteriors, f"restart {r}")
            if num_draws:  # a key apart from the two the fit split its key into
                key = jax.random.fold_in(key, 1)
                fit = self.laplace_draws(key, fit, num_draws, *args, **kwargs)
            fits.append(fit)
        return fits


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
    ``init_state``, ``num_steps`` EM iterations of the compiled step; a fault
    raises with the iteration and the step that met it. The step is
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
    if init_state is None:
        state = vem.init_prepared(
            setup, layout, rng_key, init_params, dynamic, placed, (args, kwargs)
        )
    else:
        check_state(setup.structure, init_state)
        state = layout.place(init_state, vem.estep.arrays)[0]
    run = functools.partial(
        run_steps,
        data=(placed, vem.estep.arrays),
        progress_bar=opts["progress_bar"],
        desc="VEM",
        fast_compile=fast_compile(vem, Whole(setup), dynamic),
    )
    with model_errors(vem.plate, args, kwargs):
        start, step = state, step_for(vem, layout, opts["tolerance"], True)
        state, losses = run(step, start, num_steps)
        fault = jax.device_get(state.fault)
        if fault[0] == DEFERRED:  # a closed form not kept: the full step's fit
            step = step_for(vem, layout, opts["tolerance"])
            state, losses = run(step, start, num_steps)
            fault = jax.device_get(state.fault)
    if fault[0]:
        at = int(fault[1]) - (int(state.iteration) - num_steps)
        objective = -losses[at] if 0 <= at < num_steps else None
        raise_fault(fault, state.params, args, kwargs, objective, vem)
    if vem.estep.keep_best:
        values, phi, term_params = state.best
    else:
        values, phi, term_params = state.params, state.posteriors, state.term_params
    params = jax.tree.map(sharding.gather, dict(values))  # whole on every process
    params["terms"] = term_params
    return VEMResult(params, layout.real(phi), losses, state=state)


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


def warn_early_stop(result: VEMResult, num_steps: int, name: str) -> bool:
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
        stacklevel=3,
    )
    return True
