"""Generic convex and linear-algebra solvers, used by several method families.

- :mod:`~jaxannot.solvers.linear_svm` — binary linear SVM, dual coordinate descent.
- :mod:`~jaxannot.solvers.multiclass_svm` — Crammer–Singer multiclass SVM dual.
- :mod:`~jaxannot.solvers.svr` — ε-insensitive support vector regression dual.
- :mod:`~jaxannot.solvers.margin_losses` — the hinge, Crammer–Singer and ε-insensitive
  losses and their subgradients.
- :mod:`~jaxannot.solvers.generalized_eigen` — the generalized symmetric eigenproblem.
- :mod:`~jaxannot.solvers.qp` — the small simplex-constrained QP subproblem of
  working-set dual methods; :mod:`~jaxannot.solvers.simplex_smo` — its SMO step on
  one block's scaled simplex.
"""
