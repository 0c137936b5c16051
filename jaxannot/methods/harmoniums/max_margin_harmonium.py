r"""Max-margin training of latent subspace models (MMH, seed 001 §4).

Classification (problem P1, eq. 6):

.. math::

    \min_{\Theta, V} \; \mathcal L^v(\Theta) + \tfrac12 C_1 \|V\|^2
        + C_2 \sum_d \max_y \big[\Delta\ell_d(y) + V_y^\top \bar h_d
        - V_{y_d}^\top \bar h_d\big],

with :math:`\bar h_d = E_{q_0}[h \mid x_d]` (the *expected prediction rule*, eq. 5, with
a constant unit appended for the offset) and the 0/1 loss. Divided by :math:`C_1`, the
:math:`V`-part is the library's max-margin term
:class:`~jaxannot.inference.max_margin.MaxMargin` with ``loss="crammer_singer"`` and
:math:`c = C_2 / C_1` (weights :math:`V_{:, :K}`, bias = the offset column, regularized
like the weights), so P1 is :math:`\mathcal L^v + C_1 \cdot` ``term.objective``.
Both steps go through that term (no hinge is written here); it is a pytree whose labels
and cost are traced data, so a fit on other labels or at other :math:`C_1, C_2`
compiles nothing new. Coordinate descent alternates

1. the V-step: ``term.solve_dual`` (the Crammer–Singer dual solver of
   :mod:`jaxannot.solvers.multiclass_svm` that ``MaxMargin.dual_update`` also
   runs), warm-started from the previous duals with an epoch budget per V-step;
2. the Θ-step: optax steps on the CD surrogate plus :math:`C_1` times the term's
   ``penalty`` (= :math:`C_2` times the hinge sum). Autodiff of the hinge through
   :math:`\bar h_d(\Theta)` gives exactly seed 001's extra subgradient :math:`-C_2
   \sum_d (V_{y_d k} - V_{\bar y_d k})\, \partial E_{q_0}[h_k] / \partial W_{ik}` with
   :math:`\partial E_{q_0}[h_k] / \partial W_{ik} = x_i` and :math:`\bar y_d` the
   loss-augmented prediction.

The V-step solves P1 itself (``svm_step="p1"``, the default): the dual sees the raw
features :math:`[\bar h_d, 1]`, so :math:`\tfrac12\|V\|^2` is P1's regularizer. Dual
coordinate descent converges slowly on uncentred features; standardization is used
only as a preconditioner of the *start*: the first V-step is warm-started from the
duals of the SVM on standardized features (feasible for P1's dual, whose constraints do
not involve the features), every later V-step from the previous duals. Each V-step
stops at a relative duality gap of :math:`10^{-4}` or at its epoch budget, whichever
comes first; the gap reached is in ``trace["svm_gap"]`` (not converged when above
:math:`10^{-4}`). ``svm_step="standardized"`` (the earlier default) solves the SVM on
:math:`(\bar h_d - m) / s` and folds :math:`V` back: the Θ-step is then still P1's
hinge at the folded :math:`V`, but the V-step minimizes
:math:`\tfrac12\|W \operatorname{diag}(s)\|^2 + \tfrac12\|b + W m\|^2` instead
of :math:`\tfrac12(\|W\|^2 + \|b\|^2)` — a different problem whose
:math:`m, s` move at every V-step (``docs/harmoniums.md``).

Regression (P2, eqs. 10–12): the V-step solves the ε-insensitive dual
(:mod:`jaxannot.solvers.svr`, the solver of the term's ``"epsilon_insensitive"``
loss) for :math:`\beta_d = \mu_d - \mu_d^*`, and the Θ-step adds the Lagrangian term
:math:`-\sum_d \beta_d V^\top \bar h_d(\Theta)` with :math:`\beta` held fixed, whose
gradient is eq. (11)'s extra term. At the V-step optimum this gradient equals that of
:math:`C_2 \sum_d \max(0, |y_d - V^\top \bar h_d| - \epsilon)` (the term's penalty
times :math:`C_1`) for every image off the tube's boundary; within a Θ-step the two
differ (the multipliers do not follow the residuals), which is why the seed's
Lagrangian step is kept rather than the term's penalty.

Both Θ-step terms are averaged over images (the paper's sums divided by :math:`D`,
which rescales the Θ-step only). The module sees the model only through the functions
it is handed in an :class:`MMHModel`: ``phase_statistics`` and
``expected_log_potential`` (for CD), ``embed(params, image) -> [K]``
(:math:`E_{q_0}[h]`, differentiable in ``params``) and the Θ-step's optimizer; the
alternation's lengths and the V-step's variant are a :class:`Schedule`. The features,
the Θ-step's extra terms and the V-step's helpers are in
:mod:`jaxannot.methods.harmoniums.mmh_steps`.

References
----------
N. Chen, J. Zhu, F. Sun, E. P. Xing. Large-Margin Predictive Latent Subspace Learning
for Multiview Data Analysis. IEEE TPAMI 34(12), 2012, §4.1–4.2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
import optax

from jaxannot.inference import contrastive_divergence as cd
from jaxannot.inference.max_margin import MaxMargin
from jaxannot.methods.harmoniums.mmh_steps import (
    check_features,
    classification_extra_loss,
    embed_all,
    last_primal_and_gap,
    regression_extra_loss,
    standardized_start,
    to_raw,
)
from jaxannot.runtime.programs import bounded_cache
from jaxannot.runtime.row_buckets import pad_to_bucket
from jaxannot.solvers import multiclass_svm as cs
from jaxannot.solvers import svr as svr_mod
from jaxannot.types import Array, ArrayTree, PRNGKey

__all__ = [
    "MMHModel",
    "Schedule",
    "MMHResult",
    "SVM_STEPS",
    "fit_mmh_classifier",
    "fit_mmh_regressor",
]


SVM_STEPS = ("p1", "standardized")


class MMHModel(NamedTuple):
    """The likelihood model as the fit sees it, and the Θ-step's optimizer.

    Hashable (functions compare by identity): the compiled Θ-steps are cached per
    model, so a second fit with the same model reuses them.

    Attributes
    ----------
    phase_statistics, expected_log_potential : callable
        The model's CD pieces (see :mod:`jaxannot.inference.contrastive_divergence`).
    embed : callable
        ``embed(params, image) -> [K]``, :math:`E_{q_0}[h]`, differentiable in
        ``params``.
    optimizer : optax.GradientTransformation
        The Θ-step's optimizer.
    """

    phase_statistics: Callable
    expected_log_potential: Callable
    embed: Callable
    optimizer: optax.GradientTransformation


class Schedule(NamedTuple):
    r"""The alternation schedule shared by :func:`fit_mmh_classifier` and
    :func:`fit_mmh_regressor` (hashable: plain numbers and strings).

    Attributes
    ----------
    iterations : int
        Number of (V-step, Θ-step) alternations.
    inner_steps : int
        Optax steps per Θ-step.
    pretrain_steps : int
        Plain CD steps (the likelihood alone) before the first V-step.
    svm_epochs, final_svm_epochs : int
        Epoch budgets of the warm-started V-steps (the SVM's or the SVR's dual) inside
        the alternation and of the last V-step (on the final features); each stops
        earlier at its solver's relative duality gap (``trace["svm_gap"]`` says where
        it stopped).
    batch_size : int, optional
        Minibatch of the CD term (the V-step and the Θ-step's extra term always use
        every image).
    svm_step : {"p1", "standardized"}
        ``"p1"``: the V-step solves P1's (P2's) V-part on the raw :math:`[\bar h_d,
        1]`, its first call warm-started from the duals of the standardized problem (a
        preconditioner of the start only). ``"standardized"``: the V-step on
        :math:`(\bar h - m) / s` (mean and standard deviation over the images,
        refreshed at every V-step and held fixed in the Θ-step), ``V`` folded back;
        its regularizer is :math:`\tfrac12\|V'\|^2` of the standardized weights, not
        the paper's (``docs/harmoniums.md``).
    """

    iterations: int = 10
    inner_steps: int = 50
    pretrain_steps: int = 0
    svm_epochs: int = 50
    final_svm_epochs: int = 300
    batch_size: int | None = None
    svm_step: str = "p1"

    @property
    def longest_svm_epochs(self) -> int:
        """The larger epoch budget: the static length of every V-step's solver
        (each runs its own budget as a traced bound, so all share one program)."""
        return max(self.svm_epochs, self.final_svm_epochs)

    @property
    def standardized(self) -> bool:
        """``True`` for the standardized V-step; ``ValueError`` on an unknown
        ``svm_step``."""
        if self.svm_step not in SVM_STEPS:
            raise ValueError(
                f"unknown svm_step {self.svm_step!r}; valid: {', '.join(SVM_STEPS)}"
            )
        return self.svm_step == "standardized"


class MMHResult(NamedTuple):
    """Output of a max-margin fit.

    Attributes
    ----------
    params : pytree
        Likelihood-model parameters Θ.
    predictor : [T, K+1] or [K+1] array
        ``V`` (class weights, or the regression vector), offset last.
    trace : dict of numpy arrays
        ``svm_primal`` and ``svm_gap`` (the relative duality gap reached, above
        ``1e-4`` when the V-step stopped at its epoch budget) per V-step;
        ``cd_gap`` and ``extra_loss`` (the hinge or regression term) per Θ-step.
    """

    params: ArrayTree
    predictor: Array
    trace: dict


@bounded_cache(32)
def _theta_step(model: MMHModel, task: str, batch_size: int | None):
    """The Θ-step (CD + the ``task``'s extra term), built once per setting so that a
    second fit reuses :func:`cd.fit_cd`'s compiled loop."""
    extra_loss = (
        classification_extra_loss(model.embed)
        if task == "classification"
        else regression_extra_loss(model.embed)
    )
    pieces = (model.optimizer, model.phase_statistics, model.expected_log_potential)
    return cd.build_kernel(*pieces, extra_loss, batch_size)


def _alternate(rng_key, params, images, task, v_solver, model, schedule, mask=None):
    """The coordinate descent shared by P1 and P2.

    ``v_solver = (v_init, v_step, v_idle)`` is the task's V-step solver, ``v_init(key,
    feats, epochs)`` and ``v_step(key, feats, v_state, epochs) -> (v_state,
    extra-loss data, (primal, relative gap))``, with the epoch budgets of
    ``schedule``, and ``v_idle(feats)``, extra-loss data that weigh nothing (the
    extra term and its gradient exactly 0): the pre-training's plain CD runs as the
    Θ-step with them, one compiled loop for both when ``pretrain_steps ==
    inner_steps``. ``mask``: the real rows of ``images`` padded to a row bucket (the
    Θ-steps' and the standardization's means run over them).
    """
    v_init, v_step, v_idle = v_solver
    step = _theta_step(model, task, schedule.batch_size)
    standardize = schedule.standardized

    def features(p):
        return embed_all(p, images, model.embed, standardize, mask)

    state = cd.init(params, model.optimizer)
    k_pre, k_alt = jax.random.split(rng_key)
    gaps = []
    if schedule.pretrain_steps > 0:
        feats, standard = features(state.params)
        state, info = cd.fit_cd(
            k_pre,
            state,
            (images, (*v_idle(feats), *standard)),
            step=step,
            num_steps=schedule.pretrain_steps,
            mask=mask,
        )
        gaps.append(np.asarray(info.cd_gap))
    start = features(state.params)[0]
    v_state = v_init(jax.random.fold_in(k_pre, 1), start, schedule.svm_epochs)
    objective, rel_gaps, extras = [], [], []
    for it in range(schedule.iterations):
        k_v, k_theta = jax.random.split(jax.random.fold_in(k_alt, it))
        feats, standard = features(state.params)
        check_features(feats, f"at alternation {it + 1} of {schedule.iterations}")
        v_state, aux, value = v_step(k_v, feats, v_state, schedule.svm_epochs)
        aux = (*aux, *standard)
        objective.append(value[0])
        rel_gaps.append(value[1])
        state, info = cd.fit_cd(
            k_theta,
            state,
            (images, aux),
            step=step,
            num_steps=schedule.inner_steps,
            mask=mask,
        )
        gaps.append(np.asarray(info.cd_gap))
        extras.append(np.asarray(info.extra_loss))
    feats, (center, scale) = features(state.params)
    check_features(feats, "after the last alternation")
    k_final = jax.random.fold_in(k_alt, schedule.iterations)
    v_state, _, value = v_step(k_final, feats, v_state, schedule.final_svm_epochs)
    objective.append(value[0])
    rel_gaps.append(value[1])
    return MMHResult(
        state.params,
        to_raw(v_state.weights, center, scale),
        {
            "cd_gap": np.concatenate(gaps) if gaps else np.zeros(0),
            "svm_primal": np.asarray(objective),
            "svm_gap": np.asarray(rel_gaps),
            "extra_loss": np.concatenate(extras) if extras else np.zeros(0),
        },
    )


def fit_mmh_classifier(
    rng_key: PRNGKey,
    params: ArrayTree,
    images: ArrayTree,
    labels: Array,
    num_classes: int,
    model: MMHModel,
    *,
    c1: float = 0.5,
    c2: float = 1.0,
    schedule: Schedule | None = None,
) -> MMHResult:
    r"""Fit the max-margin harmonium for classification by alternating V- and Θ-steps.

    Parameters
    ----------
    rng_key : PRNGKey
    params : pytree
        Initial Θ (e.g. :func:`jaxannot.methods.harmoniums.harmonium.initialize`).
    images : pytree
        Batch handed to ``phase_statistics`` / ``embed`` (leading image axis).
    labels : [D] int array
    num_classes : int
    model : MMHModel
        The model's CD pieces, ``embed`` and the Θ-step's optimizer.
    c1, c2 : float
        Seed 001's constants (it fixes :math:`C_1 = 0.5`).
    schedule : Schedule, optional
        Alternations, Θ-step lengths, V-step epoch budgets and the V-step's variant
        (default ``Schedule()``): ``"p1"`` minimizes P1's :math:`\tfrac12\|V\|^2 +
        \frac{C_2}{C_1} \sum_d \ell_{CS}(V[\bar h_d, 1], y_d)` on the raw features,
        ``"standardized"`` the SVM on the standardized features (each V-step stops
        at a relative duality gap of ``1e-4`` or at its epoch budget).

    Returns
    -------
    MMHResult
        ``predictor`` is ``V`` ``[T, K+1]`` on ``[E_{q_0}[h], 1]`` (folded back for
        ``"standardized"``); predict with ``argmax(with_offset(embed) @ V.T)`` — one
        linear pass (seed 001 §4.4).

    Raises
    ------
    FloatingPointError
        The Θ-step diverged: the hidden features are not finite before a V-step.
    """
    schedule = Schedule() if schedule is None else schedule
    standardize = schedule.standardized
    # rows padded to their bucket (one compiled program per bucket): copies of the
    # last image, unlabelled (-1), so the hinge and the V-step leave them out
    labels = np.asarray(labels)
    images, mask = pad_to_bucket(images)
    padded = np.full(mask.shape[0], -1, labels.dtype)
    padded[: labels.shape[0]] = labels
    term = MaxMargin(padded, c2 / c1, loss="crammer_singer", num_classes=num_classes)
    weight = jnp.float32(c1 / labels.shape[0])  # C1 / D: P1 averaged over images

    longest = schedule.longest_svm_epochs

    def solve(key, feats, warm, epochs):
        # every V-step, whatever its epoch budget, runs one compiled solver
        stop = dataclasses.replace(cs.DEFAULT_STOP, max_epochs=longest, epochs=epochs)
        # feats = [features, 1]: the term appends the unit column itself
        return term.solve_dual(key, feats[:, :-1], stop=stop, init_state=warm)

    def v_init(key, feats, epochs):
        zero = cs.init(feats, num_classes)
        if standardize:
            return zero
        # from the zero duals, passed as a warm start: the later V-steps' program
        start, _ = solve(key, standardized_start(feats, mask), zero, epochs)
        return cs.CSState(start.alpha, start.alpha.T @ feats)

    def v_step(key, feats, v_state, epochs):
        warm = cs.CSState(v_state.alpha, v_state.alpha.T @ feats)  # W(α), new feats
        v_state, info = solve(key, feats, warm, epochs)
        return v_state, (term, weight, v_state.weights), last_primal_and_gap(info)

    def v_idle(feats):  # the hinge at weight 0
        return term, jnp.zeros_like(weight), cs.init(feats, num_classes).weights

    solver = (v_init, v_step, v_idle)
    return _alternate(
        rng_key, params, images, "classification", solver, model, schedule, mask
    )


def fit_mmh_regressor(
    rng_key: PRNGKey,
    params: ArrayTree,
    images: ArrayTree,
    targets: Array,
    model: MMHModel,
    *,
    c1: float = 0.5,
    c2: float = 1.0,
    epsilon: float = 0.1,
    schedule: Schedule | None = None,
) -> MMHResult:
    r"""Fit the max-margin harmonium for regression (seed 001 §4.2).

    Same arguments as :func:`fit_mmh_classifier` with real ``targets`` and the
    insensitivity ``epsilon``; the V-step is the box-constrained dual of eq. (12),
    P2's :math:`\tfrac12 C_1\|V\|^2 + C_2\sum_d \ell_\epsilon` on the raw
    :math:`[\bar h_d, 1]` for ``svm_step="p1"`` (first V-step warm-started from the
    standardized problem's multipliers), on the standardized features for
    ``"standardized"`` (V-steps stop at a relative duality gap of ``1e-5``).
    ``predictor`` is ``V`` ``[K+1]``; predict with ``with_offset(embed) @ V``.
    """
    schedule = Schedule() if schedule is None else schedule
    standardize = schedule.standardized
    targets = jnp.asarray(targets, jnp.float32)

    longest = schedule.longest_svm_epochs

    def solve(key, feats, warm, epochs):
        stop = dataclasses.replace(
            svr_mod.DEFAULT_STOP, max_epochs=longest, epochs=epochs
        )
        return svr_mod.fit_svr(
            key, feats, targets, c1, c2, epsilon, stop=stop, init_state=warm
        )

    def v_init(key, feats, epochs):
        zero = svr_mod.SVRState(jnp.zeros(feats.shape[0]), jnp.zeros(feats.shape[1]))
        if standardize:
            return zero
        start, _ = solve(key, standardized_start(feats), zero, epochs)
        return svr_mod.SVRState(start.beta, start.beta @ feats / c1)

    def v_step(key, feats, v_state, epochs):
        warm = svr_mod.SVRState(v_state.beta, v_state.beta @ feats / c1)
        v_state, info = solve(key, feats, warm, epochs)
        return v_state, (v_state.beta, v_state.weights), last_primal_and_gap(info)

    def v_idle(feats):  # no multiplier: the Lagrangian term is 0
        return jnp.zeros(feats.shape[0], feats.dtype), jnp.zeros(feats.shape[1])

    solver = (v_init, v_step, v_idle)
    return _alternate(rng_key, params, images, "regression", solver, model, schedule)
