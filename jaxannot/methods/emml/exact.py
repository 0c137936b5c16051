r"""The exact EMML solver: the dual (9) of Guo et al. (2016) over per-VRep mixtures.

The dual objective and the loss are linear in :math:`\bar{\mathbf y}`, so VRep
:math:`i`'s multipliers enter only through their mixture :math:`\mathbf u_i =
\sum_{\bar{\mathbf y}} \mu_{i,\bar{\mathbf y}}\bar{\mathbf y}`, a point of the
capped simplex :math:`\{0 \le \mathbf u \le C, \sum_w u_w = r_i C\}`. A
spectral projected gradient (every VRep at once), then block Gauss--Seidel over VReps,
both with exact Euclidean projections onto that set
(:func:`~jaxannot.methods.emml.capped_simplex.project_capped_simplex`), solve the dual
with no working set (no cap on the active constraints, unlike Algorithm 1 of
:mod:`.emml`), and report the KKT violation, Frank--Wolfe duality gap and whether it
converged.

References
----------
Z. Guo, Z. Zhang, E. P. Xing, C. Faloutsos. Multimodal Data Mining in a Multimedia
Database Based on Structured Max Margin Learning. ACM TKDD 10(3), 2016 (Section 3).
Z.-Q. Luo, P. Tseng. On the convergence of the coordinate descent method for convex
differentiable minimization. J. Optim. Theory Appl. 72(1):7--35, 1992.
W. Wang, C. Lu. Projection onto the capped simplex. arXiv:1503.01002, 2015.
J. Barzilai, J. M. Borwein. Two-point step size gradient methods. IMA J. Numer. Anal.
8(1):141--148, 1988.
L. Grippo, F. Lampariello, S. Lucidi. A nonmonotone line search technique for
Newton's method. SIAM J. Numer. Anal. 23(4):707--716, 1986.
E. G. Birgin, J. M. Martínez, M. Raydan. Nonmonotone spectral projected gradient
methods on convex sets. SIAM J. Optim. 10(4):1196--1211, 2000.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxannot.methods.emml.capped_simplex import project_capped_simplex
from jaxannot.methods.emml.structured_output import StructuredData
from jaxannot.runtime.progress import run_until_stopped
from jaxannot.types import Array

#: VReps per blocked score update of :func:`fit_emml_exact`: the fastest of 1, 16,
#: 64 and 256 at 2000 and 3000 VReps on two CPU cores
#: (``benchmarks/scale/emml_exact_blocks.py``).
SCORE_BLOCK = 64
#: KKT violation (loss units) at which :func:`fit_emml_exact` hands the projected
#: gradient's point to the block sweeps (Corel5k, 3000 VReps: 818 gradient steps
#: and 46 sweeps to 0.001, against 1707 gradient steps alone or over 3000 sweeps
#: alone; ``benchmarks/scale/emml_exact_solver.py`` and ``docs/emml.md``).
HANDOFF = 0.02

__all__ = [
    "ExactState",
    "fit_emml_exact",
    "mixture_objective",
    "uncoupled_mixtures",
    "mixture_state",
    "projected_gradient",
]


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
    gradient_steps : Int[Array, ""]
        Projected-gradient steps run before the sweeps (see :func:`fit_emml_exact`).
    """

    mixtures: Array
    coefficients: Array
    scores: Array
    objective: Array
    sweeps: Array
    max_violation: Array
    duality_gap: Array
    converged: Array
    gradient_steps: Array | int = 0


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


def mixture_objective(data: StructuredData, u: Array, c: float | Array) -> Array:
    """Dual objective (9) at mixtures ``u``:
    :math:`\\tfrac12 \\langle B, KB\\rangle - 2\\sum_i \\langle \\mathbf u_i,
    \\mathbf 1 - \\mathbf y_i\\rangle`, :math:`B = C Y - U`."""
    b = c * data.words - u
    return 0.5 * jnp.vdot(b, data.kernel @ b) - 2.0 * jnp.vdot(u, 1.0 - data.words)


class _Padded(NamedTuple):
    """The problem padded with empty VReps to whole blocks (never visited)."""

    kernel: Array
    words: Array
    sizes: Array  # r_i, the words of each VRep
    diag: Array  # k_ii, floored at the smallest positive number
    penalty: Array  # 2 (1 - y_i), the loss part of a_i
    real: Array  # False on the padded VReps


