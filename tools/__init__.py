"""The defaults pipeline the tests and the docs depend on: the cross-validations the
defaults come from (``defaults_cv``, ``ensemble_defaults_cv``, ``tagprop_cv``), their
guards and fixed point (``defaults_guard``, ``defaults_iterate``), the stored figures
the tests re-run (``defaults_vs_empirical``, ``subsample_figures``), and the generated
tables and checked figures of the docs (``results_tables``, ``prose_figures``).

Run one from the repository root as ``python -m tools.NAME --help``.
"""
