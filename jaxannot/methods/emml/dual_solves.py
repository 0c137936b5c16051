"""EMML's dual solved (:mod:`.annotators`), each solver's outcome as
``(state, converged, info)``.

:func:`solve_mixtures` solves the dual over per-VRep mixtures (the exact solver of
:mod:`.exact`) or takes its diagonal-kernel optimum, :func:`solve_working_set` runs
Algorithm 1 (:mod:`.working_set`); :func:`warn_unconverged` warns when a solve
stopped before its KKT conditions held.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

import jax.numpy as jnp

from jaxannot.methods.emml.exact import (
    ExactState,
    fit_emml_exact,
    mixture_state,
    uncoupled_mixtures,
)
from jaxannot.methods.emml.structured_output import StructuredData
from jaxannot.methods.emml.working_set import EMMLState, WorkingSetSettings, fit_emml

if TYPE_CHECKING:
    from jaxannot.types import PRNGKey

_log = logging.getLogger("jaxannot")


def warn_unconverged(solver: str, tolerance: float, solver_info: dict) -> None:
    """Log on the ``"jaxannot"`` logger that a solver stopped before convergence.

    Parameters
    ----------
    solver : str
        The solver's name.
    tolerance : float
        The KKT tolerance it did not reach.
    solver_info : dict
        Its info (logged without the objective's trace).
    """
    _log.warning(
        "emml (%s solver) stopped before convergence: the KKT conditions do not "
        "hold to tolerance %g (info: %s); the scores come from an inexact dual",
        solver,
        tolerance,
        {k: x for k, x in solver_info.items() if k != "objective_trace"},
    )


def solve_mixtures(
    data: StructuredData, solver: str, c: float, tolerance: float, sweeps_cap: int
) -> tuple[ExactState, bool, dict]:
    """The dual over per-VRep mixtures: solved (``"exact"``) or at its
    diagonal-kernel optimum (``"none"``); ``(state, converged, info)``.

    Parameters
    ----------
    data : StructuredData
        The VReps' kernel and word vectors.
    solver : str
        ``"exact"`` or ``"none"``.
    c : float
        The slack penalty.
    tolerance : float
        The KKT tolerance.
    sweeps_cap : int
        The exact solver's most sweeps.

    Returns
    -------
    tuple of (ExactState, bool, dict)
        The dual's state, whether its KKT conditions hold to ``tolerance``, and
        the info (passes, violation, duality gap, the objective's trace, ...).
    """
    if solver == "exact":
        state, trace = fit_emml_exact(data, c, tolerance, max_sweeps=sweeps_cap)
    else:
        u = uncoupled_mixtures(data.words, c, jnp.diag(data.kernel))
        state, trace = mixture_state(data, u, c, tolerance), np.zeros(0)
    sweeps = int(state.sweeps)
    passes = int(state.gradient_steps) + sweeps
    wrong = np.asarray(data.words) <= 0
    support = (np.asarray(state.mixtures) > 0) & wrong
    info = {
        "gradient_steps": int(state.gradient_steps),
        "sweeps": sweeps,
        "max_violation": float(state.max_violation),
        "duality_gap": float(state.duality_gap),
        "wrong_words_pushed_down_mean": float(support.sum(1).mean()),
        "wrong_words_pushed_down_max": int(support.sum(1).max()),
        "objective_trace": [float(o) for o in np.asarray(trace)[:passes]],
    }
    return state, bool(state.converged), info


def solve_working_set(
    data: StructuredData,
    c: float,
    tolerance: float,
    tie_key: PRNGKey,
    settings: WorkingSetSettings,
) -> tuple[EMMLState, bool, dict]:
    """Algorithm 1 (working sets); ``(state, converged, info)``.

    Parameters
    ----------
    data : StructuredData
        The VReps' kernel and word vectors.
    c : float
        The slack penalty.
    tolerance : float
        The KKT tolerance.
    tie_key : PRNGKey
        Breaks ties among violators.
    settings : WorkingSetSettings
        Capacity, iterations, sweeps and violators per VRep.

    Returns
    -------
    tuple of (EMMLState, bool, dict)
        The dual's state; whether the last iteration added no violator, its
        subproblem gap is within ``tolerance`` and the working set did not
        overflow; and the info (iterations, constraints, the objective's trace).
    """
    state, hist = fit_emml(data, c, tolerance, tie_key=tie_key, settings=settings)
    iterations = int(state.iteration)
    last = iterations - 1
    converged = (
        int(hist.num_added[last]) == 0
        and float(hist.subproblem_gap[last]) <= tolerance
        and int(state.overflow) == 0
    )
    info = {
        "iterations": iterations,
        "active_constraints": int(np.asarray(state.working_set.active).sum()),
        "constraints_added": int(state.total_added),
        "overflow": int(state.overflow),
        "objective_trace": [float(o) for o in np.asarray(hist.objective)[:iterations]],
    }
    return state, converged, info
