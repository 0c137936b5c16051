"""How models are fitted: reusable algorithms.

The modelling core — what a modeller uses on a model declared in numpyro — is
importable from here: :class:`VEM` (variational EM for a discrete per-image site),
its E-step transforms :class:`LapVar1` / :class:`LapVar2` and extra term
:class:`MaxMargin`; :class:`LaplacianELBO` and :class:`MaxMarginELBO` for
``numpyro.infer.SVI``; :class:`MAP` for models without local sites. The other
modules are imported on demand.

No module imports a specific model except through the functions it is handed. An
iterative algorithm is a start and a step that returns blackjax's ``(state, info)``
(VEM's info is :class:`VEMInfo`: the iteration's loss and fault code): contrastive
divergence's ``init`` / ``build_kernel`` / ``fit_cd``, :class:`VEM`'s and
:class:`MAP`'s ``init`` / ``update`` / ``run``, the step that
:mod:`~jaxannot.inference.em`'s drivers are handed. The drivers run their steps
through the library's runner, :mod:`jaxannot.runtime.progress`. Those called from the
host run :func:`~jaxannot.runtime.progress.run_steps` (one compiled loop for any
number of steps, progress bar, checkpoints): :class:`VEM` and :class:`MAP` (their
``update`` takes one step of ``run``'s compiled loop through
:func:`~jaxannot.runtime.progress.run_step` and returns ``(state, loss)`` as
numpyro's ``SVI.update``), :func:`fit_laplacian`'s SVI steps,
:func:`~jaxannot.inference.em.run_em` and contrastive divergence's
:func:`~jaxannot.inference.contrastive_divergence.fit_cd` (random kernels
``kernel(rng_key, state, *args)`` through
:class:`~jaxannot.runtime.progress.Keyed`). Loops that stop at a tolerance inside one
compiled program run the same kind of step through the runner's in-program loop,
:func:`~jaxannot.runtime.progress.run_until_stopped`
(:func:`~jaxannot.inference.em.run_em_until_converged`,
:func:`~jaxannot.inference.em.run_until_small_change`, the binary hinge's epochs in
:mod:`~jaxannot.inference.max_margin_dual` inside :class:`MaxMargin`'s M-step, the
small L-BFGS of :class:`VEM`'s start in :mod:`~jaxannot.inference.vem.lbfgs`). One
stays a plain ``lax`` loop: the masked fits of :func:`choose_lam` (compiled with the
held-out scores computed after them).

- :mod:`~jaxannot.inference.vem` — variational EM for any declared model with one
  discrete per-image site (:class:`VEM`).
- :mod:`~jaxannot.inference.map_estimate` — MAP of a declared model (:class:`MAP`).
- :mod:`~jaxannot.inference.max_margin` — the hinge / Crammer–Singer /
  ε-insensitive term for VEM (:class:`MaxMargin`), its exact dual M-step in
  :mod:`~jaxannot.inference.max_margin_dual`;
  :mod:`~jaxannot.inference.max_margin_elbo` — the term for SVI
  (:class:`MaxMarginELBO`).
- :mod:`~jaxannot.inference.em` — generic (variational) EM drivers, compiled once.
- :mod:`~jaxannot.inference.lapvar` — LapVar1 / LapVar2 Laplacian-regularized VI.
- :mod:`~jaxannot.inference.lapvar_update` — LapVar1's update of one variable.
- :mod:`~jaxannot.inference.laplacian_elbo` — the Laplacian penalty on any numpyro ELBO.
  :mod:`~jaxannot.inference.laplacian_elbo_enum` — the posteriors of a site
  enumerated in the model under it.
- :mod:`~jaxannot.inference.laplacian_elbo_lam` — its weight chosen or checked on
  held-out evidence (:func:`choose_lam`);
  :mod:`~jaxannot.inference.laplacian_elbo_fit` — a fit on it compiled once, its
  weight chosen first by default (:func:`fit_laplacian`), its steps the value-keyed
  SVI steps of :mod:`~jaxannot.inference.svi_program` run by the runner.
- :mod:`~jaxannot.inference.local_summary` — the posterior summary of a per-image
  site that those penalties act on (:func:`compiled_summary`: compiled once).
- :mod:`~jaxannot.inference.contrastive_divergence` — mean-field contrastive
  divergence.

Solvers shared by several methods are in :mod:`jaxannot.solvers`, the solvers of one
paper in its family under :mod:`jaxannot.methods`, and the step loops, checkpoints and
device placement in :mod:`jaxannot.runtime`.
"""

from jaxannot.inference.laplacian_elbo import LaplacianELBO
from jaxannot.inference.laplacian_elbo_fit import LaplacianFit, fit_laplacian
from jaxannot.inference.laplacian_elbo_lam import choose_lam
from jaxannot.inference.lapvar import LapVar1, LapVar2
from jaxannot.inference.map_estimate import MAP
from jaxannot.inference.max_margin import MaxMargin
from jaxannot.inference.max_margin_elbo import MaxMarginELBO
from jaxannot.inference.vem.algorithm import VEM, EmptyComponentWarning, VEMState
from jaxannot.inference.vem.fit_warnings import CollapsedFitWarning
from jaxannot.inference.vem.steps import VEMInfo

__all__ = [
    "MAP",
    "VEM",
    "CollapsedFitWarning",
    "EmptyComponentWarning",
    "LapVar1",
    "LapVar2",
    "LaplacianELBO",
    "LaplacianFit",
    "MaxMargin",
    "MaxMarginELBO",
    "VEMInfo",
    "VEMState",
    "choose_lam",
    "fit_laplacian",
]
