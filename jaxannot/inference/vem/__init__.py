"""Variational EM for any numpyro model with one discrete per-image site.

- :mod:`~jaxannot.inference.vem.algorithm` — :class:`VEM`, one class whose
  ``run`` / ``run_restarts`` delegate to the functions of
  :mod:`~jaxannot.inference.vem.run` and whose fold-in, predictions and Laplace
  draws delegate to those of :mod:`~jaxannot.inference.vem.fold_in`.
- :mod:`~jaxannot.inference.vem.steps` — :class:`VEMState`, :class:`VEMInfo` (what
  each EM iteration reports: its loss and fault code, recorded by the runner,
  :func:`~jaxannot.runtime.progress.run_steps`) and the E-steps; both exported here
  and from :mod:`jaxannot.inference`.
- :mod:`~jaxannot.inference.vem.declaration`, :mod:`~jaxannot.inference.vem.declared`,
  :mod:`~jaxannot.inference.vem.log_joint`, :mod:`~jaxannot.inference.vem.model_call`
  — what the declaration's trace says (sites, plates, supports), the bundle the
  helpers take, the log joint of a trace and a call's static set-up, and one call
  (model, set-up, arguments) with the objective's pieces on it.
- :mod:`~jaxannot.inference.vem.initial`, :mod:`~jaxannot.inference.vem.fit`,
  :mod:`~jaxannot.inference.vem.m_step`, :mod:`~jaxannot.inference.vem.layout`,
  :mod:`~jaxannot.inference.vem.global_sites`, :mod:`~jaxannot.inference.vem.checks`,
  :mod:`~jaxannot.inference.vem.faults`, :mod:`~jaxannot.inference.vem.fit_warnings`
  — start values and compiled updates, the M-step, array layouts, global sites,
  checks, a run's faults, the warnings of an empty or collapsed fit.
- :mod:`~jaxannot.inference.vem.summed` — closed-form M-steps read through sums
  over images (:class:`~jaxannot.inference.vem.summed.SummedMStep`), summed on each
  device's images where a fit splits them.
"""

from jaxannot.inference.vem.steps import VEMInfo, VEMState

__all__ = ["VEMInfo", "VEMState"]
