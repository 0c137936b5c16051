"""The library's methods, one folder per family.

Each family holds its model declarations, the solvers only it uses and the annotators
that register its methods (:func:`jaxannot.annotators.register`). Families do not
import one another (an import-linter independence contract); what two share lives
below them (:mod:`jaxannot.solvers`, :mod:`jaxannot.inference`, :mod:`jaxannot.graph`,
:mod:`jaxannot.data`).

- :mod:`~jaxannot.methods.topic_models` — mixture of unigrams, pLSA-Words, Link-LDA
  (seed 000).
- :mod:`~jaxannot.methods.harmoniums` — DWH, TWH, MMH and their classifiers (seed 001).
- :mod:`~jaxannot.methods.ale` — Approximate Laplacian Eigenmaps (seed 002).
- :mod:`~jaxannot.methods.sfsls` — SFSLS, SFSS and FSNM feature selection (seed 003).
- :mod:`~jaxannot.methods.emml` — EMML structured annotation and MBRM (seed 004).
- :mod:`~jaxannot.methods.baselines` — empirical frequencies, kNN and TagProp.
- :mod:`~jaxannot.methods.ensemble` — a fusion of the registered methods, chosen by
  cross-validation on the training images (issue 47).
"""
