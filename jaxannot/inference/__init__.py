"""How models are fitted: reusable algorithms (imported on demand).

Each module follows the three-layer shape ``init`` / ``build_kernel`` / ``step`` with a
``fit_*`` driver, and never imports a specific model except through the functions it
is handed.

- :mod:`~jaxannot.inference.em` — generic (variational) EM driver, jit-compiled once.
- :mod:`~jaxannot.inference.lapvar` — LapVar1 / LapVar2 Laplacian-regularized VI.
- :mod:`~jaxannot.inference.laplacian_elbo` — the Laplacian penalty on any numpyro ELBO.
- :mod:`~jaxannot.inference.contrastive_divergence` — mean-field contrastive divergence.
- :mod:`~jaxannot.inference.max_margin_harmonium` — the hinge-loss (MMH) alternation.
- :mod:`~jaxannot.inference.multiclass_svm`, :mod:`~jaxannot.inference.svr`,
  :mod:`~jaxannot.inference.linear_svm` — SVM / SVR dual solvers.
- :mod:`~jaxannot.inference.emml` — the EMML working-set dual solver;
  :mod:`~jaxannot.inference.cutting_plane` — its cutting-plane baseline.
- :mod:`~jaxannot.inference.generalized_eigen`,
  :mod:`~jaxannot.inference.smooth_function` — ALE's eigen-solves and detectors.
- :mod:`~jaxannot.inference.reweighted_l2p` — SFSLS's Algorithm 1;
  :mod:`~jaxannot.inference.fsnm` — the FSNM baseline.
"""