def _pad(data: StructuredData, total: int) -> _Padded:
    """``data`` padded to ``total`` VReps."""
    kernel, words = data.kernel, data.words
    n = words.shape[0]
    pad = total - n
    padded_kernel = jnp.pad(kernel, ((0, pad), (0, pad)))
    padded_words = jnp.pad(words, ((0, pad), (0, 0)))
    return _Padded(
        kernel=padded_kernel,
        words=padded_words,
        sizes=jnp.sum(padded_words, axis=-1),
        diag=jnp.maximum(jnp.diag(padded_kernel), jnp.finfo(kernel.dtype).tiny),
        penalty=2.0 * (1.0 - padded_words),
        real=jnp.arange(total) < n,
    )


def _visit_block(b, carry, *, problem: _Padded, block: int, c, tolerance):
    """Visit block ``b`` of :func:`fit_emml_exact`'s sweep: one projection per VRep
    whose KKT violation exceeds ``tolerance``, the block's rows of :math:`F` updated
    after each, every row once at the end. ``carry = (u, F, worst violation)``."""
    padded_kernel, penalty, real = problem.kernel, problem.penalty, problem.real
    diag, r = problem.diag, problem.sizes
    u, scores, worst = carry
    start = b * block
    columns = jax.lax.dynamic_slice_in_dim(padded_kernel, start, block, axis=1)
    within = jax.lax.dynamic_slice_in_dim(columns, start, block, axis=0)
    scores_b = jax.lax.dynamic_slice_in_dim(scores, start, block)
    u_b = jax.lax.dynamic_slice_in_dim(u, start, block)

    def visit(j, carry):
        u_b, scores_b, steps, worst = carry
        i = start + j
        a_i = scores_b[j] + penalty[i]
        gap = jnp.where(real[i], _block_violation(u_b[j], a_i, c), 0.0)

        def update(args):
            u_b, scores_b, steps = args
            new = project_capped_simplex(u_b[j] + a_i / diag[i], r[i] * c, c)
            db = u_b[j] - new  # B_i = C y_i - u_i
            return (
                u_b.at[j].set(new),
                scores_b + within[:, j, None] * db[None, :],
                steps.at[j].set(db),
            )

        u_b, scores_b, steps = jax.lax.cond(
            gap > tolerance, update, lambda x: x, (u_b, scores_b, steps)
        )
        return u_b, scores_b, steps, jnp.maximum(worst, gap)

    steps = jnp.zeros((block, problem.words.shape[1]), padded_kernel.dtype)
    u_b, _, steps, worst = jax.lax.fori_loop(
        0, block, visit, (u_b, scores_b, steps, worst)
    )
    u = jax.lax.dynamic_update_slice_in_dim(u, u_b, start, axis=0)
    return u, scores + columns @ steps, worst


#: Line-search memory :math:`M` of :func:`projected_gradient` (Grippo, Lampariello
#: & Lucidi's non-monotone rule; 10 is Birgin, Martínez & Raydan's choice).
MEMORY = 10
#: Sufficient-decrease fraction :math:`\sigma` of the non-monotone rule.
SUFFICIENT = 1e-4


class _GradientCarry(NamedTuple):
    u: Array  # the iterate
    scores: Array  # F = K (C Y - u), carried
    objective: Array  # the dual at u, carried
    step: Array  # the Barzilai--Borwein step alpha
    memory: Array  # the last MEMORY objectives
    violation: Array
    stopped: Array  # violation at most the handoff


def _gradient_step(
    t, carry: _GradientCarry, *, data, penalty, sizes, c, bounds, handoff
) -> tuple[_GradientCarry, Array]:
    """One step of :func:`projected_gradient`; its info is the rule's reference
    value after the step."""
    del t
    kernel = data.kernel
    a = carry.scores + penalty  # minus the gradient
    project = jax.vmap(project_capped_simplex, in_axes=(0, 0, None))
    d = project(carry.u + carry.step * a, sizes * c, c) - carry.u
    kd = kernel @ d  # F moves by -lambda K d
    slope = -jnp.vdot(a, d)  # <gradient, d> <= 0
    curvature = jnp.maximum(jnp.vdot(d, kd), 0.0)  # <d, K d>
    reference = jnp.max(carry.memory)
    full = carry.objective + slope + 0.5 * curvature
    accept = full <= reference + SUFFICIENT * slope
    exact = -slope / jnp.maximum(curvature, jnp.finfo(a.dtype).tiny)
    lam = jnp.where(accept, 1.0, jnp.clip(exact, 0.0, 1.0))
    u = carry.u + lam * d
    scores = carry.scores - lam * kd
    objective = carry.objective + lam * slope + 0.5 * lam**2 * curvature
    dd = jnp.vdot(d, d)
    bb = jnp.where(curvature > 0, dd / jnp.maximum(curvature, 1e-30), bounds[1])
    memory = jnp.roll(carry.memory, 1).at[0].set(objective)
    violation = jnp.max(_block_violation(u, scores + penalty, c))
    new = _GradientCarry(
        u=u,
        scores=scores,
        objective=objective,
        step=jnp.clip(bb, *bounds),
        memory=memory,
        violation=violation,
        stopped=~(violation > handoff),
    )
    return new, jnp.max(memory)


