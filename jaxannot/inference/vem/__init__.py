"""Variational EM for any numpyro model with one discrete per-image site.

- :mod:`~jaxannot.inference.vem.algorithm` — :class:`VEM` (``init`` / ``update`` /
  ``run``).
- :mod:`~jaxannot.inference.vem.steps` — :class:`VEMState` and the E-steps.
- :mod:`~jaxannot.inference.vem.declaration`, :mod:`~jaxannot.inference.vem.declared`
  — what the declaration's trace says (sites, plates, supports) and the bundle the
  helpers take.
- :mod:`~jaxannot.inference.vem.fit`, :mod:`~jaxannot.inference.vem.layout`,
  :mod:`~jaxannot.inference.vem.global_sites`, :mod:`~jaxannot.inference.vem.checks`
  — start values and compiled updates, array layouts, global sites, checks.
"""
