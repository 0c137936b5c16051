"""Variational EM for any numpyro model with one discrete per-image site.

- :mod:`~jaxannot.inference.vem.algorithm` — :class:`VEM` (``init`` / ``update``),
  with ``run`` / ``run_restarts`` from :mod:`~jaxannot.inference.vem.run` and
  fold-in, predictions and Laplace draws from :mod:`~jaxannot.inference.vem.fold_in`.
- :mod:`~jaxannot.inference.vem.steps` — :class:`VEMState` and the E-steps.
- :mod:`~jaxannot.inference.vem.declaration`, :mod:`~jaxannot.inference.vem.declared`
  — what the declaration's trace says (sites, plates, supports) and the bundle the
  helpers take.
- :mod:`~jaxannot.inference.vem.fit`, :mod:`~jaxannot.inference.vem.m_step`,
  :mod:`~jaxannot.inference.vem.layout`,
  :mod:`~jaxannot.inference.vem.global_sites`, :mod:`~jaxannot.inference.vem.checks`
  — start values and compiled updates, the M-step, array layouts, global sites,
  checks.
"""
