"""What is assumed: one module per model family (imported on demand).

- :mod:`~jaxannot.models.mixture_of_unigrams` — the multimodal mixture of unigrams
  (numpyro declarations on counts and on padded token ids, closed-form M-steps),
  seed 000.
- :mod:`~jaxannot.models.plsa_words` — pLSA-Words (Monay & Gatica-Perez 2004).
- :mod:`~jaxannot.models.link_lda` — Link-LDA, per-token topics, variational Bayes.
- :mod:`~jaxannot.models.harmonium` — multi-view harmoniums (DWH, TWH, MMH), seed 001.
- :mod:`~jaxannot.models.structured_output` — EMML's VReps, joint feature map and
  kernels, seed 004; :mod:`~jaxannot.models.mbrm` — its MBRM baseline.
- :mod:`~jaxannot.models.eigenfunctions` — Approximate Laplacian Eigenmaps, seed 002.
- :mod:`~jaxannot.models.sparse_projection` — the SFSLS objective, seed 003.
"""