def projected_gradient(
    data: StructuredData, c: float | Array, handoff: float, max_steps: int
) -> tuple[Array, Array, Array]:
    r"""Spectral projected gradient on the dual (9) in mixture form, from
    :math:`\mu = 0`, until the KKT violation is at most ``handoff``.

    Each step projects a Barzilai--Borwein step along the loss-augmented scores,
    :math:`\mathbf d_i = \Pi_{C\Delta_i}(\mathbf u_i + \alpha\mathbf a_i) -
    \mathbf u_i` for every VRep at once, and moves :math:`\mathbf u \leftarrow
    \mathbf u + \lambda\mathbf d`: :math:`\lambda = 1` when the objective there
    is at most the largest of the last :data:`MEMORY` objectives plus
    :math:`\sigma\lambda\langle\nabla, \mathbf d\rangle` (Grippo, Lampariello
    & Lucidi's non-monotone rule), else the exact minimizer of the quadratic along
    :math:`\mathbf d` (clipped to :math:`[0, 1]`). The objective is quadratic, so
    one product :math:`K\mathbf d` per step gives the line search, the new scores
    :math:`F \mathrel{-}= \lambda K\mathbf d` and the next step,
    :math:`\alpha = \langle\mathbf d, \mathbf d\rangle / \langle\mathbf d,
    K\mathbf d\rangle` (Birgin, Martínez & Raydan 2000, SPG2). Unlike the block
    sweeps, whose step along VRep :math:`i` is :math:`1/k_{ii}`, the BB step adapts
    to the kernel's whole spectrum (its top eigenvalue, the near-constant
    direction, is :math:`\sim 0.15 N` for Corel5k's RBF kernel).

    Returns
    -------
    u : Float[Array, "vreps words"]
        The last iterate.
    steps : Int[Array, ""]
        Steps run.
    trace : Float[Array, "max_steps"]
        After each step the largest of the last :data:`MEMORY` objectives (the
        rule's reference value, non-increasing by the rule); NaN past ``steps``.
    """
    dtype = data.kernel.dtype
    penalty = 2.0 * (1.0 - data.words)
    sizes = jnp.sum(data.words, axis=-1)
    u0 = c * data.words  # mu = 0: B = 0, F = 0, objective 0
    bounds = (jnp.asarray(1e-10, dtype), jnp.asarray(1e10, dtype))
    inverse_diag = 1.0 / jnp.maximum(jnp.max(jnp.diag(data.kernel)), bounds[0])
    violation = jnp.max(_block_violation(u0, penalty, c))
    carry = _GradientCarry(
        u=u0,
        scores=jnp.zeros_like(u0),
        objective=jnp.zeros((), dtype),
        step=jnp.clip(inverse_diag, *bounds).astype(dtype),
        memory=jnp.zeros((MEMORY,), dtype),
        violation=violation,
        stopped=~(violation > handoff),
    )
    step = functools.partial(
        _gradient_step,
        data=data,
        penalty=penalty,
        sizes=sizes,
        c=c,
        bounds=bounds,
        handoff=handoff,
    )
    carry, trace, steps = run_until_stopped(step, carry, max_steps)
    return carry.u, steps, trace


class _SweepCarry(NamedTuple):
    """:func:`fit_emml_exact`'s carry over sweeps: the mixtures and whether the last
    sweep's largest violation is at most the tolerance."""

    u: Array
    stopped: Array


