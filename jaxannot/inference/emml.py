r"""EMML: the working-set dual solver of structured max-margin learning (Algorithm 1).

Solves the dual (9) of the structured max-margin problem (5) of Guo et al. (2016),

.. math::

    \min_\mu\ \tfrac12 \mu^\top D \mu - \mu^\top S \quad\text{s.t.}\quad A\mu \le C,\
    \mu \ge 0,

with one variable per VRep :math:`i` and output :math:`\bar{\mathbf y} \in
\operatorname{perm}(\mathbf y_i)`, by the decomposition of Algorithm 1:

3. solve the subproblem (12) on the working set :math:`\mu_B` (warm start; the shared
   block-SMO solver of :mod:`jaxannot.inference._qp_subproblem`);
4. move the multipliers that are zero out of :math:`\mu_B`;
5. move in the multipliers that violate condition (13): for each VRep the
   loss-augmented top-:math:`r_i` selection over its word scores
   (:func:`~jaxannot.inference._qp_subproblem.loss_augmented_argmax`) returns the
   minimizer :math:`\bar{\mathbf y}^*` of :math:`g_{i,\bar{\mathbf y}} =
   (D\mu)_{i,\bar{\mathbf y}} - S_{i,\bar{\mathbf y}}` over
   :math:`\operatorname{perm}(\mathbf y_i)` without enumerating it. It violates the
   KKT conditions (10) when :math:`g^* < \theta_i - \text{tol}`, where
   :math:`\theta_i = 0` if :math:`\sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf y}} < C`
   (condition 13 / 11) and otherwise :math:`\theta_i = -\gamma_i`, the common gradient
   of VRep :math:`i`'s positive multipliers (the case :math:`A_i^\top\mu = C` of
   Section 3.2). All VReps are scanned at once (vectorized) and every violator is
   added;
6. repeat until no violator remains.

The whole solve is a single ``jit`` (:func:`fit_emml`): fixed-capacity working-set
buffers, ``lax.while_loop`` over outer iterations, batched kernel algebra.
:class:`EMMLInfo` reports the dual objective (non-increasing across iterations), the
number of active constraints and the number added.

Patent notice: the EMML method is the subject of US patent 8,463,053 B1 (related: US
8,923,630 and US 10,007,679). This implementation is provided for research; check the
patents' status before any commercial use.

References
----------
Z. Guo, Z. Zhang, E. P. Xing, C. Faloutsos. Multimodal Data Mining in a Multimedia
Database Based on Structured Max Margin Learning. ACM TKDD 10(3), 2016 (Section 3).
E. Osuna, R. Freund, F. Girosi. An improved training algorithm for support vector
machines. IEEE NNSP 1997.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.inference._qp_subproblem import (
    WorkingSet,
    add_constraints,
    dual_objective,
    empty_working_set,
    is_duplicate,
    slot_gradients,
    solve_subproblem,
    violator_candidates,
)
from jaxannot.types import Array, PRNGKey

__all__ = [
    "StructuredData",
    "EMMLState",
    "EMMLInfo",
    "init",
    "build_kernel",
    "fit_emml",
    "ExactState",
    "fit_emml_exact",
    "project_capped_simplex",
    "mixture_objective",
    "kkt_thresholds",
    "theorem_3_5_bound",
]


class StructuredData(NamedTuple):
    """The training problem: VRep kernel and word vectors.

    Attributes
    ----------
    kernel : Float[Array, "vreps vreps"]
        :math:`k(\\mathbf x_i, \\mathbf x_j)` (positive semi-definite).
    words : Float[Array, "vreps words"]
        0/1 word vectors :math:`\\mathbf y_i`, each with at least one word.
    """

    kernel: Array
    words: Array


class EMMLState(NamedTuple):
    """State of Algorithm 1.

    Attributes
    ----------
    working_set : WorkingSet
        :math:`\\mu_B` in fixed-capacity slots (inactive slots are :math:`\\mu_N = 0`).
    coefficients : Float[Array, "vreps words"]
        :math:`B_i = \\sum_{\\bar{\\mathbf y}} \\mu_{i,\\bar{\\mathbf y}}
        (\\mathbf y_i -
        \\bar{\\mathbf y})`; word scores of an image are :math:`k(\\mathbf x, X) B`.
    scores : Float[Array, "vreps words"]
        :math:`F = K B`, the VReps' own word scores.
    objective : Float[Array, ""]
        Dual objective after the last subproblem solve.
    iteration : Int[Array, ""]
    num_added : Int[Array, ""]
        Constraints moved into :math:`\\mu_B` by the last iteration.
    total_added : Int[Array, ""]
        Constraints moved in over the whole run.
    overflow : Int[Array, ""]
        Violators dropped because a VRep's slots were full (0 in a valid run).
    """

    working_set: WorkingSet
    coefficients: Array
    scores: Array
    objective: Array
    iteration: Array
    num_added: Array
    total_added: Array
    overflow: Array


class EMMLInfo(NamedTuple):
    """Diagnostics of one outer iteration.

    Attributes
    ----------
    objective : dual objective after step 3 (never increases)
    num_active : constraints in :math:`\\mu_B` after step 4 (before additions)
    num_added : violators moved in at step 5
    max_violation : largest KKT violation :math:`\\theta_i - g^*_i` over VReps
    sweeps : block sweeps of the subproblem solve
    subproblem_gap : final KKT gap of the subproblem
    """

    objective: Array
    num_active: Array
    num_added: Array
    max_violation: Array
    sweeps: Array
    subproblem_gap: Array


def init(data: StructuredData, capacity: int) -> EMMLState:
    """Empty working set (:math:`\\mu = 0`, objective 0) with ``capacity`` slots per
    VRep."""
    n, w = data.words.shape
    dtype = data.kernel.dtype
    ws = empty_working_set(n, w, capacity, dtype)
    zero_i = jnp.zeros((), jnp.int32)
    return EMMLState(
        working_set=ws,
        coefficients=jnp.zeros((n, w), dtype),
        scores=jnp.zeros((n, w), dtype),
        objective=jnp.zeros((), dtype),
        iteration=zero_i,
        num_added=zero_i,
        total_added=zero_i,
        overflow=zero_i,
    )


def kkt_thresholds(ws: WorkingSet, scores: Array, c: float) -> Array:
    """:math:`\\theta_i`: the largest gradient among VRep ``i``'s variables that could
    give up mass — its positive multipliers and, when :math:`\\sum\\mu_i < C`, the slack
    (gradient 0). A new constraint violates KKT (10) when its gradient is below it."""
    grads = slot_gradients(ws, scores)
    pos = ws.active & (ws.mu > 0)
    slack = c - jnp.sum(ws.mu, axis=-1)
    best = jnp.max(jnp.where(pos, grads, -jnp.inf), axis=-1)
    return jnp.maximum(best, jnp.where(slack > 0, 0.0, -jnp.inf))


def build_kernel(
    c: float,
    tolerance: float = 1e-3,
    max_sweeps: int = 200,
    max_smo_steps=None,
    violators_per_vrep: int = 1,
    random_ties: bool = False,
):
    """One outer iteration of Algorithm 1 (steps 3, 4, 5).

    Parameters
    ----------
    c : float
        Box constant :math:`C` of the slack penalty.
    tolerance : float
        KKT tolerance, in loss units, shared by the subproblem solve (max violating
        pair gap) and the violator test (:math:`g^* < \\theta_i - \\text{tol}`).
    max_sweeps : int
        Cap on block sweeps per subproblem solve.
    max_smo_steps : int, optional
        SMO steps per block visit.
    violators_per_vrep : int
        Candidates tested per VRep and iteration
        (:func:`~jaxannot.inference._qp_subproblem.violator_candidates`); every one
        that violates (13) enters :math:`\\mu_B` (step 5 moves all violators).
    random_ties : bool
        Break ties among equal loss-augmented word scores at random (drawn from
        ``rng_key`` folded with the iteration) instead of by lowest word index.

    Returns
    -------
    step : ``step(rng_key, state, data) -> (EMMLState, EMMLInfo)``
        ``rng_key`` is used only with ``random_ties``.
    """

    def step(rng_key: PRNGKey, state: EMMLState, data: StructuredData):
        tie_key = jax.random.fold_in(rng_key, state.iteration) if random_ties else None
        ws, coef, scores, sub = solve_subproblem(
            data.kernel,
            state.working_set,
            state.coefficients,
            c,
            tolerance,
            max_sweeps,
            max_smo_steps,
        )
        objective = dual_objective(ws, coef, scores)
        # step 4: zero multipliers leave the working set
        keep = ws.active & (ws.mu > 0)
        ws = ws._replace(active=keep, mu=jnp.where(keep, ws.mu, 0.0))
        num_active = jnp.sum(keep).astype(jnp.int32)
        # step 5: violators of (13) / KKT (10) enter it
        theta = kkt_thresholds(ws, scores, c)
        ybars, grads = violator_candidates(
            scores, data.words, violators_per_vrep, tie_key
        )
        num_added = jnp.zeros((), jnp.int32)
        overflow = jnp.zeros((), jnp.int32)
        max_violation = jnp.full((), -jnp.inf, scores.dtype)
        for k in range(violators_per_vrep):
            violation = theta - grads[k]
            fresh = ~is_duplicate(ws, data.words, ybars[k])
            fresh &= ~jnp.all(ybars[k] == data.words, axis=-1)
            add = (violation > tolerance) & fresh
            ws, over = add_constraints(ws, data.words, ybars[k], add)
            num_added += (jnp.sum(add) - over).astype(jnp.int32)
            overflow += over.astype(jnp.int32)
            max_violation = jnp.maximum(
                max_violation, jnp.max(jnp.where(fresh, violation, -jnp.inf))
            )
        new_state = EMMLState(
            working_set=ws,
            coefficients=coef,
            scores=scores,
            objective=objective,
            iteration=state.iteration + 1,
            num_added=num_added,
            total_added=state.total_added + num_added,
            overflow=state.overflow + overflow,
        )
        info = EMMLInfo(
            objective=objective,
            num_active=num_active,
            num_added=num_added,
            max_violation=max_violation,
            sweeps=sub.sweeps,
            subproblem_gap=sub.max_gap,
        )
        return new_state, info

    return step


def _empty_history(max_iterations: int, dtype) -> EMMLInfo:
    f = jnp.full((max_iterations,), jnp.nan, dtype)
    i = jnp.full((max_iterations,), -1, jnp.int32)
    return EMMLInfo(f, i, i, f, i, f)


@functools.partial(
    jax.jit,
    static_argnames=("capacity", "max_iterations", "max_sweeps", "violators_per_vrep"),
)
def fit_emml(
    data: StructuredData,
    c: float = 1.0,
    tolerance: float = 1e-3,
    *,
    capacity: int = 16,
    max_iterations: int = 200,
    max_sweeps: int = 200,
    violators_per_vrep: int = 1,
    tie_key: PRNGKey | None = None,
) -> tuple[EMMLState, EMMLInfo]:
    """Run Algorithm 1 to convergence in one ``jit`` (``lax.while_loop``).

    Stops when an iteration adds no violator (the subproblem optimum is then KKT-optimal
    for the full dual (9) within ``tolerance``; Theorem 3.2) or after
    ``max_iterations``.

    Parameters
    ----------
    data : StructuredData
    c : float
        :math:`C` (traced: changing it does not recompile).
    tolerance : float
        KKT tolerance in loss units (traced).
    capacity : int
        Working-set slots per VRep (static); ``state.overflow > 0`` means it was too
        small.
    max_iterations, max_sweeps : int
        Static caps on outer iterations and sweeps per subproblem. A small
        ``max_sweeps`` solves the subproblem inexactly (every step still decreases the
        objective); the loop then also continues while the last subproblem's KKT gap
        exceeds ``tolerance``, so the stopping test is unchanged.
    violators_per_vrep : int
        Violator candidates per VRep and iteration (static).
    tie_key : PRNGKey, optional
        Break ties among equal wrong words at random from this key (default: lowest
        word index, deterministic).

    Returns
    -------
    state : EMMLState
        Final state; ``state.coefficients`` define the word scores.
    history : EMMLInfo
        Per-iteration diagnostics, arrays of length ``max_iterations`` (NaN / -1 past
        ``state.iteration``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> y = jnp.array([[1., 0., 0.], [0., 1., 0.]])
    >>> state, hist = fit_emml(StructuredData(jnp.eye(2), y), c=1.0)
    >>> int(state.overflow)
    0
    """
    dtype = data.kernel.dtype
    c = jnp.asarray(c, dtype)
    tolerance = jnp.asarray(tolerance, dtype)
    step = build_kernel(
        c,
        tolerance,
        max_sweeps,
        violators_per_vrep=violators_per_vrep,
        random_ties=tie_key is not None,
    )
    state = init(data, capacity)
    history = _empty_history(max_iterations, dtype)
    key = jax.random.key(0) if tie_key is None else tie_key

    def cond(carry):
        state, history = carry
        it = state.iteration
        first = it == 0
        unsolved = history.subproblem_gap[jnp.maximum(it - 1, 0)] > tolerance
        going = first | (state.num_added > 0) | unsolved
        return going & (it < max_iterations)

    def body(carry):
        state, history = carry
        it = state.iteration
        state, info = step(key, state, data)
        history = jax.tree.map(lambda h, v: h.at[it].set(v), history, info)
        return state, history

    return jax.lax.while_loop(cond, body, (state, history))


def theorem_3_5_bound(data: StructuredData, c: float, epsilon: float) -> float:
    """Theorem 3.5: at most :math:`2nRC\\Delta\\epsilon^{-2}` constraints enter
    :math:`\\mu_B`, with
    :math:`R = \\max_{i,\\bar{\\mathbf y}} k_{ii}\\, l(\\bar{\\mathbf
    y}, \\mathbf y_i)` (the joint kernel's diagonal is :math:`k_{ii} \\|\\mathbf y_i -
    \\bar{\\mathbf y}\\|^2`), :math:`\\Delta = \\max l = 2 \\max_i \\min(r_i, W - r_i)`
    and :math:`\\epsilon` the smallest violation of an added constraint (here the
    tolerance)."""
    n, w = data.words.shape
    r = jnp.sum(data.words > 0, axis=1)
    max_loss = 2.0 * jnp.minimum(r, w - r)
    big_r = float(jnp.max(jnp.diag(data.kernel) * max_loss))
    delta = float(jnp.max(max_loss))
    return 2.0 * n * big_r * c * delta / epsilon**2


# ---------------------------------------------------------------------------------
# The exact solver: the dual (9) over per-VRep mixtures (no working-set cap)
# ---------------------------------------------------------------------------------


class ExactState(NamedTuple):
    """Solution of the dual (9) in mixture form (:func:`fit_emml_exact`).

    Attributes
    ----------
    mixtures : Float[Array, "vreps words"]
        :math:`\\mathbf u_i = \\sum_{\\bar{\\mathbf y}} \\mu_{i,\\bar{\\mathbf y}}
        \\bar{\\mathbf y}` with the slack counted as :math:`\\bar{\\mathbf y} =
        \\mathbf y_i`, a point of :math:`C\\operatorname{conv}(\\operatorname{perm}
        (\\mathbf y_i)) = \\{0 \\le \\mathbf u \\le C, \\sum_w u_w = r_i C\\}`.
    coefficients : Float[Array, "vreps words"]
        :math:`B_i = C\\mathbf y_i - \\mathbf u_i` (as :attr:`EMMLState.coefficients`).
    scores : Float[Array, "vreps words"]
        :math:`F = K B`.
    objective : Float[Array, ""]
        Dual objective (9).
    sweeps : Int[Array, ""]
        Block sweeps run.
    max_violation : Float[Array, ""]
        Largest KKT violation over VReps, in loss units (see :func:`fit_emml_exact`).
    duality_gap : Float[Array, ""]
        Frank--Wolfe gap :math:`\\sum_i \\max_{\\mathbf z \\in C\\Delta_i}
        \\langle \\mathbf a_i, \\mathbf z - \\mathbf u_i\\rangle \\ge`
        objective :math:`-` optimum.
    converged : Bool[Array, ""]
        ``max_violation <= tolerance``.
    """

    mixtures: Array
    coefficients: Array
    scores: Array
    objective: Array
    sweeps: Array
    max_violation: Array
    duality_gap: Array
    converged: Array


def project_capped_simplex(v: Array, total: Array, cap: Array, iters: int = 64):
    """Euclidean projection of ``v`` onto :math:`\\{0 \\le \\mathbf u \\le
    \\text{cap}, \\sum_w u_w = \\text{total}\\}` (``0 <= total <= W cap``).

    :math:`u_w = \\operatorname{clip}(v_w - \\tau, 0, \\text{cap})` with the shift
    :math:`\\tau` found by bisection on the monotone piecewise-linear
    :math:`\\sum_w \\operatorname{clip}(v_w - \\tau, 0, \\text{cap})`, then made
    exact by solving the linear piece of the final bracket (its free and capped
    coordinates)."""
    dtype = v.dtype

    def mass(tau):
        return jnp.sum(jnp.clip(v - tau, 0.0, cap))

    lo = jnp.min(v) - cap  # mass(lo) = W cap >= total
    hi = jnp.max(v)  # mass(hi) = 0 <= total

    def bisect(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        big = mass(mid) > total
        return jnp.where(big, mid, lo), jnp.where(big, hi, mid)

    lo, hi = jax.lax.fori_loop(0, iters, bisect, (lo, hi))
    tau = 0.5 * (lo + hi)
    # exact: on the piece containing tau, sum = cap * #capped + sum_free (v - tau)
    free = (v - tau > 0) & (v - tau < cap)
    capped = v - tau >= cap
    n_free = jnp.sum(free)
    exact = (jnp.sum(jnp.where(free, v, 0.0)) + cap * jnp.sum(capped) - total) / (
        jnp.maximum(n_free, 1).astype(dtype)
    )
    ok = (n_free > 0) & (exact >= lo) & (exact <= hi)
    tau = jnp.where(ok, exact, tau)
    return jnp.clip(v - tau, 0.0, cap)


def _block_violation(u: Array, a: Array, cap: Array) -> Array:
    """Largest gain of moving mass from word :math:`w'` (``u > 0``) to word :math:`w`
    (``u < cap``): :math:`\\max a_w - \\min a_{w'}` (0 when none)."""
    can_up = u < cap
    can_down = u > 0
    up = jnp.max(jnp.where(can_up, a, -jnp.inf), axis=-1)
    down = jnp.min(jnp.where(can_down, a, jnp.inf), axis=-1)
    return jnp.maximum(up - down, 0.0)


def _frank_wolfe_gap(u: Array, a: Array, r: Array, cap: Array) -> Array:
    """Per VRep :math:`C \\cdot(\\text{sum of the } r_i \\text{ largest } a) - \\langle
    \\mathbf a, \\mathbf u\\rangle` (the best vertex is the most violated output)."""
    ranked = -jnp.sort(-a, axis=-1)
    top = jnp.arange(a.shape[-1])[None, :] < r[:, None]
    return cap * jnp.sum(jnp.where(top, ranked, 0.0), axis=-1) - jnp.sum(a * u, -1)


def mixture_objective(data: StructuredData, u: Array, c) -> Array:
    """Dual objective (9) at mixtures ``u``:
    :math:`\\tfrac12 \\langle B, KB\\rangle - 2\\sum_i \\langle \\mathbf u_i,
    \\mathbf 1 - \\mathbf y_i\\rangle`, :math:`B = C Y - U`."""
    b = c * data.words - u
    return 0.5 * jnp.vdot(b, data.kernel @ b) - 2.0 * jnp.vdot(u, 1.0 - data.words)


@functools.partial(jax.jit, static_argnames=("max_sweeps",))
def fit_emml_exact(
    data: StructuredData,
    c: float = 1.0,
    tolerance: float = 1e-3,
    *,
    max_sweeps: int = 2000,
) -> tuple[ExactState, Array]:
    r"""Solve the dual (9) exactly, with every output of every VRep available.

    **Why a mixture is enough.** On :math:`\operatorname{perm}(\mathbf y_i)` both
    the joint feature map and the Hamming loss are linear in :math:`\bar{\mathbf y}`:
    :math:`\Phi(\mathbf x, \bar{\mathbf y}) = \sum_j \bar y_j \Phi(\mathbf x,
    \mathbf e_j)` and :math:`l(\bar{\mathbf y}, \mathbf y_i) = 2\bar{\mathbf
    y}^\top(\mathbf 1 - \mathbf y_i)`. Count the slack :math:`C - \sum_{\bar{\mathbf
    y}}\mu_{i,\bar{\mathbf y}}` as mass on :math:`\bar{\mathbf y} = \mathbf y_i`
    (it contributes nothing), so VRep :math:`i` has total mass :math:`C`. The dual
    objective depends on :math:`\mu` only through

    .. math::

        \mathbf u_i = \sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf y}} \bar{\mathbf y},
        \qquad B_i = C\mathbf y_i - \mathbf u_i, \qquad \mu^\top S = 2\sum_i
        \mathbf u_i^\top(\mathbf 1 - \mathbf y_i),

    and as :math:`\mu_i` ranges over its scaled simplex, :math:`\mathbf u_i` ranges
    over :math:`C\operatorname{conv}(\operatorname{perm}(\mathbf y_i))`, the scaled
    hypersimplex :math:`C\Delta_i = \{0 \le u_w \le C, \sum_w u_w = r_i C\}` (its
    vertices are exactly the 0/1 vectors with :math:`r_i` ones). So (9) equals

    .. math::

        \min_{\mathbf u_i \in C\Delta_i}\ \tfrac12 \langle B, K B\rangle
        - 2\sum_i \mathbf u_i^\top(\mathbf 1 - \mathbf y_i),

    the same optimum, the same :math:`B` (hence the same word scores), and any
    :math:`\mu` realizing :math:`\mathbf u` (a Carathéodory decomposition, at most
    :math:`W + 1` outputs per VRep) is optimal for (9). Nothing is enumerated and no
    working set can overflow: a VRep whose optimum spreads its mass over all its wrong
    words simply has all of them in the support of :math:`\mathbf u_i`.

    **Algorithm.** Block Gauss--Seidel over VReps with *exact* block minimization. In
    block :math:`i` the Hessian is :math:`k_{ii} I`, so the block minimizer is one
    projection, :math:`\mathbf u_i \leftarrow \Pi_{C\Delta_i}(\mathbf u_i + \mathbf
    a_i / k_{ii})` with :math:`\mathbf a_i = F_i + 2(\mathbf 1 - \mathbf y_i)`, the
    loss-augmented scores (minus the gradient), computed by
    :func:`project_capped_simplex`. Every step is an exact block minimization, so
    the objective never increases, and block coordinate descent on a convex QP with
    separable constraints converges to the optimum (Luo & Tseng 1992). :math:`F = KB`
    is recomputed at every sweep's start, :math:`F \mathrel{+}= k_{:,i}\Delta B_i`
    within it.

    **KKT / stopping.** :math:`\mathbf u_i` is block-optimal iff it maximizes
    :math:`\langle\mathbf a_i, \cdot\rangle` over :math:`C\Delta_i` — the KKT
    conditions (10) of (9) in mixture form (every output carrying mass is a most
    violated one). Its violation is the maximal violating pair of words,
    :math:`\max_{u_w < C} a_w - \min_{u_{w'} > 0} a_{w'}` (the gain per unit mass of
    swapping :math:`w'` for :math:`w` in an output of VRep :math:`i`); the solve stops
    when a whole sweep finds every VRep within ``tolerance`` (nothing then moves). The
    Frank--Wolfe gap :math:`\sum_i (C\cdot\text{top-}r_i(\mathbf a_i) - \langle
    \mathbf a_i, \mathbf u_i\rangle)` bounds objective :math:`-` optimum and is
    reported.

    Parameters
    ----------
    data : StructuredData
        ``kernel`` positive semi-definite with a positive diagonal.
    c, tolerance : float
        :math:`C` and the KKT tolerance in loss units (traced).
    max_sweeps : int
        Static cap on block sweeps.

    Returns
    -------
    state : ExactState
    objectives : Float[Array, "max_sweeps"]
        Dual objective after each sweep (NaN past ``state.sweeps``).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> y = jnp.array([[1., 0., 0.], [0., 1., 0.]])
    >>> state, _ = fit_emml_exact(StructuredData(jnp.eye(2), y), c=1.0)
    >>> bool(state.converged)
    True
    """
    kernel, words = data.kernel, data.words
    n, w = words.shape
    dtype = kernel.dtype
    c = jnp.asarray(c, dtype)
    tolerance = jnp.asarray(tolerance, dtype)
    r = jnp.sum(words, axis=-1)
    diag = jnp.maximum(jnp.diag(kernel), jnp.finfo(dtype).tiny)
    penalty = 2.0 * (1.0 - words)

    def visit(i, carry):
        u, scores, worst = carry
        a_i = scores[i] + penalty[i]
        gap = _block_violation(u[i], a_i, c)

        def update(args):
            u, scores = args
            new = project_capped_simplex(u[i] + a_i / diag[i], r[i] * c, c)
            db = u[i] - new  # B_i = C y_i - u_i
            return u.at[i].set(new), scores + kernel[:, i, None] * db[None, :]

        u, scores = jax.lax.cond(gap > tolerance, update, lambda x: x, (u, scores))
        return u, scores, jnp.maximum(worst, gap)

    def cond(carry):
        _, _, worst, sweeps, _ = carry
        return (worst > tolerance) & (sweeps < max_sweeps)

    def sweep(carry):
        u, _, _, sweeps, trace = carry
        scores = kernel @ (c * words - u)
        u, scores, worst = jax.lax.fori_loop(
            0, n, visit, (u, scores, jnp.zeros((), dtype))
        )
        trace = trace.at[sweeps].set(mixture_objective(data, u, c))
        return u, scores, worst, sweeps + 1, trace

    u0 = c * words  # mu = 0: all mass on the slack
    init_carry = (
        u0,
        jnp.zeros((n, w), dtype),
        jnp.asarray(jnp.inf, dtype),
        jnp.zeros((), jnp.int32),
        jnp.full((max_sweeps,), jnp.nan, dtype),
    )
    u, _, _, sweeps, trace = jax.lax.while_loop(cond, sweep, init_carry)
    coef = c * words - u
    scores = kernel @ coef
    a = scores + penalty
    violation = jnp.max(_block_violation(u, a, c))
    fw_gap = jnp.sum(_frank_wolfe_gap(u, a, r, c))
    state = ExactState(
        mixtures=u,
        coefficients=coef,
        scores=scores,
        objective=mixture_objective(data, u, c),
        sweeps=sweeps,
        max_violation=violation,
        duality_gap=fw_gap,
        converged=violation <= tolerance,
    )
    return state, trace
