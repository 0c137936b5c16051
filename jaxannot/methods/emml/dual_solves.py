"""EMML's dual solved (:mod:`.annotators`), each solver's outcome as
``(state, converged, info)``.

:func:`_solve_mixtures` solves the dual over per-VRep mixtures (the exact solver of
:mod:`.exact`) or takes its diagonal-kernel optimum, :func:`_solve_working_set` runs
Algorithm 1 (:mod:`.working_set`); :func:`_warn_unconverged` warns when a solve
stopped before its KKT conditions held.
"""

from __future__ import annotations

import logging

import numpy as np

import jax.numpy as jnp

from jaxannot.methods.emml.exact import (
    fit_emml_exact,
    mixture_state,
    uncoupled_mixtures,
)
from jaxannot.methods.emml.structured_output import StructuredData
from jaxannot.methods.emml.working_set import fit_emml

_log = logging.getLogger("jaxannot")


def _warn_unconverged(solver: str, tolerance: float, solver_info: dict) -> None:
    _log.warning(
        "emml (%s solver) stopped before convergence: the KKT conditions do not "
        "hold to tolerance %g (info: %s); the scores come from an inexact dual",
        solver,
        tolerance,
        {k: x for k, x in solver_info.items() if k != "objective_trace"},
    )


def _solve_mixtures(data: StructuredData, solver: str, c, tolerance, sweeps_cap):
    """The dual over per-VRep mixtures: solved (``"exact"``) or at its
    diagonal-kernel optimum (``"none"``); ``(state, converged, info)``."""
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


def _solve_working_set(data: StructuredData, c, tolerance, tie_key, settings):
    """Algorithm 1 (working sets); ``(state, converged, info)``."""
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