def fit_emml_exact(
    data: StructuredData,
    c: float = 1.0,
    tolerance: float = 1e-3,
    *,
    max_sweeps: int = 2000,
    block: int = SCORE_BLOCK,
    handoff: float = HANDOFF,
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

    **Algorithm.** Two phases. First :func:`projected_gradient` (spectral projected
    gradient, every VRep at once) until the KKT violation is at most ``handoff``;
    then, from its point, block Gauss--Seidel as below until it is at most
    ``tolerance``. The block sweeps' step along VRep :math:`i` is :math:`1/k_{ii}`,
    so on a wide RBF kernel, whose top eigenvalue (the near-constant direction)
    is a large multiple of the diagonal, they creep: on Corel5k at 3000 VReps the
    sweeps alone stopped at their cap of 3000 with a violation of 0.09. The
    gradient phase's Barzilai--Borwein steps follow the whole spectrum and reach
    0.02 in 818 steps; from there the sweeps, quick to settle which words carry
    mass, reach 0.001 in 46 (the gradient alone took 1707 steps). Both phases
    cost one product with :math:`K` per step or sweep; ``max_sweeps`` caps their
    sum.

    **Block sweeps.** Block Gauss--Seidel over VReps with *exact* block minimization. In
    block :math:`i` the Hessian is :math:`k_{ii} I`, so the block minimizer is one
    projection, :math:`\mathbf u_i \leftarrow \Pi_{C\Delta_i}(\mathbf u_i + \mathbf
    a_i / k_{ii})` with :math:`\mathbf a_i = F_i + 2(\mathbf 1 - \mathbf y_i)`, the
    loss-augmented scores (minus the gradient), computed by
    :func:`~jaxannot.methods.emml.capped_simplex.project_capped_simplex`. Every step
    is an exact block minimization, so the objective never increases, and block
    coordinate descent on a convex QP with separable constraints converges to the
    optimum (Luo & Tseng 1992). :math:`F = KB` is recomputed at every sweep's start,
    :math:`F \mathrel{+}= k_{:,i}\Delta B_i` within it.

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

    **Blocked score updates.** Visiting VRep :math:`i` needs only row :math:`i` of
    :math:`F`. The VReps are visited in the same order in blocks of ``block``: within
    a block only the block's rows of :math:`F` follow each step (:math:`F_b
    \mathrel{+}= K_{b,i}\Delta B_i`), and once per block every row takes the
    block's steps in one product, :math:`F \mathrel{+}= K_{:,b}\,\Delta B_b`. The
    iterates are those of the one-VRep-at-a-time updates (``block = 1``) up to
    rounding, while the :math:`O(N^2 W)` work per sweep runs as :math:`N/\text{block}`
    matrix products instead of :math:`N` memory-bound rank-one updates of all of
    :math:`F` (Corel5k, 3000 VReps, 374 words, two CPU cores: 110 ms per sweep at
    ``block = 64``, 168 ms at ``block = 1``; ``benchmarks/scale/emml_exact_blocks.py``).
    The objective after each sweep is read off the carried :math:`F`.

    Parameters
    ----------
    data : StructuredData
        ``kernel`` positive semi-definite with a positive diagonal.
    c, tolerance : float
        :math:`C` and the KKT tolerance in loss units (traced).
    max_sweeps : int
        Static cap on gradient steps and block sweeps together.
    block : int
        VReps per score update (static; ``min(block, N)`` is used). Changes only
        the rounding, not the algorithm.
    handoff : float
        KKT violation (loss units) at which the gradient phase hands over to the
        sweeps (traced; at least ``tolerance`` is used); ``inf``: sweeps only, from
        :math:`\mu = 0`.

    Returns
    -------
    state : ExactState
    objectives : Float[Array, "max_sweeps"]
        After each gradient step the line search's reference value (the largest of
        the last :data:`MEMORY` objectives), then the dual objective after each
        sweep: non-increasing. NaN past ``state.gradient_steps + state.sweeps``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> y = jnp.array([[1., 0., 0.], [0., 1., 0.]])
    >>> state, _ = fit_emml_exact(StructuredData(jnp.eye(2), y), c=1.0)
    >>> bool(state.converged)
    True
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    # one program however the floats are passed (positional, keyword, default)
    floats = tuple(jnp.asarray(v, data.kernel.dtype) for v in (c, tolerance, handoff))
    return _solve_exact(data, floats, max_sweeps=int(max_sweeps), block=int(block))


@functools.partial(jax.jit, static_argnames=("max_sweeps", "block"))
def _solve_exact(
    data: StructuredData, floats: tuple[Array, ...], max_sweeps: int, block: int
) -> tuple[ExactState, Array]:
    """:func:`fit_emml_exact`'s compiled solve; ``floats`` are ``(c, tolerance,
    handoff)`` in the kernel's dtype."""
    c, tolerance, handoff = floats
    n, dtype = data.words.shape[0], data.kernel.dtype
    block = min(block, n)
    num_blocks = -(-n // block)
    padded = _pad(data, num_blocks * block)
    padded_kernel, padded_words, penalty = padded.kernel, padded.words, padded.penalty
    visit_block = functools.partial(
        _visit_block, problem=padded, block=block, c=c, tolerance=tolerance
    )

    start, steps, gradient_trace = projected_gradient(
        data, c, jnp.maximum(handoff, tolerance), max_sweeps
    )

    def sweep(t: Array, carry: _SweepCarry) -> tuple[_SweepCarry, Array]:
        del t
        scores = padded_kernel @ (c * padded_words - carry.u)
        u, scores, worst = jax.lax.fori_loop(
            0, num_blocks, visit_block, (carry.u, scores, jnp.zeros((), dtype))
        )
        # the dual objective from the carried F = KB (padded rows have B = 0)
        b = c * padded_words - u
        objective = 0.5 * jnp.vdot(b, scores) - jnp.vdot(u, penalty)
        return _SweepCarry(u, ~(worst > tolerance)), objective

    inf = jnp.asarray(jnp.inf, dtype)
    u = jnp.pad(start, ((0, padded_words.shape[0] - n), (0, 0)))
    carry, sweep_trace, sweeps = run_until_stopped(
        sweep, _SweepCarry(u, ~(inf > tolerance)), max_sweeps, budget=max_sweeps - steps
    )
    # the sweeps' objectives after the gradient steps' reference values
    after = jnp.arange(max_sweeps) >= steps
    trace = jnp.where(after, jnp.roll(sweep_trace, steps), gradient_trace)
    state = mixture_state(data, carry.u[:n], c, tolerance, sweeps)
    return state._replace(gradient_steps=steps), trace


def mixture_state(
    data: StructuredData,
    u: Array,
    c: float | Array,
    tolerance: float | Array,
    sweeps: Array | int = 0,
) -> ExactState:
    """The :class:`ExactState` of mixtures ``u``: coefficients, scores, dual
    objective, KKT violation and Frank--Wolfe gap under ``data.kernel``.

    Parameters
    ----------
    data : StructuredData
    u : Float[Array, "vreps words"]
        A feasible point, every row in :math:`C\\Delta_i`.
    c, tolerance : float
        :math:`C` and the KKT tolerance (loss units).
    sweeps : int
        Recorded as :attr:`ExactState.sweeps`.
    """
    dtype = data.kernel.dtype
    c = jnp.asarray(c, dtype)
    coef = c * data.words - u
    scores = data.kernel @ coef
    a = scores + 2.0 * (1.0 - data.words)
    violation = jnp.max(_block_violation(u, a, c))
    return ExactState(
        mixtures=u,
        coefficients=coef,
        scores=scores,
        objective=mixture_objective(data, u, c),
        sweeps=jnp.asarray(sweeps, jnp.int32),
        max_violation=violation,
        duality_gap=jnp.sum(_frank_wolfe_gap(u, a, jnp.sum(data.words, -1), c)),
        converged=violation <= tolerance,
    )


def uncoupled_mixtures(words: Array, c: float | Array, diagonal: Array) -> Array:
    r"""The optimum of the dual (9) when the kernel is diagonal: no solve.

    With :math:`K = \operatorname{diag}(d)` the VReps decouple. By symmetry VRep
    :math:`i` (:math:`r_i` of :math:`W` words) moves the same mass :math:`s` off each
    true word and spreads it evenly over its :math:`W - r_i` wrong words:
    :math:`B_i = s\,(\mathbf y_i - \tfrac{r_i}{W - r_i}(\mathbf 1 - \mathbf y_i))`,
    objective :math:`\tfrac12 d_i r_i s^2 W / (W - r_i) - 2 r_i s`, minimized over
    :math:`0 \le s \le \min(C, C (W - r_i)/r_i)` (both caps of
    :math:`C\Delta_i`) at

    .. math::

        s^* = \min\Big(\frac{2 (W - r_i)}{d_i W},\ C,\
        \frac{C (W - r_i)}{r_i}\Big).

    With :math:`C = 1`, :math:`d_i = 1` and :math:`r_i \le W/2`, :math:`B = Y -
    \tfrac{r}{W - r}(1 - Y)`. Under a non-diagonal kernel this point is feasible
    but not optimal; :func:`mixture_state` says how far it is (KKT violation,
    duality gap).

    Parameters
    ----------
    words : Float[Array, "vreps words"]
        0/1 word vectors, each with at least one word and one wrong word.
    c : float
        :math:`C`.
    diagonal : Float[Array, "vreps"]
        :math:`d_i = k_{ii} > 0`.

    Returns
    -------
    u : Float[Array, "vreps words"]
        The mixtures :math:`\mathbf u_i = C\mathbf y_i - B_i`.
    """
    w = words.shape[-1]
    r = jnp.sum(words, axis=-1)
    wrong = jnp.maximum(w - r, 1.0)
    s = jnp.minimum(jnp.minimum(2.0 * wrong / (diagonal * w), c), c * wrong / r)
    coef = s[:, None] * (words - (r / wrong)[:, None] * (1.0 - words))
    return c * words - coef
